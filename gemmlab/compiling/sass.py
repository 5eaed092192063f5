"""The machine code (SASS) of a cubin, and what it says about a kernel's wgmma pipeline.

Why: PTX is what we write; SASS is what runs, and some decisions exist only there. The one the
course meets: when ordinary instructions may write a wgmma's accumulator registers while a chain
of wgmmas is in flight, ptxas *serializes* the chain. Each ``HGMMA`` then waits for the previous
one (``gsb0`` on every ``HGMMA``, a ``WARPGROUP.DEPBAR`` after each). ptxas says so only in a
warning that the CuTe DSL does not show; ``wgmma_waits`` reads it off the SASS.

The disassembler comes from the pip wheel ``nvidia-cuda-nvdisasm`` (a dependency) or a CUDA
toolkit, found with ``cuda.pathfinder``: ``nvdisasm`` or else ``cuobjdump``.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import threading
from collections import OrderedDict

from gemmlab.errors import ToolchainError

_HGMMA = re.compile(r"\bHGMMA\.[^;]*;")
#: ptxas marks the local-memory loads and stores it adds for spilled registers "SpillRefill".
_SPILL = re.compile(r'\b(STL|LDL)((?:\.[A-Z0-9]+)*)\s[^;\n]*\(\*"SpillRefill"\*\)')


#: SASS already read in this process, by (tool, its arguments, SHA-256 of the cubin). Why: the checks of one
#: kernel (its techniques, its spills, its wgmma chain) each ask for its SASS, and nvdisasm takes about 0.4 s of
#: CPU for a CuTe GEMM. Only this process's own results are kept, never a file another process could write.
_READ: OrderedDict[tuple[str, tuple[str, ...], bytes], str] = OrderedDict()
_READ_MAX = 16
_READ_LOCK = threading.Lock()   # disassemble may be called from several threads at once


def disassembler() -> tuple[str, list[str]] | None:
    """``(path, arguments before the cubin)`` of the first disassembler found, or None."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:
        return None
    for tool, args in (("nvdisasm", ["-c"]), ("cuobjdump", ["-sass"])):
        try:
            path = find_nvidia_binary_utility(tool)
        except Exception:  # noqa: BLE001 - an odd installation is "not found", not a crash
            path = None
        if path:
            return path, args
    return None


def disassemble(cubin: bytes, name: str) -> str:
    """SASS of ``cubin`` (kernel ``name`` is only for messages); a ToolchainError says how to get a tool."""
    found = disassembler()
    if found is None:
        raise ToolchainError(
            "Showing SASS needs a disassembler: `pip install nvidia-cuda-nvdisasm` (gemmlab's own setup "
            "installs it) or a CUDA toolkit with nvdisasm or cuobjdump. The PTX (.ptx) is available without one.")
    if not cubin:
        raise ToolchainError(f"`{name}` has no cubin (it was compiled to PTX only): no SASS to show.")
    tool, args = found
    key = (tool, tuple(args), hashlib.sha256(cubin).digest())
    with _READ_LOCK:
        known = _READ.get(key)
        if known is not None:
            _READ.move_to_end(key)
            return known
    with tempfile.TemporaryDirectory(prefix="gemmlab-sass-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as handle:
            handle.write(cubin)
        proc = subprocess.run([tool, *args, path], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise ToolchainError(f"{os.path.basename(tool)} could not disassemble `{name}`: {proc.stderr.strip()[:500]}")
    with _READ_LOCK:
        _READ[key] = proc.stdout
        if len(_READ) > _READ_MAX:
            _READ.popitem(last=False)
    return proc.stdout


def wgmma_waits(sass: str) -> tuple[int, int]:
    """``(HGMMA instructions, how many of them wait for their result)``. A pipelined chain waits
    once, at its last HGMMA; a serialized one waits at every HGMMA."""
    hgmma = _HGMMA.findall(sass)
    return len(hgmma), sum("gsb0" in h for h in hgmma)


def spill_bytes(sass: str) -> tuple[int, int]:
    """``(bytes stored, bytes loaded)`` by the spill instructions in ``sass``: the numbers ptxas's own
    report gives ("N bytes spill stores, M bytes spill loads"), for compilers that do not show it."""
    total = {"STL": 0, "LDL": 0}
    for op, modifiers in _SPILL.findall(sass):
        total[op] += 16 if ".128" in modifiers else 8 if ".64" in modifiers else 4
    return total["STL"], total["LDL"]


class WgmmaSerializedWarning(UserWarning):
    """ptxas made every wgmma of a kernel wait for the one before it (see ``warn_if_wgmma_serialized``)."""


def serialized_wgmma_message(ptx: str, cubin: bytes, name: str) -> str | None:
    """A paragraph for the student when ``cubin``'s wgmmas all wait (at least two of them), else None.
    Only kernels whose PTX has wgmma are disassembled, and only where a disassembler exists."""
    if "wgmma.mma_async" not in (ptx or "") or not cubin or disassembler() is None:
        return None
    try:
        total, waiting = wgmma_waits(disassemble(cubin, name))
    except (ToolchainError, OSError, subprocess.SubprocessError):
        return None
    if total < 2 or waiting < total:
        return None
    return (f"`{name}`: ptxas serialized its wgmma instructions: each of the {total} HGMMA in the SASS waits for "
            "its result before the next one issues, so the tensor cores idle between them (25% slower on an H100 "
            "for the course's capstone). The usual cause: ordinary instructions write the accumulator registers "
            "while the wgmma chain runs, e.g. acc.fill(0.0) before each tile. Clear the accumulator with the first "
            "wgmma instead: mma.set(warpgroup.Field.ACCUMULATE, False) before it, True after it. "
            "gemmlab.compiling.sass.wgmma_waits(kernel.sass()) shows (HGMMA count, how many wait).")


def warn_if_wgmma_serialized(ptx: str, cubin: bytes, name: str) -> None:
    """Warn (WgmmaSerializedWarning) when ptxas serialized the kernel's wgmmas; ptxas itself says so only
    in a log the CuTe DSL does not show."""
    import warnings

    message = serialized_wgmma_message(ptx, cubin, name)
    if message:
        warnings.warn(message, WgmmaSerializedWarning, stacklevel=3)


__all__ = ["WgmmaSerializedWarning", "disassemble", "disassembler", "serialized_wgmma_message",
           "spill_bytes", "warn_if_wgmma_serialized", "wgmma_waits"]
