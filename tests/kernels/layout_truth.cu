// Ground truth for gemmlab.layout: CuTe C++ writes, for every thread, the coordinates it
// owns under several partitions of identity tensors. One kernel, one compile.
// Output: for section s and thread t, out[(s*NTHR + t)*STRIDE] = number of values,
// followed by (row, col) of each value in column-major order of the partition.
#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/copy_atom.hpp>

using namespace cute;

constexpr int NTHR = 128;
constexpr int STRIDE = 1024;

template <class T>
__device__ void dump(int* out, int section, int tid, T const& t)
{
  int* p = out + (section * NTHR + tid) * STRIDE;
  int n = int(size(t));
  p[0] = n;
  for (int i = 0; i < n && 2 * i + 2 < STRIDE; ++i) {
    auto c = t(i);
    p[1 + 2 * i] = int(get<0>(c));
    p[2 + 2 * i] = int(get<1>(c));
  }
}

extern "C" __global__ void layout_truth(int* out)
{
  int tid = threadIdx.x;
  auto cA = make_identity_tensor(make_shape(Int<64>{}, Int<32>{}));   // (M,K) or (N,K)
  auto cC = make_identity_tensor(make_shape(Int<64>{}, Int<64>{}));   // (M,N)

  // Sections 0-2: 2x2 warps of m16n8k16, tile 32x32x16.
  auto mma1 = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<_2, _2, _1>>{}, Tile<_32, _32, _16>{});
  auto thr1 = mma1.get_slice(tid);
  dump(out, 0, tid, thr1.partition_A(cA));
  dump(out, 1, tid, thr1.partition_B(cA));
  dump(out, 2, tid, thr1.partition_C(cC));

  // Sections 3-5: 4x1 warps of m16n8k8 with a permuted N mode.
  auto mma2 = make_tiled_mma(SM80_16x8x8_F32F16F16F32_TN{}, Layout<Shape<_4, _1, _1>>{},
                             Tile<_64, Layout<Shape<_8, _2, _2>, Stride<_1, _16, _8>>, _8>{});
  auto thr2 = mma2.get_slice(tid);
  dump(out, 3, tid, thr2.partition_A(cA));
  dump(out, 4, tid, thr2.partition_B(cA));
  dump(out, 5, tid, thr2.partition_C(cC));

  // Sections 6-7: 16x8 threads of UniversalFMA.
  auto mma3 = make_tiled_mma(UniversalFMA<float, float, float, float>{}, Layout<Shape<_16, _8, _1>>{});
  auto thr3 = mma3.get_slice(tid);
  dump(out, 6, tid, thr3.partition_A(cA));
  dump(out, 7, tid, thr3.partition_C(cC));

  // Sections 8-9: 128-bit vector copy, 32x4 threads (K-major), 1x8 values.
  auto cp1 = make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, half_t>{},
                             Layout<Shape<_32, _4>, Stride<_4, _1>>{}, Layout<Shape<_1, _8>>{});
  auto tc1 = cp1.get_slice(tid);
  dump(out, 8, tid, tc1.partition_S(cC));
  dump(out, 9, tid, tc1.partition_D(cC));

  // Section 10: cp.async of 64 bits, 16x8 threads, 1x4 values.
  auto cp2 = make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEALWAYS<uint64_t>, half_t>{},
                             Layout<Shape<_16, _8>, Stride<_8, _1>>{}, Layout<Shape<_1, _4>>{});
  dump(out, 10, tid, cp2.get_slice(tid).partition_S(cA));

  // Sections 11-13: ldmatrix copies lined up with mma1 (smem side S, register side D).
  auto ldA = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, half_t>{}, mma1);
  dump(out, 11, tid, ldA.get_slice(tid).partition_S(cA));
  dump(out, 12, tid, ldA.get_slice(tid).partition_D(cA));
  auto ldB = make_tiled_copy_B(Copy_Atom<SM75_U16x8_LDSM_T, half_t>{}, mma1);
  dump(out, 13, tid, ldB.get_slice(tid).partition_S(cA));

  // Sections 14-15: local_partition with column-major and row-major thread layouts.
  dump(out, 14, tid, local_partition(cA, Layout<Shape<_16, _8>>{}, tid));
  dump(out, 15, tid, local_partition(cC, Layout<Shape<_32, _4>, Stride<_4, _1>>{}, tid));

  // Sections 16-17: local_tile, one tile per thread coordinate, and with a kept mode (_).
  dump(out, 16, tid, local_tile(cA, Shape<_16, _8>{}, make_coord(tid % 4, (tid / 4) % 4)));
  auto cS = make_identity_tensor(make_shape(Int<64>{}, Int<16>{}));
  dump(out, 17, tid, local_tile(cS, Shape<_16, _8>{}, make_coord(tid % 4, _)));
}
