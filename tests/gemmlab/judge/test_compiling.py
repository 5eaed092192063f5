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
