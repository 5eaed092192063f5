"""What one launch of a compiled kernel is, as data that crosses a process boundary.

Why: the grader's kernel judge runs a student's compiled kernel in a process with no student
Python around it. That process gets the cubin and a :class:`LaunchContract`: which function, its
parameters (kinds and C types, so arguments are packed and checked as a notebook's call would be),
and the grid, block and dynamic shared memory. ``to_dict``/``from_dict`` are plain JSON values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gemmlab.errors import LaunchError
from gemmlab.compiling.signature import Param

#: A recorded CuTe DSL launch (:mod:`gemmlab.dsl.recording`) marks each TMA descriptor parameter with
#: these 8 bytes and the descriptor's index (8 more bytes); the replay encodes it again (``gemmlab.judge.dsl_replay``).
TENSOR_MAP_MARK = b"GLTMAP\0\0"
TENSOR_MAP_BYTES = 128


def span_bytes(shape: Any, stride: Any, itemsize: int) -> int:
    """Bytes from a strided view's first element to one past its last (0 for an empty view): the buffer a
    recorded DSL call's tensor occupies, the same on the recording and the replaying side."""
    if any(n == 0 for n in shape):
        return 0
    return (sum((n - 1) * st for n, st in zip(shape, stride)) + 1) * itemsize


@dataclass(frozen=True)
class TensorMapRecord:
    """The arguments of one ``cuTensorMapEncodeTiled`` call, but the tensor map it fills in: recorded where a DSL
    launch is recorded, encoded again over the judge's own address where it is replayed."""

    address: int
    dtype: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]          # bytes, for dimensions 1..rank-1
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


def _dims3(value: Any) -> tuple[int, int, int]:
    dims = tuple(int(v) for v in value)
    if len(dims) != 3:
        raise LaunchError(f"a launch contract's grid and block have three dimensions, not {list(value)!r}.")
    return dims  # type: ignore[return-value]


@dataclass(frozen=True)
class LaunchContract:
    """One kernel launch: the function (``name``, lowered ``symbol``, ``arch``), its parameters and geometry."""

    name: str
    symbol: str
    arch: str
    params: tuple[Param, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: strings, ints, bools, None and lists only."""
        return {
            "name": self.name, "symbol": self.symbol, "arch": self.arch,
            "params": [{"name": p.name, "kind": p.kind, "ctype": p.ctype, "const": p.const, "dtype": p.dtype,
                        "nbytes": p.nbytes} for p in self.params],
            "grid": list(self.grid), "block": list(self.block), "smem": self.smem,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LaunchContract":
        """The contract :meth:`to_dict` wrote; a malformed one raises LaunchError naming what is missing."""
        try:
            params = tuple(Param(str(p["name"]), p["kind"], str(p["ctype"]), bool(p["const"]),
                                 None if p["dtype"] is None else str(p["dtype"]), int(p["nbytes"]))
                           for p in data["params"])
            return cls(str(data["name"]), str(data["symbol"]), str(data["arch"]), params,
                       _dims3(data["grid"]), _dims3(data["block"]), int(data.get("smem", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise LaunchError(f"not a launch contract ({type(exc).__name__}: {exc}); write it with "
                              "LaunchContract.to_dict().") from None


__all__ = ["LaunchContract"]
