"""The client against the class's real pool service (``pool.service``, fake judges in their own processes):
the HTTP contract both sides keep, end to end without a GPU."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

import gemmlab
from gemmlab.remote import PoolAuthError, connection

from .launchers import tn_kernel, tn_launcher

pytest.importorskip("tornado")
pytestmark = pytest.mark.slow


@pytest.fixture
def service(tmp_path: Path, no_gpu: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, object]]:
    from pool.auth import Authenticator
    from pool.limits import StudentLimits, UsageLedger
    from pool.scheduler import FairScheduler
    from pool.service import Pool, RunningService
    from pool.worker import LocalExecutor
    from tests.pool.helpers import make_class
    from tests.support.fake_judge import fake_judge_command

    connection.forget()
    klass = make_class(tmp_path)
    judges = LocalExecutor(["0"], sandbox=False, memory_limit_mb=4096, command=fake_judge_command())
    pool = Pool(Authenticator(klass.roster, klass.store), UsageLedger(StudentLimits()), FairScheduler(judges, 2, 60.0))
    with RunningService(pool) as running:
        yield running.url, klass


def test_a_check_a_timing_and_a_wrong_kernel_through_the_pool_service(service) -> None:
    url, klass = service
    gemmlab.connect(url, klass.tokens["alice"])
    result = gemmlab.check_gemm(tn_launcher(tn_kernel()), shapes=[(128, 128, 64), (3, 5, 7)])
    assert result.passed and "fake GPU" in result.device and [r.shape for r in result.rows] == [(128, 128, 64),
                                                                                                  (3, 5, 7)]
    wrong = gemmlab.check_gemm(tn_launcher(tn_kernel("gemm_tiny_wrong")), shapes=[(256, 384, 64)])
    assert not wrong.passed and wrong.rows[0].bad_tiles == [(0, 2), (1, 2)]
    timed = gemmlab.bench_gemm(tn_launcher(tn_kernel()), shape=(512, 512, 512), label="mine")
    assert timed.label == "mine" and "shared GPU pool" in timed.device


def test_an_expired_token_is_refused_at_connect(service) -> None:
    url, klass = service
    with pytest.raises(PoolAuthError, match="instructor"):
        gemmlab.connect(url, klass.expired)
