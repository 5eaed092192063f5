"""Is this GEMM right? Run it over a suite of shapes and say what is wrong and where.

Every call draws fresh random inputs, poisons the output with a marked NaN, and puts
every operand inside a larger buffer whose guard zones hold a sentinel bit pattern. So
beyond "the numbers are off" the check can tell a student *which* kind of bug they
have: an out-of-bounds store (guard zone changed), a grid that does not cover the
output (poison left), a write into an input, or wrong values only on edge tiles
(per-tile heatmap).
"""
from __future__ import annotations

import math
import operator
import secrets
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator

from gemmlab.errors import ContextLostError, GemmlabError, KernelTimeoutError
from gemmlab.checking import report
from gemmlab.running.gpu import require_gpu
from gemmlab.checking.integrity import grading_mode, late_work_message, library_guard, library_message, watched_call
from gemmlab.running import faults
from gemmlab.running.device import device_label, torch_device
from gemmlab.dtypes import dtype_name
from gemmlab.running.memory import GuardedMatrix
from gemmlab.running.streams import DEFAULT_TIMEOUT_S
from gemmlab.results import MAX_OFFSET, MAX_PAD, SUITES, CheckResult, Row, RowVerdicts, Shape, nonzero_tiles
from gemmlab.timing.timing_lock import shared_gpu_work
from gemmlab.offload import pool_for_work

# Relative Frobenius tolerance and element-wise (atol factor, rtol) per output dtype.
# fp32 accumulation of fp16/bf16 products differs from an fp64 reference only by rounding
# order (~1e-6); what dominates is rounding the result to the output type.
# Measured on CPU: fp16 out ≈ 2.1e-4, bf16 out ≈ 1.7e-3; fp16 partial sums over K=8192 ≈ 1.6e-3 or worse.
_TOLERANCES = {"float32": (1e-4, 1e-4, 1e-4), "float16": (1e-3, 2e-3, 2e-3), "bfloat16": (1e-2, 1.6e-2, 1.6e-2)}


# --------------------------------------------------------------------------- the check


def _suite(shapes: Any) -> list[Shape]:
    if shapes is None:
        return list(SUITES["default"])
    if isinstance(shapes, str):
        if shapes not in SUITES:
            raise GemmlabError(f"Unknown shape suite {shapes!r}: choose one of {', '.join(SUITES)} or give a list of (M, N, K).")
        return list(SUITES[shapes])
    out = []
    for s in shapes:
        if len(s) != 3 or any(int(v) <= 0 for v in s):
            raise GemmlabError(f"Each shape must be (M, N, K) with positive sizes, not {s!r}.")
        out.append(tuple(int(v) for v in s))
    return out  # type: ignore[return-value]


@contextmanager
def _exact_reference() -> Iterator[None]:
    """No TF32 anywhere while we compute the reference."""
    import torch

    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _where(tiles: list[tuple[int, int]], tm: int, tn: int) -> str:
    """Words for where the bad tiles are: last column, last row, edges, everywhere."""
    if not tiles:
        return ""
    rows = {i for i, _ in tiles}
    cols = {j for _, j in tiles}
    if tm * tn == 1:
        return "in the only output tile"
    if len(tiles) == tm * tn:
        return "in every output tile"
    if cols == {tn - 1} and tn > 1:
        return "in the last column of tiles"
    if rows == {tm - 1} and tm > 1:
        return "in the last row of tiles"
    if all(i == tm - 1 or j == tn - 1 for i, j in tiles):
        return "only in the edge tiles (last row/column of tiles)"
    return f"in {len(tiles)} of {tm * tn} output tiles"


def _n(count: int, noun: str) -> str:
    """'1 element' / '1,024 elements'."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _edge_hint(shape: Shape, tile: tuple[int, int], where: str) -> str:
    M, N, K = shape
    if where == "in the last column of tiles":
        return f"your grid or bounds check does not handle N={N} (not a multiple of {tile[1]})"
    if where == "in the last row of tiles":
        return f"your grid or bounds check does not handle M={M} (not a multiple of {tile[0]})"
    if where.startswith("only in the edge"):
        return "the partial tiles at the edges are handled wrongly — check the predicates for the residue M % tile and N % tile"
    return ""


def _classify(shape: Shape, tile: tuple[int, int], n_unwritten: int, unwritten_where: str, n_nonfinite: int,
              n_bad: int, where: str, rel: float, tol: float, guards: dict[str, tuple[int, int]],
              changed_inputs: list[str], returned_tensor: bool, n_stale: int, pad: int = 0,
              padding_written: int = 0) -> str:
    """One sentence (or a few) saying what is wrong and where to look."""
    M, N, K = shape
    msgs = []
    if padding_written:
        msgs.append(f"{_n(padding_written, 'element')} in the padding of the output's rows were written (each row is "
                    f"{N + pad} elements apart, {pad} more than N={N}): index rows with the leading dimension (ldc, "
                    "the row stride), not N")
    out_before, out_after = guards.pop("out")
    if out_after:
        msgs.append(f"{_n(out_after, 'element')} outside the output were written (guard zone after D): "
                    "an out-of-bounds store — check your epilogue's predicate (row < M and col < N)")
    if out_before:
        msgs.append(f"{_n(out_before, 'element')} before the output were written (guard zone before D): "
                    "a negative or wrapped-around index in your store")
    for name, (before, after) in guards.items():
        if before or after:
            msgs.append(f"{_n(before + after, 'element')} around input {name} were written: the kernel must only read {name}")
    for name in changed_inputs:
        msgs.append(f"input {name} was modified: the kernel must only read A and B (check which pointer you store through)")
    if returned_tensor and n_unwritten == M * N:
        msgs.append("the output was never written but your function returned a tensor: write the result into "
                    "the output argument in place (e.g. D.copy_(...)), do not return it")
    elif n_unwritten:
        hint = ""
        if unwritten_where in ("in the last column of tiles", "in the last row of tiles") or unwritten_where.startswith("only in the edge"):
            dim = f"N={N}" if "column" in unwritten_where else f"M={M}" if "row" in unwritten_where else f"M={M}, N={N}"
            hint = f": your grid does not cover {dim} — use ceil_div"
        elif unwritten_where in ("in every output tile", "in the only output tile"):
            hint = ": some threads never store (check the store's index and the block/grid size)"
        msgs.append(f"{_n(n_unwritten, 'element')} never written (still NaN) {unwritten_where}{hint}")
    if n_stale * 2 > n_bad:
        msgs.append(f"{_n(n_stale, 'element')} still hold their old C value {where}: never written?")
    else:
        n_stale = 0
    if n_nonfinite:
        msgs.append(f"NaN or Inf in {_n(n_nonfinite, 'element')}: uninitialised accumulators or shared memory, "
                    "or reading outside the inputs")
    wrong = n_bad - n_unwritten - n_nonfinite - n_stale
    if wrong > 0:
        hint = _edge_hint(shape, tile, where)
        if where in ("in every output tile", "in the only output tile") and rel > 0.03 and pad:
            hint = (f"the rows are padded here ({pad} elements past each row's end): index A, B and C with their "
                    "leading dimensions (lda, ldb, ldc: the row strides), not with K and N")
        elif where in ("in every output tile", "in the only output tile") and rel > 0.03:
            hint = ("check the indexing and layouts (tn: D = A·Bᵀ with A M×K and B N×K, both K-contiguous; "
                    "nn: C = α·A·B + β·C with B K×N)")
        elif where in ("in every output tile", "in the only output tile"):
            hint = f"every tile is a little off: check the last K-block (K={K}) and the accumulator type (fp32)"
        msgs.append(f"{_n(wrong, 'element')} wrong {where}" + (f": {hint}" if hint else ""))
    if not msgs and rel > tol:
        msgs.append(f"relative error {rel:.2e} is over the tolerance {tol:.0e}: accumulate in fp32?")
    return "; ".join(msgs) if msgs else "ok"


def check_gemm(fn: Callable[..., Any], convention: str = "tn", dtype: Any = None, out_dtype: Any = None,
               shapes: Any = None, alpha: float = 1.0, beta: float | None = None,
               tile: tuple[int, int] = (128, 128), atol: float | None = None, rtol: float | None = None,
               seed: int | None = None, device: str = "cuda", timeout_s: float | None = None,
               forbid_library: bool | None = None, pad: int = 0, publish: bool = True, offset: int = 0) -> CheckResult:
    """Check ``fn`` against a float64 torch reference over a shape suite.

    ``convention="tn"``: ``fn(A, B, D)`` computes D = A·Bᵀ (A M×K, B N×K, D M×N, all row-major).
    ``convention="nn"``: ``fn(A, B, C, alpha, beta)`` computes C = α·A·B + β·C (B is K×N);
    ``beta`` defaults to 0.5 there so that reading C is tested; with ``beta=0`` C starts as NaN, as
    BLAS does not read C then (a kernel that reads it anyway gets NaN, one that skips elements is caught).
    ``shapes``: a suite name (``"default"``, ``"aligned"``, ``"odd"``, ``"large"``) or a list
    of (M, N, K). ``tile`` only shapes the failure heatmap. ``device="cpu"`` runs plain-torch
    functions without a GPU. After ``gemmlab.connect(...)`` on a machine without a GPU the class's
    GPU pool runs the check (its own seed and tolerances; the result names its GPU).
    ``forbid_library`` (default: on in the course's grader, see :func:`grading_mode`) fails a shape
    whose call ran any torch operator that computes (anything but allocation, views, copies, padding, joins and
    fills: torch.matmul and an elementwise product alike) or copied the inputs to the host.
    ``pad``: each row of A, B and the output is that many elements longer than the matrix (the leading
    dimensions lda, ldb, ldc exceed the widths, as BLAS allows): the kernel must index rows by their
    strides, and the padding of the output's rows must be left alone. ``offset``: each operand starts that many
    elements past an aligned address (as ``buffer[offset:]`` does), so rows are not 16-byte aligned unless the
    kernel checks before it vectorises. ``publish=False`` keeps the result out
    of the grader's report (a check used as a probe, e.g. that a launcher refuses a shape, fails by design).
    """
    import torch

    if convention not in ("tn", "nn"):
        raise GemmlabError(f"convention must be 'tn' (fn(A, B, D), D = A·Bᵀ) or 'nn' (fn(A, B, C, alpha, beta)), not {convention!r}.")
    dtype = torch.float16 if dtype is None else dtype
    out_dtype = dtype if out_dtype is None else out_dtype
    if dtype_name(dtype) not in ("float16", "bfloat16"):
        raise GemmlabError(f"dtype must be torch.float16 or torch.bfloat16, not {dtype}.")
    if dtype_name(out_dtype) not in _TOLERANCES:
        raise GemmlabError(f"out_dtype must be torch.float16, torch.bfloat16 or torch.float32, not {out_dtype}.")
    if beta is None:
        beta = 0.5 if convention == "nn" else 0.0
    pad = _whole(pad, "pad", MAX_PAD)
    offset = _whole(offset, "offset", MAX_OFFSET)
    if device != "cpu":
        pool = pool_for_work()
        if pool is not None:  # gemmlab.connect(...) on a machine without a GPU: the class's GPU pool checks it
            return pool.check_gemm(fn, convention, dtype, out_dtype, _suite(shapes), float(alpha), float(beta),
                                   tuple(tile), atol=atol, rtol=rtol, seed=seed, timeout_s=timeout_s, pad=pad,
                                   offset=offset)
        require_gpu("check_gemm")
        dev = torch_device()
    else:
        dev = torch.device("cpu")
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    seed = secrets.randbits(62) if seed is None else int(seed)
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    forbid = grading_mode() if forbid_library is None else bool(forbid_library)
    rows = []
    on_gpu = dev.type == "cuda"
    for shape in _suite(shapes):
        try:
            # Shape by shape, so that a timing by another grader on this GPU can take its turn between them.
            with shared_gpu_work() if on_gpu else nullcontext():
                rows.append(_check_one(fn, shape, convention, dtype, out_dtype, float(alpha), float(beta), tile,
                                       atol, rtol, gen, dev, timeout, forbid, pad, offset))
        except (ContextLostError, KernelTimeoutError):
            raise
        except GemmlabError as exc:  # a rejected launch for this shape: record it, keep going
            rows.append(Row(shape, False, math.nan, None, 0, True, True, f"{type(exc).__name__}: {exc}"))
        except RuntimeError as exc:
            translated = faults.translate(exc, f"the GEMM at M×N×K={'×'.join(map(str, shape))}")
            if translated is exc:
                raise
            raise translated from None
    result = CheckResult(rows, convention, dtype_name(dtype), dtype_name(out_dtype), tuple(tile), seed, device_label(dev))
    if grading_mode() and publish:
        report.publish("check", result)
    return result


def _whole(value: Any, name: str, most: int) -> int:
    """``value`` as a whole number of elements from 0 to ``most`` (numpy integers too), or a GemmlabError."""
    try:
        whole = -1 if isinstance(value, bool) else operator.index(value)
    except TypeError:
        whole = -1
    if not 0 <= whole <= most:
        raise GemmlabError(f"{name} is a whole number of elements from 0 to {most}, not {value!r:.30}.")
    return whole


def _check_one(fn: Callable[..., Any], shape: Shape, convention: str, dtype: Any, out_dtype: Any, alpha: float,
               beta: float, tile: tuple[int, int], atol: float | None, rtol: float | None, gen: Any, dev: Any,
               timeout: float, forbid: bool = False, pad: int = 0, offset: int = 0) -> Row:
    import torch

    M, N, K = shape
    a = GuardedMatrix((M, K), dtype, dev, pad, offset)
    b = GuardedMatrix((N, K) if convention == "tn" else (K, N), dtype, dev, pad, offset)
    out = GuardedMatrix((M, N), out_dtype, dev, pad, offset)
    a.tensor.copy_(torch.randn(a.tensor.shape, generator=gen, device=dev))
    b.tensor.copy_(torch.randn(b.tensor.shape, generator=gen, device=dev))
    a_before, b_before = a.bits.clone(), b.bits.clone()
    out_bits = out.body_bits()
    # BLAS: with beta = 0, C is not read, so it starts as NaN (poisoned) and every element must be written.
    poisoned = convention == "tn" or beta == 0.0
    if poisoned:
        out.poison()
    if convention == "tn":
        args: tuple = (a.tensor, b.tensor, out.tensor)
        c_in = None
    else:
        if not poisoned:
            out.tensor.copy_(torch.randn((M, N), generator=gen, device=dev))
        c_in = out.tensor.double().clone()
        c_bits_in = out_bits.clone()
        args = (a.tensor, b.tensor, out.tensor, alpha, beta)

    late = 0
    if dev.type == "cuda":
        # What torch's current stream holds when fn returns must be the final result: work left
        # running on another stream would escape bench_gemm's timing.
        watched = watched_call(lambda: fn(*args), out.bits, timeout, f"the GEMM at M×N×K={M}×{N}×{K}", forbid)
        returned, used, late = watched.returned, watched.library_calls, watched.late_elements
    else:
        with library_guard(forbid) as used:
            returned = fn(*args)
    if used or late:
        msg = library_message(used) if used else late_work_message(late)
        return Row(shape, False, math.nan, None, M * N, True, True, msg)

    with _exact_reference():
        a64, b64 = a.tensor.double(), b.tensor.double()
        ref = a64 @ (b64.T if convention == "tn" else b64)
        if convention == "nn":
            ref = alpha * ref + (beta * c_in if beta != 0.0 else 0.0)
    got = out.tensor.double()

    guards = {"out": out.guard_writes(), "A": a.guard_writes(), "B": b.guard_writes()}
    padding_written = out.padding_writes()
    guard_ok = guards["out"] == (0, 0) and not padding_written
    a_changed = not torch.equal(a.bits[a.start: a.start + a.span], a_before[a.start: a.start + a.span])
    b_changed = not torch.equal(b.bits[b.start: b.start + b.span], b_before[b.start: b.start + b.span])
    changed = [n for n, c in (("A", a_changed), ("B", b_changed)) if c]
    inputs_ok = not changed and guards["A"] == (0, 0) and guards["B"] == (0, 0)

    # tolerances scaled by the size of a typical output element
    rel_tol, atol_f, rtol_d = _TOLERANCES[dtype_name(out_dtype)]
    scale = math.sqrt(K) * float(a64.pow(2).mean().sqrt()) * float(b64.pow(2).mean().sqrt())
    if convention == "nn":
        scale = abs(alpha) * scale + (abs(beta) * float(c_in.pow(2).mean().sqrt()) if beta != 0.0 else 0.0)
    atol_v = (atol_f if atol is None else atol) * max(scale, 1e-30)
    rtol_v = rtol_d if rtol is None else rtol

    unwritten = out.unwritten() if poisoned else torch.zeros_like(got, dtype=torch.bool)
    nonfinite = ~torch.isfinite(got) & ~unwritten
    diff = (got - ref).abs()
    bad = unwritten | nonfinite | ~(diff <= atol_v + rtol_v * ref.abs())
    stale = torch.zeros_like(bad)
    if convention == "nn" and not poisoned:
        stale = bad & (out_bits == c_bits_in) & ~nonfinite
    n_bad, n_unwritten, n_nonfinite, n_stale = (int(t.sum()) for t in (bad, unwritten, nonfinite, stale))

    finite = ~(unwritten | nonfinite)
    ref_norm = float(ref.norm())
    if n_unwritten or n_nonfinite:
        rel = math.inf
    else:
        rel = float((got - ref).norm()) / ref_norm if ref_norm > 0 else float((got - ref).norm())

    worst = None
    if M * N:
        score = torch.where(finite, diff - (atol_v + rtol_v * ref.abs()), torch.full_like(diff, math.inf))
        flat = int(score.argmax())
        i, j = divmod(flat, N)
        worst = (i, j, float(got[i, j]), float(ref[i, j]))

    tile_fraction = None
    where = unwritten_where = ""
    if n_bad:
        tile_fraction = _tile_fraction(bad, tile)
        tm, tn = tile_fraction.shape
        where = _where(nonzero_tiles(tile_fraction), tm, tn)
        if n_unwritten:
            unwritten_where = _where(nonzero_tiles(_tile_fraction(unwritten, tile)), tm, tn)
    passed = guard_ok and inputs_ok and n_bad == 0 and rel <= rel_tol
    message = "ok" if passed else _classify(
        shape, tile, n_unwritten, unwritten_where, n_nonfinite, n_bad, where, rel, rel_tol, dict(guards), changed,
        isinstance(returned, torch.Tensor), n_stale, pad, padding_written)
    if not passed and convention == "nn" and beta == 0.0 and n_nonfinite:
        message = (f"beta = 0, so C started as NaN (BLAS does not read C then) and {_n(n_nonfinite, 'element')} came "
                   "out NaN: the kernel read C; skip reading it when beta == 0. " + message)
    return Row(shape, passed, rel, worst, n_bad, guard_ok, inputs_ok, message, n_unwritten, n_nonfinite,
               tile_fraction)


def _tile_fraction(mask: Any, tile: tuple[int, int]) -> Any:
    """Share of True elements in each tile of a 2-D mask (partial edge tiles counted by their size)."""
    import torch

    M, N = mask.shape
    tm, tn = math.ceil(M / tile[0]), math.ceil(N / tile[1])
    padded = torch.zeros((tm * tile[0], tn * tile[1]), dtype=torch.float32, device=mask.device)
    padded[:M, :N] = mask.float()
    counts = padded.view(tm, tile[0], tn, tile[1]).sum(dim=(1, 3))
    sizes = torch.zeros_like(padded)
    sizes[:M, :N] = 1
    totals = sizes.view(tm, tile[0], tn, tile[1]).sum(dim=(1, 3))
    return (counts / totals).cpu().numpy()


__all__ = ["MAX_OFFSET", "MAX_PAD", "CheckResult", "Row", "RowVerdicts", "SUITES", "check_gemm", "nonzero_tiles"]
