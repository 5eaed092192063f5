"""Fixtures of the pool's tests: a class with tokens, and the service on a free port around any executor."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from pool.auth import Authenticator
from pool.limits import StudentLimits, UsageLedger
from pool.scheduler import Executor, FairScheduler
from pool.service import Pool, RunningService
from pool.worker import LocalExecutor, sandbox_problem
from tests.support.fake_judge import fake_judge_command

from .helpers import Klass, make_class


@pytest.fixture
def klass(tmp_path: Path) -> Klass:
    return make_class(tmp_path)


def fake_judges() -> LocalExecutor:
    """One fake GPU; each request in a real judge process (the fake judge), sandboxed where bubblewrap works."""
    return LocalExecutor(["0"], sandbox=not sandbox_problem(), memory_limit_mb=4096, command=fake_judge_command())


@pytest.fixture
def start(klass: Klass) -> Iterator[Callable[..., RunningService]]:
    """``start(executor=None, slots=2, job_timeout_s=30, prefix="/", **limits)``: the service on 127.0.0.1 and a free port."""
    with contextlib.ExitStack() as stack:
        def run(executor: Executor | None = None, slots: int = 2, job_timeout_s: float = 30.0, prefix: str = "/",
                **limits: Any) -> RunningService:
            scheduler = FairScheduler(executor or fake_judges(), slots, job_timeout_s)
            pool = Pool(Authenticator(klass.roster, klass.store), UsageLedger(StudentLimits(**limits)), scheduler)
            return stack.enter_context(RunningService(pool, prefix=prefix))

        yield run
