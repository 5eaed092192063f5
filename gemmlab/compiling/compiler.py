"""Compile CUDA C++ / CuTe C++ source with NVRTC into PTX and a cubin, with an on-disk cache.

A CuTe GEMM takes 10-20 s to compile, so an unchanged cell must never pay that twice: a cache
hit is read here, in this process, touching neither NVRTC nor torch. A miss compiles in a worker
process (:mod:`gemmlab.compiling.worker`) under a limit of compiler CPU time, so that a compile that never ends is
stopped and JupyterLab's interrupt stops any compile at once, without losing the kernel's state.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from gemmlab.compiling import ahead
from gemmlab.compiling import store, worker
from gemmlab.compiling.job import DEFAULT_FILENAME, DEFAULT_STD, make_job
from gemmlab.compiling.record import Compiled
from gemmlab.timing.timing_lock import compiling

if TYPE_CHECKING:
    from gemmlab.running.kernel import Kernel

__all__ = ["Compiled", "DEFAULT_FILENAME", "compile", "compile_to"]


def compile(source: str, name: str, arch: str | None = None, options: Sequence[str] = (),
            include_dirs: Sequence[str | Path] = (), cache: bool = True, std: str = DEFAULT_STD,
            filename: str = DEFAULT_FILENAME, timeout: float | None = None) -> "Kernel":
    """Compile ``source`` and return the ``__global__`` function ``name`` as a callable Kernel.

    ``name`` may be a plain kernel name (with or without ``extern "C"``) or a template
    instantiation such as ``"gemm<128>"``. ``arch=None`` targets this machine's GPU;
    give ``arch="sm_90a"`` (or sm_80, sm_100a, ...) to compile without one. ``timeout``:
    seconds of compiler CPU time before a compile is stopped (default: ``gemmlab.set_compile_limit``'s,
    else ``GEMMLAB_COMPILE_TIMEOUT``, else 120); a busy machine's waits do not count.
    """
    from gemmlab.running.kernel import Kernel

    return Kernel(compile_to(source, name, arch, options, include_dirs, cache, std, filename, timeout))


def compile_to(source: str, name: str, arch: str | None = None, options: Sequence[str] = (),
               include_dirs: Sequence[str | Path] = (), use_cache: bool = True, std: str = DEFAULT_STD,
               filename: str = DEFAULT_FILENAME, timeout: float | None = None) -> Compiled:
    """Like :func:`compile` but returns the :class:`Compiled` record (no Kernel, no GPU needed)."""
    job = make_job(source, name, arch, options, include_dirs, std, filename)
    limit = worker.time_limit(timeout)
    entry = store.key(job)
    with compiling():  # CPU work: a grader's timing on this GPU need not wait for it
        hit = None
        if use_cache:
            hit = store.load(entry, source)
            if hit is None and ahead.wait_for(entry, limit):  # compiling in the background: its result
                hit = store.load(entry, source)
        if hit is not None or not use_cache:
            compiled = hit if hit is not None else worker.run(job, limit)
        else:
            with store.claim(entry, limit):  # another process compiling it: wait for its result
                hit = store.load(entry, source)
                compiled = hit if hit is not None else worker.run(job, limit)
                if hit is None:
                    store.save(entry, compiled)
    # Look for serialized wgmma once per compile: here, or at the first use of a background compile
    # (whose own look went to a thread no one reads).
    if ahead.take_background(entry) or hit is None:
        from gemmlab.compiling.sass import warn_if_wgmma_serialized

        warn_if_wgmma_serialized(compiled.ptx, compiled.cubin, compiled.name)
    return compiled
