"""gemmlab.cache: the cache a process writes, and the read-only layer under it (a seed filled elsewhere)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gemmlab import cache
from gemmlab.compiler import compile_to

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
