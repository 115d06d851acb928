/*
 * traits.cuh — what stage 03's forward (fwd.cu) and backward (bwd.cu) share: the mma/copy/
 * swizzle constants, the swizzled tile address and copy, the element-type operations and
 * small host helpers. Each .cu file includes it and instantiates its own copy; the stage
 * folder still holds every line its kernels run (DESIGN.md, "Stage map").
 */
#ifndef FX_STAGE03_TRAITS_CUH
#define FX_STAGE03_TRAITS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "fx_stage.h"
#include "model.h"
#include "ptx/mma_sm80.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ---------------------------------------------------------------------------------
 * Compile-time configuration
 * ------------------------------------------------------------------------------ */

constexpr int kWarpSize = 32;
constexpr unsigned kFullWarp = 0xffffffffu;  // every lane takes part in a shuffle
// One mma.sync.m16n8k16: a 16×16 A tile times a 16×8 B tile into a 16×8 fp32 tile.
constexpr int kMmaM = 16;
constexpr int kMmaN = 8;
constexpr int kMmaK = 16;
// The lanes of one row of an mma accumulator: lanes 4g..4g+3 hold row g (and g+8).
constexpr int kLanesPerRow = 4;
// A 16-byte chunk is the unit of every copy: one cp.async, one ldmatrix row, 8 b16 elements.
constexpr int kChunkBytes = 16;
constexpr int kChunkElems = 8;
constexpr int kElemBytes = 2;  // bf16 and fp16
// Shared memory has 32 banks of 4 bytes: 128 bytes, i.e. 8 chunks, are one bank sweep.
constexpr int kSwizzleChunks = 8;
constexpr int kSwizzleRowElems = kSwizzleChunks * kChunkElems;  // 64 elements

constexpr int kSmemAlign = 128;  // a bank sweep: the swizzle assumes rows start on it
// The most dynamic shared memory one CTA may opt in to (CUDA C++ Programming Guide,
// "Technical Specifications per Compute Capability"): 227 KiB on sm_90, 163 KiB on sm_80.
constexpr size_t kMaxSmemPerBlockHopper = 227 * 1024;
constexpr size_t kMaxSmemPerBlockSm80 = 163 * 1024;

constexpr int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

/* ---------------------------------------------------------------------------------
 * Device helpers
 * ------------------------------------------------------------------------------ */

/* Byte offset of chunk `chunk` of row `row` in a swizzled tile. */
template <class Cfg>
__device__ __forceinline__ uint32_t swizzled_offset(int row, int chunk)
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
 * once before the loop and keeps in registers across it. It was introduced when the
 * forward's tiles held 192 accumulators, where those ~30 registers spilled; at today's
 * 160 the forward compiles without spills from threadIdx.x too, while the backward at
 * head_dim 64 still spills 12 bytes without it (ptxas for sm_90). Both use
 * it, so the two read alike. An asm volatile read cannot be hoisted, so what derives from
 * it is recomputed where it is used: a few integer instructions per block.
 */
__device__ __forceinline__ int thread_index_uncached(void)
{
    int t;
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
    return t;
}

/*
 * Copies kRows rows of head_dim elements (row r at gmem + r·row_stride) into a swizzled
 * tile. Lane t of the CTA copies chunk t % kSmemChunks of rows t / kSmemChunks + k·(rows
 * per pass): consecutive lanes read consecutive 16 bytes of a row (coalesced) and write
 * one 128-byte line of smem (conflict-free). Rows at or past rows_valid are zero-filled
 * (src-size 0): a K row past seqlen_k must give a finite score to mask, and a V row must
 * be 0, not leftover bits that 0·NaN would spread (the backward's Q and dO rows alike).
 * Slots past head_dim (d=96) copy nothing. kCheckRows = false drops the row test where
 * the tile is known to be whole (the forward's K/V blocks after the first).
 */
template <class Cfg, int kRows, bool kCheckRows, class Element>
__device__ __forceinline__ void load_tile(uint32_t smem_tile, const Element *gmem, int row_stride,
                                          int rows_valid)
{
    const unsigned tid = (unsigned)thread_index_uncached();
    constexpr int kRowsPerPass = Cfg::kNThreads / Cfg::kSmemChunks;
    static_assert(kRows % kRowsPerPass == 0, "whole copy passes");
    static_assert(kRowsPerPass % kSwizzleChunks == 0, "a thread's rows share one XOR key");
    const int chunk = (int)(tid % Cfg::kSmemChunks);
    const int row0 = (int)(tid / Cfg::kSmemChunks);
    if (chunk >= Cfg::kChunks)
        return;
    // The thread's rows are kRowsPerPass apart, a multiple of 8, so they all have row0's
    // swizzle: one destination register plus a constant per pass. The source is the
    // CTA-uniform tile pointer plus a 32-bit element offset (fx_problem_validate keeps
    // every tensor under 2^31 elements), so little per-thread state stays alive.
    const uint32_t dst = smem_tile + swizzled_offset<Cfg>(row0, chunk);
    const int offset = row0 * row_stride + chunk * kChunkElems;
#pragma unroll
    for (int pass = 0; pass < kRows / kRowsPerPass; ++pass) {
        const bool valid = !kCheckRows || row0 + pass * kRowsPerPass < rows_valid;
        // A row past the end reads nothing, from the tile's first element.
        const int src_offset = valid ? offset + pass * kRowsPerPass * row_stride : 0;
        fx_cp_async_cg_16(dst + pass * kRowsPerPass * Cfg::kSmemRowBytes, gmem + src_offset, valid);
    }
}

/* ---------------------------------------------------------------------------------
 * Host helpers
 * ------------------------------------------------------------------------------ */

/* The element strides of Q, K, V and O (dO takes O's, dQ Q's, dK K's, dV V's) from the
 * harness's layouts into a kernel's parameters: the forward's FwdParams and the backward's
 * BwdParams name them alike. Row strides narrow to int: every tensor is under 2^31
 * elements (fx_problem_validate). */
template <class Params>
void set_strides(Params &p, const fx_layout &q, const fx_layout &k, const fx_layout &v,
                 const fx_layout &o)
{
    p.q_batch_stride = q.batch_stride;
    p.q_row_stride = (int)q.row_stride;
    p.q_head_stride = q.head_stride;
    p.k_batch_stride = k.batch_stride;
    p.k_row_stride = (int)k.row_stride;
    p.k_head_stride = k.head_stride;
    p.v_batch_stride = v.batch_stride;
    p.v_row_stride = (int)v.row_stride;
    p.v_head_stride = v.head_stride;
    p.o_batch_stride = o.batch_stride;
    p.o_row_stride = (int)o.row_stride;
    p.o_head_stride = o.head_stride;
}

/* 16-byte copies need 16-byte aligned rows: base pointers and row/head/batch strides. */
bool aligned_for_chunks(const void *ptr, const fx_layout *l)
{
    return ((uintptr_t)ptr % kChunkBytes) == 0 && l->row_stride % kChunkElems == 0 &&
           l->head_stride % kChunkElems == 0 && l->batch_stride % kChunkElems == 0;
}

}  // namespace

#endif
