"""GPU buffers that show what a kernel did to memory it was not meant to touch.

A matrix handed to a kernel lives in the middle of a bigger buffer whose *guard zones* hold a
sentinel bit pattern, and an output can be *poisoned* with a NaN whose payload marks it. After
the kernel ran, a changed guard element is an out-of-bounds store and a poisoned element still
there was never written. Everything here works on plain torch tensors with no student code
involved, so the checker in a notebook and a grading process that runs a compiled kernel alone
allocate, poison and inspect buffers the same way (on the GPU, or on the CPU for tests).
"""
from __future__ import annotations

from typing import Any

from gemmlab.dtypes import dtype_name

#: Bytes of guard zone on each side of a guarded matrix.
GUARD_BYTES = 64 * 1024
#: Guard-zone bits per element size: a finite, unlikely value.
SENTINEL_BITS = {2: 0x5A5A, 4: 0x5A5A5A5A}
#: Poison bits per dtype name: a NaN with a marked payload (told apart from a NaN a kernel computed).
POISON_BITS = {"float16": 0x7D5A, "bfloat16": 0x7FA5, "float32": 0x7FA5A5A5}


def int_view_dtype(nbytes: int) -> Any:
    """The signed torch integer dtype of ``nbytes`` bytes, to look at elements as bits."""
    import torch

    return {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[nbytes]


def as_signed(bits: int, nbytes: int) -> int:
    """The value of ``bits`` as the signed integer torch's int views hold."""
    top = 1 << (8 * nbytes - 1)
    return bits - 2 * top if bits & top else bits


class GuardedMatrix:
    """A row-major matrix living in the middle of a bigger buffer with sentinel-filled guard zones.

    ``tensor`` is what a kernel gets; ``bits`` is the whole buffer seen as integers;
    :meth:`body_bits` is the matrix seen as integers. With ``pad`` each row is ``pad`` elements longer
    than the matrix (a leading dimension of columns + pad, as BLAS allows); the padding holds the
    sentinel too, so a kernel that ignores the row pitch writes where :meth:`padding_writes` sees it.
    With ``offset`` the matrix starts that many elements past the guard zone's aligned end (a view into
    a bigger buffer, as ``buffer[offset:]`` makes): a kernel that assumes 16-byte aligned rows is caught.
    """

    def __init__(self, shape: tuple[int, int], dtype: Any, device: Any, pad: int = 0, offset: int = 0) -> None:
        import torch

        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype = dtype
        self.pad = int(pad)
        self.pitch = self.shape[1] + self.pad
        self.elem = torch.empty((), dtype=dtype).element_size()
        self.guard = GUARD_BYTES // self.elem
        self.offset = int(offset)
        self.start = self.guard + self.offset       #: elements before the matrix's first element, all sentinel
        self.numel = self.shape[0] * self.shape[1]
        self.span = self.shape[0] * self.pitch      #: elements from the first row to the last row's padding
        self.buffer = torch.empty(self.start + self.span + self.guard, dtype=dtype, device=device)
        self.bits = self.buffer.view(int_view_dtype(self.elem))
        self.sentinel = as_signed(SENTINEL_BITS[self.elem], self.elem)
        self.bits[: self.start].fill_(self.sentinel)
        self.bits[self.start + self.span:].fill_(self.sentinel)
        self._padding().fill_(self.sentinel)
        self.tensor = self._rows(self.buffer)[:, : self.shape[1]]

    def _rows(self, flat: Any) -> Any:
        """The matrix's rows with their padding, as a (rows, pitch) view of the buffer ``flat`` (or its bits)."""
        return flat[self.start: self.start + self.span].view(self.shape[0], self.pitch)

    def _padding(self) -> Any:
        return self._rows(self.bits)[:, self.shape[1]:]

    def body_bits(self) -> Any:
        """The matrix's elements as integers (a view: writes go through)."""
        return self._rows(self.bits)[:, : self.shape[1]]

    @property
    def poison_value(self) -> int:
        """The poison NaN of this matrix's dtype, as the integer :meth:`body_bits` holds."""
        return as_signed(POISON_BITS[dtype_name(self.dtype)], self.elem)

    def poison(self) -> None:
        """Fill the matrix with the marked NaN, so elements a kernel never wrote can be counted."""
        self.body_bits().fill_(self.poison_value)

    def unwritten(self) -> Any:
        """Bool mask of the elements that still hold the poison."""
        return self.body_bits() == self.poison_value

    def guard_writes(self) -> tuple[int, int]:
        """How many elements of the (before, after) guard zone no longer hold the sentinel."""
        before = int((self.bits[: self.start] != self.sentinel).sum())
        after = int((self.bits[self.start + self.span:] != self.sentinel).sum())
        return before, after

    def padding_writes(self) -> int:
        """How many elements of the rows' padding no longer hold the sentinel (0 without padding)."""
        return int((self._padding() != self.sentinel).sum()) if self.pad else 0


__all__ = [
    "GUARD_BYTES", "GuardedMatrix", "POISON_BITS", "SENTINEL_BITS", "as_signed", "int_view_dtype",
]
