"""Persisting L2: the part of L2 that survives other traffic, put back to nothing before GPU work is timed.

Why: since Ampere a context may set aside part of L2 for *persisting* accesses (``cudaLimitPersistingL2CacheSize``)
and mark an address range as persisting through an access-policy window on a stream or a launch. Lines
in that range then outlive the L2 flush between timed calls, so a kernel whose inputs persist reads
them from L2 and reports bandwidth DRAM cannot give (another platform saw 3,530 GB/s reported against
an 864 GB/s peak). :func:`reset` sets the set-aside back to 0 and turns every persisting line back into
a normal one; :func:`tampering` says afterwards whether the limit or a stream's window was set again.
On a GPU without persisting L2 (before Ampere) both are no-ops.
"""
from __future__ import annotations

from typing import Any

from gemmlab.running.device import checked, driver


def limit_bytes() -> int:
    """The current context's persisting-L2 set-aside (bytes; 0 on a GPU without persisting L2)."""
    d = driver()
    result, value = d.cuCtxGetLimit(d.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
    if result == d.CUresult.CUDA_ERROR_UNSUPPORTED_LIMIT:
        return 0
    return int(checked((result, value), "reading the persisting-L2 limit"))


def window_bytes(stream: Any) -> int:
    """Bytes covered by the access-policy window set on ``stream`` (a ``CUstream`` or its handle as an int);
    0 for a stream that carries no attributes (the legacy default stream)."""
    d = driver()
    attr = d.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
    result, value = d.cuStreamGetAttribute(d.CUstream(int(stream)), attr)
    if int(result) != 0:
        return 0
    return int(value.accessPolicyWindow.num_bytes)


def clear_window(stream: Any) -> None:
    """Remove any access-policy window from ``stream``."""
    d = driver()
    attr = d.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
    value = d.CUstreamAttrValue()
    value.accessPolicyWindow.base_ptr = 0
    value.accessPolicyWindow.num_bytes = 0
    value.accessPolicyWindow.hitRatio = 0.0
    value.accessPolicyWindow.hitProp = d.CUaccessProperty.CU_ACCESS_PROPERTY_NORMAL
    value.accessPolicyWindow.missProp = d.CUaccessProperty.CU_ACCESS_PROPERTY_NORMAL
    checked(d.cuStreamSetAttribute(d.CUstream(int(stream)), attr, value), "clearing the stream's L2 access policy")


def reset(stream: Any = None) -> None:
    """No persisting L2 from here on: the set-aside back to 0, every persisting line made normal, and
    ``stream``'s access-policy window (if given) removed. Call it with the GPU idle: the reset is not
    ordered with work queued on streams."""
    d = driver()
    (result,) = d.cuCtxSetLimit(d.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0)
    if result == d.CUresult.CUDA_ERROR_UNSUPPORTED_LIMIT:
        return                                  # no persisting L2 on this GPU
    checked(result, "setting the persisting-L2 limit to 0")
    checked(d.cuCtxResetPersistingL2Cache(), "resetting persisting L2 lines")
    if stream is not None and window_bytes(stream):
        clear_window(stream)


def tampering(stream: Any = None) -> str:
    """'' when no persisting L2 was set up since :func:`reset`, else what was (for an error message)."""
    found = []
    limit = limit_bytes()
    if limit:
        found.append(f"the persisting-L2 limit was set to {limit:,} bytes")
    if stream is not None:
        window = window_bytes(stream)
        if window:
            found.append(f"the stream carries an L2 access-policy window over {window:,} bytes")
    return "; ".join(found)


__all__ = ["clear_window", "limit_bytes", "reset", "tampering", "window_bytes"]
