"""Kernel specs the judge tests share: the planted test kernels described as data."""
from __future__ import annotations

from gemmlab.judge import KernelSpec
from tests.support import KERNELS

#: One thread per output element, 16 × 16 blocks: the launch of tests/kernels/planted_naive.cu.
GRID = ("cdiv(N, T)", "cdiv(M, T)", "1")
BLOCK = ("T", "T", "1")


def naive_spec(name: str = "gemm_naive", **changes: object) -> KernelSpec:
    """planted_naive.cu's GEMM, renamed to ``name`` (the fake backend reads behaviour from the name)."""
    source = (KERNELS / "planted_naive.cu").read_text().replace("gemm_naive", name)
    fields = dict(source=source, name=name, convention="tn", grid=GRID, block=BLOCK, constants={"T": 16})
    fields.update(changes)
    return KernelSpec(**fields)  # type: ignore[arg-type]


def planted_spec(file: str, name: str) -> KernelSpec:
    """A planted kernel from tests/kernels, launched like planted_naive.cu."""
    return KernelSpec((KERNELS / file).read_text(), name, "tn", GRID, BLOCK, constants={"T": 16})
