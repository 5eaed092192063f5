"""Checking: is a student's kernel right, and was its work honest?

``check`` (GEMMs over a suite of shapes: ``gemmlab.check_gemm``), ``copy_check`` (copies and transposes:
``gemmlab.check_copy``), ``integrity`` (guard zones, poison, what counts as the kernel's own work),
``thread_shares`` (which outputs each thread writes, seen from outside), ``cexpr`` and ``cfunction`` (a
student's C index arithmetic run on the CPU with C's meaning), ``library_watch`` (which libraries an answer
used) and ``report`` (results published as data for the grader).
"""
from gemmlab.moved import submodules_on_use

__getattr__ = submodules_on_use("gemmlab.checking")
