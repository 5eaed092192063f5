// Planted bug: a store through a wild pointer, which the GPU reports as an illegal memory
// access (a sticky error: the CUDA context is lost). The address is 2^48 bytes: above the
// 47-bit user address space, so it is neither a device allocation (unified addressing keeps
// those inside it) nor host memory, which a GPU with HMM could otherwise reach and corrupt.
// (An offset from x such as x + 2^40 once landed in the Python process's own heap on an H100.)
extern "C" __global__ void wild_store(float* x, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    reinterpret_cast<float*>(1ULL << 48)[i] = x[i];  // BUG: no allocation lives there
}
