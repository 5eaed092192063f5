"""gemmlab.dsl without a GPU: real DSL compiles for sm_80/sm_90a/sm_100a, caching, errors, validation."""
from __future__ import annotations

import importlib.util
import linecache
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import gemmlab.dsl as dsl
from gemmlab.compiling.cubin import resources_with_spills
from gemmlab.dsl import convert, core
from gemmlab.errors import CompileError, LaunchError, NoGPUError
from tests.dsl_kernels import planted_gemm, simple_gemm

from tests.support import DSL_KERNELS as KERNELS
from tests.support.dsl_cache import refuse_dsl_compiles


def tn(m: int, n: int, k: int, dtype=torch.float16, out=torch.float16):
    """CPU stand-ins for a "tn" GEMM's A (M×K), B (N×K), D (M×N)."""
    return torch.empty(m, k, dtype=dtype), torch.empty(n, k, dtype=dtype), torch.empty(m, n, dtype=out)


def load_module(path: Path, name: str):
    """Import a kernel file as a fresh module, as re-running a notebook cell does."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------- compile for each target


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_simple_gemm_compiles_for_target(arch: str) -> None:
    k = dsl.compile(simple_gemm.gemm, *tn(100, 72, 64), arch=arch)
    assert f".target {arch}" in k.ptx
    assert k.cubin[:4] == b"\x7fELF"
    assert "gemm_kernel" in k.kernel_name
    assert k.compiled_arch == arch
    r = k.resources
    assert 8 <= r.registers <= 255
    assert r.max_threads_per_block >= 256  # the kernel launches 16x16 threads
    assert r.const_bytes > 0  # the kernel parameters live in constant bank 0
    assert k.compile_seconds > 0


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
def test_other_dtypes_compile(out: torch.dtype) -> None:
    k = dsl.compile(simple_gemm.gemm, *tn(64, 64, 64, dtype=torch.bfloat16, out=out), arch="sm_90a")
    assert ".target sm_90a" in k.ptx and k.resources.registers > 0


@pytest.mark.parametrize("fn", [planted_gemm.gemm_oob, planted_gemm.gemm_unwritten, planted_gemm.gemm_edge])
def test_planted_kernels_compile(fn) -> None:
    assert dsl.compile(fn, *tn(100, 72, 64), arch="sm_90a").cubin


# ----------------------------------------------------------------- caching


def test_unchanged_function_is_a_cache_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    args = tn(128, 128, 64)
    dsl.compile(simple_gemm.gemm, *args, arch="sm_80")
    refuse_dsl_compiles(monkeypatch)
    k = dsl.compile(simple_gemm.gemm, *args, arch="sm_80")
    assert k.cached


def test_new_shape_same_signature_does_not_recompile(monkeypatch: pytest.MonkeyPatch) -> None:
    dsl.compile(simple_gemm.gemm, *tn(128, 128, 64), arch="sm_80")
    refuse_dsl_compiles(monkeypatch)
    for shape in [(256, 64, 128), (1, 8, 8), (4096, 16, 1024)]:
        k = dsl.compile(simple_gemm.gemm, *tn(*shape), arch="sm_80")
        assert k.cached, shape


def test_odd_sizes_share_one_compile_per_alignment() -> None:
    first = dsl.compile(simple_gemm.gemm, *tn(1000, 1001, 999), arch="sm_80")
    again = dsl.compile(simple_gemm.gemm, *tn(129, 257, 77), arch="sm_80")  # K odd again: 2-byte rows
    assert again.cached
    sig = convert.tensor_sig(torch.empty(1000, 999, dtype=torch.float16), 0, convert.Param("A", False, False), False)
    assert sig.align == 2 and sig.leading == 1
    assert first.kernel_name == again.kernel_name


def _align(t: torch.Tensor) -> int:
    return convert.tensor_sig(t, 0, convert.Param("X", False, False), False).align


@pytest.mark.parametrize("shape, expected", [
    ((1, 255), 2), ((1, 1), 2), ((255, 1), 2), ((1, 260), 8), ((1, 256), 16), ((2, 255), 2), ((3, 256), 16),
])
def test_alignment_covers_the_row_length_of_one_row_tensors(shape, expected) -> None:
    # A kernel may move align-byte vectors along a row, predicated on the vector's first element:
    # with one row there is no pitch to bound the row length, so the length itself must.
    t = torch.empty(*shape, dtype=torch.float16)
    assert t.data_ptr() % 16 == 0
    assert _align(t) == expected, f"{shape}: a {_align(t)}-byte vector would run past the row end"
    assert _align(t.T) == expected  # the same storage, other majorness


def test_one_row_problem_reuses_the_narrow_variant_of_its_extents() -> None:
    # 1 x 255 x 513 has no 16-byte row anywhere: it must share the 2-byte variant of odd shapes,
    # never get (or reuse) a 16-byte one.
    dsl.compile(simple_gemm.gemm, *tn(1000, 1001, 999), arch="sm_80")
    assert dsl.compile(simple_gemm.gemm, *tn(1, 255, 513), arch="sm_80").cached
    assert dsl.compile(simple_gemm.gemm, *tn(1, 1, 1), arch="sm_80").cached


def test_rerun_cell_with_same_source_hits_and_edit_misses(tmp_path: Path) -> None:
    source = (KERNELS / "simple_gemm.py").read_text()
    (tmp_path / "cell_a.py").write_text(source)
    (tmp_path / "cell_b.py").write_text(source)
    a = load_module(tmp_path / "cell_a.py", "gemmlab_test_cell_a")
    b = load_module(tmp_path / "cell_b.py", "gemmlab_test_cell_b")  # a new function object, same code
    assert a.gemm is not b.gemm
    dsl.compile(a.gemm, *tn(64, 64, 64), arch="sm_90a")
    assert dsl.compile(b.gemm, *tn(64, 64, 64), arch="sm_90a").cached
    # Editing the kernel the jit function launches (not the jit function itself) must recompile.
    (tmp_path / "cell_c.py").write_text(source.replace("acc += mA", "acc -= mA"))
    c = load_module(tmp_path / "cell_c.py", "gemmlab_test_cell_c")
    assert not dsl.compile(c.gemm, *tn(64, 64, 64), arch="sm_90a").cached
    # So must changing a global constant the code reads.
    (tmp_path / "cell_d.py").write_text(source.replace("TILE = 16", "TILE = 8"))
    d = load_module(tmp_path / "cell_d.py", "gemmlab_test_cell_d")
    assert not dsl.compile(d.gemm, *tn(64, 64, 64), arch="sm_90a").cached


def test_a_handle_sees_globals_rebound_after_it_was_made(tmp_path: Path) -> None:
    """A kernel handle made before a setting or a called function is rebound (a later notebook cell,
    or a benchmark switching an attempt's settings on) compiles for the new value, not a stale variant."""
    (tmp_path / "cell_e.py").write_text((KERNELS / "simple_gemm.py").read_text())
    e = load_module(tmp_path / "cell_e.py", "gemmlab_test_cell_e")
    handle = dsl.gemm_fn(e.gemm, arch="sm_90a")
    first = handle.current_key()
    assert handle.current_key() == first          # nothing rebound: the key is not recomputed differently
    e.TILE = 32
    assert handle.current_key() != first
    handle.compile_for(*tn(64, 64, 64))
    assert not handle.cached                       # compiled now, for TILE = 32
    e.TILE = 16
    assert handle.current_key() == first
    kernel = e.gemm_kernel
    e.gemm_kernel = lambda *args: kernel(*args)     # a helper redefined in a later cell
    assert handle.current_key() != first


def test_a_handle_made_before_the_kernel_it_launches_is_defined_sees_its_definition(tmp_path: Path) -> None:
    """Notebook 05 makes its GEMM handle in one cell and defines the kernel the jit function launches in later
    cells: each definition (and each edit of it, run again) must change the key, or a stale variant runs."""
    source = (KERNELS / "simple_gemm.py").read_text()
    head, tail = source.split("@cute.jit", 1) if source.count("@cute.jit") == 1 else (None, None)
    assert head is not None and "def gemm_kernel" in head, "simple_gemm: the kernel comes before the jit function"
    (tmp_path / "cell_f.py").write_text(source)
    f = load_module(tmp_path / "cell_f.py", "gemmlab_test_cell_f")
    kernel = f.gemm_kernel
    del f.gemm_kernel                                # the handle is made before the kernel's cell runs
    handle = dsl.gemm_fn(f.gemm, arch="sm_90a")
    before = handle.current_key()
    f.gemm_kernel = kernel                           # the later cell defines it
    defined = handle.current_key()
    assert defined != before
    f.gemm_kernel = lambda *args: kernel(*args)      # and runs again after an edit
    assert handle.current_key() not in (before, defined)


def test_gemm_fn_compiles_lazily() -> None:
    k = dsl.gemm_fn(simple_gemm.gemm, arch="sm_90a")
    with pytest.raises(Exception, match="not compiled yet"):
        _ = k.ptx
    k.compile_for(*tn(32, 32, 32))
    assert ".target sm_90a" in k.ptx
    assert k.signature == "gemm(mA, mB, mD, [stream])"


# ----------------------------------------------------------------- errors


BUGGY_KERNEL = '''\
import cutlass
import cutlass.cute as cute


@cute.kernel
def student_kernel(mA: cute.Tensor, mD: cute.Tensor):
    tx, _, _ = cute.arch.thread_idx()
    value = mA[tx, 0] * scale_factor
    mD[tx, 0] = value


@cute.jit
def student(mA: cute.Tensor, mD: cute.Tensor):
    student_kernel(mA, mD).launch(grid=[1, 1, 1], block=[32, 1, 1])
'''


def _assert_student_friendly(err: CompileError, where: str, line_text: str) -> None:
    message = str(err)
    assert where in message, message
    assert line_text in message, message
    assert "scale_factor" in message
    for noise in ("Traceback", "cutlass/base_dsl", "loc(", "func.func", "\x1b["):
        assert noise not in message, message
    assert len(message.splitlines()) <= 12, message
    assert "Traceback" in err.log and "scale_factor" in err.log


def test_error_in_traced_kernel_points_at_student_line(tmp_path: Path) -> None:
    path = tmp_path / "student_cell.py"
    path.write_text(BUGGY_KERNEL)
    module = load_module(path, "gemmlab_test_student_cell")
    with pytest.raises(CompileError) as info:
        dsl.compile(module.student, torch.empty(32, 4), torch.empty(32, 4), arch="sm_90a")
    _assert_student_friendly(info.value, f"{path}:8", "value = mA[tx, 0] * scale_factor")


def test_error_in_notebook_cell_points_at_cell_line() -> None:
    filename = "<ipython-input-7-0123456789ab>"
    linecache.cache[filename] = (len(BUGGY_KERNEL), None, BUGGY_KERNEL.splitlines(True), filename)
    namespace: dict = {"__name__": "__main__"}
    exec(compile(BUGGY_KERNEL, filename, "exec"), namespace)
    with pytest.raises(CompileError) as info:
        dsl.compile(namespace["student"], torch.empty(32, 4), torch.empty(32, 4), arch="sm_80")
    _assert_student_friendly(info.value, f"{filename}:8", "value = mA[tx, 0] * scale_factor")


def test_dsl_type_error_is_a_compile_error(tmp_path: Path) -> None:
    path = tmp_path / "type_cell.py"
    path.write_text(textwrap.dedent('''\
        import cutlass
        import cutlass.cute as cute


        @cute.kernel
        def k(mA: cute.Tensor):
            tx, _, _ = cute.arch.thread_idx()
            mA[tx] = cute.ceil_div(tx)


        @cute.jit
        def run(mA: cute.Tensor):
            k(mA).launch(grid=[1, 1, 1], block=[32, 1, 1])
    '''))
    module = load_module(path, "gemmlab_test_type_cell")
    with pytest.raises(CompileError) as info:
        dsl.compile(module.run, torch.empty(32), arch="sm_90a")
    assert f"{path}:8" in str(info.value)
    assert "cute.ceil_div(tx)" in str(info.value)


# ----------------------------------------------------------------- argument validation


def test_wrong_argument_count() -> None:
    with pytest.raises(LaunchError, match=r"gemm\(mA, mB, mD, \[stream\]\) takes 3 argument\(s\) but you passed 2"):
        dsl.compile(simple_gemm.gemm, *tn(16, 16, 16)[:2], arch="sm_90a")


def test_non_contiguous_tensor() -> None:
    A, B, D = tn(64, 64, 128)
    with pytest.raises(LaunchError, match=r"argument 1 \('mA'\) is not contiguous.*mA.contiguous\(\)"):
        dsl.compile(simple_gemm.gemm, A[:, ::2], B[:, :64], D, arch="sm_90a")


def test_padded_rows_are_accepted_and_overlaps_are_not() -> None:
    import torch

    param = convert.Param("A", False, False)
    padded = torch.zeros(300, 136, dtype=torch.float16)[:, :131]  # rows 136 elements apart
    sig = convert.tensor_sig(padded, 0, param, False)
    assert sig.leading == 1 and sig.align == 2  # 131 halves per row: only 2-byte vectors fit
    assert convert.tensor_sig(torch.zeros(64, 72, dtype=torch.float16)[:, :64], 0, param, False).align == 16
    for bad in (torch.zeros(8, 1, dtype=torch.float16).expand(8, 4), torch.zeros(64, 64)[:, ::2]):
        with pytest.raises(LaunchError, match="not contiguous"):
            convert.tensor_sig(bad, 0, param, False)


def test_transposed_tensor_is_another_majorness_not_an_error() -> None:
    A, B, D = tn(64, 48, 32)
    sig = convert.tensor_sig(A.t(), 0, convert.Param("A", False, False), False)
    assert sig.leading == 0 and sig.order == (0, 1)
    k = dsl.compile(simple_gemm.gemm, A.t().contiguous().t(), B, D, arch="sm_90a")
    assert k.cubin


def test_declared_dtype_mismatch() -> None:
    A, B, D = tn(16, 16, 16)
    with pytest.raises(LaunchError, match=r"argument 2 \('mB'\) must be float16 but you passed a float32.*mB.half\(\)"):
        dsl.compile(simple_gemm.gemm, A, B.float(), D, arch="sm_90a", dtypes={"mA": torch.float16, "mB": torch.float16})


def test_declared_alignment_rejects_odd_rows() -> None:
    with pytest.raises(LaunchError, match=r"only 2-byte aligned.*needs 16-byte.*multiple of 8 elements"):
        dsl.compile(simple_gemm.gemm, *tn(100, 100, 999), arch="sm_90a", min_align=16)


def test_cpu_tensor_rejected_for_gpu_run() -> None:
    params = convert.params_of(simple_gemm.gemm)
    bound = convert.bind(simple_gemm.gemm, params, tn(16, 16, 16))
    with pytest.raises(LaunchError, match=r"argument 1 \('mA'\) is a CPU tensor.*mA.cuda\(\)"):
        convert.signature(bound, need_cuda=True)


def test_unsupported_argument_types() -> None:
    A, B, D = tn(16, 16, 16)
    with pytest.raises(LaunchError, match="complex64"):
        dsl.compile(simple_gemm.gemm, A.to(torch.complex64), B, D, arch="sm_90a")
    with pytest.raises(LaunchError, match="pass a torch tensor, an int, a float or a bool"):
        dsl.compile(simple_gemm.gemm, A, B, "D", arch="sm_90a")


def test_stream_parameter_is_filled_in() -> None:
    params = convert.params_of(simple_gemm.gemm)
    assert [p.name for p in params if p.is_stream] == ["stream"]
    assert len(convert.user_params(params)) == 3


def test_no_gpu_needs_explicit_arch_and_cannot_run(no_gpu: None) -> None:
    with pytest.raises(NoGPUError, match="arch="):
        dsl.compile(simple_gemm.gemm, *tn(16, 16, 16))
    k = dsl.compile(simple_gemm.gemm, *tn(16, 16, 16), arch="sm_90a")
    with pytest.raises(NoGPUError):
        k(*tn(16, 16, 16))


def test_runtime_arguments_marshal_like_the_compiled_signature() -> None:
    """The DLPack tensors we launch with fill exactly the slots the fake tensors compiled."""
    A, B, D = tn(100, 72, 64)
    k = dsl.compile(simple_gemm.gemm, A, B, D, arch="sm_90a")
    variant = k._last
    stream = convert.compile_args(variant.signature[3:], [None])[0]
    fake = convert.compile_args(variant.signature, [A, B, D, None])
    fake_count = len(variant.compiled.generate_execution_args(*fake)[0])
    from cutlass.cute.runtime import from_dlpack

    real = [from_dlpack(t, assumed_align=sig.align).mark_layout_dynamic(leading_dim=sig.leading)
            for sig, t in zip(variant.signature[:3], (A, B, D))]
    real_count = len(variant.compiled.generate_execution_args(*real, stream)[0])
    assert real_count == 4  # one descriptor pointer per tensor, plus the stream
    # ...and each descriptor has the same dynamic parts: i32 sizes, an i64 row pitch, static unit stride.
    for f, r in zip(fake[:3], real):
        assert _layout_kinds(str(f).split(", ", 1)[1]) == _layout_kinds(str(r).split(" o ", 1)[1]), (f, r)


def _layout_kinds(text: str) -> list[str]:
    """'(?,?):(?{i64},1)' and '(?{div=1}, ?{div=1}), (?{i64 div=8}, 1)' -> ['i32', 'i32', 'i64', '1']."""
    import re

    tokens = re.findall(r"\?\{[^}]*\}|\?|\d+", text)
    return ["i64" if "i64" in t else "i32" if t.startswith("?") else t for t in tokens]


# ----------------------------------------------------------------- info


def test_info_reports_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    report = dsl.info()
    assert report["version"] == "4.8.1" and report["importable"] and report["can_compile"]
    assert set(report["targets"]) == {"sm_80", "sm_90a", "sm_100a"}
    assert all(t["ok"] for t in report["targets"].values()), report
    refuse_dsl_compiles(monkeypatch)     # cached: cheap enough for every doctor run
    assert dsl.info() == report


# ----------------------------------------------------------------- the tensor-core GEMM


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_tensorop_gemm_compiles_to_tensor_core_code(arch: str) -> None:
    from tests.dsl_kernels import tensorop_gemm

    k = dsl.compile(tensorop_gemm.gemm, *tn(256, 256, 64), arch=arch)
    ptx = k.ptx
    assert "mma.sync.aligned.m16n8k16" in ptx and "ldmatrix.sync.aligned" in ptx
    assert "cp.async.cg.shared.global" in ptx or "cp.async.ca.shared.global" in ptx
    assert ", 16, 16;" in ptx  # 16-byte cp.async: rows are 16-byte aligned
    assert 64 <= k.resources.registers <= 255
    assert k.resources.max_threads_per_block >= tensorop_gemm.THREADS


SPILLER = r"""
extern "C" __global__ void __launch_bounds__(256, 8) spiller(float* out, const float* in, int n) {
    // 64 values live at once under a 32-register budget (8 blocks of 256 threads per SM): ptxas spills.
    float v[64];
    #pragma unroll
    for (int i = 0; i < 64; ++i) v[i] = in[(threadIdx.x * 64 + i) % n];
    float s = 0.f;
    #pragma unroll
    for (int i = 0; i < 64; ++i) s += v[i] * v[63 - i] + v[(i * 7) % 64];
    __syncthreads();
    out[threadIdx.x] = s;
}
"""


@pytest.mark.slow
def test_resources_read_from_a_cubin_agree_with_ptxas() -> None:
    # The DSL does not show ptxas's report, so DSL kernels' spills are read off the SASS and their
    # barriers off the cubin. NVRTC does show it: both readings of one cubin must agree.
    from gemmlab.compiling.compiler import compile_to
    from gemmlab.compiling.sass import disassembler

    if disassembler() is None:
        pytest.skip("no nvdisasm or cuobjdump here (pip install nvidia-cuda-nvdisasm)")
    c = compile_to(SPILLER, "spiller", arch="sm_90a")
    reported = c.resources
    assert reported.spills and reported.barriers == 1, reported
    _, read = resources_with_spills(c.cubin, c.ptx, "spiller")
    assert read == reported, (read, reported)
    assert read.const_bytes > 0, read      # the parameters live in constant bank 0
    roomy = dsl.compile(simple_gemm.gemm, *tn(64, 64, 64), arch="sm_90a").resources
    assert not roomy.spills and roomy.stack_frame_bytes == 0, roomy


@pytest.mark.slow
def test_tensorop_gemm_odd_k_uses_narrow_copies() -> None:
    from tests.dsl_kernels import tensorop_gemm

    k = dsl.compile(tensorop_gemm.gemm, *tn(1000, 1001, 999), arch="sm_90a")
    assert "mma.sync.aligned.m16n8k16" in k.ptx
    assert ", 16, 16;" not in k.ptx  # 2-byte rows: no 16-byte vector may be used


@pytest.mark.parametrize("verifier, hint", [
    ("error: 'cute.copy' op expects src and dst to have static shape", "index the run-time modes before copying"),
    ("IR verification failed: 'cute.copy' op src ptr alignment (64 bits) does not meet requirement (128 bits) "
     "of atom '!cute_nvgpu.atom.simt_async_copy<f16, cache = always, 128 b>'", "make `num_bits_per_copy` the"),
])
def test_verifier_errors_without_a_line_carry_a_hint(verifier: str, hint: str) -> None:
    """MLIR verifier errors name no Python line; they still say what to change (gemmlab.dsl.explain), under the
    verifier's own statement rather than the text of an exception that wraps it."""
    from gemmlab.dsl.errors import to_compile_error

    def traced_kernel():
        pass

    try:
        raise RuntimeError("wrapped") from RuntimeError(verifier)
    except RuntimeError as exc:
        err = to_compile_error(exc, traced_kernel, "sm_90a")
    assert "What to change: " in str(err) and hint in str(err), str(err)
    assert "RuntimeError: wrapped" not in str(err) and verifier.split("'cute.copy' op ")[1][:20] in str(err), str(err)
