"""Measure shared-memory wavefronts and bank conflicts with Nsight Compute; compare with the model.

Run on the GPU machine (H100, ncu on PATH or at /usr/local/cuda/bin/ncu, as root):

    python3 benchmarks/bank_validation.py --out gemmlab/data/bank_measurements.json

It builds ONE CUDA source with one tiny kernel per access pattern (one warp, exactly one
shared-memory instruction per kernel, addresses from a __constant__ table), compiles it
with NVRTC for sm_90a, runs every kernel in one child process under ONE ncu invocation,
parses ncu's CSV, subtracts a baseline kernel that touches no shared memory, writes the
measurements as JSON and prints model vs measurement (also for a few model variants, so
a disagreement says which assumption of :class:`gemmlab.seeing.banks.Model` to change).

``--dry-run`` (no GPU needed) prints the patterns and compiles the source only;
``--run-only`` also launches every kernel once, without ncu.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemmlab.seeing import banks  # noqa: E402
from ncu import find_ncu, parse_csv  # noqa: E402  (benchmarks/ncu.py: Nsight Compute and its CSV)

ARCH = "sm_90a"
SMEM_BYTES = 32 * 1024
KERNEL_PREFIX = "bk_"
METRICS = {
    ("ld", "wavefronts"): "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    ("ld", "conflicts"): "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    ("st", "wavefronts"): "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    ("st", "conflicts"): "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
}
SEED = 20261123


@dataclass(frozen=True)
class Pattern:
    name: str
    op: str
    addresses: tuple[int | None, ...]  # 32 lane byte offsets, None = inactive lane


# --------------------------------------------------------------------------- patterns

def _swz(elem: int, b: int = 3, m: int = 3, s: int = 3) -> int:
    """CuTe Swizzle<B,M,S> applied to an element offset."""
    yyy = ((1 << b) - 1) << (m + s)
    return elem ^ ((elem & yyy) >> s)


def patterns() -> list[Pattern]:
    """Every op and width, with linear, strided, tile-column, broadcast, duplicate,
    inactive-lane and random addresses (fixed seed)."""
    rng = np.random.default_rng(SEED)
    out: list[Pattern] = []
    lanes = range(32)
    for kind in ("ld", "st"):
        for bits in (32, 64, 128):
            op, w = f"{kind}{bits}", bits // 8
            add = lambda name, addrs: out.append(Pattern(f"{op}_{name}", op, tuple(addrs)))  # noqa: E731
            add("linear", [l * w for l in lanes])
            for s in (2, 4, 8, 16, 32):
                if s * 4 > w:
                    add(f"stride{s}w", [l * s * 4 for l in lanes])
            # column 0 of a 64-column fp16 tile, one row per lane (row pitch 128 bytes)
            add("col_unswizzled", [l * 128 for l in lanes])
            add("col_padded", [l * (128 + max(w, 4)) for l in lanes])
            add("col_swizzle333", [2 * _swz(l * 64) for l in lanes])
            add("broadcast_all", [0] * 32)
            add("pairs_n^1", [(l // 2) * w for l in lanes])
            add("pairs_n^2", [((l >> 2) * 2 + (l & 1)) * w for l in lanes])
            add("pairs_n^1_strided", [(l // 2) * 128 for l in lanes])
            add("dup4_of_8", [(l % 8) * w for l in lanes])
            add("dup_halves", [(l % 16) * w for l in lanes])
            add("inactive_odd", [l * w if l % 2 == 0 else None for l in lanes])
            add("inactive_all_but_0", [0] + [None] * 31)
            add("inactive_half_conflict", [l * 128 if l < 16 else None for l in lanes])
            for r in range(2):
                words = rng.integers(0, 4096 // w, size=32)
                add(f"random{r}", [int(x) * w for x in words])
    for kind, base in (("ld", "ldmatrix"), ("st", "stmatrix")):
        for n in (1, 2, 4):
            op = f"{base}.x{n}"
            rows = range(8 * n)
            pad = [0] * (32 - 8 * n)  # lanes past 8*N: address ignored by the instruction
            add = lambda name, addrs: out.append(Pattern(f"{op}_{name}", op, tuple(list(addrs) + pad)))  # noqa: E731
            add("linear", [r * 16 for r in rows])
            add("col_unswizzled", [r * 128 for r in rows])
            add("col_padded", [r * 144 for r in rows])
            add("col_swizzle333", [2 * _swz(r * 64) for r in rows])
            add("col_swizzle233_64B", [2 * _swz(r * 32, 2, 3, 3) for r in rows])
            add("same_row", [0 for _ in rows])
            add("matrices_same", [(r % 8) * 16 for r in rows])
            words = rng.integers(0, 4096 // 16, size=8 * n)
            add("random", [int(x) * 16 for x in words])
    return out


# --------------------------------------------------------------------------- CUDA source

_ASM = {
    "ld32": ('ld.shared.u32 %0, [%1];', '"=r"(r0) : "r"(a)', 1),
    "ld64": ('ld.shared.v2.u32 {%0, %1}, [%2];', '"=r"(r0), "=r"(r1) : "r"(a)', 2),
    "ld128": ('ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];',
              '"=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a)', 4),
    "st32": ('st.shared.u32 [%0], %1;', ': "r"(a), "r"(v0)', 0),
    "st64": ('st.shared.v2.u32 [%0], {%1, %2};', ': "r"(a), "r"(v0), "r"(v1)', 0),
    "st128": ('st.shared.v4.u32 [%0], {%1, %2, %3, %4};',
              ': "r"(a), "r"(v0), "r"(v1), "r"(v2), "r"(v3)', 0),
    "ldmatrix.x1": ('ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];', '"=r"(r0) : "r"(a)', 1),
    "ldmatrix.x2": ('ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];',
                    '"=r"(r0), "=r"(r1) : "r"(a)', 2),
    "ldmatrix.x4": ('ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];',
                    '"=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a)', 4),
    "stmatrix.x1": ('stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};', ': "r"(a), "r"(v0)', 0),
    "stmatrix.x2": ('stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};',
                    ': "r"(a), "r"(v0), "r"(v1)', 0),
    "stmatrix.x4": ('stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};',
                    ': "r"(a), "r"(v0), "r"(v1), "r"(v2), "r"(v3)', 0),
}


def kernel_source(pats: list[Pattern]) -> str:
    """One source: an address table in __constant__, a baseline kernel and one kernel per pattern."""
    table = []
    for p in pats:
        table.extend(-1 if a is None else int(a) for a in p.addresses)
    rows = ",\n".join(", ".join(str(x) for x in table[i:i + 32]) for i in range(0, len(table), 32))
    parts = [
        "// generated by benchmarks/bank_validation.py: one shared-memory instruction per kernel",
        f"#define SMEM_BYTES {SMEM_BYTES}",
        f"__constant__ int ADDR[{len(table)}] = {{\n{rows}\n}};",
        "",
        f'extern "C" __global__ void {KERNEL_PREFIX}baseline(unsigned* out) {{',
        "  __shared__ __align__(128) unsigned char smem[SMEM_BYTES];",
        "  unsigned lane = threadIdx.x & 31;",
        "  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem)) + ADDR[lane];",
        "  out[lane] = a;  // no shared-memory access at all",
        "}",
    ]
    for i, p in enumerate(pats):
        text, operands, nout = _ASM[p.op]
        body = [
            f'extern "C" __global__ void {KERNEL_PREFIX}{i}(unsigned* out) {{  // {p.name}',
            "  __shared__ __align__(128) unsigned char smem[SMEM_BYTES];",
            "  unsigned lane = threadIdx.x & 31;",
            f"  int off = ADDR[{i * 32} + lane];",
            "  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem)) + (off < 0 ? 0 : off);",
            "  unsigned r0 = 0, r1 = 0, r2 = 0, r3 = 0;",
            "  unsigned v0 = lane, v1 = lane + 1, v2 = lane + 2, v3 = lane + 3;",
        ]
        guard = "" if p.op.startswith(("ldmatrix", "stmatrix")) else "if (off >= 0) "
        body.append(f'  {guard}asm volatile("{text}" : {operands} : "memory");')
        body.append("  out[lane] = r0 + r1 + r2 + r3 + v0 * 0u;")
        body.append("}")
        parts.extend(body)
    return "\n".join(parts) + "\n"


def compile_cubin(source: str, arch: str = ARCH) -> bytes:
    """NVRTC straight through cuda.bindings (raw CUDA, no headers: well under a second)."""
    from cuda.bindings import nvrtc

    def check(res: tuple, what: str) -> tuple:
        err = res[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC {what} failed: {err}")
        return res[1:]

    (prog,) = check(nvrtc.nvrtcCreateProgram(source.encode(), b"bank_validation.cu", 0, [], []),
                    "create")
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"-default-device"]
    res = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if res[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        (size,) = check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        log = b" " * size
        check(nvrtc.nvrtcGetProgramLog(prog, log), "log")
        raise RuntimeError("NVRTC could not compile the validation kernels:\n" + log.decode(errors="replace"))
    (size,) = check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
    cubin = b" " * size
    check(nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin")
    return cubin


# --------------------------------------------------------------------------- child: run kernels

def run_kernels(cubin: bytes, count: int) -> None:
    """Launch the baseline and every pattern kernel once (1 block of 32 threads), in order."""
    import numpy as np
    from cuda.bindings import driver as d

    def ok(res: tuple, what: str):
        if res[0] != d.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what}: {res[0]}")
        return res[1] if len(res) > 1 else None

    ok(d.cuInit(0), "cuInit")
    dev = ok(d.cuDeviceGet(0), "cuDeviceGet")
    ctx = ok(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    ok(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    module = ok(d.cuModuleLoadData(cubin), "cuModuleLoadData")
    out = ok(d.cuMemAlloc(32 * 4), "cuMemAlloc")
    arg = np.array([int(out)], dtype=np.uint64)
    params = np.array([arg.ctypes.data], dtype=np.uint64)
    names = [f"{KERNEL_PREFIX}baseline"] + [f"{KERNEL_PREFIX}{i}" for i in range(count)]
    for name in names:
        fn = ok(d.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction {name}")
        ok(d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, d.CUstream(0), params.ctypes.data, 0), f"launch {name}")
        ok(d.cuCtxSynchronize(), f"running {name}")


# --------------------------------------------------------------------------- parent: ncu

def parse_ncu_csv(text: str) -> dict[str, dict[str, float]]:
    """ncu --csv (details page) -> {kernel name: {metric: value}}; tolerant of banner lines."""
    launches = parse_csv(text, {metric: metric for metric in METRICS.values()})
    if not launches:
        raise ValueError("no CSV rows of profiled launches in ncu's output")
    result: dict[str, dict[str, float]] = {}
    for launch in launches:
        m = re.search(rf"{KERNEL_PREFIX}(\w+)", str(launch["kernel"]))
        if m is None:
            continue
        result.setdefault(m.group(0).split("(")[0], {}).update(
            {k: v for k, v in launch.items() if k != "kernel" and not math.isnan(v)})
    return result


def measure(pats: list[Pattern], cubin_path: Path, log_path: Path) -> dict[str, dict[str, float]]:
    ncu = find_ncu()
    cmd = [ncu, "--clock-control", "none", "--metrics", ",".join(METRICS.values()), "--csv",
           "--kernel-name", f"regex:^{KERNEL_PREFIX}", "--log-file", str(log_path),
           sys.executable, str(Path(__file__).resolve()), "--child", str(cubin_path),
           "--count", str(len(pats))]
    print("running:", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n")
        raise SystemExit(f"ncu failed with exit code {proc.returncode}")
    return parse_ncu_csv(log_path.read_text())


VARIANTS = {
    "default": banks.DEFAULT_MODEL,
    "no_pair_packing": banks.Model(uniform_pair_packing=False),
    "packing_on_stores_too": banks.Model(pair_packing_ops=("ld64", "ld128", "st64", "st128")),
    "whole_warp_phases": banks.Model(phase_lanes=((4, 32), (8, 32), (16, 32)),
                                     uniform_pair_packing=False),
}


def predict(p: Pattern, model: banks.Model) -> tuple[int, int]:
    a = banks.analyze(list(p.addresses), p.op, model)
    return a.wavefronts, a.conflicts


def rows_from_measurements(pats: list[Pattern], meas: dict[str, dict[str, float]]) -> list[dict]:
    base = meas.get(f"{KERNEL_PREFIX}baseline", {})
    rows = []
    for i, p in enumerate(pats):
        m = meas.get(f"{KERNEL_PREFIX}{i}")
        if m is None:
            print(f"warning: no ncu result for {p.name} ({KERNEL_PREFIX}{i})")
            continue
        kind = banks.OPS[p.op].kind
        val = {k: m.get(METRICS[(kind, k)], float("nan")) - base.get(METRICS[(kind, k)], 0.0)
               for k in ("wavefronts", "conflicts")}
        wf, cf = predict(p, banks.DEFAULT_MODEL)
        rows.append({
            "name": p.name, "op": p.op, "addresses": list(p.addresses),
            "wavefronts": int(round(val["wavefronts"])), "conflicts": int(round(val["conflicts"])),
            "raw": {k: m.get(v) for k, v in (("ld_wavefronts", METRICS[("ld", "wavefronts")]),
                                              ("ld_conflicts", METRICS[("ld", "conflicts")]),
                                              ("st_wavefronts", METRICS[("st", "wavefronts")]),
                                              ("st_conflicts", METRICS[("st", "conflicts")]))},
            "model_at_measurement": {"wavefronts": wf, "conflicts": cf},
        })
    return rows


def report(rows: list[dict]) -> int:
    """Print model vs measurement; return the number of rows the default model gets wrong."""
    print(f"\n{'pattern':34s} {'meas wf':>8s} {'model':>6s} {'meas cf':>8s} {'model':>6s}")
    bad = 0
    for r in rows:
        p = Pattern(r["name"], r["op"], tuple(r["addresses"]))
        wf, cf = predict(p, banks.DEFAULT_MODEL)
        mark = "" if (wf, cf) == (r["wavefronts"], r["conflicts"]) else "  <-- differs"
        bad += bool(mark)
        print(f"{r['name']:34s} {r['wavefronts']:8d} {wf:6d} {r['conflicts']:8d} {cf:6d}{mark}")
    print()
    for vname, model in VARIANTS.items():
        agree = sum(predict(Pattern(r["name"], r["op"], tuple(r["addresses"])), model)
                    == (r["wavefronts"], r["conflicts"]) for r in rows)
        print(f"model variant {vname:24s}: {agree}/{len(rows)} patterns agree")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="gemmlab/data/bank_measurements.json")
    ap.add_argument("--dry-run", action="store_true", help="compile only, no GPU")
    ap.add_argument("--run-only", action="store_true",
                    help="compile and launch every kernel once without ncu (a quick GPU self-check)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_kernels(Path(args.child).read_bytes(), args.count)
        return 0
    pats = patterns()
    t0 = time.perf_counter()
    cubin = compile_cubin(kernel_source(pats))
    print(f"{len(pats)} patterns; compiled for {ARCH} in {time.perf_counter() - t0:.2f} s")
    if args.dry_run:
        for p in pats:
            wf, cf = predict(p, banks.DEFAULT_MODEL)
            print(f"{p.name:34s} model wavefronts {wf:3d} conflicts {cf:3d}")
        return 0
    if args.run_only:
        run_kernels(cubin, len(pats))
        print(f"all {len(pats) + 1} kernels ran")
        return 0
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bank_validation_{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    cubin_path = work / "kernels.cubin"
    cubin_path.write_bytes(cubin)
    meas = measure(pats, cubin_path, work / "ncu.csv")
    rows = rows_from_measurements(pats, meas)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "arch": ARCH, "tool": "ncu --clock-control none", "metrics": list(METRICS.values()),
        "baseline": meas.get(f"{KERNEL_PREFIX}baseline", {}), "patterns": rows}, indent=1))
    print(f"wrote {len(rows)} measurements to {out} ({time.perf_counter() - t0:.1f} s)")
    bad = report(rows)
    if len(rows) != len(pats):
        print(f"{len(pats) - len(rows)} patterns have no measurement")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
