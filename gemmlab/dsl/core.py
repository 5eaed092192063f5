"""Compile a student's ``@cute.jit`` function, cache it, and run it on torch tensors.

Why a cache of our own: re-running an unchanged notebook cell creates a new function
object, and check_gemm calls the same kernel on a dozen shapes. Keyed on the function's
source (and what it uses), the arch and the argument *signature* (never the sizes), both
cost a dictionary lookup instead of a compile.
"""
from __future__ import annotations

import contextlib
import inspect
import shutil
import tempfile
import textwrap
import threading
import time
import types
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from gemmlab.compiling import cache as _cache
from gemmlab.compiling.cubin import resources_with_spills
from gemmlab.dtypes import dtype_name
from ..errors import CompileError, GemmlabError, KernelError, LaunchError
from gemmlab.running.gpu import current_arch, require_gpu
from gemmlab.answers.stand_ins import DslAnswer
from gemmlab.answers.wire import StudentProcessOnly
from ..profiling.switch import compile_key as timeline_key
from gemmlab.compiling.resources import Resources
from gemmlab.running import faults
from gemmlab.running.device import torch_device
from gemmlab.running.printf import forward_device_printf, uses_printf
from gemmlab.running.streams import default_stream_joined, synchronize
from gemmlab.timing.timing_lock import compiling
from . import convert
from .env import load
from .errors import headline, needs_line_info, to_compile_error
from .launch_config import dynamic_smem_bytes
from .launch_messages import first_launch

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_103a", "sm_120a")
_MAX_DEPTH = 3  # how far to follow functions a jit function calls when hashing its source


# ----------------------------------------------------------------- source key


def _is_library(obj: Any) -> bool:
    module = getattr(obj, "__module__", "") or ""
    return module.split(".")[0] in {"cutlass", "cuda", "torch", "numpy", "builtins", "gemmlab", "math", "typing"}


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _value_key(value: Any, depth: int, seen: set[int]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list)) and len(value) <= 64:
        return [_value_key(v, depth, seen) for v in value]
    if isinstance(value, types.ModuleType):
        return f"module:{value.__name__}"
    target = getattr(value, "__wrapped__", value)
    if callable(target) and hasattr(target, "__code__") and not _is_library(target):
        return source_key(target, depth + 1, seen) if depth < _MAX_DEPTH else target.__qualname__
    if isinstance(value, type):
        if _is_library(value) or depth >= _MAX_DEPTH:
            return f"class:{value.__module__}.{value.__qualname__}"
        try:
            return ["class", inspect.getsource(value)]
        except (OSError, TypeError):
            return f"class:{value.__module__}.{value.__qualname__}"
    return f"{type(value).__module__}.{type(value).__qualname__}"


def _without_decorators(source: str) -> str:
    """The ``def`` onwards: the DSL rewrites a function on first compile, after which
    ``inspect.getsource`` no longer includes its decorator lines."""
    lines = textwrap.dedent(source).splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("def ", "async def ")):
            return "\n".join(lines[i:])
    return source


def source_key(fn: Callable, depth: int = 0, seen: set[int] | None = None) -> Any:
    """What decides the generated code: fn's source, closure values, and the globals it reads."""
    seen = set() if seen is None else seen
    f = getattr(fn, "__wrapped__", fn)
    if id(f) in seen:
        return f"<recursive {getattr(f, '__qualname__', '?')}>"
    seen.add(id(f))
    code = getattr(f, "__code__", None)
    try:
        source = _without_decorators(inspect.getsource(f))
    except (OSError, TypeError):
        source = code.co_code.hex() if code is not None else repr(f)
    parts: list[Any] = [getattr(f, "__qualname__", ""), source]
    for cell in getattr(f, "__closure__", None) or ():
        try:
            parts.append(_value_key(cell.cell_contents, depth, seen))
        except ValueError:  # empty cell
            parts.append("<empty>")
    if code is not None:
        glb = getattr(f, "__globals__", {})
        for name in sorted(_code_names(code)):
            if name in glb:
                parts.append((name, _value_key(glb[name], depth, seen)))
    defaults = getattr(f, "__defaults__", None) or ()
    parts.append([_value_key(d, depth, seen) for d in defaults])
    return parts


_MISSING = object()


def global_refs(fn: Callable, depth: int = 0, seen: set[int] | None = None) -> list[tuple[dict, str]]:
    """The (module globals, name) pairs that source_key read for fn and the functions it calls.

    A kernel handle reads them again before each lookup: a setting or helper rebound after the
    handle was made (``STAGES = 4`` in a later cell) then compiles a new variant instead of
    silently running the one compiled for the old value. A name not defined yet is kept too: a
    notebook makes the handle in one cell and defines the kernel it launches in a later one (05's
    ``gemm05_dsl``), and that definition must change the key."""
    seen = set() if seen is None else seen
    f = getattr(fn, "__wrapped__", fn)
    code = getattr(f, "__code__", None)
    if id(f) in seen or code is None:
        return []
    seen.add(id(f))
    glb = getattr(f, "__globals__", {})
    refs = []
    for name in sorted(_code_names(code)):
        refs.append((glb, name))
        if name not in glb:
            continue
        target = getattr(glb[name], "__wrapped__", glb[name])
        if callable(target) and hasattr(target, "__code__") and not _is_library(target) and depth < _MAX_DEPTH:
            refs.extend(global_refs(target, depth + 1, seen))
    return refs


def _snapshot(refs: list[tuple[dict, str]]) -> tuple:
    return tuple(glb.get(name, _MISSING) for glb, name in refs)


# ----------------------------------------------------------------- compiled variants


@dataclass
class Variant:
    """One compile of fn: for one arch and one argument signature."""

    arch: str
    signature: tuple
    compiled: Any
    ptx: str
    cubin: bytes
    kernel_name: str
    resources: Resources | None
    compile_seconds: float
    hits: int = 0
    launched: bool = False  # its first launch ran with the DSL's printed complaints captured
    host_object: bytes | None = None  # its host launch code as an object file, once a recording needed it


_VARIANTS: dict[str, Variant] = {}
_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forget every compiled DSL function (the next call compiles again)."""
    with _LOCK:
        _VARIANTS.clear()


def _read_text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


#: How the DSL's PTX declares the kernel's shared memory: one dynamic region, sized at launch.
_DYNAMIC_SMEM = ".extern .shared"


#: The DSL's compile option that keeps Python locations in the IR (so a verifier error can name a line).
_LINE_INFO = "--generate-line-info"


def _located_error(exc: Exception, fn: Callable, arch: str, fake: Sequence[Any], opts: str) -> GemmlabError:
    """The CompileError for ``exc``; a verifier error that names no line of the student's is compiled once
    more with line info, whose error says which line (and, for a value carried out of a branch, where it
    was made). The second compile's error is used only if it fails the same way."""
    if _LINE_INFO not in opts and needs_line_info(exc, fn):
        _, cute = load()
        try:
            cute.compile(fn, *fake, options=f"{opts} {_LINE_INFO}")
        except Exception as located:  # the same error, now with its Python location
            if headline(located) == headline(exc):
                return to_compile_error(located, fn, arch)
    return to_compile_error(exc, fn, arch)


def _compile_variant(fn: Callable, arch: str, sig: tuple, values: Sequence[Any], options: str) -> Variant:
    _, cute = load()
    fake = convert.compile_args(sig, values)
    root = _cache.cache_root() / "dsl" / "artifacts"
    root.mkdir(parents=True, exist_ok=True)
    dump = tempfile.mkdtemp(prefix="compile-", dir=root)
    opts = f"--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {dump} {options}".strip()
    start = time.perf_counter()
    try:
        compiled = cute.compile(fn, *fake, options=opts)
    except GemmlabError:
        raise
    except Exception as exc:  # the DSL's errors, MLIR's and the student's own Python errors alike
        raise _located_error(exc, fn, arch, fake, opts) from None
    finally:
        seconds = time.perf_counter() - start
    try:
        ptx = _read_text(getattr(compiled, "__ptx__", None))
        cubin = getattr(compiled, "__cubin__", None) or b""
        cubin = cubin.encode("latin-1") if isinstance(cubin, str) else bytes(cubin)
    finally:
        shutil.rmtree(dump, ignore_errors=True)
    kernel_name, res = resources_with_spills(cubin, ptx) or ("", None)
    if res is not None and _DYNAMIC_SMEM in ptx:
        res = replace(res, dynamic_smem_bytes=dynamic_smem_bytes(_read_text(getattr(compiled, "ir_module", None))))
    from gemmlab.compiling.sass import warn_if_wgmma_serialized

    warn_if_wgmma_serialized(ptx, cubin, getattr(fn, "__name__", "kernel"))
    return Variant(arch, sig, compiled, ptx, cubin, kernel_name, res, seconds)


def get_variant(fn: Callable, fn_key: str, arch: str, sig: tuple, values: Sequence[Any],
                options: str) -> tuple[Variant, bool]:
    """(variant, was_cached): compile only when this source/arch/signature is new."""
    traced = timeline_key()  # a build with the timeline's marks (gemmlab.profiling.switch) is cached apart
    key = _cache.key_for(fn_key, arch, repr(sig), options, *([traced] if traced else []))
    with _LOCK:
        hit = _VARIANTS.get(key)
        if hit is not None:
            hit.hits += 1
            return hit, True
        with compiling():  # CPU work: a grader's timing on this GPU need not wait for it
            variant = _compile_variant(fn, arch, sig, values, options)
        _VARIANTS[key] = variant
        return variant, False


# ----------------------------------------------------------------- the student's handle


def _check_arch(arch: str) -> str:
    if not isinstance(arch, str) or not arch.startswith("sm_"):
        raise CompileError(f"arch must look like 'sm_90a' (one of {', '.join(ARCHS)}), not {arch!r}.")
    return arch


@dataclass
class DslKernel:
    """A compiled CuTe DSL function; call it like the original with torch CUDA tensors.

    Calling with a new dtype, majorness or alignment compiles one more variant (cached);
    new sizes never do. Attributes describe the last variant compiled or used.
    """

    fn: Callable
    arch: str | None = None
    options: str = ""
    dtypes: dict[str, str] | None = None
    min_align: int | None = None
    _params: list = field(default_factory=list, repr=False)
    _fn_key: str = field(default="", repr=False)
    _refs: list = field(default_factory=list, repr=False)
    _ref_values: tuple = field(default=(), repr=False)
    _last: Variant | None = field(default=None, repr=False)
    cached: bool = False

    def __post_init__(self) -> None:
        self._params = convert.params_of(self.fn)
        self._rekey()
        if self.dtypes:
            self.dtypes = {k: dtype_name(v) for k, v in self.dtypes.items()}

    # -- compile

    def _rekey(self) -> None:
        self._fn_key = _cache.key_for(source_key(self.fn))
        self._refs = global_refs(self.fn)
        self._ref_values = _snapshot(self._refs)

    def current_key(self) -> str:
        """The source key as the globals stand now (recomputed only when one of them was rebound)."""
        now = _snapshot(self._refs)
        if any(a is not b for a, b in zip(now, self._ref_values)):
            self._rekey()
        return self._fn_key

    def _variant(self, args: Sequence[Any], arch: str, need_cuda: bool) -> tuple[Variant, tuple, list]:
        bound = convert.bind(self.fn, self._params, args)
        sig = convert.signature(bound, need_cuda, self.dtypes, self.min_align)
        values = [v for _, v in bound]
        variant, cached = get_variant(self.fn, self.current_key(), arch, sig, values, self.options)
        self._last, self.cached = variant, cached
        return variant, sig, values

    def compile_for(self, *example_args: Any) -> "DslKernel":
        """Compile (or find cached) the variant for these example arguments; no GPU needed."""
        arch = _check_arch(self.arch or current_arch())
        self._variant(example_args, arch, need_cuda=False)
        return self

    # -- run

    def __call__(self, *args: Any) -> None:
        """Run on torch's current stream (passed as the ``stream`` parameter; a function without one
        launches on CUDA's default stream, which is then joined to the current one). A kernel that
        calls ``cute.printf`` is waited for, so its output shows in the cell."""
        from .recording import active

        recorder = active()
        if recorder is not None:
            self._record(args, recorder)
            return
        require_gpu(f"Running the DSL kernel `{self.name}`")
        faults.raise_if_lost()
        torch_device()  # torch owns the CUDA context; the DSL loads its module into it
        arch = current_arch()  # a cubin for another arch would not load on this GPU
        variant, sig, values = self._variant(args, arch, need_cuda=True)
        runtime = convert.runtime_args(sig, values)
        call_kwargs = None
        if any(getattr(s, "constexpr", False) for s in sig):
            names = [p.name for p, s in zip(self._params, sig) if not getattr(s, "constexpr", False)]
            call_kwargs = dict(zip(names, runtime))
        run = (lambda: variant.compiled(**call_kwargs)) if call_kwargs is not None else (lambda: variant.compiled(*runtime))
        takes_stream = any(p.is_stream for p in self._params)
        try:
            with contextlib.nullcontext() if takes_stream else default_stream_joined():
                if variant.launched:
                    status = run()
                else:
                    # The DSL prints (to C's stdout) its complaint about too much shared memory, then skips
                    # the launch or fails it: the first launch of each variant raises that complaint instead.
                    status = first_launch(run, self.name)
                    variant.launched = True
        except GemmlabError:
            raise
        except Exception as exc:
            raise self._launch_error(exc) from None
        if isinstance(status, int) and status != 0:
            from cuda.bindings import driver

            try:
                raise faults.error_for(driver.CUresult(status), f"DSL kernel `{self.name}`")
            except ValueError:
                raise KernelError(f"DSL kernel `{self.name}` returned CUDA error code {status}.") from None
        if uses_printf(variant.ptx):
            forward_device_printf(lambda: synchronize(what=f"DSL kernel `{self.name}`", flush_printf=True))

    def _record(self, args: Sequence[Any], recorder: Any) -> None:
        """Write down what this call launches (a recording, :mod:`gemmlab.dsl.recording`): no GPU is touched."""
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():   # the DSL's own use of torch is not the student's function's
            host, tensors = self._host_recording(args, recorder.arch, recorder.device_attributes)
        recorder.add_launches(host, tensors)

    def _host_recording(self, args: Sequence[Any], arch: str, device_attributes: Any) -> tuple[Any, list]:
        from cuda.bindings import driver

        from . import host_recording as host

        variant, sig, values = self._variant(args, arch, need_cuda=False)
        runtime = convert.runtime_args(sig, values, stream=driver.CUstream(0))
        names = [p.name for p, s in zip(self._params, sig) if not getattr(s, "constexpr", False)]
        try:
            exe_args, _ = variant.compiled.generate_execution_args(**dict(zip(names, runtime)))
        except Exception as exc:  # noqa: BLE001 - the DSL's argument errors, said in its words
            raise LaunchError(f"DSL kernel `{self.name}`: its arguments could not be passed: {headline(exc)}") from None
        if variant.host_object is None:
            variant.host_object = host.export_object(variant.compiled, "gemmlab")
        res = variant.resources
        resources = {} if res is None else {0: res.max_threads_per_block, 1: res.static_smem_bytes,
                                            2: res.const_bytes, 3: res.stack_frame_bytes, 4: res.registers}
        sizes = {name: host.kernel_param_sizes(variant.ptx, name) for name in host.kernel_names(variant.ptx)}
        emulated = host.EmulatedRuntime(device_attributes, {k: resources for k in sizes}, sizes)
        recording = host.run_host_code(variant.host_object, "gemmlab",
                                       [getattr(a, "value", a) for a in exe_args], emulated)
        return recording, [v for s, v in zip(sig, values) if isinstance(s, convert.TensorSig)]

    def _launch_error(self, exc: BaseException) -> GemmlabError:
        fault = faults.classify(str(exc))
        if fault is not None and fault.context_lost:
            return faults.mark_lost(f"DSL kernel `{self.name}` failed: {headline(exc)}")
        return KernelError(f"DSL kernel `{self.name}` failed to launch: {headline(exc)}")

    # -- what the course shows

    def _need(self) -> Variant:
        if self._last is None:
            raise GemmlabError(f"`{self.name}` is not compiled yet: call gemmlab.dsl.compile(fn, *example_args) "
                               "or run it once.")
        return self._last

    @property
    def name(self) -> str:
        f = getattr(self.fn, "__wrapped__", self.fn)
        return getattr(f, "__name__", "dsl_kernel")

    @property
    def signature(self) -> str:
        return convert.signature_text(self.fn, self._params)

    @property
    def ptx(self) -> str:
        return self._need().ptx

    @property
    def cubin(self) -> bytes:
        return self._need().cubin

    @property
    def resources(self) -> Resources | None:
        return self._need().resources

    @property
    def compile_seconds(self) -> float:
        return self._need().compile_seconds

    @property
    def kernel_name(self) -> str:
        return self._need().kernel_name

    @property
    def compiled_arch(self) -> str:
        return self._need().arch

    def sass(self) -> str:
        """SASS of the cubin (gemmlab.compiling.sass: nvdisasm or cuobjdump)."""
        from gemmlab.compiling.sass import disassemble

        return disassemble(self.cubin, self.name)

    def summary(self) -> str:
        v = self._need()
        res = v.resources.summary() if v.resources else "resources unknown"
        when = "cached" if self.cached else f"compiled in {v.compile_seconds:.2f} s"
        return f"{self.name} [{v.arch}]: {res} ({when})"

    def __repr__(self) -> str:
        return f"<DslKernel {self.signature} {self.summary() if self._last else '(not compiled yet)'}>"


def _refuse_in_judge(fn: Any) -> None:
    """In the grader's judge a student's DSL function is a stand-in: it is built in the student's process."""
    if isinstance(fn, DslAnswer):
        raise StudentProcessOnly(f"{fn.__name__} is a CuTe DSL function of yours: the grader builds and tests it in "
                                 "your notebook's process, not in the judge.")


def compile(fn: Callable, *example_args: Any, arch: str | None = None, options: str | Sequence[str] | None = None,
            dtypes: dict[str, Any] | None = None, min_align: int | None = None) -> DslKernel:
    """Compile the ``@cute.jit`` function ``fn`` for ``example_args`` (torch tensors / numbers).

    ``arch=None`` targets this machine's GPU; give ``arch='sm_90a'`` (or sm_80, sm_100a) to
    compile without one. CPU tensors stand in for shape, dtype and strides. ``dtypes``
    ({param: torch dtype}) and ``min_align`` (bytes) declare what the kernel expects, so a
    wrong call fails with a clear LaunchError. Returns a :class:`DslKernel`.

    In the grader's judge, ``fn`` is the student's function seen from there (a DslAnswer): the student's
    kernel compiles it, and the result is a handle of that kernel (:class:`gemmlab.answers.stand_ins.CompiledAnswer`).
    """
    if isinstance(fn, DslAnswer):
        return fn.compile(*example_args, arch=arch, options=" ".join(options) if isinstance(options, (list, tuple))
                          else options, dtypes=dtypes, min_align=min_align)
    if not callable(fn):
        raise LaunchError(f"gemmlab.dsl.compile needs the @cute.jit function, not {type(fn).__name__}.")
    opts = " ".join(options) if isinstance(options, (list, tuple)) else (options or "")
    kernel = DslKernel(fn, arch=_check_arch(arch) if arch else None, options=opts, dtypes=dtypes,
                       min_align=min_align)
    return kernel.compile_for(*example_args)


def gemm_fn(fn: Callable, arch: str | None = None, options: str = "", dtypes: dict[str, Any] | None = None,
            min_align: int | None = None) -> DslKernel:
    """A GEMM function for check_gemm/bench_gemm from a ``@cute.jit`` fn(A, B, D[, stream]).

    Nothing compiles until the first call; each new dtype/alignment signature then compiles
    once and every shape after that reuses it.
    """
    _refuse_in_judge(fn)
    return DslKernel(fn, arch=_check_arch(arch) if arch else None, options=options, dtypes=dtypes,
                     min_align=min_align)
