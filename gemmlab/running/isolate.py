"""Run a GPU job in a fresh child process, so that a kernel that faults cannot break yours.

A kernel that faults (misaligned address, illegal memory access, a trap) leaves the CUDA
context of its process unusable: every later GPU call there fails until the process
restarts. In a notebook that means restarting the Python kernel and losing every
variable. :func:`run_isolated` runs the job in a new Python interpreter with its own CUDA
context instead. The notebook gets the job's result back, or a :class:`IsolatedJobError`
that names the CUDA error the child saw, and its own context is never touched. A job that
hangs is killed after ``timeout_s`` seconds and reported as a
:class:`gemmlab.KernelTimeoutError`.

Two kinds of job:

- **source code** (a string): executed as a script in the child. The script hands a value
  back by assigning it to the variable ``result``. This is the form for notebooks, whose
  functions a child process cannot import.
- **a function** defined at module level (importable by the child, e.g. from a ``.py``
  file), called as ``fn(*args, **kwargs)``; its return value comes back.

Arguments and results travel by pickle: pass and return plain Python values, numpy
arrays or CPU tensors, not CUDA tensors (those belong to the child's context).

:func:`export_module` writes the notebook cells that define some functions to a module file
that such a job can import: the way to run a CuTe DSL kernel from a notebook in a child.
"""
from __future__ import annotations

import atexit
import inspect
import linecache
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import traceback
from pathlib import Path
from typing import Any, Callable

from gemmlab.errors import GemmlabError, KernelTimeoutError
from gemmlab.running.faults import cuda_error_name

#: Seconds a job may run before it is killed.
DEFAULT_TIMEOUT_S = 120.0

class IsolatedJobError(GemmlabError):
    """The isolated job failed. Your process's CUDA context is unaffected.

    Attributes: ``cuda_error`` (e.g. ``"misaligned address"``, or None when the failure
    was not a CUDA error), ``child_type`` and ``child_message`` (the exception raised in
    the child), ``child_traceback``, ``returncode`` and ``stderr`` (the child's).
    """

    def __init__(self, message: str, cuda_error: str | None = None, child_type: str = "",
                 child_message: str = "", child_traceback: str = "", returncode: int | None = None,
                 stderr: str = "") -> None:
        super().__init__(message)
        self.cuda_error = cuda_error
        self.child_type = child_type
        self.child_message = child_message
        self.child_traceback = child_traceback
        self.returncode = returncode
        self.stderr = stderr


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _child_env() -> dict[str, str]:
    """The parent's environment, with the parent's import path so the child finds the same modules."""
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    here = str(Path(__file__).resolve().parents[2])   # the folder that holds gemmlab/
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([here, *paths, *filter(None, [env.get("PYTHONPATH")])]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _job_name(job: Any) -> str:
    if isinstance(job, str):
        first = next((ln.strip() for ln in job.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
        return f"the isolated script ({first[:60]}{'…' if len(first) > 60 else ''})"
    return f"the isolated call {getattr(job, '__qualname__', repr(job))}()"


def run_isolated(job: str | Callable[..., Any], *args: Any, timeout_s: float = DEFAULT_TIMEOUT_S,
                 echo: bool = True, **kwargs: Any) -> Any:
    """Run ``job`` in a fresh Python process and return its result.

    ``job`` is Python source (the script sets ``result``; ``args`` and ``kwargs`` are
    visible to it as ``args`` and ``kwargs``) or a module-level function called with
    ``*args, **kwargs``. The child's standard output is printed here when ``echo``.
    Pending GPU work is synchronised in the child before it reports, so an asynchronous
    kernel fault is caught there too.

    Raises :class:`IsolatedJobError` (with ``.cuda_error`` naming a CUDA error such as
    ``"misaligned address"``) when the job raised or the child died, and
    :class:`gemmlab.KernelTimeoutError` when it ran past ``timeout_s`` and was killed.
    """
    if isinstance(job, str):
        spec: tuple = ("source", textwrap.dedent(job), args, kwargs)
    elif callable(job):
        if (getattr(job, "__name__", "") == "<lambda>" or "<locals>" in getattr(job, "__qualname__", "")
                or getattr(job, "__module__", None) in (None, "__main__")):
            raise GemmlabError("run_isolated needs a function defined at module level in an importable .py "
                               "file (a child process imports it by name) or Python source as a string; a "
                               "lambda, a nested function or a function defined in a notebook cell cannot be "
                               "sent: pass its code as a string instead.")
        spec = ("call", job, args, kwargs)
    else:
        raise GemmlabError(f"run_isolated runs Python source (a str) or a function, not {type(job).__name__}.")
    if not timeout_s or timeout_s <= 0:
        raise GemmlabError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}.")
    what = _job_name(job)
    with tempfile.TemporaryDirectory(prefix="gemmlab-isolate-") as tmp:
        job_file, result_file = Path(tmp) / "job.pkl", Path(tmp) / "result.pkl"
        try:
            job_file.write_bytes(pickle.dumps(spec))
        except Exception as exc:  # unpicklable arguments or function
            raise GemmlabError(f"{what}: its function or arguments cannot be sent to a child process "
                               f"({type(exc).__name__}: {exc}). Pass plain values (numbers, strings, numpy "
                               "arrays, CPU tensors) and a module-level function, or use a source string.") from None
        cmd = [sys.executable, "-m", "gemmlab.running.isolate", str(job_file), str(result_file)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_child_env(), cwd=os.getcwd(), start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            out, err = proc.communicate()
            if echo and out:
                print(out, end="" if out.endswith("\n") else "\n")
            raise KernelTimeoutError(
                f"{what} did not finish within {timeout_s:g} s and was killed (a kernel that never ends: "
                "check loop bounds and that every thread reaches each __syncthreads()). Your own CUDA "
                "context is unaffected.") from None
        if echo and out:
            print(out, end="" if out.endswith("\n") else "\n")
        if not result_file.exists():
            detail = _tail(err) or "(nothing on stderr)"
            cuda = cuda_error_name(err)
            how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else \
                f"exited with code {proc.returncode}"
            raise IsolatedJobError(
                f"{what} {how} before reporting a result"
                + (f" ({cuda})" if cuda else "") + f". Last lines of its stderr:\n{detail}",
                cuda_error=cuda, returncode=proc.returncode, stderr=err)
        status, *payload = pickle.loads(result_file.read_bytes())
    if status == "ok":
        return payload[0]
    child_type, child_message, child_tb = payload
    cuda = cuda_error_name(f"{child_type}: {child_message}")
    if cuda:
        message = (f"{what} failed on the GPU with a CUDA error: {cuda}.\n"
                   f"In the child process: {child_type}: {_tail(child_message, 6)}\n"
                   "Only that child's CUDA context was lost; this process's GPU state is untouched, "
                   "so you can keep working here.")
    else:
        message = f"{what} raised {child_type}: {_tail(child_message, 10)}"
    raise IsolatedJobError(message, cuda_error=cuda, child_type=child_type, child_message=child_message,
                           child_traceback=child_tb, returncode=proc.returncode, stderr=err)


def _kill(proc: subprocess.Popen) -> None:
    """Kill the child and anything it started (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()


# --------------------------------------------------------------------------- the child


def _sync_gpu() -> None:
    """Surface an asynchronous kernel fault before reporting success."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _child_main(job_file: str, result_file: str) -> int:
    spec = pickle.loads(Path(job_file).read_bytes())
    kind = spec[0]
    try:
        if kind == "source":
            _, source, args, kwargs = spec
            namespace: dict[str, Any] = {"__name__": "__isolated__", "args": args, "kwargs": kwargs, "result": None}
            exec(compile(source, "<isolated job>", "exec"), namespace)
            value = namespace.get("result")
        else:
            _, fn, args, kwargs = spec
            value = fn(*args, **kwargs)
        _sync_gpu()
        try:
            payload = pickle.dumps(("ok", value))
        except Exception as exc:
            raise TypeError(f"the job's result ({type(value).__name__}) cannot be pickled back to the parent: "
                            f"{exc}. Return plain values, numpy arrays or CPU tensors (.cpu()).") from None
    except BaseException as exc:  # report everything, including SystemExit and KeyboardInterrupt
        payload = pickle.dumps(("error", type(exc).__name__, str(exc), traceback.format_exc()))
    Path(result_file).write_bytes(payload)
    return 0


if __name__ == "__main__":
    code = _child_main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: after a CUDA fault it can hang or crash


def _defining_file(obj: Any) -> str:
    f = inspect.unwrap(obj) if callable(obj) else obj
    code = getattr(f, "__code__", None)
    name = code.co_filename if code is not None else inspect.getsourcefile(f)
    if not name:
        raise GemmlabError(f"export_module: cannot tell where {obj!r} was defined; pass functions or classes "
                           "defined in a notebook cell or a .py file")
    return name


def folder_until_exit(prefix: str) -> Path:
    """A new temporary folder, removed when this Python process exits.

    Why not sooner: files a process runs code from (cells for the CuTe DSL, which reads a function's file again
    each time it compiles it; a module a child imports) must outlive the call that wrote them."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def export_module(name: str, objects: list[Any], constants: dict[str, Any] | None = None,
                  folder: str | os.PathLike | None = None) -> str:
    """Write the whole cells (or files) that define ``objects`` to ``<folder>/<name>.py``, in the
    order the objects are given, then ``constants`` as assignments; returns the folder, for
    ``sys.path`` in a :func:`run_isolated` job. Without ``folder``, a new temporary one, removed when
    this Python process (the notebook's kernel) exits.

    Why whole cells and not ``inspect.getsource`` of each function: the CuTe DSL rewrites a
    function the first time it compiles it, after which ``inspect.getsource`` loses the
    ``@cute.jit``/``@cute.kernel`` decorator lines, and a module built from it fails to compile.
    The cell text, kept by IPython (``linecache``), still has them, with the cell's imports.
    Lines of IPython magics (``%``, ``!``) are commented out."""
    if not name.isidentifier():
        raise GemmlabError(f"export_module: {name!r} is not a valid module name (letters, digits, underscores)")
    files: list[str] = []
    for obj in objects:
        path = _defining_file(obj)
        if path not in files:
            files.append(path)
    parts = []
    for path in files:
        lines = linecache.getlines(path)
        if not lines:
            raise GemmlabError(f"export_module: the source of {path} is not available (was its cell run in "
                               "this kernel?)")
        text = "".join(("# " + ln) if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)
        parts.append(f"# --- from {path}\n{text.rstrip()}\n")
    for key, value in (constants or {}).items():
        parts.append(f"{key} = {value!r}\n")
    out = Path(folder) if folder is not None else folder_until_exit(f"gemmlab-{name}-")   # a new one each call
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.py").write_text("\n\n".join(parts))
    return str(out)


#: ``cuda_error_name`` is gemmlab.running.faults's, named here too because ``IsolatedJobError.cuda_error``
#: holds what it returns.
__all__ = ["IsolatedJobError", "cuda_error_name", "export_module", "folder_until_exit", "run_isolated"]
