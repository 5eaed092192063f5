"""Which warp plays which role: the lanes a timeline is summarised by (:mod:`.timeline`) and drawn in
(:mod:`.timeline_picture`), in a module of its own so that both read one rule and neither imports the other."""
from __future__ import annotations

from typing import Iterable, Mapping

from .errors import TimelineError


def warp_roles(roles: Mapping[str, Iterable[int]] | None, warps: int) -> dict[int, str]:
    """``{"producer": [0], "consumers": range(4, 12)}`` as warp -> role; warps not named keep 'warp N'."""
    out: dict[int, str] = {}
    for role, members in (roles or {}).items():
        for w in members:
            if not isinstance(w, int) or not 0 <= w < max(warps, 1):
                raise TimelineError(f"role {role!r} names warp {w!r}; the CTA has warps 0 to {warps - 1}.")
            out[w] = str(role)
    return out


__all__ = ["warp_roles"]
