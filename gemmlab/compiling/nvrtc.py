"""One NVRTC compile in this process: a :class:`CompileJob` in, a :class:`Compiled` (or a CompileError
on the student's lines) out. :mod:`gemmlab.compiling.worker` runs it in a child process."""
from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from gemmlab.compiling import diagnostics, resources, signature, toolchain
from gemmlab.compiling.cubin import resources_with_spills
from gemmlab.errors import CompileError, GemmlabError, ToolchainError
from gemmlab.compiling.elf import constant_bank_bytes
from gemmlab.compiling.job import CompileJob, find_declaration
from gemmlab.compiling.record import Compiled

#: Always on: device code by default (no __device__ noise), asserts off, line info for ncu.
BASE_OPTIONS = ("-default-device", "-DNDEBUG", "-lineinfo")
#: C/C++ standard headers NVRTC lacks (<cstdio> for device printf, <cassert>, <cstdint> ...), shipped with gemmlab.
SHIM_INCLUDE = Path(__file__).resolve().parents[1] / "include"
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


def toolchain_dirs(source: str) -> list[Path]:
    """Include folders for what the source includes; each missing piece is a ToolchainError naming its wheel.
    gemmlab's standard-header shims come last, so a real header found earlier always wins."""
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
    dirs.append(SHIM_INCLUDE)
    return dirs


def build_options(arch: str, options: Sequence[str], include_dirs: Sequence[str | Path], std: str) -> list[str]:
    """The full NVRTC command line: target, standard, base options, resource report, includes, the user's own."""
    opts = [f"--gpu-architecture={arch}", f"-std={std}", *BASE_OPTIONS]
    if arch.startswith("sm_"):
        opts.append("--ptxas-options=-v")
    opts += [f"--include-path={d}" for d in include_dirs]
    return opts + list(options)


def compile_job(job: CompileJob) -> Compiled:
    """Run NVRTC on ``job`` here; CompileError on the student's lines, ToolchainError for a broken install."""
    decl = find_declaration(job.source, job.name)
    nvrtc = toolchain.nvrtc(torch_first=False)
    all_dirs = [*job.include_dirs, *(str(d) for d in toolchain_dirs(job.source))]
    opts = build_options(job.arch, job.options, all_dirs, job.std)
    # "&::gemm", not "&gemm": after `using namespace cute;` a plain name also finds cute::gemm.
    expression = f"&{job.name}" if "::" in job.name else f"&::{job.name}"

    start = time.perf_counter()
    err, prog = nvrtc.nvrtcCreateProgram(job.source.encode(), job.filename.encode(), 0, [], [])
    _check(err, "creating the program")
    try:
        _check(nvrtc.nvrtcAddNameExpression(prog, expression.encode()), "registering the kernel name")
        encoded = [o.encode() for o in opts]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        log = _read(nvrtc, prog, nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, text=True).decode(
            errors="replace")
        if int(result) != 0:
            raise _failure(result, log, job, all_dirs)
        ptx = _read(nvrtc, prog, nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, text=True).decode(errors="replace")
        cubin = b""
        if job.arch.startswith("sm_"):
            cubin = _read(nvrtc, prog, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, expression.encode())
        _check(err, f"looking up the compiled name of {job.name!r}")
        lowered_name = lowered.decode() if isinstance(lowered, bytes) else str(lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    seconds = time.perf_counter() - start

    return Compiled(
        name=job.name,
        lowered_name=lowered_name,
        arch=job.arch,
        source=job.source,
        options=tuple(opts),
        ptx=ptx,
        cubin=cubin,
        log=diagnostics.warnings_text(log, job.filename, job.source, include_dirs=all_dirs),
        params=signature.reconcile(decl.params, signature.ptx_param_sizes(ptx, lowered_name)),
        resources=_resources(log, ptx, cubin, lowered_name),
        compile_seconds=seconds,
        cached=False,
    )


def _resources(log: str, ptx: str, cubin: bytes, lowered_name: str) -> resources.Resources:
    """ptxas's report; the constant bank from the cubin where the report leaves it out (ptxas 13 for
    sm_90). Where the log holds no report for the kernel (seen on a GPU host: a process that had not
    loaded torch's CUDA libraries first got an empty log), everything is read from the cubin."""
    if not resources.has_report(log, lowered_name) and cubin:
        read = resources_with_spills(cubin, ptx, lowered_name)
        if read is not None:
            return read[1]
    res = resources.parse(log, ptx, lowered_name)
    if not res.const_bytes and cubin:
        try:
            res = replace(res, const_bytes=constant_bank_bytes(cubin, lowered_name))
        except ValueError:  # not an ELF cubin: keep the report as it is
            pass
    return res


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


def _failure(result, log: str, job: CompileJob, dirs: Sequence[str]) -> GemmlabError:
    """Map a failed compile to the most useful error."""
    errors = [d for d in diagnostics.parse(log, job.filename, job.source, include_dirs=dirs) if d.is_error]
    if errors and all((d.header or "").startswith("__nv_name_map") for d in errors):
        kernels = ", ".join(dict.fromkeys(k.name for k in signature.find_kernels(job.source))) or "none"
        return CompileError(
            f"NVRTC could not resolve the kernel name {job.name!r} ({errors[0].message}): check the spelling "
            f"and, for a template, its template arguments. Kernels in this source: {kernels}.",
            diagnostics=errors,
            log=log,
        )
    if getattr(result, "name", "") == "NVRTC_ERROR_INVALID_OPTION":
        return CompileError(f"NVRTC rejected an option: {log.strip() or 'see the options you passed'}", log=log)
    return diagnostics.compile_error(log, job.filename, job.source, include_dirs=dirs)
