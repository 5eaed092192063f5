#!/usr/bin/env python3
"""What each part of a solution kernel costs: time the kernel with one part of its work removed.

    python benchmarks/ablation.py gemm06_cpp hopper_ws --seconds 1.5
    python benchmarks/ablation.py gemm06_dsl --compile-only        # no GPU needed

An ablation is a text edit of the kernel's cell in the solutions notebook (ABLATIONS below) that
deletes one piece of work: the global->shared copies, the ldmatrix loads, the barriers, the store
of D. The result is wrong on purpose. Each variant runs back to back for a few seconds, as in
benchmarks/clocks.py, beside the unchanged kernel (first and last, to show drift) and cuBLAS,
and the table gives TFLOPS, the ratio to cuBLAS, the SM clock and the power.

Two traps, both guarded:

- ptxas deletes MMAs whose results nothing reads. Remove a wgmma kernel's epilogue and ptxas keeps
  one ``HGMMA`` of four per k-tile: the variant would time a quarter of the work. So every variant's
  tensor-core instructions (``HMMA``/``HGMMA`` in its SASS) are counted; a variant that lost any is
  reported and not timed.
- A variant can be faster only because it draws less power: a GPU at its power cap clocks higher
  when it moves less data. The last column divides out the clock (TFLOPS per MHz against the
  unchanged kernel): near 1.0 the variant saved power, not cycles.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import solutions  # noqa: E402  (benchmarks/solutions.py: loading the solution kernels)
from autograder.cell_metadata import kernel_tag  # noqa: E402


class AblationError(LookupError):
    """An ablation no longer matches its kernel's cell (the cell changed): update ABLATIONS."""


@dataclass(frozen=True)
class Ablation:
    label: str
    removes: str                          # what the edit deletes, in words, for the table
    edits: tuple[tuple[str, str], ...]    # (text of the cell, what replaces it)


_CPP_COPIES = ("        if (next < k_tiles) load_stage(next, write_stage);",
               "        (void)next;                              // ablation: no copies")
_CPP_L2 = ("        if (next < k_tiles) load_stage(next, write_stage);",
           "        if (next < k_tiles) load_stage(0, write_stage);   // ablation: k-tile 0 again")
_CPP_LDSM = ("      copy(s2r_a, tXsA(_, _, kb_next, read_stage), tXrA(_, _, (kb + 1) & 1));\n"
             "      copy(s2r_b, tXsB(_, _, kb_next, read_stage), tXrB(_, _, (kb + 1) & 1));\n", "")
_CPP_SYNC = ("        cp_async_wait<STAGES - 2>();\n        __syncthreads();\n      }", "      }")

_DSL_COPIES = ("                if nxt < k_tiles:\n"
               "                    if fast_rows & (nxt < full_k):\n"
               "                        cute.copy(copy_A, tAgA[None, None, None, nxt], tAsA[None, None, None, nxt % STAGES])\n"
               "                        cute.copy(copy_B, tBgB[None, None, None, nxt], tBsB[None, None, None, nxt % STAGES])\n"
               "                    else:\n"
               "                        load_tile(copy_A, tAgA, tAsA, tAcA, mA.shape, nxt, nxt % STAGES)\n"
               "                        load_tile(copy_B, tBgB, tBsB, tBcB, mB.shape, nxt, nxt % STAGES)\n", "")
_DSL_L2 = (_DSL_COPIES[0], _DSL_COPIES[0].replace("[None, None, None, nxt], tAsA", "[None, None, None, 0], tAsA")
           .replace("[None, None, None, nxt], tBsB", "[None, None, None, 0], tBsB")
           .replace("mA.shape, nxt, nxt % STAGES", "mA.shape, 0, nxt % STAGES")
           .replace("mB.shape, nxt, nxt % STAGES", "mB.shape, 0, nxt % STAGES"))
_DSL_LDSM = ("            cute.copy(ldsm_A, tXsA[None, None, (kb + 1) % KB, stage], tXrA[None, None, (kb + 1) % 2])\n"
             "            cute.copy(ldsm_B, tXsB[None, None, (kb + 1) % KB, stage], tXrB[None, None, (kb + 1) % 2])\n", "")
_DSL_SYNC = ("                cute.arch.cp_async_wait_group(STAGES - 2)\n                cute.arch.sync_threads()\n", "")

_WS_STORE = ("                cute.copy(tma_d, tDsD, tDgD)\n", "")
_WS_REGS_TO_SMEM = ("            out.store(acc.load().to(d_dtype))\n            cute.autovec_copy(out, tCsD)\n", "")

_MAINLOOP_ABLATIONS = {
    "cpp": (_CPP_COPIES, _CPP_L2, _CPP_LDSM, _CPP_SYNC),
    "dsl": (_DSL_COPIES, _DSL_L2, _DSL_LDSM, _DSL_SYNC),
}


def _mainloop(front_end: str) -> tuple[Ablation, ...]:
    copies, l2, ldsm, sync = _MAINLOOP_ABLATIONS[front_end]
    return (
        Ablation("no copies", "the main loop's global->shared copies (each stage keeps its first tile)", (copies,)),
        Ablation("copies of k-tile 0", "every copy fetches k-tile 0 again: as many copies, all hitting in L2, "
                 "no DRAM traffic", (l2,)),
        Ablation("no ldmatrix", "the main loop's ldmatrix loads (the MMAs reuse the first fragments)", (ldsm,)),
        Ablation("no wait/barrier", "cp.async waits and __syncthreads in the main loop", (sync,)),
        Ablation("MMAs only", "copies, ldmatrix, waits and barriers: only the MMAs are left", (copies, ldsm, sync)),
    )


#: kernel -> its ablations. The texts must match the kernel's cell exactly (tests check they do).
ABLATIONS: dict[str, tuple[Ablation, ...]] = {
    "gemm06_cpp": _mainloop("cpp"),
    "gemm06_dsl": _mainloop("dsl"),
    "hopper_ws": (
        Ablation("no TMA store", "the TMA store of D (the tile still goes registers->shared)", (_WS_STORE,)),
        # Nothing reads the accumulators any more, so ptxas deletes most wgmmas: the guard refuses it.
        Ablation("no epilogue", "the whole epilogue: registers->shared and the TMA store",
                 (_WS_REGS_TO_SMEM, _WS_STORE)),
    ),
}

_TENSOR_CORE = re.compile(r"\bH(?:G)?MMA\.")


def examples(dtype: Any) -> list[Any]:
    """CPU stand-ins for A (M x K), B (N x K), D (M x N): enough for a DSL kernel to compile."""
    import torch

    return [torch.empty(s, dtype=dtype) for s in ((256, 128), (512, 128), (256, 512))]


def _build_cpp06(ns: dict, arch: str, dtype: Any) -> list:
    return [ns["cpp_kernel"](dtype, 8, arch)[0]]          # the 16-byte-copy fast path the timings use


def _build_dsl(jit_name: str) -> Callable[[dict, str, Any], list]:
    def build(ns: dict, arch: str, dtype: Any) -> list:
        import gemmlab

        return [gemmlab.dsl.compile(ns[jit_name], *examples(dtype), arch=arch)]
    return build


#: kernel -> how to compile its cell's kernel(s) for (namespace, arch, dtype) without running anything.
BUILDERS: dict[str, Callable[[dict, str, Any], list]] = {
    "gemm06_cpp": _build_cpp06,
    "gemm06_dsl": _build_dsl("gemm06_dsl_jit"),
    "hopper_ws": _build_dsl("ws_jit"),
}


def variant_source(kernel: str, ablation: Ablation | None) -> str:
    """The kernel's cell with the ablation's edits applied (the cell itself for None)."""
    import solution_cells

    source = solution_cells.cell_source(solutions.assignment_of(kernel), kernel_tag(kernel))
    for old, new in (ablation.edits if ablation else ()):
        if source.count(old) != 1:
            raise AblationError(
                f"ablation {ablation.label!r} of {kernel}: the text to edit occurs {source.count(old)} times in the "
                f"cell tagged {kernel_tag(kernel)} (expected once); the cell changed, update ABLATIONS:\n{old}")
        source = source.replace(old, new)
    return source


def load(kernel: str, ablation: Ablation | None) -> tuple[Callable, dict]:
    """(gemm function, namespace) of the kernel's cell, with the ablation applied."""
    sources = {kernel_tag(kernel): variant_source(kernel, ablation)}
    return solutions.load_kernel(solutions.assignment_of(kernel), kernel, sources=sources)


def tensor_core_instructions(kernels: list) -> int:
    """HMMA + HGMMA instructions in the SASS of compiled kernels (gemmlab Kernel or DslKernel)."""
    from gemmlab.compiling import sass

    if sass.disassembler() is None:
        raise SystemExit("ablation.py needs nvdisasm (pip wheel nvidia-cuda-nvdisasm) to read SASS")
    return sum(len(_TENSOR_CORE.findall(k.sass())) for k in kernels)


@dataclass
class Variant:
    kernel: str
    ablation: Ablation | None
    mma: int = 0                              # tensor-core instructions in the SASS
    refused: str = ""                         # why it is not timed
    fn: Callable | None = None
    runs: list[dict] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.ablation.label if self.ablation else "unchanged"


def prepare(kernel: str, ablations: tuple[Ablation, ...], arch: str, dtype: Any) -> list[Variant]:
    """Compile the unchanged kernel and every ablation; refuse those that lost tensor-core instructions."""
    variants: list[Variant] = []
    for ab in (None, *ablations):                  # the unchanged kernel first: the others' reference
        v = Variant(kernel, ab)
        v.fn, ns = load(kernel, ab)
        v.mma = tensor_core_instructions(BUILDERS[kernel](ns, arch, dtype))
        if variants and v.mma < variants[0].mma:
            v.refused = (f"ptxas kept {v.mma} of {variants[0].mma} tensor-core instructions (their results were "
                         "unused): timing it would measure less work, not this ablation")
        variants.append(v)
    return variants


def compile_ahead(kernels: list[str], labels: list[str] | None, dtype: str, jobs: int) -> None:
    """Warm the disk cache: one ``--compile-only`` process per (kernel, ablation), ``jobs`` at a time
    (a CuTe C++ build takes 20-50 s on one core; the DSL's take about a second)."""
    todo = [(k, ab.label) for k in kernels for ab in ABLATIONS[k] if not labels or ab.label in labels]
    todo += [(k, "unchanged") for k in kernels]

    def one(item: tuple[str, str]) -> str:
        kernel, label = item
        done = subprocess.run([sys.executable, __file__, kernel, "--compile-only", "--only", label, "--dtype", dtype],
                              capture_output=True, text=True)
        return "" if done.returncode == 0 else (f"  compiling {kernel} / {label} ahead failed (it is tried again "
                                                f"below): {(done.stderr or done.stdout).strip()[-300:]}")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for line in pool.map(one, todo):
            if line:
                print(line, flush=True)


def measure(fn: Callable, A: Any, B: Any, D: Any, seconds: float) -> dict:
    """TFLOPS, SM clock and power over ``seconds`` of back-to-back calls (benchmarks/clocks.py)."""
    import clocks

    M, K = A.shape
    ms, stats, how = clocks.sustained(lambda: fn(A, B, D), seconds)
    return {"tflops": 2 * M * B.shape[0] * K / ms / 1e9, "mhz": stats.get("clock_mhz", float("nan")),
            "watts": stats.get("power_w", float("nan")), "issued": how}


def table(variants: list[Variant], cublas: float) -> str:
    base = next(v for v in variants if v.ablation is None and v.runs)
    base_per_mhz = sum(r["tflops"] / r["mhz"] for r in base.runs) / len(base.runs)
    lines = ["| kernel | variant | removes | tensor-core instr. | TFLOPS | × cuBLAS | SM MHz | W | per clock vs unchanged |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for v in variants:
        removes = v.ablation.removes if v.ablation else "nothing"
        if v.refused:
            lines.append(f"| {v.kernel} | {v.label} | {removes} | {v.mma} | not timed: {v.refused} | | | | |")
        for r in v.runs:
            lines.append(f"| {v.kernel} | {v.label} | {removes} | {v.mma} | {r['tflops']:.1f} | {r['tflops'] / cublas:.3f} | "
                         f"{r['mhz']:.0f} | {r['watts']:.0f} | {r['tflops'] / r['mhz'] / base_per_mhz:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="+", choices=sorted(ABLATIONS), help="solution kernels with ablations")
    parser.add_argument("--shape", type=int, default=4096, help="M = N = K")
    parser.add_argument("--seconds", type=float, default=1.5, help="per variant")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    parser.add_argument("--only", action="append", default=[], metavar="LABEL", help="only these ablations")
    parser.add_argument("--compile-only", action="store_true",
                        help="compile and count tensor-core instructions; no GPU needed")
    parser.add_argument("--jobs", type=int, default=1, help="compile the variants in this many processes first")
    args = parser.parse_args(argv)

    import torch

    import gemmlab
    from gemmlab.notebook import nbhelpers

    dtype = getattr(torch, args.dtype)
    gpu = gemmlab.has_gpu() and not args.compile_only
    if not gpu and not args.compile_only:
        print("No usable CUDA GPU: compiling and counting tensor-core instructions only (as with --compile-only).")
    arch = nbhelpers.arch()
    if args.jobs > 1:
        compile_ahead(args.kernels, args.only, args.dtype, args.jobs)
    chosen = {k: tuple(a for a in ABLATIONS[k] if not args.only or a.label in args.only) for k in args.kernels}
    prepared = {k: prepare(k, abl, arch, dtype) for k, abl in chosen.items()}
    if not gpu:
        for variants in prepared.values():
            for v in variants:
                print(f"{v.kernel:11s} {v.label:20s} {v.mma:4d} tensor-core instructions for {arch}"
                      + (f"  REFUSED: {v.refused}" if v.refused else ""))
        return 0

    n = args.shape
    A = torch.randn(n, n, device="cuda").to(dtype)
    B = torch.randn(n, n, device="cuda").to(dtype)
    D = torch.empty(n, n, device="cuda", dtype=dtype)
    print(f"{torch.cuda.get_device_name()}, {n}x{n}x{n} {args.dtype}, {args.seconds:.1f} s per variant\n")
    cublas_fn = lambda A, B, D: torch.matmul(A, B.t(), out=D)  # noqa: E731
    cublas = [measure(cublas_fn, A, B, D, args.seconds)]
    for kernel, variants in prepared.items():
        order = variants + [variants[0]]       # the unchanged kernel again at the end: the run's drift
        for v in order:
            if not v.refused:
                v.runs.append(measure(v.fn, A, B, D, args.seconds))
    cublas.append(measure(cublas_fn, A, B, D, args.seconds))
    ref = sum(r["tflops"] for r in cublas) / len(cublas)
    print(f"cuBLAS: {ref:.1f} TFLOPS at {sum(r['mhz'] for r in cublas) / len(cublas):.0f} MHz "
          f"(mean of a run before and after the kernels)\n")
    for variants in prepared.values():
        print(table(variants, ref), "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
