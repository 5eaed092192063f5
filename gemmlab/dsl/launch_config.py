"""The dynamic shared memory a CuTe DSL host function asks for at launch, read from its host IR.

A DSL kernel gets its shared memory dynamically (``kernel(...).launch(smem=...)``): its cubin
records only a small static part (the alignment of the dynamic region), so a resource line
built from the cubin alone under-reports shared memory, e.g. 1024 B for a kernel that
launches with 16640 B. The launch itself is in the host function's LLVM-dialect IR, as a
``cudaLaunchConfig`` struct ``(grid[3], block[3], i64 dynamic smem, stream, attrs, nattrs)``
whose third field is stored from a constant when the size is known at compile time.
"""
from __future__ import annotations

import re

__all__ = ["dynamic_smem_bytes"]

_CONFIG_STRUCT = "!llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>"
_FUNCTION = re.compile(r"^\s*llvm\.func ", re.MULTILINE)
_CONSTANT = re.compile(r"(%[\w.]+) = llvm\.mlir\.constant\((\d+) : i64\) : i64")
_SMEM_FIELD = re.compile(r"(%[\w.]+) = llvm\.getelementptr (%[\w.]+)\[0, 2\] : .*" + re.escape(_CONFIG_STRUCT))
_STORE = re.compile(r"llvm\.store (%[\w.]+), (%[\w.]+) : i64, !llvm\.ptr")


def dynamic_smem_bytes(host_ir: str) -> int | None:
    """Bytes of dynamic shared memory of the host function's kernel launches (the largest, if
    several), or None when there is no launch or its size is computed at run time."""
    sizes: list[int | None] = []
    for function in _FUNCTION.split(host_ir):  # SSA names (%9) are local to a function
        constants = {m.group(1): int(m.group(2)) for m in _CONSTANT.finditer(function)}
        fields = {m.group(1) for m in _SMEM_FIELD.finditer(function)}
        sizes += [constants.get(value) for value, where in _STORE.findall(function) if where in fields]
    if not sizes or any(size is None for size in sizes):
        return None
    return max(size for size in sizes if size is not None)
