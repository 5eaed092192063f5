// Planted bug: a store through a pointer offset far outside any allocation, which the GPU
// reports as an illegal memory access (a sticky error: the CUDA context is lost).
extern "C" __global__ void wild_store(float* x, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i + (1LL << 40)] = 1.0f;  // BUG: 4 TiB past x
}
