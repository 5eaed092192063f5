"""The grader's compile-cache seed: a folder of compiled kernels bound read-only into every sandboxed kernel,
only when the grader is told to (``sandbox.CACHE_SEED_ENV``; the test suite does, with its own run's cache).

Off by default: a seed is readable by every kernel, so in a real class it would hand out whatever it holds
(the solutions' kernels, other students'). These tests check the default, the refusal of a folder that
holds the repository, and, in a real bubblewrap sandbox, that a seeded kernel reads the seed, cannot
change it, and compiles on into its own scratch cache.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.harness import sandbox as sb
from gemmlab.compiling import cache
from gemmlab.compiling.compiler import compile_to

needs_bwrap = pytest.mark.skipif(bool(sb.check_bwrap()) and os.environ.get("GEMMLAB_CI") != "1",
                                 reason=f"no usable bubblewrap: {sb.check_bwrap()}")
KERNEL = 'extern "C" __global__ void seeded(float* x) { x[threadIdx.x] += 1.0f; }\n'


def test_no_seed_unless_the_grader_is_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sb.CACHE_SEED_ENV, raising=False)
    spec = sb.SandboxSpec(tmp_path / "s", tmp_path / "r")
    assert spec.cache_seed is None
    assert cache.READONLY_ENV not in sb.sandbox_env(spec)
    monkeypatch.setenv(cache.READONLY_ENV, str(tmp_path))        # the grader's own setting does not pass in
    assert cache.READONLY_ENV not in sb.sandbox_env(sb.SandboxSpec(tmp_path / "s", tmp_path / "r"))


def test_a_seed_is_bound_read_only_and_named_to_the_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    monkeypatch.setenv(sb.CACHE_SEED_ENV, str(seed))
    spec = sb.SandboxSpec(tmp_path / "s", tmp_path / "r")
    assert spec.cache_seed == str(seed.resolve())
    assert sb.sandbox_env(spec)[cache.READONLY_ENV] == spec.cache_seed
    cmd = sb.bwrap_prefix(spec)
    binds = [cmd[i + 1:i + 3] for i, arg in enumerate(cmd) if arg in ("--bind", "--ro-bind")]
    assert [spec.cache_seed] * 2 in binds and [c for c in binds if c[0] == spec.cache_seed] == [[spec.cache_seed] * 2]
    assert cmd[cmd.index(spec.cache_seed) - 1] == "--ro-bind"


@pytest.mark.parametrize("folder", ["repository", "around it", "root"])
def test_a_seed_that_holds_the_repository_is_refused(folder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = sb.GEMMLAB_DIR.parent
    path = {"repository": repo, "around it": repo.parent, "root": Path("/")}[folder]
    monkeypatch.setenv(sb.CACHE_SEED_ENV, str(path))
    with pytest.raises(sb.SandboxUnavailable, match="holds the repository"):
        sb.cache_seed()


PROBE = f"""
import json, os
from gemmlab import cache
from gemmlab.compiling.compiler import compile_to
hit = compile_to({KERNEL!r}, "seeded", arch="sm_90a")
seed = cache.readonly_root()
try:
    (seed / "planted").write_text("x"); wrote = True
except OSError:
    wrote = False
fresh = compile_to({KERNEL!r} + "// new", "seeded", arch="sm_90a")
print(json.dumps({{"hit": hit.cached, "wrote": wrote, "fresh": fresh.cached,
                   "own": sum(1 for _ in cache.cache_root().rglob("*") if _.is_file())}}))
"""


@needs_bwrap
def test_a_seeded_kernel_reads_the_seed_cannot_change_it_and_compiles_into_its_own_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = tmp_path / "seed"
    monkeypatch.setenv(cache.CACHE_ENV, str(seed))
    compile_to(KERNEL, "seeded", arch="sm_90a")
    for folder in [seed, *[p for p in seed.rglob("*") if p.is_dir()]]:
        os.chmod(folder, 0o755)                                     # as the test run's own cache is made
    before = sorted(str(p) for p in seed.rglob("*"))
    monkeypatch.setenv(sb.CACHE_SEED_ENV, str(seed))
    scratch, run = tmp_path / "scratch", tmp_path / "run"
    run.mkdir()
    os.chmod(run, 0o777)
    cmd = sb.bwrap_prefix(sb.SandboxSpec(scratch, run)) + [sys.executable, "-c", PROBE]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"hit": True, "wrote": False, "fresh": False, "own": 1}, seen
    assert sorted(str(p) for p in seed.rglob("*")) == before, "the kernel changed the seed"
