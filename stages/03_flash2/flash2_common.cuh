/*
 * flash2_common.cuh — what stage 03's forward (flash2_fwd.cu) and backward (flash2_bwd.cu)
 * share: the mma/copy/swizzle constants, the swizzled tile address, the element-type
 * operations and two small helpers. One stage, one definition; the stage folder still
 * holds every line its kernels run (DESIGN.md, "Stage map").
 */
#ifndef FX_STAGE03_FLASH2_COMMON_CUH
#define FX_STAGE03_FLASH2_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "fx_problem.h"
#include "ptx/mma_sm80.cuh"

static constexpr int kWarpSize = 32;
static constexpr unsigned kFullWarp = 0xffffffffu;  // every lane takes part in a shuffle
// One mma.sync.m16n8k16: a 16×16 A tile times a 16×8 B tile into a 16×8 fp32 tile.
static constexpr int kMmaM = 16;
static constexpr int kMmaN = 8;
static constexpr int kMmaK = 16;
// The lanes of one row of an mma accumulator: lanes 4g..4g+3 hold row g (and g+8).
static constexpr int kLanesPerRow = 4;
// A 16-byte chunk is the unit of every copy: one cp.async, one ldmatrix row, 8 b16 elements.
static constexpr int kChunkBytes = 16;
static constexpr int kChunkElems = 8;
static constexpr int kElemBytes = 2;  // bf16 and fp16
// Shared memory has 32 banks of 4 bytes: 128 bytes, i.e. 8 chunks, are one bank sweep.
static constexpr int kSwizzleChunks = 8;
static constexpr int kSwizzleRowElems = kSwizzleChunks * kChunkElems;  // 64 elements

static constexpr int ceil_div_constexpr(int a, int b) { return (a + b - 1) / b; }

/* Byte offset of chunk `chunk` of row `row` in a swizzled tile. */
template <class Cfg>
static __device__ __forceinline__ uint32_t swizzled_offset(int row, int chunk)
{
    return (uint32_t)(row * Cfg::kSmemRowBytes + ((chunk ^ (row % kSwizzleChunks)) * kChunkBytes));
}

/* The one place the element type matters: which mma, and how fp32 pairs are packed to
 * the dtype (P, dS, O) and widened from it. */
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
    // A bf16 is the top half of an fp32: widening is a shift, exact.
    static __device__ __forceinline__ float2 unpack(uint32_t x)
    {
        return make_float2(__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u));
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
    static __device__ __forceinline__ float2 unpack(uint32_t x)
    {
        return __half22float2(*reinterpret_cast<const __half2 *>(&x));
    }
};

/*
 * The thread's index, read afresh from %tid.x. Whatever the compiler can see is invariant
 * in the mainloop (copy addresses and ldmatrix offsets derived from threadIdx.x) it computes
 * once before the loop and keeps in registers across it; beside 192 accumulator registers
 * those ~30 registers spilled. An asm volatile read cannot be hoisted, so what derives from
 * it is recomputed where it is used: a few integer instructions per K/V block, no spills.
 */
static __device__ __forceinline__ int thread_index_uncached(void)
{
    int t;
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
    return t;
}

/* 16-byte copies need 16-byte aligned rows: base pointers and row/head/batch strides. */
static bool aligned_for_chunks(const void *ptr, const fx_layout *l)
{
    return ((uintptr_t)ptr % kChunkBytes) == 0 && l->row_stride % kChunkElems == 0 &&
           l->head_stride % kChunkElems == 0 && l->batch_stride % kChunkElems == 0;
}

#endif
