"""TiledMMA: an MMA atom repeated over a layout of atoms (and a permutation), as in CuTe.

Follows cute/atom/mma_atom.hpp line by line (``thrfrg_A/B/C``, ``get_layoutA_TV`` ...),
so partitions and TV layouts are exactly what the C++ (and the DSL) produce.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import algebra as A
from .algebra import Layout, make_layout, size
from .atoms import MmaAtom, mma_atom
from .errors import LayoutError
from .printing import cute_str
from .tensor import Tensor, map_tensor
from .tiling import get_flat_coord


def _perm_size(p: Any) -> int:
    return size(p) if A.is_layout(p) else (A.product(p) if A.is_tuple(p) else int(p))


class TiledMMA:
    """CuTe's ``TiledMMA`` (``make_tiled_mma``); DSL ``cute.make_tiled_mma``.

    ``tv_a``/``tv_b``/``tv_c``: CuTe's ``get_layoutA_TV()``/``B``/``C`` (DSL
    ``tiled_mma.tv_layout_A_tiled``...): (thread, value) -> column-major index in the
    (tile_M, tile_K) / (tile_N, tile_K) / (tile_M, tile_N) tile.
    """

    def __init__(self, atom: MmaAtom, atoms_layout: Layout, permutation: tuple) -> None:
        self.atom = atom
        self.atoms_layout = atoms_layout
        self.permutation = permutation
        # ThrLayoutVMNK = tiled_product(AtomThrID, AtomLayoutMNK): (ThrV, ThrM, ThrN, ThrK)
        self.thr_layout_vmnk = A.tiled_product(atom.thr_id, atoms_layout)

    # ---- sizes
    @property
    def num_threads(self) -> int:
        return size(self.thr_layout_vmnk)

    def permutation_mnk(self, i: int) -> Any:
        p = self.permutation[i]
        return self.atom.shape_mnk[i] * size(self.thr_layout_vmnk[i + 1]) if p is None else p

    def tile_size_mnk(self, i: int) -> int:
        return _perm_size(self.permutation_mnk(i))

    @property
    def tile_mnk(self) -> tuple[int, int, int]:
        """Tile covered by one step of the TiledMMA (CuTe's ``tile_size<0..2>(mma)``)."""
        return tuple(self.tile_size_mnk(i) for i in range(3))

    # ---- thread/fragment split of a layout (CuTe's thrfrg_*)
    def _thrfrg(self, layout: Any, i: int, j: int, atom_tv: Layout, ti: int, tj: int) -> Any:
        if A.rank(layout) < 2:
            raise LayoutError(f"a TiledMMA partitions tensors of rank >= 2, not {cute_str(layout)}.")
        t = A.logical_divide(layout, (self.permutation_mnk(i), self.permutation_mnk(j)))
        shp = self.atom.shape_mnk
        atom_tile = (Layout(shp[i]), Layout(shp[j]))
        a = A.zipped_divide(t, atom_tile)                       # ((AtomM,AtomK),(RestM,RestK))
        tv = A.composition(a, (atom_tv, None))                  # ((ThrV,FrgV),(RestM,RestK))
        thr_tile = (None, (Layout(size(self.thr_layout_vmnk[ti])), Layout(size(self.thr_layout_vmnk[tj]))))
        return A.zipped_divide(tv, thr_tile)                    # ((ThrV,(ThrM,ThrK)),(FrgV,(RestM,RestK)))

    def thrfrg_A(self, layout: Any) -> Any:
        return self._thrfrg(layout, 0, 2, self.atom.tv_a, 1, 3)

    def thrfrg_B(self, layout: Any) -> Any:
        return self._thrfrg(layout, 1, 2, self.atom.tv_b, 2, 3)

    def thrfrg_C(self, layout: Any) -> Any:
        return self._thrfrg(layout, 0, 1, self.atom.tv_c, 1, 2)

    # ---- TV layouts of the whole tile
    def _thridx_2_thrid(self) -> Layout:
        v = self.thr_layout_vmnk
        return A.composition(Layout((size(v), 1), (1, 0)), A.right_inverse(make_layout(v, A.complement(v))))

    def _compose0(self, layout: Any, b: Any) -> Any:
        return A.composition(layout, (b, None))

    @property
    def tv_c(self) -> Layout:
        ref = Layout((self.tile_size_mnk(0), self.tile_size_mnk(1)))
        return self._compose0(self.thrfrg_C(ref), self._thridx_2_thrid())

    @property
    def tv_a(self) -> Layout:
        v = self.thr_layout_vmnk
        ref = Layout((self.tile_size_mnk(0), self.tile_size_mnk(2)))
        atile = (None, (Layout((size(v[1]), size(v[2])), (1, 0)), None))
        return self._compose0(self._compose0(self.thrfrg_A(ref), atile), self._thridx_2_thrid())

    @property
    def tv_b(self) -> Layout:
        v = self.thr_layout_vmnk
        ref = Layout((self.tile_size_mnk(1), self.tile_size_mnk(2)))
        btile = (None, (Layout((size(v[1]), size(v[2])), (0, 1)), None))
        return self._compose0(self._compose0(self.thrfrg_B(ref), btile), self._thridx_2_thrid())

    # CuTe's method names, for students reading C++.
    def get_layoutA_TV(self) -> Layout:
        return self.tv_a

    def get_layoutB_TV(self) -> Layout:
        return self.tv_b

    def get_layoutC_TV(self) -> Layout:
        return self.tv_c

    def get_slice(self, thr_idx: int) -> "ThrMMA":
        """CuTe's ``tiled_mma.get_slice(threadIdx.x)`` / DSL ``tiled_mma.get_slice(tidx)``."""
        if not 0 <= thr_idx < self.num_threads:
            raise LayoutError(f"thread {thr_idx} is outside this TiledMMA's {self.num_threads} threads.")
        return ThrMMA(self, get_flat_coord(self.thr_layout_vmnk, thr_idx))

    get_thread_slice = get_slice

    def partition_shape(self, operand: str, shape_: Any) -> Any:
        """CuTe's ``partition_shape_A/B/C(mma, shape)``: the per-thread fragment shape."""
        thr = self.get_slice(0)
        fn = {"A": thr.partition_A, "B": thr.partition_B, "C": thr.partition_C}[operand.upper()]
        return fn(Layout(shape_)).shape

    def __str__(self) -> str:
        return (f"TiledMMA\n  ThrLayoutVMNK: {cute_str(self.thr_layout_vmnk)}\n"
                f"  PermutationMNK: ({','.join(cute_str(self.permutation_mnk(i)) for i in range(3))})\n"
                f"  {self.atom}")


@dataclass
class ThrMMA:
    """CuTe's ``ThrMMA``: one thread's view of a TiledMMA (``get_slice``)."""

    tiled_mma: TiledMMA
    thr_vmnk: tuple

    def _partition(self, x: Any, fn, a: int, b: int) -> Any:
        v = self.thr_vmnk
        crd = (v[0], (v[a], v[b]))

        def partition(t: Tensor) -> Tensor:
            thr_layout = fn(t.layout)
            rest = thr_layout[1][1]
            keep_rest = tuple([None] * A.rank(rest)) if A.is_tuple(rest.shape) else None
            return t.with_layout(thr_layout)(crd, (None, keep_rest))

        return map_tensor(x, partition)

    def partition_A(self, x: Any) -> Any:
        """``thr_mma.partition_A(gA)``: this thread's (MMA_V, MMA_M, MMA_K, ...) slice of A."""
        return self._partition(x, self.tiled_mma.thrfrg_A, 1, 3)

    def partition_B(self, x: Any) -> Any:
        """``thr_mma.partition_B(gB)``: this thread's (MMA_V, MMA_N, MMA_K, ...) slice of B."""
        return self._partition(x, self.tiled_mma.thrfrg_B, 2, 3)

    def partition_C(self, x: Any) -> Any:
        """``thr_mma.partition_C(gC)``: this thread's (MMA_V, MMA_M, MMA_N, ...) slice of C."""
        return self._partition(x, self.tiled_mma.thrfrg_C, 1, 2)

    def partition_fragment_A(self, x: Any) -> Any:
        """Shape of the register fragment ``thr_mma.partition_fragment_A(sA)`` would allocate."""
        return self.partition_A(x).shape

    def partition_fragment_B(self, x: Any) -> Any:
        """Shape of the register fragment ``thr_mma.partition_fragment_B(sB)`` would allocate."""
        return self.partition_B(x).shape

    def partition_fragment_C(self, x: Any) -> Any:
        """Shape of the register fragment ``thr_mma.partition_fragment_C(gC)`` would allocate."""
        return self.partition_C(x).shape


#: Positions a permutation layout may have: far above any tile (its image is listed to check it).
MAX_PERMUTATION_SIZE = 1 << 16


def permutation_problem(permutation: Any) -> str | None:
    """Why ``permutation`` (:func:`make_tiled_mma`'s: per mode ``None``, an int or a Layout) does not reorder its
    modes, or ``None``. A Layout entry of size n must send positions 0..n-1 to 0..n-1, each to a different one; an
    int entry is a tile size above 0.

    Why a check of its own: CuTe builds a TiledMMA from any permutation, and one that reaches outside its tile
    only shows later, as wrong indices. The CuTe DSL's native code can instead end the whole Python process on
    one (a division by zero), so a notebook asks this before it hands a student's permutation to the DSL."""
    if permutation is None:
        return None
    if not isinstance(permutation, (tuple, list)):
        return f"the permutation {permutation!r} is not a tuple of entries for M, N and K"
    for mode, entry in zip("MNK", permutation):
        if entry is None:
            continue
        if not A.is_layout(entry):
            if isinstance(entry, bool) or not isinstance(entry, int) or entry <= 0:
                return f"the permutation's {mode} entry {entry!r} is neither a tile size (an int above 0) nor a Layout"
            continue
        n = size(entry)
        if not isinstance(n, int) or not 0 < n <= MAX_PERMUTATION_SIZE:
            return f"the {mode} permutation {cute_str(entry)} has {n} positions, not 1 to {MAX_PERMUTATION_SIZE:,}"
        image = sorted(int(entry(i)) for i in range(n))
        if image != list(range(n)):
            taken = n - len(set(image))
            return (f"the {mode} permutation {cute_str(entry)} sends its {n} positions to {image[0]}..{image[-1]}"
                    + (f", {taken} of them to a value another position has" if taken else "")
                    + f": a permutation reorders 0..{n - 1}, each position to a different one of them")
    return None


def make_tiled_mma(atom: MmaAtom | str, atoms_layout: Any = (1, 1, 1), permutation: Any = None) -> TiledMMA:
    """CuTe's ``make_tiled_mma(atom, atom_layout, permutations)``; DSL ``cute.make_tiled_mma(atom, atom_layout_mnk, permutation_mnk)``.

    ``atoms_layout``: how many atoms along (M, N, K) -- a shape (column-major) or a Layout,
    padded to rank 3 like CuTe. ``permutation``: ``None`` or a 3-tuple whose entries are
    ``None`` (CuTe's ``_``), an int (tile size) or a Layout (a permutation of that mode),
    like CuTe's ``Tile<...>``.
    """
    if isinstance(atom, str):
        atom = mma_atom(atom)
    lay = atoms_layout if A.is_layout(atoms_layout) else make_layout(atoms_layout)
    if not A.is_tuple(lay.shape):
        lay = Layout((lay.shape,), (lay.stride,))
    if len(lay) > 3:
        raise LayoutError(f"atoms_layout {cute_str(lay)} has more than 3 modes (M, N, K).")
    modes = [lay[i] for i in range(len(lay))] + [Layout(1, 0)] * (3 - len(lay))
    lay = make_layout(*modes)
    perm = tuple(permutation) if permutation is not None else ()
    if len(perm) > 3:
        raise LayoutError("permutation has at most 3 entries (M, N, K).")
    perm = perm + (None,) * (3 - len(perm))
    mma = TiledMMA(atom, lay, perm)
    for i, p in enumerate(perm):
        if p is not None and _perm_size(p) % (atom.shape_mnk[i] * size(mma.thr_layout_vmnk[i + 1])):
            raise LayoutError(
                f"permutation {'MNK'[i]} = {cute_str(p)} must cover a multiple of "
                f"{atom.shape_mnk[i] * size(mma.thr_layout_vmnk[i + 1])} (atom size x atoms in that mode)."
            )
    return mma
