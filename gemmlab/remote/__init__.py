"""The class's shared GPU pool, from a notebook on a machine without a GPU.

``gemmlab.connect(url, token)`` (or ``GEMMLAB_POOL`` and ``GEMMLAB_POOL_TOKEN``) and then
``check_gemm``/``bench_gemm`` as always: the GEMM function is called here on stand-in tensors and
its one kernel launch recorded (:mod:`.recording`), the launches become judge requests
(:mod:`.requests`), the pool's judge compiles and runs exactly those on its GPU with its own
inputs (:mod:`.transport`: HTTP, bearer token), and the results come back as the usual result
objects naming the pool's GPU (:mod:`.gemm`). ``gemmlab.disconnect()`` runs everything here again.
"""
from __future__ import annotations

from .connection import Pool, connect, current, disconnect, pool_for_work
from .errors import (PoolAuthError, PoolBusyError, PoolError, PoolKernelError, PoolRequestError, PoolUnavailableError,
                     UnsendableCallError)

__all__ = ["Pool", "PoolAuthError", "PoolBusyError", "PoolError", "PoolKernelError", "PoolRequestError",
           "PoolUnavailableError", "UnsendableCallError", "connect", "current", "disconnect", "pool_for_work"]
