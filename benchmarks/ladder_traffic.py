"""Where the CUDA ladder's memory traffic goes: Nsight Compute counters of rungs 3-6 at 4096³ against the ideal.

Run on a GPU machine with ncu (on PATH or at /usr/local/cuda/bin/ncu):

    python3 benchmarks/ladder_traffic.py [--shape 4096] [--out traffic.json] [--set PAD=0 ...]

``--set KEY=VALUE`` changes that compile-time constant in every rung whose config has it (e.g.
``--set PAD=0`` to see what the padded shared-memory rows of rungs 5 and 6 cost in L2 traffic).

Each rung of notebook 08's solutions (``tools/solution_cells.py``) runs once, C = A·B with beta = 0,
in a child process under ONE ncu invocation. For each kernel it prints, in 32-byte sectors:

- global loads (plain and ``cp.async``) that L1 handled, against the ideal for its CTA tile: every
  CTA reads its BM×K strip of A and K×BN strip of B once, so A is read ⌈N/BN⌉ times and B ⌈M/BM⌉;
- sectors L1 asked L2 for (what reached L2), and DRAM bytes read;
- global stores against the ideal (C written once), and local-memory sectors (spills and arrays
  the compiler could not keep in registers);
- shared-memory bank conflicts.

The ratios say which part of a kernel's traffic is excess and where it comes from.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import ncu  # noqa: E402  (benchmarks/ncu.py: running ncu and reading its CSV)

ASSIGNMENT = "08_cuda_ladder"
TAGS = ["kernel:ladder_launch", "kernel:ladder_naive", "kernel:ladder_smem", "kernel:ladder_wmma_common",
        "kernel:ladder_wmma", "kernel:ladder_pipe", "kernel:ladder_swizzle_src", "kernel:ladder_any"]
#: Rung -> the notebook's config dict that sets its CTA tile.
RUNGS = {"ladder_wmma": "WMMA_CONFIG", "ladder_dbuf": "DBUF_CONFIG", "ladder_swizzle": "SWIZZLE_CONFIG",
         "ladder_any": "ANY_CONFIG"}
METRICS = {
    "global_ld": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_ldgsts": "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
    "l2_read_from_l1": "lts__t_sectors_srcunit_tex_op_read.sum",
    "l2_read_requests_from_l1": "lts__t_requests_srcunit_tex_op_read.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "global_st": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "local_ld": "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
    "local_st": "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "smem_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "smem_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
}
SECTOR = 32


def child(size: int, settings: dict[str, int]) -> None:
    """Run every rung once on size³ fp16 (ncu profiles these launches), with ``settings`` applied."""
    import torch

    import solution_cells

    ns = solution_cells.load_namespace(ASSIGNMENT, TAGS)
    for rung in RUNGS:
        changes = {k: v for k, v in settings.items() if k in ns[rung].config}
        if changes:
            ns[rung].configure(**changes)
    A = torch.randn(size, size, device="cuda").half()
    B = torch.randn(size, size, device="cuda").half()
    for rung in RUNGS:
        C = torch.empty(size, size, device="cuda").half()
        ns[rung](A, B, C, 1.0, 0.0)
        torch.cuda.synchronize()
    configs = {rung: {k: ns[rung].config.get(k, ns[name][k]) for k in ("BM", "BN", "BK", "PAD") if k in ns[name]}
               for rung, name in RUNGS.items()}
    print("CONFIGS " + json.dumps(configs), flush=True)


def parse_settings(items: list[str]) -> dict[str, int]:
    """``["PAD=0", "STAGES=3"]`` -> ``{"PAD": 0, "STAGES": 3}``; SystemExit with the reason for a bad item."""
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        if not key.isidentifier() or not re.fullmatch(r"-?[0-9]+", value.strip()):
            raise SystemExit(f"--set {item!r}: expected KEY=INTEGER, e.g. PAD=0")
        out[key] = int(value)
    return out


def profile(size: int, settings: dict[str, int] | None = None) -> tuple[list[dict[str, float]], dict]:
    """Counters of each profiled ladder launch in call order, and the rungs' tile configs."""
    sets = [f"--set={k}={v}" for k, v in (settings or {}).items()]
    child = [sys.executable, __file__, "--child", "--shape", str(size), *sets]
    launches, stdout = ncu.profile(child, METRICS, ["--kernel-name", "regex:ladder_"], timeout=1200)
    configs = json.loads(next(line[len("CONFIGS "):] for line in stdout.splitlines() if line.startswith("CONFIGS ")))
    return launches, configs


def ideal_sectors(size: int, cfg: dict, elem: int = 2) -> tuple[float, float]:
    """(global load sectors, global store sectors) of one size³ GEMM with this CTA tile, each byte once per CTA."""
    M = N = K = size
    load = elem * (M * K * math.ceil(N / cfg["BN"]) + K * N * math.ceil(M / cfg["BM"]))
    return load / SECTOR, elem * M * N / SECTOR


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, default=4096, help="M = N = K")
    p.add_argument("--out", type=Path, default=None, help="write the counters as JSON")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                   help="change this constant in every rung that has it (repeatable), e.g. PAD=0")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    settings = parse_settings(args.settings)
    if args.child:
        child(args.shape, settings)
        return
    launches, configs = profile(args.shape, settings)
    if len(launches) != len(RUNGS):
        raise SystemExit(f"expected {len(RUNGS)} profiled ladder launches, got {len(launches)}: {launches}")
    changed = f", with {', '.join(args.settings)}" if args.settings else ""
    print(f"The ladder's memory traffic at {args.shape}³ fp16, beta = 0 (Nsight Compute, 32-byte sectors){changed}\n")
    print("| rung | tile BM×BN×BK, PAD | global loads / ideal | L1→L2 reads / ideal | DRAM read / ideal bytes | "
          "sectors per L2 read request | stores / ideal | local ld + st sectors | smem conflicts / wavefronts |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    out = {}
    for (rung, cfg), got in zip(configs.items(), launches):
        load, store = ideal_sectors(args.shape, cfg)
        counted = lambda *names: sum(v for v in (got.get(n, math.nan) for n in names) if not math.isnan(v))  # noqa: E731
        loads = counted("global_ld", "global_ldgsts")
        local = counted("local_ld", "local_st")
        conflicts = got.get("smem_conflicts", math.nan) / max(got.get("smem_wavefronts", math.nan), 1)
        print(f"| {rung} | {cfg['BM']}×{cfg['BN']}×{cfg['BK']}, {cfg.get('PAD', 0)} | {loads / load:.2f} | "
              f"{got.get('l2_read_from_l1', math.nan) / load:.2f} | "
              f"{got.get('dram_read_bytes', math.nan) / (2 * 2 * args.shape ** 2):.2f} | "
              f"{got.get('l2_read_from_l1', math.nan) / max(got.get('l2_read_requests_from_l1', math.nan), 1):.2f} | "
              f"{got.get('global_st', math.nan) / store:.2f} | {local:,.0f} | {conflicts:.2f} |")
        out[rung] = {"config": cfg, "ideal_load_sectors": load, "ideal_store_sectors": store, **got}
    print("\nideal loads: A read once per CTA column and B once per CTA row; DRAM ideal: A and B read once.")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
        print(f"saved {args.out}")


if __name__ == "__main__":
    main()
