"""Fixtures of the pool client's tests."""
from __future__ import annotations

from typing import Iterator

import pytest

from gemmlab.remote import connection


@pytest.fixture
def fresh_connection(no_gpu: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A machine without a GPU that is connected to no pool (neither by gemmlab.connect nor by its environment)."""
    monkeypatch.delenv(connection.URL_ENV, raising=False)
    monkeypatch.delenv(connection.TOKEN_ENV, raising=False)
    monkeypatch.delenv(connection.HUB_TOKEN_ENV, raising=False)
    connection.forget()
    yield
    connection.forget()
