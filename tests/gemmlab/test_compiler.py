"""NVRTC compiles for real (no GPU needed with an explicit arch), names, cache, and GPU runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gemmlab
from gemmlab.compiling.compiler import Compiled, compile_to
from gemmlab.errors import CompileError, NoGPUError

from tests.support import KERNELS, ROOT
CUTE_GEMM = (KERNELS / "cute_gemm.cu").read_text()
WMMA_GEMM = (KERNELS / "wmma_gemm.cu").read_text()

SCALE = """\
__global__ void __launch_bounds__(256) scale(float* x, float a, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) x[i] = a * tile[threadIdx.x];
}
"""


def test_compiled_record_for_a_raw_kernel() -> None:
    c = compile_to(SCALE, "scale", arch="sm_90a", use_cache=False)
    assert isinstance(c, Compiled) and not c.cached
    assert c.lowered_name == "_Z5scalePffi"  # no extern "C": found through its mangled name
    assert f".entry {c.lowered_name}(" in c.ptx and ".target sm_90a" in c.ptx
    assert c.cubin[:4] == b"\x7fELF"
    assert [p.name for p in c.params] == ["x", "a", "n"]
    assert c.resources.static_smem_bytes == 1024 and c.resources.registers > 0
    assert c.resources.max_threads_per_block == 256  # from __launch_bounds__
    assert c.resources.barriers == 1
    assert c.compile_seconds > 0 and c.log == ""
    assert "--gpu-architecture=sm_90a" in c.options and "-std=c++17" in c.options


def test_cubin_is_a_whole_elf_image() -> None:
    """Every header the ELF header points at lies inside the cubin (a cut cubin still loads,
    but cuobjdump and nvdisasm reject it, so SASS could not be shown)."""
    import struct

    cubin = compile_to(SCALE, "scale", arch="sm_90a", use_cache=False).cubin
    phoff, shoff = struct.unpack_from("<QQ", cubin, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", cubin, 0x36)
    assert phoff + phentsize * phnum <= len(cubin)
    assert shoff + shentsize * shnum <= len(cubin)


def test_ptx_only_for_a_virtual_arch() -> None:
    c = compile_to(SCALE, "scale", arch="compute_90a", use_cache=False)
    assert c.cubin == b"" and ".target sm_90a" in c.ptx
    assert c.resources.max_threads_per_block == 256


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
def test_wmma_gemm_compiles(arch: str) -> None:
    c = compile_to(WMMA_GEMM, "wmma_gemm", arch=arch, use_cache=False)
    assert c.cubin[:4] == b"\x7fELF"
    assert [(p.name, p.dtype) for p in c.params] == [("A", "float16"), ("B", "float16"), ("D", "float16"),
                                                     ("M", "int32"), ("N", "int32"), ("K", "int32")]
    assert "mma.sync" in c.ptx or "wmma.mma" in c.ptx
    assert c.resources.spill_stores_bytes == 0 and c.resources.static_smem_bytes > 0


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])   # sm_90 is covered by the WMMA kernel above (45 s less)
def test_cute_gemm_compiles(arch: str) -> None:
    c = compile_to(CUTE_GEMM, "gemm", arch=arch, use_cache=False)
    assert c.cubin[:4] == b"\x7fELF"
    assert "mma.sync.aligned.m16n8k16" in c.ptx and "ldmatrix" in c.ptx and "cp.async" in c.ptx
    assert c.resources.static_smem_bytes == 2 * 128 * 64 * 2
    assert c.resources.spill_stores_bytes == 0 and c.resources.max_threads_per_block == 128
    assert [p.dtype for p in c.params] == ["float16", "float16", "float16", "int32", "int32", "int32"]


def test_extern_c_and_two_kernels() -> None:
    source = 'extern "C" __global__ void first(int* x) { x[0] = 1; }\n__global__ void second(int* x) { x[0] = 2; }\n'
    assert compile_to(source, "first", arch="sm_80", use_cache=False).lowered_name == "first"
    second = compile_to(source, "second", arch="sm_80", use_cache=False)
    assert second.lowered_name == "_Z6secondPi"
    assert ".entry first(" in second.ptx  # both are in the module; the name picks one


def test_name_that_is_not_there_lists_the_kernels() -> None:
    source = "__global__ void alpha(int* x) {}\n__global__ void beta(int* x) {}\n"
    with pytest.raises(CompileError, match=r"no __global__ kernel named 'gamma'.*alpha, beta"):
        compile_to(source, "gamma", arch="sm_80")
    with pytest.raises(CompileError, match="Kernels found: none"):
        compile_to("__device__ int f() { return 1; }\n", "f", arch="sm_80")


def test_template_kernels() -> None:
    source = "template <int N, class T> __global__ void fill(T* x) { x[threadIdx.x] = T(N); }\n"
    c = compile_to(source, "fill<7, float>", arch="sm_90a", use_cache=False)
    assert c.lowered_name == "_Z4fillILi7EfEvPT0_" and c.params[0].kind == "pointer"
    with pytest.raises(CompileError, match=r"template kernel: name one instantiation, e.g. name='fill<128>'"):
        compile_to(source, "fill", arch="sm_90a")
    with pytest.raises(CompileError, match="could not resolve the kernel name 'fill<7>'"):
        compile_to(source, "fill<7>", arch="sm_90a", use_cache=False)


def test_kernel_name_shared_with_a_library_function() -> None:
    # `using namespace cute;` makes cute::gemm visible too; the kernel must still be found.
    source = ("namespace lib { template <class T> __device__ void gemm(T, T) {} }\nusing namespace lib;\n"
              "__global__ void gemm(float* x) { x[0] = 0; }\n")
    assert compile_to(source, "gemm", arch="sm_80", use_cache=False).lowered_name == "_Z4gemmPf"


def test_bad_arch_option_and_include_dir() -> None:
    with pytest.raises(CompileError, match="not a GPU target"):
        compile_to(SCALE, "scale", arch="hopper")
    with pytest.raises(CompileError, match="NVRTC rejected an option"):
        compile_to(SCALE, "scale", arch="sm_90a", options=["--no-such-option"], use_cache=False)
    with pytest.raises(CompileError, match="does not exist"):
        compile_to(SCALE, "scale", arch="sm_90a", include_dirs=["/no/such/dir"])


def test_no_arch_without_gpu_says_to_pass_arch(no_gpu: None) -> None:
    with pytest.raises(NoGPUError, match="arch="):
        compile_to(SCALE, "scale")


def test_user_options_and_include_dirs(tmp_path: Path) -> None:
    (tmp_path / "tile.h").write_text("#define TILE 64\n")
    source = '#include "tile.h"\n__global__ void k(int* x) { x[0] = TILE * SCALE_BY; }\n'
    c = compile_to(source, "k", arch="sm_80", options=["-DSCALE_BY=3"], include_dirs=[tmp_path])
    assert "192" in c.ptx
    # Editing a header in a user include folder invalidates the cache.
    time.sleep(0.01)
    (tmp_path / "tile.h").write_text("#define TILE 32\n")
    again = compile_to(source, "k", arch="sm_80", options=["-DSCALE_BY=3"], include_dirs=[tmp_path])
    assert not again.cached and "96" in again.ptx


def test_cache_hit_is_fast_and_returns_a_kernel(private_cache: Path) -> None:
    source = SCALE + "// cache test\n"
    cold = gemmlab.compile(source, "scale", arch="sm_90a")
    start = time.process_time()       # CPU seconds: a busy machine's waits do not count
    warm = gemmlab.compile(source, "scale", arch="sm_90a")
    elapsed = time.process_time() - start
    assert isinstance(warm, gemmlab.Kernel)
    assert warm.cached and not cold.cached
    assert elapsed < 1.0  # the target is < 0.2 s of CPU
    assert warm.cubin == cold.cubin and warm.ptx == cold.ptx
    assert warm.resources == cold.resources and list(warm.params) == list(cold.params)
    # Anything that changes the output misses the cache.
    assert not compile_to(source, "scale", arch="sm_80").cached
    assert not compile_to(source, "scale", arch="sm_90a", options=["-DX=1"]).cached
    assert not compile_to(source, "scale", arch="sm_90a", use_cache=False).cached


def test_cache_hit_needs_neither_nvrtc_nor_torch(tmp_path: Path) -> None:
    """A fresh process re-running an unchanged cell must not pay for NVRTC or torch."""
    repo = str(ROOT)
    env = {**os.environ, "GEMMLAB_CACHE": str(tmp_path),
           "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    script = (
        "import json, sys, time\n"
        "t = time.process_time()\n"
        "import gemmlab\n"
        f"k = gemmlab.compile({SCALE!r}, 'scale', arch='sm_90a')\n"
        "print(json.dumps({'cached': k.cached, 'seconds': time.process_time() - t,\n"
        "  'nvrtc': 'cuda.bindings.nvrtc' in sys.modules, 'torch': 'torch' in sys.modules}))\n"
    )
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      check=True).stdout) for _ in range(2)]
    assert runs[0]["cached"] is False and runs[1]["cached"] is True
    assert runs[1]["nvrtc"] is False and runs[1]["torch"] is False
    assert runs[1]["seconds"] < 1.0


def test_corrupt_cache_entry_recompiles(private_cache: Path) -> None:
    from gemmlab.compiling import cache

    source = SCALE + "// corrupt\n"
    compile_to(source, "scale", arch="sm_90a")
    folder = cache.cache_root() / "nvrtc"
    for entry in folder.rglob("*"):
        if entry.is_file() and source.encode()[:10] and b'"name": "scale"' in entry.read_bytes():
            entry.write_bytes(b"{torn")
    again = compile_to(source, "scale", arch="sm_90a")
    assert not again.cached and again.cubin[:4] == b"\x7fELF"


# --------------------------------------------------------------------------- GPU


def _launcher(kernel, tile: int):
    def fn(A, B, D):
        M, K = A.shape
        N = B.shape[0]
        kernel(A, B, D, M, N, K, grid=((M + tile - 1) // tile, (N + tile - 1) // tile), block=128)
    return fn


@pytest.mark.gpu
def test_gpu_compile_for_this_gpu_and_run_wmma_gemm() -> None:
    from gemmlab.running.gpu import current_arch

    kernel = gemmlab.compile(WMMA_GEMM, "wmma_gemm")
    assert kernel.arch == current_arch()
    result = gemmlab.check_gemm(_launcher(kernel, 64))
    print(result)
    assert result.passed, str(result)


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_cute_gemm_passes_the_default_suite() -> None:
    kernel = gemmlab.compile(CUTE_GEMM, "gemm")
    result = gemmlab.check_gemm(_launcher(kernel, 128))
    print(result)
    assert result.passed, str(result)


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_cute_gemm_odd_suite_and_speed() -> None:
    kernel = gemmlab.compile(CUTE_GEMM, "gemm")
    fn = _launcher(kernel, 128)
    result = gemmlab.check_gemm(fn, shapes="odd")
    assert result.passed, str(result)
    bench = gemmlab.bench_gemm(fn, shape=(4096, 4096, 4096), label="tests/kernels/cute_gemm.cu")
    print(bench)
