"""What the classroom's tests have students do in their kernels: nbgrader's fetch, submit and fetch-feedback
(the commands behind JupyterLab's Assignments tab), and answers to notebook 02 that are honest, wrong or hostile."""
from __future__ import annotations

import json
import textwrap

from tests.gemmlab.remote.launchers import TN_SOURCE
from tests.support import ROOT
from autograder.cell_metadata import grade_id

ASSIGNMENT = "02_tiled_copy"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
ANSWER = "copy_layouts"


def nbgrader(*args: str) -> str:
    """Kernel code: run ``nbgrader ARGS`` in the student's home and print its exit status and last lines."""
    return textwrap.dedent(f"""
        import os, subprocess, sys
        _p = subprocess.run([sys.executable, "-m", "nbgrader", *{list(args)!r}], capture_output=True, text=True,
                            cwd=os.environ["HOME"])
        print("exit", _p.returncode)
        print((_p.stdout + _p.stderr)[-2000:])
    """)


def answer(kind: str) -> str:
    """The student's ``copy_layouts`` cell: the solution, a plausible mistake, or a hostile cell."""
    nb = json.loads((ROOT / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    (solution,) = ["".join(c["source"]) for c in nb["cells"]
                   if grade_id(c) == ANSWER]
    solution = "\n".join(line for line in solution.splitlines() if "### " not in line)
    if kind == "honest":
        return solution
    if kind == "wrong":   # threads numbered down the columns: a warp no longer reads whole rows
        wrong = solution.replace("L.Layout((thr_m, thr_n), (thr_n, 1))", "L.Layout((thr_m, thr_n), (1, thr_m))")
        assert wrong != solution, "the solution's thread layout changed: update tests/classroom/work.py"
        return wrong
    if kind == "hostile":   # silence the visible checks and answer anything
        return textwrap.dedent("""
            import builtins
            check_copy_layouts = lambda *a, **k: None
            builtins.check_copy_layouts = check_copy_layouts
            def copy_layouts(tile_m, tile_n, elem_bytes, num_threads=128):
                return L.Layout((1, 1), (1, 1)), L.Layout((1, 1), (1, 1))
            print("Exercise 1: the visible cases pass.")
        """)
    raise ValueError(kind)


def edit(kind: str) -> str:
    """Kernel code: write ``kind``'s answer into the fetched notebook, as a student's typing would."""
    return textwrap.dedent(f"""
        import json, os
        _path = os.path.join(os.environ["HOME"], {ASSIGNMENT!r}, {NOTEBOOK!r})
        _nb = json.load(open(_path))
        for _c in _nb["cells"]:
            if _c["metadata"].get("nbgrader", {{}}).get("grade_id") == {ANSWER!r}:
                _c["source"] = {answer(kind)!r}
        json.dump(_nb, open(_path, "w"))
        print("edited")
    """)


FORGE = textwrap.dedent(f"""
    # A hostile student writes a complete hand-in named for a classmate, dated after everyone's.
    import glob, os, json, shutil
    _inbound = os.path.join({{exchange!r}}, "gemmlab", "inbound")
    (_mine,) = glob.glob(os.path.join(_inbound, "*+{ASSIGNMENT}+*"))
    _fake = os.path.join(_inbound, "bob+{ASSIGNMENT}+2099-01-01 00:00:00.000000 UTC+forged")
    shutil.copytree(_mine, _fake)
    open(os.path.join(_fake, "timestamp.txt"), "w").write("2099-01-01 00:00:00.000000 UTC")
    print(sorted(os.listdir(_inbound)))
""")


#: A student's check of a small GEMM kernel: compiled here, judged on the pool (no token set, no GPU here).
CHECK = textwrap.dedent(r'''
    import math, os, gemmlab
    from gemmlab.remote import connection
    k = gemmlab.compile(SOURCE, "gemm_tiny", arch="sm_90a")
    def gemm(A, B, D):
        M, K = A.shape; N = B.shape[0]
        k(A, B, D, M, N, K, grid=(math.ceil(N / 16), math.ceil(M / 16)), block=(16, 16))
    print("token set:", "GEMMLAB_POOL_TOKEN" in os.environ, "gpu:", gemmlab.running.gpu.has_gpu())
    r = gemmlab.check_gemm(gemm, shapes=[(64, 64, 32)])
    print("passed:", r.passed)
    print("me:", connection.current().account()["student"])
''').replace("SOURCE", repr(TN_SOURCE.replace("NAME", "gemm_tiny")))


#: A hostile student's probes of the class from their kernel (format with root, course, repo).
HOSTILE = textwrap.dedent(r'''
    import glob, json, os, socket, urllib.request
    root = {root!r}
    tried = {{}}
    def attempt(name, fn):
        try:
            tried[name] = "READ " + repr(fn())[:200]
        except Exception as exc:
            tried[name] = type(exc).__name__
    attempt("bob_home", lambda: os.listdir(root + "/home/bob"))
    attempt("bob_handins", lambda: os.listdir(root + "/handins/bob"))
    attempt("bob_feedback", lambda: os.listdir(root + "/feedback/bob"))
    attempt("submitted", lambda: os.listdir(root + "/course/autograder/submitted"))
    attempt("gradebook", lambda: open(root + "/course/autograder/gradebook.db", "rb").read(16))
    attempt("solutions", lambda: os.listdir(root + "/course/solutions"))
    attempt("hub_dir", lambda: os.listdir(root + "/hub"))
    attempt("accounts", lambda: open(root + "/accounts.json").read())
    attempt("repo_solutions", lambda: os.listdir({repo!r} + "/solutions"))
    attempt("write_release", lambda: open(root + "/exchange/{course}/outbound/x", "w"))
    attempt("pids", lambda: [p for p in os.listdir("/proc") if p.isdigit() and int(p) > 2 and
                             "jupyterhub" in open(f"/proc/{{p}}/cmdline").read()])
    env = dict(os.environ)
    print(json.dumps({{"tried": tried, "env": env, "inbound": os.listdir(root + "/exchange/{course}/inbound")}}))
''')
