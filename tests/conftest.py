"""Shared test setup: a private cache per session, and the one GPU convention.

A test that needs a GPU carries the ``gpu`` marker (``pytestmark = pytest.mark.gpu`` for a whole
file) or takes the ``gpu`` fixture (the torch device it runs on), which marks it too; without a
GPU such tests skip cleanly, and ``pytest -m gpu`` selects them on a GPU machine. A test of what
happens without a GPU takes the ``no_gpu`` fixture instead: gemmlab then sees no GPU (its
``GEMMLAB_HIDE_GPU`` switch), so the test runs, and means the same, on every machine.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Iterator

import pytest

# Tests never touch the student's real cache.
os.environ.setdefault("GEMMLAB_CACHE", tempfile.mkdtemp(prefix="gemmlab-test-cache-"))
os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
# Loading a notebook's kernel cell would start compiling every variant in the background (notebooks
# 05, 06): tests compile what they use, so CI's two cores are not shared with compiles nobody waits for.
# tests/gemmlab/test_ahead.py turns it on where it is the subject.
os.environ.setdefault("GEMMLAB_COMPILE_JOBS", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from gemmlab.gpu import has_gpu

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
def gpu() -> Any:
    """The CUDA device the test runs on (torch's current one); taking it marks the test ``gpu``."""
    import torch

    return torch.device("cuda", torch.cuda.current_device())


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """gemmlab sees no GPU during the test, whatever the machine has."""
    from gemmlab import gpu as gpu_module

    monkeypatch.setenv(gpu_module.HIDE_ENV, "1")
    gpu_module.refresh()
    yield
    monkeypatch.delenv(gpu_module.HIDE_ENV)
    gpu_module.refresh()
