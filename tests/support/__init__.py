"""What the tests share: where the repository, the test kernels and the DSL test kernels are."""
from __future__ import annotations

from pathlib import Path

#: The repository's root folder.
ROOT = Path(__file__).resolve().parents[2]
#: CUDA C++ test kernels (planted faults, the CuTe layout truth, small GEMMs).
KERNELS = ROOT / "tests" / "kernels"
#: CuTe DSL test kernels, importable as ``tests.dsl_kernels``.
DSL_KERNELS = ROOT / "tests" / "dsl_kernels"
