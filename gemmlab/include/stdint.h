// gemmlab: NVRTC has no C library headers; CCCL's <cuda/std/cstdint> declares int8_t ... uint64_t,
// intptr_t and their limits in the global namespace, as <stdint.h> does.
#pragma once
#include <cuda/std/cstdint>
