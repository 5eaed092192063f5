"""The judge's side of the answer protocol: stand-ins for the student's answers, in the kernel that runs the tests.

Each name an answer cell defines is bound here by :func:`bind` from the description the student's kernel gave
(:func:`gemmlab.answers.serving.describe`): plain data is rebuilt; a function becomes an :class:`Answer`, whose
calls cross to the student's kernel as plain data and come back as plain data (or the exception's type and
message); a call with tensors (a launch) is recorded there on probes and replayed here on the judge's own
tensors (:mod:`gemmlab.judge.dsl_replay`), so the verdict on what the kernel computed is the judge's; a CuTe DSL
function becomes a :class:`DslAnswer`, a compiled kernel a :class:`CompiledAnswer` (a handle the student's kernel
keeps; its module image is read here); anything else an :class:`Opaque` that fails every use with what it was.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable

from gemmlab.dtypes import dtype_name
from gemmlab.judge import plain
from .wire import (ANSWER_FD_ENV, DESCRIPTION_DEPTH, KEEP, KERNEL_MARK, MAX_CALLS_AT_ONCE, MAX_DESCRIPTION_CHARS,
                   MAX_IMAGE_BYTES, MAX_REPLY_CHARS, TENSOR_MARK, AnswerError, NeedsStudentProcess, StudentProcessOnly,
                   rebuilt)

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
def _is_torch(value: Any) -> bool:
    return (getattr(type(value), "__module__", "") or "").split(".")[0] == "torch"


def _holds_tensor(values: tuple) -> bool:
    """Whether anything torch's (a tensor, a dtype, a device) is among ``values``, however nested: such a call
    is a launch, recorded and replayed, never a call with plain data."""
    found: list[Any] = []
    rebuilt(values, lambda part: found.append(part) if _is_torch(part) else KEEP)
    return bool(found)


def _marked(value: Any, tensors: list[Any]) -> Any:
    """``value`` with each torch tensor replaced by a mark (its index in ``tensors``, where it is appended)."""
    def mark(part: Any) -> Any:
        if _is_torch(part) and hasattr(part, "data_ptr"):
            tensors.append(part)
            return {TENSOR_MARK: len(tensors) - 1}
        return KEEP

    return rebuilt(value, mark)


#: Replays of recorded calls, by what the recording depended on (bounded in number and in the scratch memory they
#: hold; oldest dropped first). Emptied whenever the student's answers are bound again: a redefined function
#: is recorded afresh.
REPLAYS: dict[str, Any] = {}
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
        REPLAYS.pop(replay_key, None)
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
        from gemmlab.dsl.host_recording import H100_ATTRIBUTES

        attributes, arch = {str(k): v for k, v in H100_ATTRIBUTES.items()}, arch or "sm_90a"
    request["record"] = {"arch": arch, "tensors": _metas(tensors), "device_attributes": attributes}
    reply = read_reply(name, channel(request))
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
    from gemmlab.judge.dsl_replay import PlanError, Replay

    request, tensors = _request(name, args, kwargs, kernel)
    if any(t.device.type != "cuda" for t in tensors):
        raise AnswerError(f"{name}(...) was given a tensor that is not on the GPU; the judge launches only on its GPU.")
    metas = _metas(tensors)
    request["record"] = {"arch": current_arch(), "tensors": metas, "device_attributes": _device_attributes()}
    key = json.dumps([request["name"], kernel, request["args"], request["kwargs"], metas], sort_keys=True)
    replay = REPLAYS.get(key)
    if replay is None:
        reply = read_reply(name, channel(request))
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
        REPLAYS[key] = replay
        while len(REPLAYS) > MAX_REPLAYS or (
                len(REPLAYS) > 1 and sum(r.scratch_bytes for r in REPLAYS.values()) > MAX_SCRATCH_HELD):
            oldest = next(iter(REPLAYS))
            REPLAYS.pop(oldest)
            _REPLAY_OWNERS.pop(oldest, None)
    replay(tensors, torch.cuda.current_stream())


def read_reply(name: str, reply_text: Any, limit: int = MAX_REPLY_CHARS) -> dict[str, Any]:
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


def _with_kernels(value: Any) -> Any:
    """``value`` (decoded plain data) with each compiled kernel's mark replaced by a :class:`CompiledAnswer`."""
    def kernel_of(part: Any) -> Any:
        if type(part) is dict and set(part) == {KERNEL_MARK} and type(part[KERNEL_MARK]) is dict:
            handle = part[KERNEL_MARK].get("handle")
            if type(handle) is int and handle > 0:
                return CompiledAnswer(handle, str(part[KERNEL_MARK].get("name", "dsl_kernel"))[:100])
        return KEEP

    return rebuilt(value, kernel_of)


def _compiled(name: str, args: tuple, kwargs: dict[str, Any], how: dict[str, Any],
              kernel: int | None = None) -> "CompiledAnswer":
    """Ask the student's kernel to compile ``name`` (or a new variant of a compiled kernel) for these examples."""
    request, tensors = _request(name, args, kwargs, kernel)
    request["compile"] = {**how, "tensors": _metas(tensors), "values": _rebound_values()}
    compiled = _with_kernels(_result(name, read_reply(name, channel(request))))
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
        return _with_kernels(_result(self._name, read_reply(self._name, channel(request))))

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
        reply = read_reply(self._name, channel(request))
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
            results = _with_kernels(_result(self._name, read_reply(self._name, channel(request))))
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
            self._facts[fact] = _result(self._name, read_reply(self._name, channel(request)))
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
    """Bind the names :func:`gemmlab.answers.serving.describe` described into the judge's ``namespace``; the names
    bound. With ``names`` (the grader's list of the student's answer names), any other name in the description is
    ignored: a forged description cannot rebind the instructor's names (a helper, a flag such as 07's
    ``BLACKWELL``)."""
    try:
        described = plain.loads(description, "the description of your answers", MAX_DESCRIPTION_CHARS + 65536,
                                DESCRIPTION_DEPTH)
    except plain.NotPlainData as exc:
        raise AnswerError(f"{exc} Your notebook's kernel did not describe its answers as the grader asked.") from None
    if not isinstance(described, dict):
        raise AnswerError("the description of your answers is malformed.")
    REPLAYS.clear()
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



__all__ = ["Answer", "CompiledAnswer", "DslAnswer", "Opaque", "REPLAYS", "SocketChannel", "bind", "channel",
           "guard_launches", "launch_key", "read_reply", "record_launches", "recorded_plan", "recording_launches"]
