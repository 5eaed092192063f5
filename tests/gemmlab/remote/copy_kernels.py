"""Copy and transpose kernels as notebooks 01-03 launch them (raw CUDA; they compile for sm_90a without a GPU)."""
from __future__ import annotations

import math
from typing import Any, Callable

import gemmlab

#: dst = src (or srcᵀ with TRANSPOSE defined), float, one thread per element, 32 × 8 blocks over 32 × 32 tiles;
#: with WHO defined it takes a third tensor, who[r, c] = the thread's index in its block (with WHO_IF_GIVEN too, only
#: where who is not null). SKIP_LAST leaves the last tile column unwritten.
COPY_SOURCE = r"""
extern "C" __global__ void NAME(const float* src, float* dst, WHO_PARAM int M, int N)
{
  for (int i = threadIdx.y; i < 32; i += 8) {
    int r = blockIdx.y * 32 + i, c = blockIdx.x * 32 + threadIdx.x;
    if (r >= M || c >= N) continue;
#ifdef SKIP_LAST
    if (blockIdx.x == gridDim.x - 1) continue;
#endif
#ifdef TRANSPOSE
    dst[(size_t)c * M + r] = src[(size_t)r * N + c];
#else
    dst[(size_t)r * N + c] = src[(size_t)r * N + c];
#endif
#ifdef WHO
#ifdef WHO_IF_GIVEN
    if (who != nullptr)
#endif
    who[(size_t)r * N + c] = threadIdx.y * 32 + threadIdx.x;
#endif
  }
}
"""


def copy_kernel(name: str = "copy_tiny", arch: str = "sm_90a", defines: tuple[str, ...] = ()) -> Any:
    source = COPY_SOURCE.replace("NAME", name).replace("WHO_PARAM", "int* who," if "WHO" in defines else "")
    return gemmlab.compile(source, name, arch=arch, options=tuple(f"-D{d}" for d in defines))


def copy_launcher(kernel: Any) -> Callable[..., None]:
    """fn(src, dst) (or fn(src, dst, who) for a kernel built with WHO) as a notebook writes it."""
    def copy(src: Any, dst: Any, *who: Any) -> None:
        M, N = src.shape
        kernel(src, dst, *who, M, N, grid=(math.ceil(N / 32), math.ceil(M / 32)), block=(32, 8))
    return copy


def expected_who(M: int, N: int) -> Any:
    """The thread index copy_launcher's kernel writes at every element."""
    import numpy as np

    r, c = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
    return ((r % 32) % 8 * 32 + c % 32).astype(np.int32)
