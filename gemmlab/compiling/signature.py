"""A kernel's parameter list, read from its source declaration and checked against the PTX.

The launcher needs to know, for every argument, whether it is a pointer (and to which
element type, so a float32 tensor passed to ``const half*`` is caught before it runs),
a scalar (how many bytes to pack) or an opaque struct (a CUtensorMap, a template
parameter object). The source says what the student meant; the PTX ``.entry`` says
what the ABI really is, so both are read and the PTX wins on sizes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

Kind = Literal["pointer", "scalar", "struct"]


@dataclass(frozen=True)
class Param:
    """One kernel parameter as the launcher needs it."""

    name: str
    kind: Kind
    ctype: str
    const: bool
    dtype: str | None  # torch dtype name of the pointee (pointers) or of the value (scalars)
    nbytes: int


@dataclass(frozen=True)
class KernelDecl:
    """Where a ``__global__`` function is declared and what it looks like."""

    name: str
    line: int  # 1-based line of the name in the source
    params: tuple[Param, ...]
    is_template: bool
    extern_c: bool


# Element types of pointers (after dropping cv-qualifiers and namespaces) -> torch dtype names.
_POINTEE_DTYPES: dict[str, str | None] = {
    "half": "float16", "__half": "float16", "half_t": "float16",
    "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "bfloat16_t": "bfloat16",
    "float": "float32", "tfloat32_t": "float32", "double": "float64",
    "int": "int32", "int32_t": "int32", "signed": "int32", "signed int": "int32",
    "unsigned": "int32", "unsigned int": "int32", "uint32_t": "int32",
    "int64_t": "int64", "long long": "int64", "long long int": "int64", "long": "int64",
    "unsigned long long": "int64", "uint64_t": "int64", "size_t": "int64",
    "int8_t": "int8", "char": "int8", "signed char": "int8",
    "uint8_t": "uint8", "unsigned char": "uint8",
    "int16_t": "int16", "short": "int16", "uint16_t": "int16", "unsigned short": "int16",
    "bool": "bool",
    "float_e4m3_t": "float8_e4m3fn", "__nv_fp8_e4m3": "float8_e4m3fn",
    "float_e5m2_t": "float8_e5m2", "__nv_fp8_e5m2": "float8_e5m2",
    "void": None,
}

# Scalars passed by value: (torch dtype name, bytes).
_SCALARS: dict[str, tuple[str, int]] = {
    "bool": ("bool", 1), "char": ("int8", 1), "signed char": ("int8", 1), "int8_t": ("int8", 1),
    "unsigned char": ("uint8", 1), "uint8_t": ("uint8", 1),
    "short": ("int16", 2), "int16_t": ("int16", 2), "unsigned short": ("int16", 2), "uint16_t": ("int16", 2),
    "int": ("int32", 4), "signed": ("int32", 4), "signed int": ("int32", 4), "int32_t": ("int32", 4),
    "unsigned": ("uint32", 4), "unsigned int": ("uint32", 4), "uint32_t": ("uint32", 4),
    "long": ("int64", 8), "long long": ("int64", 8), "long long int": ("int64", 8), "int64_t": ("int64", 8),
    "unsigned long": ("uint64", 8), "unsigned long long": ("uint64", 8), "uint64_t": ("uint64", 8),
    "size_t": ("uint64", 8), "ptrdiff_t": ("int64", 8),
    "float": ("float32", 4), "double": ("float64", 8),
    "half": ("float16", 2), "__half": ("float16", 2), "half_t": ("float16", 2),
    "__nv_bfloat16": ("bfloat16", 2), "nv_bfloat16": ("bfloat16", 2), "bfloat16_t": ("bfloat16", 2),
}

_NAMESPACES = re.compile(r"\b(?:std|cute|cutlass|cuda)\s*::\s*")
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict|__grid_constant__|struct|class)\b")
_ATTRIBUTE_CALLS = {"__launch_bounds__", "__attribute__", "__declspec", "alignas", "__cluster_dims__",
                    "__maxnreg__", "decltype", "__align__"}
_IDENT = re.compile(r"[A-Za-z_]\w*")


def strip_comments_and_strings(source: str) -> str:
    """Blank out comments, string/char literals and preprocessor lines, keeping offsets and newlines.

    ``extern "C"`` keeps its meaning: the literal becomes ``"C"`` so it can still be seen.
    """
    out = list(source)
    i, n = 0, len(source)
    at_line_start = True
    while i < n:
        c = source[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if at_line_start and c == "#":
            j = i
            while j < n and source[j] != "\n":  # a directive runs to the end of line, with continuations
                if source[j] == "\\" and j + 1 < n and source[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        if not c.isspace():
            at_line_start = False
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            end = min(j + 1, n)
            body = source[i:end]
            if body != '"C"':
                for k in range(i + 1, end - 1):
                    out[k] = " "
            i = end
        else:
            i += 1
    return "".join(out)


def _match_close(text: str, start: int, open_: str, close: str) -> int:
    """Index just past the bracket that closes text[start] (which is ``open_``)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def split_top_level(text: str) -> list[str]:
    """Split at commas outside (), [], {} and <> (template arguments)."""
    parts, depth, current = [], 0, []
    for c in text:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    tail = "".join(current)
    if tail.strip() or parts:
        parts.append(tail)
    return parts


def _normalize(type_text: str) -> str:
    text = _NAMESPACES.sub("", type_text)
    text = _QUALIFIERS.sub(" ", text)
    text = re.sub(r"\[\[.*?\]\]", " ", text)
    return " ".join(text.split())


def _parse_param(text: str, index: int, template_names: set[str]) -> Param:
    text = re.sub(r"\[\[.*?\]\]", " ", text)
    text = re.sub(r"\b(?:__restrict__|__restrict|__grid_constant__)\b", " ", text)
    text = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text)
    # Drop a default value.
    depth = 0
    for i, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "=" and depth == 0:
            text = text[:i]
            break
    text = " ".join(text.split())
    is_array = False
    if text.endswith("]"):  # float x[] / float x[16] decays to a pointer
        text = text[: text.rfind("[")].rstrip()
        is_array = True
    name = f"arg{index}"
    match = re.search(r"([A-Za-z_]\w*)$", text)
    if match:
        before = text[: match.start()].strip()
        # Unnamed when only qualifiers precede it, or the whole text is a multi-word builtin ("unsigned int").
        whole = _normalize(text)
        if before.endswith(("*", "&")) or (_normalize(before) and whole not in _SCALARS and whole not in _POINTEE_DTYPES):
            name = match.group(1)
            text = before
    ctype = " ".join(text.replace("*", " * ").split()).replace(" *", "*")
    if is_array:
        ctype += "*"
    if "*" in ctype:
        pointee_text = ctype[: ctype.rfind("*")]
        const = bool(re.search(r"\bconst\b", pointee_text.split("*")[-1] if "*" in pointee_text else pointee_text))
        pointee = _normalize(pointee_text)
        if "*" in pointee or pointee in template_names:
            dtype = None
        else:
            dtype = _POINTEE_DTYPES.get(pointee)
        return Param(name, "pointer", ctype, const, dtype, 8)
    const = bool(re.search(r"\bconst\b", ctype))
    base = _normalize(ctype)
    if base in _SCALARS and base not in template_names:
        dtype, nbytes = _SCALARS[base]
        return Param(name, "scalar", ctype, const, dtype, nbytes)
    return Param(name, "struct", ctype, const, None, 0)  # size comes from the PTX


def _template_names(clean: str, decl_start: int) -> tuple[bool, set[str]]:
    """Is the declaration starting at decl_start a template, and what are its type parameter names?"""
    prefix = clean[:decl_start]
    cut = max(prefix.rfind(";"), prefix.rfind("}"))
    head = prefix[cut + 1:]
    match = re.search(r"\btemplate\s*<", head)
    if not match:
        return False, set()
    start = match.end() - 1
    end = _match_close(head, start, "<", ">")
    names = set()
    for part in split_top_level(head[start + 1: end - 1]):
        words = _IDENT.findall(part.split("=")[0])
        if words:
            names.add(words[-1])
    return True, names


def find_kernels(source: str) -> list[KernelDecl]:
    """Every ``__global__`` function declared in the source, in order."""
    clean = strip_comments_and_strings(source)
    found: list[KernelDecl] = []
    for match in re.finditer(r"\b__global__\b", clean):
        i = match.end()
        name, name_pos = None, -1
        while i < len(clean):
            ident = _IDENT.match(clean, i)
            if ident:
                word = ident.group(0)
                j = ident.end()
                while j < len(clean) and clean[j].isspace():
                    j += 1
                if j < len(clean) and clean[j] == "(":
                    if word in _ATTRIBUTE_CALLS:
                        i = _match_close(clean, j, "(", ")")
                        continue
                    name, name_pos, i = word, ident.start(), j
                    break
                i = j
                continue
            if clean.startswith("[[", i):
                i = clean.find("]]", i) + 2 if clean.find("]]", i) >= 0 else len(clean)
                continue
            if clean[i] in ";{}":
                break
            i += 1
        if name is None:
            continue
        close = _match_close(clean, i, "(", ")")
        params_text = clean[i + 1: close - 1]
        # Statement start: after the previous ; or } (or the start).
        stmt_start = max(clean.rfind(";", 0, match.start()), clean.rfind("}", 0, match.start())) + 1
        is_template, tnames = _template_names(clean, match.start())
        extern_c = bool(re.search(r'\bextern\s+"C"', clean[stmt_start:match.start()]))
        if not extern_c:  # extern "C" { ... } block around it
            block = clean.rfind('extern "C"', 0, match.start())
            if block >= 0:
                brace = clean.find("{", block)
                if 0 <= brace < match.start() and clean[block + len('extern "C"'):brace].strip() == "":
                    extern_c = _match_close(clean, brace, "{", "}") > match.start()
        pieces = [p for p in split_top_level(params_text) if p.strip()]
        if len(pieces) == 1 and _normalize(pieces[0]) == "void":
            pieces = []
        params = tuple(_parse_param(p, k, tnames) for k, p in enumerate(pieces))
        line = clean.count("\n", 0, name_pos) + 1
        found.append(KernelDecl(name, line, params, is_template, extern_c))
    return found


def base_name(name_expression: str) -> str:
    """``gemm<128, 64>`` -> ``gemm``; ``ns::k`` -> ``k``."""
    head = name_expression.split("<", 1)[0].strip().lstrip("&").strip()
    return head.split("::")[-1].strip()


def find_kernel(source: str, name: str) -> KernelDecl | None:
    """The declaration of the kernel named by ``name`` (a name expression), or None.

    A definition (with a body) is preferred over a forward declaration.
    """
    wanted = base_name(name)
    matches = [k for k in find_kernels(source) if k.name == wanted]
    return matches[-1] if matches else None


# ---------------------------------------------------------------- PTX side

_PTX_SIZES = {"8": 1, "16": 2, "32": 4, "64": 8}


def ptx_param_sizes(ptx: str, lowered_name: str) -> list[int] | None:
    """Byte sizes of the ``.entry`` parameters, in order; None when the entry is absent."""
    match = re.search(rf"\.entry\s+{re.escape(lowered_name)}\s*\(", ptx)
    if not match:
        return None
    close = ptx.find(")", match.end())
    body = ptx[match.end(): close]
    sizes = []
    for decl in body.split(","):
        decl = decl.strip()
        if not decl:
            continue
        array = re.search(r"\[(\d+)\]\s*$", decl)
        if array:
            sizes.append(int(array.group(1)))
            continue
        scalar = re.search(r"\.[busf](8|16|32|64)\b", decl)
        sizes.append(_PTX_SIZES[scalar.group(1)] if scalar else 0)
    return sizes


def reconcile(params: tuple[Param, ...] | list[Param], sizes: list[int] | None) -> list[Param]:
    """Fill struct sizes from the PTX and let the PTX win wherever the two disagree.

    If the source parse and the PTX disagree on the number of parameters (a macro-made
    declaration, say), the PTX alone decides: 8-byte values are taken as pointers of any
    dtype, everything else as raw bytes.
    """
    params = list(params)
    if sizes is None:
        return params
    if len(sizes) != len(params):
        return [
            Param(f"param_{i}", "pointer", "void*", False, None, 8) if size == 8
            else Param(f"param_{i}", "struct", f"bytes[{size}]", False, None, size)
            for i, size in enumerate(sizes)
        ]
    out = []
    for param, size in zip(params, sizes):
        if param.nbytes != size:
            kind = param.kind if param.kind != "scalar" else "struct"
            param = replace(param, nbytes=size, kind=kind, dtype=param.dtype if kind != "struct" else None)
        out.append(param)
    return out


def describe(params: list[Param] | tuple[Param, ...], name: str) -> str:
    """``gemm(const half* A, const half* B, half* D, int M, int N, int K)`` for messages."""
    return f"{name}({', '.join(f'{p.ctype} {p.name}' for p in params)})"
