#!/usr/bin/env python3
"""How fast can the tensor-core instructions themselves go on this GPU, and how close do the course's
GEMMs and cuBLAS get? The ceiling behind every speed target, measured in one run.

    python benchmarks/tensor_ceilings.py                        # fp16 + bf16, 4096³ and 8192³, 2 s each
    python benchmarks/tensor_ceilings.py --kernels gemm06_cpp --dtypes float16 --seconds 1

Two loops that do nothing but tensor-core math on data already in place:

* ``mma.sync`` (m16n8k16, fp32 accumulate): the instruction of notebooks 04–06 and, under WMMA, of
  the raw-CUDA ladder. Each warp keeps eight independent accumulators, so no instruction waits for
  the one before it.
* ``wgmma`` (m64n256k16, both operands in 128-byte-swizzled shared memory, fp32 accumulate): the
  instruction of notebooks 07 and 09 and of cuBLAS's Hopper kernels. Two warpgroups per SM issue
  four per k-tile, commit, and keep one group in flight, as a real main loop does.

Each loop and each GEMM runs back to back for ``--seconds`` while ``nvidia-smi`` samples the SM clock
and power (benchmarks/clocks.py). A kernel's *rate per clock* (FMA per SM per cycle) divided by its
instruction's rate per clock says how well it feeds the tensor cores; the instruction's rate per
clock times the kernel's own clock is the fastest that kernel's instruction could go at that clock.
Divided by cuBLAS's TFLOPS in the same run, that is the highest ratio to cuBLAS the instruction
allows: a target above it cannot be met by tuning, only by a different instruction or a higher clock.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import clocks  # noqa: E402  (sustained timing with clock and power samples; solution kernels)

MMA_CHAINS = 8                  # independent accumulators per warp in the mma.sync loop
MMA_WARPS, MMA_CTAS_PER_SM = 8, 2
MMA_FMA = 16 * 8 * 16           # one m16n8k16
WGMMA_N, WGMMA_K_STEPS = 256, 4  # m64n256k16, four per 64-wide k-tile
WGMMA_WARPGROUPS = 2
WGMMA_FMA = 64 * WGMMA_N * 16
WGMMA_SMEM = 1024 + (WGMMA_WARPGROUPS * 64 + WGMMA_N) * 64 * 2   # alignment slack + A tiles + B tile
PTX_TYPE = {"float16": "f16", "bfloat16": "bf16"}
#: The tensor-core instruction each GEMM is built on (cuBLAS's H100 kernels use wgmma).
INSTRUCTION = {"cuBLAS": "wgmma", "gemm05_cpp": "mma.sync", "gemm05_dsl": "mma.sync", "gemm06_cpp": "mma.sync",
               "gemm06_dsl": "mma.sync", "ladder_wmma": "mma.sync", "ladder_dbuf": "mma.sync",
               "ladder_swizzle": "mma.sync", "ladder_any": "mma.sync", "hopper_pipelined": "wgmma",
               "hopper_ws_one_tile_per_cta": "wgmma", "hopper_ws_persistent": "wgmma", "hopper_ws": "wgmma"}
DEFAULT_KERNELS = ["gemm06_cpp", "gemm06_dsl", "ladder_any", "hopper_ws"]


def mma_sync_source(dtype: str) -> str:
    """CUDA C++ of ``mma_sync_loop``: MMA_CHAINS independent m16n8k16 chains per warp, operands in registers."""
    t = PTX_TYPE[dtype]
    return rf"""
extern "C" __global__ void __launch_bounds__({32 * MMA_WARPS})
mma_sync_loop(const unsigned* bits, float* out, int iters)
{{
    // Two sets of A fragments from random data, alternated, so the tensor cores see changing bits.
    const int lane = threadIdx.x % 32;
    unsigned a[2][4], b[2];
    for (int s = 0; s < 2; ++s)
        for (int r = 0; r < 4; ++r) a[s][r] = bits[(s * 4 + r) * 32 + lane];
    b[0] = bits[256 + lane];
    b[1] = bits[288 + lane];
    float d[{MMA_CHAINS}][4] = {{}};
    for (int i = 0; i < iters; ++i) {{
#pragma unroll
        for (int c = 0; c < {MMA_CHAINS}; ++c)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 "
                         "{{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};\n"
                         : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                         : "r"(a[c % 2][0]), "r"(a[c % 2][1]), "r"(a[c % 2][2]), "r"(a[c % 2][3]),
                           "r"(b[0]), "r"(b[1]));
    }}
    float sum = 0.0f;
    for (int c = 0; c < {MMA_CHAINS}; ++c) sum += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;   // keeps the loop alive
}}
"""


def wgmma_source(dtype: str) -> str:
    """CUDA C++ of ``wgmma_loop`` (sm_90a): each warpgroup runs the k-loop of a 64 x 256 tile on a
    fixed 64-wide k-tile of its own A and a shared B in shared memory (128-byte swizzle)."""
    t = PTX_TYPE[dtype]
    acc = WGMMA_N // 2          # fp32 accumulators per thread for m64nN
    regs = ",".join(f"%{i}" for i in range(acc))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(acc))
    return rf"""
// K-major operand, 128-byte swizzle: rows of 64 elements (128 B), 8-row groups 1024 B apart.
__device__ __forceinline__ unsigned long long smem_desc(unsigned address)
{{
    return (unsigned long long)((address & 0x3FFFF) >> 4) | ((unsigned long long)1 << 16) | ((unsigned long long)(1024 >> 4) << 32)
           | ((unsigned long long)1 << 62);
}}

extern "C" __global__ void __launch_bounds__({128 * WGMMA_WARPGROUPS}, 1)
wgmma_loop(const uint4* bits, float* out, int iters)
{{
    extern __shared__ unsigned char raw[];
    unsigned base = (unsigned)__cvta_generic_to_shared(raw);
    const unsigned pad = (1024 - base % 1024) % 1024;           // the 128-byte swizzle wants 1 KB alignment
    uint4* tiles = reinterpret_cast<uint4*>(raw + pad);
    const int words = ({WGMMA_WARPGROUPS} * 64 + {WGMMA_N}) * 64 * 2 / 16;
    for (int i = threadIdx.x; i < words; i += blockDim.x) tiles[i] = bits[i];
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // generic-proxy writes -> wgmma
    __syncthreads();
    const int wg = threadIdx.x / 128;
    const unsigned long long a = smem_desc(base + pad + wg * 64 * 128);
    const unsigned long long b = smem_desc(base + pad + {WGMMA_WARPGROUPS} * 64 * 128);
    float d[{acc}];
    for (int i = 0; i < {acc}; ++i) d[i] = 0.0f;
    for (int it = 0; it < iters; ++it) {{
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int k = 0; k < {WGMMA_K_STEPS}; ++k)      // 16 elements = 32 B further along k each step
            asm volatile("{{\n.reg .pred p;\nsetp.ne.b32 p, %{acc + 2}, 0;\n"
                         "wgmma.mma_async.sync.aligned.m64n{WGMMA_N}k16.f32.{t}.{t} "
                         "{{{regs}}}, %{acc}, %{acc + 1}, p, 1, 1, 0, 0;\n}}\n"
                         : {outs}
                         : "l"(a + 2 * k), "l"(b + 2 * k), "r"(1));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    }}
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    float sum = 0.0f;
    for (int i = 0; i < {acc}; ++i) sum += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}}
"""


@dataclass
class Loop:
    """One instruction loop, ready to launch: ``flops`` per call at ``iters`` iterations."""

    instruction: str
    kernel: object
    grid: int
    block: int
    smem: int
    iters: int

    @property
    def flops(self) -> float:
        if self.instruction == "mma.sync":
            return 2.0 * self.grid * (self.block // 32) * self.iters * MMA_CHAINS * MMA_FMA
        return 2.0 * self.grid * (self.block // 128) * self.iters * WGMMA_K_STEPS * WGMMA_FMA


def build_loops(dtype: str, arch: str, sms: int) -> list[Loop]:
    """The two instruction loops for ``dtype``, compiled for ``arch``, sized to take a few ms per call."""
    import gemmlab

    mma = gemmlab.compile(mma_sync_source(dtype), "mma_sync_loop", arch=arch)
    loops = [Loop("mma.sync", mma, sms * MMA_CTAS_PER_SM, 32 * MMA_WARPS, 0, 8192)]
    if arch.startswith("sm_90"):
        wg = gemmlab.compile(wgmma_source(dtype), "wgmma_loop", arch=arch)
        loops.append(Loop("wgmma", wg, sms, 128 * WGMMA_WARPGROUPS, WGMMA_SMEM, 4096))
    return loops


@dataclass
class Row:
    what: str
    dtype: str
    shape: str
    instruction: str
    tflops: float
    clock_mhz: float | None
    power_w: float | None
    power_cap: float | None
    fma_per_clk_sm: float | None


def measure(what: str, dtype: str, shape: str, instruction: str, fn, flops: float, seconds: float, sms: int) -> Row:
    ms, s, _ = clocks.sustained(fn, seconds)
    tflops = flops / ms / 1e9
    clock = s.get("clock_mhz")
    per_clk = flops / 2 / (ms * 1e-3) / (sms * clock * 1e6) if clock else None
    return Row(what, dtype, shape, instruction, tflops, clock, s.get("power_w"), s.get("power_cap"), per_clk)


def table(rows: list[Row], sms: int) -> str:
    """Markdown: every row with its share of its instruction's per-clock peak, its ratio to cuBLAS
    (same dtype and shape, same run) and the ratio its instruction allows at its clock."""
    peaks = {(r.instruction, r.dtype): r.fma_per_clk_sm for r in rows if r.shape == "loop" and r.fma_per_clk_sm}
    cublas = {(r.dtype, r.shape): r for r in rows if r.what == "cuBLAS"}
    out = ["| what | dtype | shape | instruction | TFLOPS | SM MHz | W | power cap | FMA/clk/SM | of peak/clk "
           "| × cuBLAS | most the instruction allows at this clock |",
           "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def f(v, fmt):
        return "?" if v is None else format(v, fmt)

    for r in rows:
        peak = peaks.get((r.instruction, r.dtype))
        share = r.fma_per_clk_sm / peak if peak and r.fma_per_clk_sm else None
        ref = cublas.get((r.dtype, r.shape))
        ratio = r.tflops / ref.tflops if ref and r.shape != "loop" else None
        allows = (2 * peak * r.clock_mhz * 1e6 * sms / 1e12 / ref.tflops
                  if peak and r.clock_mhz and ref and r.shape != "loop" else None)
        out.append(f"| {r.what} | {r.dtype} | {r.shape} | {r.instruction} | {r.tflops:.1f} | {f(r.clock_mhz, '.0f')} "
                   f"| {f(r.power_w, '.0f')} | {f(r.power_cap, '.0%')} | {f(r.fma_per_clk_sm, '.0f')} "
                   f"| {f(share, '.0%')} | {f(ratio, '.3f')} | {f(allows, '.3f')} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="*", default=DEFAULT_KERNELS, help="solution kernels to place beside the loops")
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--shapes", default="4096,8192", help="M = N = K of the GEMMs, comma-separated")
    parser.add_argument("--seconds", type=float, default=2.0, help="back-to-back running time of each row")
    parser.add_argument("--out", type=Path, default=None, help="folder for tensor_ceilings.json")
    args = parser.parse_args(argv)

    import torch

    from gemmlab.running.gpu import has_gpu

    if not has_gpu():  # gemmlab.running.gpu is the one place that asks (GEMMLAB_HIDE_GPU included)
        print("tensor_ceilings.py needs a CUDA GPU")
        return 2
    from gemmlab.running.gpu import current_arch

    unknown = [k for k in args.kernels if k not in INSTRUCTION]
    if unknown:
        parser.error(f"no instruction recorded for {', '.join(unknown)}: choose from {', '.join(sorted(INSTRUCTION))}")
    arch = current_arch()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gemms = clocks.square_gemms(args.kernels)
    device = torch.cuda.get_device_name()
    print(f"{device}, {sms} SMs, {arch}; {args.seconds:.1f} s of back-to-back calls per row\n", flush=True)
    rows: list[Row] = []
    for dt in args.dtypes.split(","):
        dtype = getattr(torch, dt)
        bits = torch.randn(1 << 16, device="cuda").to(dtype).view(torch.int32)   # random 16-bit floats, packed
        for loop in build_loops(dt, arch, sms):
            out = torch.empty(loop.grid * loop.block, device="cuda")
            fn = (lambda lp=loop: lp.kernel(bits, out, lp.iters, grid=lp.grid, block=lp.block, smem=lp.smem))
            rows.append(measure(f"{loop.instruction} loop", dt, "loop", loop.instruction, fn, loop.flops,
                                args.seconds, sms))
            print(table(rows[-1:], sms).splitlines()[-1], flush=True)
        for n in (int(x) for x in args.shapes.split(",")):
            A = torch.randn(n, n, device="cuda").to(dtype)
            B = torch.randn(n, n, device="cuda").to(dtype)
            D = torch.empty(n, n, device="cuda", dtype=dtype)
            for name, gemm in {"cuBLAS": None, **gemms}.items():
                call = (lambda: torch.matmul(A, B.t(), out=D)) if gemm is None else (lambda g=gemm: g(A, B, D))
                try:
                    rows.append(measure(name, dt, f"{n}³", INSTRUCTION[name], call, 2.0 * n ** 3, args.seconds, sms))
                except Exception as err:  # noqa: BLE001 - e.g. an fp16-only kernel given bf16: say so, go on
                    print(f"{name} {dt} {n}³ skipped: {str(err).splitlines()[0]}", flush=True)
                    continue
                print(table(rows[-1:], sms).splitlines()[-1], flush=True)
    print(f"\n{device}\n")
    print(table(rows, sms))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "tensor_ceilings.json").write_text(json.dumps(
            {"device": device, "sms": sms, "rows": [asdict(r) for r in rows]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
