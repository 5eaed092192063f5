"""What the CuTe DSL can do on this machine, for ``gemmlab doctor``.

Each target is tested by a real (tiny) compile rather than trusted from a version table,
and the answer is cached per DSL version so the doctor stays fast.
"""
from __future__ import annotations

import functools
import time
from typing import Any

from gemmlab.compiling import cache as _cache
from ..errors import GemmlabError
from .env import PIN, dsl_version, load

TARGETS = ("sm_80", "sm_90a", "sm_100a")


def _probe(arch: str) -> dict[str, Any]:
    import torch

    from . import _probe as probe
    from .core import compile as dsl_compile

    start = time.perf_counter()
    try:
        k = dsl_compile(probe.fill, torch.empty(32, dtype=torch.float32), 1.0, arch=arch)
    except GemmlabError as exc:
        return {"ok": False, "seconds": round(time.perf_counter() - start, 3), "error": str(exc).splitlines()[0]}
    ok = bool(k.cubin) and f".target {arch}" in k.ptx
    return {"ok": ok, "seconds": round(k.compile_seconds, 3),
            "error": "" if ok else "compiled, but the PTX/cubin is not for this target"}


@functools.lru_cache(maxsize=1)
def _targets(version: str) -> dict[str, dict[str, Any]]:
    key = _cache.key_for("dsl-targets", version, TARGETS)
    stored = _cache.load_json("dsl-info", key)
    if stored is not None:
        return stored
    result = {arch: _probe(arch) for arch in TARGETS}
    if all(r["ok"] for r in result.values()):
        _cache.store_json("dsl-info", key, result)
    return result


def info() -> dict[str, Any]:
    """``{version, importable, reason, can_compile, targets: {arch: {ok, seconds, error}}}``."""
    version = dsl_version()
    report: dict[str, Any] = {"package": "nvidia-cutlass-dsl", "version": version, "pin": PIN,
                              "importable": False, "reason": "", "can_compile": False, "targets": {}}
    try:
        load()
    except GemmlabError as exc:
        report["reason"] = str(exc)
        return report
    report["importable"] = True
    report["targets"] = _targets(version or "?")
    report["can_compile"] = any(t["ok"] for t in report["targets"].values())
    if not report["can_compile"]:
        report["reason"] = "the DSL imports but compiled for no target: " + "; ".join(
            f"{a}: {t['error']}" for a, t in report["targets"].items())
    return report
