"""How long do kernel compiles take, and what makes a cold CuTe compile faster?

    python benchmarks/toolchain.py [--arch sm_90a] [--quick] [--json out.json]

Prints one table: the CuTe GEMM of tests/kernels/cute_gemm.cu compiled cold (cache off)
through gemmlab.compile, then warm (cache hit, Kernel included), then the same source
through NVRTC directly under each candidate option or source change, with NVRTC's own
phase timings (``--time``) and the registers/spills of the result so that a faster
variant that costs kernel quality is visible. A raw WMMA kernel is timed for contrast.
The CuTe DSL rows time the same kind of cell in the DSL front end (cold, and a re-run).
On a machine with a GPU it also times check_gemm and bench_gemm around the CuTe GEMM.

Every number is one measured compile (cold compiles take many seconds; run it twice if
you need a spread). Nothing is adopted here: the table says what helps.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gemmlab import compiler, resources, toolchain  # noqa: E402
from gemmlab.compilation import worker  # noqa: E402
from gemmlab.gpu import has_gpu  # noqa: E402

CUTE = (REPO / "tests" / "kernels" / "cute_gemm.cu").read_text()
WMMA = (REPO / "tests" / "kernels" / "wmma_gemm.cu").read_text()

#: cute/tensor.hpp's own include list, in its order, minus cooperative copy/gemm and printing,
#: which this kernel does not use (dropping more breaks CuTe's own include order).
LEAN_INCLUDES = "\n".join(f"#include <{h}>" for h in (
    "cute/tensor_impl.hpp", "cute/pointer_swizzle.hpp", "cute/pointer_sparse.hpp", "cute/pointer_flagged.hpp",
    "cute/tensor_zip.hpp", "cute/algorithm/tensor_algorithms.hpp", "cute/algorithm/fill.hpp",
    "cute/algorithm/clear.hpp", "cute/algorithm/copy.hpp", "cute/algorithm/prefetch.hpp",
    "cute/algorithm/axpby.hpp", "cute/algorithm/gemm.hpp",
))


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (gemmlab compiles in worker processes, counted
    once stopped): CPU time hardly moves when other jobs share the machine, unlike wall time."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def heaviest_instantiations(trace: Path, count: int = 8) -> list[tuple[float, str]]:
    """(seconds, what) of the slowest template instantiations in a -fdevice-time-trace file."""
    try:
        events = json.loads(trace.read_text()).get("traceEvents", [])
    except (OSError, ValueError):
        return []
    found = [(e.get("dur", 0) / 1e6, f"{e.get('name')}: {e.get('args', {}).get('detail', '')}"[:110])
             for e in events if str(e.get("name", "")).startswith("Instantiate")]
    return sorted(found, reverse=True)[:count]


def nvrtc_compile(source: str, name: str, options: list[str], pch_heap: int = 0) -> dict:
    """One NVRTC compile with gemmlab's include path; seconds, phase times, registers, spills."""
    nvrtc = toolchain.nvrtc()
    if pch_heap:
        nvrtc.nvrtcSetPCHHeapSize(pch_heap)
    dirs = [str(d) for d in toolchain.include_dirs(cute=True)]
    with tempfile.TemporaryDirectory() as tmp:
        timing = Path(tmp) / "time.csv"
        opts = [*options, *(f"--include-path={d}" for d in dirs), f"--time={timing}"]
        start, cpu = time.perf_counter(), cpu_seconds()
        _, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
        expression = f"&::{name}".encode()
        nvrtc.nvrtcAddNameExpression(prog, expression)
        encoded = [o.encode() for o in opts]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        log = log.rstrip(b"\0").decode(errors="replace")
        row = {"seconds": seconds, "cpu": cpu, "ok": int(result) == 0, "phases": _phases(timing)}
        if int(result) == 0:
            _, lowered = nvrtc.nvrtcGetLoweredName(prog, expression)
            _, psize = nvrtc.nvrtcGetPTXSize(prog)
            ptx = b" " * psize
            nvrtc.nvrtcGetPTX(prog, ptx)
            res = resources.parse(log, ptx.decode(errors="replace"), lowered.decode())
            row.update(registers=res.registers, spills=res.spill_stores_bytes + res.spill_loads_bytes)
        else:
            row["error"] = log.strip().splitlines()[:3]
        nvrtc.nvrtcDestroyProgram(prog)
    return row


def _phases(path: Path) -> str:
    """NVRTC's --time CSV folded into 'front-end 11.4 s, ...' (empty when it wrote none)."""
    try:
        rows = list(csv.reader(path.read_text().splitlines()))
    except OSError:
        return ""
    totals: dict[str, float] = {}
    for row in rows[1:]:
        if len(row) >= 3:
            try:
                totals[row[1].strip()] = totals.get(row[1].strip(), 0.0) + float(row[2]) / 1000.0
            except ValueError:
                continue
    return ", ".join(f"{k} {v:.1f}s" for k, v in totals.items() if v >= 0.05)


def dsl_rows(arch: str, add) -> None:
    """The same GEMM cell in the CuTe DSL (benchmarks/dsl_compile.py's tensor-op GEMM): cold compile
    in a fresh process, best of two (targets: <= 2 s on a 2-core CPU, <= 1 s on the GPU machine),
    and a re-run of the unchanged cell (target <= 0.05 s)."""
    try:
        from benchmarks.dsl_compile import KERNELS, cold_run
        import gemmlab.dsl as dsl
    except Exception as exc:  # noqa: BLE001 - the DSL is optional here
        print(f"CuTe DSL rows skipped: {exc}")
        return
    colds = [cold_run(KERNELS["tensorop"], arch) for _ in range(2)]
    best = min(c["cold"] for c in colds)
    add("CuTe DSL tensor-op GEMM, cold compile (fresh process, best of 2)", {"seconds": best})
    import importlib

    import torch

    module = importlib.import_module(KERNELS["tensorop"])
    args = (torch.empty(4096, 4096, dtype=torch.float16),) * 3
    dsl.compile(module.gemm, *args, arch=arch)
    start = time.perf_counter()
    kernel = dsl.compile(module.gemm, *args, arch=arch)
    add(f"CuTe DSL GEMM, re-run of an unchanged cell ({'cached' if kernel.cached else 'RECOMPILED'})",
        {"seconds": time.perf_counter() - start})


def base_options(arch: str, lineinfo: bool = True, default_device: bool = True) -> list[str]:
    opts = [f"--gpu-architecture={arch}", "-std=c++17", "-DNDEBUG", "--ptxas-options=-v"]
    if default_device:
        opts.append("-default-device")
    if lineinfo:
        opts.append("-lineinfo")
    return opts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--quick", action="store_true", help="only cold, warm, WMMA and PCH")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--no-dsl", action="store_true", help="skip the CuTe DSL rows")
    parser.add_argument("--trace", action="store_true", help="with --quick: also the -fdevice-time-trace row")
    args = parser.parse_args(argv)
    arch = args.arch
    # Always an empty cache of our own: the "cold" row must compile (tools/gpu_suite.sh exports a
    # shared GEMMLAB_CACHE that the GPU tests have filled).
    os.environ["GEMMLAB_CACHE"] = tempfile.mkdtemp(prefix="gemmlab-bench-cache-")
    rows: list[tuple[str, dict]] = []

    def add(label: str, row: dict) -> None:
        rows.append((label, row))
        extra = f"  [{row['phases']}]" if row.get("phases") else ""
        status = "" if row.get("ok", True) else f"  FAILED: {row.get('error')}"
        regs = f"{row['registers']:>4} regs {row['spills']:>4} B spill" if "registers" in row else " " * 20
        cpu = f"{row['cpu']:>7.2f} s" if "cpu" in row else " " * 9
        print(f"{label:<58} {row['seconds']:>7.2f} s {cpu}  {regs}{extra}{status}", flush=True)

    print(f"NVRTC {toolchain.versions()['nvrtc']}, CUTLASS {toolchain.versions()['cutlass']}, arch {arch}, "
          f"{os.cpu_count()} CPUs")
    print(f"{'':<58} {'wall':>9} {'CPU':>9}  (CPU time is the fair comparison on a shared machine)\n")

    # gemmlab.compile as a student meets it.
    start, cpu = time.perf_counter(), cpu_seconds()
    cold = compiler.compile_to(CUTE, "gemm", arch=arch, use_cache=True)
    worker.stop_all()  # reaps the worker process, so RUSAGE_CHILDREN holds its start-up and compile
    add("CuTe GEMM, gemmlab.compile cold (cache empty, worker started)",
        {"seconds": time.perf_counter() - start, "cpu": cpu_seconds() - cpu, "registers": cold.resources.registers,
         "spills": cold.resources.spill_stores_bytes + cold.resources.spill_loads_bytes})
    start = time.perf_counter()
    from gemmlab.kernel import Kernel

    warm = Kernel(compiler.compile_to(CUTE, "gemm", arch=arch, use_cache=True))
    add("CuTe GEMM, gemmlab.compile warm (cache hit, Kernel built)",
        {"seconds": time.perf_counter() - start, "registers": warm.resources.registers,
         "spills": warm.resources.spill_stores_bytes + warm.resources.spill_loads_bytes})
    start = time.perf_counter()
    w = compiler.compile_to(WMMA, "wmma_gemm", arch=arch, use_cache=False)
    add("raw CUDA WMMA GEMM, cold", {"seconds": time.perf_counter() - start, "registers": w.resources.registers,
                                     "spills": w.resources.spill_stores_bytes})

    # Levers, each one NVRTC compile of the CuTe GEMM.
    add("NVRTC baseline (gemmlab's options)", nvrtc_compile(CUTE, "gemm", base_options(arch)))
    with tempfile.TemporaryDirectory() as pch_dir:
        pch = [*base_options(arch), "--pch", f"--pch-dir={pch_dir}"]
        add("  --pch, first compile (creates the PCH, heap 1 GiB)", nvrtc_compile(CUTE, "gemm", pch, 1 << 30))
        add("  --pch, second compile (uses it)", nvrtc_compile(CUTE, "gemm", pch, 1 << 30))
    if args.trace or not args.quick:
        with tempfile.TemporaryDirectory() as tmp:
            trace = Path(tmp) / "trace.json"
            add("  -fdevice-time-trace (where the front end's time goes)",
                nvrtc_compile(CUTE, "gemm", [*base_options(arch), f"-fdevice-time-trace={trace}"]))
            for seconds, what in heaviest_instantiations(trace):
                print(f"      {seconds:6.2f} s  {what}")
    if not args.quick:
        lean = re.sub(r"#include <cute/tensor.hpp>", LEAN_INCLUDES, CUTE)
        add("  lean includes (cute/tensor.hpp minus cooperative_*, print_*)", nvrtc_compile(lean, "gemm", base_options(arch)))
        add("  without -lineinfo", nvrtc_compile(CUTE, "gemm", base_options(arch, lineinfo=False)))
        add("  without -default-device", nvrtc_compile(CUTE, "gemm", base_options(arch, default_device=False)))
        for extra in (["-Xptxas", "-O1"], ["--extensible-whole-program"], ["--split-compile=0"], ["--minimal"],
                      ["-std=c++20"], ["--dopt=on"]):
            add(f"  {' '.join(extra)}", nvrtc_compile(CUTE, "gemm", [*base_options(arch), *extra]))
        add("  PTX only (compute_ arch: front end + NVVM, no ptxas)",
            nvrtc_compile(CUTE, "gemm", base_options(arch.replace("sm_", "compute_"))))
        add("  --minimal, cudaStream_t declared by hand (CUTLASS needs it)",
            nvrtc_compile("typedef struct CUstream_st* cudaStream_t;\n" + CUTE, "gemm",
                          [*base_options(arch), "--minimal"]))

    if not args.no_dsl:
        dsl_rows(arch, add)

    if has_gpu():
        import torch

        import gemmlab

        kernel = gemmlab.compile(CUTE, "gemm", arch=arch)

        def fn(A, B, D):
            M, K = A.shape
            N = B.shape[0]
            kernel(A, B, D, M, N, K, grid=((M + 127) // 128, (N + 127) // 128), block=128)

        start = time.perf_counter()
        result = gemmlab.check_gemm(fn)
        add(f"check_gemm default suite ({'passed' if result.passed else 'FAILED'})",
            {"seconds": time.perf_counter() - start})
        start = time.perf_counter()
        bench = gemmlab.bench_gemm(fn, shape=(4096, 4096, 4096), dtype=torch.float16)
        add("bench_gemm 4096^3 (total wall time)", {"seconds": time.perf_counter() - start})
        print(bench)

    if args.json:
        Path(args.json).write_text(json.dumps([{"label": k, **v} for k, v in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
