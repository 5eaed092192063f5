"""Notebook 07 run without a GPU, cell by cell, with an answer cell replaced by a wrong answer.

Why: every exercise's test cell (visible and hidden tests together) must fail the plausible
wrong answers. The kernel cells run from files (``tools/solution_cells``: the CuTe DSL reads its
functions' source); the other cells run by grade_id in the same namespace, as the notebook would
on a machine without a GPU (sm_90a, nothing runs).
"""
from __future__ import annotations

import random
from pathlib import Path

import nbformat

import solution_cells  # noqa: E402  (tools/ is on the test path)

from tests.support import ROOT

ASSIGNMENT = "07_hopper"
NOTEBOOK = ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
RELEASE = ROOT / "course" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
#: The parts of the Blackwell GEMM, in notebook order: three answer cells, then the given kernel.
BW_GEMM_CELLS = ("hopper_bw_kloop", "hopper_bw_tmem", "hopper_bw_grid", "hopper_bw_gemm")
#: Cells the Blackwell tests need, after the kernels: shapes, Exercise 7's build, the event reader, the checkers.
BW_SUPPORT_CELLS = ("pipeline_shapes", "build_bw", "bw_events", "bw_tile_check_helper", "bw_grid_check_helper",
                    "build_bw_gemm", "bw_kloop_check_helper", "bw_tmem_check_helper")
PREAMBLE = ("import math, random, re, inspect, numpy as np, torch\nimport matplotlib\nmatplotlib.use('Agg')\n"
            "import matplotlib.pyplot as plt\nfrom IPython.display import display\nimport gemmlab\n"
            "from gemmlab import layout as L, draw, nbhelpers as nbh, techniques as T\nshow = plt.close\n"
            "GPU, ARCH, HOPPER, BLACKWELL = False, 'sm_90a', True, False\n")


def cells(path: Path = NOTEBOOK) -> dict[str, str]:
    """grade_id -> source of every cell of the solutions notebook (or of the student release, ``path=RELEASE``)."""
    nb = nbformat.read(path, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells if c.metadata.get("nbgrader")}


def run(ns: dict, grade_ids, replace: dict[str, str] | None = None) -> dict:
    """Run cells by grade_id in ``ns`` (``replace``: grade_id -> source to run instead); Python's random seeded."""
    src = cells()
    random.seed(0)
    for gid in grade_ids:
        exec(compile((replace or {}).get(gid, src[gid]), f"<07:{gid}>", "exec"), ns)
    return ns


def plain_namespace() -> dict:
    ns: dict = {"__name__": "notebook_07"}
    exec(PREAMBLE, ns)
    return ns


def blackwell_namespace(replace: dict[str, str] | None = None) -> dict:
    """The kernels (Hopper common part, Exercise 7's tile, the Blackwell GEMM, each with ``replace``d answer
    cells) and the cells the Blackwell tests need, compiled for sm_100a."""
    src = cells()
    replace = replace or {}
    gemm = "\n\n".join(replace.get(gid, src[gid]) for gid in BW_GEMM_CELLS)
    ns = solution_cells.load_namespace(ASSIGNMENT, ["kernel:hopper_common", "kernel:hopper_bw_tile",
                                                    "kernel:hopper_bw_gemm"],
                                       {"kernel:hopper_bw_gemm": gemm,
                                        "kernel:hopper_bw_tile": replace.get("hopper_bw_tile", src["hopper_bw_tile"])})
    exec(PREAMBLE, ns)
    return run(ns, BW_SUPPORT_CELLS)


#: The Hopper kernels of Exercises 2, 4 and 6, each with its build cell, and what their tests need besides.
HOPPER_KERNELS = {"hopper_one_tile": "build_one_tile", "hopper_pipelined": "build_pipelined", "hopper_ws": "build_ws"}
HOPPER_SUPPORT_CELLS = ("wait_check_helper", "pipeline_shapes")


def hopper_namespace(replace: dict[str, str] | None = None, kernels: tuple[str, ...] = tuple(HOPPER_KERNELS)) -> dict:
    """The Hopper ``kernels`` (answer cells of Exercises 2, 4 and 6, each with its ``replace``d source) with the common
    part, compiled for sm_90a by their build cells, with the setup cell's ``hopper_gpu_here`` and the cells their tests
    need besides."""
    src = cells()
    replace = replace or {}
    parts = {"hopper_one_tile": ("hopper_one_tile",), "hopper_pipelined": ("hopper_pipelined",),
             "hopper_ws": ("hopper_ws_config", "hopper_ws", "hopper_ws_launch")}
    sources = {f"kernel:{k}": "\n\n".join(replace.get(g, src[g]) for g in parts[k]) for k in kernels}
    ns = solution_cells.load_namespace(ASSIGNMENT, ["kernel:hopper_common", *sources], sources)
    exec(PREAMBLE, ns)
    setup = src["setup"]
    exec(compile(setup[setup.index("def hopper_gpu_here"):], "<07:setup>", "exec"), ns)
    return run(ns, [*(HOPPER_KERNELS[k] for k in kernels), *HOPPER_SUPPORT_CELLS])


def solution_part(grade_id: str) -> str:
    """The source of an answer cell."""
    return cells()[grade_id]


def release_part(grade_id: str) -> str:
    """The source of an answer cell as the student release has it (its solution replaced by the placeholder)."""
    return cells(RELEASE)[grade_id]
