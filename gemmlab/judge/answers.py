"""A student's answers as seen by the judge: values as plain data, functions as calls that return plain data.

Why: when a notebook is graded, its test cells run in the judge, a kernel that runs the
instructor's cells and never a line of the student's Python. Each name an answer cell defines is
bound there by :func:`bind` from a description the student's kernel gave (:func:`describe`):

- a value that is plain data (:mod:`.plain`) is rebuilt from that data;
- a function becomes an :class:`Answer`; calling it sends the arguments (plain data) to the
  student's kernel, which calls its own function (:func:`serve`) and sends back the result as
  plain data, or the exception's type and message;
- a call with tensors (a launch) is *recorded* in the student's kernel instead: its function runs
  there on probes, CPU tensors shaped like the judge's, while its CuTe DSL launches and copies are
  written down (:mod:`gemmlab.dsl.recording`); the judge replays that plan on its own tensors
  (:mod:`.dsl_replay`), so the verdict on what the kernel computed is the judge's;
- a CuTe DSL function becomes a :class:`DslAnswer`: launches of it are recorded as above, and
  ``gemmlab.dsl.compile`` of it asks the student's kernel to compile it;
- a compiled CuTe DSL kernel (``gemmlab.dsl.compile``'s result, bound to a name or returned by a
  call) crosses as a handle the student's kernel keeps, and becomes a :class:`CompiledAnswer`:
  launches of it are recorded and replayed, and its PTX, SASS and resources are asked for as data;
- anything else is an :class:`Opaque` that fails every use with what it was.

The two kernels never share anything but a socket each to the grader, which relays whole lines
between them (``GEMMLAB_ANSWER_FD`` names the socket's file descriptor, inherited at start): the
judge writes a call as one JSON line, a thread of the student's kernel (:func:`serve_in_background`)
runs :func:`serve` and writes the reply as one line. Outside grading (``GEMMLAB_JUDGE`` unset) none
of this is used: a notebook's tests call the student's objects directly, with the same messages.
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from gemmlab.dtypes import dtype_name

from . import plain
from .errors import JudgeError

#: Environment variable set in the judge's kernel.
JUDGE_ENV = "GEMMLAB_JUDGE"
#: Environment variable holding the file descriptor of a kernel's socket to the grader's relay.
ANSWER_FD_ENV = "GEMMLAB_ANSWER_FD"
#: Longest answer reply the judge reads.
MAX_REPLY_CHARS = plain.MAX_CHARS + 4096
#: Most characters the description of a notebook's answers takes, all names together (a value that does not fit
#: in what is left is described as not crossing, with this limit named): answers are functions, layouts and a few
#: numbers; one of 200 MB took the grader to 2 GB and the judge to 6 GB.
MAX_DESCRIPTION_CHARS = 4 << 20
#: Deepest nesting of a description's JSON (its values are plain-data strings inside it).
DESCRIPTION_DEPTH = 8
#: Most calls :meth:`Answer.each` sends in one request.
MAX_CALLS_AT_ONCE = 1 << 16


class AnswerError(JudgeError):
    """The student's function raised, or its kernel did not answer; the message says which and how."""


class NeedsStudentProcess(BaseException):
    """A test handed tensors to a student's function (a launch) where the grader does not record launches.

    Not an ``Exception``, so no ``except Exception`` in a test or helper swallows it: the grader sees it
    and runs that test in the student's kernel instead (as a CuTe DSL test). Tests the instructor marked
    ``judged`` record and replay launches instead (:func:`record_launches`).
    """


class StudentProcessOnly(JudgeError):
    """A CuTe DSL kernel of the student's: it can only be built and run in the student's own process."""


_RECORDING = {"on": False}


def record_launches(on: bool) -> bool:
    """In the judge: whether a call with tensors is recorded and replayed here (set by the grader per cell)."""
    _RECORDING["on"] = bool(on)
    return _RECORDING["on"]


def recording_launches() -> bool:
    """Whether calls with tensors are recorded and replayed in this process now."""
    return _RECORDING["on"]


def _launch(name: str, args: tuple, kwargs: dict[str, Any], kernel: int | None = None) -> None:
    if not _RECORDING["on"]:
        raise NeedsStudentProcess(f"{name} is called with tensors (a launch): this test runs in your notebook's process")
    _launch_recorded(name, args, kwargs, kernel)


def in_judge() -> bool:
    """Whether this process is the judge of a grading run."""
    return os.environ.get(JUDGE_ENV) == "1"


# ---------------------------------------------------------------- the student's side

def _is_dsl(value: Any) -> bool:
    """A CuTe DSL ``@cute.kernel``/``@cute.jit`` function (a wrapper the DSL made) or a DSL object."""
    module = getattr(type(value), "__module__", "") or ""
    made_by = getattr(getattr(value, "__globals__", None), "get", lambda _: "")("__name__") or ""
    return module.split(".")[0] == "cutlass" or str(made_by).split(".")[0] == "cutlass"


#: How a compiled CuTe DSL kernel of the student's is written in data that crosses: a handle its kernel keeps.
KERNEL_MARK = "__gemmlab_dsl_kernel__"
#: What the judge may ask of a compiled kernel (:class:`CompiledAnswer`), each plain data. Its PTX and SASS
#: text are not among them: text a student's process writes is evidence of nothing; the judge reads the
#: machine code of the module image itself ("image", disassembled in the judge).
KERNEL_FACTS = ("image", "summary", "resources", "kernel_name", "compiled_arch", "signature")
#: Largest module image a compiled kernel may hand over (as the recorded plans allow).
MAX_IMAGE_BYTES = 32 << 20

_KERNELS: dict[int, Any] = {}      # in the student's kernel: handle -> compiled kernel the judge was told of


def _is_compiled(value: Any) -> bool:
    kind = type(value)
    return kind.__name__ == "DslKernel" and kind.__module__ == "gemmlab.dsl.core"


#: First handle of this process: random, so a handle the judge kept from before a restart of the student's kernel
#: names no kernel of the new one.
_FIRST_HANDLE = 1 + int.from_bytes(os.urandom(4), "little") * 4096


def _handle(kernel: Any) -> int:
    for handle, known in _KERNELS.items():
        if known is kernel:
            return handle
    handle = _FIRST_HANDLE + len(_KERNELS)
    _KERNELS[handle] = kernel
    return handle


def _with_handles(value: Any, depth: int = 0) -> Any:
    """``value`` with each compiled DSL kernel replaced by its handle's mark (student's side)."""
    if _is_compiled(value):
        return {KERNEL_MARK: {"handle": _handle(value), "name": str(value.name)}}
    if type(value) in (list, tuple) and depth < 8:      # exact types: a subclass is left for plain.encode to refuse
        return type(value)(_with_handles(v, depth + 1) for v in value)
    if type(value) is dict and depth < 8:
        return {k: _with_handles(v, depth + 1) for k, v in value.items()}
    return value


def _fact(kernel: Any, fact: str) -> Any:
    """One of :data:`KERNEL_FACTS` of a compiled kernel, as plain data."""
    if fact not in KERNEL_FACTS:
        raise ValueError(f"the judge may ask a compiled kernel for {', '.join(KERNEL_FACTS)}, not {fact!r}")
    if fact == "image":
        import base64

        return {"cubin": base64.b64encode(bytes(kernel.cubin)).decode(), "kernel": str(kernel.kernel_name),
                "arch": str(kernel.compiled_arch)}
    if fact == "summary":
        return getattr(kernel, fact)()
    if fact == "resources":
        import dataclasses

        res = kernel.resources
        return None if res is None else dataclasses.asdict(res)
    return getattr(kernel, fact)


def describe(namespace: dict[str, Any], names: list[str]) -> str:
    """For each of ``names`` in the student's ``namespace``: how the judge should bind it (JSON), within
    :data:`MAX_DESCRIPTION_CHARS` in all."""
    out = _described(namespace, names)
    left = MAX_DESCRIPTION_CHARS - 200 * len(out)
    for name, entry in out.items():
        size = len(json.dumps(entry))
        if size > left:
            out[name] = {"kind": "opaque", "why": f"{name}: its value takes {size:,} characters as data, and a "
                         f"notebook's answers may take {MAX_DESCRIPTION_CHARS:,} in all, so it does not reach the tests. "
                         "An answer is a function, a layout or a few numbers, not a large table."}
            size = len(json.dumps(out[name]))
        left -= size
    return json.dumps(out)


def _described(namespace: dict[str, Any], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        if name not in namespace:
            out[name] = {"kind": "missing"}
            continue
        value = namespace[name]
        if _is_compiled(value):
            out[name] = {"kind": "value", "data": plain.encode(_with_handles(value), name)}
            continue
        if _is_dsl(value):
            from gemmlab.notebook.nbhelpers import function_done

            kind = str(getattr(value, "_decorator_kind", "") or type(value).__qualname__)
            out[name] = {"kind": "dsl", "type": kind, "done": bool(function_done(value))}
            continue
        try:                                  # plain data first: a layout is callable, yet a value
            out[name] = {"kind": "value", "data": plain.encode(value, name)}
        except plain.NotPlainData as exc:
            if callable(value) and not isinstance(value, type):
                from gemmlab.notebook.nbhelpers import function_done

                out[name] = {"kind": "function", "done": bool(function_done(value))}
            else:
                out[name] = {"kind": "opaque", "why": str(exc)}
    return out


def serve(namespace: dict[str, Any], request: str) -> str:
    """Run one call the judge asked for in the student's ``namespace``; the result or error as JSON
    (with the request's ``id``)."""
    try:
        call = json.loads(request)
        ident = call.get("id")
    except Exception as exc:  # noqa: BLE001 - a broken request is reported, never raised here
        return json.dumps({"error": type(exc).__name__, "message": str(exc)[:2000]})
    return json.dumps({"id": ident, **_run_call(namespace, call)})


def _run_call(namespace: dict[str, Any], call: Any) -> dict[str, Any]:
    try:
        args = plain.decode(call["args"])
        kwargs = plain.decode(call["kwargs"])
        if "kernel" in call:                # a compiled kernel the judge holds a handle of
            fn = _KERNELS[int(call["kernel"])]
            name = str(fn.name)
        else:
            name = call["name"]
            fn = namespace[name]
    except Exception as exc:  # noqa: BLE001 - a broken request is reported, never raised here
        return {"error": type(exc).__name__, "message": str(exc)[:2000]}
    if isinstance(call.get("record"), dict):
        return _record_call(fn, args, kwargs, call["record"])
    watch = None
    try:
        if isinstance(call.get("watch"), list):   # a call watched for a library's code (gemmlab.checking.library_watch)
            from gemmlab.checking.library_watch import watched_call

            seen = watched_call(fn, args, kwargs, libraries=[str(name)[:100] for name in call["watch"]])
            result, watch = seen.result, seen.to_dict()
        elif isinstance(call.get("compile"), dict):
            with _values_as_in_judge(namespace, call["compile"].get("values")):
                result = _compile_call(fn, args, kwargs, call["compile"])
        elif "kernel" in call:
            result = _fact(fn, str(call.get("get", "")))
        elif "each" in call:             # many calls of one function in one round trip (nbhelpers.ask_each)
            calls = plain.decode(call["each"])
            if not isinstance(calls, list) or len(calls) > MAX_CALLS_AT_ONCE:
                raise ValueError(f"each: a list of at most {MAX_CALLS_AT_ONCE} argument lists")
            result = [fn(*c) for c in calls]
        else:
            result = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the student's exception is data for the judge
        return {"error": type(exc).__name__, "message": str(exc)[:4000]}
    try:
        reply = {"result": plain.encode(_with_handles(result), f"the value {name}(...) returned")}
        return reply if watch is None else {**reply, "watch": watch}
    except plain.NotPlainData as exc:
        return {"error": "NotPlainData", "message": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - whatever the value does, the answering thread lives on
        return {"error": "NotPlainData", "message": f"the value {name}(...) returned could not be read: "
                                                    f"{type(exc).__name__}: {str(exc)[:500]}"}


#: How a tensor argument of a recorded call is written in the request's arguments.
TENSOR_MARK = "__gemmlab_tensor__"


def _with(value: Any, probes: list[Any], depth: int = 0) -> Any:
    """``value`` with every tensor mark replaced by its probe."""
    if isinstance(value, dict) and set(value) == {TENSOR_MARK} and isinstance(value[TENSOR_MARK], int):
        return probes[value[TENSOR_MARK]]
    if isinstance(value, (list, tuple)) and depth < 8:
        return type(value)(_with(v, probes, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 8:
        return {k: _with(v, probes, depth + 1) for k, v in value.items()}
    return value


def _probes(metas: list[dict[str, Any]]) -> list[Any]:
    """CPU stand-ins of the judge's tensors (:func:`gemmlab.dsl.recording.probe`)."""
    import torch

    from ..dsl.recording import probe

    return [probe(t["shape"], t["stride"], getattr(torch, t["dtype"]), int(t["address_mod"])) for t in metas]


def _record_call(fn: Any, args: Any, kwargs: Any, how: dict[str, Any]) -> dict[str, Any]:
    """Call ``fn`` on probes of the judge's tensors and return what it launched (a plan), or the error."""
    try:
        from ..dsl import gemm_fn
        from ..dsl.recording import recording

        probes = _probes(how["tensors"])
        attributes = {int(k): int(v) for k, v in how["device_attributes"].items()}
        if _is_dsl(fn):                        # a bare @cute.jit function: launched the way gemm_fn launches it
            fn = gemm_fn(fn)
        with recording(str(how["arch"]), attributes, probes) as recorder:
            fn(*_with(args, probes), **_with(kwargs, probes))
        return {"plan": recorder.plan()}
    except BaseException as exc:  # noqa: BLE001 - the student's exception is data for the judge
        return {"error": type(exc).__name__, "message": str(exc)[:4000]}


@contextmanager
def _values_as_in_judge(namespace: dict[str, Any], values: Any) -> Iterator[None]:
    """While compiling: the student's answer values that the judge's test rebound (e.g. a stage count it varies)
    hold the judge's values, so the DSL function reads them as it would in the notebook; restored after."""
    changed = {name: plain.decode(data) for name, data in (values or {}).items()
               if isinstance(name, str) and name in namespace}
    before = {name: namespace[name] for name in changed}
    namespace.update(changed)
    try:
        yield
    finally:
        namespace.update(before)


def _compile_call(fn: Any, args: Any, kwargs: Any, how: dict[str, Any]) -> Any:
    """``gemmlab.dsl.compile`` of the student's function (or a new variant of a compiled kernel) for probes
    of the judge's example tensors: the compiled kernel, which crosses as a handle."""
    from ..dsl import compile as dsl_compile

    probes = _probes(how["tensors"])
    examples = _with(args, probes)
    if _is_compiled(fn):
        return fn.compile_for(*examples)
    if kwargs:
        raise TypeError("gemmlab.dsl.compile takes its example arguments by position")
    return dsl_compile(fn, *examples, arch=how.get("arch"), options=how.get("options"), dtypes=how.get("dtypes"),
                       min_align=how.get("min_align"))


def _lines(sock: Any) -> Any:
    """Whole lines (without the newline) read from ``sock``; ends when it closes."""
    buffer = b""
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode("utf-8", "replace")


def serve_in_background(namespace: dict[str, Any]) -> bool:
    """In the student's kernel while grading: answer the judge's calls in a daemon thread; False if not grading."""
    import socket
    import threading

    fd = os.environ.get(ANSWER_FD_ENV, "")
    if not fd.isdigit():
        return False
    sock = socket.socket(fileno=int(fd))

    def loop() -> None:
        for line in _lines(sock):
            try:
                reply = serve(namespace, line)
            except BaseException as exc:  # noqa: BLE001 - one bad call never ends the answering thread
                reply = json.dumps({"error": type(exc).__name__, "message": str(exc)[:2000]})
            sock.sendall(reply.encode() + b"\n")

    threading.Thread(target=loop, name="gemmlab-answers", daemon=True).start()
    return True


# ---------------------------------------------------------------- the judge's side

class SocketChannel:
    """The judge's end: one JSON line out per call, the reply with the same id back.

    Reads through its own buffer (no generator), so a call interrupted by the cell's time limit leaves
    the channel usable: its late reply is skipped by id.
    """

    def __init__(self) -> None:
        self._sock: Any = None
        self._buffer = b""
        self._next = 0

    def _line(self) -> str:
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                raise AnswerError("your notebook's kernel closed the connection (it was restarted or ended).")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def __call__(self, request: dict[str, Any]) -> str:
        import socket

        if self._sock is None:
            fd = os.environ.get(ANSWER_FD_ENV, "")
            if not fd.isdigit():
                raise AnswerError("this judge has no connection to a notebook's kernel (it runs only in the grader).")
            self._sock = socket.socket(fileno=int(fd))
        self._next += 1
        ident = self._next
        line = json.dumps({"id": ident, **request}, separators=(",", ":"))
        if len(line) > MAX_REPLY_CHARS:      # the relay would drop it: say so now instead of waiting out the cell
            raise AnswerError(f"{request.get('name', 'a call')}(...): its arguments take {len(line):,} characters; "
                              f"at most {MAX_REPLY_CHARS:,} go to your notebook's kernel.")
        self._sock.sendall(line.encode() + b"\n")
        while True:
            line = self._line()
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if isinstance(reply, dict) and reply.get("id") == ident:
                return line


#: How the judge sends a request and waits for the reply (tests may replace it).
channel: Callable[[dict[str, Any]], str] = SocketChannel()


def _holds_tensor(values: tuple, depth: int = 0) -> bool:
    for value in values:
        kind = type(value)
        if (getattr(kind, "__module__", "") or "").split(".")[0] == "torch":
            return True
        if kind in (tuple, list) and depth < 8 and _holds_tensor(tuple(value), depth + 1):
            return True
        if kind is dict and depth < 8 and _holds_tensor(tuple(value.values()), depth + 1):
            return True
    return False


def _marked(value: Any, tensors: list[Any], depth: int = 0) -> Any:
    """``value`` with each torch tensor replaced by a mark (its index in ``tensors``, where it is appended)."""
    kind = type(value)
    if (getattr(kind, "__module__", "") or "").split(".")[0] == "torch" and hasattr(value, "data_ptr"):
        tensors.append(value)
        return {TENSOR_MARK: len(tensors) - 1}
    if kind in (tuple, list) and depth < 8:
        return kind(_marked(v, tensors, depth + 1) for v in value)
    if kind is dict and depth < 8:
        return {k: _marked(v, tensors, depth + 1) for k, v in value.items()}
    return value


#: Replays of recorded calls, by what the recording depended on (bounded in number and in the scratch memory they
#: hold; oldest dropped first). Emptied whenever the student's answers are bound again: a redefined function
#: is recorded afresh.
_REPLAYS: dict[str, Any] = {}
#: Whose launch each replay recorded, and what must hold of every plan recorded for a launching answer
#: (:func:`guard_launches`).
_REPLAY_OWNERS: dict[str, tuple[str, Any]] = {}
_GUARDS: dict[tuple[str, Any], list[Callable[[Any, list[dict[str, Any]]], None]]] = {}


def _guard_key(name: str, kernel: int | None) -> tuple[str, Any]:
    return ("kernel", kernel) if kernel is not None else ("name", name)


def launch_key(target: Any) -> tuple[str, Any]:
    """Which launches of the student's a judge-side object stands for (a compiled kernel's handle, or a
    function's name); TypeError for anything that does not launch in the student's kernel."""
    if isinstance(target, CompiledAnswer):
        return _guard_key(target.name, target._handle)
    if isinstance(target, (Answer, DslAnswer)):
        return _guard_key(target.__name__, None)
    raise TypeError(f"{type(target).__name__} is not a launch of the student's")


def guard_launches(target: Any, guard: Callable[[Any, list[dict[str, Any]]], None]) -> None:
    """In the judge: from now on, ``guard(plan, tensor_metas)`` sees every plan recorded for a launch of ``target``
    before it is replayed, and may refuse it by raising (e.g. a kernel other than the one whose machine code was
    checked). Replays recorded before are dropped, so their next launch is recorded and guarded too."""
    key = launch_key(target)
    _GUARDS.setdefault(key, []).append(guard)
    for replay_key in [k for k, owner in _REPLAY_OWNERS.items() if owner == key]:
        _REPLAYS.pop(replay_key, None)
        _REPLAY_OWNERS.pop(replay_key, None)


def recorded_plan(target: Any, args: tuple, kwargs: dict[str, Any] | None = None, arch: str | None = None) -> Any:
    """In the judge: the plan the student's kernel records for one call of ``target`` on ``args`` (tensors on any
    device: only their shapes, strides, dtypes and alignment cross), without replaying it; no GPU needed."""
    from gemmlab.running.gpu import current_arch, has_gpu

    launch_key(target)
    kernel = target._handle if isinstance(target, CompiledAnswer) else None
    name = target.name if isinstance(target, CompiledAnswer) else target.__name__
    request, tensors = _request(name, args, dict(kwargs or {}), kernel)
    if has_gpu():
        attributes, arch = _device_attributes(), arch or current_arch()
    else:
        from ..dsl.host_recording import H100_ATTRIBUTES

        attributes, arch = {str(k): v for k, v in H100_ATTRIBUTES.items()}, arch or "sm_90a"
    request["record"] = {"arch": arch, "tensors": _metas(tensors), "device_attributes": attributes}
    reply = _reply(name, channel(request))
    if "plan" not in reply:
        raise AnswerError(f"{name}(...): your notebook's kernel sent no recording of the launch.")
    return reply["plan"]
MAX_REPLAYS = 256
MAX_SCRATCH_HELD = 4 << 30


_ATTRIBUTES: dict[int, dict[str, int]] = {}


def _device_attributes() -> dict[str, int]:
    import torch

    from gemmlab.running.device import raw_attributes

    index = torch.cuda.current_device()
    if index not in _ATTRIBUTES:
        _ATTRIBUTES[index] = {str(k): v for k, v in raw_attributes(index).items()}
    return _ATTRIBUTES[index]


def _metas(tensors: list[Any]) -> list[dict[str, Any]]:
    """What a probe of each tensor needs: shape, strides, dtype and address alignment (mod 512)."""
    return [{"shape": list(t.shape), "stride": list(t.stride()), "dtype": dtype_name(t.dtype),
             "address_mod": t.data_ptr() % 512} for t in tensors]


def _request(name: str, args: tuple, kwargs: dict[str, Any], kernel: int | None) -> tuple[dict[str, Any], list[Any]]:
    """A request naming the student's function (or compiled kernel), its arguments with tensors marked, and
    the tensors."""
    tensors: list[Any] = []
    marked_args, marked_kwargs = _marked(list(args), tensors), _marked({str(k): v for k, v in kwargs.items()}, tensors)
    where = f"the arguments of {name}"
    try:
        request = {"name": name, "args": plain.encode(marked_args, where),
                   "kwargs": plain.encode(marked_kwargs, where)}
    except plain.NotPlainData as exc:
        raise AnswerError(f"{exc} Only tensors and plain values can be passed to your code.") from None
    if kernel is not None:
        request["kernel"] = kernel
    return request, tensors


def _launch_recorded(name: str, args: tuple, kwargs: dict[str, Any], kernel: int | None = None) -> None:
    """A launch by the student's function ``name`` (or compiled kernel): recorded in its kernel, replayed here
    on these tensors."""
    import torch

    from gemmlab.running.gpu import current_arch
    from .dsl_replay import PlanError, Replay

    request, tensors = _request(name, args, kwargs, kernel)
    if any(t.device.type != "cuda" for t in tensors):
        raise AnswerError(f"{name}(...) was given a tensor that is not on the GPU; the judge launches only on its GPU.")
    metas = _metas(tensors)
    request["record"] = {"arch": current_arch(), "tensors": metas, "device_attributes": _device_attributes()}
    key = json.dumps([request["name"], kernel, request["args"], request["kwargs"], metas], sort_keys=True)
    replay = _REPLAYS.get(key)
    if replay is None:
        reply = _reply(name, channel(request))
        if "plan" not in reply:
            raise AnswerError(f"{name}(...): your notebook's kernel sent no recording of the launch.")
        owner = _guard_key(name, kernel)
        for guard in _GUARDS.get(owner, ()):
            guard(reply["plan"], metas)
        _REPLAY_OWNERS[key] = owner
        try:
            replay = Replay(reply["plan"], len(tensors))
        except PlanError as exc:
            raise AnswerError(f"{name}(...): the judge will not run the recorded launch: {exc}") from None
        _REPLAYS[key] = replay
        while len(_REPLAYS) > MAX_REPLAYS or (
                len(_REPLAYS) > 1 and sum(r.scratch_bytes for r in _REPLAYS.values()) > MAX_SCRATCH_HELD):
            oldest = next(iter(_REPLAYS))
            _REPLAYS.pop(oldest)
            _REPLAY_OWNERS.pop(oldest, None)
    replay(tensors, torch.cuda.current_stream())


def _reply(name: str, reply_text: Any, limit: int = MAX_REPLY_CHARS) -> dict[str, Any]:
    """The student's kernel's reply as a dict, or the AnswerError that says what went wrong."""
    if not isinstance(reply_text, str):
        raise AnswerError(f"{name}(...): your notebook's kernel sent no usable answer.")
    try:
        reply = plain.loads(reply_text, "the reply", limit)
    except plain.NotPlainData as exc:
        raise AnswerError(f"{name}(...): your notebook's kernel did not answer usably ({str(exc)[:300]}).") from None
    if not isinstance(reply, dict):
        raise AnswerError(f"{name}(...): your notebook's kernel sent no usable answer.")
    if "error" in reply:
        ename, message = str(reply.get("error"))[:100], str(reply.get("message", ""))[:4000]
        if ename == "NotPlainData":
            raise AnswerError(message + " Return plain values.")
        raise AnswerError(f"{name}(...) raised {ename}: {message}")
    return reply


def _with_kernels(value: Any, depth: int = 0) -> Any:
    """``value`` (decoded plain data) with each compiled kernel's mark replaced by a :class:`CompiledAnswer`."""
    if isinstance(value, dict) and set(value) == {KERNEL_MARK} and isinstance(value[KERNEL_MARK], dict):
        handle = value[KERNEL_MARK].get("handle")
        if isinstance(handle, int) and not isinstance(handle, bool) and handle > 0:
            return CompiledAnswer(handle, str(value[KERNEL_MARK].get("name", "dsl_kernel"))[:100])
    if type(value) in (list, tuple) and depth < 8:
        return type(value)(_with_kernels(v, depth + 1) for v in value)
    if type(value) is dict and depth < 8:
        return {k: _with_kernels(v, depth + 1) for k, v in value.items()}
    return value


def _compiled(name: str, args: tuple, kwargs: dict[str, Any], how: dict[str, Any],
              kernel: int | None = None) -> "CompiledAnswer":
    """Ask the student's kernel to compile ``name`` (or a new variant of a compiled kernel) for these examples."""
    request, tensors = _request(name, args, kwargs, kernel)
    request["compile"] = {**how, "tensors": _metas(tensors), "values": _rebound_values()}
    compiled = _with_kernels(_result(name, _reply(name, channel(request))))
    if not isinstance(compiled, CompiledAnswer) or (kernel is not None and compiled._handle != kernel):
        raise AnswerError(f"gemmlab.dsl.compile({name}, ...): your notebook's kernel sent back "
                          f"{type(compiled).__name__}, not the compiled kernel.")
    return compiled


def _result(name: str, reply: dict[str, Any]) -> Any:
    """The decoded ``result`` of a reply, or the AnswerError that says it had none."""
    if "result" not in reply:
        raise AnswerError(f"{name}(...): your notebook's kernel sent a reply without a result.")
    return plain.decode(reply["result"])


class Answer:
    """A function the student defined, called in the student's kernel with plain data (or recorded, with tensors)."""

    def __init__(self, name: str, done: bool = True) -> None:
        self._name, self.done = name, done

    @property
    def __name__(self) -> str:  # noqa: D401 - mirrors a function's name in messages
        return self._name

    def __repr__(self) -> str:
        return f"<your function {self._name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _holds_tensor(args) or _holds_tensor(tuple(kwargs.values())):
            return _launch(self._name, args, kwargs)
        where = f"the arguments of {self._name}"
        request = {"name": self._name, "args": plain.encode(list(args), where),
                   "kwargs": plain.encode({str(k): v for k, v in kwargs.items()}, where)}
        return _with_kernels(_result(self._name, _reply(self._name, channel(request))))

    def watched(self, libraries: list[str], *args: Any, **kwargs: Any) -> Any:
        """``self(*args, **kwargs)`` run in the student's kernel under
        :func:`gemmlab.checking.library_watch.watched_call`: a :class:`~gemmlab.checking.library_watch.Watched`
        with the result and which of ``libraries``' functions it entered."""
        from gemmlab.checking.library_watch import MAX_REPORTED, Watched

        if _holds_tensor(args) or _holds_tensor(tuple(kwargs.values())):
            raise AnswerError(f"{self._name}(...): a watched call takes plain values, not tensors.")
        where = f"the arguments of {self._name}"
        request = {"name": self._name, "args": plain.encode(list(args), where),
                   "kwargs": plain.encode({str(k): v for k, v in kwargs.items()}, where),
                   "watch": [str(name) for name in libraries]}
        reply = _reply(self._name, channel(request))
        result = _with_kernels(_result(self._name, reply))
        report = reply.get("watch")
        entered = report.get("entered") if isinstance(report, dict) else None
        removed = report.get("hook_removed") if isinstance(report, dict) else None
        if not isinstance(entered, list) or not all(isinstance(e, str) for e in entered) or type(removed) is not bool:
            raise AnswerError(f"{self._name}(...): your notebook's kernel sent no report of the watched call.")
        return Watched(result, tuple(e[:200] for e in entered[:MAX_REPORTED]), removed)

    def each(self, calls: list[tuple]) -> list[Any]:
        """``[self(*args) for args in calls]`` in one round trip (positional plain-data arguments): a check that
        asks about every element of a tile waits for one reply, not one per element."""
        out: list[Any] = []
        for start in range(0, len(calls), MAX_CALLS_AT_ONCE):
            chunk = [list(args) for args in calls[start:start + MAX_CALLS_AT_ONCE]]
            request = {"name": self._name, "each": plain.encode(chunk, f"the arguments of {self._name}"),
                       "args": plain.encode([]), "kwargs": plain.encode({})}
            results = _with_kernels(_result(self._name, _reply(self._name, channel(request))))
            if not isinstance(results, list) or len(results) != len(chunk):
                raise AnswerError(f"{self._name}(...): your notebook's kernel sent {type(results).__name__} where "
                                  f"{len(chunk)} results were asked for.")
            out += results
        return out


#: In the judge: the namespace the answers were last bound into, and each value answer's data as bound.
_BOUND: dict[str, Any] = {"namespace": None, "values": {}}


def _rebound_values() -> dict[str, str]:
    """The student's value answers that the judge's cells have rebound since binding (name -> new data)."""
    namespace, out = _BOUND["namespace"], {}
    for name, data in _BOUND["values"].items():
        if namespace is not None and name in namespace:
            try:
                now = plain.encode(namespace[name], name)
            except plain.NotPlainData:
                continue
            if now != data:
                out[name] = now
    return out


class DslAnswer:
    """A CuTe DSL kernel or JIT function of the student's: only the student's process can build it."""

    def __init__(self, name: str, kind: str, done: bool) -> None:
        self._name, self._kind, self.done = name, kind, done

    @property
    def __name__(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"<your CuTe DSL {self._kind} {self._name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _holds_tensor(args) or _holds_tensor(tuple(kwargs.values())):
            return _launch(self._name, args, kwargs)
        raise StudentProcessOnly(f"{self._name} is a CuTe DSL {self._kind}; it is built in your notebook's process.")

    def compile(self, *example_args: Any, arch: str | None = None, options: str | None = None,
                dtypes: dict[str, Any] | None = None, min_align: int | None = None) -> "CompiledAnswer":
        """``gemmlab.dsl.compile`` in the judge: the student's kernel compiles it for probes of these examples."""
        how = {"arch": arch, "options": options or None, "min_align": min_align,
               "dtypes": {str(k): dtype_name(v) for k, v in (dtypes or {}).items()} or None}
        return _compiled(self._name, example_args, {}, how)


class CompiledAnswer:
    """A CuTe DSL kernel the student's kernel compiled, held there by a handle.

    Calls with tensors are recorded there and replayed by the judge; its module image (a cubin), resources and
    summary are asked for as plain data. Its machine code is read by the judge from that image
    (:meth:`sass`, :mod:`gemmlab.techniques`); its PTX is not asked for: text the student's process writes
    is evidence of nothing.
    """

    def __init__(self, handle: int, name: str) -> None:
        self._handle, self._name, self._facts = handle, name, {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def __name__(self) -> str:  # noqa: D401 - mirrors a function's name in messages
        return self._name

    def __repr__(self) -> str:
        return f"<your compiled CuTe DSL kernel {self._name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _holds_tensor(args) or _holds_tensor(tuple(kwargs.values())):
            return _launch(self._name, args, kwargs, self._handle)
        raise AnswerError(f"{self._name} is a compiled kernel: call it with torch tensors.")

    def _fact(self, fact: str) -> Any:
        if fact not in self._facts:
            request = {"name": self._name, "kernel": self._handle, "get": fact, "args": plain.encode([]),
                       "kwargs": plain.encode({})}
            self._facts[fact] = _result(self._name, _reply(self._name, channel(request)))
        return self._facts[fact]

    def _text(self, fact: str) -> str:
        value = self._fact(fact)
        if not isinstance(value, str):
            raise AnswerError(f"{self._name}: its {fact} came back as {type(value).__name__}, not text.")
        return value

    @property
    def ptx(self) -> str:
        raise AnswerError(f"{self._name}: the grader does not read PTX text from your notebook's process (it would be "
                          "evidence of nothing); it reads the machine code of your kernel's image itself. Test cells "
                          "ask gemmlab.techniques about the kernel instead.")

    def image(self) -> tuple[bytes, str, str]:
        """``(cubin, kernel symbol, arch)`` of the module image the student's kernel compiled, checked to be an ELF
        image of bounded size (the judge disassembles it itself)."""
        import base64
        import binascii

        value = self._fact("image")
        if not (isinstance(value, dict) and isinstance(value.get("cubin"), str) and isinstance(value.get("kernel"), str)
                and isinstance(value.get("arch"), str) and len(value["cubin"]) <= MAX_IMAGE_BYTES * 4 // 3 + 4):
            raise AnswerError(f"{self._name}: its module image came back malformed.")
        try:
            cubin = base64.b64decode(value["cubin"], validate=True)
        except (binascii.Error, ValueError):
            raise AnswerError(f"{self._name}: its module image is not base64.") from None
        if cubin[:4] != b"\x7fELF":
            raise AnswerError(f"{self._name}: its module image is not a cubin (an ELF file).")
        return cubin, value["kernel"][:4096], value["arch"][:32]

    def sass(self) -> str:
        """The SASS of the module image, disassembled in this process (the judge)."""
        from gemmlab.compiling.sass import disassemble

        return disassemble(self.image()[0], self._name)

    def summary(self) -> str:
        return self._text("summary")

    @property
    def kernel_name(self) -> str:
        return self._text("kernel_name")

    @property
    def compiled_arch(self) -> str:
        return self._text("compiled_arch")

    @property
    def signature(self) -> str:
        return self._text("signature")

    @property
    def resources(self) -> Any:
        from gemmlab.compiling.resources import Resources

        value = self._fact("resources")
        if value is None:
            return None
        ints = isinstance(value, dict) and all(
            type(v) is int or (k == "dynamic_smem_bytes" and v is None) for k, v in value.items())
        try:
            if not ints:
                raise TypeError
            return Resources(**value)
        except TypeError:
            raise AnswerError(f"{self._name}: its resources came back malformed (whole numbers expected).") from None

    def compile_for(self, *example_args: Any) -> "CompiledAnswer":
        """One more variant, compiled by the student's kernel for probes of these examples."""
        self._facts.clear()
        _compiled(self._name, example_args, {}, {}, self._handle)
        return self


class Opaque:
    """A name whose value is not plain data: every use fails with what it was."""

    def __init__(self, name: str, why: str) -> None:
        self._name, self._why = name, why

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise AnswerError(self._why)

    __call__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __len__ = __iter__ = _fail
    __getitem__ = __contains__ = __int__ = __float__ = __index__ = __hash__ = _fail

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AnswerError(self._why)

    def __repr__(self) -> str:
        return f"<{self._name}: not plain data>"


def bind(namespace: dict[str, Any], description: str, names: list[str] | None = None) -> list[str]:
    """Bind the names :func:`describe` described into the judge's ``namespace``; the names bound. With ``names``
    (the grader's list of the student's answer names), any other name in the description is ignored: a forged
    description cannot rebind the instructor's names (a helper, a flag such as 07's ``BLACKWELL``)."""
    try:
        described = plain.loads(description, "the description of your answers", MAX_DESCRIPTION_CHARS + 65536,
                                DESCRIPTION_DEPTH)
    except plain.NotPlainData as exc:
        raise AnswerError(f"{exc} Your notebook's kernel did not describe its answers as the grader asked.") from None
    if not isinstance(described, dict):
        raise AnswerError("the description of your answers is malformed.")
    _REPLAYS.clear()
    _REPLAY_OWNERS.clear()
    _GUARDS.clear()
    _BOUND["namespace"], _BOUND["values"] = namespace, {}
    bound = []
    allowed = None if names is None else {n for n in names if isinstance(n, str)}
    for name, info in described.items():
        if not isinstance(name, str) or not name.isidentifier() or not isinstance(info, dict):
            continue
        if allowed is not None and name not in allowed:
            continue
        kind = info.get("kind")
        if kind == "missing":
            namespace.pop(name, None)
            continue
        if kind == "value":
            try:
                namespace[name] = _with_kernels(plain.decode(info.get("data")))
                if not name.startswith("_"):
                    _BOUND["values"][name] = info.get("data")
            except plain.NotPlainData as exc:
                namespace[name] = Opaque(name, f"{name}: {exc}")
        elif kind == "function":
            namespace[name] = Answer(name, info.get("done") is not False)
        elif kind == "dsl":
            namespace[name] = DslAnswer(name, str(info.get("type", "kernel"))[:60], info.get("done") is True)
        else:
            namespace[name] = Opaque(name, str(info.get("why", f"{name} is not plain data"))[:2000])
        bound.append(name)
    return bound


__all__ = ["ANSWER_FD_ENV", "Answer", "AnswerError", "CompiledAnswer", "DESCRIPTION_DEPTH", "DslAnswer", "JUDGE_ENV",
           "KERNEL_FACTS", "KERNEL_MARK", "MAX_DESCRIPTION_CHARS", "MAX_IMAGE_BYTES", "NeedsStudentProcess", "Opaque",
           "SocketChannel", "StudentProcessOnly", "TENSOR_MARK", "bind", "channel", "describe", "guard_launches",
           "in_judge", "launch_key", "record_launches", "recorded_plan", "recording_launches", "serve",
           "serve_in_background"]
