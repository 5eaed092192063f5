"""Code the grader sends into a submission's kernel: a bootstrap before any student cell, and
a tamper probe after every graded cell.

The bootstrap turns gemmlab's grading mode on (library GEMMs forbidden inside checked calls,
bench results verified; see gemmlab/checking/check.py and gemmlab/timing/bench.py) and remembers the objects a
student could replace to make failing tests pass: the check functions and result classes, the
comparison helpers of torch and numpy, every builtin, IPython's execution and error-display
machinery, and the hooks through which code can be rewritten or errors swallowed. The probe
compares them with the originals. Everything here runs in the student's own process, so a
student who studies this file can defeat it; docs/THREAT_MODEL.md says what that leaves.
"""
from __future__ import annotations

import secrets
from typing import Any

MODULE_PREFIX = "_gemmlab_grader_"
#: Most findings of the tamper probe kept (each at most 200 characters).
MAX_PROBLEMS = 20

_BOOTSTRAP = r'''
def __gemmlab_grader_bootstrap(module_name):
    import builtins, inspect, os, sys, types, warnings
    warnings.filterwarnings("ignore")
    os.environ["GEMMLAB_GRADING"] = "1"
    import numpy
    import gemmlab
    import gemmlab.checking.check, gemmlab.checking.integrity, gemmlab.checking.report
    import gemmlab.notebook.nbhelpers, gemmlab.timing.bench, gemmlab.timing.events, gemmlab.timing.perfbar
    import gemmlab.errors, gemmlab.notebook.ipython, gemmlab.offload, gemmlab.results
    try:
        import torch, torch.testing
    except ImportError:
        torch = None
    ip = get_ipython()
    watched = []
    missing = object()
    def static(owner, name):
        try:
            return inspect.getattr_static(owner, name)
        except AttributeError:
            return missing
    def watch(label, owner, names):
        for name in names:
            value = static(owner, name)
            if value is not missing:
                watched.append((f"{label}.{name}", owner, name, value))
    for mod in (gemmlab.checking.check, gemmlab.timing.bench, gemmlab.timing.perfbar, gemmlab.notebook.nbhelpers,
                gemmlab.checking.report, gemmlab.checking.integrity, gemmlab.timing.events, gemmlab.results,
                gemmlab.offload):
        watch(mod.__name__, mod, [n for n, v in vars(mod).items() if not n.startswith("__") and callable(v)])
    watch("gemmlab.notebook.ipython", gemmlab.notebook.ipython, ["short_error_handler", "format_error", "install"])
    for cls in (gemmlab.results.CheckResult, gemmlab.results.Row, gemmlab.results.BenchResult,
                gemmlab.timing.perfbar.PerfBarResult):
        watch(cls.__qualname__, cls, [n for n in vars(cls) if not n.startswith("__") or n in ("__bool__", "__init__", "__eq__")])
    watch("gemmlab", gemmlab, ["check_gemm", "bench_gemm", "performance_bar"])
    watch("numpy", numpy, ["allclose", "isclose", "array_equal", "all", "any"])
    watch("numpy.testing", numpy.testing, ["assert_allclose", "assert_array_equal", "assert_equal"])
    watch("numpy.ndarray", numpy.ndarray, ["all", "any", "__eq__"])
    if torch is not None:
        watch("torch", torch, ["allclose", "isclose", "equal", "all", "any"])
        watch("torch.testing", torch.testing, ["assert_close"])
        watch("torch.Tensor", torch.Tensor, ["all", "any", "item", "__bool__", "__eq__"])
    watch("IPython shell", type(ip), ["run_cell", "run_cell_async", "run_ast_nodes", "run_code", "showtraceback",
                                      "_showtraceback", "showsyntaxerror", "transform_cell", "should_run_async"])
    watch("IPython instance", ip, ["run_cell", "run_cell_async", "run_ast_nodes", "run_code", "showtraceback",
                                   "_showtraceback", "showsyntaxerror", "transform_cell"])
    short_errors = gemmlab.notebook.ipython.short_error_handler   # gemmlab's own handler still reports an error output

    def errors_redirected():
        caught = ip.custom_exceptions
        if caught == ():
            return False
        if not all(isinstance(e, type) and issubclass(e, gemmlab.errors.GemmlabError) for e in caught):
            return True
        func = getattr(ip.CustomTB, "__func__", None)
        cells = [c.cell_contents for c in (getattr(func, "__closure__", None) or ())]
        return not any(c is short_errors for c in cells)
    if getattr(ip, "kernel", None) is not None:
        watch("kernel", type(ip.kernel), ["do_execute", "execute_request", "run_cell"])
        watch("kernel instance", ip.kernel, ["do_execute", "execute_request", "run_cell"])
    watch("AssertionError", AssertionError, ["__init__", "__new__"])
    # IPython and ipykernel swap these per execution (stdin forwarding, the displayhook's history).
    ipython_names = {"_", "__", "___", "exit", "quit", "get_ipython", "display", "__IPYTHON__", "__builtins__",
                     "input", "raw_input", "getpass"}
    builtin_items = {k: v for k, v in vars(builtins).items() if k not in ipython_names}
    allowed_hooks = ("matplotlib", "ipykernel", "IPython", "ipywidgets", "matplotlib_inline", "comm")
    lists = {"ast_transformers": list(ip.ast_transformers),
             "input_transformers_post": list(ip.input_transformers_post),
             "input_transformers_cleanup": list(ip.input_transformers_cleanup)}
    events = {name: list(cbs) for name, cbs in ip.events.callbacks.items()}

    class Answer:   # user_expressions send its JSON form (application/json), not its repr
        def __init__(self, value):
            self.value = value
        def _repr_json_(self):
            return self.value

    def probe(nonce):
        problems = []
        for label, owner, name, original in watched:
            if static(owner, name) is not original:
                problems.append(f"{label} was replaced")
        now = vars(builtins)
        for name, original in builtin_items.items():
            if now.get(name, missing) is not original:
                problems.append(f"builtin {name} was replaced")
        if sys.gettrace() is not None:
            problems.append("a trace function was set (sys.settrace)")
        if sys.getprofile() is not None:
            problems.append("a profile function was set (sys.setprofile)")
        for name, original in lists.items():
            if list(getattr(ip, name)) != original:
                problems.append(f"IPython {name} were changed")
        for name, cbs in ip.events.callbacks.items():
            before = events.get(name, [])
            if any(cb not in cbs for cb in before):
                problems.append(f"IPython event hook {name!r} was removed")
            for cb in cbs:
                module = getattr(cb, "__module__", "") or ""
                if cb not in before and not module.startswith(allowed_hooks):
                    problems.append(f"IPython event hook {name!r} was added")
        if errors_redirected():
            problems.append("errors were redirected (set_custom_exc)")
        if os.environ.get("GEMMLAB_GRADING") != "1":
            problems.append("GEMMLAB_GRADING was changed")
        return Answer({"nonce": nonce, "problems": sorted(set(problems))})

    sys.modules[module_name] = types.SimpleNamespace(probe=probe)

__gemmlab_grader_bootstrap(%(module)r)
del __gemmlab_grader_bootstrap
'''


def bootstrap_code(module_name: str) -> str:
    return _BOOTSTRAP % {"module": module_name}


def new_module_name() -> str:
    return MODULE_PREFIX + secrets.token_hex(8)


def probe_expression(module_name: str, nonce: str) -> str:
    return f"__import__('sys').modules[{module_name!r}].probe({nonce!r})"


def parse_probe(data: dict[str, Any] | None, nonce: str) -> list[str] | None:
    """The problems the probe found ([] = none), or None when no genuine answer came back.

    ``data`` is the probe expression's display data as ``user_expressions`` returns it."""
    value = (data or {}).get("application/json")
    if not isinstance(value, dict) or value.get("nonce") != nonce:
        return None
    problems = value.get("problems")
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        return None
    if len(problems) > MAX_PROBLEMS:        # the student's process answers: its account is kept short
        problems = problems[:MAX_PROBLEMS] + [f"and {len(problems) - MAX_PROBLEMS:,} more"]
    return [p[:200] for p in problems]
