"""GPU ground truth: CuTe C++ (compiled with gemmlab.compile, run on the GPU) writes the
coordinates every thread owns under TiledMMA / TiledCopy / local_partition / local_tile
partitions of identity tensors; gemmlab.layout must predict every one of them.

Run on a GPU machine:  pytest -m gpu tests/test_gpu_layout.py
The kernel source is tests/kernels/layout_truth.cu (one kernel, one ~15-45 s compile).
"""
from __future__ import annotations


import numpy as np
import pytest

import gemmlab.layout as L

from tests.support import KERNELS  # noqa: E402

KERNEL = KERNELS / "layout_truth.cu"
NTHR, STRIDE = 128, 1024


def _ident(m: int, n: int) -> L.Tensor:
    return L.make_identity_tensor((m, n))


def _sections():
    """Section number -> (what, function of thread id -> gemmlab partition). Mirrors the .cu file."""
    mma1 = L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), (32, 32, 16))
    mma2 = L.make_tiled_mma("SM80_16x8x8_F32F16F16F32_TN", (4, 1, 1),
                            (64, L.Layout((8, 2, 2), (1, 16, 8)), 8))
    mma3 = L.make_tiled_mma("UniversalFMA", (16, 8, 1))
    cp1 = L.make_tiled_copy(L.copy_atom("UniversalCopy", bits=128), L.Layout((32, 4), (4, 1)), L.make_layout((1, 8)))
    cp2 = L.make_tiled_copy(L.copy_atom("SM80_CP_ASYNC_CACHEALWAYS", bits=64), L.Layout((16, 8), (8, 1)),
                            L.make_layout((1, 4)))
    ldA = L.make_tiled_copy_A(L.copy_atom("SM75_U32x4_LDSM_N"), mma1)
    ldB = L.make_tiled_copy_B(L.copy_atom("SM75_U16x8_LDSM_T"), mma1)
    return {
        0: ("mma1 partition_A", lambda t: mma1.get_slice(t).partition_A(_ident(64, 32))),
        1: ("mma1 partition_B", lambda t: mma1.get_slice(t).partition_B(_ident(64, 32))),
        2: ("mma1 partition_C", lambda t: mma1.get_slice(t).partition_C(_ident(64, 64))),
        3: ("mma2 partition_A", lambda t: mma2.get_slice(t).partition_A(_ident(64, 32))),
        4: ("mma2 partition_B", lambda t: mma2.get_slice(t).partition_B(_ident(64, 32))),
        5: ("mma2 partition_C", lambda t: mma2.get_slice(t).partition_C(_ident(64, 64))),
        6: ("fma partition_A", lambda t: mma3.get_slice(t).partition_A(_ident(64, 32))),
        7: ("fma partition_C", lambda t: mma3.get_slice(t).partition_C(_ident(64, 64))),
        8: ("copy128 partition_S", lambda t: cp1.get_slice(t).partition_S(_ident(64, 64))),
        9: ("copy128 partition_D", lambda t: cp1.get_slice(t).partition_D(_ident(64, 64))),
        10: ("cp.async64 partition_S", lambda t: cp2.get_slice(t).partition_S(_ident(64, 32))),
        11: ("ldmatrix A partition_S", lambda t: ldA.get_slice(t).partition_S(_ident(64, 32))),
        12: ("ldmatrix A partition_D", lambda t: ldA.get_slice(t).partition_D(_ident(64, 32))),
        13: ("ldmatrix.trans B partition_S", lambda t: ldB.get_slice(t).partition_S(_ident(64, 32))),
        14: ("local_partition 16x8", lambda t: L.local_partition(_ident(64, 32), L.make_layout((16, 8)), t)),
        15: ("local_partition 32x4 row-major", lambda t: L.local_partition(_ident(64, 64), L.Layout((32, 4), (4, 1)), t)),
        16: ("local_tile", lambda t: L.local_tile(_ident(64, 32), (16, 8), (t % 4, (t // 4) % 4))),
        17: ("local_tile with _", lambda t: L.local_tile(_ident(64, 16), (16, 8), (t % 4, None))),
    }


def _predicted(tensor: L.Tensor) -> np.ndarray:
    vals = tensor.values()
    return vals.reshape(-1, vals.shape[-1], order="F")


@pytest.fixture(scope="module")
def gpu_out() -> np.ndarray:
    import torch

    import gemmlab

    kernel = gemmlab.compile(KERNEL.read_text(), "layout_truth")
    n_sec = len(_sections())
    out = torch.full((n_sec * NTHR * STRIDE,), -7, dtype=torch.int32, device="cuda")
    kernel(out, grid=(1,), block=(NTHR,))
    torch.cuda.synchronize()
    return out.cpu().numpy().reshape(n_sec, NTHR, STRIDE)


@pytest.mark.gpu
@pytest.mark.parametrize("section", sorted(_sections()))
def test_cute_cpp_partitions_match_gemmlab(gpu_out, section):
    what, fn = _sections()[section]
    for tid in range(NTHR):
        want = _predicted(fn(tid))
        row = gpu_out[section, tid]
        n = int(row[0])
        assert n == len(want), f"{what}, thread {tid}: CuTe gives {n} values, gemmlab {len(want)}"
        got = row[1:1 + 2 * n].reshape(n, 2)
        np.testing.assert_array_equal(got, want, err_msg=f"{what}, thread {tid}")


def test_sections_cover_the_kernel_file():
    """CPU check that the Python mirror and the .cu file name the same sections (no GPU needed)."""
    import re

    used = {int(m) for m in re.findall(r"dump\(out, (\d+),", KERNEL.read_text())}
    assert used == set(_sections())
    for sec, (_, fn) in _sections().items():  # every prediction builds and fits the dump buffer
        for tid in (0, 77, 127):
            assert 2 * len(_predicted(fn(tid))) + 1 < STRIDE, sec
