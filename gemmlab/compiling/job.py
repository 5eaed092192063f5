"""What one compile is asked to do, checked before any work: a bad arch, a missing kernel name or
include folder is a message in milliseconds, not after a 20 s compile or in a child process."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from gemmlab.compiling import signature
from gemmlab.errors import CompileError

DEFAULT_FILENAME = "kernel.cu"
DEFAULT_STD = "c++17"
_ARCH = re.compile(r"^(sm|compute)_(\d{2,3})([af]?)$")


@dataclass(frozen=True)
class CompileJob:
    """One kernel of one source under one set of options; picklable, so a worker process can run it."""

    source: str
    name: str
    arch: str
    options: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()  # the student's folders, absolute
    std: str = DEFAULT_STD
    filename: str = DEFAULT_FILENAME


def check_arch(arch: str | None) -> str:
    """``arch`` as NVRTC wants it; None means this machine's GPU (NoGPUError without one says to pass arch=)."""
    if arch is None:
        from gemmlab.running.gpu import current_arch

        return current_arch()
    arch = str(arch).strip()
    if not _ARCH.match(arch):
        raise CompileError(
            f"arch={arch!r} is not a GPU target NVRTC knows. Use e.g. 'sm_80' (A100), 'sm_90a' (H100), "
            "'sm_100a' (B200), or 'compute_90a' for PTX only."
        )
    return arch


def resolve_dirs(include_dirs: Sequence[str | Path]) -> tuple[str, ...]:
    """The student's include folders as absolute paths (the cache key and the compile see the same ones)."""
    return tuple(str(Path(d).expanduser().resolve()) for d in include_dirs)


def make_job(source: str, name: str, arch: str | None, options: Sequence[str] = (),
             include_dirs: Sequence[str | Path] = (), std: str = DEFAULT_STD,
             filename: str = DEFAULT_FILENAME) -> CompileJob:
    """A checked :class:`CompileJob`; CompileError (or NoGPUError for ``arch=None``) says what to fix."""
    if not isinstance(source, str) or not source.strip():
        raise CompileError("The kernel source is empty: pass the CUDA C++ text of your kernel as a string.")
    name = (name or "").strip()
    if not name:
        raise CompileError("Give the name of the __global__ function to compile, e.g. name='gemm'.")
    job = CompileJob(source, name, check_arch(arch), tuple(str(o) for o in options), resolve_dirs(include_dirs),
                     std, filename or DEFAULT_FILENAME)
    for folder in job.include_dirs:
        if not Path(folder).is_dir():
            raise CompileError(f"include directory {folder!r} does not exist.")
    find_declaration(source, name)
    return job


def find_declaration(source: str, name: str) -> signature.KernelDecl:
    """The kernel's declaration, or a CompileError listing the kernels that are there."""
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
