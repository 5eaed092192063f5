"""A student without a GPU works through notebook 05 (and 01, 02, 03, 07, 08) on the class's pool: the release with
the solutions' answers, run top to bottom in a Jupyter kernel that sees no GPU (``GEMMLAB_HIDE_GPU``) and is connected through
``GEMMLAB_POOL``/``GEMMLAB_POOL_TOKEN`` to the pool service on this machine.

Each request is judged in a sandboxed judge process on this machine's GPU (``pytest -m gpu``): the end-to-end run
the pool was built for, and the same for the copy, transpose, Hopper and ladder tests of 01, 02, 03, 07 and 08.
``_work_through_05(..., "fake")`` runs 05 on a CPU with the fake judge in the service's process (about 150 s on a 2-core machine: too long for CI, whose CPU tests cover the pieces: the
gates, padded and beta = 0 checks and refusals through a pool in tests/gemmlab/remote/test_connection.py).
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable

import nbformat
import pytest

from gemmlab.judge import JudgeReport, JudgeRequest
from pool.service import RunningService
from pool.worker import LocalExecutor, sandbox_problem
from tests.support import ROOT

from .helpers import Klass, ScriptedExecutor

pytest.importorskip("nbclient", reason="nbclient runs the notebook (pip install nbclient)")
pytest.importorskip("nbgrader", reason="the hand-in is built from the nbgrader release (tools/wheelhouse.py)")
from tests.support import grading_fixtures as gf  # noqa: E402
from autograder.cell_metadata import grade_id, is_graded  # noqa: E402

A = "05_global_gemm"
#: 05's graded tests whose GPU work is all check_gemm and bench_gemm (``gpu_graded(..., pool=True)``).
POOL_TESTS = ("test_one_k_tile_slow", "test_gemm_correct_slow", "test_perf_bar_slow")
CELL_TIMEOUT_S = 900


class Counting:
    """An executor that judges with ``inner`` and keeps each request it judged."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.requests = inner, []

    def gpus(self) -> list[str]:
        return self.inner.gpus()

    def run(self, gpu: int, request: JudgeRequest, timeout_s: float) -> JudgeReport:
        self.requests.append(request)
        return self.inner.run(gpu, request, timeout_s)

    def close(self) -> None:
        self.inner.close()


def _text(cell: Any) -> str:
    return "".join(o.get("text", "") or "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


def _work_through(assignment: str, start: Callable[..., RunningService], klass: Klass,
                  backend: str) -> tuple[dict[str, Any], Counting]:
    """Run ``assignment``'s release with the solutions' answers in a kernel without a GPU, connected to a pool
    service on this machine; its graded cells by grade_id, and the requests its judges saw."""
    from gemmlab.notebook.headless import notebook_client

    judges = Counting(ScriptedExecutor(delay_s=0.0) if backend == "fake" else
                      LocalExecutor(["0"], sandbox=not sandbox_problem()))   # the GPU judge, as `python -m pool` serves
    service = start(judges, slots=1, job_timeout_s=600.0)   # the per-student limits as served by default
    name, source, release = gf.course_parts(assignment)
    nb = nbformat.reads(json.dumps(gf.solved(source, release)), as_version=4)   # sources as strings
    # The notebook's kernel alone gets these: the pool's judges, started from this process, must see the GPU.
    kernel_env = {**os.environ, "GEMMLAB_HIDE_GPU": "1", "GEMMLAB_POOL": service.url,
                  "GEMMLAB_POOL_TOKEN": klass.tokens["alice"], "CUTE_DSL_ARCH": "sm_90a",
                  "MPLBACKEND": "module://matplotlib_inline.backend_inline",
                  "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    client = notebook_client(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                             resources={"metadata": {"path": str(ROOT / "course" / assignment)}})
    client.execute(env=kernel_env)          # raises CellExecutionError naming the failing cell
    cells = {grade_id(c): c for c in nb.cells if c.cell_type == "code"}
    for gid, cell in cells.items():      # nbgrader scores a graded cell that writes to stderr 0
        stderr = [o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stderr"]
        assert not (is_graded(cell) and stderr), (gid, stderr)
    return cells, judges


def _work_through_05(start: Callable[..., RunningService], klass: Klass, backend: str) -> None:
    cells, judges = _work_through(A, start, klass, backend)
    for gid in POOL_TESTS:
        assert "runs on the class's GPU pool" in _text(cells[gid]), (gid, _text(cells[gid]))
    assert "shared GPU pool" in _text(cells["perf_measure_slow"]) or "shared GPU pool" in str(
        cells["perf_measure_slow"].get("outputs")), _text(cells["perf_measure_slow"])
    summary = _text(cells["unchecked_summary"])
    assert "was left unchecked for want of a GPU" in summary and "NOT checked" not in summary, summary
    checks = [r for r in judges.requests if r.action == "check"]
    print(f"notebook 05 sent {len(checks)} checks and {len(judges.requests) - len(checks)} timings to the pool")
    assert {r.pad for r in checks} >= {None, 3, 8}, "check_padded's pads of 3 and 8 crossed to the judge"
    assert any(r.beta == 0.0 for r in checks) and any(r.action == "bench" for r in judges.requests)
    assert {r.spec.to_dict().get("kind", "kernel") for r in checks} >= {"kernel", "dsl"}, "both options were judged"
    assert "runs on the class's GPU pool" in _text(cells["coalescing_timing_slow"]), "the panel copies were timed there"
    assert sum(r.action == "copy_bench" for r in judges.requests) == 2


#: Other notebooks' pool-ready tests, and what their requests must include: the action, the spec kinds, and a
#: field some request must set (01's who map, 08's misaligned start), or 02's timing action.
MORE = {
    "01_layouts_and_partitioning": (("who_copied_picture", "test_copy_kernel_slow"), "copy", {"kernel", "dsl"}, "who"),
    "02_tiled_copy": (("test_copy_kernel", "test_bandwidth"), "copy", {"kernel", "dsl"}, "copy_bench"),
    "03_swizzle_and_banks": (("test_transpose",), "copy", {"kernel"}, ""),
    "07_hopper": (("test_one_tile_slow", "test_pipelined_slow", "test_ws_slow", "test_ws_speed_slow"), "check", {"dsl"},
                  ""),
    "08_cuda_ladder": (("test_naive_slow", "test_wmma_slow", "test_swizzle_slow", "test_any_slow", "test_any_speed_slow"),
                       "check", {"kernel"}, "offset"),
}


@pytest.mark.gpu
@pytest.mark.timing
def test_a_student_without_a_gpu_works_through_05_on_this_machines_gpu(
        start: Callable[..., RunningService], klass: Klass) -> None:
    _work_through_05(start, klass, "gpu")


@pytest.mark.gpu
@pytest.mark.timing
@pytest.mark.parametrize("assignment", sorted(MORE))
def test_a_student_without_a_gpu_runs_the_other_notebooks_pool_tests_on_the_pool(
        assignment: str, start: Callable[..., RunningService], klass: Klass) -> None:
    tests, action, kinds, field = MORE[assignment]
    cells, judges = _work_through(assignment, start, klass, "gpu")
    for gid in tests:
        assert "runs on the class's GPU pool" in _text(cells[gid]), (gid, _text(cells[gid]))
    sent = [r for r in judges.requests if r.action == action]
    assert sent and {r.spec.to_dict().get("kind", "kernel") for r in sent} >= kinds, judges.requests
    if field == "who":
        assert any(r.copy["who"] for r in sent), "01's picture and test asked for who maps"
    if field == "offset":
        assert any(r.offset for r in sent), "08's misaligned-start check crossed to the judge"
    if field == "copy_bench":
        assert any(r.action == "copy_bench" for r in judges.requests), "02's bandwidth was timed on the pool"
    print(f"{assignment} sent {len(judges.requests)} requests to the pool")
