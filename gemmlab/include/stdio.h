// gemmlab: NVRTC has no C library headers, but device printf() is built into NVRTC, so
// '#include <stdio.h>' (written for printf) only needs to resolve. A real <stdio.h> earlier on the
// include path wins over this one.
#pragma once
