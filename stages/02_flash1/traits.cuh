/*
 * traits.cuh — what stage 02's forward (fwd.cu) and backward (bwd.cu) share: the thread
 * grid, the tile sizes per head_dim bucket (both passes'), the tile loads from HBM into
 * fp32 shared memory, the float4 arithmetic of the products and the host checks. Each .cu
 * file includes it and instantiates its own copy.
 *
 * Layouts (fx_problem.h): Q, O, dO, dQ [batch, seqlen_q, heads_q, head_dim]; K, V, dK, dV
 * [batch, seqlen_k, heads_kv, head_dim]; element strides from fx_layout, head_dim
 * contiguous. Query head h reads kv head h / (heads_q / heads_kv) (GQA).
 */
#ifndef FX_STAGE02_TRAITS_CUH
#define FX_STAGE02_TRAITS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "fx_msg.h"
#include "fx_stage.h"
#include "model.h"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ------------------------------------------------------------------------------------
 * Compile-time configuration
 * ---------------------------------------------------------------------------------- */

/* 256 threads as a 16 × 16 grid (tx, ty): enough warps (8) to hide shared-memory
 * latency with one block per SM, few enough that every thread owns a register tile. */
constexpr int kThreads = 256;
/* One block per SM is the plan (the grid is batch·heads, often below the SM count):
 * telling ptxas so lets a thread use up to 255 registers instead of spilling. */
constexpr int kMinBlocksPerSm = 1;
/* The 16 lanes tx = 0..15 of a half-warp share query rows: a row's max and sum are
 * 4 butterfly shuffles inside the half-warp, no shared memory. */
constexpr int kLanesPerRow = 16;
constexpr int kRowGroups = kThreads / kLanesPerRow; /* ty = 0..15 */
/* Shared-memory reads along head_dim and along keys are float4 (one 16-byte LDS.128). */
constexpr int kVector = 4;
/* One pass of the 16 lanes over a head_dim row covers 16 float4 = 64 columns; thread tx
 * owns columns 4·tx + 64·w + {0..3}. So the head_dim buckets are multiples of 64. */
constexpr int kColsPerPass = kLanesPerRow * kVector;
/* Shared rows are padded by one float4: rows stay 16-byte aligned and consecutive rows
 * start 4 banks apart, so 16 lanes reading 16 different rows hit 64 distinct banks'
 * worth of words in the minimum two wavefronts. */
constexpr int kSmemPad = kVector;
/* The SRAM size M of the paper, per block: 96 KiB (24576 fp32 words). Every GPU of
 * compute capability >= 8.0 grants a block at least this much (sm_86/sm_89: 99 KiB). */
constexpr int kSmemBudgetBytes = 96 * 1024;
/* exp(x) = 2^(x·log2 e): one multiply and one ex2.approx (MUFU.EX2). */
constexpr float kLog2e = 1.4426950408889634f;

/* Tile sizes. The paper (Algorithm 1 line 1) sets B_c = ⌈M/4d⌉, B_r = min(B_c, d): the
 * four d-wide tiles Q_i, K_j, V_j, O_i then fill the SRAM. With M = 24576 fp32 words
 * (96 KiB, above) that is 96, 48, 32, 24 for head_dim 64, 128, 192, 256; we round B_c
 * down to a multiple of 16 (the thread grid's side). Here O_i lives in registers, and
 * shared memory also holds the B_r × B_c tile P̃_ij that P̃V reads.
 *   head_dim bucket   ⌈M/4d⌉   forward B_r × B_c   backward B_r × B_c
 *         64            96          64 × 96             48 × 48
 *        128            48          48 × 48             32 × 32
 *        192            32          32 × 32             16 × 16
 *        256            24          16 × 16             16 × 16
 * The backward (Algorithm 4) keeps dO_i and O_i beside Q_i and dS beside P in shared
 * memory and dK_j, dV_j, dQ_i in registers, so its B_r = B_c is the largest multiple
 * of 16 whose plan fits the same 96 KiB. static_asserts beside the plans (fwd.cu, bwd.cu)
 * check both.
 *
 * head_dim: a compile-time bucket (64, 128, 192, 256) holds any multiple of 8 up to
 * it; loops over head_dim run to the runtime value and shared columns past it are
 * zero. A bucket must be compile-time because each thread's O (or dK, dV) row slice
 * is a register array; four buckets keep the waste below half (d = 40 uses 40 of 64
 * columns) at four instantiations per kernel and dtype. */
template <int kHeadDimMax>
struct Config;
template <>
struct Config<64> {
    static constexpr int kBlockM = 64, kBlockN = 96, kBwdBlockM = 48, kBwdBlockN = 48;
};
template <>
struct Config<128> {
    static constexpr int kBlockM = 48, kBlockN = 48, kBwdBlockM = 32, kBwdBlockN = 32;
};
template <>
struct Config<192> {
    static constexpr int kBlockM = 32, kBlockN = 32, kBwdBlockM = 16, kBwdBlockN = 16;
};
template <>
struct Config<256> {
    static constexpr int kBlockM = 16, kBlockN = 16, kBwdBlockM = 16, kBwdBlockN = 16;
};

template <int kHeadDimMax>
struct TileChecks {
    using C = Config<kHeadDimMax>;
    static_assert(kHeadDimMax % kColsPerPass == 0, "a bucket is whole passes of 64 columns");
    static_assert(C::kBlockM % kRowGroups == 0 && C::kBlockN % kLanesPerRow == 0,
                  "forward tiles are whole multiples of the 16 x 16 thread grid");
    static_assert(C::kBwdBlockM % kRowGroups == 0 && C::kBwdBlockN % kLanesPerRow == 0 &&
                      C::kBwdBlockN % kRowGroups == 0,
                  "backward tiles are whole multiples of the 16 x 16 thread grid");
    static_assert(C::kBlockN % kVector == 0 && C::kBwdBlockN % kVector == 0,
                  "P and dS rows are read as float4");
    static constexpr bool ok = true;
};
static_assert(TileChecks<64>::ok && TileChecks<128>::ok && TileChecks<192>::ok &&
                  TileChecks<256>::ok,
              "tile checks");

/* ------------------------------------------------------------------------------------
 * Device helpers
 * ---------------------------------------------------------------------------------- */

template <typename Element>
__device__ __forceinline__ Element from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float x)
{
    return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float(float x)
{
    return __float2half_rn(x);
}

__host__ __device__ __forceinline__ int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

/* The causal skip of Q blocks (forward and backward): fx_m_block_min_02 (model.h). */

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc)
{
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    return fmaf(a.w, b.w, acc);
}
__device__ __forceinline__ float4 axpy4(float a, float4 x, float4 y) /* a·x + y */
{
    return make_float4(fmaf(a, x.x, y.x), fmaf(a, x.y, y.y), fmaf(a, x.z, y.z), fmaf(a, x.w, y.w));
}
__device__ __forceinline__ float4 load4(const float *p)
{
    return *reinterpret_cast<const float4 *>(p);
}
__device__ __forceinline__ float component(float4 x, int e)
{
    return e == 0 ? x.x : e == 1 ? x.y : e == 2 ? x.z : x.w;
}

/* Load: rows [row0, row0 + kRows) of one head of a [batch, seqlen, heads, head_dim]
 * tensor in the dtype (`base` points at its row 0, column 0), converted to fp32, in
 * two halves: load_tile_fragment reads this thread's chunks of 8 elements (one
 * 16-byte load each; head_dim and the strides are multiples of 8, checked by the
 * launcher) into registers, and store_tile_fragment writes them into a shared tile
 * [kRows][kHeadDimMax + kSmemPad]. Rows at or past seqlen and columns at or past
 * head_dim become 0, so tails add nothing to any product. Consecutive threads read
 * consecutive chunks of a row (coalesced). Splitting the halves lets a caller issue
 * the loads of several tiles before the first store, so their HBM latencies
 * overlap: a loop that stored each chunk before loading the next would wait one full
 * latency per chunk. */
constexpr int kChunkElems = 8; /* elements of one 16-byte load */

template <int kRows, int kHeadDimMax>
struct TileFragment {
    static constexpr int kChunksPerRow = kHeadDimMax / kChunkElems;
    static constexpr int kChunks = kRows * kChunksPerRow;
    static constexpr int kPerThread = (kChunks + kThreads - 1) / kThreads;
    uint4 raw[kPerThread]; /* kChunkElems elements of the dtype each */
};

template <typename Element, int kRows, int kHeadDimMax>
__device__ __forceinline__ TileFragment<kRows, kHeadDimMax> load_tile_fragment(const Element *base,
                                                                               int64_t row_stride,
                                                                               int row0, int seqlen,
                                                                               int head_dim)
{
    using Fragment = TileFragment<kRows, kHeadDimMax>;
    Fragment f;
#pragma unroll
    for (int t = 0; t < Fragment::kPerThread; ++t) {
        const int idx = threadIdx.x + t * kThreads;
        const int r = idx / Fragment::kChunksPerRow,
                  c = (idx % Fragment::kChunksPerRow) * kChunkElems;
        const int row = row0 + r;
        f.raw[t] = make_uint4(0u, 0u, 0u, 0u); /* the bits of eight zeros in bf16 and fp16 */
        if (idx < Fragment::kChunks && row < seqlen && c < head_dim)
            f.raw[t] = *reinterpret_cast<const uint4 *>(base + (int64_t)row * row_stride + c);
    }
    return f;
}

/* Two elements of the dtype, as one 32-bit word of a chunk. */
template <typename Element>
struct Packed2;
template <>
struct Packed2<__nv_bfloat16> {
    typedef __nv_bfloat162 type;
};
template <>
struct Packed2<__half> {
    typedef __half2 type;
};
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 x)
{
    return __bfloat1622float2(x);
}
__device__ __forceinline__ float2 to_float2(__half2 x)
{
    return __half22float2(x);
}

template <typename Element, int kRows, int kHeadDimMax>
__device__ __forceinline__ void store_tile_fragment(float (*tile)[kHeadDimMax + kSmemPad],
                                                    const TileFragment<kRows, kHeadDimMax> &f)
{
    using Fragment = TileFragment<kRows, kHeadDimMax>;
    typedef typename Packed2<Element>::type Element2;
#pragma unroll
    for (int t = 0; t < Fragment::kPerThread; ++t) {
        const int idx = threadIdx.x + t * kThreads;
        if (idx >= Fragment::kChunks)
            continue;
        const Element2 *pairs = reinterpret_cast<const Element2 *>(&f.raw[t]);
        const float2 a = to_float2(pairs[0]), b = to_float2(pairs[1]);
        const float2 c = to_float2(pairs[2]), d = to_float2(pairs[3]);
        float *dst =
            &tile[idx / Fragment::kChunksPerRow][(idx % Fragment::kChunksPerRow) * kChunkElems];
        *reinterpret_cast<float4 *>(dst) = make_float4(a.x, a.y, b.x, b.y);
        *reinterpret_cast<float4 *>(dst + kVector) = make_float4(c.x, c.y, d.x, d.y);
    }
}

/* ------------------------------------------------------------------------------------
 * Host helpers
 * ---------------------------------------------------------------------------------- */

/* Workspace: the fp32 O, m, ℓ of the forward, or the fp32 dQ of the backward, each
 * region rounded up to 256 bytes so the next one stays aligned for float4. */
constexpr size_t kWorkspaceAlign = 256;
size_t align_up(size_t bytes)
{
    return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

int head_dim_bucket(int head_dim)
{
    return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : head_dim <= 192 ? 192 : 256;
}

/* The tile loads read 16 bytes (kChunkElems elements) at a time: every tensor they read
 * must start 16-byte aligned and step by whole chunks. The harness's contiguous
 * layouts always do (head_dim is a multiple of 8); a caller that does not is told so. */
bool aligned_for_chunks(const void *ptr, const fx_layout *l)
{
    return (uintptr_t)ptr % (kChunkElems * sizeof(uint16_t)) == 0 &&
           l->batch_stride % kChunkElems == 0 && l->row_stride % kChunkElems == 0 &&
           l->head_stride % kChunkElems == 0;
}
cudaError_t refuse_misaligned(const char *direction)
{
    fx_error("the %s's inputs must be 16-byte aligned with strides that are multiples of %d "
             "elements (16-byte tile loads)",
             direction, kChunkElems);
    return cudaErrorInvalidValue;
}

int elementwise_blocks(const fx_problem *p)
{
    const int64_t n = (int64_t)p->batch * p->heads_q * p->seqlen_q * p->head_dim;
    return (int)((n + kThreads - 1) / kThreads);
}

}  // namespace

#endif
