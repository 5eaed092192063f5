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

import os
import re
import subprocess
import tempfile

from .errors import ToolchainError

_HGMMA = re.compile(r"\bHGMMA\.[^;]*;")


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
    with tempfile.TemporaryDirectory(prefix="gemmlab-sass-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as handle:
            handle.write(cubin)
        proc = subprocess.run([tool, *args, path], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise ToolchainError(f"{os.path.basename(tool)} could not disassemble `{name}`: {proc.stderr.strip()[:500]}")
    return proc.stdout


def wgmma_waits(sass: str) -> tuple[int, int]:
    """``(HGMMA instructions, how many of them wait for their result)``. A pipelined chain waits
    once, at its last HGMMA; a serialized one waits at every HGMMA."""
    hgmma = _HGMMA.findall(sass)
    return len(hgmma), sum("gsb0" in h for h in hgmma)


__all__ = ["disassemble", "disassembler", "wgmma_waits"]
