"""On a GPU: a real Nsight Compute readout and real timelines, through the judge on this machine.

Run with ``pytest -m gpu tests/gemmlab/profiling/test_gpu_profiling.py`` on the GPU machine (ncu on PATH or at
/usr/local/cuda/bin/ncu, allowed to read the counters). The readout's numbers are checked where they are
known exactly: a transpose's shared-memory wavefronts against the bank model (03's lesson), a copy's
DRAM bar against a GEMM's, a timeline's marks against the kernel's loop count.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import gemmlab
from gemmlab.seeing import banks
from gemmlab.profiling.errors import ProfilerError, TimelineError

from tests.gemmlab.remote.copy_kernels import copy_kernel, copy_launcher
from tests.gemmlab.remote.launchers import tn_kernel, tn_launcher
from tests.support import KERNELS

pytestmark = pytest.mark.gpu

#: notebook 03's transpose with the row-major index: every column read of the tile is a 32-way conflict
TRANSPOSE = r"""
extern "C" __global__ void transpose32(const float* in, float* out, int M, int N)
{
    __shared__ float tile[32 * 32];
    const int col0 = blockIdx.x * 32, row0 = blockIdx.y * 32, c = threadIdx.x;
    for (int r = threadIdx.y; r < 32; r += 8) tile[r * 32 + c] = in[(row0 + r) * N + col0 + c];
    __syncthreads();
    for (int r = threadIdx.y; r < 32; r += 8) out[(col0 + r) * M + row0 + c] = tile[c * 32 + r];
}
"""


@pytest.fixture(scope="module")
def ncu_here() -> str:
    from gemmlab.profiling import ncu

    try:
        return ncu.find_ncu()
    except ProfilerError as exc:
        pytest.skip(str(exc))


def transpose_fn():
    kernel = gemmlab.compile(TRANSPOSE, "transpose32")

    def transpose(x, out):
        M, N = x.shape
        kernel(x, out, M, N, grid=(N // 32, M // 32), block=(32, 8))
    return transpose


def test_a_transposes_bank_conflicts_are_measured_as_the_model_predicts(ncu_here, tmp_path) -> None:
    import torch

    model = banks.analyze([4 * 32 * lane for lane in range(32)], "ld32")
    readout = gemmlab.profile(transpose_fn(), (1024, 1024), dtype=torch.float32, transpose=True,
                              predicted={"ld": model}, report_dir=tmp_path)
    ld, st = readout.shared_row("ld"), readout.shared_row("st")
    assert readout.source == "measured" and readout.what == "copy" and readout.ncu_version[:4].isdigit()
    assert ld.instructions == (1024 // 32) ** 2 * 32 and st.instructions == ld.instructions
    assert ld.per_instruction(ld.wavefronts) == pytest.approx(32.0) == ld.predicted.wavefronts
    assert ld.per_instruction(ld.conflicts) == pytest.approx(31.0) and st.per_instruction(st.conflicts) == 0
    assert readout.report_file and (tmp_path / readout.report_file.split("/")[-1]).stat().st_size > 1000
    assert readout.occupancy.limiters and readout.stalls and readout.sm_hz > 0.5e9


def test_a_gemm_readout_and_a_copy_readout_differ_where_they_should(ncu_here) -> None:
    import torch

    gemm = gemmlab.profile(tn_launcher(tn_kernel()), (1024, 1024, 512))
    copy = gemmlab.profile(copy_launcher(copy_kernel()), (8192, 8192), dtype=torch.float32)
    assert gemm.tflops and gemm.time_ns and copy.tflops is None
    assert copy.bar("DRAM").percent > gemm.bar("DRAM").percent
    assert copy.top_stalls()[0].key in ("long_scoreboard", "lg_throttle", "drain")
    assert gemm.power is None or gemm.power.watts > 0
    assert "NVIDIA" in gemm.device and gemm.measured_on[:4].isdigit()


def test_a_wrong_kernel_is_not_profiled(ncu_here) -> None:
    with pytest.raises(ProfilerError, match="failed its checked call"):
        gemmlab.profile(_wrong_launcher(), (250, 250, 64))     # edge tiles (wrong in this kernel) included


def _wrong_launcher():
    source = (KERNELS / "planted_edge.cu").read_text()
    kernel = gemmlab.compile(source, "gemm_edge")

    def gemm(A, B, D):
        M, K = A.shape
        N = B.shape[0]
        kernel(A, B, D, M, N, K, grid=(math.ceil(N / 16), math.ceil(M / 16)), block=(16, 16))
    return gemm


def traced_tiled_fn():
    kernel = gemmlab.compile((KERNELS / "traced_tiled.cu").read_text(), "traced_tiled")

    def gemm(A, B, D):
        M, K = A.shape
        N = B.shape[0]
        kernel(A, B, D, M, N, K, grid=(math.ceil(N / 16), math.ceil(M / 16)), block=(16, 16))
    return gemm


def test_a_cpp_kernels_timeline_has_every_mark_of_every_warp() -> None:
    M = N = K = 256
    t = gemmlab.timeline(traced_tiled_fn(), (M, N, K), capacity=128)
    assert t.source == "measured" and t.grid_ctas == (M // 16) * (N // 16) and t.warps_per_cta == 8
    assert t.ctas == list(range(t.grid_ctas)) and not t.full and t.partial_marks == 0
    per_warp = 2 + 4 * (K // 16) + 1                    # BEGIN's START, 4 per k-tile, EPILOGUE, DONE
    assert len(t.records) == t.grid_ctas * 8 * per_warp
    for cta in (0, t.grid_ctas - 1):
        rows, ns = t.cta_nanoseconds(cta)
        assert np.all(np.diff(ns) >= 0) and ns[-1] > 0
        states = [s.state for s in t.spans(cta)]
        assert {"LOAD", "SYNC", "MMA", "EPILOGUE"} <= set(states)
    assert len({sm for sm, *_ in t.sm_spans()}) > 1      # the CTAs ran on several SMs


def test_a_dsl_kernels_timeline() -> None:
    from tests.dsl_kernels import traced_gemm

    t = gemmlab.timeline(gemmlab.dsl.gemm_fn(traced_gemm.traced_gemm), (128, 96, 80), capacity=64)
    per_warp = 1 + 2 * math.ceil(80 / traced_gemm.K_TILE) + 2
    assert t.warps_per_cta == 8 and len(t.records) == t.grid_ctas * 8 * per_warp and t.partial_marks == 0
    assert {"LOAD", "MMA", "EPILOGUE"} <= {s.state for s in t.spans(0)}


def test_a_kernel_without_marks_says_how_to_add_them() -> None:
    with pytest.raises(TimelineError, match="no timeline marks.*GEMMLAB_TRACE_BEGIN"):
        gemmlab.timeline(tn_launcher(tn_kernel()), (128, 128, 64))


def test_a_timeline_of_a_wrong_kernel_is_refused(tmp_path) -> None:
    source = (KERNELS / "traced_tiled.cu").read_text().replace("acc += sA[ty][k] * sB[tx][k];",
                                                                 "acc += sA[ty][k] * sB[tx][k] + 1.0f;")
    kernel = gemmlab.compile(source, "traced_tiled")

    def gemm(A, B, D):
        M, K = A.shape
        N = B.shape[0]
        kernel(A, B, D, M, N, K, grid=(math.ceil(N / 16), math.ceil(M / 16)), block=(16, 16))

    with pytest.raises(ProfilerError, match="failed its checked call"):
        gemmlab.timeline(gemm, (128, 128, 64))
