"""check_gemm's whole checking logic on CPU, with planted bugs written in torch."""
from __future__ import annotations


import pytest
import torch

from gemmlab.checking.check import check_gemm
from gemmlab.results import SUITES
from gemmlab.errors import GemmlabError, NoGPUError

SHAPES = [(128, 128, 64), (129, 257, 64), (3, 5, 7)]


def good(A, B, D):
    D.copy_((A.float() @ B.float().T).to(D.dtype))


def good_nn(A, B, C, alpha, beta):
    C.copy_((alpha * (A.float() @ B.float()) + beta * C.float()).to(C.dtype))


def test_correct_function_passes_every_dtype():
    for dtype, out in [(torch.float16, None), (torch.bfloat16, None), (torch.float16, torch.float32),
                       (torch.bfloat16, torch.float32)]:
        r = check_gemm(good, dtype=dtype, out_dtype=out, shapes=SHAPES, device="cpu")
        assert r.passed, str(r)
        assert all(row.guard_ok and row.inputs_ok and row.n_bad == 0 for row in r.rows)
        assert "PASSED" in str(r)
        r.raise_if_failed()


def test_nn_convention_reads_c():
    r = check_gemm(good_nn, convention="nn", shapes=SHAPES, device="cpu")
    assert r.passed, str(r)

    def ignores_c(A, B, C, alpha, beta):
        C.copy_((alpha * (A.float() @ B.float())).to(C.dtype))

    bad = check_gemm(ignores_c, convention="nn", shapes=SHAPES, device="cpu")
    assert not bad.passed  # beta != 0 by default in "nn"
    assert all(row.n_bad > 0 for row in bad.rows)


def test_nn_with_beta_zero_starts_c_as_nan_so_reading_it_or_skipping_elements_fails():
    """BLAS does not read C when beta is 0: a kernel that reads it anyway turns the poison into NaN, and one
    that leaves elements alone leaves the poison there."""
    def skips_beta_zero(A, B, C, alpha, beta):
        out = alpha * (A.float() @ B.float())
        C.copy_((out if beta == 0 else out + beta * C.float()).to(C.dtype))

    assert check_gemm(skips_beta_zero, convention="nn", shapes=SHAPES, beta=0.0, device="cpu").passed
    reads = check_gemm(good_nn, convention="nn", shapes=SHAPES, beta=0.0, device="cpu")
    assert not reads.passed and all(row.n_nonfinite > 0 for row in reads.rows), str(reads)
    assert "the kernel read C; skip reading it when beta == 0" in reads.rows[0].message

    def half_written(A, B, C, alpha, beta):
        C[: C.shape[0] // 2].copy_((alpha * (A.float() @ B.float()))[: C.shape[0] // 2].to(C.dtype))

    partial = check_gemm(half_written, convention="nn", shapes=SHAPES, beta=0.0, device="cpu")
    assert not partial.passed and all(row.n_unwritten > 0 for row in partial.rows), str(partial)


def test_padded_rows_catch_a_kernel_that_ignores_the_pitch_or_writes_the_padding():
    """``pad``: every operand's rows are longer than the matrix. A GEMM that indexes by its strides passes; one that
    treats the operands as packed reads the wrong elements, and one that writes whole padded rows of C is told so."""
    assert check_gemm(good_nn, convention="nn", shapes=SHAPES, pad=3, device="cpu").passed

    def packed(A, B, C, alpha, beta):   # reads and writes as if each row were exactly K (or N) long
        flat = lambda t: torch.as_strided(t, (t.shape[0] * t.shape[1],), (1,)).view(t.shape)  # noqa: E731
        C_, A_, B_ = flat(C), flat(A), flat(B)
        C_.copy_((alpha * (A_.float() @ B_.float()) + beta * C_.float()).to(C.dtype))

    wrong = check_gemm(packed, convention="nn", shapes=[(64, 48, 32)], pad=8, device="cpu")
    assert not wrong.passed and "leading dimensions" in wrong.rows[0].message, str(wrong)

    def writes_padding(A, B, C, alpha, beta):
        good_nn(A, B, C, alpha, beta)
        torch.as_strided(C, (C.shape[0], C.stride(0)), (C.stride(0), 1)).select(1, -1).fill_(0)

    spilled = check_gemm(writes_padding, convention="nn", shapes=[(64, 48, 32)], pad=8, device="cpu")
    assert not spilled.passed and not spilled.rows[0].guard_ok, str(spilled)
    assert "64 elements in the padding of the output's rows were written" in spilled.rows[0].message
    for bad in (-1, 257, 1.5, True):
        with pytest.raises(GemmlabError, match="pad is a whole number"):
            check_gemm(good_nn, convention="nn", shapes=SHAPES, pad=bad, device="cpu")


def test_operands_that_start_past_alignment_are_views_that_a_correct_gemm_still_multiplies():
    """``offset``: A, B and C start that many elements past a 16-byte boundary; the check's guard zones still
    catch a write just before C's first element."""
    seen = []

    def records_alignment(A, B, C, alpha, beta):
        seen.append([t.data_ptr() % 16 for t in (A, B, C)])
        good_nn(A, B, C, alpha, beta)

    assert check_gemm(records_alignment, convention="nn", shapes=[(33, 17, 9)], offset=3, device="cpu").passed
    assert seen == [[6, 6, 6]]

    def writes_before(A, B, C, alpha, beta):
        good_nn(A, B, C, alpha, beta)
        torch.as_strided(C, (1,), (1,), C.storage_offset() - 1).fill_(0)

    r = check_gemm(writes_before, convention="nn", shapes=[(33, 17, 9)], offset=3, device="cpu")
    assert not r.passed and not r.rows[0].guard_ok
    for bad in (-1, 65, 1.5, True):
        with pytest.raises(GemmlabError, match="offset is a whole number"):
            check_gemm(good_nn, convention="nn", shapes=SHAPES, offset=bad, device="cpu")


def test_out_of_bounds_store_is_caught_by_guard_zone():
    def oob(A, B, D):
        good(A, B, D)
        M, N = D.shape
        torch.as_strided(D, (M + 1, N), (N, 1))[M, :12] = 1.0  # one row past the end

    r = check_gemm(oob, shapes=[(128, 128, 64), (129, 257, 64)], device="cpu")
    assert not r.passed
    for row in r.rows:
        assert not row.guard_ok and row.n_bad == 0
        assert row.message.startswith("12 elements outside the output were written (guard zone after D)")
        assert "epilogue's predicate" in row.message
    with pytest.raises(AssertionError, match="guard zone after D"):
        r.raise_if_failed()


def test_store_before_output_is_caught():
    def before(A, B, D):
        good(A, B, D)
        D.view(-1)  # the storage offset lets us step back one element
        torch.as_strided(D, (1,), (1,), D.storage_offset() - 1).fill_(0.0)

    r = check_gemm(before, shapes=[(16, 16, 16)], device="cpu")
    assert not r.rows[0].guard_ok and "guard zone before D" in r.rows[0].message


def test_unwritten_last_column_of_tiles():
    def skips_partial_column(A, B, D):
        M, N = D.shape
        n = (N // 128) * 128  # grid = N // 128: forgets ceil_div
        D[:, :n].copy_((A.float() @ B.float()[:n].T).to(D.dtype))

    r = check_gemm(skips_partial_column, shapes=[(128, 128, 64), (256, 257, 64)], device="cpu")
    assert r.rows[0].passed
    row = r.rows[1]
    assert not row.passed and row.n_unwritten == 256 and row.n_bad == 256
    assert row.message == ("256 elements never written (still NaN) in the last column of tiles: "
                           "your grid does not cover N=257 — use ceil_div")
    assert row.bad_tiles == [(0, 2), (1, 2)]
    assert row.rel_error == float("inf")


def test_edge_only_bug_heatmap_marks_exactly_edge_tiles():
    def wrong_edges(A, B, D):
        good(A, B, D)
        M, N = D.shape
        D[(M // 128) * 128:, :] *= 1.5  # partial last row of tiles
        D[:, (N // 128) * 128:] *= 1.5  # partial last column of tiles

    r = check_gemm(wrong_edges, shapes=[(256, 256, 64), (300, 400, 136)], device="cpu")
    assert r.rows[0].passed  # no partial tiles: correct
    row = r.rows[1]
    assert not row.passed and row.guard_ok and row.inputs_ok and row.n_unwritten == 0
    tm, tn = 3, 4  # ceil(300/128), ceil(400/128)
    expected = sorted({(tm - 1, j) for j in range(tn)} | {(i, tn - 1) for i in range(tm)})
    assert row.bad_tiles == expected
    assert "only in the edge tiles" in row.message
    assert row.tile_fraction.shape == (tm, tn) and row.tile_fraction[0, 0] == 0
    # a bad element's worst-case report points inside the edge region
    i, j, got, want = row.worst
    assert i >= 256 or j >= 384
    fig = r.heatmap()
    assert fig.axes and "300×400×136" in fig.axes[0].get_title()
    html = r._repr_html_()
    assert "data:image/png;base64," in html and "#fce8e6" in html


def test_wrong_only_in_last_row_of_tiles_message():
    def last_rows(A, B, D):
        good(A, B, D)
        M = D.shape[0]
        D[(M // 128) * 128:, :] = 0

    row = check_gemm(last_rows, shapes=[(129, 256, 64)], device="cpu").rows[0]
    assert "wrong in the last row of tiles" in row.message and "M=129" in row.message


def test_nan_output_fails_even_for_one_element():
    def one_nan(A, B, D):
        good(A, B, D)
        D[5, 7] = float("inf")

    r = check_gemm(one_nan, shapes=[(1024, 1024, 64)], device="cpu")
    row = r.rows[0]
    assert not row.passed and row.n_nonfinite == 1 and row.n_bad == 1
    assert row.worst[:2] == (5, 7)
    assert "NaN or Inf in 1 element" in row.message


def test_few_wrong_elements_fail_at_large_shape():
    def off_by_a_bit(A, B, D):
        good(A, B, D)
        D[-1, -4:] += 2.0  # 4 elements, tiny in the Frobenius norm

    row = check_gemm(off_by_a_bit, shapes=[(1024, 1024, 256)], device="cpu").rows[0]
    assert row.rel_error < 2e-3  # the norm alone would pass
    assert not row.passed and row.n_bad == 4


def test_input_mutation_is_caught():
    def writes_b(A, B, D):
        good(A, B, D)
        B[0, 0] = 42.0

    row = check_gemm(writes_b, shapes=[(64, 64, 64)], device="cpu").rows[0]
    assert not row.inputs_ok and not row.passed
    assert "input B was modified" in row.message


def test_returning_instead_of_writing_is_explained():
    row = check_gemm(lambda A, B, D: A @ B.T, shapes=[(32, 32, 32)], device="cpu").rows[0]
    assert "returned a tensor" in row.message


def test_fp16_accumulation_is_too_inaccurate_for_large_k():
    def fp16_accumulate(A, B, D):
        acc = torch.zeros(D.shape, dtype=torch.float16)
        for k in range(0, A.shape[1], 16):  # fp16 partial sums, as an hgemm would
            acc += (A[:, k:k + 16].float() @ B[:, k:k + 16].float().T).half()
        D.copy_(acc)

    row = check_gemm(fp16_accumulate, shapes=[(64, 64, 8192)], device="cpu").rows[0]
    assert not row.passed


def test_fresh_inputs_each_call_and_seed_reproduces():
    seen = []

    def record(A, B, D):
        seen.append(A.clone())
        good(A, B, D)

    a = check_gemm(record, shapes=[(8, 8, 8)], device="cpu")
    b = check_gemm(record, shapes=[(8, 8, 8)], device="cpu")
    assert a.seed != b.seed and not torch.equal(seen[0], seen[1])
    assert seen[0].abs().sum() > 0
    check_gemm(record, shapes=[(8, 8, 8)], device="cpu", seed=123)
    check_gemm(record, shapes=[(8, 8, 8)], device="cpu", seed=123)
    assert torch.equal(seen[2], seen[3])


def test_launch_error_for_one_shape_is_a_failing_row():
    from gemmlab.errors import LaunchError

    def refuses_small(A, B, D):
        if D.shape[0] < 16:
            raise LaunchError("grid=(0, 1, 1) is empty")
        good(A, B, D)

    r = check_gemm(refuses_small, shapes=[(16, 16, 16), (3, 5, 7)], device="cpu")
    assert r.rows[0].passed and not r.rows[1].passed
    assert "LaunchError" in r.rows[1].message


def test_suites_and_argument_errors():
    assert all(m % 16 == 0 and n % 16 == 0 and k % 16 == 0 for m, n, k in SUITES["aligned"])
    assert any(k % 8 for _, _, k in SUITES["default"]) and any(n % 8 for _, n, _ in SUITES["default"])
    assert any(m <= 16 for m, _, _ in SUITES["default"]) and any(n <= 16 for _, n, _ in SUITES["default"])
    with pytest.raises(GemmlabError, match="Unknown shape suite"):
        check_gemm(good, shapes="huge", device="cpu")
    with pytest.raises(GemmlabError, match="convention"):
        check_gemm(good, convention="nt", device="cpu")
    with pytest.raises(GemmlabError, match="dtype"):
        check_gemm(good, dtype=torch.float32, device="cpu")


def test_default_device_needs_gpu(no_gpu):
    with pytest.raises(NoGPUError, match="check_gemm needs a CUDA GPU"):
        check_gemm(good)


def test_result_round_trips_through_json_with_its_heatmap():
    import json

    from gemmlab.results import CheckResult

    def wrong_edges(A, B, D):
        D.copy_((A.float() @ B.float().T).to(D.dtype))
        D[-1, :] = 0
        D[:, -1] = float("nan")

    r = check_gemm(wrong_edges, shapes=[(16, 16, 16), (129, 257, 64)], tile=(16, 16), device="cpu")
    data = json.loads(json.dumps(r.to_dict(), allow_nan=False))   # strict JSON: no NaN or Infinity
    assert data["passed"] is False and len(data["rows"][1]["tile_fraction"]) == 9
    back = CheckResult.from_dict(data)
    assert str(back) == str(r) and back._repr_html_() == r._repr_html_()
    assert back.rows[1].bad_tiles == r.rows[1].bad_tiles
    assert (back.rows[1].tile_fraction == r.rows[1].tile_fraction).all()
    assert repr(back.rows[1].worst) == repr(r.rows[1].worst) and back.passed == r.passed  # NaN != NaN
