"""Shared test setup: a private cache per session, and GPU tests that skip cleanly without a GPU."""
from __future__ import annotations

import os
import tempfile

import pytest

# Tests never touch the student's real cache.
os.environ.setdefault("GEMMLAB_CACHE", tempfile.mkdtemp(prefix="gemmlab-test-cache-"))
os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
# Loading a notebook's kernel cell would start compiling every variant in the background (notebooks
# 05, 06): tests compile what they use, so CI's two cores are not shared with compiles nobody waits for.
# tests/test_compile_ahead.py turns it on where it is the subject.
os.environ.setdefault("GEMMLAB_COMPILE_JOBS", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from gemmlab.gpu import has_gpu

    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run `pytest -m gpu` on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
