"""The grader on a GPU: hostile kernels cost only their own tests, the next submission grades
normally on a clean context, and check_gemm/bench_gemm see through the benchmark cheats.

    pytest -m gpu tests/test_gpu_grading.py -v       # needs bubblewrap on PATH for the harness tests
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests.support import grading_fixtures as gf

pytestmark = pytest.mark.gpu

NAIVE = ("#include <cuda_fp16.h>\nextern \"C\" __global__ void gemm_tn(const __half* A, const __half* B, __half* D, "
         "int M, int N, int K) {\n" + gf.GPU_KERNELS["honest"] + "\n}\n")


@pytest.fixture(scope="module")
def naive():
    import gemmlab

    k = gemmlab.compile(NAIVE, "gemm_tn")

    def launch(A, B, D, stream=None):
        M, K = A.shape
        N = B.shape[0]
        k(A, B, D, M, N, K, grid=((N + 15) // 16, (M + 15) // 16), block=(16, 16), stream=stream)

    return launch


def test_honest_kernel_passes_graded_check_and_bench(naive, monkeypatch) -> None:
    import gemmlab

    monkeypatch.setenv("GEMMLAB_GRADING", "1")
    assert gemmlab.check_gemm(naive, shapes=[(64, 64, 64), (33, 17, 9)]).passed
    res = gemmlab.bench_gemm(naive, shape=(1024, 1024, 1024), rep=5)
    assert res.ratio > 0


@pytest.mark.timing
def test_graded_timing_of_a_short_kernel_matches_the_plain_one(naive, monkeypatch) -> None:
    """Grading mode adds work between timed calls (an input nudge, the library watch): none of it
    may leave the GPU idle inside a timed window. A kernel of tens of microseconds shows any stall."""
    import gemmlab

    shape = (1024, 1024, 128)
    monkeypatch.setenv("GEMMLAB_GRADING", "0")
    plain = min(gemmlab.bench_gemm(naive, shape=shape, verify=False).ms for _ in range(2))
    monkeypatch.setenv("GEMMLAB_GRADING", "1")
    graded = min(gemmlab.bench_gemm(naive, shape=shape, verify=True).ms for _ in range(2))
    assert graded <= 1.15 * plain, f"graded {graded * 1e3:.1f} us per call against {plain * 1e3:.1f} us outside grading"


def test_other_stream_launch_is_caught(naive) -> None:
    import torch

    import gemmlab

    side = torch.cuda.Stream()
    # Launch the kernel once first: its first launch in a process loads its module (CUDA's lazy loading), which
    # waits for the device, so the sleep below would be over before sneaky returned (seen when this test ran alone).
    warm = [torch.zeros(s, device="cuda", dtype=torch.float16) for s in ((256, 256), (256, 256), (256, 256))]
    naive(*warm, stream=side)
    torch.cuda.synchronize()

    def sneaky(A, B, D):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)       # long enough that the result comes late
            naive(A, B, D, stream=side)

    res = gemmlab.check_gemm(sneaky, shapes=[(256, 256, 256)])
    assert not res.passed
    assert "changed after your function returned" in res.rows[0].message, res


def test_watched_stream_is_never_one_of_torchs_pooled_streams() -> None:
    """torch.cuda.Stream() cycles through 32 pooled streams: were the snapshot stream one of them,
    a student's side stream could be the same stream and hide late work (seen on the H100)."""
    import torch

    from gemmlab.running.streams import watched_stream

    with watched_stream() as ours:
        handle = ours.cuda_stream
    pooled = {torch.cuda.Stream().cuda_stream for _ in range(96)}
    assert handle not in pooled
    assert handle != torch.cuda.current_stream().cuda_stream


def test_bench_catches_library_cached_and_late_results(naive) -> None:
    import torch

    import gemmlab
    from gemmlab.timing.bench import BenchIntegrityError

    with pytest.raises(BenchIntegrityError, match="instead of computing"):
        gemmlab.bench_gemm(lambda A, B, D: torch.matmul(A, B.T, out=D), shape=(1024, 1024, 1024), rep=5, verify=True)
    memo: dict = {}

    def cached(A, B, D):
        key = (A.data_ptr(), B.data_ptr(), D.data_ptr())
        if key not in memo:
            naive(A, B, D)
            memo[key] = D.clone()
        else:
            D.copy_(memo[key])

    with pytest.raises(BenchIntegrityError, match="cached"):
        gemmlab.bench_gemm(cached, shape=(1024, 1024, 1024), rep=5, verify=True)
    side = torch.cuda.Stream()

    def late(A, B, D):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)
            naive(A, B, D, stream=side)

    with pytest.raises(BenchIntegrityError, match="after the function returned"):
        gemmlab.bench_gemm(late, shape=(1024, 1024, 1024), rep=5, verify=True)


@pytest.fixture(scope="module")
def gpu_course(tmp_path_factory) -> Path:
    from autograder.course import Course
    from autograder.harness.sandbox import check_bwrap

    if why := check_bwrap():
        pytest.skip(f"no usable bubblewrap: {why}")
    root = tmp_path_factory.mktemp("gpucourse")
    (root / "solutions" / "gpu").mkdir(parents=True)
    nbformat.write(gf.gpu_source_notebook(), root / "solutions" / "gpu" / "gpu.ipynb")
    Course(root).ensure_gradebook("gpu")
    return root


def test_hostile_gpu_kernels_cost_only_their_tests(gpu_course: Path) -> None:
    """Each hostile kernel is followed, on the same GPU, by an honest submission that must get full marks."""
    from autograder import schedule
    from autograder.course import Course
    from autograder.reports.store import gradebook_scores
    from autograder.records import Limits

    c = Course(gpu_course)
    release = nbformat.read(c.release_notebook("gpu", "gpu.ipynb"), as_version=4)
    source = nbformat.read(gpu_course / "solutions" / "gpu" / "gpu.ipynb", as_version=4)
    hostile = ["illegal_address", "deadlock", "out_of_bounds", "hog"]
    jobs = []
    for i, kind in enumerate(["honest"] + hostile):
        for student, nb in ((kind, gf.gpu_submission(release, kind) if kind != "honest" else source),
                            (f"honest_after_{i}", source)):
            folder = c.submitted / student / "gpu"
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, folder / "gpu.ipynb")
            jobs.append(c.job("gpu", student, Limits(cell_s=120, slow_cell_s=120), True))
    results = {}

    def on_result(r) -> None:
        c.record(r)
        results[r.student] = r

    schedule.grade_local(jobs, ["0"], on_result)
    scores = gradebook_scores(c.db_url, "gpu")
    report = {s: (r.score, [(x.grade_id, x.status, x.message[:120]) for x in r.cells], r.events)
              for s, r in results.items()}
    assert len(scores) == len(jobs), report
    for i in range(len(hostile) + 1):
        assert scores[f"honest_after_{i}"][0] == 4, report
    assert scores["honest"][0] == 4, report
    for kind in hostile:
        gemm = next(x for x in results[kind].cells if x.grade_id == "test_gemm_slow")
        assert gemm.score == 0, report[kind]
    assert "outside the output" in next(x for x in results["out_of_bounds"].cells
                                        if x.grade_id == "test_gemm_slow").evalue, report["out_of_bounds"]
    for kind in ("illegal_address", "deadlock", "out_of_bounds"):
        after = next(x for x in results[kind].cells if x.grade_id == "test_gpu_still_works")
        assert after.score == 1, (kind, report[kind])
