"""The run side on a real GPU: launches, argument checks, check_gemm on real kernels and
planted bugs, bench_gemm, ceilings, sticky errors and hangs (those two in subprocesses,
because they leave the CUDA context unusable or busy).

Run on a GPU machine:  pytest -m gpu tests/test_gpu_core.py -v -s
"""
from __future__ import annotations

import time

import os
import struct
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

from tests.support import ROOT
from tests.support import KERNELS


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _src(name: str) -> str:
    return (KERNELS / name).read_text()


@pytest.fixture(scope="module")
def torch():
    import torch

    return torch


@pytest.fixture(scope="module")
def naive():
    import gemmlab

    return gemmlab.compile(_src("planted_naive.cu"), "gemm_naive")


def naive_launcher(kernel, floor_grid_n: bool = False):
    """A tn GEMM function around a 16x16-thread kernel; ``floor_grid_n`` plants a launcher bug."""

    def fn(A, B, D):
        M, K = A.shape
        N = B.shape[0]
        gx = N // 16 if floor_grid_n else ceil_div(N, 16)
        kernel(A, B, D, M, N, K, grid=(gx, ceil_div(M, 16)), block=(16, 16))

    return fn


# --------------------------------------------------------------------------- launches


def test_naive_kernel_runs_and_matches_torch(torch, naive):
    A = torch.randn(100, 72, device="cuda").half()
    B = torch.randn(50, 72, device="cuda").half()
    D = torch.empty(100, 50, device="cuda", dtype=torch.half)
    naive(A, B, D, 100, 50, 72, grid=(ceil_div(50, 16), ceil_div(100, 16)), block=(16, 16), sync=True)
    ref = A.float() @ B.float().T
    assert ((D.float() - ref).norm() / ref.norm()) < 1e-3


def test_launch_on_a_side_stream_and_check_errors(torch, naive):
    from gemmlab.running.streams import check_errors, synchronize

    A = torch.randn(32, 16, device="cuda").half()
    B = torch.randn(32, 16, device="cuda").half()
    D = torch.zeros(32, 32, device="cuda", dtype=torch.half)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        naive(A, B, D, 32, 32, 16, grid=(2, 2), block=(16, 16))
        synchronize(timeout_s=10)
    naive(A, B, D, 32, 32, 16, grid=(2, 2), block=(16, 16), stream=side)
    side.synchronize()
    check_errors()
    assert torch.allclose(D.float(), A.float() @ B.float().T, atol=1e-1, rtol=1e-2)


def test_argument_errors_on_real_launches(torch, naive):
    from gemmlab.errors import LaunchError

    A = torch.randn(32, 16, device="cuda").half()
    B = torch.randn(32, 16, device="cuda").half()
    D = torch.zeros(32, 32, device="cuda", dtype=torch.half)
    ok = dict(grid=(2, 2), block=(16, 16))
    with pytest.raises(LaunchError, match=r"tensor on the CPU.*A.cuda\(\)"):
        naive(A.cpu(), B, D, 32, 32, 16, **ok)
    with pytest.raises(LaunchError, match=r"argument 2 \('B'\) is `const half\*` \(float16\) but you passed a float32 tensor: use B.half\(\)"):
        naive(A, B.float(), D, 32, 32, 16, **ok)
    with pytest.raises(LaunchError, match=r"not contiguous.*D.contiguous\(\)"):
        naive(A, B, D.T, 32, 32, 16, **ok)
    with pytest.raises(LaunchError, match=r"takes 6 arguments but you passed 5.*gemm_naive\(const half\* A"):
        naive(A, B, D, 32, 32, **ok)
    with pytest.raises(LaunchError, match="is empty"):
        naive(A, B, D, 32, 32, 16, grid=(0, 2), block=(16, 16))
    with pytest.raises(LaunchError, match="at most 1024"):
        naive(A, B, D, 32, 32, 16, grid=1, block=(32, 64))
    with pytest.raises(LaunchError, match="too much"):
        naive(A, B, D, 32, 32, 16, grid=1, block=32, smem=1 << 20)
    with pytest.raises(LaunchError, match="overflows"):
        naive(A, B, D, 2**31, 32, 16, **ok)
    # nothing above launched: the output is untouched and the context is healthy
    assert int(D.count_nonzero()) == 0
    naive(A, B, D, 32, 32, 16, **ok, sync=True)
    assert int(D.count_nonzero()) > 0


def test_dynamic_smem_over_48k_is_opted_in(torch):
    import gemmlab

    src = textwrap.dedent("""
        extern "C" __global__ void smem_sum(float* out, int n)
        {
          extern __shared__ float buf[];
          for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = (float)i;
          __syncthreads();
          if (threadIdx.x == 0) {
            double s = 0.0;  // exact for these integers
            for (int i = 0; i < n; ++i) s += buf[i];
            out[0] = (float)s;
          }
        }
    """)
    k = gemmlab.compile(src, "smem_sum")
    n = 25_000  # 100,000 bytes > 48 KB
    out = torch.zeros(1, device="cuda")
    k(out, n, grid=1, block=256, smem=n * 4, sync=True)
    assert out.item() == pytest.approx(n * (n - 1) / 2, rel=1e-6)
    assert k.max_active_blocks(256, n * 4) >= 1
    assert k.max_active_blocks(256, 0) >= k.max_active_blocks(256, n * 4)


def test_struct_by_value_128_bytes(torch):
    import gemmlab

    src = textwrap.dedent("""
        struct Params { int v[32]; };
        extern "C" __global__ void struct_sum(Params p, long long* out)
        {
          long long s = 0;
          for (int i = 0; i < 32; ++i) s += p.v[i] * (i + 1);
          out[0] = s;
        }
    """)
    k = gemmlab.compile(src, "struct_sum")
    assert k.params[0].kind == "struct" and k.params[0].nbytes == 128
    out = torch.zeros(1, dtype=torch.int64, device="cuda")
    k(struct.pack("<32i", *range(32)), out, grid=1, block=1, sync=True)
    assert out.item() == sum(i * (i + 1) for i in range(32))


def test_scalar_types_reach_the_kernel(torch):
    import gemmlab

    src = textwrap.dedent("""
        #include <cuda_fp16.h>
        extern "C" __global__ void scalars(float* out, float a, double b, half h, long long big, unsigned u, bool f)
        {
          out[0] = a; out[1] = (float)b; out[2] = __half2float(h);
          out[3] = (float)(big >> 32); out[4] = (float)(u >> 16); out[5] = f ? 1.0f : -1.0f;
        }
    """)
    k = gemmlab.compile(src, "scalars")
    out = torch.zeros(6, device="cuda")
    k(out, 1.5, 2.25, 0.75, 5 << 32, 7 << 16, True, grid=1, block=1, sync=True)
    assert out.tolist() == [1.5, 2.25, 0.75, 5.0, 7.0, 1.0]


def test_register_limited_block_size_is_explained(torch):
    import gemmlab
    from gemmlab.errors import LaunchError

    k = gemmlab.compile(_src("cute_gemm.cu"), "gemm")
    limit = k.limits().max_threads_per_block
    assert limit <= 1024
    if limit < 1024:
        A = torch.zeros(128, 64, device="cuda", dtype=torch.half)
        B = torch.zeros(128, 64, device="cuda", dtype=torch.half)
        D = torch.zeros(128, 128, device="cuda", dtype=torch.half)
        with pytest.raises(LaunchError, match=r"can run at most \d+ per block: it"):
            k(A, B, D, 128, 128, 64, grid=1, block=limit + 32)
    sass = k.sass()
    assert "MMA" in sass  # the tensor-core instructions are there


# --------------------------------------------------------------------------- check_gemm


def test_cute_gemm_passes_default_suite(torch):
    import gemmlab

    k = gemmlab.compile(_src("cute_gemm.cu"), "gemm")

    def fn(A, B, D):
        M, K = A.shape
        N = B.shape[0]
        k(A, B, D, M, N, K, grid=(ceil_div(M, 128), ceil_div(N, 128)), block=128)

    result = gemmlab.check_gemm(fn)
    print(result)
    result.raise_if_failed()
    gemmlab.check_gemm(fn, shapes="aligned").raise_if_failed()


def test_naive_passes_odd_suite_and_rejects_bf16(torch, naive):
    import gemmlab

    r = gemmlab.check_gemm(naive_launcher(naive), shapes="odd", tile=(16, 16))
    print(r)
    r.raise_if_failed()
    # the same kernel reads fp16 pointers: bf16 inputs are rejected per row with a clear message
    bad = gemmlab.check_gemm(naive_launcher(naive), dtype=torch.bfloat16, shapes=[(16, 16, 16)])
    assert not bad.passed and "use A.half()" in bad.rows[0].message


def test_planted_out_of_bounds_store(torch):
    import gemmlab

    k = gemmlab.compile(_src("planted_oob.cu"), "gemm_oob")
    r = gemmlab.check_gemm(naive_launcher(k), shapes=[(128, 128, 64), (129, 257, 64)], tile=(16, 16))
    print(r)
    assert r.rows[0].passed  # M multiple of 16: the missing predicate never fires
    row = r.rows[1]
    assert not row.passed and not row.guard_ok and row.n_bad == 0
    assert row.message.startswith(f"{15 * 257:,} elements outside the output were written (guard zone after D)")


def test_planted_unwritten_last_column(torch, naive):
    import gemmlab

    r = gemmlab.check_gemm(naive_launcher(naive, floor_grid_n=True), shapes=[(64, 1001, 32)], tile=(16, 16))
    print(r)
    row = r.rows[0]
    assert row.n_unwritten == 64 * (1001 - 992)
    assert "never written (still NaN) in the last column of tiles: your grid does not cover N=1001 — use ceil_div" \
        in row.message
    assert {j for _, j in row.bad_tiles} == {1001 // 16}


def test_planted_edge_tile_bug_heatmap_is_exactly_the_edges(torch):
    import gemmlab

    k = gemmlab.compile(_src("planted_edge.cu"), "gemm_edge")
    M, N, K = 136, 264, 64  # partial tiles of 8 rows / 8 columns: even the corner tile has 64 elements
    r = gemmlab.check_gemm(naive_launcher(k), shapes=[(256, 256, 64), (M, N, K)], tile=(16, 16))
    print(r)
    assert r.rows[0].passed
    row = r.rows[1]
    tm, tn = ceil_div(M, 16), ceil_div(N, 16)
    edges = sorted({(tm - 1, j) for j in range(tn)} | {(i, tn - 1) for i in range(tm)})
    assert row.bad_tiles == edges
    assert row.guard_ok and row.inputs_ok and row.n_unwritten == 0
    assert "only in the edge tiles" in row.message
    fig = r.heatmap()
    assert fig.axes
    assert "data:image/png;base64," in r._repr_html_()


# --------------------------------------------------------------------------- bench, ceilings


@pytest.mark.timing      # compares measured times: beside other GPU tests a busy GPU stretches them
def test_gpu_only_timing_leaves_out_launch_overhead(torch):
    import gemmlab

    x = torch.zeros(1024, device="cuda")

    def tiny():  # a few microseconds of GPU work behind a slow Python call
        time.sleep(200e-6)
        x.add_(1.0)

    eager = sorted(gemmlab.timing.bench.time_cuda(tiny, rep=20, flush_l2=False, queue_ahead=False))  # one by one
    gpu_only = sorted(gemmlab.timing.bench.time_cuda(tiny, rep=20, gpu_only=True, flush_l2=False))
    assert 0 < gpu_only[10] < 0.5 * eager[10] and eager[10] > 0.15, (eager, gpu_only)
    before = float(x[0])
    torch.randn(4, device="cuda")  # torch's CUDA state is untouched
    gemmlab.timing.bench.time_cuda(tiny, rep=3, gpu_only=True, flush_l2=False)
    torch.cuda.synchronize()
    assert float(x[0]) == before + 1 + 3 + 3 * 10  # first call, host estimate, 3 batches of 10


def test_bench_cute_gemm_prints_ratio(torch):
    import gemmlab

    k = gemmlab.compile(_src("cute_gemm.cu"), "gemm")

    def fn(A, B, D):
        M, K = A.shape
        N = B.shape[0]
        k(A, B, D, M, N, K, grid=(ceil_div(M, 128), ceil_div(N, 128)), block=128)

    r = gemmlab.bench_gemm(fn, shape=(4096, 4096, 4096), label="cute_gemm.cu")
    print(r)
    assert r.ms > 0 and r.cublas_ms > 0 and r.reps >= 10
    assert 0.02 < r.ratio < 1.5  # FACTS: ~142 TFLOPS vs ~690 for cuBLAS on an H100
    assert r.tflops == pytest.approx(2 * 4096**3 / (r.ms * 1e-3) / 1e12)
    nn = gemmlab.bench_gemm(lambda A, B, C, a, b: C.addmm_(A, B, alpha=a, beta=b),
                            shape=(2048, 2048, 2048), convention="nn", label="torch.addmm")
    print(nn)
    assert 0.5 < nn.ratio < 2.0  # cuBLAS against itself


def test_ceilings_measured_and_cached(torch):
    import gemmlab
    from gemmlab.timing.roofline import roofline

    c = gemmlab.ceilings(refresh=True)
    print(c)
    assert 500 < c.copy_gbps < 20_000
    assert 50 < c.peak("float16") < 5_000 and c.peak("bfloat16") > 50
    again = gemmlab.ceilings()
    assert again.measured_at == c.measured_at  # from the cache
    fig = roofline([("naive", 0.5, 1.0)], ceilings=c)
    assert fig.axes


# --------------------------------------------------------------------------- sticky errors, hangs

_CHILD_PRELUDE = textwrap.dedent("""
    import os, sys, time
    import torch, gemmlab
    from gemmlab.errors import ContextLostError, KernelTimeoutError
    def done(code):
        sys.stdout.flush(); sys.stderr.flush(); os._exit(code)
""")


def _run_child(body: str, timeout: float = 180) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _CHILD_PRELUDE + textwrap.dedent(body)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_illegal_address_loses_context_with_clear_message():
    out = _run_child(f"""
        k = gemmlab.compile(open({str(KERNELS / 'planted_illegal.cu')!r}).read(), "wild_store")
        x = torch.zeros(64, device="cuda")
        try:
            k(x, 64, grid=1, block=64, sync=True)
        except ContextLostError as e:
            print("CAUGHT:", e)
        else:
            print("NOT CAUGHT"); done(1)
        try:
            k(x, 64, grid=1, block=64)
        except ContextLostError:
            print("FAILS FAST")
        done(0)
    """)
    assert "CAUGHT: kernel 'wild_store' failed: an illegal memory access" in out
    assert "CUDA context is now lost" in out and "Restart" in out and "compute-sanitizer" in out
    assert "FAILS FAST" in out


def test_illegal_address_inside_check_gemm_is_translated():
    out = _run_child(f"""
        k = gemmlab.compile(open({str(KERNELS / 'planted_illegal.cu')!r}).read(), "wild_store")
        def fn(A, B, D):
            k(D.view(-1), 2, grid=1, block=2)
        try:
            gemmlab.check_gemm(fn, out_dtype=torch.float32, shapes=[(16, 16, 16)])
        except ContextLostError as e:
            print("CAUGHT:", e)
            done(0)
        except BaseException as e:
            print("WRONG:", type(e).__name__, e); done(1)
        print("NOT CAUGHT"); done(1)
    """)
    assert "CAUGHT:" in out and "illegal memory access" in out and "context is now lost" in out


def test_deadlock_times_out():
    out = _run_child(f"""
        k = gemmlab.compile(open({str(KERNELS / 'planted_hang.cu')!r}).read(), "spin_on_flag")
        flag = torch.zeros(1, dtype=torch.int32, device="cuda")
        t = time.monotonic()
        try:
            k(flag, 20, grid=1, block=1, sync=True, timeout_s=2)
        except KernelTimeoutError as e:
            print("TIMEOUT after %.1f s:" % (time.monotonic() - t), e)
            done(0)
        print("NO TIMEOUT"); done(1)
    """)
    assert "TIMEOUT after" in out
    seconds = float(out.split("TIMEOUT after ")[1].split(" s")[0])
    assert 1.9 <= seconds < 6
    assert "did not finish in 2 s" in out and "deadlock" in out and "restart the Python kernel" in out


def test_device_printf_appears_on_sys_stdout(torch, capsys):
    """Jupyter shows sys.stdout, not file descriptor 1 where the driver writes device printf."""
    import gemmlab

    k = gemmlab.compile('extern "C" __global__ void hello(int x) { if (threadIdx.x == 0) printf("hello %d\\n", x); }',
                        "hello")
    k(7, grid=1, block=32)
    assert capsys.readouterr().out == "hello 7\n"
