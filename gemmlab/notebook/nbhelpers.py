"""What the course notebooks share, so that each of their cells stays one idea long.

Every notebook starts with the same few lines::

    from gemmlab.notebook.nbhelpers import setup, show
    GPU, ARCH = setup()

and its test cells lean on the same checks: operands of a launcher (``gemm_operands``),
correctness first (``require_correct``, ``require_correct_nn``), the padded and ``beta = 0``
checks of the BLAS-like ``"nn"`` GEMMs (``check_padded``, ``check_beta_zero``), and the two
front-ends' kernels built side by side (``build_option``, ``available_options``,
``built_options``). Everything here runs without a GPU except the checks, which need one (the
notebooks call them only then).
"""
from __future__ import annotations

import os
import random
import re
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence, TypeVar

from gemmlab.errors import CompileTimeoutError, GemmlabError, LaunchError
from gemmlab.dtypes import dtype_name
from gemmlab.running.gpu import current_arch, has_gpu
from gemmlab.answers.placeholders import STUB_MARK, function_done, source_done
from gemmlab.answers.stand_ins import Answer
from gemmlab.offload import pool_for_work

__all__ = [
    "FALLBACK_ARCH", "H100_ILLUSTRATION", "OPTION_NAMES", "STUB_MARK",
    "VALIDATING_ENV", "CheckFailed", "ExerciseNotDone", "GpuTestNotChecked", "Session",
    "arch", "ask", "ask_each", "ask_without", "available_options", "build_option", "built_options", "ceilings_or_illustration", "check_beta_zero", "check_misaligned", "check_padded",
    "function_done", "gemm_operands", "gpu_graded", "gpu_or_compile_only", "require_correct", "require_correct_nn", "require_refused",
    "require_source_done", "setup", "show", "source_done", "start_fresh_tally", "unchecked_points", "unchecked_summary", "uses_pool",
]

#: The arch kernels are compiled for when there is no GPU to ask (the course targets H100).
FALLBACK_ARCH = "sm_90a"
#: How the notebooks name their two front-ends' kernels: option A (CuTe C++) and option B (CuTe DSL).
OPTION_NAMES = ("C++ (option A)", "DSL (option B)")

#: Measured once on an NVIDIA H100 80GB HBM3 (driver 580, torch 2.11 with CUDA 13.0, 2026-11-22).
#: Used only as a labelled illustration on machines without a GPU.
H100_ILLUSTRATION = {
    "device": "NVIDIA H100 80GB HBM3 (illustration: measured on another machine on 2026-11-22, NOT on this one)",
    "copy_gbps": 3020.0,
    "matmul_tflops": {"float16": 692.0, "bfloat16": 719.0},
}

Fn = TypeVar("Fn", bound=Callable[..., Any])


class ExerciseNotDone(GemmlabError):
    """The exercise still holds the release's placeholder instead of the student's code."""


class CheckFailed(GemmlabError, AssertionError):
    """A notebook's check found the kernel wrong or not built; the message says where and what to look at.

    Also an ``AssertionError``: to nbgrader and to tests it is a failed test like any ``assert``.
    """


class Session(NamedTuple):
    """What ``setup()`` found: whether a GPU runs kernels here, and the arch they compile for."""

    gpu: bool
    arch: str


def arch() -> str:
    """Compile target: this GPU's arch, or sm_90a (H100) where there is no GPU."""
    return current_arch() if has_gpu() else FALLBACK_ARCH


def start_fresh_tally() -> None:
    """A fresh run of the notebook starts a fresh tally of unchecked points and forgets why options did not
    build (what ``setup()`` does first; tests call it to start each case so)."""
    _UNCHECKED.clear()
    _BUILDS.clear()


def setup() -> Session:
    """The one call of a notebook's setup cell: silence warnings and say what this machine can do.

    Warnings are silenced because a library warning on stderr makes nbgrader score a graded cell 0.
    """
    warnings.filterwarnings("ignore")
    start_fresh_tally()
    session = Session(has_gpu(), arch())
    print(f"GPU usable: {session.gpu}; kernels compile for {session.arch}")
    return session


def show(fig: Any) -> None:
    """Display a matplotlib Figure once, then free it (gemmlab's pictures are Figures)."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(fig)
    plt.close(fig)


def uses_pool() -> bool:
    """Whether ``check_gemm`` and ``bench_gemm`` run on the class's GPU pool here: no GPU on this machine and
    ``gemmlab.connect`` (or ``GEMMLAB_POOL``) on. Never in the grader, which grades on its own GPU."""
    return pool_for_work() is not None


def _pool_runs_it(pool: bool) -> bool:
    """Whether the class's GPU pool runs this cell's GPU work: the cell says all of it is ``check_gemm``,
    ``bench_gemm`` or helpers built on them (``pool=True``) and :func:`uses_pool`."""
    return pool and uses_pool()


def gpu_or_compile_only(what: str, pool: bool = False) -> bool:
    """True if a GPU can run ``what`` (here, or the class's pool when ``pool`` says the cell's GPU work is all
    check_gemm and bench_gemm); otherwise print why this cell only compiles."""
    if has_gpu():
        return True
    if _pool_runs_it(pool):
        print(f"No GPU here: {what} runs on the class's GPU pool.")
        return True
    elsewhere = " or on your class's GPU pool (`gemmlab.connect(url, token)`)" if pool and _pool_offered() else ""
    print(f"No GPU on this machine: {what} was compiled for {FALLBACK_ARCH} but not run. "
          f"On a GPU machine{elsewhere} this cell runs it and checks the result.")
    return False


# ---------------------------------------------------------------- graded tests that need a GPU

#: Graded tests that could not run here: what they check -> (their points, whether the class's GPU pool could
#: run them) (see ``gpu_graded``).
_UNCHECKED: dict[str, tuple[int, bool]] = {}


class GpuTestNotChecked(GemmlabError, AssertionError):
    """Raised under nbgrader's Validate by a GPU test on a machine without a GPU: Validate's "Success"
    would otherwise cover points it never checked. Also an ``AssertionError``: a failed test to nbgrader."""


#: Set by nbgrader (in the kernel's environment too) while its Validate runs a notebook.
VALIDATING_ENV = "NBGRADER_VALIDATING"


def gpu_graded(points: int, what: str, pool: bool = False, arch: str | None = None) -> bool:
    """True where a GPU runs this graded test: here, or the class's pool after ``gemmlab.connect`` for a test
    whose GPU work is all check_gemm and bench_gemm (``pool=True``; the tests shown to students, the grader's
    hidden ones still need a GPU here). ``arch``: the test needs a GPU of that family (a compute-capability
    prefix such as "sm_100"); on any other GPU, and on the pool, it is not checked either. Elsewhere say plainly
    that its ``points`` are not checked, and count them for ``unchecked_summary``. Under nbgrader's Validate
    the test fails instead (:class:`GpuTestNotChecked`), with that message: Validate shows only failures, and
    would report "Success" for a test that checked nothing of the kernel."""
    if has_gpu() and (arch is None or current_arch().startswith(arch)):
        _UNCHECKED.pop(what, None)
        return True
    if arch is None and _pool_runs_it(pool):
        _UNCHECKED.pop(what, None)
        print(f"No GPU here: {what} runs on the class's GPU pool (the results name its GPU).")
        return True
    _UNCHECKED[what] = (points, pool and arch is None)
    need = f"an {arch} GPU" if arch else "a GPU"
    head = f"NOT CHECKED ({points} point{'s' if points != 1 else ''}): {what} needs {need}"
    here = f"this GPU is {current_arch()}" if has_gpu() else "there is none here"
    graders = (f"The graders grade it only on {need}." if arch else "The graders' GPU checks it.")
    where = _where_it_can_run(pool) if arch is None else ""
    if os.environ.get(VALIDATING_ENV) == "1":
        raise GpuTestNotChecked(
            f"{head}, and {here}, so Validate cannot check it: the kernel only compiled, and this says nothing "
            f"about its results or its speed. {graders} The notebook's other tests are checked here.{where}")
    print(f"{head}, and {here}. The kernel only compiled; a pass of this cell says nothing about its results or "
          f"its speed. {graders}{where}")
    return False


def unchecked_points() -> dict[str, int]:
    """The graded tests this session could not check for want of a GPU, with their points."""
    return {what: points for what, (points, _) in _UNCHECKED.items()}


def unchecked_summary(total_points: int) -> int:
    """Print how many of the notebook's ``total_points`` its GPU tests left unchecked here; return that count.
    The last cell of every notebook with GPU tests calls it, so a run without a GPU ends with the number."""
    missing = sum(points for points, _ in _UNCHECKED.values())
    if not missing:
        print(f"No GPU test of this notebook's {total_points} points was left unchecked for want of a GPU "
              "(a test that stopped earlier, e.g. because no option built, failed: see its cell).")
        return 0
    print(f"{missing} of {total_points} points were NOT checked: no GPU here. Not checked: "
          + "; ".join(f"{what} ({points})" for what, (points, _) in _UNCHECKED.items())
          + f". The other {total_points - missing} points were checked here, passed or not: each test cell above "
          f"says which. Validate fails the GPU tests it "
          f"cannot check here, naming their points; the graders' GPU checks them.{_pool_summary()}")
    return missing


def _pool_offered() -> bool:
    """Whether this gemmlab can send work to a class's GPU pool (``gemmlab.connect``)."""
    import gemmlab

    return getattr(gemmlab, "connect", None) is not None


def _where_it_can_run(pool: bool) -> str:
    """Where one unchecked test could run instead, true of that test: the class's GPU pool runs a test whose
    GPU work is all check_gemm/bench_gemm/check_copy/bench_copy (``pool=True``); any other needs a GPU here."""
    if not _pool_offered():
        return ""
    if pool:
        return (" If your class runs a GPU pool, this test runs there: call `gemmlab.connect(url, token)` (your "
                "instructor gives both) and run this cell again.")
    return (" This test launches kernels itself, so the class's GPU pool cannot run it: it needs a GPU on this "
            "machine (or the graders').")


def _pool_summary() -> str:
    """Which of the unchecked points the class's GPU pool could check, and which need a GPU here."""
    if not _pool_offered():
        return ""
    on_pool = [what for what, (_, pool) in _UNCHECKED.items() if pool]
    here = [what for what, (_, pool) in _UNCHECKED.items() if not pool]
    if not on_pool:
        return " These tests launch kernels themselves: they need a GPU on this machine (the class's pool cannot run them)."
    points = sum(_UNCHECKED[what][0] for what in on_pool)
    which = "All of them" if not here else f"{len(on_pool)} of them ({points} points)"
    note = (f" {which} can run on your class's GPU pool, if it has one: call `gemmlab.connect(url, token)` and "
            "run the notebook again.")
    if here:
        note += " The others (" + "; ".join(here) + ") launch kernels themselves and need a GPU on this machine."
    return note


def _not_done(fn: Callable[..., Any]) -> ExerciseNotDone:
    name = getattr(fn, "__name__", "this exercise's function")
    return ExerciseNotDone(f"{name} is not written yet: replace the placeholder (`{STUB_MARK}`) in its cell, "
                           "run that cell, then this one.")


def ask(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` for a check: a still-unwritten exercise (its placeholder raises
    NotImplementedError) becomes one plain sentence instead of a traceback from inside the checker."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise _not_done(fn) from None


def ask_without(libraries: Sequence[str], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``ask(fn, *args, **kwargs)`` for an exercise that says "without these libraries": the call runs watched
    (:mod:`gemmlab.checking.library_watch`; in the grader, in the student's kernel) and fails with
    :class:`CheckFailed` if code of any of ``libraries`` ran during it, by whatever name it was reached. A copy of
    their code is not seen."""
    from gemmlab.checking.library_watch import watched_call

    try:
        seen = fn.watched(list(libraries), *args, **kwargs) if isinstance(fn, Answer) else \
            watched_call(fn, args, kwargs, libraries=libraries)
    except NotImplementedError:
        raise _not_done(fn) from None
    name = getattr(fn, "__name__", "your function")
    call = f"{name}{tuple(args)!r:.160}"
    banned = " or ".join(libraries)
    if seen.hook_removed:
        raise CheckFailed(f"{call} removed the watch this test runs it under (sys.setprofile), so the test cannot "
                          f"see whether it used {banned}: leave the profiler alone in {name}.")
    if seen.entered:
        raise CheckFailed(f"{call} ran code of {banned}: {'; '.join(seen.entered)}. This exercise asks you to work "
                          f"it out without them, and the test watches your function's calls for their code, whatever "
                          f"name reaches it. Compute it yourself in {name} and the helpers it calls.")
    return seen.result


def ask_each(fn: Callable[..., Any], calls: list[tuple]) -> list[Any]:
    """``[ask(fn, *args) for args in calls]``: where ``fn`` is the student's function seen from the grader's judge,
    in one round trip to the student's kernel (a check that asks about every element of a tile)."""
    if isinstance(fn, Answer):
        return fn.each([tuple(args) for args in calls])
    return [ask(fn, *args) for args in calls]


def require_source_done(source: str, where: str) -> None:
    """Raise a friendly error instead of letting NVRTC choke on ``# YOUR CODE HERE``."""
    if not source_done(source):
        raise ExerciseNotDone(
            f"{where} still contains the placeholder lines `# YOUR CODE HERE` / `{STUB_MARK}`. "
            "Replace them with your CUDA C++ code (keep the rest of the string), then run the cell again.")


def ceilings_or_illustration() -> Any:
    """This GPU's measured ceilings, or the H100's numbers clearly labelled as borrowed.

    Returns an object with ``device``, ``copy_gbps`` and ``matmul_tflops`` (a dict by dtype).
    """
    from gemmlab.timing.ceilings import Ceilings, ceilings

    if has_gpu():
        return ceilings()
    print("No GPU here, so nothing can be measured. The numbers below are an ILLUSTRATION: "
          "an H100's ceilings measured on another machine (H100 80GB HBM3, driver 580, 2026-11-22). "
          "On a GPU this cell measures yours.")
    return Ceilings(**H100_ILLUSTRATION, measured_at="illustration")


# ---------------------------------------------------------------- building the two front-ends' kernels

@dataclass
class _Build:
    """The last build of one option in this session: what it built and, unless it built, why not."""

    kernel: str                  # the launcher's name, e.g. "cta_cpp"
    why_not: str                 # "" once built
    started: float = 0.0         # time.monotonic() when its compile started (a compile still running)


#: Option letter ("A", "B") -> its last build_option call (see ``built_options``).
_BUILDS: dict[str, _Build] = {}
#: Lines of a compile error quoted where a test reports why an option did not build.
_ERROR_LINES = 4


def build_option(option: str, fn: Fn, build: Callable[[], Any], todo: str = "") -> Fn | None:
    """``fn`` once ``build()`` has compiled its kernel, else None and a line saying why.

    ``option`` is "A" (CuTe C++) or "B" (CuTe DSL); a student needs only one of them, so a
    missing or failing option is reported, never raised. ``todo`` names what still holds the
    exercise placeholder ("" when nothing does). ``build`` returns the compiled kernel, whose
    summary (a DSL kernel) or resources (a C++ kernel) is printed. Why an option did not build is
    kept, so that a test that finds no option built can say it (Validate shows only the failing test).
    """
    other = {"A": "option B", "B": "option A"}[option]
    name = getattr(fn, "__name__", "the kernel")
    if todo:
        _BUILDS[option] = _Build(name, f"not written yet: {todo} still holds the '# YOUR CODE HERE' placeholder")
        print(f"Option {option} not built: {todo} still holds the '# YOUR CODE HERE' placeholder "
              f"(fine if you do {other}).")
        return None
    record = _BUILDS[option] = _Build(name, "its build cell was stopped while compiling", time.monotonic())
    try:
        kernel = build()
    except (GemmlabError, NotImplementedError) as err:
        record.why_not = _why_not_built(err)
        print(f"Option {option} did not compile (fine if you do {other}):\n", err)
        return None
    except KeyboardInterrupt:
        record.why_not = (f"its build cell was interrupted {time.monotonic() - record.started:.0f} s into the compile, "
                          "before it finished (a cell's time limit, e.g. Validate's, or Kernel > Interrupt): run "
                          "that cell again and let it finish")
        raise
    except BaseException as err:
        record.why_not = f"its build cell failed with {type(err).__name__}: {str(err).strip()[:300]}"
        raise
    record.why_not = ""
    print(kernel.summary() if hasattr(kernel, "summary") else kernel.resources)
    return fn


def _why_not_built(err: BaseException) -> str:
    """One option's reason, for the test that finds nothing built: not written, stopped by the compile's time
    limit, or the first lines of its compile error."""
    if isinstance(err, NotImplementedError):
        return "not written yet: a function it calls still raises NotImplementedError (the exercise placeholder)"
    if isinstance(err, CompileTimeoutError):
        return f"its compile was stopped by the time limit: {err}"
    lines = str(err).strip().splitlines()
    quoted = "\n    ".join(lines[:_ERROR_LINES]) + ("\n    ..." if len(lines) > _ERROR_LINES else "")
    return f"did not compile ({type(err).__name__}):\n    {quoted}"


def _build_report(option: str) -> str:
    """Why ``option`` did not build, from its last build_option call in this session."""
    record = _BUILDS.get(option)
    if record is None:
        return (f"option {option}: its build cell has not run in this session (run the notebook from the top, or "
                "that cell)")
    if not record.why_not:
        return (f"option {option}: `{record.kernel}` built, but the variable this test reads is None: run its "
                "build cell again")
    return f"option {option} (`{record.kernel}`): {record.why_not}"


def available_options(cpp: Fn | None, dsl: Fn | None) -> dict[str, Fn]:
    """The options that built (not None), by name: "C++ (option A)", "DSL (option B)"."""
    return {name: fn for name, fn in zip(OPTION_NAMES, (cpp, dsl)) if fn is not None}


def built_options(what: str, cpp: Fn | None, dsl: Fn | None) -> dict[str, Fn]:
    """``available_options``, or CheckFailed if neither option built: a test needs at least one."""
    built = available_options(cpp, dsl)
    if not built:
        raise CheckFailed(f"Neither option built {what}. Why, from each option's last build in this session:\n- "
                          + "\n- ".join(_build_report(option) for option in ("A", "B"))
                          + "\nFinish the marked part of option A or option B; the full message is under its build cell.")
    return built


# ---------------------------------------------------------------- correctness checks (GPU)

def require_correct(fn: Callable[..., Any], label: str, shapes: Any = None, hint: str = "",
                    echo: bool = False, **check_kwargs: Any) -> Any:
    """``check_gemm(fn, shapes=shapes, **check_kwargs)``, raising CheckFailed with the table and ``hint``
    unless it passed. ``echo`` prints the result first. Returns the CheckResult.

    Library GEMMs and torch arithmetic are forbidden here in a student's own notebook too
    (``forbid_library``), so a test cell that passes there passes in the grader."""
    import gemmlab

    check_kwargs.setdefault("forbid_library", True)
    result = gemmlab.check_gemm(fn, shapes=shapes, **check_kwargs)
    if echo:
        print(f"{label}: {result}")
    if not result.passed:
        raise CheckFailed(f"{label} {_failed_how(result)}, see the table:\n{result}" + (f"\n{hint}" if hint else ""))
    return result


def check_misaligned(fn: Callable[..., Any], label: str, M: int, N: int, K: int, shift: int) -> Any:
    """An "nn" GEMM whose A, B and C start ``shift`` elements past a 16-byte boundary (as ``buffer[shift:]`` makes):
    a kernel that vectorises must check the pointers first (``check_gemm(offset=...)``, so it runs wherever
    check_gemm runs); CheckFailed with the table unless it passed."""
    return require_correct(fn, f"{label} with A, B and C starting {shift} elements past 16-byte alignment", [(M, N, K)],
                           convention="nn", alpha=1.0, beta=-1.0, offset=shift)


def require_refused(fn: Callable[..., Any], label: str, shape: tuple[int, int, int], what: str,
                    convention: str = "nn") -> Any:
    """That ``fn`` refuses ``shape`` with a LaunchError (its launcher's own check) rather than running: a kernel
    that only handles whole tiles must say so, not read out of bounds. Asked through ``check_gemm``, so it runs
    wherever checks run (a local GPU, the class's pool, the grader's judge); CheckFailed otherwise."""
    import gemmlab

    result = gemmlab.check_gemm(fn, convention, shapes=[shape], forbid_library=True, publish=False)
    (row,) = result.rows
    # "LaunchError: ..." where the launcher ran here; "AnswerError: f(...) raised LaunchError: ..." where the grader's
    # judge called a launcher that lives in the student's process.
    if not re.match(r"(LaunchError: |AnswerError: \S+\(\.\.\.\) raised LaunchError: )", row.message):
        size = " x ".join(map(str, shape))
        if row.passed:
            how = f"accepted {size} (M x N x K) and ran correctly"
        elif row.message.split(":", 1)[0].endswith("Error"):
            how = f"did not refuse {size} (M x N x K) with a LaunchError but failed otherwise: {row.message[:300]}"
        else:
            how = f"accepted {size} (M x N x K) and ran: {row.message[:300]}"
        raise CheckFailed(f"{label} {how}. Its launcher should refuse {what} with a gemmlab.LaunchError.")
    return result


def _failed_how(result: Any) -> str:
    """How a failed check failed, for its headline: wrong results, or calls that raised or were refused (then the
    first reason: e.g. the grader refusing a recorded call that computes with torch), never 'wrong' for those."""
    failures = list(getattr(result, "failures", []) or [])
    raised = [r for r in failures if not getattr(r, "n_bad", 0) and not getattr(r, "worst", None)]
    if failures and len(raised) == len(failures):
        reason = str(getattr(raised[0], "message", "")).strip().splitlines()
        return (f"did not run on {len(raised)} of {len(result.rows)} shapes"
                + (f" ({reason[0][:400]})" if reason else ""))
    return "is wrong on some shapes"


def require_correct_nn(fn: Callable[..., Any], label: str, shapes: Any, beta: float | None = None) -> Any:
    """``require_correct`` for a BLAS-like C = alpha*A*B + beta*C function, with a fresh random alpha
    and beta (``beta`` fixes it, e.g. 0.0), the result printed."""
    return require_correct(fn, label, shapes, echo=True, convention="nn", alpha=random.choice([1.0, 0.75, -1.5]),
                           beta=random.choice([0.5, -1.0, 2.0]) if beta is None else beta)


def gemm_operands(A: Any, B: Any, C: Any, dtypes: tuple[Any, ...] | None = None) -> tuple[int, int, int]:
    """(M, N, K) of a C = alpha*A*B + beta*C call, or a LaunchError saying what breaks the kernel's
    contract (2-D, fitting shapes, at least 1, one of ``dtypes`` (default float16), row-major)."""
    import torch

    dtypes = dtypes or (torch.float16,)
    if not all(isinstance(t, torch.Tensor) and t.dim() == 2 for t in (A, B, C)):
        raise LaunchError("A, B and C must be 2-D torch tensors")
    (M, K), (K2, N) = A.shape, B.shape
    if K2 != K or tuple(C.shape) != (M, N):
        raise LaunchError(f"shapes do not fit C = A*B: A {tuple(A.shape)}, B {tuple(B.shape)}, C {tuple(C.shape)}")
    if min(M, N, K) < 1:
        raise LaunchError(f"M, N, K must be at least 1, got {M}, {N}, {K}")
    if A.dtype not in dtypes or B.dtype != A.dtype or C.dtype != A.dtype:
        names = " or ".join(dtype_name(d) for d in dtypes)
        raise LaunchError(f"A, B and C must all be {names}, got {A.dtype}, {B.dtype}, {C.dtype}")
    for name, t in (("A", A), ("B", B), ("C", C)):
        if t.stride(1) != 1 and t.shape[1] > 1:
            raise LaunchError(f"{name} must be row-major (last dimension contiguous), its strides are {t.stride()}")
    return M, N, K


def check_beta_zero(fn: Callable[..., Any], label: str, M: int, N: int, K: int) -> Any:
    """An "nn" GEMM with beta = 0: ``check_gemm`` starts C as NaN (BLAS does not read C then), so a kernel
    that reads C anyway, or skips an element, fails. Runs wherever check_gemm runs (a local GPU, the class's
    pool, the grader's judge); CheckFailed with the table unless it passed."""
    return require_correct(fn, f"{label} with beta = 0", [(M, N, K)], convention="nn", alpha=1.0, beta=0.0)


def check_padded(fn: Callable[..., Any], label: str, M: int, N: int, K: int, pad: int) -> Any:
    """An "nn" GEMM on rows ``pad`` elements longer than the matrix (lda = K + pad, ldb = ldc = N + pad): the
    kernel must index rows by their pitches and leave the padding of C's rows alone (``check_gemm(pad=...)``,
    so it runs wherever check_gemm runs); CheckFailed with the table unless it passed."""
    return require_correct(fn, f"{label} with rows padded by {pad}", [(M, N, K)], convention="nn", alpha=0.5,
                           beta=0.25, pad=pad)
