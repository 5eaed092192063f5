"""The ``%%kernel NAME`` cell magic: a notebook cell of CUDA C++ becomes a callable kernel.

Usage::

    %%kernel gemm --arch sm_90a --option -DBM=128 --include ./headers
    __global__ void gemm(const half* A, const half* B, half* D, int M, int N, int K) { ... }

binds ``gemm`` (a :class:`gemmlab.running.kernel.Kernel`) in the notebook and prints one line of
resources. If the cell does not compile, the diagnostics are shown (line numbers as the
notebook shows them, counting the ``%%kernel`` line) and any earlier ``gemm`` is kept,
so a typo never destroys a kernel that worked.
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from gemmlab.errors import CompileError

USAGE = ("%%kernel NAME [--arch sm_90a] [--option -DX=1 ...] [--include DIR ...] "
         "[--kernel 'name<args>'] [--no-cache]")


@dataclass
class MagicArgs:
    """What the ``%%kernel`` line asked for."""

    name: str
    arch: str | None = None
    options: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    kernel: str | None = None  # the C++ name expression when it differs from NAME (templates)
    cache: bool = True


def parse_line(line: str) -> MagicArgs:
    """Parse the magic's line. ``--option`` takes the next word verbatim, even if it starts with '-'."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise CompileError(f"Could not read the %%kernel line ({exc}). Usage: {USAGE}") from None
    if not words or words[0].startswith("-"):
        raise CompileError(f"%%kernel needs the kernel's name first. Usage: {USAGE}")
    args = MagicArgs(name=words[0])
    i = 1
    while i < len(words):
        word = words[i]
        key, eq, inline = word.partition("=")
        takes_value = key in ("--arch", "--option", "-X", "--include", "-I", "--kernel")
        if takes_value:
            if eq:
                value = inline
            elif i + 1 < len(words):
                i += 1
                value = words[i]
            else:
                raise CompileError(f"{key} needs a value. Usage: {USAGE}")
            if key == "--arch":
                args.arch = value
            elif key in ("--option", "-X"):
                args.options.append(value)
            elif key in ("--include", "-I"):
                args.include_dirs.append(value)
            else:
                args.kernel = value
        elif word == "--no-cache":
            args.cache = False
        else:
            raise CompileError(f"Unknown %%kernel argument {word!r}. Usage: {USAGE}")
        i += 1
    if not re.fullmatch(r"[A-Za-z_]\w*", args.name):
        raise CompileError(f"{args.name!r} cannot name a Python variable; use a plain identifier. Usage: {USAGE}")
    return args


def kernel_magic(line: str, cell: str, user_ns: dict[str, Any]) -> str:
    """Compile ``cell``, bind the kernel in ``user_ns``; return the summary line. Raises CompileError."""
    from gemmlab.compiling.compiler import compile_to
    from gemmlab.running.kernel import Kernel

    args = parse_line(line)
    arch = args.arch or os.environ.get("GEMMLAB_ARCH") or None
    # One blank line stands for the %%kernel line, so error line numbers match the notebook's.
    source = "\n" + cell
    compiled = compile_to(
        source,
        args.kernel or args.name,
        arch=arch,
        options=args.options,
        include_dirs=args.include_dirs,
        use_cache=args.cache,
        filename=f"{args.name}.cu",
    )
    user_ns[args.name] = Kernel(compiled)  # only after success: a failed cell keeps the old binding
    summary = compiled.summary()
    if compiled.log:
        summary += "\n" + compiled.log
    return summary


def register(ipython: Any) -> None:
    """Register ``%%kernel`` and the short error display in this IPython shell."""
    from gemmlab.notebook.ipython import install

    def kernel(line: str, cell: str) -> None:
        print(kernel_magic(line, cell, ipython.user_ns))

    kernel.__doc__ = __doc__
    ipython.register_magic_function(kernel, magic_kind="cell", magic_name="kernel")
    install(ipython)
