"""``python tests/support/fake_pool_service.py serve ...``: the GPU pool's service with the fake judge.

Why a script of the tests: a class's Hub starts its pool as a Hub service, by a command line, and the Hub
tests run on machines without a GPU. This is ``python -m pool serve`` (the same options, the same service)
whose executor runs :func:`tests.support.fake_judge.fake_judge_command` on pretend GPUs (``--gpus``, default
"0"), without Ray; the pool itself knows only the GPU judge. A test points a class at it with the class's
``pool_program`` setting.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # run as a script: the checkout's packages

from pool.__main__ import main, sandboxed  # noqa: E402
from pool.errors import PoolError  # noqa: E402
from pool.scheduler import Executor  # noqa: E402
from pool.worker import LocalExecutor  # noqa: E402
from tests.support.fake_judge import fake_judge_command  # noqa: E402

#: The fake judge's address-space limit (it opens no CUDA context, so one can be set).
MEMORY_LIMIT_MB = 4096


def fake_executor(args: argparse.Namespace) -> Executor:
    """The fake judge on ``--gpus`` (CUDA-index-like labels, default "0"), sandboxed unless ``--no-sandbox``."""
    if args.ray != "off":
        raise PoolError("the fake pool runs without Ray: pass --ray off.")
    return LocalExecutor((args.gpus or "0").split(","), sandboxed(args), MEMORY_LIMIT_MB, fake_judge_command())


if __name__ == "__main__":
    sys.exit(main(make_executor=fake_executor))
