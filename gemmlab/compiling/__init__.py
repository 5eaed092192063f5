"""Compiling: how a CUDA C++ source becomes a cubin, and what the machine code then says.

:mod:`~gemmlab.compiling.compiler` is the entry (``gemmlab.compile``) and
:mod:`~gemmlab.compiling.ahead` compiles a notebook's variants before they are needed. Under them: ``job`` (what to compile, checked before any work), ``nvrtc`` (one NVRTC compile in this
process), ``worker`` (that compile in a child process with a time limit, which an interrupt
stops), ``store`` (the on-disk cache of results), ``record`` (the result) and ``elf`` (sizes
read from a cubin); none of these imports ``compiler`` or ``ahead``. Around them: ``toolchain`` (NVRTC and the
headers found), ``cache`` (the content-addressed store), ``diagnostics`` and ``cell_lines`` (NVRTC's log on the
student's own lines), ``signature`` (a kernel's parameters), ``resources`` (registers, shared memory, spills),
and the readers of the result, ``ptx`` and ``sass``.
"""
from gemmlab.moved import submodules_on_use

__getattr__ = submodules_on_use("gemmlab.compiling")
