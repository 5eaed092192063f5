"""Notebook helpers: what runs inside a student's JupyterLab around the kernels.

``nbhelpers`` (what the course notebooks share, one idea a cell), ``magic`` (the ``%%kernel`` cell magic),
``ipython`` (gemmlab errors as one short red message), ``headless`` (notebooks run without a browser) and
``doctor`` (``gemmlab doctor``: what works on this machine, and how to fix what does not).
"""
from gemmlab.moved import submodules_on_use

__getattr__ = submodules_on_use("gemmlab.notebook")
