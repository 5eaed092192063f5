"""gemmlab.layout against NVIDIA's CuTe DSL, element by element (CPU only).

The DSL evaluates static layouts exactly at trace time (CUTE_DSL_ARCH=sm_90a, no GPU
needed), so it is the ground truth for every TV layout, partition, swizzle and algebra
result gemmlab computes. All DSL results are collected in ONE @cute.jit trace (module
fixture), as plain Python tuples, then each case compares both functions over their whole
domain -- not their printed forms.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
cute = pytest.importorskip("cutlass.cute", reason="the CuTe DSL (nvidia-cutlass-dsl) is not installed")
import cutlass  # noqa: E402

import gemmlab.layout as L  # noqa: E402

# ----------------------------------------------------------------------------- cases

SM80 = {
    "SM80_16x8x8_F32F16F16F32_TN": ("f16", "f32", (16, 8, 8)),
    "SM80_16x8x16_F32F16F16F32_TN": ("f16", "f32", (16, 8, 16)),
    "SM80_16x8x8_F32BF16BF16F32_TN": ("bf16", "f32", (16, 8, 8)),
    "SM80_16x8x16_F32BF16BF16F32_TN": ("bf16", "f32", (16, 8, 16)),
    "SM80_16x8x16_F16F16F16F16_TN": ("f16", "f16", (16, 8, 16)),
    "SM80_16x8x8_F16F16F16F16_TN": ("f16", "f16", (16, 8, 8)),
}
SM90 = [f"SM90_64x{n}x16_F32F16F16_SS" for n in (8, 16, 24, 64, 128, 192, 256)] + [
    "SM90_64x64x16_F16F16F16_SS", "SM90_64x128x16_F32BF16BF16_SS"]
ATOMS = ["UniversalFMA", *SM80, *SM90]

ATOM_LAYOUTS = [(1, 1, 1), (2, 2, 1), (4, 1, 1), (2, 1, 1)]
NPERM = ("L", (8, 2, 2), (1, 16, 8))        # a real permutation of N (as in CUTLASS's SM80 configs)
MPERM = ("L", (16, 2, 2), (1, 32, 16))
PERMS = [None, (32, 32, 16), (64, 32, 16), (None, NPERM, None), (MPERM, 32, None)]


def _perm_size(p, default):
    if p is None:
        return default
    return int(np.prod(p[1])) if isinstance(p, tuple) else p


def _valid_mma(atom: str, al, perm) -> bool:
    shp = L.mma_atom(atom).shape_mnk
    al = al[1] if al[0] == "L" else al
    if perm is None:
        return True
    return all(_perm_size(p, shp[i] * al[i]) % (shp[i] * al[i]) == 0 for i, p in enumerate(perm))


MMA_CASES = [(a, al, p) for a in SM80 for al in ATOM_LAYOUTS for p in PERMS if _valid_mma(a, al, p)]
MMA_CASES += [("UniversalFMA", (16, 8, 1), None), ("UniversalFMA", (8, 16, 1), (16, 32, 4)),
              ("SM90_64x64x16_F32F16F16_SS", (1, 1, 1), None), ("SM90_64x128x16_F32F16F16_SS", (2, 1, 1), None),
              # atoms laid out row-major (a Layout, not a shape)
              ("SM80_16x8x16_F32F16F16F32_TN", ("L", (2, 2, 1), (2, 1, 0)), (32, 32, 16)),
              ("SM80_16x8x8_F32F16F16F32_TN", ("L", (2, 4, 1), (4, 1, 0)), (32, NPERM, 8))]

COPY_ATOMS = [("SM75_U32x1_LDSM_N", None), ("SM75_U32x2_LDSM_N", None), ("SM75_U32x4_LDSM_N", None),
              ("SM75_U16x2_LDSM_T", None), ("SM75_U16x4_LDSM_T", None), ("SM75_U16x8_LDSM_T", None),
              ("SM90_U32x1_STSM_N", None), ("SM90_U32x2_STSM_N", None), ("SM90_U32x4_STSM_N", None),
              ("UniversalCopy", 32), ("UniversalCopy", 64), ("UniversalCopy", 128),
              ("SM80_CP_ASYNC_CACHEALWAYS", 128), ("SM80_CP_ASYNC_CACHEGLOBAL", 64),
              ("SM80_CP_ASYNC_CACHEALWAYS", 32)]

THR_VAL = [(((32, 4), (4, 1)), ((1, 8), (1, 1))), (((16, 8), (8, 1)), ((1, 8), (1, 1))),
           (((8, 16), (1, 8)), ((4, 1), (1, 1))), (((32, 4), (4, 1)), ((1, 4), (1, 1))),
           (((16, 8), (8, 1)), ((1, 2), (1, 1))), (((8, 32), (32, 1)), ((1, 4), (1, 1))),
           (((16, 8), (8, 1)), ((1, 4), (1, 1)))]
COPY_CASES = [(atom, bits, tv) for atom, bits in COPY_ATOMS if bits is not None for tv in THR_VAL
              if int(np.prod(tv[1][0])) % (bits // 16) == 0]

# (copy atom, operand, mma case)
COPY_MMA_CASES = [("SM75_U32x4_LDSM_N", "A", ("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), (32, 32, 16))),
                  ("SM75_U32x2_LDSM_N", "B", ("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), (32, 32, 16))),
                  ("SM75_U32x4_LDSM_N", "B", ("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), (32, 32, 16))),
                  ("SM75_U16x8_LDSM_T", "B", ("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), (32, 32, 16))),
                  ("SM75_U32x4_LDSM_N", "A", ("SM80_16x8x16_F32F16F16F32_TN", (4, 1, 1), (64, 32, 16))),
                  ("SM75_U32x1_LDSM_N", "A", ("SM80_16x8x8_F32F16F16F32_TN", (1, 1, 1), None)),
                  ("SM90_U32x4_STSM_N", "C", ("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), (32, 32, 16))),
                  ("UniversalCopy:32", "C", ("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), None))]

SWIZZLES = [(b, m, s) for b in (0, 1, 2, 3) for m in (0, 1, 2, 3, 4) for s in (3, 4, 5) if s >= b]
SWIZZLE_INNER = [((8, 64), (64, 1)), ((16, 32), (32, 1)), ((64, 8), (1, 64))]

LAYS = {
    "a": ((8, 4), (1, 8)), "b": ((4, 8), (8, 1)), "c": (((2, 4), (2, 4)), ((1, 4), (2, 16))),
    "d": ((16, 32), (32, 1)), "e": (24, 1), "f": ((6, 4), (4, 1)), "g": ((4, 2), (2, 1)),
    "h": (4, 2), "i": ((2, 2), (1, 4)), "j": ((3, 4), (1, 3)), "k": (8, 1), "t": ((4, 8), (1, 4)),
}
ALGEBRA = [("composition", "d", "t"), ("composition", "a", "b"), ("composition", "e", "f"),
           ("composition", "c", "i"), ("logical_divide", "d", "t"), ("logical_divide", "e", "h"),
           ("zipped_divide", "d", ("T", 8, 4)), ("zipped_divide", "d", ("T", 4, 16)),
           ("tiled_divide", "d", ("T", 8, 4)), ("logical_divide", "k", "h"),
           ("logical_product", "g", "j"), ("blocked_product", "g", "j"), ("raked_product", "g", "j"),
           ("blocked_product", "b", "i"), ("raked_product", "b", "i"), ("zipped_product", "g", "j"),
           ("complement", "h", 24), ("complement", "i", 32), ("right_inverse", "b", None),
           ("right_inverse", "c", None), ("left_inverse", "f", None), ("coalesce", "c", None)]

TILES = [((64, 32), (16, 8), (1, 2), None), ((64, 32), (16, 8), (1, None), None),
         ((256, 128), (128, 64), (None, 1), None), ((256, 128), (128, 64, 32), (1, 0, None), (1, None, 1)),
         ((256, 128), (128, 64, 32), (1, 1, None), (None, 1, 1)), ((96, 80), (32, 16), (1, 4), None),
         ((64, 64), (16, 16), (None, None), None)]
PARTS = [((16, 64), ((2, 16), None), 5, None), ((64, 32), ((4, 8), None), 31, None),
         ((128, 64), ((32, 4), (4, 1)), 77, None), ((64, 32), ((2, 16, 1), (16, 1, 0)), 19, (1, None, 1)),
         ((96, 48), ((8, 4), (4, 1)), 0, None), ((128, 32), ((8, 16), (1, 8)), 100, None)]


def _lay(spec):
    return L.Layout(*spec)


def _glayout(spec):
    return None if spec is None else (_lay(spec[1:]) if isinstance(spec, tuple) and spec and spec[0] == "L" else spec)


def _gperm(perm):
    return None if perm is None else tuple(_glayout(p) for p in perm)


# --------------------------------------------------------------- DSL side (one trace)

def _py(x):
    """DSL static shapes/strides -> Python: ints, or ('E', value, mode) for ScaledBasis."""
    if isinstance(x, tuple):
        return tuple(_py(e) for e in x)
    if isinstance(x, int):
        return int(x)
    if isinstance(x, cute.ScaledBasis):
        mode = x.mode
        return ("E", int(x.value), int(mode[0]) if isinstance(mode, (list, tuple)) and len(mode) == 1 else mode)
    raise TypeError(f"DSL value {x!r} is not static")


def _dlay(layout):
    return ("layout", _py(layout.shape), _py(layout.stride))


def _dten(t):
    it = t.iterator
    return ("tensor", tuple(int(v) for v in it) if isinstance(it, tuple) else int(it),
            _py(t.layout.shape), _py(t.layout.stride))


def _dtype(name):
    return {"f16": cutlass.Float16, "bf16": cutlass.BFloat16, "f32": cutlass.Float32}[name]


def _dsl_mma_atom(name):
    if name == "UniversalFMA":
        return cute.make_mma_atom(cute.nvgpu.MmaUniversalOp(cutlass.Float32))
    if name in SM80:
        ab, acc, shp = SM80[name]
        return cute.make_mma_atom(cute.nvgpu.warp.MmaF16BF16Op(_dtype(ab), _dtype(acc), shp))
    atom = L.mma_atom(name)
    wg = cute.nvgpu.warpgroup
    major = cute.nvgpu.OperandMajorMode.K
    op = wg.MmaF16BF16Op(_dtype(atom.ab_type), _dtype(atom.c_type), atom.shape_mnk, wg.OperandSource.SMEM, major, major)
    return cute.make_mma_atom(op)


def _dsl_perm(perm):
    if perm is None:
        return None
    return tuple(cute.make_layout(p[1], stride=p[2]) if isinstance(p, tuple) else p for p in perm)


def _dsl_tiled_mma(case):
    atom, al, perm = case
    lay = cute.make_layout(al[1], stride=al[2]) if al[0] == "L" else cute.make_layout(al)
    return cute.make_tiled_mma(_dsl_mma_atom(atom), lay, permutation_mnk=_dsl_perm(perm))


def _gmma(case):
    atom, al, perm = case
    return L.make_tiled_mma(atom, _glayout(al), _gperm(perm))


def _dsl_copy_atom(name, bits=None):
    f16 = cutlass.Float16
    warp = cute.nvgpu.warp
    if name.startswith("UniversalCopy"):
        return cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), f16, num_bits_per_copy=bits)
    if name.startswith("SM80_CP_ASYNC"):
        mode = cute.nvgpu.cpasync.LoadCacheMode.GLOBAL if "GLOBAL" in name else cute.nvgpu.cpasync.LoadCacheMode.ALWAYS
        return cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(mode), f16, num_bits_per_copy=bits)
    n = int(name.split("x")[1].split("_")[0])
    if name.endswith("LDSM_N"):
        return cute.make_copy_atom(warp.LdMatrix8x8x16bOp(False, n), f16)
    if name.endswith("LDSM_T"):
        return cute.make_copy_atom(warp.LdMatrix8x8x16bOp(True, n // 2), f16)
    return cute.make_copy_atom(warp.StMatrix8x8x16bOp(False, n), f16)


def _threads(n):
    return sorted({0, 1, 5, n // 2 + 3, n - 1} & set(range(n)))


def _operand_shapes(tile_mnk):
    m, n, k = tile_mnk
    return {"A": (2 * m, 2 * k), "B": (2 * n, 2 * k), "C": (2 * m, 2 * n)}


def _collect():
    """Everything the DSL says, as plain Python (errors kept as ('ERR', message))."""
    out = {}

    def rec(key, fn):
        try:
            out[key] = fn()
        except Exception as exc:  # record; the case's test fails with this message
            out[key] = ("ERR", f"{type(exc).__name__}: {str(exc)[:300]}")

    for name in ATOMS:
        def atom_data(name=name):
            a = _dsl_mma_atom(name)
            return (tuple(int(v) for v in a.shape_mnk), _dlay(a.tv_layout_A), _dlay(a.tv_layout_B), _dlay(a.tv_layout_C))
        rec(("mma_atom", name), atom_data)

    for case in MMA_CASES:
        def mma_data(case=case):
            tm = _dsl_tiled_mma(case)
            g = _gmma(case)  # only for sizes of the test tensors
            shapes = _operand_shapes(g.tile_mnk)
            parts = {}
            for tid in _threads(g.num_threads):
                sl = tm.get_slice(tid)
                parts[tid] = {op: _dten(getattr(sl, f"partition_{op}")(cute.make_identity_tensor(shapes[op])))
                              for op in "ABC"}
            pshape = {op: _py(getattr(tm, f"partition_shape_{op}")(shapes[op])) for op in "ABC"}
            return {"tv": (_dlay(tm.tv_layout_A_tiled), _dlay(tm.tv_layout_B_tiled), _dlay(tm.tv_layout_C_tiled)),
                    "tile": tuple(int(tm.get_tile_size(i)) for i in range(3)), "size": int(tm.size),
                    "parts": parts, "pshape": pshape}
        rec(("tiled_mma", case), mma_data)

    for name, bits in COPY_ATOMS:
        def copy_atom_data(name=name, bits=bits):
            a = _dsl_copy_atom(name, bits)
            return (_dlay(a.layout_src_tv), _dlay(a.layout_dst_tv))
        rec(("copy_atom", name, bits), copy_atom_data)

    for case in COPY_CASES:
        def copy_data(case=case):
            name, bits, (thr, val) = case
            tc = cute.make_tiled_copy_tv(_dsl_copy_atom(name, bits), cute.make_layout(thr[0], stride=thr[1]),
                                         cute.make_layout(val[0], stride=val[1]))
            return _tiled_copy_data(tc, tuple(int(a) * int(b) for a, b in zip(thr[0], val[0])))
        rec(("tiled_copy", case), copy_data)

    for case in COPY_MMA_CASES:
        def copy_mma_data(case=case):
            name, operand, mcase = case
            nm, bits = (name.split(":")[0], int(name.split(":")[1])) if ":" in name else (name, None)
            tm = _dsl_tiled_mma(mcase)
            tc = getattr(cute, f"make_tiled_copy_{operand}")(_dsl_copy_atom(nm, bits), tm)
            g = _gmma(mcase)
            m, n, k = g.tile_mnk
            return _tiled_copy_data(tc, {"A": (m, k), "B": (n, k), "C": (m, n)}[operand])
        rec(("copy_mma", case), copy_mma_data)

    for b, m, s in SWIZZLES:
        for inner in SWIZZLE_INNER:
            def sw_data(b=b, m=m, s=s, inner=inner):
                sw = cute.make_composed_layout(cute.make_swizzle(b, m, s), 0, cute.make_layout(inner[0], stride=inner[1]))
                n = int(np.prod(inner[0]))
                return [int(sw(i)) for i in range(n)]
            rec(("swizzle", (b, m, s), inner), sw_data)

    for case in ALGEBRA:
        rec(("algebra", case), lambda case=case: _dlay(_dsl_algebra(*case)))

    for case in TILES:
        def tile_data(case=case):
            shape, tiler, coord, proj = case
            kw = {} if proj is None else {"proj": proj}
            return _dten(cute.local_tile(cute.make_identity_tensor(shape), tiler, coord, **kw))
        rec(("local_tile", case), tile_data)

    for case in PARTS:
        def part_data(case=case):
            shape, thr, idx, proj = case
            tl = cute.make_layout(thr[0]) if thr[1] is None else cute.make_layout(thr[0], stride=thr[1])
            args = () if proj is None else (proj,)
            return _dten(cute.local_partition(cute.make_identity_tensor(shape), tl, cutlass.Int32(idx), *args))
        rec(("local_partition", case), part_data)
    return out


def _tiled_copy_data(tc, tile):
    shape = tuple(2 * t for t in tile)
    parts = {}
    n = int(cute.size(tc.layout_tv_tiled, mode=[0]))
    for tid in _threads(n):
        sl = tc.get_slice(tid)
        parts[tid] = (_dten(sl.partition_S(cute.make_identity_tensor(shape))),
                      _dten(sl.partition_D(cute.make_identity_tensor(shape))))
    return {"tv": _dlay(tc.layout_tv_tiled), "src": _dlay(tc.layout_src_tv_tiled), "dst": _dlay(tc.layout_dst_tv_tiled),
            "tiler": tuple(int(cute.size(t)) for t in tc.tiler_mn), "parts": parts, "shape": shape}


def _dsl_algebra(op, a, b):
    A = cute.make_layout(LAYS[a][0], stride=LAYS[a][1])
    if op in ("right_inverse", "left_inverse", "coalesce"):
        return getattr(cute, op)(A)
    if op == "complement":
        return cute.complement(A, b)
    if isinstance(b, tuple) and b[0] == "T":
        return getattr(cute, op)(A, b[1:])
    B = cute.make_layout(LAYS[b][0], stride=LAYS[b][1])
    return getattr(cute, op)(A, B)


def _g_algebra(op, a, b):
    A = _lay(LAYS[a])
    if op in ("right_inverse", "left_inverse", "coalesce"):
        return getattr(L, op)(A)
    if op == "complement":
        return L.complement(A, b)
    if isinstance(b, tuple) and b[0] == "T":
        return getattr(L, op)(A, b[1:])
    return getattr(L, op)(A, _lay(LAYS[b]))


@pytest.fixture(scope="module")
def dsl():
    @cute.jit
    def trace():
        _collect_into(box)

    box = {}
    trace()
    return box["out"]


def _collect_into(box):
    box["out"] = _collect()


# ------------------------------------------------------- independent evaluation of DSL data

def _leaf_value(d, c):
    if isinstance(d, tuple) and d and d[0] == "E":
        _, v, mode = d
        return ("E", c * v, mode)
    return c * d


def _eval_dsl(shape, stride, rank_vec=None):
    """All values of a DSL layout in column-major order of its domain (pure Python, no gemmlab)."""
    shapes, strides = [], []

    def walk(s, d):
        if isinstance(s, tuple):
            for x, y in zip(s, d):
                walk(x, y)
        else:
            shapes.append(s)
            strides.append(d)

    walk(shape, stride)
    n = int(np.prod(shapes)) if shapes else 1
    vals = []
    for i in range(n):
        rem, acc = i, ([0] * rank_vec if rank_vec else 0)
        for j, (s, d) in enumerate(zip(shapes, strides)):
            c = rem if j == len(shapes) - 1 else rem % s
            rem = rem // s
            if isinstance(d, tuple) and d and d[0] == "E":
                mode = d[2] if not isinstance(d[2], tuple) else d[2][0]
                acc[mode] += c * d[1]
            elif rank_vec:
                if d != 0 and c != 0:
                    raise AssertionError("integer stride in an identity tensor")
            else:
                acc += c * d
        vals.append(tuple(acc) if rank_vec else acc)
    return vals


def _top_sizes(shape):
    return tuple(int(np.prod(L.flatten(s))) for s in shape) if isinstance(shape, tuple) else (shape,)


def _ok(data, what):
    if isinstance(data, tuple) and data and data[0] == "ERR":
        pytest.fail(f"the CuTe DSL could not build {what}: {data[1]}")


def assert_same_layout(mine, d, what):
    _ok(d, what)
    _, shape, stride = d
    want = np.array(_eval_dsl(shape, stride))
    got = L.layout_to_array(mine).ravel(order="F")
    assert _top_sizes(mine.shape) == _top_sizes(shape), f"{what}: mode sizes {L.cute_str(mine)} vs DSL {shape}:{stride}"
    np.testing.assert_array_equal(got, want, err_msg=f"{what}: gemmlab {L.cute_str(mine)} vs DSL {shape}:{stride}")


def assert_same_tensor(mine, d, what):
    _ok(d, what)
    _, it, shape, stride = d
    it = it if isinstance(it, tuple) else (it,)
    want = np.array(_eval_dsl(shape, stride, rank_vec=len(it))) + np.array(it)
    got = mine.values()
    got = got.reshape(-1, got.shape[-1], order="F")
    assert _top_sizes(mine.shape) == _top_sizes(shape), f"{what}: shape {mine.shape} vs DSL {shape}"
    np.testing.assert_array_equal(got, want, err_msg=f"{what}: coordinates differ (gemmlab {mine})")


# ---------------------------------------------------------------------------- tests

@pytest.mark.parametrize("name", ATOMS)
def test_mma_atom_layouts(dsl, name):
    d = dsl[("mma_atom", name)]
    _ok(d, name)
    atom = L.mma_atom(name)
    assert atom.shape_mnk == d[0]
    for mine, theirs, op in zip((atom.tv_a, atom.tv_b, atom.tv_c), d[1:], "ABC"):
        assert_same_layout(mine, theirs, f"{name} {op}")


@pytest.mark.parametrize("case", MMA_CASES, ids=str)
def test_tiled_mma(dsl, case):
    d = dsl[("tiled_mma", case)]
    _ok(d, case)
    mma = _gmma(case)
    assert mma.tile_mnk == d["tile"]
    assert mma.num_threads == d["size"]
    for mine, theirs, op in zip((mma.tv_a, mma.tv_b, mma.tv_c), d["tv"], "ABC"):
        assert_same_layout(mine, theirs, f"{case} tv_{op}")
    shapes = _operand_shapes(mma.tile_mnk)
    for op in "ABC":
        assert _top_sizes(mma.partition_shape(op, shapes[op])) == _top_sizes(d["pshape"][op])
    for tid, parts in d["parts"].items():
        sl = mma.get_slice(tid)
        for op in "ABC":
            mine = getattr(sl, f"partition_{op}")(L.make_identity_tensor(shapes[op]))
            assert_same_tensor(mine, parts[op], f"{case} thread {tid} partition_{op}")


@pytest.mark.parametrize("name,bits", COPY_ATOMS)
def test_copy_atom_layouts(dsl, name, bits):
    d = dsl[("copy_atom", name, bits)]
    _ok(d, name)
    atom = L.copy_atom(name, bits=bits, element_bits=16)
    assert_same_layout(atom.tv_src, d[0], f"{name} src")
    assert_same_layout(atom.tv_dst, d[1], f"{name} dst")


def _check_tiled_copy(tc, d, what):
    _ok(d, what)
    assert tc.tiler == d["tiler"], what
    assert_same_layout(tc.layout_tv_tiled, d["tv"], f"{what} layout_tv")
    assert_same_layout(tc.get_layoutS_TV(), d["src"], f"{what} layoutS_TV")
    assert_same_layout(tc.get_layoutD_TV(), d["dst"], f"{what} layoutD_TV")
    for tid, (src, dst) in d["parts"].items():
        sl = tc.get_slice(tid)
        assert_same_tensor(sl.partition_S(L.make_identity_tensor(d["shape"])), src, f"{what} thread {tid} partition_S")
        assert_same_tensor(sl.partition_D(L.make_identity_tensor(d["shape"])), dst, f"{what} thread {tid} partition_D")


@pytest.mark.parametrize("case", COPY_CASES, ids=str)
def test_tiled_copy(dsl, case):
    name, bits, (thr, val) = case
    tc = L.make_tiled_copy(L.copy_atom(name, bits=bits), L.Layout(*thr), L.Layout(*val))
    _check_tiled_copy(tc, dsl[("tiled_copy", case)], str(case))


@pytest.mark.parametrize("case", COPY_MMA_CASES, ids=str)
def test_tiled_copy_for_mma(dsl, case):
    name, operand, mcase = case
    nm, bits = (name.split(":")[0], int(name.split(":")[1])) if ":" in name else (name, None)
    mma = _gmma(mcase)
    tc = getattr(L, f"make_tiled_copy_{operand}")(L.copy_atom(nm, bits=bits), mma)
    _check_tiled_copy(tc, dsl[("copy_mma", case)], str(case))


@pytest.mark.parametrize("bms", SWIZZLES, ids=str)
def test_swizzles(dsl, bms):
    for inner in SWIZZLE_INNER:
        d = dsl[("swizzle", bms, inner)]
        _ok(d, f"Swizzle{bms} o {inner}")
        sw = L.composition(L.Swizzle(*bms), L.Layout(*inner))
        np.testing.assert_array_equal(L.layout_to_array(sw).ravel(order="F"), np.array(d),
                                      err_msg=f"{sw} differs from the DSL")
        assert [sw(i) for i in range(0, len(d), 37)] == d[::37]  # the scalar path too


@pytest.mark.parametrize("case", ALGEBRA, ids=str)
def test_algebra(dsl, case):
    assert_same_layout(_g_algebra(*case), dsl[("algebra", case)], str(case))


@pytest.mark.parametrize("case", TILES, ids=str)
def test_local_tile(dsl, case):
    shape, tiler, coord, proj = case
    mine = L.local_tile(L.make_identity_tensor(shape), tiler, coord, proj=proj)
    assert_same_tensor(mine, dsl[("local_tile", case)], str(case))


@pytest.mark.parametrize("case", PARTS, ids=str)
def test_local_partition(dsl, case):
    shape, thr, idx, proj = case
    tl = L.make_layout(thr[0]) if thr[1] is None else L.Layout(*thr)
    mine = L.local_partition(L.make_identity_tensor(shape), tl, idx, proj=proj)
    assert_same_tensor(mine, dsl[("local_partition", case)], str(case))
