"""The ``gemmlab`` command: doctor, compile, check and bench from a terminal.

Exit codes: 0 success, 1 the thing asked about is broken (a compile error, a failed
check, a broken toolchain), 2 this machine cannot do it (no GPU) or bad usage.
"""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from .errors import GemmlabError, NoGPUError


def _doctor(args: argparse.Namespace) -> int:
    from gemmlab.notebook.doctor import doctor

    report = doctor()
    print(report)
    return report.exit_code


def _compile(args: argparse.Namespace) -> int:
    from gemmlab.compiling.compiler import compile_to

    path = Path(args.file)
    try:
        source = path.read_text()
    except OSError as exc:
        print(f"gemmlab compile: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 2
    compiled = compile_to(source, args.name, arch=args.arch, options=args.option, include_dirs=args.include,
                          use_cache=not args.no_cache, filename=path.name)
    print(compiled.summary())
    print(compiled.resources)
    if compiled.log:
        print(compiled.log)
    if args.output:
        out = Path(args.output)
        if out.suffix == ".ptx" or not compiled.cubin:
            out.write_text(compiled.ptx)
        else:
            out.write_bytes(compiled.cubin)
        print(f"wrote {out}")
    if args.ptx:
        print(compiled.ptx)
    return 0


def _load_fn(file: str, name: str) -> Callable[..., Any]:
    """Run the Python file and return its callable ``name`` (the GEMM function to check or time)."""
    path = Path(file)
    if not path.is_file():
        raise GemmlabError(f"{file} does not exist.")
    if path.suffix != ".py":
        raise GemmlabError(f"{file} is not a Python file: give a .py file that defines the GEMM function {name}"
                           f"(A, B, D) (see `gemmlab check --help`).")
    try:
        namespace = runpy.run_path(str(path), run_name="__gemmlab__")
    except GemmlabError:
        raise
    except Exception as exc:  # the student's file failed to run: say where, without our frames
        raise GemmlabError(f"running {file} failed: {type(exc).__name__}: {exc}") from exc
    fn = namespace.get(name)
    if not callable(fn):
        found = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
        raise GemmlabError(f"{file} defines no callable named {name!r}. Callables found: {', '.join(found) or 'none'}.")
    return fn


def _dtype(name: str | None) -> Any:
    if name is None:
        return None
    import torch

    return getattr(torch, name)


def _check(args: argparse.Namespace) -> int:
    from gemmlab.running.gpu import require_gpu

    require_gpu("gemmlab check")
    fn = _load_fn(args.file, args.name)
    from gemmlab.checking.check import check_gemm

    result = check_gemm(fn, convention=args.convention, dtype=_dtype(args.dtype), out_dtype=_dtype(args.out_dtype),
                        shapes=args.shapes)
    print(result)
    return 0 if result.passed else 1


def _shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not MxNxK, e.g. 4096x4096x4096") from None
    return m, n, k


def _bench(args: argparse.Namespace) -> int:
    from gemmlab.running.gpu import require_gpu

    require_gpu("gemmlab bench")
    fn = _load_fn(args.file, args.name)
    from gemmlab.timing.bench import bench_gemm

    result = bench_gemm(fn, shape=args.shape, convention=args.convention, dtype=_dtype(args.dtype),
                        out_dtype=_dtype(args.out_dtype), label=args.name)
    print(result)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gemmlab", description="Compile, check and time GEMM kernels.")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("doctor", help="what works on this machine and how to fix what does not").set_defaults(run=_doctor)

    comp = sub.add_parser("compile", help="compile a .cu file with NVRTC and show its resources")
    comp.add_argument("file")
    comp.add_argument("--name", required=True, help="the __global__ function (or 'name<args>' for a template)")
    comp.add_argument("--arch", default=None, help="e.g. sm_80, sm_90a, sm_100a (default: this machine's GPU)")
    comp.add_argument("-o", "--output", help="write the cubin (or PTX, for a .ptx name or a compute_ arch) here")
    comp.add_argument("--ptx", action="store_true", help="print the PTX")
    comp.add_argument("--option", "-X", action="append", default=[], help="extra NVRTC option (repeatable)")
    comp.add_argument("--include", "-I", action="append", default=[], help="extra include folder (repeatable)")
    comp.add_argument("--no-cache", action="store_true", help="compile even if cached")
    comp.set_defaults(run=_compile)

    for command, runner, help_text in (("check", _check, "check a GEMM function against torch over a shape suite"),
                                       ("bench", _bench, "time a GEMM function against cuBLAS")):
        p = sub.add_parser(command, help=help_text)
        p.add_argument("file", help="a Python file defining the GEMM function")
        p.add_argument("--name", required=True, help="the function: fn(A, B, D) for tn, fn(A, B, C, alpha, beta) for nn")
        p.add_argument("--convention", choices=("tn", "nn"), default="tn")
        p.add_argument("--dtype", choices=("float16", "bfloat16"), default=None)
        p.add_argument("--out-dtype", choices=("float16", "bfloat16", "float32"), default=None)
        if command == "check":
            p.add_argument("--shapes", default=None, help="suite name: default, aligned, odd, large")
        else:
            p.add_argument("--shape", type=_shape, default=(4096, 4096, 4096), help="MxNxK (default 4096x4096x4096)")
        p.set_defaults(run=runner)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gemmlab`` script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except NoGPUError as exc:
        print(f"NoGPUError: {exc}", file=sys.stderr)
        return 2
    except GemmlabError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # python -m gemmlab.cli
    sys.exit(main())
