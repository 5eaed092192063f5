"""gemmlab.compiling.cache: the cache a process writes, and the read-only layer under it (a seed filled elsewhere)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gemmlab.compiling import cache
from gemmlab.compiling.compiler import compile_to
from tests.support import ROOT

SCALE = 'extern "C" __global__ void scale_seeded(float* x, float a) { x[threadIdx.x] *= a; }\n'


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def seed(tmp_path: Path, private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A read-only layer holding one entry ``("kind", key "ab12...")``, written by another 'process'."""
    folder = tmp_path / "seed"
    monkeypatch.setenv(cache.CACHE_ENV, str(folder))
    cache.store("kind", "ab12" * 10, b"from the seed")
    monkeypatch.setenv(cache.CACHE_ENV, str(private_cache))
    monkeypatch.setenv(cache.READONLY_ENV, str(folder))
    return folder


def test_a_miss_is_read_from_the_read_only_layer_which_is_never_written(seed: Path, private_cache: Path) -> None:
    before = _tree(seed)
    assert cache.load("kind", "ab12" * 10) == b"from the seed"
    cache.store("kind", "cd34" * 10, b"new")
    assert cache.load("kind", "cd34" * 10) == b"new"
    assert cache.load("kind", "ef56" * 10) is None
    assert _tree(seed) == before, "the read-only layer was written"
    assert _tree(private_cache) == {f"kind/cd/{'cd34' * 10}": b"new"}, "a hit in the seed is not copied"


def test_this_process_cache_comes_first(seed: Path) -> None:
    cache.store("kind", "ab12" * 10, b"mine")
    assert cache.load("kind", "ab12" * 10) == b"mine"


@pytest.mark.parametrize("value", ["", "/no/such/folder"])
def test_no_read_only_layer_without_a_folder(value: str, private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.READONLY_ENV, value)
    assert cache.readonly_root() is None and cache.load("kind", "ab12" * 10) is None


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_entries_get_the_permissions_the_umask_gives(umask: int, mode: int, private_cache: Path) -> None:
    """As any file its owner creates: a cache made readable to be shared (a seed) shares its entries."""
    old = os.umask(umask)
    try:
        cache.store("kind", "ab12" * 10, b"x")
    finally:
        os.umask(old)
    entry = private_cache / "kind" / "ab" / ("ab12" * 10)
    assert stat.S_IMODE(entry.stat().st_mode) == mode
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".tmp-")], "a temporary file was left"


def test_a_kernel_compiled_into_the_seed_is_a_cache_hit_elsewhere(tmp_path: Path, private_cache: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "seed"))
    cold = compile_to(SCALE, "scale_seeded", arch="sm_90a")
    assert not cold.cached
    monkeypatch.setenv(cache.CACHE_ENV, str(private_cache))
    monkeypatch.setenv(cache.READONLY_ENV, str(tmp_path / "seed"))
    warm = compile_to(SCALE, "scale_seeded", arch="sm_90a")
    assert warm.cached and warm.cubin == cold.cubin and warm.ptx == cold.ptx
    assert not [p for p in private_cache.rglob("*") if p.is_file()], "the hit was written again"


# ------------------------------------------------------------------ one compile of an entry at a time, across processes
HOLDER = """
import sys
from gemmlab import cache
with cache.claim("kind", "ab12" * 10, wait_s=5):
    print("held", flush=True)
    if sys.stdin.readline().strip() == "store":
        cache.store("kind", "ab12" * 10, b"made by the first")
"""


def _holder(private_cache: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", HOLDER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_second_claim_waits_for_the_first_to_store_the_entry(private_cache: Path) -> None:
    child = _holder(private_cache)
    got: list = []

    def second() -> None:
        with cache.claim("kind", "ab12" * 10, wait_s=120):
            got.append(cache.load("kind", "ab12" * 10))

    waiter = threading.Thread(target=second)
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive(), "the second claim did not wait for the first"
    child.communicate("store\n", timeout=60)
    waiter.join(60)
    assert got == [b"made by the first"]
    assert not list(private_cache.rglob(".claim-*")), "a claim left its lock file beside the entry"


def test_a_claim_held_too_long_is_given_up_not_waited_for_forever(private_cache: Path) -> None:
    child = _holder(private_cache)
    try:
        done = threading.Event()

        def second() -> None:
            with cache.claim("kind", "ab12" * 10, wait_s=0.3):
                done.set()

        threading.Thread(target=second).start()
        assert done.wait(60), "the claim waited past its limit"
    finally:
        child.communicate("leave\n", timeout=60)


COMPILER = f"""
import json
from gemmlab.compiling.compiler import compile_to
print(json.dumps(compile_to({SCALE!r} + "// claimed", "scale_seeded", arch="sm_90a").cached))
"""


def test_processes_compiling_one_kernel_at_once_compile_it_once(private_cache: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    runs = [subprocess.Popen([sys.executable, "-c", COMPILER], env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    cached = sorted(json.loads(run.communicate(timeout=300)[0].strip().splitlines()[-1]) for run in runs)
    assert cached == [False, True], "both processes compiled the kernel"


def test_waiters_on_a_claim_given_up_without_its_entry_never_hold_it_two_at_a_time(private_cache: Path) -> None:
    """The holder fails (stores nothing) and removes its lock file: one waiter wins the lock of the removed file. It
    must hold the claim alone, not beside a newcomer that made a new lock file (before, both compiled)."""
    child = _holder(private_cache)
    inside: list[str] = []
    entered = threading.Semaphore(0)
    leave = {name: threading.Event() for name in ("first", "second", "newcomer")}
    most = [0]
    guard = threading.Lock()

    def waiter(name: str) -> None:
        with cache.claim("kind", "ab12" * 10, wait_s=120):
            with guard:
                inside.append(name)
                most[0] = max(most[0], len(inside))
            entered.release()
            leave[name].wait(60)
            with guard:
                inside.remove(name)

    threads = {name: threading.Thread(target=waiter, args=(name,)) for name in leave}
    threads["first"].start()
    threads["second"].start()
    time.sleep(0.5)                       # both wait on the holder's lock file
    child.communicate("leave\n", timeout=60)
    assert entered.acquire(timeout=60), "no waiter took the claim its holder gave up"
    threads["newcomer"].start()
    assert not entered.acquire(timeout=1.5), f"two held the claim at once: {inside}"
    for _ in range(2):                    # let each holder go in turn: the next one enters
        with guard:
            (holder,) = inside
        leave[holder].set()
        assert entered.acquire(timeout=60), "a waiter never took the claim"
    with guard:
        (holder,) = inside
    leave[holder].set()
    for thread in threads.values():
        thread.join(60)
    assert most[0] == 1
