"""dtype_name: the one spelling of a dtype across results, recordings and messages, and torch-free."""
from __future__ import annotations

import subprocess
import sys

import pytest

from gemmlab.dtypes import dtype_name


def test_a_torch_dtype_and_its_names_all_read_as_the_short_name() -> None:
    torch = pytest.importorskip("torch")
    for dtype, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16"), (torch.float32, "float32"),
                        (torch.int8, "int8")):
        assert dtype_name(dtype) == dtype_name(str(dtype)) == dtype_name(name) == name


def test_only_the_prefix_goes() -> None:
    assert dtype_name("float16.torch.x") == "float16.torch.x"
    assert dtype_name("torch.torch.float16") == "torch.float16"


def test_naming_a_dtype_does_not_import_torch() -> None:
    code = "import sys, gemmlab.dtypes; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
