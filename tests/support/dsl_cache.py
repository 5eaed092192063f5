"""Prove a DSL cache hit by what did not happen: the DSL's compiler is not called.

Why: timing a cache hit depends on how busy the machine is; a compiler replaced by one that fails the test
does not.
"""
from __future__ import annotations

import pytest


def refuse_dsl_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, a call that would compile fails the test: a cache hit must not reach the DSL's compiler."""
    from gemmlab.dsl.env import load

    def refuse(*args, **kwargs):
        pytest.fail("compiled again where the cache should have answered")

    monkeypatch.setattr(load()[1], "compile", refuse)
