/*
 * traits.cuh — stage 04's copy of what stage 03 keeps in its traits.cuh: the
 * mma/swizzle constants, the swizzled tile address and the element-type operations. One
 * stage, one definition; the stage folder still holds every line its kernel runs
 * (DESIGN.md, "Stage map"). What differs from stage 03's header is the tile address:
 * TMA writes a tile as 64-column slabs of 128-byte rows (swizzled_offset below).
 */
#ifndef FX_STAGE04_TRAITS_CUH
#define FX_STAGE04_TRAITS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "fx_problem.h"
#include "ptx/mma_sm80.cuh"
#include "ptx/wgmma_desc.h"  // fx_swizzle128_offset: the 128B swizzle that TMA writes

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

constexpr int kWarpSize = 32;
constexpr unsigned kFullWarp = 0xffffffffu;  // every lane takes part in a shuffle
// One mma.sync.m16n8k16: a 16×16 A tile times a 16×8 B tile into a 16×8 fp32 tile.
constexpr int kMmaM = 16;
constexpr int kMmaN = 8;
constexpr int kMmaK = 16;
// The lanes of one row of an mma accumulator: lanes 4g..4g+3 hold row g (and g+8).
constexpr int kLanesPerRow = 4;
// A 16-byte chunk is the unit of every ldmatrix row and of the swizzle: 8 b16 elements.
constexpr int kChunkBytes = 16;
constexpr int kChunkElems = 8;
constexpr int kElemBytes = 2;  // bf16 and fp16
// Shared memory has 32 banks of 4 bytes: 128 bytes, i.e. 8 chunks, are one bank sweep.
// It is also the span of TMA's 128-byte swizzle: a box row is at most 128 bytes.
constexpr int kSwizzleChunks = 8;
constexpr int kSwizzleRowElems = kSwizzleChunks * kChunkElems;  // 64 elements
constexpr int kSwizzleRowBytes = kSwizzleChunks * kChunkBytes;  // 128 bytes

constexpr int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

/* Byte offset of chunk `chunk` (8 columns) of row `row` in a tile of kRows rows that TMA
 * wrote with the 128-byte swizzle: slab chunk / 8 (kRows × 128 bytes each), then chunk
 * chunk % 8 of the slab's row, stored at chunk (chunk % 8) ^ (row % 8). */
template <int kRows>
__device__ __forceinline__ uint32_t swizzled_offset(int row, int chunk)
{
    return (uint32_t)(chunk / kSwizzleChunks) * (kRows * kSwizzleRowBytes) +
           fx_swizzle128_offset((uint32_t)row, (uint32_t)(chunk % kSwizzleChunks) * kChunkBytes);
}

/* The one place the element type matters: which mma, and how fp32 pairs are packed to
 * the dtype (P, O) and widened from it. */
template <class Element>
struct ElementOps;

template <>
struct ElementOps<__nv_bfloat16> {
    static __device__ __forceinline__ void mma(float d[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1)
    {
        fx_mma_m16n8k16_bf16(d, a, b0, b1);
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        return fx_pack_bf16x2(lo, hi);
    }
};

template <>
struct ElementOps<__half> {
    static __device__ __forceinline__ void mma(float d[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1)
    {
        fx_mma_m16n8k16_fp16(d, a, b0, b1);
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        return fx_pack_f16x2(lo, hi);
    }
};

/*
 * The thread's index, read afresh from %tid.x. Whatever the compiler can see is invariant
 * in the mainloop (ldmatrix offsets derived from threadIdx.x) it computes once before the
 * loop and keeps in registers across it; beside stage 03's 192 accumulators of an earlier
 * tile those spilled (stage 03's traits.cuh says where it still matters). An asm volatile
 * read cannot be hoisted, so what derives from it is recomputed where it is used: a few
 * integer instructions per K/V block.
 */
__device__ __forceinline__ int thread_index_uncached(void)
{
    int t;
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
    return t;
}

}  // namespace

#endif
