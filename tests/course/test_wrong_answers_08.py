"""Notebook 08's graded test cells fail wrong answers without a GPU (the raw-CUDA ladder).

Each test runs the solutions notebook's own cells in one namespace, with gemmlab seeing no GPU, puts a
wrong answer (a text edit of the solution cell, so it follows the course) in place of the answer cell,
and runs the graded test cell, hidden tests included, as the grader does: it must fail. Without a GPU
the rung tests fail on what they read in the kernel's machine code (gemmlab.techniques) or, for the
tile orders, on what gemmlab.checking.cexpr reads in the source; the same cells with the solution pass, and
with the release's placeholders every graded cell fails. What only a GPU can decide (a tile order
written so the CPU cannot read it) is in tests/course/test_gpu_cuda_ladder.py.
"""
from __future__ import annotations

import matplotlib
import nbformat
import pytest

from tests.support import ROOT
from tests.support.notebook08 import CELLS, CONTEXT, NB, ONE_SLOT_LOOP, edit, graded, swizzle_body
from autograder.cell_metadata import grade_id, is_answer, is_graded

matplotlib.use("Agg")
pytestmark = pytest.mark.usefixtures("no_gpu")     # gemmlab sees no GPU while the cells run
def fails(test: str, answers: dict[str, str], *messages: str) -> None:
    """The graded cell ``test`` fails with ``answers``, its message holding each of ``messages``."""
    with pytest.raises(Exception) as failure:
        graded(test, answers)
    assert isinstance(failure.value, AssertionError) or type(failure.value).__name__ == "ExerciseNotDone", failure.value
    for message in messages:
        assert message in str(failure.value), f"{test}: expected {message!r} in\n{failure.value}"


# ---------------------------------------------------------------- the solution passes; the release scores 0

@pytest.mark.slow
@pytest.mark.parametrize("test", sorted(CONTEXT))
def test_the_solution_passes_every_graded_cell(test: str) -> None:
    graded(test)


def release_answers() -> dict[str, str]:
    nb = nbformat.read(ROOT / "course" / NB / f"{NB}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if is_answer(c)}


def test_every_graded_cell_is_tested_here() -> None:
    nb = nbformat.read(ROOT / "solutions" / NB / f"{NB}.ipynb", as_version=4)
    graded_ids = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_graded(c)}
    assert graded_ids == set(CONTEXT)
    assert set(release_answers()) <= {gid for context in CONTEXT.values() for gid in context}


@pytest.mark.parametrize("test", sorted(CONTEXT))
def test_the_untouched_release_fails_every_graded_cell(test: str) -> None:
    release = release_answers()
    answers = {gid: release[gid] for gid in CONTEXT[test] if gid in release}
    assert answers, f"{test} depends on no answer cell"
    with pytest.raises(Exception) as failure:
        graded(test, answers)
    assert "not written yet" in str(failure.value) or "YOUR CODE HERE" in str(failure.value) \
        or "LOSES_TILES must be a string" in str(failure.value), failure.value


# ---------------------------------------------------------------- rung 1

@pytest.mark.slow
def test_rung_1_with_threads_down_the_columns_is_not_coalesced() -> None:
    wrong = edit("naive_src", """    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;""", """    int row = blockIdx.x * blockDim.x + threadIdx.x;
    int col = blockIdx.y * blockDim.y + threadIdx.y;""")
    fails("test_naive_slow", {"naive_src": wrong}, "touch 32 32-byte sectors", "number the threads along the contiguous dimension")


# ---------------------------------------------------------------- rung 2

SMEM_BODY_START = "    // ### BEGIN SOLUTION\n    for (int k0 = 0; k0 < K; k0 += T) {"
DIRECT = """    for (int k = 0; k < K; ++k)
        for (int i = 0; i < PER_THREAD; ++i) {
            int r = m0 + ty + i * ROWS, c = n0 + tx;
            if (r < M && c < N) acc[i] += __half2float(A[(size_t)r * lda + k]) * __half2float(B[(size_t)k * ldb + c]);
        }
"""


def smem_body(new: str) -> str:
    source = CELLS["smem_src"]
    start, end = source.index(SMEM_BODY_START), source.index("    // ### END SOLUTION")
    return source[:start] + new + source[end:]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["no shared memory", "tiles staged but unused"])
def test_rung_2_computing_from_global_memory_fails(name: str) -> None:
    if name == "no shared memory":
        wrong = smem_body(DIRECT)
    else:   # hostile: the tiles are staged (so shared memory is there), the sums read global memory
        wrong = edit("smem_src", "                acc[i] += sA[ty + i * ROWS][k] * b;",
                     "                acc[i] += (m0 + ty + i * ROWS < M && k0 + k < K && n0 + tx < N) ? "
                     "__half2float(A[(size_t)(m0 + ty + i * ROWS) * lda + k0 + k]) * "
                     "__half2float(B[(size_t)(k0 + k) * ldb + n0 + tx]) + 0.0f * b : 0.0f;")
    fails("test_smem_slow", {"smem_src": wrong}, "reads global memory straight into the computation")


@pytest.mark.slow
def test_rung_2_staging_down_the_columns_is_not_coalesced() -> None:
    wrong = edit("smem_src", "            int am = m0 + r, ak = k0 + tx;          // A element this thread stages",
                 "            int am = m0 + tx, ak = k0 + r;          // A element this thread stages")
    wrong = wrong.replace("sA[r][tx] = (am", "sA[tx][r] = (am")
    fails("test_smem_slow", {"smem_src": wrong}, "touch 32 32-byte sectors", "consecutive lanes should move consecutive")


# ---------------------------------------------------------------- rung 3

A_FROM_SHARED = "wmma::load_matrix_sync(a[i], &sA[(warp_m() * WM + 16 * i) * BK + kk], BK);"
A_FROM_GLOBAL = "wmma::load_matrix_sync(a[i], &A[(size_t)(m0 + warp_m() * WM + 16 * i) * lda + k0 + kk], lda);"
B_FROM_SHARED = "wmma::load_matrix_sync(b[j], &sB[kk * BN + warp_n() * WN + 16 * j], BN);"
B_FROM_GLOBAL = "wmma::load_matrix_sync(b[j], &B[(size_t)(k0 + kk) * ldb + n0 + warp_n() * WN + 16 * j], ldb);"


@pytest.mark.slow
@pytest.mark.parametrize("which", ["A", "B", "both"])
def test_rung_3_fragments_from_global_memory_fail(which: str) -> None:
    wrong = CELLS["wmma_src"]
    if which in ("A", "both"):
        wrong = wrong.replace(A_FROM_SHARED, A_FROM_GLOBAL)
    if which in ("B", "both"):
        wrong = wrong.replace(B_FROM_SHARED, B_FROM_GLOBAL)
    assert wrong != CELLS["wmma_src"]
    fails("test_wmma_slow", {"wmma_src": wrong}, "fragments of your MMAs in your main loop come from global memory")


@pytest.mark.slow
def test_rung_3_copies_of_two_bytes_fail() -> None:
    wrong = edit("wmma_src", """            *reinterpret_cast<uint4*>(&sA[r * BK + c]) =
                *reinterpret_cast<const uint4*>(&A[(size_t)(m0 + r) * lda + k0 + c]);""", """            for (int e = 0; e < 8; ++e) sA[r * BK + c + e] = A[(size_t)(m0 + r) * lda + k0 + c + e];""")
    fails("test_wmma_slow", {"wmma_src": wrong}, "is a 16-byte loads and stores through the registers")


# ---------------------------------------------------------------- rung 4

WAIT = "        __pipeline_wait_prior(STAGES - 2);               // my copies of tile kt have landed"
NEXT = """                if (next < k_tiles) load(sA + next % STAGES * A_SLOT, sB + next % STAGES * B_SLOT, next);
                __pipeline_commit();"""
COPY_A = "        __pipeline_memcpy_async(sA + r * LDA_S + c, A + (size_t)(m0 + r) * lda + k0 + c, 16);"
RING_BODY = "    for (int s = 0; s < STAGES - 1; ++s) {               // prologue: the first STAGES-1 tiles"


def ring_body(new: str, keep_solution_as_dead_code: bool = False) -> str:
    source = CELLS["pipe_src"]
    start = source.index(RING_BODY)
    end = source.index("    // ### END SOLUTION", start)
    if keep_solution_as_dead_code:
        new = "    if (k_tiles == 987654) {\n" + source[start:end] + "    } else {\n" + new + "    }\n"
    return source[:start] + new + source[end:]


RING_WRONG = {
    "wait_prior(0)": (lambda: edit("pipe_src", WAIT, "        __pipeline_wait_prior(0);"),
                      "where the ring keeps 2"),
    "wait_group 0 in inline PTX": (lambda: edit("pipe_src", WAIT, '        asm volatile("cp.async.wait_group 0;\\n" ::: "memory");'),
                                   "cp.async.wait_group 0"),
    "a commit only when a tile is loaded": (lambda: edit("pipe_src", NEXT, """                if (next < k_tiles) {
                    load(sA + next % STAGES * A_SLOT, sB + next % STAGES * B_SLOT, next);
                    __pipeline_commit();
                }"""), "commit no group of copies"),
    "copies through the registers": (lambda: edit("pipe_src", COPY_A, "        *reinterpret_cast<uint4*>(sA + r * LDA_S + c) = "
                                                  "*reinterpret_cast<const uint4*>(A + (size_t)(m0 + r) * lda + k0 + c);"),
                                     "is a 16-byte cp.async"),
    "a cp.async that never runs beside copies that do": (lambda: edit("pipe_src", COPY_A, """        if (threadIdx.x > 100000) __pipeline_memcpy_async(sA + r * LDA_S + c, A + (size_t)(m0 + r) * lda + k0 + c, 16);
        else *reinterpret_cast<uint4*>(sA + r * LDA_S + c) = *reinterpret_cast<const uint4*>(A + (size_t)(m0 + r) * lda + k0 + c);"""),
                                                         "is a 16-byte cp.async"),
    "one slot, loaded and waited for in each iteration": (lambda: ring_body(ONE_SLOT_LOOP + "    __syncthreads();\n"),
                                                         "not yet a pipeline"),
    "a ring that never runs beside a loop that does the work": (lambda: ring_body(ONE_SLOT_LOOP, True), "not yet a pipeline"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RING_WRONG))
def test_rung_4_without_a_pipeline_fails(name: str) -> None:
    make, message = RING_WRONG[name]
    fails("test_dbuf_slow", {"pipe_src": make()}, message)


# ---------------------------------------------------------------- rung 5: the tile order, on the CPU

SWIZZLE_RETURN = "    return make_int2(first_m + in_band % rows, in_band / rows);"
ORDER_WRONG = {
    "row-major": "    return make_int2(pid / tiles_n, pid % tiles_n);\n",
    "column-major over the whole grid": "    return make_int2(pid % tiles_m, pid / tiles_m);\n",
    "row by row inside the band": """    const int per_band = GROUP_M * tiles_n, first_m = pid / per_band * GROUP_M, in_band = pid % per_band;
    return make_int2(first_m + in_band / tiles_n, in_band % tiles_n);
""",
    "the last band as tall as the others": """    const int per_band = GROUP_M * tiles_n, first_m = pid / per_band * GROUP_M, in_band = pid % per_band;
    return make_int2(first_m + in_band % GROUP_M, in_band / GROUP_M);
""",
    "bands of tile columns": """    const int per_band = GROUP_M * tiles_m, first_n = pid / per_band * GROUP_M;
    const int cols = min(tiles_n - first_n, GROUP_M), in_band = pid % per_band;
    return make_int2(in_band / cols, first_n + in_band % cols);
""",
}


@pytest.mark.parametrize("name", sorted(ORDER_WRONG))
def test_rung_5_in_another_order_fails_on_the_cpu(name: str) -> None:
    fails("test_swizzle_order", {"swizzle_src": swizzle_body(ORDER_WRONG[name])}, "where the grouped order gives")


def test_rung_5_written_so_the_cpu_cannot_read_it_is_left_to_the_gpu_and_its_points_need_one() -> None:
    """A hostile student hides a row-major order from the CPU (a #define, or a branch): the CPU says so, the
    GPU probe decides (test_gpu_cuda_ladder.py), and the grader pays the cell only on a GPU."""
    for old, new in ((SWIZZLE_RETURN, "#define ORDER make_int2(pid / tiles_n, pid % tiles_n)\n    return ORDER;"),
                     (SWIZZLE_RETURN, "    if (pid >= 0) { return make_int2(pid / tiles_n, pid % tiles_n); }\n" + SWIZZLE_RETURN)):
        printed = graded("test_swizzle_order", {"swizzle_src": edit("swizzle_src", old, new)})
        assert "is not read on the CPU" in printed and "NOT CHECKED (1 point)" in printed, printed
    nb = nbformat.read(ROOT / "solutions" / NB / f"{NB}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if grade_id(c) == "test_swizzle_order")
    assert cell.metadata["gemmlab"]["needs_gpu"] is True


# ---------------------------------------------------------------- Exercise 6b (a): when the tutorial's order loses tiles

RULE = 'LOSES_TILES = "tiles_m > 1 and tiles_n % 4 != 0"'


def rule(text: str) -> str:
    return edit("swizzle_bug_rule", RULE, f"LOSES_TILES = {text}")


@pytest.mark.parametrize("text", ['"tiles_m > 1 and tiles_n % 4 > 0"', '"not (tiles_m == 1 or tiles_n % 4 == 0)"',
                                  '"(tiles_n % 4) * (tiles_m - 1)"', '"tiles_m >= 2 and 0 < tiles_n % 4"'])
def test_rule_right_in_other_words_passes(text: str) -> None:
    graded("test_swizzle_bug_rule", {"swizzle_bug_rule": rule(text)})


@pytest.mark.parametrize("text", [
    '"tiles_n % 4 != 0"',                                         # one tile row never loses a tile
    '"tiles_m > 1 and tiles_n > 4 and tiles_n % 4 != 0"',         # fewer than 4 tile columns lose tiles too
    '"tiles_m % 4 != 0 and tiles_n > 1"',                         # the axes swapped
    '"tiles_m * tiles_n % 4 != 0"',                               # the tile count, not the columns
    '"tiles_m > 1 and tiles_n > 1 and tiles_n % 4 != 0"',         # one tile column loses tiles too
    '"tiles_m > 1 and tiles_n % 2 != 0"',
    '"1"', '"0"', '"tiles_m > 1"',
])
def test_a_wrong_rule_fails_and_is_told_a_grid_not_the_rule(text: str) -> None:
    with pytest.raises(AssertionError) as failure:
        graded("test_swizzle_bug_rule", {"swizzle_bug_rule": rule(text)})
    message = str(failure.value)
    assert "is wrong on a" in message and "tiles_written(tutorial_tile" in message
    assert "% 4" not in message.replace(text.strip('"'), ""), "the message must not give the rule away"


@pytest.mark.parametrize("text, message", [
    ('"__import__(\'os\').system(\'true\')"', "uses"),                 # a call is not read
    ('"tiles_m.__class__ is int"', "uses"),
    ('"(lambda: 1)()"', "uses"),
    ('"tiles_m ** 2 > 3"', "uses"),
    ('"True"', "uses"),
    ('"10 ** 100"', "uses"),
    ('"99999999999 > tiles_m"', "uses"),
    ('"tiles_m % (tiles_n - tiles_n) == 0"', "divides by zero"),
    ('"tiles_m >"', "not a Python expression"),
    ('"tiles_m\\x00"', "not a Python expression"),
    ('" or ".join(f"(tiles_m == {m} and tiles_n == {n})" for m in range(2, 65) for n in range(1, 65) if n % 4)',
     "at most 200 characters"),                                      # the grids enumerated
    ('lambda tiles_m, tiles_n: tiles_m > 1 and tiles_n % 4 != 0', "must be a string"),
    ('["tiles_m > 1 and tiles_n % 4 != 0"]', "must be a string"),
])
def test_a_hostile_rule_is_refused_without_being_run(text: str, message: str) -> None:
    fails("test_swizzle_bug_rule", {"swizzle_bug_rule": rule(text)}, message)


# ---------------------------------------------------------------- Exercise 6b (b): the repaired order

FIX = """    const int panel = pid / (4 * tiles_m);                 // which thick column
    const int width = min(4, tiles_n - 4 * panel);         // its tile columns: the last one may have fewer than 4
    const int in_panel = pid - 4 * tiles_m * panel;        // CTAs before this one in its thick column
    return make_int2(in_panel / width, 4 * panel + in_panel % width);
"""


def fix(new: str) -> str:
    return edit("swizzle_bug_fix", FIX, new)


def test_a_fix_in_other_words_passes() -> None:
    graded("test_swizzle_bug_fix", {"swizzle_bug_fix": fix("""    int panel = pid / (4 * tiles_m);
    int width = tiles_n - 4 * panel;
    width = min(width, 4);
    int local = pid % (4 * tiles_m);
    return make_int2(local / width, panel * 4 + local % width);
""")})


@pytest.mark.parametrize("name, body, message", [
    ("the tutorial's order unchanged", """    const int panel = pid / (4 * tiles_m);
    return make_int2((pid / 4) % tiles_m, pid % 4 + panel * 4);
""", "to no CTA"),
    ("clamped to the last column", """    const int panel = pid / (4 * tiles_m);
    return make_int2((pid / 4) % tiles_m, min(pid % 4 + panel * 4, tiles_n - 1));
""", "to no CTA"),
    ("width without the min", """    const int panel = pid / (4 * tiles_m);
    const int width = tiles_n - 4 * panel;
    const int in_panel = pid - 4 * tiles_m * panel;
    return make_int2(in_panel / width, 4 * panel + in_panel % width);
""", "to no CTA"),
    ("down the rows first inside a thick column", """    const int panel = pid / (4 * tiles_m);
    const int in_panel = pid - 4 * tiles_m * panel;
    return make_int2(in_panel % tiles_m, 4 * panel + in_panel / tiles_m);
""", "the tutorial's order was right, so keep it there"),
    ("row-major over the grid", """    return make_int2(pid / tiles_n, pid % tiles_n);
""", "the tutorial's order was right, so keep it there"),
    ("a branch", """    if (tiles_n % 4 == 0) { return make_int2((pid / 4) % tiles_m, pid % 4 + pid / (4 * tiles_m) * 4); }
    return make_int2(pid / tiles_n, pid % tiles_n);
""", "straight-line"),
    ("a macro", """#define WIDTH 4
    return make_int2(pid / tiles_n, pid % tiles_n);
""", "preprocessor"),
])
def test_a_wrong_fix_fails(name: str, body: str, message: str) -> None:
    fails("test_swizzle_bug_fix", {"swizzle_bug_fix": fix(body)}, message)


# ---------------------------------------------------------------- rung 6

COPY8 = """    if (row < rows && col + 8 <= cols && reinterpret_cast<size_t>(p) % 16 == 0) {
        __pipeline_memcpy_async(dst, p, 16);
    } else {
        for (int i = 0; i < 8; ++i)
            dst[i] = (row < rows && col + i < cols) ? p[i] : __float2half(0.0f);
    }"""


@pytest.mark.slow
@pytest.mark.parametrize("name, new, message", [
    ("copy8 element by element only", """    for (int i = 0; i < 8; ++i)
        dst[i] = (row < rows && col + i < cols) ? p[i] : __float2half(0.0f);""", "no 16-byte cp.async"),
    ("copy8 with no scalar tail", """    __pipeline_memcpy_async(dst, p, 16);""", "no loads and stores through the registers"),
])
def test_rung_6_copy8_without_its_two_paths_fails(name: str, new: str, message: str) -> None:
    fails("test_any_slow", {"any_src": edit("any_src", COPY8, new)}, "your copy8", message)


@pytest.mark.slow
def test_rung_6_whose_edge_loader_does_not_use_copy8_is_no_ring_at_the_edges() -> None:
    wrong = edit("any_src", "        copy8(sA + r * LDA_S + c, A, m0 + r, k0 + c, M, K, lda);", """        for (int i = 0; i < 8; ++i)
            sA[r * LDA_S + c + i] = (m0 + r < M && k0 + c + i < K) ? A[(size_t)(m0 + r) * lda + k0 + c + i] : __float2half(0.0f);""")
    wrong = wrong.replace("        copy8(sB + r * LDB_S + c, B, k0 + r, n0 + c, K, N, ldb);", """        for (int i = 0; i < 8; ++i)
            sB[r * LDB_S + c + i] = (k0 + r < K && n0 + c + i < N) ? B[(size_t)(k0 + r) * ldb + n0 + c + i] : __float2half(0.0f);""")
    fails("test_any_slow", {"any_src": wrong}, "rung 6 (ladder_any)", "not yet a pipeline")
