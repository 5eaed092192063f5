"""Shared-memory bank model: how many wavefronts one warp-wide instruction costs.

The numbers are meant to be the ones Nsight Compute reports
(``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum`` and
``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum``), so a student can
predict a profile before running it.

The model (every uncertain part is a field of :class:`Model`, so a device measurement
can correct it without touching the code; ``benchmarks/bank_validation.py`` measures):

* Shared memory has 32 banks of 4 bytes; byte address ``a`` lies in word ``a // 4`` and
  bank ``(a // 4) % 32``.
* The lanes of one instruction are cut into *phases* that each move at most 128 bytes:
  all 32 lanes for 32-bit accesses, half-warps for 64-bit, quarter-warps for 128-bit;
  for ``ldmatrix``/``stmatrix`` each 8x8 matrix (8 row addresses of 16 bytes) is a phase.
* Within a phase, a bank serves one distinct word per wavefront; lanes touching the same
  word share it (broadcast on loads, one winner on stores). A phase therefore costs
  ``max over banks of (distinct words in that bank)`` wavefronts; an empty phase costs 0.
* Ideal (what ncu subtracts to count conflicts; conflicts = wavefronts - ideal): for stores,
  the number of non-empty phases; for loads, the wavefronts the active lanes need at least,
  ceil(active lanes / lanes per phase), never more than were spent. Measured on an H100: a
  64-bit load with only the even lanes active takes 2 wavefronts (one per half-warp) and
  ncu counts 1 of them as a conflict; the same store counts none.
* Uniform-pair packing (described by NVIDIA for LDS.64/LDS.128 loads): if every pair of
  active lanes (n, n^1), or every pair (n, n^2), reads the same address, two lanes' data
  return together, so the phases are twice as wide.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from gemmlab import layout as L
from gemmlab.errors import GemmlabError

NUM_BANKS = 32
BANK_BYTES = 4
WARP = 32
#: Largest shared-memory byte offset we accept (228 KiB on H100, rounded up).
MAX_SMEM_BYTES = 1 << 18


class BankModelError(GemmlabError):
    """The addresses or op given to the bank model do not describe a valid instruction."""


@dataclass(frozen=True)
class OpSpec:
    """What one op moves: bytes per address, how many addresses count, load or store."""

    name: str
    kind: str  # "ld" or "st"
    bytes_per_address: int
    num_addresses: int  # lanes whose address is used (8*N for ldmatrix .xN)
    matrix: bool  # ldmatrix/stmatrix: each group of 8 addresses is one phase


OPS: dict[str, OpSpec] = {}
for _kind in ("ld", "st"):
    for _bits in (32, 64, 128):
        OPS[f"{_kind}{_bits}"] = OpSpec(f"{_kind}{_bits}", _kind, _bits // 8, WARP, False)
    for _n in (1, 2, 4):
        _name = f"{'ldmatrix' if _kind == 'ld' else 'stmatrix'}.x{_n}"
        OPS[_name] = OpSpec(_name, _kind, 16, 8 * _n, True)


@dataclass(frozen=True)
class Model:
    """The assumptions of the bank model; change them here if the device disagrees."""

    #: lanes that share one phase, by bytes per lane (at most 128 bytes per phase).
    phase_lanes: tuple[tuple[int, int], ...] = ((4, 32), (8, 16), (16, 8))
    #: widen phases x2 for LDS.64/128 when lane pairs (n, n^1) or (n, n^2) share addresses.
    uniform_pair_packing: bool = True
    #: ops the pair packing applies to.
    pair_packing_ops: tuple[str, ...] = ("ld64", "ld128")
    #: kinds whose ideal counts lanes, not non-empty phases (see the module docstring).
    ideal_by_lanes_kinds: tuple[str, ...] = ("ld",)

    def lanes_per_phase(self, spec: OpSpec) -> int:
        if spec.matrix:
            return 8
        return dict(self.phase_lanes)[spec.bytes_per_address]


DEFAULT_MODEL = Model()


@dataclass(frozen=True)
class Wavefront:
    """One wavefront: for each of the 32 banks, the word served and the lanes it serves."""

    index: int
    phase: int
    words: tuple[int | None, ...]  # per bank: word index served, or None
    lanes: tuple[tuple[int, ...], ...]  # per bank: lanes that touch that word
    conflicted_banks: tuple[int, ...]  # banks that needed more than one wavefront in this phase


@dataclass
class Access:
    """One warp-wide shared-memory instruction as the model sees it."""

    op: str
    wavefronts: int
    ideal_wavefronts: int
    conflicts: int
    addresses: tuple[int | None, ...]
    model: Model = field(default=DEFAULT_MODEL, repr=False)

    @functools.cached_property
    def wavefront_detail(self) -> list[Wavefront]:
        """Which lanes land in which bank, wavefront by wavefront (computed on first use)."""
        return _detail(self.addresses, OPS[self.op], self.model)

    @property
    def way(self) -> float:
        """Wavefronts per ideal wavefront ("n-way conflict" in the usual wording)."""
        return self.wavefronts / self.ideal_wavefronts if self.ideal_wavefronts else 0.0


@dataclass
class TileReport:
    """All instructions of one tile-level copy: totals, per instruction, and the worst one."""

    op: str
    wavefronts: int
    ideal_wavefronts: int
    conflicts: int
    instructions: list[Access]

    @property
    def worst(self) -> Access | None:
        """The instruction with the most conflicts (first one on a tie)."""
        if not self.instructions:
            return None
        return max(self.instructions, key=lambda a: (a.conflicts, -self.instructions.index(a)))

    @property
    def way(self) -> float:
        return self.wavefronts / self.ideal_wavefronts if self.ideal_wavefronts else 0.0

    def __str__(self) -> str:
        return (f"{len(self.instructions)} x {self.op}: {self.wavefronts} wavefronts, "
                f"ideal {self.ideal_wavefronts}, conflicts {self.conflicts} ({self.way:.2f}-way)")


# --------------------------------------------------------------------------- validation

def _spec(op: str) -> OpSpec:
    try:
        return OPS[op]
    except (KeyError, TypeError):
        raise BankModelError(
            f"unknown shared-memory op {op!r}; use one of: {', '.join(OPS)}") from None


def _to_matrix(rows: Sequence[Sequence[Any]] | np.ndarray, spec: OpSpec) -> np.ndarray:
    """Lane addresses of many instructions -> int64 array (n, 32), -1 for inactive lanes."""
    if isinstance(rows, np.ndarray) and rows.ndim == 2 and rows.dtype.kind in "iu":
        arr = rows.astype(np.int64, copy=False)
        if arr.shape[1] != WARP:
            raise BankModelError(f"{spec.name}: expected 32 lane addresses per instruction, "
                                 f"got {arr.shape[1]}")
    else:
        out = []
        for i, row in enumerate(rows):
            row = list(row)
            if spec.matrix and len(row) == spec.num_addresses:
                row = row + [None] * (WARP - len(row))
            if len(row) != WARP:
                raise BankModelError(
                    f"{spec.name}: instruction {i} has {len(row)} lane addresses; give 32 "
                    f"(one per lane, None for an inactive lane)")
            vals = []
            for lane, a in enumerate(row):
                if a is None:
                    vals.append(-1)
                    continue
                try:
                    ai = int(a)
                except (TypeError, ValueError):
                    raise BankModelError(f"{spec.name}: lane {lane} address {a!r} is not an "
                                         f"integer byte offset") from None
                if ai != a or ai < 0:
                    raise BankModelError(f"{spec.name}: lane {lane} address {a!r} must be a "
                                         f"non-negative integer byte offset (None = inactive)")
                vals.append(ai)
            out.append(vals)
        arr = np.array(out, dtype=np.int64).reshape(len(out), WARP)
    if spec.matrix:
        arr = arr.copy()
        arr[:, spec.num_addresses:] = -1  # lanes past 8*N give no address
    active = arr >= 0
    if (arr < -1).any():
        raise BankModelError(f"{spec.name}: negative addresses; use None for inactive lanes")
    width = spec.bytes_per_address
    bad = active & (arr % width != 0)
    if bad.any():
        i, lane = map(int, np.argwhere(bad)[0])
        raise BankModelError(
            f"{spec.name}: lane {lane} address {int(arr[i, lane])} is not {width}-byte aligned "
            f"(a {width * 8}-bit shared access needs an address that is a multiple of {width}); "
            f"the GPU would fault with 'misaligned address'")
    big = active & (arr >= MAX_SMEM_BYTES)
    if big.any():
        i, lane = map(int, np.argwhere(big)[0])
        raise BankModelError(f"{spec.name}: lane {lane} address {int(arr[i, lane])} is beyond "
                             f"shared memory ({MAX_SMEM_BYTES} bytes); give byte offsets into "
                             f"shared memory, not element indices or global pointers")
    return arr


# --------------------------------------------------------------------------- the model

def _phase_of_lanes(arr: np.ndarray, spec: OpSpec, model: Model) -> np.ndarray:
    """Phase index of each lane of each instruction, shape (n, 32)."""
    lanes = np.arange(WARP)
    per = model.lanes_per_phase(spec)
    base = np.broadcast_to(lanes // per, arr.shape).copy()
    if model.uniform_pair_packing and spec.name in model.pair_packing_ops and per < WARP:
        active = arr >= 0
        packed = np.zeros(arr.shape[0], dtype=bool)
        for partner in (1, 2):
            other = arr[:, lanes ^ partner]
            both = active & active[:, lanes ^ partner]
            packed |= np.all(~both | (arr == other), axis=1) & both.any(axis=1)
        if packed.any():
            base[packed] = lanes // (per * 2)
    return base


def _count(arr: np.ndarray, spec: OpSpec, model: Model) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, ideal) per instruction, vectorised over instructions."""
    n = arr.shape[0]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    phases = _phase_of_lanes(arr, spec, model)
    nphase = WARP
    words_per = spec.bytes_per_address // BANK_BYTES
    active = arr >= 0
    inst, lane = np.nonzero(active)
    word0 = arr[inst, lane] // BANK_BYTES
    words = (word0[:, None] + np.arange(words_per)[None, :]).ravel()
    group = np.repeat(inst * nphase + phases[inst, lane], words_per)
    span = int(words.max()) + 1 if words.size else 1
    keys = np.unique(group * span + words)
    g = keys // span
    b = (keys % span) % NUM_BANKS
    counts = np.bincount(g * NUM_BANKS + b, minlength=n * nphase * NUM_BANKS)
    per_phase = counts.reshape(n, nphase, NUM_BANKS).max(axis=2)
    wavefronts = per_phase.sum(axis=1)
    if spec.kind not in model.ideal_by_lanes_kinds or spec.matrix:
        return wavefronts, (per_phase > 0).sum(axis=1)
    lanes_per_phase = WARP // (phases[:, WARP - 1] + 1)  # doubled where pairs were packed
    return wavefronts, np.minimum(wavefronts, -(-active.sum(axis=1) // lanes_per_phase))


def _detail(addresses: Sequence[int | None], spec: OpSpec, model: Model) -> list[Wavefront]:
    """Assign each distinct word of a bank to successive wavefronts of its phase."""
    arr = np.array([[-1 if a is None else a for a in addresses]], dtype=np.int64)
    if spec.matrix:
        arr[:, spec.num_addresses:] = -1
    phases = _phase_of_lanes(arr, spec, model)[0]
    words_per = spec.bytes_per_address // BANK_BYTES
    out: list[Wavefront] = []
    for p in sorted({int(phases[l]) for l in range(WARP) if arr[0, l] >= 0}):
        # bank -> ordered {word: [lanes]} in first-touch order
        banks: list[dict[int, list[int]]] = [dict() for _ in range(NUM_BANKS)]
        for l in range(WARP):
            if arr[0, l] < 0 or phases[l] != p:
                continue
            for k in range(words_per):
                w = int(arr[0, l]) // BANK_BYTES + k
                banks[w % NUM_BANKS].setdefault(w, []).append(l)
        depth = max(len(b) for b in banks)
        conflicted = tuple(i for i, b in enumerate(banks) if len(b) > 1)
        for d in range(depth):
            words: list[int | None] = []
            lanes: list[tuple[int, ...]] = []
            for b in banks:
                items = list(b.items())
                if d < len(items):
                    words.append(items[d][0])
                    lanes.append(tuple(items[d][1]))
                else:
                    words.append(None)
                    lanes.append(())
            out.append(Wavefront(len(out), p, tuple(words), tuple(lanes), conflicted))
    return out


def analyze(lane_byte_addresses: Sequence[int | None], op: str,
            model: Model = DEFAULT_MODEL) -> Access:
    """Model ONE warp-wide shared-memory instruction.

    ``lane_byte_addresses``: 32 byte offsets into shared memory as each lane gives them
    (None for an inactive lane). For ``ldmatrix``/``stmatrix .xN`` lanes 0-7 give the row
    addresses of matrix 0, 8-15 of matrix 1, ...; lanes past ``8*N`` are ignored.
    """
    spec = _spec(op)
    if isinstance(lane_byte_addresses, (str, bytes)) or not hasattr(lane_byte_addresses, "__len__"):
        raise BankModelError(f"{op}: give a list of 32 lane byte addresses, "
                             f"not {type(lane_byte_addresses).__name__}")
    arr = _to_matrix([lane_byte_addresses], spec)
    wf, ideal = _count(arr, spec, model)
    return _access(spec, arr[0], int(wf[0]), int(ideal[0]), model)


def _access(spec: OpSpec, row: np.ndarray, wf: int, ideal: int, model: Model) -> Access:
    addrs = tuple(None if a < 0 else int(a) for a in row)
    return Access(spec.name, wf, ideal, wf - ideal, addrs, model)


def conflicts(addresses_per_instruction: Iterable[Sequence[int | None]] | np.ndarray, op: str,
              model: Model = DEFAULT_MODEL) -> TileReport:
    """Model many instructions of one op (rows of 32 lane byte addresses; -1/None = inactive)."""
    spec = _spec(op)
    rows = addresses_per_instruction
    if not isinstance(rows, np.ndarray):
        rows = list(rows)
    arr = _to_matrix(rows, spec) if len(rows) else np.zeros((0, WARP), np.int64)
    wf, ideal = _count(arr, spec, model)
    accesses = [_access(spec, arr[i], int(wf[i]), int(ideal[i]), model) for i in range(len(wf))]
    total, tideal = int(wf.sum()), int(ideal.sum())
    return TileReport(spec.name, total, tideal, total - tideal, accesses)


# --------------------------------------------------------------------------- layouts

def _tiler_shape(tiled_copy: Any) -> tuple[int, ...]:
    tiler = getattr(tiled_copy, "tiler", None)
    if tiler is None:
        raise BankModelError("the tiled copy has no .tiler; build it with "
                             "gemmlab.layout.make_tiled_copy(...)")
    if isinstance(tiler, int):
        return (tiler,)
    try:
        return tuple(int(t) if isinstance(t, (int, np.integer)) else L.size(t) for t in tiler)
    except (TypeError, AttributeError):
        raise BankModelError(f"cannot read the tile shape of tiler {tiler!r}") from None


def _tv_of(tiled_copy: Any, source: bool) -> Any:
    """The shared-memory side's TV layout: source for loads, destination for stores."""
    method = getattr(tiled_copy, "get_layoutS_TV" if source else "get_layoutD_TV", None)
    if callable(method):
        return method()
    tv = getattr(tiled_copy, "tv_layout", None)
    if tv is None:
        raise BankModelError("the tiled copy has no TV layout (.tv_layout); build it with "
                             "gemmlab.layout.make_tiled_copy(...)")
    return tv


def tile_instructions(smem_layout: Any, tv_layout: Any, tiler: tuple[int, ...],
                      num_threads: int, elem_bytes: int, bytes_per_address: int) -> np.ndarray:
    """Lane byte addresses of every instruction of a TV-partitioned tile access, (n, 32).

    Each thread's values are taken ``bytes_per_address // elem_bytes`` at a time (one
    vector access); the tiler is repeated over the shared-memory tile (CuTe's rest modes).
    Order: warp, then tiler repetition (column-major), then vector chunk.
    """
    tile = L.mode_sizes(smem_layout)
    if len(tile) != len(tiler) or any(t % s for t, s in zip(tile, tiler)):
        raise BankModelError(f"the copy's tile {tiler} does not divide the shared-memory tile "
                             f"{tile}; make the smem layout a multiple of the copy tile")
    if bytes_per_address % elem_bytes:
        raise BankModelError(f"{bytes_per_address}-byte accesses cannot move whole "
                             f"{elem_bytes}-byte elements")
    vec = bytes_per_address // elem_bytes
    tv = L.tv_to_array(tv_layout)  # [thread, value] -> index in the copy tile
    nthr, nval = tv.shape
    if nval % vec:
        raise BankModelError(f"each thread holds {nval} values, not a multiple of the {vec} "
                             f"elements one {bytes_per_address * 8}-bit access moves")
    if tv.min() < 0 or tv.max() >= int(np.prod(tiler)):
        raise BankModelError(f"the copy's TV layout reaches tile index {int(tv.max())}, outside its "
                             f"{'x'.join(map(str, tiler))} tile")
    offs = L.layout_to_array(smem_layout)  # [coordinate in each mode] -> element offset
    reps = tuple(t // s for t, s in zip(tile, tiler))
    nrep = int(np.prod(reps))
    rep_coords = np.stack(np.unravel_index(np.arange(nrep), reps, order="F"), axis=-1) * np.array(tiler)
    in_tile = np.stack(np.unravel_index(tv, tiler, order="F"), axis=-1)  # (thr, val, rank)
    coords = in_tile[:, None, :, :] + rep_coords[None, :, None, :]  # (thr, rep, val, rank)
    elem = offs[tuple(np.moveaxis(coords, -1, 0))]  # (thr, rep, val) element offsets
    chunks = elem.reshape(nthr, nrep, nval // vec, vec)
    step = np.diff(chunks, axis=-1)
    if vec > 1 and not (step == 1).all():
        t, r, c, _ = map(int, np.argwhere(step != 1)[0])
        raise BankModelError(
            f"thread {t}'s elements {chunks[t, r, c].tolist()} are not contiguous in shared "
            f"memory, so one {bytes_per_address * 8}-bit access cannot move them: use a "
            f"narrower op, or a layout/swizzle that keeps {vec} elements together")
    first = chunks[..., 0] * elem_bytes  # (thr, rep, chunk) byte addresses
    nthreads = min(num_threads, nthr)
    warps = -(-nthreads // WARP)
    out = np.full((warps, nrep, nval // vec, WARP), -1, dtype=np.int64)
    for w in range(warps):
        lanes = min(WARP, nthreads - w * WARP)
        out[w, :, :, :lanes] = np.moveaxis(first[w * WARP: w * WARP + lanes], 0, -1)
    return out.reshape(-1, WARP)


def copy_conflicts(smem_layout: Any, tiled_copy: Any, elem_bytes: int, op: str = "st128",
                   model: Model = DEFAULT_MODEL) -> TileReport:
    """Every instruction of a TiledCopy reading/writing a (swizzled or padded) smem tile.

    ``smem_layout`` maps tile coordinates to element offsets in shared memory; the copy's
    TV layout says which tile elements each thread moves. For stores the destination TV
    layout is used, for loads the source one (ldmatrix: each lane's 8-element row).
    """
    spec = _spec(op)
    tv = _tv_of(tiled_copy, source=spec.kind == "ld")
    nthreads = int(getattr(tiled_copy, "num_threads", L.mode_sizes(tv)[0]))
    arr = tile_instructions(smem_layout, tv, _tiler_shape(tiled_copy), nthreads, elem_bytes,
                            spec.bytes_per_address)
    return conflicts(arr, op, model)


def ldmatrix_conflicts(smem_layout: Any, tiled_copy_or_mma: Any, elem_bytes: int = 2,
                       op: str = "ldmatrix.x4", which: str = "A",
                       model: Model = DEFAULT_MODEL) -> TileReport:
    """ldmatrix (or stmatrix) reads of a smem tile by a TiledCopy, or by the ldmatrix copy
    CuTe's ``make_tiled_copy_A/B`` would build for a TiledMMA (``which`` = "A" or "B")."""
    spec = _spec(op)
    if not spec.matrix:
        raise BankModelError(f"ldmatrix_conflicts needs an ldmatrix/stmatrix op, not {op!r}; "
                             f"use copy_conflicts for plain loads and stores")
    obj = tiled_copy_or_mma
    if hasattr(obj, "tv_a") and not hasattr(obj, "tv_layout"):
        n = op.split(".x")[1]
        atom_name = (f"SM75_U32x{n}_LDSM_N" if spec.kind == "ld" else f"SM90_U32x{n}_STSM_N")
        maker = {"A": L.make_tiled_copy_A, "B": L.make_tiled_copy_B}.get(which.upper())
        if maker is None:
            raise BankModelError(f"which must be 'A' or 'B', not {which!r}")
        obj = maker(L.copy_atom(atom_name), obj)
    return copy_conflicts(smem_layout, obj, elem_bytes, op, model)
