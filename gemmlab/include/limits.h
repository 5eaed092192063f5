// gemmlab: NVRTC has no C library headers; CCCL's <cuda/std/climits> defines the macros
// (INT_MAX, LLONG_MIN, CHAR_BIT ...) that <limits.h> does.
#pragma once
#include <cuda/std/climits>
