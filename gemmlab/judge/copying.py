"""A judge-built copy function: a copy kernel's recorded launch (or DSL plan) as ``fn(src, dst[, who])``.

Why: :func:`gemmlab.check_copy` takes a Python function, as check_gemm does. In the judge that
function must be the judge's own, launching only what was recorded. A copy's tensors take the
GEMM roles of a recording: src is ``A``, the who map ``B``, dst the output; the problem size is
(M, N, 1).
"""
from __future__ import annotations

from typing import Any

from . import binding
from .dsl_replay import ReplayLauncher
from .launcher import TrustedLauncher

#: Elements of the placeholder tensor a DSL plan without a who map gets in the who map's place.
_PLACEHOLDER_ELEMENTS = 4


class CopyLauncher:
    """``fn(src, dst)`` or, with ``who``, ``fn(src, dst, who)``: one recorded launch (or plan) of a copy kernel."""

    def __init__(self, launcher: TrustedLauncher | ReplayLauncher, who: bool) -> None:
        self._launcher = launcher
        self._who = who
        self._placeholder: Any = None

    def __call__(self, src: Any, dst: Any, who: Any = None) -> None:
        if (who is not None) != self._who:
            raise TypeError("the copy was recorded with a who map" if self._who else "the copy takes no who map")
        M, N = (int(v) for v in src.shape)
        if isinstance(self._launcher, ReplayLauncher):
            if who is None:
                if self._placeholder is None:
                    import torch

                    self._placeholder = torch.zeros(_PLACEHOLDER_ELEMENTS, dtype=torch.int32, device=src.device)
                who = self._placeholder
            self._launcher.replay((M, N, 1), [src, who, dst])
        else:
            self._launcher.launch(binding.Operands(src, who, dst, M, N, 1))


__all__ = ["CopyLauncher"]
