"""Shared test setup: one folder and one compile cache for the whole run, and the one GPU convention.

One run folder (``tests.support.run_once``): made by the first pytest process, shared with
pytest-xdist's workers, removed at the end. It holds what the run makes once for all its processes
(``run_once.once``: a graded course that tests in several files read) and the run's compile cache.

One compile cache: every test process, every process they start (notebooks run headless, the
grader's CLI, Ray workers) and, read-only, every sandboxed kernel of the grader
(``autograder.harness.sandbox.CACHE_SEED_ENV``: the suite plants its own hand-ins, so the seed gives
nothing away) compile a kernel once a run. ``GEMMLAB_CACHE=folder`` keeps compiles between runs
instead. A test about the cache itself, or one that changes entries, uses a folder of its own
(``private_cache``).

A test that needs a GPU carries the ``gpu`` marker (``pytestmark = pytest.mark.gpu`` for a whole
file) or takes the ``gpu`` fixture (the torch device it runs on), which marks it too; without a
GPU such tests skip cleanly, and ``pytest -m gpu`` selects them on a GPU machine. A test of what
happens without a GPU takes the ``no_gpu`` fixture instead: gemmlab then sees no GPU (its
``GEMMLAB_HIDE_GPU`` switch), so the test runs, and means the same, on every machine.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from autograder.harness.sandbox import CACHE_SEED_ENV
from gemmlab.compiling.cache import CACHE_ENV, READONLY_ENV
from tests.support.course_gradings import graded_00_on_hopper  # noqa: F401 - a fixture for every test file
from tests.support.run_once import RUN_DIR_ENV

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
# Loading a notebook's kernel cell would start compiling every variant in the background (notebooks
# 05, 06): tests compile what they use, so CI's two cores are not shared with compiles nobody waits for.
# tests/gemmlab/test_ahead.py turns it on where it is the subject.
os.environ.setdefault("GEMMLAB_COMPILE_JOBS", "0")

#: How the run's folders reach pytest-xdist's workers (their environment is not the controller's).
RUN_FOLDERS = "gemmlab_run_folders"
_made_here: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)
    if worker is not None and RUN_FOLDERS in worker:
        run, cache = worker[RUN_FOLDERS]
    else:
        run = tempfile.mkdtemp(prefix="gemmlab-test-run-")
        os.chmod(run, 0o755)       # the sandboxed kernels, which run as nobody, read the cache inside it
        _made_here.append(run)
        cache = os.environ.get(CACHE_ENV) or os.path.join(run, "cache")
    os.makedirs(cache, exist_ok=True)
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False      # xdist keeps LONGEST_FIRST's order, not its own (many tests first)
    os.environ[RUN_DIR_ENV] = run
    os.environ[CACHE_ENV] = cache
    os.environ.setdefault(CACHE_SEED_ENV, cache)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: each worker gets the controller's run folder and cache."""
    node.workerinput[RUN_FOLDERS] = (os.environ[RUN_DIR_ENV], os.environ[CACHE_ENV])


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _made_here:
        shutil.rmtree(folder, ignore_errors=True)


#: The test files that take longest, longest first (seconds in one process of a clean-clone run on the 2-core
#: machine, 2026-12-07, --durations=0: test_release 400, test_grading 250, test_outcomes 160, test_wrong_answers_05
#: 145, test_browser_class 145, test_grading_scale 120, test_judged_tests 90, test_judged_techniques 90, then 30-70
#: each). pytest-xdist hands files out in collection order, as each worker asks; with these first, the workers end
#: together instead of one running a long file alone at the end (by default xdist puts files with many tests
#: first, which left the grading-scale and browser tests for last; a run that listed fewer files spent its last
#: minute and a half on one or two of them, the cores a third idle).
LONGEST_FIRST = (
    "tests/tools/test_release.py", "tests/autograder/test_grading.py", "tests/autograder/test_outcomes.py",
    "tests/course/test_wrong_answers_05.py", "tests/classroom/test_browser_class.py",
    "tests/benchmarks/test_grading_scale.py", "tests/autograder/test_judged_tests.py",
    "tests/autograder/test_judged_techniques.py", "tests/course/test_copy_through_shared_02.py",
    "tests/autograder/test_judged_07.py", "tests/course/test_browser.py", "tests/course/test_wrong_answers_04b.py",
    "tests/course/test_wrong_answers_07.py", "tests/course/test_wrong_answers_08.py",
    "tests/autograder/test_under_load.py", "tests/course/test_techniques_06.py",
    "tests/course/test_wrong_answers_04.py", "tests/autograder/test_kernel_limits.py",
    "tests/course/test_pipelining.py",
    "tests/gemmlab/test_compiler.py", "tests/course/test_global_gemm.py", "tests/course/test_mma04.py",
    "tests/course/test_hopper.py", "tests/pool/test_ray.py",
)


def _longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    return sorted(items, key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from gemmlab.running.gpu import has_gpu

    items[:] = _longest_first(items)
    for item in items:
        if "gpu" in getattr(item, "fixturenames", ()) and "gpu" not in item.keywords:
            item.add_marker(pytest.mark.gpu)
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run `pytest -m gpu` on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A compile cache of the test's own (empty, no read-only layer): for tests of the cache, or that change it."""
    folder = tmp_path / "gemmlab-cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    monkeypatch.delenv(READONLY_ENV, raising=False)
    return folder


@pytest.fixture
def gpu() -> Any:
    """The CUDA device the test runs on (torch's current one); taking it marks the test ``gpu``."""
    import torch

    return torch.device("cuda", torch.cuda.current_device())


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """gemmlab sees no GPU during the test, whatever the machine has."""
    from gemmlab.running import gpu as gpu_module

    monkeypatch.setenv(gpu_module.HIDE_ENV, "1")
    gpu_module.refresh()
    yield
    monkeypatch.delenv(gpu_module.HIDE_ENV)
    gpu_module.refresh()
