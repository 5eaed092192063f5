"""gemmlab.notebook.nbhelpers: the setup call, the option builds and the checks the course notebooks share."""
from __future__ import annotations

import math
import types
import warnings

import pytest
import torch

import gemmlab
from gemmlab.notebook import nbhelpers as nbh
from gemmlab.results import CheckResult, Row
from gemmlab.errors import GemmlabError


def test_setup_silences_warnings_and_says_what_this_machine_does(capsys, monkeypatch) -> None:
    monkeypatch.setattr(nbh, "has_gpu", lambda: False)
    with warnings.catch_warnings():
        gpu, arch = nbh.setup()
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("a library warning")
        assert not caught, "setup() must keep warnings off stderr (they cost graded points)"
    assert (gpu, arch) == (False, nbh.FALLBACK_ARCH)
    assert "GPU usable: False; kernels compile for sm_90a" in capsys.readouterr().out


def test_every_public_name_is_listed_and_exists() -> None:
    assert all(hasattr(nbh, name) for name in nbh.__all__)
    assert not [n for n in nbh.__all__ if n.startswith("_")]
    assert {"setup", "show", "gemm_operands", "check_padded", "build_option", "require_correct"} <= set(nbh.__all__)


def _tensors(M: int, N: int, K: int, dtype=torch.float16) -> tuple:
    return torch.zeros(M, K, dtype=dtype), torch.zeros(K, N, dtype=dtype), torch.zeros(M, N, dtype=dtype)


def test_gemm_operands_returns_the_shape_or_says_what_breaks_the_contract() -> None:
    assert nbh.gemm_operands(*_tensors(3, 5, 7)) == (3, 5, 7)
    A, B, C = _tensors(3, 5, 7)
    with pytest.raises(gemmlab.LaunchError, match="shapes do not fit"):
        nbh.gemm_operands(A, B, C.t())
    with pytest.raises(gemmlab.LaunchError, match="must all be float16, got"):
        nbh.gemm_operands(*_tensors(3, 5, 7, torch.float32))
    with pytest.raises(gemmlab.LaunchError, match="float16 or bfloat16"):
        nbh.gemm_operands(*_tensors(3, 5, 7, torch.float32), dtypes=(torch.float16, torch.bfloat16))
    assert nbh.gemm_operands(*_tensors(3, 5, 7, torch.bfloat16), dtypes=(torch.float16, torch.bfloat16)) == (3, 5, 7)
    with pytest.raises(gemmlab.LaunchError, match="row-major"):
        nbh.gemm_operands(torch.zeros(7, 3, dtype=torch.float16).t(), B, C)
    with pytest.raises(gemmlab.LaunchError, match="at least 1"):
        nbh.gemm_operands(*_tensors(0, 5, 7))
    with pytest.raises(gemmlab.LaunchError, match="2-D"):
        nbh.gemm_operands(A[0], B, C)


def test_build_option_reports_instead_of_raising(capsys) -> None:
    def fn() -> None:
        pass

    assert nbh.build_option("A", fn, build=lambda: 1 / 0, todo="GEMM_SRC") is None
    assert "Option A not built: GEMM_SRC still holds" in capsys.readouterr().out

    def failing() -> None:
        raise gemmlab.CompileError("line 3: expected ';'")

    assert nbh.build_option("B", fn, build=failing) is None
    out = capsys.readouterr().out
    assert "Option B did not compile (fine if you do option A)" in out and "expected ';'" in out

    kernel = types.SimpleNamespace(resources="42 registers")
    assert nbh.build_option("A", fn, build=lambda: kernel) is fn
    assert "42 registers" in capsys.readouterr().out


def test_built_options_names_what_built_and_fails_like_an_assert_when_nothing_did(monkeypatch) -> None:
    def cpp() -> None:
        pass

    nbh.start_fresh_tally()
    assert nbh.available_options(None, None) == {}
    assert nbh.built_options("a GEMM kernel", cpp, None) == {"C++ (option A)": cpp}
    with pytest.raises(AssertionError, match="Neither option built a GEMM kernel") as err:
        nbh.built_options("a GEMM kernel", None, None)
    assert isinstance(err.value, GemmlabError)
    assert "option A: its build cell has not run in this session" in str(err.value)


def _no_option_built(capsys) -> str:
    with pytest.raises(nbh.CheckFailed) as err:
        nbh.built_options("the CTA kernel", None, None)
    capsys.readouterr()
    return str(err.value)


def test_a_test_that_finds_no_option_built_says_why_each_did_not(monkeypatch, capsys) -> None:
    """Validate shows only the failing test, not the build cells' output: the test itself must say why each
    option did not build (not written, a compile error, the compile's time limit, an interrupted compile)."""
    def cta_cpp() -> None:
        pass

    def cta_dsl() -> None:
        pass

    nbh.start_fresh_tally()
    nbh.build_option("A", cta_cpp, build=lambda: 1 / 0, todo="CTA_CPP")

    def broken() -> None:
        raise gemmlab.CompileError("CuTe DSL compile of `cta_gemm_dsl` failed at line 9 of cell [12]:\n"
                                   "    acc = 0\nwhat it means\nwhat to change\nmore\nand more")

    nbh.build_option("B", cta_dsl, build=broken)
    message = _no_option_built(capsys)
    assert "option A (`cta_cpp`): not written yet: CTA_CPP still holds the '# YOUR CODE HERE' placeholder" in message
    assert "option B (`cta_dsl`): did not compile (CompileError):" in message and "line 9 of cell [12]" in message
    assert "and more" not in message                       # a few lines of it; the rest is under the build cell

    def too_slow() -> None:
        raise gemmlab.CompileTimeoutError("Compiling 'cta_gemm' for sm_90a took longer than 120 s and was stopped.",
                                          limit_s=120)

    nbh.build_option("A", cta_cpp, build=too_slow)
    assert "option A (`cta_cpp`): its compile was stopped by the time limit: Compiling 'cta_gemm'" in \
        _no_option_built(capsys)

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):                 # an interrupt still stops the cell
        nbh.build_option("A", cta_cpp, build=interrupted)
    assert "option A (`cta_cpp`): its build cell was interrupted 0 s into the compile, before it finished" in \
        _no_option_built(capsys)

    def unwritten() -> None:
        raise NotImplementedError

    nbh.build_option("B", cta_dsl, build=unwritten)
    assert "option B (`cta_dsl`): not written yet: a function it calls still raises NotImplementedError" in \
        _no_option_built(capsys)
    nbh.setup()                                            # a fresh run forgets the old reasons
    assert "option A: its build cell has not run in this session" in _no_option_built(capsys)


def test_a_not_checked_test_says_truly_whether_the_class_pool_can_run_it(monkeypatch, capsys) -> None:
    """The pool runs the tests whose GPU work is all checks and timings (``pool=True``); the message of each
    unchecked test, and the summary, say so only of those."""
    monkeypatch.setattr(nbh, "has_gpu", lambda: False)
    monkeypatch.setattr(nbh, "uses_pool", lambda: False)
    nbh.start_fresh_tally()
    assert not nbh.gpu_graded(4, "the copy kernel test", pool=True)
    out = capsys.readouterr().out
    assert "this test runs there: call `gemmlab.connect(url, token)`" in out and "cannot run it" not in out
    assert not nbh.gpu_graded(2, "the fault demo's test")
    out = capsys.readouterr().out
    assert "the class's GPU pool cannot run it: it needs a GPU on this machine" in out and "runs there" not in out
    assert nbh.unchecked_summary(10) == 6
    summary = capsys.readouterr().out
    assert "1 of them (4 points) can run on your class's GPU pool" in summary
    assert "The others (the fault demo's test) launch kernels themselves" in summary
    nbh.start_fresh_tally()
    nbh.gpu_graded(4, "the copy kernel test", pool=True)
    nbh.unchecked_summary(4)
    assert "All of them can run on your class's GPU pool" in capsys.readouterr().out
    assert not nbh.gpu_or_compile_only("the copy kernel", pool=True)
    assert "On a GPU machine or on your class's GPU pool (`gemmlab.connect(url, token)`)" in capsys.readouterr().out
    assert not nbh.gpu_or_compile_only("the fault demo")
    assert "pool" not in capsys.readouterr().out



def test_a_test_for_one_gpu_family_is_not_checked_on_another_gpu_or_on_the_pool(monkeypatch, capsys) -> None:
    """07's Blackwell run test (``arch="sm_100"``) on a Hopper: not checked, counted, and the message says which GPU
    grades it; with no GPU the class's pool (Hoppers) is not offered for it."""
    nbh.start_fresh_tally()
    monkeypatch.setattr(nbh, "has_gpu", lambda: True)
    monkeypatch.setattr(nbh, "current_arch", lambda: "sm_90a")
    assert nbh.gpu_graded(3, "the Hopper run")
    assert not nbh.gpu_graded(1, "the Blackwell run", arch="sm_100")
    out = capsys.readouterr().out
    assert "NOT CHECKED (1 point): the Blackwell run needs an sm_100 GPU, and this GPU is sm_90a" in out
    assert "The graders grade it only on an sm_100 GPU." in out
    assert nbh.unchecked_points() == {"the Blackwell run": 1}
    monkeypatch.setattr(nbh, "current_arch", lambda: "sm_100a")
    assert nbh.gpu_graded(1, "the Blackwell run", arch="sm_100") and nbh.unchecked_points() == {}
    monkeypatch.setattr(nbh, "has_gpu", lambda: False)
    monkeypatch.setattr(nbh, "uses_pool", lambda: True)
    assert not nbh.gpu_graded(1, "the Blackwell run", pool=True, arch="sm_100")
    out = capsys.readouterr().out
    assert "needs an sm_100 GPU, and there is none here" in out and "pool" not in out

def test_require_correct_passes_the_check_through_and_fails_with_the_table_and_hint(monkeypatch, capsys) -> None:
    calls = []

    class FakeResult:
        def __init__(self, passed: bool) -> None:
            self.passed = passed

        def __str__(self) -> str:
            return "THE TABLE"

    def fake_check(fn, shapes=None, **kwargs):
        calls.append((shapes, kwargs))
        return FakeResult(kwargs.get("dtype") != "bad")

    monkeypatch.setattr(gemmlab, "check_gemm", fake_check)
    assert nbh.require_correct(print, "mine", "odd", dtype="good", tile=(64, 64)).passed
    assert calls[-1] == ("odd", {"dtype": "good", "tile": (64, 64), "forbid_library": True})   # as the grader checks
    with pytest.raises(nbh.CheckFailed, match=r"(?s)mine is wrong.*THE TABLE.*look at the barriers"):
        nbh.require_correct(print, "mine", dtype="bad", hint="look at the barriers")
    nbh.require_correct_nn(print, "rung 1", [(1, 2, 3)], beta=0.0)
    shapes, kwargs = calls[-1]
    assert shapes == [(1, 2, 3)] and kwargs["convention"] == "nn" and kwargs["beta"] == 0.0
    assert kwargs["alpha"] in (1.0, 0.75, -1.5)
    assert "rung 1: THE TABLE" in capsys.readouterr().out


def _nn_gemm(A, B, C, alpha, beta) -> None:
    C.copy_((alpha * (A.float() @ B.float()) + beta * C.float()).half())


def test_the_nn_helpers_are_check_gemm_calls_so_they_run_wherever_it_runs(monkeypatch) -> None:
    """check_padded and check_beta_zero are check_gemm with ``pad`` and ``beta = 0`` (so they run on a local GPU,
    the class's pool and the grader's judge alike), failing with the table. Here on the CPU, with torch allowed."""
    import gemmlab
    from gemmlab.checking.check import check_gemm

    calls = []

    def on_cpu(fn, **kwargs):
        calls.append(dict(kwargs))
        assert kwargs.pop("forbid_library") is True      # as the grader checks
        return check_gemm(fn, device="cpu", forbid_library=False, **kwargs)

    monkeypatch.setattr(gemmlab, "check_gemm", on_cpu)
    nbh.check_padded(_nn_gemm, "torch", 129, 257, 77, 3)
    assert calls[-1]["pad"] == 3 and calls[-1]["convention"] == "nn" and calls[-1]["shapes"] == [(129, 257, 77)]
    nbh.check_beta_zero(lambda A, B, C, a, b: _nn_gemm(A, B, C.zero_() if b == 0 else C, a, b), "torch", 65, 33, 17)
    assert calls[-1]["beta"] == 0.0 and calls[-1]["shapes"] == [(65, 33, 17)]

    def ignores_pitch(A, B, C, alpha, beta):
        packed = C.contiguous()
        _nn_gemm(A.contiguous(), B.contiguous(), packed, alpha, beta)
        torch.as_strided(C, (packed.numel(),), (1,)).copy_(packed.view(-1))   # rows written back to back

    with pytest.raises(nbh.CheckFailed, match="packed with rows padded by 8 is wrong"):
        nbh.check_padded(ignores_pitch, "packed", 64, 48, 32, 8)
    with pytest.raises(nbh.CheckFailed, match="(?s)reads C with beta = 0 is wrong.*the kernel read C"):
        nbh.check_beta_zero(_nn_gemm, "reads C", 64, 48, 32)


def test_ask_turns_an_unwritten_exercise_into_one_sentence() -> None:
    from gemmlab.notebook import nbhelpers as nbh

    def owner_A(r, c):
        raise NotImplementedError()

    with pytest.raises(nbh.ExerciseNotDone, match="owner_A is not written yet"):
        nbh.ask(owner_A, 0, 0)
    assert nbh.ask(lambda r, c: (r, c), 1, 2) == (1, 2)

    def broken(r):
        raise ValueError("a real bug")

    with pytest.raises(ValueError, match="a real bug"):     # any other error is the student's to see
        nbh.ask(broken, 0)

def _result(*rows: Row) -> CheckResult:
    return CheckResult(list(rows), "tn", "float16", "float16", (128, 128), 1)


def test_a_refused_call_is_not_called_wrong(monkeypatch) -> None:
    refused = Row((64, 64, 64), False, math.nan, None, 0, True, True,
                  "AnswerError: capstone_gemm(...) raised HostRecordingError: torch.ops.aten.mul refused")
    monkeypatch.setattr("gemmlab.check_gemm", lambda *a, **k: _result(refused), raising=False)
    with pytest.raises(nbh.CheckFailed, match=r"did not run on 1 of 1 shapes \(AnswerError: .*aten\.mul refused\)"):
        nbh.require_correct(lambda *a: None, "capstone_gemm")


def test_wrong_results_are_called_wrong(monkeypatch) -> None:
    wrong = Row((64, 64, 64), False, 0.5, (0, 1, 2.0, 1.0), 10, True, True, "10 elements wrong")
    ok = Row((32, 32, 32), True, 0.0, None, 0, True, True, "ok")
    monkeypatch.setattr("gemmlab.check_gemm", lambda *a, **k: _result(ok, wrong), raising=False)
    with pytest.raises(nbh.CheckFailed, match="is wrong on some shapes"):
        nbh.require_correct(lambda *a: None, "gemm")


def test_require_refused_passes_only_a_launcher_that_refuses_the_shape(monkeypatch) -> None:
    """08's partial-tile check as a check_gemm call: a LaunchError from the launcher (here, or relayed by the
    grader's judge from the student's process) is the refusal; running, right or wrong, is not."""
    import gemmlab
    from gemmlab.checking.check import check_gemm

    monkeypatch.setattr(gemmlab, "check_gemm", lambda fn, conv, **kw: check_gemm(
        fn, conv, device="cpu", **{**kw, "forbid_library": False}))

    def whole_tiles(A, B, C, alpha, beta):
        if A.shape[0] % 64 or B.shape[1] % 64:
            raise gemmlab.LaunchError("this kernel handles whole 64 x 64 tiles only")
        _nn_gemm(A, B, C, alpha, beta)

    assert not nbh.require_refused(whole_tiles, "rung 3", (100, 72, 40), "partial tiles").passed
    with pytest.raises(nbh.CheckFailed, match=r"rung 3 accepted 100 x 72 x 40 \(M x N x K\) and ran correctly"):
        nbh.require_refused(_nn_gemm, "rung 3", (100, 72, 40), "partial tiles")
    with pytest.raises(nbh.CheckFailed, match="and ran: .*wrong"):
        nbh.require_refused(lambda A, B, C, a, b: C.fill_(1), "rung 3", (100, 72, 40), "partial tiles")

    def relayed(A, B, C, alpha, beta):   # what the judge raises when the launcher lives in the student's process
        from gemmlab.answers.wire import AnswerError
        raise AnswerError("ladder_wmma(...) raised LaunchError: whole tiles only")

    nbh.require_refused(relayed, "rung 3", (100, 72, 40), "partial tiles")
