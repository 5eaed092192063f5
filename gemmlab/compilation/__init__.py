"""How a CUDA C++ source becomes a cubin: the parts under :mod:`gemmlab.compiler`.

``job`` (what to compile, checked before any work), ``nvrtc`` (one NVRTC compile in this
process), ``worker`` (that compile in a child process with a time limit, which an interrupt
stops), ``store`` (the on-disk cache of results), ``record`` (the result) and ``elf`` (sizes
read from a cubin). Nothing here imports :mod:`gemmlab.compiler` or :mod:`gemmlab.ahead`.
"""
