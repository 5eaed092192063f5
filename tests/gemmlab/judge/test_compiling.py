"""The judge's compile process: the Compiled record or the error comes back; the memory limit holds."""
from __future__ import annotations

import pytest

from gemmlab.errors import CompileError, ToolchainError
from gemmlab.judge.compiling import compile_limited

from .cases import naive_spec

pytestmark = pytest.mark.slow


def test_compiles_for_an_arch_without_a_gpu() -> None:
    compiled = compile_limited(naive_spec(), "sm_90a", 120, 16 << 30)
    assert [p.name for p in compiled.params] == ["A", "B", "D", "M", "N", "K"] and compiled.cubin


def test_a_compile_error_comes_back_as_one() -> None:
    broken = naive_spec(source=naive_spec().source.replace("acc +=", "acc +== "))
    with pytest.raises(CompileError, match="expected an expression"):
        compile_limited(broken, "sm_90a", 120, 16 << 30)


def test_a_compile_over_the_memory_limit_fails_cleanly() -> None:
    with pytest.raises(ToolchainError):
        compile_limited(naive_spec(), "sm_90a", 120, 100 << 20)


def test_a_compile_bomb_is_stopped_at_its_cpu_allowance_and_says_so() -> None:
    """The judge's compile counts compiler CPU seconds (a busy grading host's waits do not count)."""
    from gemmlab.errors import CompileTimeoutError

    bomb = naive_spec(source=naive_spec().source + (
        "\ntemplate <int N, int M> struct Tree { static constexpr int v = Tree<N - 1, 2 * M>::v + "
        "Tree<N - 1, 2 * M + 1>::v; };\ntemplate <int M> struct Tree<0, M> { static constexpr int v = 1; };\n"
        "__global__ void bomb(int* x) { x[0] = Tree<30, 0>::v; }\n"))
    with pytest.raises(CompileTimeoutError, match=r"used its whole allowance of 1.5 s of compiler CPU time"):
        compile_limited(bomb, "sm_90a", 1.5, 16 << 30)
