"""Kernel parameter lists from source declarations, and the PTX cross-check."""
from __future__ import annotations


import pytest

from gemmlab.compiling.signature import Param, base_name, find_kernel, find_kernels, ptx_param_sizes, reconcile

from tests.support import KERNELS


def params_of(source: str, name: str) -> list[Param]:
    decl = find_kernel(source, name)
    assert decl is not None, f"{name} not found"
    return list(decl.params)


def test_cute_gemm_signature() -> None:
    params = params_of((KERNELS / "cute_gemm.cu").read_text(), "gemm")
    assert [(p.name, p.kind, p.dtype, p.const, p.nbytes) for p in params] == [
        ("A", "pointer", "float16", True, 8), ("B", "pointer", "float16", True, 8),
        ("D", "pointer", "float16", False, 8), ("M", "scalar", "int32", False, 4),
        ("N", "scalar", "int32", False, 4), ("K", "scalar", "int32", False, 4),
    ]


@pytest.mark.parametrize("decl, expected", [
    ("__global__ void k(const half* __restrict__ a)", ("a", "pointer", "float16", True)),
    ("__global__ void k(half const* a)", ("a", "pointer", "float16", True)),
    ("__global__ void k(float* const a)", ("a", "pointer", "float32", False)),
    ("__global__ void k(__nv_bfloat16* a)", ("a", "pointer", "bfloat16", False)),
    ("__global__ void k(cute::bfloat16_t const* a)", ("a", "pointer", "bfloat16", True)),
    ("__global__ void k(cutlass::half_t* a)", ("a", "pointer", "float16", False)),
    ("__global__ void k(cute::tfloat32_t* a)", ("a", "pointer", "float32", False)),
    ("__global__ void k(double* a)", ("a", "pointer", "float64", False)),
    ("__global__ void k(int8_t* a)", ("a", "pointer", "int8", False)),
    ("__global__ void k(uint8_t* a)", ("a", "pointer", "uint8", False)),
    ("__global__ void k(long long* a)", ("a", "pointer", "int64", False)),
    ("__global__ void k(unsigned* a)", ("a", "pointer", "int32", False)),
    ("__global__ void k(void* a)", ("a", "pointer", None, False)),
    ("__global__ void k(float a[])", ("a", "pointer", "float32", False)),
    ("__global__ void k(float** a)", ("a", "pointer", None, False)),
])
def test_pointer_types(decl: str, expected: tuple) -> None:
    (param,) = params_of(decl + " {}", "k")
    assert (param.name, param.kind, param.dtype, param.const) == expected
    assert param.nbytes == 8


@pytest.mark.parametrize("ctype, dtype, nbytes", [
    ("int", "int32", 4), ("int32_t", "int32", 4), ("unsigned", "uint32", 4), ("unsigned int", "uint32", 4),
    ("float", "float32", 4), ("double", "float64", 8), ("int64_t", "int64", 8), ("long long", "int64", 8),
    ("size_t", "uint64", 8), ("bool", "bool", 1), ("half", "float16", 2), ("__nv_bfloat16", "bfloat16", 2),
    ("const int", "int32", 4), ("char", "int8", 1), ("short", "int16", 2),
])
def test_scalar_types(ctype: str, dtype: str, nbytes: int) -> None:
    (param,) = params_of(f"__global__ void k({ctype} value) {{}}", "k")
    assert (param.name, param.kind, param.dtype, param.nbytes) == ("value", "scalar", dtype, nbytes)


def test_unnamed_and_multiword_params() -> None:
    params = params_of("__global__ void k(unsigned int, long long n, float) {}", "k")
    assert [(p.name, p.ctype, p.nbytes) for p in params] == [("arg0", "unsigned int", 4), ("n", "long long", 8),
                                                            ("arg2", "float", 4)]


def test_void_parameter_list() -> None:
    assert params_of("__global__ void k(void) {}", "k") == []
    assert params_of("__global__ void k() {}", "k") == []


def test_structs_templates_attributes_and_multiline() -> None:
    source = '''
    // __global__ void commented_out(int x);
    /* __global__ void also_commented(int y); */
    const char* s = "__global__ void in_a_string(int z)";
    #define DECLARE __global__ void from_macro(int w)
    template <int BM, class T, typename Epilogue = void>
    __global__ void __launch_bounds__(128, 2)
    tiled(const T* __restrict__ A,   // a comment, with a comma
          CUtensorMap const tmap,
          __grid_constant__ const Params p,
          T alpha,
          int K = 16)
    {
    }
    '''
    kernels = find_kernels(source)
    assert [k.name for k in kernels] == ["tiled"]
    decl = kernels[0]
    assert decl.is_template and not decl.extern_c
    assert decl.line == 8
    a, tmap, p, alpha, k = decl.params
    assert (a.kind, a.dtype, a.const) == ("pointer", None, True)  # pointer to a template type: any dtype
    assert (tmap.kind, tmap.name, tmap.nbytes) == ("struct", "tmap", 0)  # size comes from the PTX
    assert (p.kind, p.name) == ("struct", "p")
    assert (alpha.kind, alpha.name) == ("struct", "alpha")  # a template type passed by value
    assert (k.kind, k.name, k.nbytes) == ("scalar", "K", 4)


def test_extern_c_forms_and_attributes() -> None:
    source = '''
    extern "C" __global__ void a(float* x) {}
    extern "C" {
      __global__ void b(int* y) {}
    }
    __global__ void c(int* z) {}
    [[maybe_unused]] __global__ void __cluster_dims__(2, 1, 1) d(half* q) {}
    static __global__ __launch_bounds__(256) void e(float* r) {}
    '''
    kernels = {k.name: k for k in find_kernels(source)}
    assert set(kernels) == {"a", "b", "c", "d", "e"}
    assert kernels["a"].extern_c and kernels["b"].extern_c and not kernels["c"].extern_c
    assert kernels["d"].params[0].dtype == "float16"
    assert kernels["e"].params[0].name == "r"


def test_definition_preferred_over_forward_declaration() -> None:
    source = "__global__ void k(float* x);\n__global__ void k(float* x) { }\n"
    assert find_kernel(source, "k").line == 2


def test_base_name() -> None:
    assert base_name("gemm<128, 64>") == "gemm"
    assert base_name("&ns::gemm<1>") == "gemm"
    assert base_name(" k ") == "k"


PTX = """
.visible .entry _Z1m1PdPf6__half(
	.param .align 4 .b8 _Z1m1PdPf6__half_param_0[128],
	.param .f64 _Z1m1PdPf6__half_param_1,
	.param .u64 _Z1m1PdPf6__half_param_2,
	.param .align 2 .b8 _Z1m1PdPf6__half_param_3[2],
	.param .u8 _Z1m1PdPf6__half_param_4
)
.maxntid 256, 1, 1
{
	ret;
}
.visible .entry empty()
{
	ret;
}
"""


def test_ptx_param_sizes() -> None:
    assert ptx_param_sizes(PTX, "_Z1m1PdPf6__half") == [128, 8, 8, 2, 1]
    assert ptx_param_sizes(PTX, "empty") == []
    assert ptx_param_sizes(PTX, "missing") is None


def test_reconcile_fills_struct_sizes_and_trusts_ptx() -> None:
    source = "struct P { float a[32]; };\n__global__ void m(P p, double d, float* y, half h, bool b) {}"
    params = reconcile(find_kernel(source, "m").params, ptx_param_sizes(PTX, "_Z1m1PdPf6__half"))
    assert [(p.kind, p.nbytes) for p in params] == [("struct", 128), ("scalar", 8), ("pointer", 8),
                                                    ("scalar", 2), ("scalar", 1)]


def test_reconcile_falls_back_to_ptx_when_counts_differ() -> None:
    params = reconcile([], [8, 4, 128])
    assert [(p.kind, p.nbytes) for p in params] == [("pointer", 8), ("struct", 4), ("struct", 128)]
