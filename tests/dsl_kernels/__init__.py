"""CuTe DSL kernels used by gemmlab's tests: a small correct GEMM and planted-bug variants."""
