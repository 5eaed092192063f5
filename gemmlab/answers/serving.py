"""The student's side of the answer protocol: describe the answers, and run the judge's calls in the student's kernel.

Runs in the student's own kernel while a notebook is graded. :func:`describe` tells the judge how to bind each
answer name (plain data, a function, a CuTe DSL function, a compiled kernel by handle, or something that does
not cross); :func:`serve_in_background` answers the judge's calls on the socket the grader's relay gave this
kernel, each by :func:`serve`: a plain call, a call watched for a library's code, a call *recorded* on probes of
the judge's tensors (its DSL launches written down as a plan the judge replays), a compile, or a fact of a
compiled kernel. The judge's side is :mod:`.stand_ins`; what crosses is :mod:`.wire`.
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from typing import Any, Iterator

from gemmlab.judge import plain
from .placeholders import function_done
from .wire import (ANSWER_FD_ENV, KEEP, KERNEL_FACTS, KERNEL_MARK, MAX_CALLS_AT_ONCE, MAX_DESCRIPTION_CHARS,
                   TENSOR_MARK, lines, rebuilt)

def _is_dsl(value: Any) -> bool:
    """A CuTe DSL ``@cute.kernel``/``@cute.jit`` function (a wrapper the DSL made) or a DSL object."""
    module = getattr(type(value), "__module__", "") or ""
    made_by = getattr(getattr(value, "__globals__", None), "get", lambda _: "")("__name__") or ""
    return module.split(".")[0] == "cutlass" or str(made_by).split(".")[0] == "cutlass"


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


def _with_handles(value: Any) -> Any:
    """``value`` with each compiled DSL kernel replaced by its handle's mark."""
    return rebuilt(value, lambda part: {KERNEL_MARK: {"handle": _handle(part), "name": str(part.name)}}
                   if _is_compiled(part) else KEEP)


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
            kind = str(getattr(value, "_decorator_kind", "") or type(value).__qualname__)
            out[name] = {"kind": "dsl", "type": kind, "done": bool(function_done(value))}
            continue
        try:                                  # plain data first: a layout is callable, yet a value
            out[name] = {"kind": "value", "data": plain.encode(value, name)}
        except plain.NotPlainData as exc:
            if callable(value) and not isinstance(value, type):
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


def _with(value: Any, probes: list[Any]) -> Any:
    """``value`` with every tensor mark replaced by its probe."""
    def probe_of(part: Any) -> Any:
        if type(part) is dict and set(part) == {TENSOR_MARK} and type(part[TENSOR_MARK]) is int:
            return probes[part[TENSOR_MARK]]
        return KEEP

    return rebuilt(value, probe_of)


def _probes(metas: list[dict[str, Any]]) -> list[Any]:
    """CPU stand-ins of the judge's tensors (:func:`gemmlab.dsl.recording.probe`)."""
    import torch

    from gemmlab.dsl.recording import probe

    return [probe(t["shape"], t["stride"], getattr(torch, t["dtype"]), int(t["address_mod"])) for t in metas]


def _record_call(fn: Any, args: Any, kwargs: Any, how: dict[str, Any]) -> dict[str, Any]:
    """Call ``fn`` on probes of the judge's tensors and return what it launched (a plan), or the error."""
    try:
        from gemmlab.dsl import gemm_fn
        from gemmlab.dsl.recording import recording

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
    from gemmlab.dsl import compile as dsl_compile

    probes = _probes(how["tensors"])
    examples = _with(args, probes)
    if _is_compiled(fn):
        return fn.compile_for(*examples)
    if kwargs:
        raise TypeError("gemmlab.dsl.compile takes its example arguments by position")
    return dsl_compile(fn, *examples, arch=how.get("arch"), options=how.get("options"), dtypes=how.get("dtypes"),
                       min_align=how.get("min_align"))


def serve_in_background(namespace: dict[str, Any]) -> bool:
    """In the student's kernel while grading: answer the judge's calls in a daemon thread; False if not grading."""
    import socket
    import threading

    fd = os.environ.get(ANSWER_FD_ENV, "")
    if not fd.isdigit():
        return False
    sock = socket.socket(fileno=int(fd))

    def loop() -> None:
        for line in lines(sock):
            try:
                reply = serve(namespace, line)
            except BaseException as exc:  # noqa: BLE001 - one bad call never ends the answering thread
                reply = json.dumps({"error": type(exc).__name__, "message": str(exc)[:2000]})
            sock.sendall(reply.encode() + b"\n")

    threading.Thread(target=loop, name="gemmlab-answers", daemon=True).start()
    return True



__all__ = ["describe", "serve", "serve_in_background"]
