"""Compile CUDA C++ / CuTe C++ source with NVRTC into PTX and a cubin, with an on-disk cache.

A CuTe GEMM takes 10-20 s to compile, so an unchanged cell must never pay that twice:
results are cached by everything that can change the output (source, kernel name,
arch, options, include directories, toolchain versions), and a hit touches neither
NVRTC nor torch.
"""
from __future__ import annotations

import base64
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from . import ahead, cache, diagnostics, resources, signature, toolchain
from .errors import CompileError, GemmlabError, ToolchainError
from .timing_lock import compiling

if TYPE_CHECKING:
    from .kernel import Kernel

CACHE_KIND = "nvrtc"
CACHE_VERSION = 2  # 2: cubins are no longer cut at trailing zero bytes
DEFAULT_FILENAME = "kernel.cu"

#: Always on: device code by default (no __device__ noise), asserts off, a resource report, line info for ncu.
BASE_OPTIONS = ("-default-device", "-DNDEBUG", "-lineinfo")
_ARCH = re.compile(r"^(sm|compute)_(\d{2,3})([af]?)$")
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


@dataclass(frozen=True)
class Compiled:
    """Everything NVRTC produced for one kernel; what :class:`gemmlab.kernel.Kernel` loads and launches."""

    name: str
    lowered_name: str
    arch: str
    source: str
    options: tuple[str, ...]
    ptx: str
    cubin: bytes
    log: str  # warnings, mapped to the student's lines ('' when clean)
    params: list[signature.Param]
    resources: resources.Resources
    compile_seconds: float
    cached: bool

    def summary(self) -> str:
        """One line: what was built and what it costs (registers, smem, spills, time)."""
        when = "cached" if self.cached else f"compiled in {self.compile_seconds:.1f} s"
        return f"{self.name} [{self.arch}]: {self.resources.summary()}; {when}"


def compile(source: str, name: str, arch: str | None = None, options: Sequence[str] = (),
            include_dirs: Sequence[str] = (), cache: bool = True, std: str = "c++17",
            filename: str = DEFAULT_FILENAME) -> "Kernel":
    """Compile ``source`` and return the ``__global__`` function ``name`` as a callable Kernel.

    ``name`` may be a plain kernel name (with or without ``extern "C"``) or a template
    instantiation such as ``"gemm<128>"``. ``arch=None`` targets this machine's GPU;
    give ``arch="sm_90a"`` (or sm_80, sm_100a, ...) to compile without one.
    """
    from .kernel import Kernel

    return Kernel(compile_to(source, name, arch, options, include_dirs, cache, std, filename))


def _resources(log: str, ptx: str, cubin: bytes, lowered_name: str) -> resources.Resources:
    """ptxas's report; the constant bank from the cubin where the report leaves it out (ptxas 13 for sm_90)."""
    from dataclasses import replace

    from .dsl.cubin import constant_bank_bytes

    res = resources.parse(log, ptx, lowered_name)
    if not res.const_bytes and cubin:
        try:
            res = replace(res, const_bytes=constant_bank_bytes(cubin, lowered_name))
        except ValueError:  # not an ELF cubin: keep the report as it is
            pass
    return res


def compile_to(source: str, name: str, arch: str | None = None, options: Sequence[str] = (),
               include_dirs: Sequence[str] = (), use_cache: bool = True, std: str = "c++17",
               filename: str = DEFAULT_FILENAME) -> Compiled:
    """Like :func:`compile` but returns the :class:`Compiled` record (no Kernel, no GPU needed)."""
    if not isinstance(source, str) or not source.strip():
        raise CompileError("The kernel source is empty: pass the CUDA C++ text of your kernel as a string.")
    name = (name or "").strip()
    if not name:
        raise CompileError("Give the name of the __global__ function to compile, e.g. name='gemm'.")
    arch = _check_arch(arch)
    options = tuple(str(o) for o in options)
    user_dirs = tuple(str(Path(d).expanduser().resolve()) for d in include_dirs)
    for folder in user_dirs:
        if not Path(folder).is_dir():
            raise CompileError(f"include directory {folder!r} does not exist.")

    decl = _find_declaration(source, name)
    key = cache_key(source, name, arch, options, user_dirs, std, filename)
    with compiling():  # CPU work: a grader's timing on this GPU need not wait for it
        hit = None
        if use_cache:
            hit = _load(key, source)
            if hit is None and ahead.wait_for(key):   # compiling in the background: its result, not a second one
                hit = _load(key, source)
        compiled = hit if hit is not None else _nvrtc_compile(source, name, arch, options, user_dirs, std,
                                                               filename, decl)
    if hit is None and use_cache:
        _store(key, compiled)
    # Look for serialized wgmma once per compile: here, or at the first use of a background compile
    # (whose own warning went to a process no one reads).
    if ahead.take_background(key) or hit is None:
        from .sass import warn_if_wgmma_serialized

        warn_if_wgmma_serialized(compiled.ptx, compiled.cubin, compiled.name)
    return compiled


def cache_key(source: str, name: str, arch: str, options: Sequence[str], include_dirs: Sequence[str],
              std: str, filename: str) -> str:
    """The on-disk cache key of one compile: everything that can change what NVRTC produces."""
    user_dirs = tuple(str(Path(d).expanduser().resolve()) for d in include_dirs)
    return cache.key_for(CACHE_KIND, CACHE_VERSION, source, (name or "").strip(), arch, tuple(str(o) for o in options),
                         std, filename, [(d, _dir_identity(d)) for d in user_dirs], toolchain.fingerprint())


def is_cached(key: str) -> bool:
    """Whether a compile with this key is in the on-disk cache."""
    return cache.load(CACHE_KIND, key) is not None


# --------------------------------------------------------------------------- inputs


def _check_arch(arch: str | None) -> str:
    if arch is None:
        from .gpu import current_arch

        return current_arch()  # NoGPUError without a GPU; its message says to pass arch=
    arch = str(arch).strip()
    if not _ARCH.match(arch):
        raise CompileError(
            f"arch={arch!r} is not a GPU target NVRTC knows. Use e.g. 'sm_80' (A100), 'sm_90a' (H100), "
            "'sm_100a' (B200), or 'compute_90a' for PTX only."
        )
    return arch


def _find_declaration(source: str, name: str) -> signature.KernelDecl:
    """The kernel's declaration, or a CompileError listing the kernels that are there (before a 20 s compile)."""
    decl = signature.find_kernel(source, name)
    if decl is None:
        kernels = [k.name for k in signature.find_kernels(source)]
        listing = ", ".join(dict.fromkeys(kernels)) if kernels else "none: declare one with `__global__ void name(...)`"
        raise CompileError(
            f"There is no __global__ kernel named {signature.base_name(name)!r} in this source. "
            f"Kernels found: {listing}."
        )
    if decl.is_template and "<" not in name:
        raise CompileError(
            f"{decl.name!r} is a template kernel: name one instantiation, e.g. name='{decl.name}<128>' "
            "with your template arguments."
        )
    return decl


def _dir_identity(folder: str) -> list:
    """Names, sizes and mtimes of the headers in a user include folder: editing one invalidates the cache."""
    entries = []
    for root, _dirs, files in os.walk(folder):
        for file in sorted(files):
            path = Path(root) / file
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns))
            if len(entries) > 5000:
                return entries
    return entries


def _toolchain_dirs(source: str) -> list[Path]:
    """Include folders for what the source includes; each missing piece is a ToolchainError naming its wheel."""
    includes = _INCLUDE.findall(source)
    wants_cute = any(inc.startswith(("cute/", "cutlass/")) for inc in includes)
    dirs = [toolchain.cudart_include(), toolchain.cccl_include()]
    if wants_cute:
        dirs.insert(0, toolchain.cute_include())
        toolchain.check_compatible()
    else:
        try:  # offered anyway (a header may include CuTe indirectly), but not required
            dirs.insert(0, toolchain.cute_include())
        except ToolchainError:
            pass
    if any(inc in ("mma.h", "crt/mma.h") for inc in includes):
        toolchain.require_crt()
    crt = toolchain.crt_include()
    if crt is not None and crt not in dirs:
        dirs.append(crt)  # the wheel runtime headers without the crt wheel: take crt/ from a CUDA toolkit
    return dirs


def build_options(arch: str, options: Sequence[str], include_dirs: Sequence[str | Path], std: str) -> list[str]:
    """The full NVRTC command line: target, standard, base options, resource report, includes, the user's own."""
    opts = [f"--gpu-architecture={arch}", f"-std={std}", *BASE_OPTIONS]
    if arch.startswith("sm_"):
        opts.append("--ptxas-options=-v")
    opts += [f"--include-path={d}" for d in include_dirs]
    return opts + list(options)


# --------------------------------------------------------------------------- NVRTC


def _check(result, what: str) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise ToolchainError(f"NVRTC failed while {what} ({getattr(err, 'name', err)}). "
                             f"Run `gemmlab doctor` to check the toolchain.")


def _read(nvrtc, prog, size_fn, get_fn, text: bool = False) -> bytes:
    """One NVRTC output buffer. Only text (PTX, logs) loses its terminating NUL: a cubin is an
    ELF image whose last bytes may legitimately be zeros, and cuobjdump rejects a cut one."""
    err, size = size_fn(prog)
    _check(err, "reading its output")
    buf = b" " * size
    _check(get_fn(prog, buf), "reading its output")
    return buf.rstrip(b"\0") if text else buf


def _nvrtc_compile(source: str, name: str, arch: str, options: tuple[str, ...], user_dirs: tuple[str, ...],
                   std: str, filename: str, decl: signature.KernelDecl) -> Compiled:
    nvrtc = toolchain.nvrtc()
    tool_dirs = [str(d) for d in _toolchain_dirs(source)]
    all_dirs = [*user_dirs, *tool_dirs]
    opts = build_options(arch, options, all_dirs, std)
    # "&::gemm", not "&gemm": after `using namespace cute;` a plain name also finds cute::gemm.
    expression = f"&{name}" if "::" in name else f"&::{name}"

    start = time.perf_counter()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), filename.encode(), 0, [], [])
    _check(err, "creating the program")
    try:
        _check(nvrtc.nvrtcAddNameExpression(prog, expression.encode()), "registering the kernel name")
        encoded = [o.encode() for o in opts]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        log = _read(nvrtc, prog, nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, text=True).decode(errors="replace")
        if int(result) != 0:
            raise _failure(result, log, source, name, filename, all_dirs)
        ptx = _read(nvrtc, prog, nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, text=True).decode(errors="replace")
        cubin = b""
        if arch.startswith("sm_"):
            cubin = _read(nvrtc, prog, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, expression.encode())
        _check(err, f"looking up the compiled name of {name!r}")
        lowered_name = lowered.decode() if isinstance(lowered, bytes) else str(lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    seconds = time.perf_counter() - start

    params = signature.reconcile(decl.params, signature.ptx_param_sizes(ptx, lowered_name))
    return Compiled(
        name=name,
        lowered_name=lowered_name,
        arch=arch,
        source=source,
        options=tuple(opts),
        ptx=ptx,
        cubin=cubin,
        log=diagnostics.warnings_text(log, filename, source, include_dirs=all_dirs),
        params=params,
        resources=_resources(log, ptx, cubin, lowered_name),
        compile_seconds=seconds,
        cached=False,
    )


def _failure(result, log: str, source: str, name: str, filename: str, dirs: Sequence[str]) -> GemmlabError:
    """Map a failed compile to the most useful error."""
    errors = [d for d in diagnostics.parse(log, filename, source, include_dirs=dirs) if d.is_error]
    if errors and all((d.header or "").startswith("__nv_name_map") for d in errors):
        kernels = ", ".join(dict.fromkeys(k.name for k in signature.find_kernels(source))) or "none"
        return CompileError(
            f"NVRTC could not resolve the kernel name {name!r} ({errors[0].message}): check the spelling "
            f"and, for a template, its template arguments. Kernels in this source: {kernels}.",
            diagnostics=errors,
            log=log,
        )
    if getattr(result, "name", "") == "NVRTC_ERROR_INVALID_OPTION":
        return CompileError(f"NVRTC rejected an option: {log.strip() or 'see the options you passed'}", log=log)
    return diagnostics.compile_error(log, filename, source, include_dirs=dirs)


# --------------------------------------------------------------------------- cache


def _store(key: str, compiled: Compiled) -> None:
    record = {
        "name": compiled.name,
        "lowered_name": compiled.lowered_name,
        "arch": compiled.arch,
        "options": list(compiled.options),
        "ptx": compiled.ptx,
        "cubin": base64.b64encode(compiled.cubin).decode(),
        "log": compiled.log,
        "params": [p.__dict__ for p in compiled.params],
        "resources": compiled.resources.to_dict(),
        "compile_seconds": compiled.compile_seconds,
    }
    try:
        cache.store(CACHE_KIND, key, json.dumps(record).encode())
    except OSError:
        pass  # a read-only or full disk only costs the next compile its speed


def _load(key: str, source: str) -> Compiled | None:
    raw = cache.load(CACHE_KIND, key)
    if raw is None:
        return None
    try:
        record = json.loads(raw)
        return Compiled(
            name=record["name"],
            lowered_name=record["lowered_name"],
            arch=record["arch"],
            source=source,
            options=tuple(record["options"]),
            ptx=record["ptx"],
            cubin=base64.b64decode(record["cubin"]),
            log=record["log"],
            params=[signature.Param(**p) for p in record["params"]],
            resources=resources.Resources(**record["resources"]),
            compile_seconds=float(record["compile_seconds"]),
            cached=True,
        )
    except (ValueError, KeyError, TypeError):
        return None  # a torn or older entry: compile again
