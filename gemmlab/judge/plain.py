"""Plain data across the boundary between a student's notebook and the judge: encode there, decode here.

Why: the test kernel (the grading kernel that runs the instructor's tests; docs/DESIGN.md, "Judge") and
the judge process must never hold an object a student made. Whatever crosses is rebuilt from JSON by
:func:`decode` into the judge's own types: numbers, strings, ``None``, booleans, tuples, lists, sets and
dicts of them, numpy arrays, and gemmlab layouts and swizzles. An always-equal object, a subclass with a
patched ``__eq__`` or a lazy proxy cannot be expressed: :func:`encode` refuses it with a message saying
what was returned instead, and :func:`decode` accepts only the shapes written here, within size and depth
limits.
"""
from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

from gemmlab.dtypes import dtype_name

from .errors import JudgeError

#: Deepest nesting accepted (a nested CuTe shape is a few levels; a JSON bomb is thousands).
MAX_DEPTH = 24
#: Largest encoded value in characters (arrays included).
MAX_CHARS = 64 << 20
#: Deepest JSON nesting read at all from a student's process (:func:`loads`), before any parser recurses into it.
MAX_JSON_DEPTH = 64
#: numpy dtypes an array may have.
ARRAY_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "float32", "float64")


class NotPlainData(JudgeError):
    """A value that is not plain data (``what`` names its type and where it sat)."""


def _type_name(value: Any) -> str:
    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    return kind.__qualname__ if module in ("builtins", "") else f"{module}.{kind.__qualname__}"


def _float(value: float) -> Any:
    if math.isfinite(value):
        return value
    return {"t": "float", "v": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


def _array(value: Any, where: str) -> dict[str, Any]:
    import numpy as np

    arr = np.ascontiguousarray(value)
    if arr.dtype.name not in ARRAY_DTYPES:
        raise NotPlainData(f"{where} is an array of dtype {arr.dtype}, which is not plain data; use one of "
                           f"{', '.join(ARRAY_DTYPES)}.")
    return {"t": "array", "dtype": arr.dtype.name, "shape": list(arr.shape),
            "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def _tensor(value: Any, where: str) -> dict[str, Any]:
    """A torch tensor as an array (bfloat16, which numpy lacks, travels as its bits)."""
    import torch

    data = value.detach().to("cpu").contiguous()
    name = dtype_name(data.dtype)
    if name == "bfloat16":
        node = _array(data.view(torch.int16).numpy(), where)
    else:
        node = _array(data.numpy(), where)
    return {**node, "t": "tensor", "torch_dtype": name}


def _encode(value: Any, where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise NotPlainData(f"{where} is nested more than {MAX_DEPTH} levels deep.")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if abs(value) < 2**53 else {"t": "int", "v": str(value)}
    if kind is float:
        return _float(value)
    if kind is tuple:
        return {"t": "tuple", "v": [_encode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]}
    if kind is list:
        return [_encode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if kind in (set, frozenset):
        return {"t": kind.__name__, "v": [_encode(v, f"an element of {where}", depth + 1) for v in value]}
    if kind is dict:
        return {"t": "dict", "v": [[_encode(k, f"a key of {where}", depth + 1), _encode(v, f"{where}[{k!r}]", depth + 1)]
                                   for k, v in value.items()]}
    module = getattr(kind, "__module__", "") or ""
    if module == "numpy" and kind.__name__ in ("ndarray",):
        return _array(value, where)
    if module == "numpy" and hasattr(value, "item") and getattr(value, "shape", None) == ():
        return _encode(value.item(), where, depth)          # numpy scalars: int64(3) -> 3
    if module == "torch" and kind.__name__ in ("Tensor", "Parameter"):
        return _tensor(value, where)
    if module.startswith("gemmlab.layout") or module.startswith("pycute"):
        return _layout(value, where, depth)
    raise NotPlainData(f"{where} is a {_type_name(value)}, not plain data (numbers, strings, None, bools, "
                       "tuples, lists, sets, dicts, arrays, layouts).")


def _layout(value: Any, where: str, depth: int) -> dict[str, Any]:
    from .. import layout as L

    if isinstance(value, L.ComposedLayout):
        return {"t": "composed", "outer": _layout(value.outer, f"{where}.outer", depth + 1),
                "offset": _encode(value.offset, f"{where}.offset", depth + 1),
                "inner": _layout(value.inner, f"{where}.inner", depth + 1)}
    if isinstance(value, L.Swizzle):
        return {"t": "swizzle", "bms": [int(value.bits), int(value.base), int(value.shift)]}
    if isinstance(value, L.Layout):
        return {"t": "layout", "shape": _encode(value.shape, f"{where}.shape", depth + 1),
                "stride": _encode(value.stride, f"{where}.stride", depth + 1)}
    raise NotPlainData(f"{where} is a {_type_name(value)}, not plain data.")


def encode(value: Any, where: str = "the value") -> str:
    """``value`` as a JSON string of plain data, or :class:`NotPlainData` saying what it is instead."""
    text = json.dumps(_encode(value, where, 0), separators=(",", ":"), allow_nan=False)
    if len(text) > MAX_CHARS:
        raise NotPlainData(f"{where} takes {len(text):,} characters as data; at most {MAX_CHARS:,} cross.")
    return text


def _decode_array(node: dict[str, Any]) -> Any:
    import numpy as np

    dtype, shape, b64 = node.get("dtype"), node.get("shape"), node.get("b64")
    if dtype not in ARRAY_DTYPES or not isinstance(shape, list) or not isinstance(b64, str) \
            or not all(type(n) is int and 0 <= n for n in shape) or len(shape) > 8:
        raise NotPlainData("an array must have a known dtype, a shape of at most 8 sizes and base64 data.")
    raw = base64.b64decode(b64.encode("ascii"), validate=True)
    count = math.prod(shape)
    if count * np.dtype(dtype).itemsize != len(raw):
        raise NotPlainData(f"an array of shape {shape} and dtype {dtype} needs {count * np.dtype(dtype).itemsize} "
                           f"bytes, not {len(raw)}.")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _decode_tensor(node: dict[str, Any]) -> Any:
    import torch

    arr = _decode_array(node)
    name = node.get("torch_dtype")
    if name == "bfloat16" and arr.dtype.name == "int16":
        return torch.from_numpy(arr).view(torch.bfloat16)
    if name != arr.dtype.name and not (name == "bool" and arr.dtype.name == "bool"):
        raise NotPlainData(f"a tensor of dtype {str(name)[:20]} cannot hold {arr.dtype} data.")
    return torch.from_numpy(arr)


def _integer_tree(value: Any) -> bool:
    if type(value) is int:
        return True
    return type(value) is tuple and all(_integer_tree(v) for v in value)


def _decode(node: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise NotPlainData(f"the data is nested more than {MAX_DEPTH} levels deep.")
    kind = type(node)
    if node is None or kind in (bool, int, float, str):
        return node
    if kind is list:
        return [_decode(v, depth + 1) for v in node]
    if kind is not dict:
        raise NotPlainData(f"unexpected JSON value of type {kind.__name__}.")
    tag = node.get("t")
    if tag == "tuple" and isinstance(node.get("v"), list):
        return tuple(_decode(v, depth + 1) for v in node["v"])
    if tag in ("set", "frozenset") and isinstance(node.get("v"), list):
        items = [_decode(v, depth + 1) for v in node["v"]]
        try:
            return set(items) if tag == "set" else frozenset(items)
        except TypeError:
            raise NotPlainData("the elements of a set must be hashable.") from None
    if tag == "dict" and isinstance(node.get("v"), list):
        out = {}
        for pair in node["v"]:
            if not isinstance(pair, list) or len(pair) != 2:
                raise NotPlainData("a dict is a list of [key, value] pairs.")
            key = _decode(pair[0], depth + 1)
            try:
                hash(key)
            except TypeError:
                raise NotPlainData(f"a dict key must be hashable, not {type(key).__name__}.") from None
            out[key] = _decode(pair[1], depth + 1)
        return out
    if tag == "int" and isinstance(node.get("v"), str) and len(node["v"]) <= 4000:
        return int(node["v"])
    if tag == "float" and node.get("v") in ("nan", "inf", "-inf"):
        return float(node["v"])
    if tag == "array":
        return _decode_array(node)
    if tag == "tensor":
        return _decode_tensor(node)
    if tag == "layout":
        from .. import layout as L

        shape, stride = _decode(node.get("shape"), depth + 1), _decode(node.get("stride"), depth + 1)
        if not _integer_tree(shape) or not _integer_tree(stride):
            raise NotPlainData("a layout's shape and stride are integers or nested tuples of integers.")
        return L.Layout(_decode(node.get("shape"), depth + 1), _decode(node.get("stride"), depth + 1))
    if tag == "swizzle":
        from .. import layout as L

        bms = node.get("bms")
        if not isinstance(bms, list) or len(bms) != 3 or not all(type(v) is int and 0 <= v < 64 for v in bms):
            raise NotPlainData("a swizzle is three small integers B, M, S.")
        return L.Swizzle(*bms)
    if tag == "composed":
        from .. import layout as L

        outer, offset, inner = (_decode(node.get(k), depth + 1) for k in ("outer", "offset", "inner"))
        if not isinstance(outer, (L.Swizzle, L.Layout)) or type(offset) is not int or not isinstance(inner, L.Layout):
            raise NotPlainData("a composed layout is a swizzle or layout, an integer offset and a layout.")
        return L.ComposedLayout(outer, offset, inner)
    raise NotPlainData(f"unknown plain-data tag {str(tag)[:40]!r}.")


_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"')
_BRACKET = re.compile(r"[\[\]{}]")


def json_depth(text: str, stop: int | None = None) -> int:
    """How deeply the JSON ``text`` nests arrays and objects (counted without parsing it; ``stop``: give up and
    return as soon as it is deeper)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if stop is not None and deepest > stop:
                break
        else:
            depth -= 1
    return deepest


def loads(text: Any, what: str, max_chars: int = MAX_CHARS, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON that a student's process sent (``what`` names it in messages), read only when it takes at most
    ``max_chars`` characters and nests at most ``max_depth`` levels; :class:`NotPlainData` naming the limit
    otherwise. Why: a description nested 200,000 deep failed a whole notebook with a RecursionError, and one of
    200 MB took the grader to 2 GB."""
    if not isinstance(text, str):
        raise NotPlainData(f"{what} is not text.")
    if len(text) > max_chars:
        raise NotPlainData(f"{what} takes {len(text):,} characters; at most {max_chars:,} are read.")
    if json_depth(text, stop=max_depth) > max_depth:
        raise NotPlainData(f"{what} is nested more than {max_depth} levels deep; at most {max_depth} are read.")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise NotPlainData(f"{what} is not JSON ({str(exc)[:200]}).") from None


def decode(text: str) -> Any:
    """The value :func:`encode` wrote, built from the judge's own types; :class:`NotPlainData` otherwise."""
    return _decode(loads(text, "the answer", MAX_CHARS, MAX_DEPTH * 3 + 8), 0)   # a plain level is up to 3 JSON levels


__all__ = ["ARRAY_DTYPES", "MAX_CHARS", "MAX_DEPTH", "MAX_JSON_DEPTH", "NotPlainData", "decode", "encode", "json_depth",
           "loads"]
