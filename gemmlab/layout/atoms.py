"""MMA and copy atoms: the thread/value layouts of single hardware instructions.

Each layout is copied from CuTe's traits (cute/atom/mma_traits_sm80.hpp,
mma_traits_sm90_gmma.hpp, copy_traits_sm75/sm80/sm90.hpp, copy_traits.hpp); the tests
check them against the PTX ISA tables and against the CuTe DSL.

MMA TV layouts map (thread, value) -> column-major index in the M x K (A), N x K (B) and
M x N (C) tile of one instruction. Copy layouts map (thread, value) -> bit, as in CuTe.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .algebra import Layout, recast_layout, size
from .errors import LayoutError
from .evaluate import layout_to_array
from .printing import cute_str

# ------------------------------------------------------------------- MMA atoms

# (T32,V4) -> (M16,N8), the SM80 accumulator / 16x8 operand fragment.
_SM80_16x8_ROW = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))
# (T32,V2) -> (M8,N8)
_SM80_8x8_ROW = Layout(((4, 8), 2), ((16, 1), 8))
_SM80_16x8x16_A = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
_SM80_16x8x16_B = Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))


@dataclass(frozen=True)
class MmaAtom:
    """One MMA instruction as CuTe's ``MMA_Atom<MMA_Traits<Op>>`` sees it.

    ``tv_a``/``tv_b``/``tv_c`` are CuTe's ``ALayout``/``BLayout``/``CLayout`` (DSL:
    ``atom.tv_layout_A`` ...): (thread, value) -> column-major index in the (M,K), (N,K),
    (M,N) tile of shape ``shape_mnk``.
    """

    name: str
    shape_mnk: tuple[int, int, int]
    num_threads: int
    tv_a: Layout
    tv_b: Layout
    tv_c: Layout
    ab_type: str = "f16"
    c_type: str = "f32"
    operands_in_smem: bool = False  # wgmma _SS: A and B are read from shared memory

    @property
    def thr_id(self) -> Layout:
        """CuTe's ``ThrID``: logical thread -> thread index (identity for these atoms)."""
        return Layout(self.num_threads)

    def __str__(self) -> str:
        m, n, k = self.shape_mnk
        return (f"MMA_Atom {self.name}: {m}x{n}x{k}, {self.num_threads} threads\n"
                f"  ALayout {cute_str(self.tv_a)}\n  BLayout {cute_str(self.tv_b)}\n  CLayout {cute_str(self.tv_c)}")


def _sm80(name: str, k: int, ab: str, c: str) -> MmaAtom:
    if k == 16:
        return MmaAtom(name, (16, 8, 16), 32, _SM80_16x8x16_A, _SM80_16x8x16_B, _SM80_16x8_ROW, ab, c)
    return MmaAtom(name, (16, 8, 8), 32, _SM80_16x8_ROW, _SM80_8x8_ROW, _SM80_16x8_ROW, ab, c)


_SM80_ATOMS = {
    "SM80_16x8x8_F16F16F16F16_TN": (8, "f16", "f16"),
    "SM80_16x8x16_F16F16F16F16_TN": (16, "f16", "f16"),
    "SM80_16x8x8_F32F16F16F32_TN": (8, "f16", "f32"),
    "SM80_16x8x16_F32F16F16F32_TN": (16, "f16", "f32"),
    "SM80_16x8x8_F32BF16BF16F32_TN": (8, "bf16", "f32"),
    "SM80_16x8x16_F32BF16BF16F32_TN": (16, "bf16", "f32"),
}

_SM90_RE = re.compile(r"^SM90_64x(\d+)x16_(F32F16F16|F16F16F16|F32BF16BF16)_SS$")
_SM90_TYPES = {"F32F16F16": ("f16", "f32"), "F16F16F16": ("f16", "f16"), "F32BF16BF16": ("bf16", "f32")}


def gmma_c_layout(n: int) -> Layout:
    """CuTe's ``GMMA::CLayout_64xN``: the wgmma accumulator, 128 threads x (N/2) values."""
    return Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))


def gmma_ab_layout(mn: int, k: int) -> Layout:
    """CuTe's ``GMMA::ABLayout<MN,K>``: every thread of the warpgroup sees the whole smem tile."""
    return Layout((128, (mn, k)), (0, (1, mn)))


def _sm90(name: str, n: int, kind: str) -> MmaAtom:
    ab, c = _SM90_TYPES[kind]
    return MmaAtom(name, (64, n, 16), 128, gmma_ab_layout(64, 16), gmma_ab_layout(n, 16),
                   gmma_c_layout(n), ab, c, operands_in_smem=True)


def mma_atom_names() -> list[str]:
    """Names :func:`mma_atom` accepts (SM90 ones for every N in 8, 16, ..., 256)."""
    sm90 = [f"SM90_64x{n}x16_{kind}_SS" for kind in _SM90_TYPES for n in range(8, 257, 8)]
    return ["UniversalFMA", *_SM80_ATOMS, *sm90]


def mma_atom(name: str) -> MmaAtom:
    """CuTe's ``MMA_Atom<Op>{}`` by the op's C++ name, e.g. ``"SM80_16x8x16_F32F16F16F32_TN"``.

    DSL: ``cute.make_mma_atom(cute.nvgpu.warp.MmaF16BF16Op(Float16, Float32, (16, 8, 16)))``
    or, for wgmma, ``cute.nvgpu.warpgroup.MmaF16BF16Op(...)``. Also ``"UniversalFMA"``
    (one thread, 1x1x1) and ``"SM90_64x{N}x16_F32F16F16_SS"`` for N = 8, 16, ..., 256.
    """
    if name == "UniversalFMA":
        one = Layout((1, 1), (1, 1))
        return MmaAtom(name, (1, 1, 1), 1, one, one, one, "f32", "f32")
    if name in _SM80_ATOMS:
        k, ab, c = _SM80_ATOMS[name]
        return _sm80(name, k, ab, c)
    m = _SM90_RE.match(name)
    if m:
        n = int(m.group(1))
        if n % 8 or not 8 <= n <= 256:
            raise LayoutError(f"{name}: wgmma needs N to be a multiple of 8 between 8 and 256.")
        return _sm90(name, n, m.group(2))
    raise LayoutError(
        f"unknown MMA atom {name!r}. Known: UniversalFMA, {', '.join(_SM80_ATOMS)}, "
        "and SM90_64x{N}x16_{F32F16F16|F16F16F16|F32BF16BF16}_SS for N = 8..256 in steps of 8."
    )


# ------------------------------------------------------------------ copy atoms

_LDSM_N_SRC = {1: Layout(((8, 4), 128), ((128, 0), 1)),
               2: Layout(((16, 2), 128), ((128, 0), 1)),
               4: Layout((32, 128), (128, 1))}
_LDSM_N_DST = {1: Layout((32, 32), (32, 1)),
               2: Layout((32, (32, 2)), (32, (1, 1024))),
               4: Layout((32, (32, 4)), (32, (1, 1024)))}
_LDSM_T_DST = {2: Layout(((4, 8), (16, 2)), ((256, 16), (1, 128))),
               4: Layout(((4, 8), (16, 2, 2)), ((256, 16), (1, 128, 1024))),
               8: Layout(((4, 8), (16, 2, 4)), ((256, 16), (1, 128, 1024)))}


@dataclass(frozen=True)
class CopyAtom:
    """One copy instruction as CuTe's ``Copy_Atom<Copy_Traits<Op>, T>`` sees it.

    ``src_bits``/``dst_bits``/``ref_bits``: CuTe's ``SrcLayout``/``DstLayout``/``RefLayout``
    (thread, value) -> bit. ``tv_src``/``tv_dst``/``tv_ref``: the same in elements of
    ``element_bits`` (CuTe's ``ValLayoutSrc`` ... = ``recast_layout<uint1_t, T>``).
    ``smem_rows`` (ldmatrix/stmatrix only): for each lane, which 16-byte shared-memory
    row its address names (matrix ``r // 8``, row ``r % 8``), or -1 if the hardware
    ignores that lane's address.
    """

    name: str
    num_threads: int
    src_bits: Layout
    dst_bits: Layout
    ref_bits: Layout
    element_bits: int = 16
    smem_rows: np.ndarray | None = field(default=None, compare=False)

    def _elems(self, bits: Layout) -> Layout:
        try:
            return recast_layout(bits, 1, self.element_bits)
        except LayoutError:
            raise LayoutError(
                f"{self.name} cannot move {self.element_bits}-bit elements: its bit layout "
                f"{cute_str(bits)} does not split into them."
            ) from None

    @property
    def tv_src(self) -> Layout:
        return self._elems(self.src_bits)

    @property
    def tv_dst(self) -> Layout:
        return self._elems(self.dst_bits)

    @property
    def tv_ref(self) -> Layout:
        return self._elems(self.ref_bits)

    @property
    def num_values(self) -> int:
        """Values per thread in the reference layout (CuTe's ``AtomNumVal``)."""
        return size(self.tv_ref[1])

    def with_element_bits(self, element_bits: int) -> "CopyAtom":
        """The same instruction moving elements of another size (CuTe: ``Copy_Atom<Op, T>``)."""
        atom = CopyAtom(self.name, self.num_threads, self.src_bits, self.dst_bits, self.ref_bits,
                        element_bits, self.smem_rows)
        atom.tv_src, atom.tv_dst  # validate now, not at first use
        return atom


def _smem_rows(smem_layout: Layout, n_mat: int) -> np.ndarray:
    """Lane -> 128-bit row its address names; lanes beyond 8*n_mat are ignored by the hardware."""
    first_bit = layout_to_array(smem_layout)[:, 0]
    rows = first_bit // 128
    rows[np.arange(32) >= 8 * n_mat] = -1
    return rows


_COPY_RE = re.compile(r"^(SM75_U32x([124])_LDSM_N|SM75_U16x([248])_LDSM_T|SM90_U32x([124])_STSM_N|"
                      r"SM90_U16x([248])_STSM_T|UniversalCopy|SM80_CP_ASYNC_CACHEALWAYS|SM80_CP_ASYNC_CACHEGLOBAL)$")


def copy_atom_names() -> list[str]:
    """Names :func:`copy_atom` accepts."""
    return ([f"SM75_U32x{n}_LDSM_N" for n in (1, 2, 4)] + [f"SM75_U16x{n}_LDSM_T" for n in (2, 4, 8)]
            + [f"SM90_U32x{n}_STSM_N" for n in (1, 2, 4)]
            + ["UniversalCopy", "SM80_CP_ASYNC_CACHEALWAYS", "SM80_CP_ASYNC_CACHEGLOBAL"])


def copy_atom(name: str, bits: int | None = None, element_bits: int = 16) -> CopyAtom:
    """CuTe's ``Copy_Atom<Op, T>{}`` by the op's C++ name; DSL ``cute.make_copy_atom(op, dtype)``.

    ``bits``: width of one copy for ``UniversalCopy`` (8..128) and the ``SM80_CP_ASYNC_*``
    ops (32, 64, 128), i.e. C++ ``UniversalCopy<uint128_t>``. ``element_bits``: size of the
    element type ``T`` (16 for half/bf16), which sets ``tv_src``/``tv_dst``/``tv_ref``.
    """
    m = _COPY_RE.match(name)
    if not m:
        raise LayoutError(f"unknown copy atom {name!r}. Known: {', '.join(copy_atom_names())}.")
    if m.group(2):
        n = int(m.group(2))
        atom = CopyAtom(name, 32, _LDSM_N_SRC[n], _LDSM_N_DST[n], _LDSM_N_DST[n], element_bits,
                        _smem_rows(_LDSM_N_SRC[n], n))
    elif m.group(3):
        n = int(m.group(3))
        src = _LDSM_N_SRC[n // 2]
        atom = CopyAtom(name, 32, src, _LDSM_T_DST[n], _LDSM_T_DST[n], element_bits, _smem_rows(src, n // 2))
    elif m.group(4):
        n = int(m.group(4))
        atom = CopyAtom(name, 32, _LDSM_N_DST[n], _LDSM_N_SRC[n], _LDSM_N_DST[n], element_bits,
                        _smem_rows(_LDSM_N_SRC[n], n))
    elif m.group(5):
        raise LayoutError(f"{name} is not available in gemmlab yet; use SM90_U32x{{1,2,4}}_STSM_N.")
    else:
        allowed = (8, 16, 32, 64, 128) if name == "UniversalCopy" else (32, 64, 128)
        if bits is None:
            raise LayoutError(f"{name} needs bits=, the width of one copy: one of {allowed}.")
        if bits not in allowed:
            raise LayoutError(f"{name} copies {allowed} bits at a time, not {bits}.")
        one = Layout((1, bits), (1, 1))
        atom = CopyAtom(f"{name}<{bits}b>", 1, one, one, one, element_bits)
    return atom.with_element_bits(element_bits)
