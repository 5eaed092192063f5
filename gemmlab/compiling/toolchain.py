"""Find the compiler pieces (NVRTC, CUDA and CuTe headers) and their versions.

Everything comes from pip wheels or an existing CUDA toolkit (``cuda.pathfinder``
looks at both, honouring ``CUDA_HOME``/``CUDA_PATH``). Each missing piece raises a
:class:`ToolchainError` naming the exact package that provides it, because a bare
"cannot open source file" from deep inside a header tells a student nothing.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
from pathlib import Path

from gemmlab.errors import ToolchainError

#: The pins the course is tested with (see pyproject.toml).
NVRTC_PIP = "nvidia-cuda-nvrtc==13.0.88"
RUNTIME_PIP = "nvidia-cuda-runtime==13.0.96"
CRT_PIP = "nvidia-cuda-crt==13.0.88"
CCCL_PIP = "nvidia-cuda-cccl==13.0.85"
CUTLASS_PIP = "nvidia-cutlass==4.2.0.0"
BINDINGS_PIP = "cuda-python>=13.0,<14"


def _pathfinder():
    try:
        import cuda.pathfinder as pathfinder
    except ImportError as exc:  # pragma: no cover - cuda-python is a dependency
        raise ToolchainError(
            f"cuda.pathfinder is missing, so gemmlab cannot find NVRTC or the CUDA headers. "
            f"Install it: pip install '{BINDINGS_PIP}' cuda-pathfinder"
        ) from exc
    return pathfinder


def _import_torch_first() -> None:
    """Import torch, where installed, before libnvrtc is loaded into this process.

    Why: on the H100 machine (torch 2.11+cu130) ``import torch`` once failed inside torch's own
    schema parser ("expected ident but found ')'") after benchmarks/toolchain.py's NVRTC compiles
    (PCH runs included; a plain compile followed by the import did not reproduce it). A notebook
    or ``gemmlab check`` that compiles before it touches torch must not meet that, and torch
    imported first is what every passing run did. Compile-only machines without torch skip this.
    """
    if "torch" in sys.modules or importlib.util.find_spec("torch") is None:
        return
    try:
        import torch  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken torch is reported where torch is needed, not here
        pass


@functools.lru_cache(maxsize=2)
def nvrtc(torch_first: bool = True):
    """The ``cuda.bindings.nvrtc`` module with libnvrtc loaded, or a ToolchainError saying what to install.

    ``torch_first=False`` only in a process that will never import torch (gemmlab's compiler workers):
    importing torch costs seconds of CPU, which every cold compile would pay."""
    try:
        from cuda.bindings import nvrtc as module
    except ImportError as exc:
        raise ToolchainError(
            f"cuda-python (cuda.bindings) is not installed, so kernels cannot be compiled. "
            f"Install it: pip install '{BINDINGS_PIP}'"
        ) from exc
    if torch_first:
        _import_torch_first()
    try:
        _pathfinder().load_nvidia_dynamic_lib("nvrtc")
        err, _major, _minor = module.nvrtcVersion()
    except Exception as exc:  # any loader failure means the same thing to a student
        raise ToolchainError(
            f"NVRTC (libnvrtc, the CUDA runtime compiler) was not found or did not load "
            f"({type(exc).__name__}: {exc}). Install it: pip install {NVRTC_PIP}"
        ) from exc
    if int(err) != 0:
        raise ToolchainError(f"NVRTC loaded but does not answer ({err!r}). Reinstall it: pip install {NVRTC_PIP}")
    return module


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC in use."""
    _err, major, minor = nvrtc().nvrtcVersion()
    return int(major), int(minor)


def _header_dir(libname: str) -> Path | None:
    try:
        found = _pathfinder().find_nvidia_header_directory(libname)
    except Exception:  # pathfinder raises for unknown/absent libs on some versions
        return None
    return Path(found) if found else None


def _on_sys_path(relative: str, marker: str) -> Path | None:
    """A wheel's header folder under any sys.path entry (pip --target installs on PYTHONPATH,
    which pathfinder does not search: it only looks in site-packages)."""
    for entry in sys.path:
        folder = Path(entry or ".") / relative
        if (folder / marker).is_file():
            return folder
    return None


def _toolkit_includes() -> list[Path]:
    """include/ of a CUDA toolkit: $CUDA_PATH/$CUDA_HOME, then the usual install place."""
    roots = []
    try:
        home = _pathfinder().get_cuda_path_or_home()
        if home:
            roots.append(Path(home))
    except Exception:  # an odd environment variable must not break discovery
        pass
    roots.append(Path("/usr/local/cuda"))
    return [r / "include" for r in roots if (r / "include").is_dir()]


@functools.lru_cache(maxsize=1)
def cudart_include() -> Path:
    """CUDA runtime headers (cuda_runtime_api.h...): CuTe includes them."""
    found = _on_sys_path("nvidia/cu13/include", "cuda_runtime_api.h") or _header_dir("cudart")
    if found is None or not (found / "cuda_runtime_api.h").is_file():
        raise ToolchainError(
            "The CUDA runtime headers (cuda_runtime_api.h) were not found; CuTe and <mma.h> need them. "
            f"Install them: pip install {RUNTIME_PIP}"
        )
    return found


@functools.lru_cache(maxsize=1)
def crt_include() -> Path | None:
    """A folder holding crt/mma.h (the WMMA implementation, its own wheel since CUDA 13), or None."""
    candidates: list[Path | None] = []
    try:
        candidates.append(cudart_include())
    except ToolchainError:
        pass
    candidates.append(_on_sys_path("nvidia/cu13/include", "crt/mma.h"))
    candidates += _toolkit_includes()
    for folder in candidates:
        if folder is not None and (folder / "crt" / "mma.h").is_file():
            return folder
    return None


@functools.lru_cache(maxsize=1)
def cccl_include() -> Path:
    """CCCL (libcu++, CUB, Thrust) headers; CUTLASS 4.2 needs CCCL 13.0.x exactly."""
    found = _on_sys_path("nvidia/cu13/include/cccl", "cuda/std/__cccl/version.h") or _header_dir("cccl")
    if found is None or not (found / "cuda" / "std" / "__cccl" / "version.h").is_file():
        raise ToolchainError(
            f"The CCCL headers (cuda/std/...) were not found; CuTe needs them. Install them: pip install {CCCL_PIP}"
        )
    return found


@functools.lru_cache(maxsize=1)
def cute_include() -> Path:
    """CuTe/CUTLASS headers shipped inside the nvidia-cutlass wheel (cutlass_library/source/include)."""
    try:
        import importlib.resources as resources

        folder = Path(str(resources.files("cutlass_library") / "source" / "include"))
    except (ImportError, ModuleNotFoundError, TypeError):
        folder = None
    if folder is None or not (folder / "cute" / "tensor.hpp").is_file():
        raise ToolchainError(
            f"The CuTe/CUTLASS headers (cute/tensor.hpp) were not found. Install them: pip install {CUTLASS_PIP}"
        )
    return folder


def has_crt() -> bool:
    """crt/mma.h is a separate wheel in CUDA 13; without it ``#include <mma.h>`` fails."""
    return crt_include() is not None


def require_crt() -> Path:
    """The folder with crt/mma.h, or a clear error when <mma.h>'s implementation header is missing."""
    folder = crt_include()
    if folder is None:
        raise ToolchainError(
            f"crt/mma.h is missing, so '#include <mma.h>' (WMMA) cannot compile. Install it: pip install {CRT_PIP}"
        )
    return folder


def include_dirs(cute: bool = True) -> list[Path]:
    """The include path for kernels: CuTe (when asked), CCCL, the CUDA runtime, and crt/ if elsewhere."""
    dirs = [cudart_include(), cccl_include()]
    if cute:
        dirs.insert(0, cute_include())
    crt = crt_include()
    if crt is not None and crt not in dirs:
        dirs.append(crt)
    return dirs


def _define(path: Path, name: str) -> int | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    match = re.search(rf"#\s*define\s+{name}\s+(\d+)", text)
    return int(match.group(1)) if match else None


def cccl_version() -> str | None:
    """From the headers themselves, so a CUDA-toolkit CCCL reports its real version too."""
    try:
        code = _define(cccl_include() / "cuda" / "std" / "__cccl" / "version.h", "CCCL_VERSION")
    except ToolchainError:
        return None
    if code is None:
        return None
    return f"{code // 1000000}.{(code // 1000) % 1000}.{code % 1000}"


def cutlass_version() -> str | None:
    try:
        header = cute_include() / "cutlass" / "version.h"
    except ToolchainError:
        return None
    parts = [_define(header, f"CUTLASS_{p}") for p in ("MAJOR", "MINOR", "PATCH")]
    if None in parts:
        return dist_version("nvidia-cutlass")
    return ".".join(str(p) for p in parts)


@functools.lru_cache(maxsize=1)
def _installed() -> dict[str, str]:
    """Versions from the ``*.dist-info`` folder names on sys.path: a few listdir calls, far
    cheaper than importing importlib.metadata (80 ms), which a cache hit cannot afford."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            match = _DIST_INFO.match(name)
            if match:
                found.setdefault(match.group(1).lower().replace("_", "-"), match.group(2))
    return found


_DIST_INFO = re.compile(r"^([A-Za-z0-9_.]+?)-([0-9][^-]*?)\.dist-info$")


def dist_version(dist: str) -> str | None:
    """The installed version of distribution ``dist`` (e.g. "nvidia-cuda-nvrtc"), None if absent."""
    fast = _installed().get(dist.lower().replace("_", "-"))
    if fast:
        return fast
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_compatible() -> None:
    """CUTLASS 4.2's CuTe fails on CCCL 13.3 with 66 cryptic errors: say it in one line instead."""
    cccl = cccl_version()
    cutlass = cutlass_version()
    if cccl and cutlass and cutlass.startswith("4.2") and not cccl.startswith("3.0"):
        raise ToolchainError(
            f"CUTLASS {cutlass} needs the CCCL that ships with CUDA 13.0 (CCCL 3.0.x), but CCCL {cccl} "
            f"is installed, and CuTe headers will not compile with it. Fix: pip install {CCCL_PIP}"
        )


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str | None]:
    """Versions of everything that changes the compiled code: part of every cache key, shown by doctor."""
    try:
        major, minor = nvrtc_version()
        nvrtc_v: str | None = f"{major}.{minor}"
    except ToolchainError:
        nvrtc_v = None
    return {
        "nvrtc": nvrtc_v,
        "nvrtc_wheel": dist_version("nvidia-cuda-nvrtc"),
        "cutlass": cutlass_version(),
        "cccl": cccl_version(),
        "cuda_bindings": dist_version("cuda-bindings") or dist_version("cuda-python"),
    }


@functools.lru_cache(maxsize=1)
def fingerprint() -> dict[str, str | None]:
    """A cheap stand-in for :func:`versions` in cache keys: wheel metadata only (milliseconds).

    Loading NVRTC just to learn its version would cost a cache hit 0.1 s; the wheels'
    versions say the same thing. Only where a piece comes from a CUDA toolkit instead
    of a wheel does this fall back to asking the library and the headers.
    """
    found = {
        "nvrtc": dist_version("nvidia-cuda-nvrtc"),
        "cccl": dist_version("nvidia-cuda-cccl"),
        "cutlass": dist_version("nvidia-cutlass"),
        "runtime": dist_version("nvidia-cuda-runtime"),
        "crt": dist_version("nvidia-cuda-crt"),
        "cuda_bindings": dist_version("cuda-bindings") or dist_version("cuda-python"),
    }
    if found["nvrtc"] is None or found["cccl"] is None or found["cutlass"] is None:
        slow = versions()
        for key in ("nvrtc", "cccl", "cutlass"):
            found[key] = found[key] or slow[key]
        found["cuda_home"] = str(_pathfinder().get_cuda_path_or_home())
    return found
