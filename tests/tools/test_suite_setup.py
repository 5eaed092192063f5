"""The test suite's own setup (tests/conftest.py): one run folder and one compile cache for a whole run,
shared by pytest-xdist's workers, seeded into the grader's sandboxes, made once by ``run_once.once``
whichever worker asks first, and removed when the run ends.

Why a test: were the workers to make caches of their own again, nothing would fail, and every kernel
would compile once per worker (CI's suite took minutes longer that way). A small session of two test
files under two workers, with the suite's conftest as its plugin, shows what each worker saw.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

pytest.importorskip("xdist", reason="pytest-xdist runs the suite's workers (the test extra)")

PROBE = '''
import json, os
from pathlib import Path
from tests.support.run_once import once

def test_probe_{name}():
    made = once("made-once", lambda: {{"pid": os.getpid()}})
    seen = {{"pid": os.getpid(), "once": made, "cache": os.environ["GEMMLAB_CACHE"],
            "run": os.environ["GEMMLAB_TEST_RUN_DIR"], "seed": os.environ["GEMMLAB_GRADER_CACHE_SEED"],
            "cache_is_a_folder": os.path.isdir(os.environ["GEMMLAB_CACHE"])}}
    (Path(os.environ["PROBE_OUT"]) / "{name}.json").write_text(json.dumps(seen))
'''


def test_workers_share_one_run_folder_and_cache_which_the_run_removes(tmp_path: Path) -> None:
    suite, out = tmp_path / "suite", tmp_path / "out"
    suite.mkdir()
    out.mkdir()
    for name in ("a", "b"):
        (suite / f"test_probe_{name}.py").write_text(PROBE.format(name=name))
    env = {k: v for k, v in os.environ.items()
           if k not in ("GEMMLAB_CACHE", "GEMMLAB_TEST_RUN_DIR", "GEMMLAB_GRADER_CACHE_SEED", "PYTEST_XDIST_WORKER")}
    env.update(PROBE_OUT=str(out), PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tools")]),
               GEMMLAB_HIDE_GPU="1")                 # no worker imports torch to ask for a GPU
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-n", "2", "--dist", "loadfile",
                           "-p", "no:cacheprovider", "-q", str(suite)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = [json.loads((out / f"{name}.json").read_text()) for name in ("a", "b")]
    assert seen[0]["run"] == seen[1]["run"] and seen[0]["cache"] == seen[1]["cache"], seen
    assert all(s["seed"] == s["cache"] and s["cache_is_a_folder"] for s in seen), seen
    assert Path(seen[0]["cache"]).parent == Path(seen[0]["run"]), "a fresh cache lives in the run folder"
    assert seen[0]["once"] == seen[1]["once"] and seen[0]["once"]["pid"] in (seen[0]["pid"], seen[1]["pid"]), seen
    assert not Path(seen[0]["run"]).exists(), "the run folder outlived the run"
