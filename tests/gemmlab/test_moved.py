"""The module paths gemmlab had before its stage folders keep working: the same module objects through either
path, and a stage's submodules reached as attributes after only ``import gemmlab``. Run in fresh interpreters:
what is under test is the first import."""
from __future__ import annotations

import subprocess
import sys

import pytest

from gemmlab.moved import MOVED, new_path
from tests.support import ROOT


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_old_path_is_the_module_at_its_new_one() -> None:
    code = ("import importlib, gemmlab.moved as m\n"
            "for old, new in m.MOVED.items():\n"
            "    assert importlib.import_module(old) is importlib.import_module(new), old\n"
            "from gemmlab import banks, draw, nbhelpers\n"
            "import gemmlab.runtime.device, gemmlab.running.device\n"
            "assert gemmlab.runtime.device is gemmlab.running.device\n"
            "from gemmlab.timing import time_cuda\n"
            "from gemmlab.timing.events import time_cuda as t2\n"
            "assert time_cuda is t2 and banks.__name__ == 'gemmlab.seeing.banks'\n"
            "print('ok')\n")
    assert _run(code).strip() == "ok"


def test_a_stage_submodule_is_an_attribute_after_only_import_gemmlab() -> None:
    code = ("import sys, gemmlab\n"
            "assert gemmlab.timing.bench.time_cuda is gemmlab.timing.events.time_cuda\n"
            "assert gemmlab.checking.check.check_gemm.__name__ == 'check_gemm'\n"
            "banks = gemmlab.seeing.banks\n"
            "assert gemmlab.bench is gemmlab.timing.bench and banks.__name__ == 'gemmlab.seeing.banks'\n"
            "for stage in ('compiling', 'running', 'checking', 'timing', 'seeing', 'notebook'):\n"
            "    try:\n"
            "        getattr(getattr(gemmlab, stage), 'no_such_module')\n"
            "    except AttributeError as err:\n"
            "        assert 'no_such_module' in str(err)\n"
            "    else:\n"
            "        raise SystemExit(stage)\n"
            "print('torch' in sys.modules)\n")
    assert _run(code).strip() == "False", "reaching a submodule must not import torch"


@pytest.mark.parametrize("old, new", [("gemmlab.banks", "gemmlab.seeing.banks"),
                                      ("gemmlab.compilation.worker", "gemmlab.compiling.worker"),
                                      ("gemmlab.runtime", "gemmlab.running"), ("gemmlab.layout", None),
                                      ("gemmlab." + "bankshot", None)])   # a path that never was
def test_new_path(old: str, new: str | None) -> None:
    assert new_path(old) == new
    assert all(new_path(o) == n for o, n in MOVED.items())
