"""fast.cu's fastest Hopper GEMM (kernel 12) from a checkout, built with nvcc, as a gemmlab GEMM function.

A public reference for ``benchmarks/solutions.py --fastcu PATH`` (pranjalssh/fast.cu, whose worklog
reports 1.07× cuBLAS at 4096³ on an H100): ``examples/matmul/matmul_12.cuh`` is compiled as it is in the
checkout (nothing of it is copied here) into a shared library together with a small launcher of ours,
and called through ctypes on torch's current stream as ``fn(A, B, D)`` with gemmlab's "tn" convention
(A M×K, B N×K, D = A·Bᵀ M×N, all row-major), so ``check_gemm`` and ``bench_gemm`` time it exactly like
the course's kernels.

Why a launcher of ours instead of the file's ``runKernel12``: that one encodes its TMA descriptors once
per M and keeps them, so a later call with other buffers (every check, every rotated operand of NVIDIA's
method) would read and write the first call's; ours keeps descriptors per buffer triple and the file's
tile schedule per shape. Kernel 12 computes C (its N × its M, row-major) = A·Bᵀ with its A M×K and B N×K,
which is gemmlab's D = A·Bᵀ with the two operands swapped, so the launcher passes (B, A) for (A, B). It
takes bf16 only, and whole tiles: M and N multiples of 256, K a multiple of 64. nvcc 13.0 builds it only
with ``-DNDEBUG`` (an assert names a variable that does not exist) and with ``--generate-code``
(plain ``-arch=sm_90a`` failed): /work/shared/FACTS.md.
"""
from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

#: The kernel's file in a fast.cu checkout.
HEADER = Path("examples/matmul/matmul_12.cuh")
LABEL = "fastcu_12"
DTYPES = ["bfloat16"]
#: Whole tiles only (M, N multiples of 256; K of 64), for its correctness check.
CHECK_SHAPES = [(256, 256, 64), (512, 256, 128), (256, 768, 1024), (1024, 1024, 64), (4096, 4096, 4096)]
NVCC_FLAGS = ["-O3", "-DNDEBUG", "-std=c++17", "--generate-code", "arch=compute_90a,code=[compute_90a,sm_90a]",
              "-shared", "-Xcompiler", "-fPIC"]
SYMBOL = "gemmlab_fastcu12_tn"

#: Our launcher; ``{header}`` is the checkout's matmul_12.cuh (the includes are what fast.cu's matmul.cu gives it).
LAUNCHER = r"""// Built by gemmlab's benchmarks/fastcu_reference.py: fast.cu's kernel 12 with a launcher that keeps TMA
// descriptors per buffer triple (the file's runKernel12 keeps the first call's) and runs on the caller's stream.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda/barrier>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>
#include <ctime>
#include <iostream>
#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>
#include <cuda_bf16.h>
#include <cassert>

typedef __nv_bfloat16 bf16;
#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))
static int gemmlab_first_error = 0;
#define cudaCheck(err) do { cudaError_t e_ = (err); if (e_ != cudaSuccess && !gemmlab_first_error) \
    gemmlab_first_error = (int)e_; } while (0)

#include "{header}"

namespace {
constexpr int BM = 128, BN = 256, BK = 64, NUM_THREADS = 128 * 3, QSIZE = 3, CLUSTER_M = 2, CLUSTER_N = 1;
constexpr int NUM_SM = 128, NUM_CONSUMERS = NUM_THREADS / 128 - 1;
struct Maps { CUtensorMap a, b, c; };
std::map<std::tuple<const void*, const void*, const void*, int, int, int>, Maps> maps;
std::map<std::pair<int, int>, int*> schedules;
}

// D (M x N) = A (M x K) . B^T (B: N x K), all row-major: kernel 12 with its M = N, its N = M, its A = B, its B = A.
extern "C" int gemmlab_fastcu12_tn(int M, int N, int K, const void* A, const void* B, void* D, void* stream) {
    using namespace M12;
    const int fm = N, fn = M;
    bf16* fa = (bf16*)B;
    bf16* fb = (bf16*)A;
    bf16* fc = (bf16*)D;
    gemmlab_first_error = 0;
    auto key = std::make_tuple((const void*)fa, (const void*)fb, (const void*)fc, fm, fn, K);
    auto found = maps.find(key);
    if (found == maps.end()) {
        if (maps.size() > 64) maps.clear();
        Maps m;
        m.a = create_tensor_map<BM, BK>(fa, fm, K);
        m.b = create_tensor_map<BN, BK>(fb, fn, K);
        m.c = create_tensor_map<BN, BM / NUM_CONSUMERS, false, true>(fc, fn, fm);
        found = maps.emplace(key, m).first;
    }
    int*& space = schedules[std::make_pair(fm, fn)];
    if (space == nullptr) {
        std::vector<int> host(NUM_SM * SPACE_LEN);
        createHilbert(CEIL_DIV(fm, BM * CLUSTER_M), CEIL_DIV(fn, BN * CLUSTER_N), NUM_SM / CLUSTER_M / CLUSTER_N,
                      host.data());
        cudaCheck(cudaMalloc((void**)&space, sizeof(int) * NUM_SM * SPACE_LEN));
        cudaCheck(cudaMemcpy(space, host.data(), sizeof(int) * NUM_SM * SPACE_LEN, cudaMemcpyHostToDevice));
    }
    auto* kernel = matmulKernel12<BM, BN, BK, NUM_THREADS, QSIZE, NUM_SM, CLUSTER_M, CLUSTER_N>;
    constexpr size_t smem = sizeof(SMem<BM, BN, BK, QSIZE>);
    static bool configured = false;
    if (!configured) {
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        configured = true;
    }
    kernel<<<NUM_SM, NUM_THREADS, smem, (cudaStream_t)stream>>>(fm, fn, K, found->second.c, found->second.a,
                                                                 found->second.b, space);
    cudaCheck(cudaGetLastError());
    return gemmlab_first_error;
}
"""


def header_path(checkout: Path | str) -> Path:
    """The kernel's file in the checkout at ``checkout``; LookupError saying what is missing."""
    path = Path(checkout).expanduser() / HEADER
    if not path.is_file():
        raise LookupError(f"no {HEADER} under {checkout}: pass the root of a fast.cu checkout "
                          "(git clone https://github.com/pranjalssh/fast.cu)")
    return path


def launcher_source(header: Path) -> str:
    """Our launcher around ``header`` (an absolute path: nvcc resolves it as it is)."""
    return LAUNCHER.replace("{header}", str(Path(header).resolve()))


def build(checkout: Path | str, out_dir: Path | str, nvcc: str | None = None, timeout_s: float = 600) -> Path:
    """Compile the kernel and our launcher into a shared library under ``out_dir`` (reused while the source
    and flags are unchanged); LookupError with nvcc's first lines when there is no nvcc or the build fails."""
    header = header_path(checkout)
    nvcc = nvcc or shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists()
                                            else None)
    if nvcc is None:
        raise LookupError("nvcc is not on PATH (nor /usr/local/cuda/bin): fast.cu's kernel is built with the CUDA toolkit")
    source = launcher_source(header)
    digest = hashlib.sha256((source + header.read_text() + " ".join(NVCC_FLAGS)).encode()).hexdigest()[:16]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    library = out / f"fastcu12-{digest}.so"
    if library.is_file():
        return library
    unit = out / f"fastcu12-{digest}.cu"
    unit.write_text(source)
    # -lcuda: the driver's tensor-map encoder; the toolkit's stub library serves where the driver's has no .so link
    root = Path(nvcc).resolve().parents[1]
    stubs = [f"-L{d}" for d in (root / "lib64" / "stubs", root / "targets" / "x86_64-linux" / "lib" / "stubs")
             if d.is_dir()]
    cmd = [nvcc, *NVCC_FLAGS, str(unit), "-o", str(library), *stubs, "-lcuda"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise LookupError(f"nvcc did not finish building fast.cu's kernel 12 in {timeout_s:.0f} s") from None
    if done.returncode != 0 or not library.is_file():
        log = "\n".join((done.stderr or done.stdout).strip().splitlines()[:12])
        raise LookupError(f"nvcc failed to build fast.cu's kernel 12 ({' '.join(cmd)}):\n{log}")
    return library


def gemm_from(library: Path | str) -> Callable[[Any, Any, Any], None]:
    """``fn(A, B, D)`` over the built library, on torch's current stream (bf16, whole tiles)."""
    import torch

    lib = ctypes.CDLL(str(library))
    launch = getattr(lib, SYMBOL)
    launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_void_p]
    launch.restype = ctypes.c_int

    def gemm(A: Any, B: Any, D: Any) -> None:
        M, K = A.shape
        N = B.shape[0]
        if not all(t.dtype == torch.bfloat16 for t in (A, B, D)):
            raise ValueError("fast.cu's kernel 12 takes bf16 operands only")
        if M % 256 or N % 256 or K % 64 or not all(t.is_contiguous() for t in (A, B, D)):
            raise ValueError(f"fast.cu's kernel 12 takes whole tiles (M, N multiples of 256, K of 64) in contiguous "
                             f"tensors, not {M}×{N}×{K}")
        code = launch(M, N, K, A.data_ptr(), B.data_ptr(), D.data_ptr(), torch.cuda.current_stream().cuda_stream)
        if code:
            raise RuntimeError(f"fast.cu's kernel 12 failed to launch: CUDA error {code}")

    return gemm


__all__ = ["CHECK_SHAPES", "DTYPES", "HEADER", "LABEL", "NVCC_FLAGS", "build", "gemm_from", "header_path",
           "launcher_source"]
