// gemmlab: NVRTC has no C library headers, but device assert() is built into NVRTC (and, as
// usual, does nothing when NDEBUG is defined: gemmlab compiles with -DNDEBUG unless you pass
// -UNDEBUG), so '#include <assert.h>' only needs to resolve.
#pragma once
