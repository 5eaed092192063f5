"""Notebook 07 (Hopper) without a GPU: the solution kernels compile for sm_90a (and the Blackwell
appendix for sm_100a) with the instructions each step is about, the CPU exercises' solutions pass
their checkers, and the checkers reject the classic mistakes."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import nbformat
import pytest
import torch

import gemmlab

from tests.support import ROOT
from tests.support.timeline_marks import marks_in, without_marks
from tests.support.kernel_resources import assert_no_spills
import solution_cells  # noqa: E402
from autograder.cell_metadata import grade_id  # noqa: E402

ASSIGNMENT = "07_hopper"
NOTEBOOK = ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
KERNEL_TAGS = ["kernel:hopper_common", "kernel:hopper_one_tile", "kernel:hopper_pipelined", "kernel:hopper_ws",
               "kernel:hopper_bw_tile"]


def _cells(*grade_ids: str) -> dict:
    """Run the given (untagged) notebook cells, in order, in a namespace like the notebook's."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    by_id = {grade_id(c): c.source for c in nb.cells}
    ns: dict = {}
    exec("import math, random, numpy as np, torch\nfrom gemmlab import layout as L, draw, nbhelpers as nbh\n"
         "import matplotlib\nmatplotlib.use('Agg')\n"
         "import matplotlib.pyplot as plt\nshow = plt.close", ns)
    for gid in grade_ids:
        exec(by_id[gid], ns)
    return ns


@pytest.fixture(scope="module")
def kernels() -> dict:
    return solution_cells.load_namespace(ASSIGNMENT, KERNEL_TAGS)


def _tn(m, n, k, dtype=torch.float16):
    return [torch.empty(s, dtype=dtype) for s in ((m, k), (n, k), (m, n))]


def _count(kernel, text: str) -> int:
    return kernel.ptx.count(text)


# ------------------------------------------------------------------ compile-only (CI)

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_one_tile_compiles_for_sm90a(kernels: dict, dtype) -> None:
    k = gemmlab.dsl.compile(kernels["one_tile_jit"], *_tn(64, 128, 64, dtype), arch="sm_90a")
    assert _count(k, "cp.async.bulk.tensor") == 2
    assert _count(k, "mbarrier.arrive.expect_tx") == 1
    assert _count(k, "wgmma.mma_async") == 4
    assert_no_spills(k.resources, "the one-tile kernel")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pipelined_compiles_for_sm90a(kernels: dict, dtype) -> None:
    k = gemmlab.dsl.compile(kernels["pipelined_jit"], *_tn(512, 384, 256, dtype), arch="sm_90a")
    assert _count(k, "wgmma.mma_async") == 8
    assert _count(k, "mbarrier.try_wait") >= 2
    bug = gemmlab.dsl.compile(kernels["pipelined_phase_bug_jit"], *_tn(512, 384, 256, dtype), arch="sm_90a")
    assert bug.ptx != k.ptx, "the phase-bug variant must differ from the correct kernel"


def test_exported_phase_bug_module_compiles_in_a_child_after_the_notebook_compiled_it(kernels: dict) -> None:
    # The deadlock demo's path: the notebook has already compiled the kernel (the DSL rewrote its
    # functions and inspect.getsource lost their decorators), then exports them for a child process.
    gemmlab.dsl.compile(kernels["pipelined_jit"], *_tn(512, 512, 256), arch="sm_90a")
    folder = gemmlab.export_module(
        "hopper_phase_bug_ci", [kernels[n] for n in ("k_major_smem_layout", "produce", "pipelined_kernel",
                                                     "launch_pipelined", "pipelined_phase_bug_jit")],
        {n: kernels[n] for n in ("PIPE_BM", "PIPE_BN", "PIPE_BK", "PIPE_STAGES")})
    child = ("import sys, torch, gemmlab\n"
             f"sys.path.insert(0, {folder!r})\n"
             "import hopper_phase_bug_ci as k\n"
             "t = [torch.empty(s, dtype=torch.float16) for s in ((512, 256), (512, 256), (512, 512))]\n"
             "print(gemmlab.dsl.compile(k.pipelined_phase_bug_jit, *t, arch='sm_90a').ptx.count('wgmma.mma_async'))\n")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "8", done.stdout


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_capstone_compiles_for_sm90a_with_every_feature(kernels: dict, dtype) -> None:
    k = gemmlab.dsl.compile(kernels["ws_jit"], *_tn(1024, 1024, 512, dtype), arch="sm_90a")
    ptx = k.ptx
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", ptx), "the producer must give registers back"
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+232;", ptx), "the consumers must take 232 registers"
    assert ".multicast::cluster" in ptx, "B must be multicast across the 2x1 cluster"
    assert "cp.async.bulk.tensor.2d.global.shared" in ptx, "the epilogue must be a TMA store"
    assert _count(k, "wgmma.mma_async") == 4
    assert_no_spills(k.resources, "the capstone kernel")
    _assert_wgmmas_pipelined(k)



def test_the_timeline_marks_change_nothing_outside_a_timeline(kernels: dict) -> None:
    """ws_kernel's marks (gemmlab.profiling.marks) compile to nothing in the checked and timed build: the same
    SASS as the kernel without them. Compiled in for a timeline, each mark is one record (begin's START and 9 marks,
    the loops' marks once each: the loops are not unrolled)."""
    from gemmlab.profiling import switch
    from gemmlab.compiling.sass import disassembler

    marked = solution_cells.cell_source(ASSIGNMENT, "kernel:hopper_ws")
    assert marks_in(marked) == 9 and "tracer = marks.begin()" in marked
    bare = solution_cells.load_namespace(ASSIGNMENT, ["kernel:hopper_common", "kernel:hopper_ws"],
                                         {"kernel:hopper_ws": without_marks(marked)})
    args = _tn(1024, 1024, 512)
    plain = gemmlab.dsl.compile(kernels["ws_jit"], *args, arch="sm_90a")
    unmarked = gemmlab.dsl.compile(bare["ws_jit"], *args, arch="sm_90a")
    assert "globaltimer" not in plain.ptx and plain.resources == unmarked.resources
    if disassembler() is not None:
        assert plain.sass() == unmarked.sass(), "the marks changed the machine code of the plain build"
    with switch.tracing():
        traced = gemmlab.dsl.compile(kernels["ws_jit"], *args, arch="sm_90a")
    assert traced.ptx.count("%globaltimer") == 10

def _assert_wgmmas_pipelined(k) -> None:
    """ptxas must issue a k-tile's four wgmmas back to back and wait once: serialized (a wait after
    each), the bf16 capstone ran 25% slower on an H100 (ordinary stores into the accumulator did it)."""
    from gemmlab.compiling.sass import disassembler, wgmma_waits

    if disassembler() is None:
        pytest.skip("no disassembler (pip install nvidia-cuda-nvdisasm, a gemmlab dependency)")
    assert wgmma_waits(k.sass()) == (4, 1), "ptxas serialized the wgmmas: something writes the accumulators"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_blackwell_tile_compiles_for_sm100a(kernels: dict, dtype) -> None:
    k = gemmlab.dsl.compile(kernels["bw_tile_jit"], *_tn(128, 128, 64, dtype), arch="sm_100a")
    assert _count(k, "tcgen05.mma") == 4
    assert _count(k, "tcgen05.ld") >= 1 and _count(k, "tcgen05.alloc") == 1 and "tcgen05.commit" in k.ptx


def test_tma_gemm_pads_only_illegal_shapes(kernels: dict) -> None:
    calls = []

    def fake(A, B, D):
        calls.append((tuple(A.shape), tuple(B.shape), tuple(D.shape)))
        D[:, :B.shape[0]].copy_(A.float().matmul(B.float().T).to(D.dtype))

    gemm = kernels["tma_gemm"](fake)
    A, B = torch.randn(5, 16).half(), torch.randn(24, 16).half()
    D = torch.empty(5, 24).half()
    gemm(A, B, D)
    assert calls[-1] == ((5, 16), (24, 16), (5, 24))          # legal: passed through
    A, B = torch.randn(3, 7).half(), torch.randn(5, 7).half()
    D = torch.full((3, 5), float("nan")).half()
    gemm(A, B, D)
    assert calls[-1] == ((3, 8), (5, 8), (3, 8))               # K and N padded to multiples of 8
    torch.testing.assert_close(D.float(), A.float() @ B.float().T, rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ CPU exercises and their checkers

def test_acc_owner_solution_and_checker() -> None:
    ns = _cells("acc_owner", "acc_owner_check_helper")
    for n in (8, 16, 64, 256):
        ns["check_acc_owner"](ns["acc_owner"], n)
    swapped = lambda m, n: ns["acc_owner"](m, n)[::-1]  # noqa: E731
    with pytest.raises(AssertionError, match="belongs to thread"):
        ns["check_acc_owner"](swapped, 16)


def test_ring_simulator_catches_both_phase_bugs() -> None:
    ns = _cells("ring_simulator", "ring_waits")
    for stages in (1, 2, 3, 5):
        for k in (1, stages, 4 * stages + 3):
            ns["play_ring"](k, stages, ns["ring_waits"])
    forgot_xor = lambda t, s: (t % s, (t // s) % 2, (t // s) % 2)  # noqa: E731
    with pytest.raises(ns["RingError"], match=r"deadlock: .*empty\[0\] for parity 0"):
        ns["play_ring"](8, 3, forgot_xor)
    frozen = lambda t, s: (t % s, 0, 1 if t < s else 0)  # noqa: E731
    with pytest.raises(ns["RingError"], match="stale read"):
        ns["play_ring"](8, 3, frozen)


def test_persistent_tiles_solution_and_checker() -> None:
    ns = _cells("draw_persistent", "persistent_tiles", "persistent_check_helper")
    for args in ((1, 7, 5, 3, 1), (8, 16, 12, 4, 2), (6, 5, 7, 2, 2), (26, 3, 8, 2, 2), (132, 64, 32, 8, 2)):
        ns["check_persistent"](ns["persistent_tiles"], *args)

    def no_cluster_rank(cta, num_ctas, tiles_m, tiles_n, group_m, cluster_m):
        return ns["persistent_tiles"](cta - cta % cluster_m, num_ctas, tiles_m, tiles_n, group_m, cluster_m)

    with pytest.raises(AssertionError):
        ns["check_persistent"](no_cluster_rank, 8, 16, 12, 4, 2)


def test_persistent_tiles_matches_the_kernels_formula(kernels: dict) -> None:
    # the notebook's grouped_work and the kernel's ws_tile_coords must agree (the kernel's runs on the GPU;
    # here we execute its Python body on plain ints)
    import inspect
    ns = _cells("draw_persistent")
    src = "\n".join(line for line in inspect.getsource(kernels["ws_tile_coords"]).splitlines()
                    if not line.startswith("@"))                               # drop @cute.jit
    loc = {"WS_GROUP_M": kernels["WS_GROUP_M"], "cutlass": type("C", (), {"min": staticmethod(min)})}
    exec(src, loc)
    for cl_m, tn in ((5, 7), (16, 32), (3, 1)):
        for w in range(cl_m * tn):
            assert loc["ws_tile_coords"](w, cl_m, tn) == ns["grouped_work"](w, cl_m, tn, kernels["WS_GROUP_M"])


def test_benchmark_loads_the_hopper_kernels_as_tn_gemm_functions() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_solutions", ROOT / "benchmarks" / "solutions.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_solutions"] = bench  # its dataclasses look their module up there
    spec.loader.exec_module(bench)
    for name in ("hopper_pipelined", "hopper_ws"):
        assert ("07_hopper", name) in bench.KERNELS
        fn, ns = bench.load_kernel("07_hopper", name)
        assert callable(fn) and bench.convention_of(fn, ns, name) == "tn"
