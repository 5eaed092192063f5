"""Resource limits the judge puts on its own work (POSIX ``setrlimit``).

Why a context manager around the compile: the compile runs in a worker process that
``gemmlab.compile`` starts, and a child inherits its parent's limits. Lowering the judge's own
address-space limit while that worker starts bounds the compile's memory; raising it back
afterwards lets CUDA, which reserves far more address space than it uses, start in the judge.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

try:
    import resource
except ImportError:  # pragma: no cover - not POSIX: limits are not available
    resource = None  # type: ignore[assignment]


@contextlib.contextmanager
def address_space_limit(nbytes: int | None) -> Iterator[None]:
    """Lower this process's soft address-space limit to ``nbytes`` for the body (children started inside keep it).

    ``None`` or 0, or a platform without ``setrlimit``, leaves the limit alone.
    """
    if not nbytes or resource is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    lowered = nbytes if hard == resource.RLIM_INFINITY else min(nbytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (lowered, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def current_address_space_limit() -> int | None:
    """The soft address-space limit in bytes, or None when there is none."""
    if resource is None:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


__all__ = ["address_space_limit", "current_address_space_limit"]
