"""gemmlab.running.isolate on the CPU: results come back, child errors are named, hangs are killed."""
from __future__ import annotations

import operator
import os
import sys
import time

import pytest

import gemmlab
from gemmlab.running.isolate import IsolatedJobError, run_isolated
from gemmlab.running.faults import cuda_error_name


def test_source_job_returns_result_and_sees_args():
    assert run_isolated("result = sum(args) * kwargs['scale']", 1, 2, 3, scale=10) == 60


def test_source_job_can_import_gemmlab():
    assert run_isolated("import gemmlab\nresult = gemmlab.__version__") == gemmlab.__version__


def test_function_job_returns_result():
    assert run_isolated(operator.mul, 6, 7) == 42


def test_child_stdout_is_echoed(capsys):
    run_isolated("print('hello from the child')")
    assert "hello from the child" in capsys.readouterr().out
    run_isolated("print('quiet')", echo=False)
    assert "quiet" not in capsys.readouterr().out


def test_child_exception_becomes_isolated_job_error():
    with pytest.raises(IsolatedJobError, match="ZeroDivisionError") as info:
        run_isolated(operator.truediv, 1, 0)
    assert info.value.child_type == "ZeroDivisionError" and info.value.cuda_error is None
    assert "truediv" in info.value.child_traceback or "division" in info.value.child_message


def test_cuda_error_in_child_is_named():
    job = "raise RuntimeError('CUDA error: misaligned address\\nCUDA kernel errors might be reported later')"
    with pytest.raises(IsolatedJobError, match="CUDA error: misaligned address") as info:
        run_isolated(job)
    assert info.value.cuda_error == "misaligned address"
    assert "untouched" in str(info.value)


@pytest.mark.parametrize("text, name", [
    ("gemmlab.ContextLostError: ... failed: a misaligned address (CUDA_ERROR_MISALIGNED_ADDRESS)", "misaligned address"),
    ("cudaErrorIllegalAddress", "illegal memory access"),
    ("CUDA error: an illegal memory access was encountered", "illegal memory access"),
    ("ValueError: bad shape", None),
])
def test_cuda_error_name(text, name):
    assert cuda_error_name(text) == name


def test_hung_child_is_killed_and_reported():
    start = time.monotonic()
    with pytest.raises(gemmlab.KernelTimeoutError, match="did not finish within 2 s"):
        run_isolated("import time\nprint('started', flush=True)\ntime.sleep(60)", timeout_s=2)
    assert time.monotonic() - start < 50       # killed at its limit, not after the child's 60 s sleep


def test_child_that_dies_is_reported_with_its_exit_code():
    with pytest.raises(IsolatedJobError, match="exited with code 3") as info:
        run_isolated("import os, sys\nsys.stderr.write('dying now\\n'); sys.stderr.flush()\nos._exit(3)")
    assert info.value.returncode == 3 and "dying now" in str(info.value)


def test_child_killed_by_a_signal():
    with pytest.raises(IsolatedJobError, match="killed by signal"):
        run_isolated("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")


def test_unpicklable_result_is_explained():
    with pytest.raises(IsolatedJobError, match="cannot be pickled"):
        run_isolated("import threading\nresult = threading.Lock()")


def test_lambdas_and_bad_jobs_are_refused_up_front():
    with pytest.raises(gemmlab.GemmlabError, match="module level"):
        run_isolated(lambda: 1)
    with pytest.raises(gemmlab.GemmlabError, match="source"):
        run_isolated(42)
    with pytest.raises(gemmlab.GemmlabError, match="timeout_s"):
        run_isolated("result = 1", timeout_s=0)


def test_export_module_writes_whole_defining_cells_then_constants(tmp_path) -> None:
    import linecache

    import gemmlab
    from gemmlab.errors import GemmlabError

    cell = "import math\n%time x = 1\n\n\ndef deco(f):\n    return f\n\n\n@deco\ndef area(r):\n    return math.pi * r * r * SCALE\n"
    fake = str(tmp_path / "ipykernel_cell_7.py")           # as IPython registers a cell: in linecache only
    linecache.cache[fake] = (len(cell), None, cell.splitlines(keepends=True), fake)
    namespace: dict = {}
    exec(compile(cell.replace("%time", "# %time"), fake, "exec"), namespace)
    try:
        folder = gemmlab.export_module("cellmod", [namespace["area"], namespace["deco"]], {"SCALE": 2},
                                       folder=tmp_path / "out")
    finally:
        linecache.cache.pop(fake, None)
    text = (tmp_path / "out" / "cellmod.py").read_text()
    assert text.count("def area") == 1 and "@deco" in text and "# %time x = 1" in text
    assert text.rstrip().endswith("SCALE = 2")
    sys.path.insert(0, folder)
    try:
        import cellmod
        assert abs(cellmod.area(1.0) - 2 * 3.141592653589793) < 1e-12
    finally:
        sys.path.remove(folder)
        sys.modules.pop("cellmod", None)
    with pytest.raises(GemmlabError, match="not a valid module name"):
        gemmlab.export_module("no-dash", [namespace["area"]])


def test_export_module_removes_its_own_folder_when_the_process_exits(tmp_path) -> None:
    """Each run of a notebook cell makes a new folder: they must not pile up in /tmp for the kernel's lifetime
    and after."""
    import subprocess

    cell = tmp_path / "cell.py"
    cell.write_text("def f():\n    return 1\n")
    child = ("import sys, gemmlab; sys.path.insert(0, sys.argv[1]); import cell; "
             "folder = gemmlab.export_module('made', [cell.f]); print(folder); "
             "import os; assert os.path.isfile(os.path.join(folder, 'made.py'))")
    done = subprocess.run([sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    folder = done.stdout.strip().splitlines()[-1]
    assert folder.startswith("/") and not os.path.exists(folder), f"{folder} outlived its process"
