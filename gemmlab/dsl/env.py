"""Import the CuTe DSL once, with gemmlab's settings in place first.

The DSL reads some settings from the environment (its arch, its file cache), so they
must be set before ``import cutlass``. Everything that touches the DSL goes through
:func:`load` so a missing or broken install becomes one actionable ToolchainError.
"""
from __future__ import annotations

import functools
import importlib.metadata
import os
from types import ModuleType

from ..errors import ToolchainError

#: The arch used when nothing else says which: only the ``cute.compile`` option picks the
#: real target, but the DSL wants *some* arch at import on a machine without a GPU.
FALLBACK_ARCH = "sm_90a"
PIN = "nvidia-cutlass-dsl==4.8.1"


def dsl_version() -> str | None:
    """Installed nvidia-cutlass-dsl version, without importing it."""
    try:
        return importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        return None


def _prepare_environment() -> None:
    from gemmlab.compiling import cache
    from gemmlab.running.gpu import has_gpu

    os.environ.setdefault("CUTE_DSL_CACHE_DIR", str(cache.cache_root() / "dsl" / "file-cache"))
    if not has_gpu():
        # Without a GPU the DSL cannot detect an arch; every gemmlab compile names its
        # target explicitly anyway (--gpu-arch), this only keeps the import quiet.
        os.environ.setdefault("CUTE_DSL_ARCH", FALLBACK_ARCH)


@functools.lru_cache(maxsize=1)
def load() -> tuple[ModuleType, ModuleType]:
    """``(cutlass, cutlass.cute)``, or a ToolchainError that says how to install them."""
    _prepare_environment()
    try:
        import cutlass
        import cutlass.cute as cute
    except ImportError as exc:
        have = dsl_version()
        hint = (
            f"nvidia-cutlass-dsl {have} is installed but its `cutlass` package does not import; "
            "if you installed with `pip --target DIR`, add DIR/nvidia_cutlass_dsl/dsl_packages to PYTHONPATH."
            if have else f"install it with `pip install {PIN}`."
        )
        raise ToolchainError(f"The CuTe DSL is not usable here ({exc}): {hint}") from None
    except Exception as exc:  # the DSL initialises native libraries at import
        raise ToolchainError(
            f"The CuTe DSL failed to initialise: {type(exc).__name__}: {exc}. "
            f"Reinstall it with `pip install --force-reinstall {PIN}` and run `gemmlab doctor`."
        ) from None
    return cutlass, cute


@functools.lru_cache(maxsize=1)
def load_runtime_library() -> None:
    """Load the DSL's runtime library into this process with its names visible to later loads.

    The DSL's object writer (``export_to_c``) resolves the runtime's function names in the
    process; the DSL loads the library that way only when it can run what it compiled (on a GPU).
    """
    import ctypes
    from pathlib import Path

    cutlass, _ = load()
    root = Path(cutlass.__file__).resolve().parents[2]
    found = sorted(root.glob("cu*/lib/libcute_dsl_runtime.so"))
    if not found:
        raise ToolchainError(f"The CuTe DSL's runtime library (libcute_dsl_runtime.so) is not under {root}: "
                             f"reinstall it with `pip install --force-reinstall {PIN}`.")
    ctypes.CDLL(str(found[0]), mode=ctypes.RTLD_GLOBAL)
