"""Notebook 05's graded CPU tests reject plausible wrong answers (and accept right ones).

Each wrong answer replaces the solution cell; the notebook's own test cell (visible + hidden
tests) must fail on it, and the ones marked ``visible`` must already fail the student's visible
tests. Exercise 5's step tests read the kernel's machine code before any GPU part, so wrong kernels
(copies, fragments or MMAs made another way, a K loop missing a wait, a barrier or its commit) fail
here; what the kernel computes, and the tile order measured from it, are checked on a GPU
(tests/course/test_gpu_global_gemm.py).
"""
from __future__ import annotations

import random
import re

import matplotlib
import pytest

from tests.support.graded_cells import cells_by_grade_id, python, run_cells, visible_part
from autograder.cell_metadata import is_answer
from solution_cells import cell_folder

matplotlib.use("Agg")
NB = "05_global_gemm"
EXERCISES = {
    "operand_tile": ["setup", "operand_tile", "operand_tile_helpers", "test_operand_tile"],
    "warp_sectors": ["setup", "coalescing_picture", "warp_sectors", "warp_sectors_helpers", "test_warp_sectors"],
    "vector_bytes": ["setup", "vector_bytes", "vector_bytes_helpers", "test_vector_bytes"],
    "tile_of": ["setup", "tile_of", "tile_of_helpers", "test_tile_of"],
}

_OPERAND = '''
def operand_tile(operand, cta_tiler, cta_coord):
    proj = {PROJ}[operand]
    keep = [i for i, p in enumerate(proj) if p is not None]
    return proj, tuple(cta_tiler[i] for i in keep), tuple(cta_coord[i] for i in keep)
'''

# (exercise, name) -> (source of the wrong answer, must the visible tests already fail it?)
WRONG = {
    ("operand_tile", "A and B swapped"): (
        _OPERAND.replace("{PROJ}", '{"A": (None, 1, 1), "B": (1, None, 1), "C": (1, 1, None)}'), True),
    ("operand_tile", "B kept as (K, N)"): ('''
def operand_tile(operand, cta_tiler, cta_coord):
    proj = {"A": (1, None, 1), "B": (None, 1, 1), "C": (1, 1, None)}[operand]
    keep = [i for i, p in enumerate(proj) if p is not None]
    if operand == "B":
        keep = keep[::-1]
    return proj, tuple(cta_tiler[i] for i in keep), tuple(cta_coord[i] for i in keep)
''', False),
    ("operand_tile", "C keeps K"): (
        _OPERAND.replace("{PROJ}", '{"A": (1, None, 1), "B": (None, 1, 1), "C": (1, 1, 1)}'), False),
    ("operand_tile", "C drops N"): (
        _OPERAND.replace("{PROJ}", '{"A": (1, None, 1), "B": (None, 1, 1), "C": (1, None, 1)}'), False),
    ("operand_tile", "0 instead of None"): ('''
def operand_tile(operand, cta_tiler, cta_coord):
    proj = {"A": (1, 0, 1), "B": (0, 1, 1), "C": (1, 1, 0)}[operand]
    keep = [i for i, p in enumerate(proj) if p]
    return proj, tuple(cta_tiler[i] for i in keep), tuple(cta_coord[i] for i in keep)
''', True),
    ("operand_tile", "coordinate not projected"): ('''
def operand_tile(operand, cta_tiler, cta_coord):
    proj = {"A": (1, None, 1), "B": (None, 1, 1), "C": (1, 1, None)}[operand]
    keep = [i for i, p in enumerate(proj) if p is not None]
    return proj, tuple(cta_tiler[i] for i in keep), tuple(cta_coord)
''', True),
    ("operand_tile", "constant A answer"): ('''
def operand_tile(operand, cta_tiler, cta_coord):
    return (1, None, 1), (cta_tiler[0], cta_tiler[2]), (cta_coord[0], cta_coord[2])
''', False),

    ("warp_sectors", "every thread, not warp 0"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    return len({((r * ld + c * vec) * elem_bytes) // 32 for r in range(rows) for c in range(cols)})
''', True),
    ("warp_sectors", "first byte of each vector only"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    return len({((r * ld + c * vec) * elem_bytes) // 32 for r in range(rows) for c in range(cols)
                if thr_layout(r, c) < 32})
''', True),
    ("warp_sectors", "128-byte lines instead of sectors"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    out = set()
    for r in range(rows):
        for c in range(cols):
            if thr_layout(r, c) < 32:
                lo = (r * ld + c * vec) * elem_bytes
                out.update(range(lo // 128, (lo + vec * elem_bytes - 1) // 128 + 1))
    return len(out)
''', True),
    ("warp_sectors", "column index not scaled by vec"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    out = set()
    for r in range(rows):
        for c in range(cols):
            if thr_layout(r, c) < 32:
                lo = (r * ld + c) * elem_bytes
                out.update(range(lo // 32, (lo + vec * elem_bytes - 1) // 32 + 1))
    return len(out)
''', True),
    ("warp_sectors", "one sector per thread"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    return 32
''', True),
    ("warp_sectors", "bytes / 32, the ideal"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    return max(1, -(-32 * vec * elem_bytes // 32))
''', True),
    ("warp_sectors", "end byte exclusive off by one"): ('''
def warp_sectors(thr_layout, vec, elem_bytes, ld):
    rows, cols = L.mode_sizes(thr_layout)[:2]
    out = set()
    for r in range(rows):
        for c in range(cols):
            if thr_layout(r, c) < 32:
                lo = (r * ld + c * vec) * elem_bytes
                out.update(range(lo // 32, (lo + vec * elem_bytes) // 32 + 1))
    return len(out)
''', True),

    ("vector_bytes", "no element-size floor"): ('''
def vector_bytes(addresses, lengths, elem_bytes):
    for v in (16, 8, 4, 2, 1):
        if all(a % v == 0 for a in addresses) and all(n * elem_bytes % v == 0 for n in lengths):
            return v
''', True),
    ("vector_bytes", "addresses ignored"): ('''
def vector_bytes(addresses, lengths, elem_bytes):
    for v in (16, 8, 4, 2, 1):
        if v <= elem_bytes or all(n * elem_bytes % v == 0 for n in lengths):
            return max(v, elem_bytes)
''', True),
    ("vector_bytes", "lengths in elements, not bytes"): ('''
def vector_bytes(addresses, lengths, elem_bytes):
    for v in (16, 8, 4, 2, 1):
        if v <= elem_bytes or (all(a % v == 0 for a in addresses) and all(n % v == 0 for n in lengths)):
            return max(v, elem_bytes)
''', True),
    ("vector_bytes", "always 16"): ('''
def vector_bytes(addresses, lengths, elem_bytes):
    return 16
''', True),

    ("tile_of", "row-major always"): ('''
def tile_of(pid, tiles_m, tiles_n, group):
    return pid // tiles_n, pid % tiles_n
''', True),
    ("tile_of", "last band not shortened"): ('''
def tile_of(pid, tiles_m, tiles_n, group):
    per_group = group * tiles_n
    first_m = (pid // per_group) * group
    return first_m + (pid % per_group) % group, (pid % per_group) // group
''', True),
    ("tile_of", "walks along the band's rows"): ('''
def tile_of(pid, tiles_m, tiles_n, group):
    per_group = group * tiles_n
    first_m = (pid // per_group) * group
    return first_m + (pid % per_group) // tiles_n, (pid % per_group) % tiles_n
''', True),
}


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_solution_passes_its_tests(exercise: str) -> None:
    run_cells(NB, EXERCISES[exercise])


@pytest.mark.parametrize("exercise, name", sorted(WRONG))
def test_wrong_answer_fails(exercise: str, name: str) -> None:
    source, visible_too = WRONG[exercise, name]
    cells = EXERCISES[exercise]
    with pytest.raises(AssertionError):
        run_cells(NB, cells, replace={exercise: source})
    if visible_too:
        test_cell = cells[-1]
        with pytest.raises(AssertionError):
            run_cells(NB, cells, replace={exercise: source, test_cell: visible_part(cells_by_grade_id(NB)[test_cell])})


@pytest.mark.parametrize("visible", [True, False])
def test_b_in_k_n_order_is_told_its_modes_are_n_k(visible: bool) -> None:
    # The modes are right and only their order is wrong: the message names B's order, not "which two modes".
    source, _ = WRONG["operand_tile", "B kept as (K, N)"]
    cells = EXERCISES["operand_tile"]
    replace = {"operand_tile": source}
    if visible:
        replace["test_operand_tile"] = visible_part(cells_by_grade_id(NB)["test_operand_tile"])
    with pytest.raises(AssertionError) as failure:
        run_cells(NB, cells, replace=replace)
    message = str(failure.value)
    for words in ("B's modes are (N, K)", "views the K × N matrix B as (N, K)", "in that order"):
        assert words in message, message
    assert "which two of" not in message, message


def test_the_tile_order_is_not_printed_in_the_kernel_skeleton() -> None:
    # The kernels call tile_of / tile_of_dsl, which the student writes: the given cells must not hold it.
    cells = cells_by_grade_id(NB)
    for given in ("gemm_cpp_tiles", "gemm_cpp_setup", "launchers"):
        assert "per_group" not in cells[given], f"{given} prints the answer to the tile order exercise"
    for answer in ("gemm_cpp_load_tile", "gemm_dsl_load_tile"):
        source = cells[answer]
        assert "per_group" in source.split("BEGIN SOLUTION")[1].split("END SOLUTION")[0], answer


# ------------------------------------------------------------------ Exercise 5's steps 5.1 to 5.3 (CPU parts)
#
# The step tests run the notebook's own cells: the C++ tile_of of option A as text (no compile), option B's DSL
# functions evaluated on the CPU (each cell written to a file: the CuTe DSL reads its functions' source). Cells
# of the option a case does not use are left out, as a student doing one option leaves the other alone.

STEP_CONTEXT = ["setup", "launchers"]
CPP_5_1 = ["gemm_cpp_load_tile"]
DSL_5_1 = ["gemm_dsl_load_tile"]
DSL_5_2 = ["gemm_dsl_load_tile", "gemm_dsl_host"]
STEP_CHECKS = ["step_checks"]

_CPP_TILE_OF = '''
GEMM05_CPP_LOAD_TILE = r"""
__device__ void tile_of(int pid, int tiles_m, int tiles_n, int group, int& m_tile, int& n_tile)
{
%s
}
template <bool CHECK_K, class Copy, class TG, class TS, class TC>
__device__ void load_tile(Copy const& g2s, TG const& tXgX, TS const& tXsX, TC const& tXcX, int rows, int K)
{
    copy(g2s, tXgX(_, 0, 0), tXsX(_, 0, 0));
}
"""
'''
_GROUPED_CPP = """    int per_group = group * tiles_n;
    int first_m = (pid / per_group) * group;
    int rows = min(tiles_m - first_m, group);
    m_tile = first_m + (pid % per_group) % rows;
    n_tile = (pid % per_group) / rows;"""


def _run_files(grade_ids: list[str], replace: dict[str, str] | None = None, namespace: dict | None = None) -> dict:
    """``run_cells`` with each cell written to a file first, so that CuTe DSL functions have a source."""
    cells = cells_by_grade_id(NB)
    replace = replace or {}
    folder = cell_folder("05-steps")
    ns = namespace if namespace is not None else {"__name__": "notebook_05_steps"}
    random.seed(0)
    for gid in grade_ids:
        source = python(replace.get(gid, cells[gid]))
        path = folder / f"{gid}.py"
        path.write_text(source)
        exec(compile(source, str(path), "exec"), ns)
    return ns


def _tile_test(option_cells: list[str], replace: dict[str, str] | None = None, visible: bool = False) -> None:
    test = cells_by_grade_id(NB)["test_tile_order"]
    _run_files(STEP_CONTEXT + option_cells + STEP_CHECKS + ["test_tile_order"],
               {**(replace or {}), **({"test_tile_order": visible_part(test)} if visible else {})})


def test_step_5_1_solutions_pass(no_gpu) -> None:
    _tile_test(CPP_5_1)
    _tile_test(DSL_5_1)
    _tile_test(CPP_5_1 + DSL_5_1)


# C++ tile_of bodies (option A, cell 2): each a class of mistake, or a way around the CPU check.
WRONG_CPP_TILE_OF = {
    "row-major order": "    m_tile = pid / tiles_n;\n    n_tile = pid % tiles_n;",
    "last band not shortened": _GROUPED_CPP.replace("int rows = min(tiles_m - first_m, group);", "int rows = group;"),
    "walks along the band's rows": """    int per_group = group * tiles_n;
    int first_m = (pid / per_group) * group;
    m_tile = first_m + (pid % per_group) / tiles_n;
    n_tile = (pid % per_group) % tiles_n;""",
    "column-major over the whole grid": "    m_tile = pid % tiles_m;\n    n_tile = pid / tiles_m;",
    "band of group columns instead of rows": """    int per_group = group * tiles_m;
    int first_n = (pid / per_group) * group;
    int cols = min(tiles_n - first_n, group);
    n_tile = first_n + (pid % per_group) % cols;
    m_tile = (pid % per_group) / cols;""",
    "an if the CPU cannot read": "    if (pid < 0) { m_tile = 0; n_tile = 0; }\n" + _GROUPED_CPP,
    "the answer hidden behind a macro": "#define min(a, b) ((a) > (b) ? (a) : (b))\n" + _GROUPED_CPP,
}


@pytest.mark.parametrize("name", sorted(WRONG_CPP_TILE_OF))
def test_step_5_1_rejects_a_wrong_cpp_tile_of(no_gpu, name: str) -> None:
    wrong = {"gemm_cpp_load_tile": _CPP_TILE_OF % WRONG_CPP_TILE_OF[name]}
    with pytest.raises(AssertionError):
        _tile_test(CPP_5_1, wrong)
    with pytest.raises(AssertionError):
        _tile_test(CPP_5_1, wrong, visible=True)


def test_step_5_1_rejects_a_second_definition_the_kernel_would_call(no_gpu) -> None:
    # blockIdx.x is unsigned: an overload on unsigned pid would win in the kernel while the int one is checked.
    overload = (_CPP_TILE_OF % _GROUPED_CPP).replace(
        'template <bool CHECK_K', '__device__ void tile_of(unsigned pid, int tiles_m, int tiles_n, int group, '
        'int& m_tile, int& n_tile) { m_tile = pid / tiles_n; n_tile = pid % tiles_n; }\ntemplate <bool CHECK_K')
    with pytest.raises(AssertionError, match="exactly once"):
        _tile_test(CPP_5_1, {"gemm_cpp_load_tile": overload})


def _dsl_tile_of(body: str) -> str:
    source = cells_by_grade_id(NB)["gemm_dsl_load_tile"]
    head, rest = source.split("### BEGIN SOLUTION", 1)
    first, tail = rest.split("### END SOLUTION", 1)
    return head + "### BEGIN SOLUTION\n" + body + "\n    ### END SOLUTION" + tail


WRONG_DSL_TILE_OF = {
    "row-major order": "    return pid // tiles_n, pid % tiles_n",
    "last band not shortened": """    per_group = group * tiles_n
    first_m = (pid // per_group) * group
    return first_m + (pid % per_group) % group, (pid % per_group) // group""",
    "walks along the band's rows": """    per_group = group * tiles_n
    first_m = (pid // per_group) * group
    return first_m + (pid % per_group) // tiles_n, (pid % per_group) % tiles_n""",
    "returns a list of three": "    return [pid // tiles_n, pid % tiles_n, 0]",
}


@pytest.mark.parametrize("name", sorted(WRONG_DSL_TILE_OF))
def test_step_5_1_rejects_a_wrong_dsl_tile_of(no_gpu, name: str) -> None:
    wrong = {"gemm_dsl_load_tile": _dsl_tile_of(WRONG_DSL_TILE_OF[name])}
    with pytest.raises(AssertionError):
        _tile_test(DSL_5_1, wrong)
    with pytest.raises(AssertionError):
        _tile_test(DSL_5_1, wrong, visible=True)


def test_step_5_1_checks_every_written_option(no_gpu) -> None:
    """A right DSL tile_of does not cover a wrong C++ one beside it."""
    with pytest.raises(AssertionError, match="option A"):
        _tile_test(CPP_5_1 + DSL_5_1, {"gemm_cpp_load_tile": _CPP_TILE_OF % WRONG_CPP_TILE_OF["row-major order"]})


# ---- step 5.2 (option B): the copies, the TiledMMA and the ldmatrix copies, evaluated by the CuTe DSL on the CPU

def _parts_test(replace: dict[str, str] | None = None) -> None:
    _run_files(STEP_CONTEXT + DSL_5_2 + ["dsl_step_facts"] + STEP_CHECKS + ["test_copies_and_mma_slow"], replace)


def _host_with(old: str, new: str) -> dict[str, str]:
    source = cells_by_grade_id(NB)["gemm_dsl_host"]
    assert source.count(old) == 1, old
    return {"gemm_dsl_host": source.replace(old, new)}


WRONG_DSL_PARTS = {
    "A's threads down the rows (uncoalesced)": (
        "cute.make_layout((THREADS // a_thr_k, a_thr_k), stride=(a_thr_k, 1))",
        "cute.make_layout((THREADS // a_thr_k, a_thr_k), stride=(1, THREADS // a_thr_k))", "coalesced"),
    "B's threads along K, one vector per k-row (uncoalesced)": (
        "cute.make_layout((b_thr_n, THREADS // b_thr_n), stride=(1, b_thr_n))",
        "cute.make_layout((THREADS // 32, 32), stride=(32, 1))", "coalesced"),
    "no cp.async at all": (
        "op = cute.nvgpu.cpasync.CopyG2SOp() if bits >= 32 else cute.nvgpu.CopyUniversalOp()",
        "op = cute.nvgpu.CopyUniversalOp()", "CopyG2SOp"),
    "half the threads copy, two rows each": (
        "cute.make_layout((THREADS // a_thr_k, a_thr_k), stride=(a_thr_k, 1)),\n"
        "                                    cute.make_layout((1, vec)))",
        "cute.make_layout((THREADS // 2 // a_thr_k, a_thr_k), stride=(a_thr_k, 1)),\n"
        "                                    cute.make_layout((2, vec)))", "64 threads"),
    "a 4 x 1 warp layout": (
        "cute.make_layout((2, 2, 1)), permutation_mnk=(32, 32, 16)",
        "cute.make_layout((4, 1, 1)), permutation_mnk=(64, 16, 16)", "warps"),
    "B's ldmatrix not transposed": (
        "cute.nvgpu.warp.LdMatrix8x8x16bOp(True, 4)", "cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4)", "transposing"),
    "A's ldmatrix transposed": (
        "cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4)", "cute.nvgpu.warp.LdMatrix8x8x16bOp(True, 4)", "plain ldmatrix"),
    "ldmatrix replaced by a plain copy": (
        "cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(True, 4), ab)",
        "cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), ab)", "ldmatrix"),
}


def test_step_5_2_solution_passes(no_gpu) -> None:
    _parts_test()


@pytest.mark.parametrize("name", sorted(WRONG_DSL_PARTS))
def test_step_5_2_rejects_wrong_dsl_parts(no_gpu, name: str) -> None:
    old, new, match = WRONG_DSL_PARTS[name]
    with pytest.raises(AssertionError, match=match):
        _parts_test(_host_with(old, new))


# ---- step 5.2 (option A): the compiler's checks of cell 5, one compile for every class of mistake

CPP_PARTS_PROBE = r"""
template <class Elem, class CopyA, class CopyB, class Mma>
__device__ void probe_parts(const Elem* A, const Elem* B, int M, int N, int K, CopyA g2s_A, CopyB g2s_B, Mma mma)
{
    Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, Int<1>{}));
    Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(Int<1>{}, N));
    Tensor gA = local_tile(mA, Shape<Int<BM>, Int<BK>>{}, make_coord(0, _));
    Tensor gB = local_tile(mB, Shape<Int<BN>, Int<BK>>{}, make_coord(0, _));
    check_copies_and_mma(g2s_A, g2s_B, mma, g2s_A.get_slice(threadIdx.x).partition_S(gA),
                         g2s_B.get_slice(threadIdx.x).partition_S(gB));
}
using G2S = SM80_CP_ASYNC_CACHEALWAYS<uint_bit_t<16 * VEC>>;
using AtomA = Copy_Atom<G2S, half_t>;
#define ROWS_K(r, k) make_layout(make_shape(Int<r>{}, Int<k>{}), LayoutRight{})
#define GOOD_A make_tiled_copy(AtomA{}, ROWS_K(32, 4), make_layout(make_shape(_1{}, Int<VEC>{})))
#define GOOD_B make_tiled_copy(AtomA{}, make_layout(make_shape(_16{}, _8{})), make_layout(make_shape(Int<VEC>{}, _1{})))
#define GOOD_MMA make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<_2, _2, _1>>{}, Tile<_32, _32, _16>{})
__global__ void good(const half_t* A, const half_t* B, int M, int N, int K)
{ probe_parts(A, B, M, N, K, GOOD_A, GOOD_B, GOOD_MMA); }
"""

#: kernel name -> (its copies and MMA, the message cell 5's checks must give).
CPP_PARTS_WRONG = {
    "a_down_rows": ("make_tiled_copy(AtomA{}, make_layout(make_shape(_32{}, _4{})), make_layout(make_shape(_1{}, Int<VEC>{}))), "
                    "GOOD_B, GOOD_MMA", "g2s_A is not coalesced"),
    "b_along_k": ("GOOD_A, make_tiled_copy(AtomA{}, ROWS_K(4, 32), make_layout(make_shape(Int<VEC>{}, _1{}))), GOOD_MMA",
                  "g2s_B is not coalesced"),
    "half_threads": ("make_tiled_copy(AtomA{}, ROWS_K(16, 4), make_layout(make_shape(_1{}, Int<VEC>{}))), GOOD_B, GOOD_MMA",
                     "use all THREADS"),
    "narrow_atom": ("make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEALWAYS<uint64_t>, half_t>{}, ROWS_K(32, 4), "
                    "make_layout(make_shape(_1{}, Int<VEC>{}))), GOOD_B, GOOD_MMA", "moves VEC elements"),
    "a_across_rows": ("make_tiled_copy(Copy_Atom<UniversalCopy<half_t>, half_t>{}, ROWS_K(16, 8), "
                      "make_layout(make_shape(Int<VEC>{}, _1{}))), GOOD_B, GOOD_MMA", "neighbours along K"),
    "warps_4x1": ("GOOD_A, GOOD_B, make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<_4, _1, _1>>{}, "
                  "Tile<_64, _16, _16>{})", "2 x 2 warps"),
    "tile_32x64": ("GOOD_A, GOOD_B, make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<_2, _2, _1>>{}, "
                   "Tile<_32, _64, _16>{})", "tile is (32, 32, 16)"),
}


@pytest.mark.slow
def test_step_5_2_compiler_checks_name_each_broken_rule() -> None:
    """One small compile (no GEMM kernel) of cell 5's checks on the right copies and MMA and on one wrong version
    per class of mistake: the right one passes, each wrong one fails with its rule's message."""
    import gemmlab

    ns = _run_files(["gemm_cpp_tiles", "gemm_cpp_partitions"])
    kernels = "".join(f"__global__ void {name}(const half_t* A, const half_t* B, int M, int N, int K)\n"
                      f"{{ probe_parts(A, B, M, N, K, {parts}); }}\n" for name, (parts, _) in CPP_PARTS_WRONG.items())
    source = ns["GEMM05_CPP_TILES"] + ns["GEMM05_CPP_CHECKS"] + CPP_PARTS_PROBE
    gemmlab.compile(source, "good", arch="sm_90a")                      # the right parts pass every check
    with pytest.raises(gemmlab.CompileError) as err:
        gemmlab.compile(source + kernels, "good", arch="sm_90a")
    log = str(err.value)
    for name, (_, message) in CPP_PARTS_WRONG.items():
        assert message in log, f"{name}: no {message!r} among the compiler's errors:\n{log[:3000]}"


def test_step_5_2_refuses_preprocessor_lines_in_a_cpp_part(no_gpu) -> None:
    ns = _run_files(STEP_CONTEXT + CPP_5_1 + STEP_CHECKS)
    ns["GEMM05_CPP_COPIES"] = "#if 0\n    auto g2s_A = 0;\n#endif\n"
    with pytest.raises(AssertionError, match="preprocessor"):
        ns["check_cpp_parts"]("C++ (option A)")


# ---- steps 5.2 to 5.4: the kernel's machine code (gemmlab.techniques), read by the tests without a GPU
#
# Option B written to step 5.4 and built (its build cell compiles every variant the tests read, about 2 s each);
# each wrong answer is an edit of the solution's cells, a class of mistake a student makes or a way around the
# object checks of step 5.2 (right objects, and the copies or MMAs made some other way).

DSL_ALL = ["vector_bytes", "gemm_dsl_load_tile", "gemm_dsl_host", "gemm_dsl_kernel", "gemm_dsl_first_tile", "gemm_dsl",
           "build_dsl", "dsl_step_facts"]
KERNEL_TESTS = ["test_copies_and_mma_slow", "test_one_k_tile_slow", "test_gemm_correct_slow"]


def _edit(gid: str, old: str, new: str) -> dict[str, str]:
    source = cells_by_grade_id(NB)[gid]
    assert source.count(old) == 1, f"{gid} no longer holds {old!r}: update the wrong answer"
    return {gid: source.replace(old, new)}


_UNIVERSAL = {**_edit("gemm_dsl_host", "op = cute.nvgpu.cpasync.CopyG2SOp() if bits >= 32 else cute.nvgpu.CopyUniversalOp()",
                      "op = cute.nvgpu.CopyUniversalOp()")}
_UNIVERSAL["gemm_dsl_host"] = (_UNIVERSAL["gemm_dsl_host"]
                               .replace("cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4)", "cute.nvgpu.CopyUniversalOp()")
                               .replace("cute.nvgpu.warp.LdMatrix8x8x16bOp(True, 4)", "cute.nvgpu.CopyUniversalOp()"))
_K_LOOP = "        cute.arch.cp_async_wait_group(0)\n        cute.arch.sync_threads()                       # tile t's copies"
_LOADS = """        if t < cta.last:
            load_tile(cta.g2s_A, cta.tAgA[None, None, None, t], cta.tAsA, cta.tAcA[None, None, None, t], cta.M, cta.K, False)
            load_tile(cta.g2s_B, cta.tBgB[None, None, None, t], cta.tBsB, cta.tBcB[None, None, None, t], cta.N, cta.K, False)
            cute.arch.cp_async_commit_group()
"""

#: name -> (the cells replaced, {test: what its message says}); the other kernel tests pass.
WRONG_DSL_KERNELS = {
    "load_tile copies through the registers, not with g2s": (
        _edit("gemm_dsl_load_tile", "cute.copy(g2s, tXgX[None, i, j], tXsX[None, i, j])",
              "cute.autovec_copy(tXgX[None, i, j], tXsX[None, i, j])"),
        {t: "no 16-byte cp.async from global to shared memory" for t in KERNEL_TESTS}),
    "fragments by plain shared-memory loads, not ldmatrix": (
        _edit("gemm_dsl_first_tile", "cute.copy(cta.s2r_A, cta.tXsA[None, None, kb], cta.tXrA[None, None, kb])",
              "cute.autovec_copy(cta.tXsA[None, None, kb], cta.tXrA[None, None, kb])"),
        {t: "come from plain shared-memory loads" for t in KERNEL_TESTS}),
    "UniversalCopy everywhere (no cp.async, no ldmatrix)": (
        _UNIVERSAL, {"test_copies_and_mma_slow": "CopyG2SOp", "test_one_k_tile_slow": "no 16-byte cp.async",
                     "test_gemm_correct_slow": "no 16-byte cp.async"}),
    "the fp16 MMA in the bf16 kernel": (
        _edit("gemm_dsl_host", "cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, 16))",
              "cute.nvgpu.warp.MmaF16BF16Op(cutlass.Float16, cutlass.Float32, (16, 8, 16))"),
        {"test_copies_and_mma_slow": "Float16 inputs", "test_one_k_tile_slow": "on bf16 inputs"}),
    "no barrier before the next tile's copies": (
        _edit("gemm_dsl", "        mma_k_tile(cta)\n        cute.arch.sync_threads()                       # everyone is done "
                          "reading it\n", "        mma_k_tile(cta)\n"),
        {"test_gemm_correct_slow": "no barrier since the last read of shared memory"}),
    "no barrier after the wait": (
        _edit("gemm_dsl", _K_LOOP, "        cute.arch.cp_async_wait_group(0)\n        # tile t's copies"),
        {"test_gemm_correct_slow": "with no barrier (__syncthreads) between them"}),
    "wait_group 1 leaves the tile it reads in flight": (
        _edit("gemm_dsl", _K_LOOP, _K_LOOP.replace("wait_group(0)", "wait_group(1)")),
        {"test_gemm_correct_slow": "may still be in flight"}),
    "no commit in the K loop": (
        _edit("gemm_dsl", "            cute.arch.cp_async_commit_group()\n    ### END SOLUTION", "    ### END SOLUTION"),
        {"test_gemm_correct_slow": "not closed into a group"}),
    "the next tile's copies issued before the MMAs, into the tile they read": (
        _edit("gemm_dsl", "        mma_k_tile(cta)\n        cute.arch.sync_threads()                       # everyone is done "
                          "reading it\n" + _LOADS, _LOADS + "        mma_k_tile(cta)\n        cute.arch.sync_threads()\n"),
        {"test_gemm_correct_slow": "may still be in flight"}),
}


def _kernel_namespace(replace: dict[str, str] | None = None) -> dict:
    return _run_files(STEP_CONTEXT + DSL_ALL + STEP_CHECKS, replace)


@pytest.mark.slow
def test_the_machine_code_of_the_dsl_solution_passes_steps_5_2_to_5_4(no_gpu) -> None:
    ns = _kernel_namespace()
    for test in KERNEL_TESTS:
        _run_files([test], namespace=ns)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG_DSL_KERNELS))
def test_the_machine_code_checks_reject_a_wrong_dsl_kernel(no_gpu, name: str) -> None:
    replace, fails = WRONG_DSL_KERNELS[name]
    ns = _kernel_namespace(replace)
    cells = cells_by_grade_id(NB)
    for test in KERNEL_TESTS:
        if test in fails:          # the visible part fails already: the student sees the sentence
            with pytest.raises(AssertionError, match=re.escape(fails[test])):
                _run_files([test], {test: visible_part(cells[test])}, namespace=ns)
        else:
            _run_files([test], namespace=ns)


def test_the_build_cell_says_what_the_fast_build_lacks(no_gpu, capsys) -> None:
    """Without a GPU a kernel that compiles says nothing of its results; its machine code says which techniques it
    lacks, under the build cell (an empty kernel body compiles too)."""
    _kernel_namespace(WRONG_DSL_KERNELS["UniversalCopy everywhere (no cp.async, no ldmatrix)"][0])
    out = capsys.readouterr().out
    assert "no 16-byte cp.async from global to shared memory" in out and "not from ldmatrix" in out, out
    _kernel_namespace()
    assert "cannot be right yet" not in capsys.readouterr().out


# ---- option A: the same machine-code checks on C++ builds (one NVRTC compile each, 60-120 s on two cores: only the
# fp16 VEC = 8 variant, built here directly instead of the build cell's five)

CPP_ALL = ["gemm_cpp_tiles", "gemm_cpp_load_tile", "gemm_cpp_setup", "gemm_cpp", "gemm_cpp_partitions",
           "gemm_cpp_first_tile", "gemm_cpp_k_loop", "gemm_cpp_whole"]


def _cpp_checks(replace: dict[str, str] | None = None) -> dict:
    """The notebook's step_checks with option A's VEC = 8 fp16 kernel as ``gemm05_cpp.kernel_for`` builds it."""
    import types

    import gemmlab

    whole = _edit("gemm_cpp_whole", "gemm05_cpp = cpp_gemm_from(GEMM05_CPP)", "gemm05_cpp = None")
    ns = _run_files(STEP_CONTEXT + ["vector_bytes"] + CPP_ALL, {**whole, **(replace or {})})
    kernel = gemmlab.compile(ns["GEMM05_CPP"], "gemm05<cute::half_t>", arch="sm_90a", options=("-DVEC=8",),
                             timeout=900)
    ns["gemm05_cpp"] = types.SimpleNamespace(kernel_for=lambda vec=8, dtype=None: kernel)
    return _run_files(STEP_CHECKS, namespace=ns)


WRONG_CPP_KERNELS = {
    "load_tile copies through the registers, not with g2s": (
        _edit("gemm_cpp_load_tile", "if (inside) copy(g2s, tXgX(_, i, j), tXsX(_, i, j));",
              "if (inside) copy(tXgX(_, i, j), tXsX(_, i, j));"), "kernel_checks", "no 16-byte cp.async"),
    "no barrier before the next tile's copies": (
        _edit("gemm_cpp_k_loop", "        mma_k_tile();\n        __syncthreads();                          // everyone is done "
                                 "reading it\n", "        mma_k_tile();\n"), "LOOP_CHECKS",
        "no barrier since the last read of shared memory"),
}


@pytest.mark.slow
def test_the_machine_code_of_the_cpp_solution_passes_steps_5_2_to_5_4(no_gpu, monkeypatch) -> None:
    monkeypatch.setenv("GEMMLAB_COMPILE_TIMEOUT", "900")
    ns = _cpp_checks()
    option = ns["nbh"].OPTION_NAMES[0]
    ns["require_techniques"](option, None, ns["kernel_checks"](8, ns["torch"].float16))
    ns["require_techniques"](option, None, ns["LOOP_CHECKS"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG_CPP_KERNELS))
def test_the_machine_code_checks_reject_a_wrong_cpp_kernel(no_gpu, monkeypatch, name: str) -> None:
    monkeypatch.setenv("GEMMLAB_COMPILE_TIMEOUT", "900")
    replace, checks, phrase = WRONG_CPP_KERNELS[name]
    ns = _cpp_checks(replace)
    listed = ns["kernel_checks"](8, ns["torch"].float16) if checks == "kernel_checks" else ns[checks]
    with pytest.raises(AssertionError, match=re.escape(phrase)):
        ns["require_techniques"](ns["nbh"].OPTION_NAMES[0], None, listed)


# ---- what the release (placeholders in every answer cell) scores on the CPU tests of the steps

def _release_answers() -> dict[str, str]:
    import nbformat

    from tests.support import ROOT

    nb = nbformat.read(ROOT / "course" / NB / f"{NB}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if is_answer(c)}


@pytest.mark.parametrize("test", ["test_tile_order", "test_copies_and_mma_slow", "test_one_k_tile_slow",
                                  "test_gemm_correct_slow", "test_perf_bar_slow"])
def test_the_release_scores_nothing_on_the_steps(no_gpu, test: str) -> None:
    answers = _release_answers()
    cells = STEP_CONTEXT + ["gemm_cpp_load_tile", "gemm_cpp"] + DSL_ALL + ["perf_measure_slow"]
    with pytest.raises(Exception, match="Neither option"):
        _run_files(cells + STEP_CHECKS + [test], {g: answers[g] for g in cells if g in answers})
