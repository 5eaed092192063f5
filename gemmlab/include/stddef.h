// gemmlab: NVRTC has no C library headers; size_t, ptrdiff_t and NULL are built into NVRTC, and
// CCCL's <cuda/std/cstddef> adds the rest (offsetof, max_align_t).
#pragma once
#include <cuda/std/cstddef>
