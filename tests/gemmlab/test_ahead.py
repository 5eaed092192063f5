"""gemmlab.compile_ahead: variants compiled side by side in background processes, used once ready."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

import gemmlab
from gemmlab.compiling import ahead, compiler, worker
from gemmlab.compiling import store
from gemmlab.compiling.job import CompileJob

from tests.support import ROOT
SRC = r"""
template <int V> __global__ void fill(float* x) { x[threadIdx.x] = V * 2.0f + EXTRA; }
"""
BROKEN = r"""
template <int V> __global__ void fill(float* x) { x[threadIdx.x] = undeclared_name; }
"""


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GEMMLAB_COMPILE_JOBS", "2")


def test_variants_compiled_ahead_are_what_compile_returns() -> None:
    builds = [("fill<1>", ["-DEXTRA=1"]), ("fill<2>", ["-DEXTRA=2"])]
    assert gemmlab.compile_ahead(SRC, builds, arch="sm_90a") == 2
    assert gemmlab.compile_ahead(SRC, builds, arch="sm_90a") == 0          # in flight: not started twice
    first = compiler.compile_to(SRC, "fill<1>", "sm_90a", ["-DEXTRA=1"])
    second = compiler.compile_to(SRC, "fill<2>", "sm_90a", ["-DEXTRA=2"])
    assert first.cached and second.cached                                   # built by the background processes
    assert "fill" in first.lowered_name and first.cubin
    assert gemmlab.compile_ahead(SRC, builds, arch="sm_90a") == 0          # cached: nothing to do


def test_a_failing_variant_fails_in_the_foreground_with_the_usual_message() -> None:
    assert gemmlab.compile_ahead(BROKEN, ["fill<1>"], arch="sm_90a") == 1
    with pytest.raises(gemmlab.CompileError, match="undeclared_name"):
        compiler.compile_to(BROKEN, "fill<1>", "sm_90a")


def test_jobs_zero_turns_it_off(monkeypatch) -> None:
    monkeypatch.setenv("GEMMLAB_COMPILE_JOBS", "0")
    assert gemmlab.compile_ahead(SRC, [("fill<3>", ["-DEXTRA=3"])], arch="sm_90a") == 0
    monkeypatch.setenv("GEMMLAB_COMPILE_JOBS", "lots")
    assert ahead.jobs() >= 1


def test_bad_arch_is_refused_before_anything_starts() -> None:
    with pytest.raises(gemmlab.CompileError, match="not a GPU target"):
        gemmlab.compile_ahead(SRC, ["fill<1>"], arch="sm_9000")


def test_background_compiles_stop_when_python_exits(tmp_path) -> None:
    probe = (
        "import time, gemmlab\n"
        "from gemmlab.compiling import worker\n"
        "src = '#include <cute/tensor.hpp>\\n' + " + repr(SRC) + "\n"
        "gemmlab.compile_ahead(src, [('fill<%d>' % i, ['-DEXTRA=1']) for i in range(2)], arch='sm_90a')\n"
        "while len(worker.pids()) < 2:\n    time.sleep(0.05)\n"
        "print(' '.join(str(p) for p in worker.pids()), flush=True)\n")
    env = dict(os.environ, GEMMLAB_CACHE=str(tmp_path / "c"), GEMMLAB_COMPILE_JOBS="2")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=str(ROOT), env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    stored = [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
    assert stored == [], f"Python waited for its background compiles instead of stopping them: {stored}"
    for pid in map(int, done.stdout.split()):
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"background compile {pid} still running after Python exited")


def test_a_rerun_of_the_same_group_drops_builds_not_started(monkeypatch) -> None:
    """One slot: the first old build holds it (held there until the cell has run again, so a busy machine cannot
    finish old builds before the re-run, as it once did), the other three wait for it and are dropped."""
    monkeypatch.setenv("GEMMLAB_COMPILE_JOBS", "1")
    src = SRC + f"// {uuid.uuid4()}\n"      # none of these builds is in the run's shared cache already
    real_run, started = worker.run, []
    running, rerun = threading.Event(), threading.Event()

    def held_until_the_rerun(job, timeout=None):
        started.append(job.name)
        running.set()
        rerun.wait(120)
        return real_run(job, timeout)

    monkeypatch.setattr(worker, "run", held_until_the_rerun)
    old = [(f"fill<{i}>", ["-DEXTRA=1"]) for i in range(4)]
    assert gemmlab.compile_ahead(src, old, arch="sm_90a", group="cell") == 4
    assert running.wait(120), "no background compile started"
    assert gemmlab.compile_ahead(src, [("fill<9>", ["-DEXTRA=1"])], arch="sm_90a", group="cell") == 1
    rerun.set()
    assert compiler.compile_to(src, "fill<9>", "sm_90a", ["-DEXTRA=1"]).cached
    deadline = time.monotonic() + 120
    while ahead.in_flight() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ahead.in_flight() == 0
    built = [n for n, o in old if store.contains(store.key(CompileJob(src, n, "sm_90a", tuple(o))))]
    assert len(started) == 2 and started[1] == "fill<9>", started    # the running one, then the re-run's
    assert built == [started[0]], built                                 # the queued rest dropped, never compiled


def test_a_background_compile_is_inspected_for_warnings_at_its_first_use(monkeypatch) -> None:
    # The background process's own WgmmaSerializedWarning goes nowhere: the first foreground user of
    # its result must look again, later cache hits not (they were already looked at once).
    from gemmlab.compiling import sass

    looked_at = []
    monkeypatch.setattr(sass, "warn_if_wgmma_serialized", lambda ptx, cubin, name: looked_at.append(name))
    assert gemmlab.compile_ahead(SRC, [("fill<6>", ["-DEXTRA=6"])], arch="sm_90a") == 1
    first = compiler.compile_to(SRC, "fill<6>", "sm_90a", ["-DEXTRA=6"])
    assert first.cached and len(looked_at) == 1
    compiler.compile_to(SRC, "fill<6>", "sm_90a", ["-DEXTRA=6"])
    assert len(looked_at) == 1
    fresh = compiler.compile_to(SRC, "fill<7>", "sm_90a", ["-DEXTRA=7"])      # compiled here: looked at once
    compiler.compile_to(SRC, "fill<7>", "sm_90a", ["-DEXTRA=7"])
    assert not fresh.cached and len(looked_at) == 2
