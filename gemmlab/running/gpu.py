"""Which GPU (if any) this process can use, asked once and in one place.

``GEMMLAB_HIDE_GPU=1`` makes gemmlab behave as on a machine without a GPU (compile-only), so the
no-GPU experience can be tried, and tested, on a GPU machine; :func:`refresh` asks again after
the variable changed.
"""
from __future__ import annotations

import functools
import os

from gemmlab.errors import NoGPUError

#: Set (to anything but 0) to make gemmlab use no GPU even where one exists.
HIDE_ENV = "GEMMLAB_HIDE_GPU"
#: Architectures whose "a" variant unlocks instructions students need (wgmma, tcgen05).
_ARCH_SPECIFIC = {(9, 0): "sm_90a", (10, 0): "sm_100a", (10, 3): "sm_103a"}


@functools.lru_cache(maxsize=1)
def _torch_cuda_state() -> tuple[bool, str]:
    """(usable, reason). Cached: asking CUDA twice costs time and never changes the answer."""
    if os.environ.get(HIDE_ENV, "") not in ("", "0"):
        return False, f"{HIDE_ENV} is set, so gemmlab uses no GPU here."
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False, "PyTorch is not installed (pip install torch)."
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return False, "this PyTorch is a CPU-only build, so it cannot reach a GPU."
        return False, "PyTorch sees no CUDA GPU (no device, or the NVIDIA driver is missing)."
    return True, ""


def refresh() -> None:
    """Forget the cached answer, so the next question asks CUDA (and ``GEMMLAB_HIDE_GPU``) again."""
    _torch_cuda_state.cache_clear()


def has_gpu() -> bool:
    """True when a CUDA GPU is usable through torch."""
    return _torch_cuda_state()[0]


def require_gpu(what: str) -> None:
    """Raise :class:`NoGPUError` naming ``what`` needed the GPU and what still works without one."""
    usable, reason = _torch_cuda_state()
    if not usable:
        raise NoGPUError(
            f"{what} needs a CUDA GPU, but {reason} "
            "Without a GPU you can still compile kernels (give arch=, e.g. arch='sm_90a'), "
            "use gemmlab.layout, gemmlab.seeing.banks and all pictures and widgets. "
            "Run `gemmlab doctor` for details."
        )


def compute_capability(device: int | None = None) -> tuple[int, int]:
    """(major, minor) of the current (or given) GPU."""
    require_gpu("Querying the GPU")
    import torch

    return torch.cuda.get_device_capability(device)


def arch_for_capability(major: int, minor: int) -> str:
    """The NVRTC target for a compute capability: the arch-specific variant where one exists."""
    return _ARCH_SPECIFIC.get((major, minor), f"sm_{major}{minor}")


def current_arch(device: int | None = None) -> str:
    """Target for the current GPU, e.g. 'sm_90a' on an H100."""
    return arch_for_capability(*compute_capability(device))


def device_name(device: int | None = None) -> str:
    """Marketing name of the current GPU, e.g. 'NVIDIA H100 80GB HBM3'."""
    require_gpu("Querying the GPU")
    import torch

    return torch.cuda.get_device_name(device)
