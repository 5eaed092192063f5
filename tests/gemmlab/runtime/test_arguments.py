"""Kernel argument binding and launch validation, without a GPU.

The launcher's checks are pure functions (bind_arguments, validate_launch) fed with the
real parameter lists gemmlab.compiling.signature reads from kernel sources.
"""
from __future__ import annotations

import ctypes
import struct

import pytest
import torch

from gemmlab.errors import LaunchError, NoGPUError, ToolchainError
from gemmlab.running.arguments import bind_arguments
from gemmlab.running.launch import LaunchLimits, validate_launch
from gemmlab.compiling.signature import find_kernel, reconcile

GEMM_SRC = """
__global__ void gemm(const half* A, const half* B, half* D, int M, int N, int K) {}
"""
MIXED_SRC = """
extern "C" __global__ void mixed(float* x, unsigned n, float alpha, double beta, bool flag,
                                 half h, __nv_bfloat16 hb, long long big, void* any,
                                 const __grid_constant__ CUtensorMap tmap) {}
"""
CPU = torch.device("cpu")


def params(src: str, name: str):
    decl = find_kernel(src, name)
    sizes = [p.nbytes for p in decl.params]
    if name == "mixed":
        sizes[-1] = 128  # what the PTX .entry says for a CUtensorMap
    return reconcile(decl.params, sizes)


def half_tensors(M=4, N=5, K=8, dtype=torch.float16):
    return (torch.zeros(M, K, dtype=dtype), torch.zeros(N, K, dtype=dtype), torch.zeros(M, N, dtype=dtype))


def test_packs_pointers_and_ints():
    A, B, D = half_tensors()
    packed = bind_arguments(params(GEMM_SRC, "gemm"), (A, B, D, 4, 5, 8), device=CPU, name="gemm")
    assert packed.values[0] == struct.pack("<Q", A.data_ptr())
    assert packed.values[2] == struct.pack("<Q", D.data_ptr())
    assert packed.values[3:] == [struct.pack("<i", 4), struct.pack("<i", 5), struct.pack("<i", 8)]
    # the void** array points at buffers holding exactly those bytes
    array = (ctypes.c_void_p * 6).from_address(packed.address)
    assert ctypes.string_at(array[0], 8) == struct.pack("<Q", A.data_ptr())
    assert ctypes.string_at(array[5], 4) == struct.pack("<i", 8)


def test_packs_every_scalar_kind_and_a_128_byte_struct():
    ps = params(MIXED_SRC, "mixed")
    x = torch.zeros(3)
    tmap = bytes(range(128))
    packed = bind_arguments(ps, (x, 2**32 - 1, 1.5, 2.25, True, 0.5, 1.0, -2**40, None, tmap), device=CPU)
    v = packed.values
    assert v[1] == struct.pack("<I", 2**32 - 1)
    assert v[2] == struct.pack("<f", 1.5) and v[3] == struct.pack("<d", 2.25)
    assert v[4] == b"\x01"
    assert v[5] == struct.pack("<e", 0.5)
    assert v[6] == struct.pack("<H", 0x3F80)  # bfloat16 1.0
    assert v[7] == struct.pack("<q", -2**40)
    assert v[8] == b"\0" * 8  # None -> null pointer
    assert v[9] == tmap
    array = (ctypes.c_void_p * 10).from_address(packed.address)
    assert ctypes.string_at(array[9], 128) == tmap


def test_struct_from_get_ptr_object_and_ctypes_structure():
    ps = params(MIXED_SRC, "mixed")
    raw = (ctypes.c_ubyte * 128)(*range(128))

    class FakeBindingStruct:  # the shape of cuda.bindings structs: getPtr() -> address
        def getPtr(self):
            return ctypes.addressof(raw)

    base = (torch.zeros(1), 1, 1.0, 1.0, False, 1.0, 1.0, 1, None)
    assert bind_arguments(ps, base + (FakeBindingStruct(),), device=CPU).values[9] == bytes(range(128))

    class S(ctypes.Structure):
        _fields_ = [("b", ctypes.c_ubyte * 128)]

    assert bind_arguments(ps, base + (S(),), device=CPU).values[9] == b"\0" * 128
    with pytest.raises(LaunchError, match=r"\(128 bytes\) but the object you passed is 64 bytes"):
        bind_arguments(ps, base + (b"\0" * 64,), device=CPU)


def test_wrong_count_names_the_signature():
    A, B, D = half_tensors()
    with pytest.raises(LaunchError) as info:
        bind_arguments(params(GEMM_SRC, "gemm"), (A, B, D, 4, 5), device=CPU, name="gemm")
    assert "takes 6 arguments but you passed 5" in str(info.value)
    assert "gemm(const half* A, const half* B, half* D, int M, int N, int K)" in str(info.value)


def test_wrong_dtype_says_what_to_do():
    A, B, D = half_tensors()
    with pytest.raises(LaunchError) as info:
        bind_arguments(params(GEMM_SRC, "gemm"), (A, B.float(), D, 4, 5, 8), device=CPU)
    assert str(info.value) == ("argument 2 ('B') is `const half*` (float16) but you passed a float32 tensor: "
                               "use B.half().")


def test_cpu_tensor_for_a_gpu_kernel():
    A, B, D = half_tensors()
    with pytest.raises(LaunchError, match=r"argument 1 \('A'\).*tensor on the CPU.*A.cuda\(\)"):
        bind_arguments(params(GEMM_SRC, "gemm"), (A, B, D, 4, 5, 8), device=torch.device("cuda", 0))


def test_non_contiguous_and_non_tensor_pointers():
    A, B, D = half_tensors(M=8, N=8, K=8)
    with pytest.raises(LaunchError, match=r"not contiguous.*A.contiguous\(\)"):
        bind_arguments(params(GEMM_SRC, "gemm"), (A.T, B, D, 8, 8, 8), device=CPU)
    with pytest.raises(LaunchError, match="pass a torch tensor on the GPU"):
        bind_arguments(params(GEMM_SRC, "gemm"), (A.data_ptr(), B, D, 8, 8, 8), device=CPU)


PITCHED_SRC = """
__global__ void gemm_ld(const half* A, const half* B, half* C, int M, int N, int K, int lda, int ldb, int ldc) {}
"""


def test_padded_rows_need_a_pitch_parameter():
    A = torch.zeros(8, 12, dtype=torch.half)[:, :8]  # rows 12 apart, 8 used
    B, C = torch.zeros(8, 8, dtype=torch.half), torch.zeros(8, 8, dtype=torch.half)
    with pytest.raises(LaunchError, match=r"not contiguous.*only by a kernel that takes their pitch"):
        bind_arguments(params(GEMM_SRC, "gemm"), (A, B, C, 8, 8, 8), device=CPU)
    packed = bind_arguments(params(PITCHED_SRC, "gemm_ld"), (A, B, C, 8, 8, 8, 12, 8, 8), device=CPU)
    assert packed is not None
    for bad in (A.T, torch.zeros(8, 16, dtype=torch.half)[:, ::2], torch.zeros(4, 8, dtype=torch.half).expand(2, 4, 8)):
        with pytest.raises(LaunchError, match="not contiguous"):  # transposed, strided, overlapping rows
            bind_arguments(params(PITCHED_SRC, "gemm_ld"), (bad, B, C, 8, 8, 8, 12, 8, 8), device=CPU)


def test_scalar_errors():
    A, B, D = half_tensors()
    ps = params(GEMM_SRC, "gemm")
    with pytest.raises(LaunchError, match=r"overflows it"):
        bind_arguments(ps, (A, B, D, 2**31, 5, 8), device=CPU)
    with pytest.raises(LaunchError, match=r"an integer\) but you passed float 4.5"):
        bind_arguments(ps, (A, B, D, 4.5, 5, 8), device=CPU)
    with pytest.raises(LaunchError, match=r"a number\) but you passed a tensor"):
        bind_arguments(ps, (A, B, D, torch.tensor(4), 5, 8), device=CPU)
    mixed = params(MIXED_SRC, "mixed")
    with pytest.raises(LaunchError, match=r"range 0 .. 4,294,967,295"):
        bind_arguments(mixed, (None, -1, 1.0, 1.0, True, 1.0, 1.0, 1, None, b"\0" * 128), device=CPU)


def test_validate_launch_accepts_and_normalises():
    assert validate_launch(8, 128, 0, LaunchLimits()) == ((8, 1, 1), (128, 1, 1))
    assert validate_launch((3, 4), (16, 8), 1024, LaunchLimits()) == ((3, 4, 1), (16, 8, 1))
    # dynamic smem over 48 KB is allowed up to the opt-in max minus static smem
    validate_launch(1, 128, 100 * 1024, LaunchLimits(static_smem=32 * 1024, max_smem_optin=227 * 1024))


@pytest.mark.parametrize("grid, block, smem, limits, match", [
    ((0, 1), 128, 0, LaunchLimits(), "is empty.*ceil_div"),
    (1, (0, 1), 0, LaunchLimits(), "zero"),
    (1, 2048, 0, LaunchLimits(), "at most 1024"),
    (1, (32, 32, 2), 0, LaunchLimits(), "at most 1024"),
    (1, (1, 1, 65), 0, LaunchLimits(), "block dimension z = 65 is over"),
    (1, 512, 0, LaunchLimits(max_threads_per_block=256, registers=201), "201 registers per thread"),
    (1, 256, 0, LaunchLimits(max_threads_per_block=128, registers=40), r"__launch_bounds__ \(.maxntid\) says 128"),
    ((1, 70000), 32, 0, LaunchLimits(), "grid dimension y = 70,000.*grid x"),
    (1, 128, 200 * 1024, LaunchLimits(static_smem=32 * 1024, max_smem_optin=227 * 1024), "leaving 199,680"),
    (1, 128, -1, LaunchLimits(), "smem must be"),
    ((1, 2, 3, 4), 32, 0, LaunchLimits(), "1 to 3 dimensions"),
    (1.5, 32, 0, LaunchLimits(), "int or a tuple"),
])
def test_validate_launch_rejects(grid, block, smem, limits, match):
    with pytest.raises(LaunchError, match=match):
        validate_launch(grid, block, smem, limits, name="gemm")


def test_kernel_object_without_gpu(no_gpu):
    from gemmlab.compiling.compiler import compile

    k = compile('extern "C" __global__ void add1(float* x, int n)'
                "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }",
                "add1", arch="sm_90a")
    assert k.name == "add1" and k.arch == "sm_90a" and k.cubin[:4] == b"\x7fELF"
    assert ".entry add1" in k.ptx and k.signature == "add1(float* x, int n)"
    assert "add1" in k._repr_html_() and "registers" in k._repr_html_()
    with pytest.raises(NoGPUError, match="Running kernel 'add1' needs a CUDA GPU"):
        k(torch.zeros(4), 4, grid=1, block=4)
    from gemmlab.compiling.sass import disassembler

    if disassembler() is None:
        with pytest.raises(ToolchainError, match="nvdisasm"):
            k.sass()
    else:
        assert "add1" in k.sass()


#: Run in a fresh interpreter: a lost context is remembered for the whole process, so it must not outlive the test.
ERROR_TRANSLATION = """
from cuda.bindings import driver

from gemmlab.errors import ContextLostError, KernelError
from gemmlab.running import faults

plain = faults.error_for(driver.CUresult.CUDA_ERROR_INVALID_VALUE, "kernel 'k'")
assert type(plain) is KernelError and "CUDA_ERROR_INVALID_VALUE" in str(plain)
assert faults.lost_reason() is None
# a student's own Python error passes through untouched
other = RuntimeError("mat1 and mat2 shapes cannot be multiplied")
assert faults.translate(other, "the GEMM") is other
lost = faults.translate(
    RuntimeError("CUDA error: an illegal memory access was encountered\\nCompile with TORCH_USE_CUDA_DSA"),
    "the GEMM at M×N×K=16×16×16")
assert isinstance(lost, ContextLostError)
text = str(lost)
assert text.startswith("the GEMM at M×N×K=16×16×16 failed: CUDA error: an illegal memory access"), text
assert "CUDA context is now lost" in text and "Kernel → Restart" in text and "compute-sanitizer" in text
# from now on every GPU entry point fails fast instead of hanging or crashing
try:
    faults.raise_if_lost()
except ContextLostError as exc:
    assert "an earlier kernel failed" in str(exc), exc
else:
    raise AssertionError("raise_if_lost passed after a lost context")
sticky = faults.error_for(driver.CUresult.CUDA_ERROR_MISALIGNED_ADDRESS, "kernel 'gemm'")
assert isinstance(sticky, ContextLostError) and "kernel 'gemm' failed: a misaligned address" in str(sticky)
print("translated")
"""


def test_error_translation_without_a_driver():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", ERROR_TRANSLATION], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "translated", done.stderr[-3000:]
