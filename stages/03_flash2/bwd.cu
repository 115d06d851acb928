/*
 * bwd.cu — stage 03: the FlashAttention-2 backward on tensor cores.
 *
 * Over stage 02's backward (FA1 Algorithm 4 on fp32 CUDA cores) this keeps FA2's
 * K/V-parallel decomposition (Dao 2023, Algorithm 2 and §3.2): one CTA owns a block of
 * kBlockN keys of one (batch, kv head), holds K_j and V_j in shared memory and dK_j, dV_j
 * in registers for its whole life, and streams past them every Q block that sees one of
 * its keys (causal: only the blocks at or below the diagonal, a trapezoid). Per Q block it
 * recomputes P from the stored LSE — no softmax statistics are rebuilt — and runs the five
 * GEMMs of the backward on mma.sync m16n8k16:
 *     Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ                     (phase A, k = head_dim)
 *     Pᵀ = exp2(Sᵀ·scale·log2e − LSE_log2), dSᵀ = Pᵀ∘(dPᵀ − D)
 *     dV += Pᵀ·dO, dK += dSᵀ·Q                   (phase B, k = kBlockM)
 *     dQaccum += dS·K                            (phase C, k = kBlockN, fp32 atomics)
 * dQ of a query row sums over every key block, i.e. over many CTAs: they add their
 * partial products into an fp32 dQaccum with red.global.add (two columns per instruction
 * on sm_90), and a postprocess kernel scales and converts it. A preprocess kernel computes
 * D = rowsum(dO∘O), LSE in log2 units and zeroes dQaccum. Its speed beside
 * FlashAttention-2's backward: docs/03_flash2.md, "Backward / Measured".
 *
 * Sources: Tri Dao, "FlashAttention-2" (2023), Algorithm 2, §3.1-3.2; PTX ISA "mma"
 * (m16n8k16 fragments), "ldmatrix", "cp.async", "red" — wrappers in common/ptx/mma_sm80.cuh.
 *
 * Layouts (fx_problem.h): Q, O, dO, dQ [batch, seqlen_q, heads_q, head_dim]; K, V, dK, dV
 * [batch, seqlen_k, heads_kv, head_dim]; LSE fp32 [batch, heads_q, seqlen_q], natural log.
 * Workspace (fx_bwd_workspace_bytes_03): dQaccum fp32 in Q's contiguous layout, then
 * LSE_log2 and D fp32 [batch, heads_q, seqlen_q_rounded].
 */
#include "traits.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ---------------------------------------------------------------------------------
 * Compile-time configuration (the constants shared with the forward: traits.cuh)
 * ------------------------------------------------------------------------------ */

// Two Q/dO stages: Q block it+1 is copied while Q block it is computed.
constexpr int kStages = 2;
// Every backward tile uses 8 warps: enough to split each of the three phases' outputs
// into warp tiles of whole m16 × n16 pieces at every head_dim (table below).
constexpr int kBwdWarps = 8;
// LSE_log2 and D are padded per (batch, head) to a multiple of this many rows, a multiple
// of every kBlockM, so a Q block's 4-byte values are whole, 16-byte aligned cp.async chunks.
constexpr int kRowPad = 128;
constexpr int kFloatsPerChunk = kChunkBytes / 4;
constexpr float kLog2e = 1.4426950408889634f;

/*
 * Warp tiles of the three phases. kWarpsSKeys, kWarpsDKKeys, kWarpsDQRows are the warps
 * along the first (row) dimension of each phase's output; the rest of the 8 warps split
 * the second dimension.
 *   phase A: Sᵀ and dPᵀ, kBlockN keys × kBlockM queries, k = head_dim
 *   phase B: dK and dV,  kBlockN keys × head_dim,        k = kBlockM (persistent)
 *   phase C: dQ,         kBlockM queries × head_dim,     k = kBlockN
 */
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kWarpsSKeys_, int kWarpsDKKeys_,
          int kWarpsDQRows_>
struct BwdConfig {
    static constexpr int kHeadDim = kHeadDim_;
    static constexpr int kBlockM = kBlockM_;  // query rows per Q block (the inner loop)
    static constexpr int kBlockN = kBlockN_;  // keys per CTA
    static constexpr int kNWarps = kBwdWarps;
    static constexpr int kNThreads = kNWarps * kWarpSize;

    static constexpr int kWarpsSKeys = kWarpsSKeys_;
    static constexpr int kSKeysPerWarp = kBlockN / kWarpsSKeys;
    static constexpr int kSQueriesPerWarp = kBlockM / (kNWarps / kWarpsSKeys);
    static constexpr int kSMTiles = kSKeysPerWarp / kMmaM;
    static constexpr int kSNTiles = kSQueriesPerWarp / kMmaN;

    static constexpr int kWarpsDKKeys = kWarpsDKKeys_;
    static constexpr int kDKKeysPerWarp = kBlockN / kWarpsDKKeys;
    static constexpr int kDKColsPerWarp = kHeadDim / (kNWarps / kWarpsDKKeys);
    static constexpr int kDKMTiles = kDKKeysPerWarp / kMmaM;
    static constexpr int kDKNTiles = kDKColsPerWarp / kMmaN;

    static constexpr int kWarpsDQRows = kWarpsDQRows_;
    static constexpr int kDQRowsPerWarp = kBlockM / kWarpsDQRows;
    static constexpr int kDQColsPerWarp = kHeadDim / (kNWarps / kWarpsDQRows);
    static constexpr int kDQMTiles = kDQRowsPerWarp / kMmaM;
    static constexpr int kDQNTiles = kDQColsPerWarp / kMmaN;

    static constexpr int kChunks = kHeadDim / kChunkElems;  // 16-byte chunks of a row in HBM
    // Q, dO, K, V rows: head_dim rounded up to whole 128-byte lines, XOR-swizzled (forward).
    static constexpr int kSmemRowElems = ceil_div(kHeadDim, kSwizzleRowElems) * kSwizzleRowElems;
    static constexpr int kSmemChunks = kSmemRowElems / kChunkElems;
    static constexpr int kSmemRowBytes = kSmemRowElems * kElemBytes;
    // P and dS rows (one key, kBlockM queries). A row of whole 128-byte lines (kBlockM ≥ 64)
    // takes the same XOR swizzle as Q; a shorter one (kBlockM = 32, 64 bytes) is padded by
    // one chunk instead, so that the 8 rows of an ldmatrix matrix, kPRowBytes apart = an odd
    // number of chunks, still hit 8 different 16-byte bank groups.
    static constexpr bool kPSwizzled = kBlockM % kSwizzleRowElems == 0;
    static constexpr int kPRowElems = kPSwizzled ? kBlockM : kBlockM + kChunkElems;
    static constexpr int kPRowBytes = kPRowElems * kElemBytes;

    static_assert(kNWarps % kWarpsSKeys == 0 && kNWarps % kWarpsDKKeys == 0 &&
                      kNWarps % kWarpsDQRows == 0,
                  "warps split each phase evenly");
    static_assert(kSKeysPerWarp % kMmaM == 0 && kDKKeysPerWarp % kMmaM == 0 &&
                      kDQRowsPerWarp % kMmaM == 0,
                  "warp tiles hold whole m16 tiles");
    static_assert(kSNTiles % 2 == 0 && kDKNTiles % 2 == 0 && kDQNTiles % 2 == 0,
                  "ldmatrix.x4 loads B fragments of n8 tiles in pairs");
    static_assert(kHeadDim % kMmaK == 0 && kBlockM % kMmaK == 0 && kBlockN % kMmaK == 0,
                  "whole k16 steps in every phase");
    static_assert(kNThreads % kSmemChunks == 0, "a copy pass covers whole rows");
    static_assert(kPSwizzled || (kPRowBytes / kChunkBytes) % 2 == 1,
                  "padded P rows an odd number of chunks apart");
    static_assert(kRowPad % kBlockM == 0, "LSE_log2 and D padding covers whole Q blocks");
    static_assert(kBlockM / kFloatsPerChunk * 2 <= kNThreads, "one chunk of LSE or D per thread");
};

/*
 * The tile per head_dim. A thread keeps dK and dV of its phase-B warp tile across the
 * whole loop (2·kBlockN·head_dim/256 fp32) and, in phase A, Sᵀ and dPᵀ of its warp tile
 * (2·kBlockN·kBlockM/256), in phase C dQ (kBlockM·head_dim/256). 192 live accumulators
 * compile without spills beside the fragments and addresses (ptxas: 253–255 registers at
 * head_dim 64 and 128; the addresses that derive from thread_index_uncached are rebuilt
 * per block instead of held), so each tile keeps max(dK+dV + Sᵀ+dPᵀ, dK+dV + dQ) ≤ 192.
 * 8 warps at up to 255 registers use the whole register file: one CTA per SM. So every
 * __syncthreads stalls the whole SM, and each Q block costs two of them and a fixed set
 * of address and loop instructions whatever its height: kBlockM is as tall as those
 * registers and shared memory allow — FA2's own tiles at head_dim 64 and 128.
 *
 * Shared memory: K, V (kBlockN rows) + kStages × (Q, dO) (kBlockM rows) of kSmemRowBytes,
 * P and dS (kBlockN × kPRowBytes), LSE_log2 and D (kStages × kBlockM fp32). Every tile
 * fits the 163 KiB an sm_80 CTA may opt in to, so one configuration serves A100 and Hopper.
 */
// d=64: 128 × 128. dK+dV 64 (32 keys × 32 columns), Sᵀ+dPᵀ 128 (32 keys × 64 queries),
// dQ 32 (32 rows × 32 columns): 192. 16 + 16 + 64 + 64 + 2 KiB = 162 KiB.
using BwdConfigD64 = BwdConfig<64, 128, 128, 4, 4, 4>;
// d=96: 64 × 64. dK+dV 48 (16 keys × 48 columns), Sᵀ+dPᵀ 32 (16 keys × 32 queries), dQ 24
// (16 rows × 48 columns). kBlockM = 32 leaves dQ warp tiles of 24 or 12 columns, an odd
// number of n8 tiles. FA2's 64 × 128 (dK+dV 96 + Sᵀ+dPᵀ 64) spilled 124 bytes in the
// previous kernel and compiles without spills in this one (161 KiB): not yet measured.
// Rows padded to 128 elements: 32 + 64 + 16 + 1 KiB = 113 KiB.
using BwdConfigD96 = BwdConfig<96, 64, 64, 4, 4, 4>;
// d=128: 64 × 128. dK+dV 128 (32 keys × 64 columns), Sᵀ+dPᵀ 64 (32 keys × 32 queries):
// 192; dQ 32 (32 rows × 32 columns). 64 + 64 + 32 + 1 KiB = 161 KiB.
using BwdConfigD128 = BwdConfig<128, 64, 128, 4, 4, 2>;
// d=256: 32 × 64. dK+dV alone are 2·kBlockN·256/256 = 2·kBlockN, so kBlockN = 64 for 128
// (32 keys × 64 columns); Sᵀ+dPᵀ 16, dQ 32 (16 rows × 64 columns): 160. 64 × 64 would be
// 192 but 209 KiB of shared memory, past sm_80's 163. 64 + 64 + 10 + 0.5 KiB ≈ 139 KiB.
using BwdConfigD256 = BwdConfig<256, 32, 64, 4, 2, 2>;

/* ---------------------------------------------------------------------------------
 * Shared-memory plan
 * ------------------------------------------------------------------------------ */

template <class Cfg>
struct BwdSharedStorage {
    alignas(kSmemAlign) uint16_t K[Cfg::kBlockN * Cfg::kSmemRowElems];
    alignas(kSmemAlign) uint16_t V[Cfg::kBlockN * Cfg::kSmemRowElems];
    alignas(kSmemAlign) uint16_t Q[kStages][Cfg::kBlockM * Cfg::kSmemRowElems];
    alignas(kSmemAlign) uint16_t dO[kStages][Cfg::kBlockM * Cfg::kSmemRowElems];
    // Pᵀ and dSᵀ of one Q block in the dtype: row = key, column = query.
    alignas(kSmemAlign) uint16_t P[Cfg::kBlockN * Cfg::kPRowElems];
    alignas(kSmemAlign) uint16_t dS[Cfg::kBlockN * Cfg::kPRowElems];
    alignas(kChunkBytes) float LSE_log2[kStages][Cfg::kBlockM];
    alignas(kChunkBytes) float D[kStages][Cfg::kBlockM];
};

// sm_80's opt-in limit is below Hopper's (traits.cuh): every tile fits both.
static_assert(sizeof(BwdSharedStorage<BwdConfigD64>) <= kMaxSmemPerBlockSm80, "d=64 smem");
static_assert(sizeof(BwdSharedStorage<BwdConfigD96>) <= kMaxSmemPerBlockSm80, "d=96 smem");
static_assert(sizeof(BwdSharedStorage<BwdConfigD128>) <= kMaxSmemPerBlockSm80, "d=128 smem");
static_assert(sizeof(BwdSharedStorage<BwdConfigD256>) <= kMaxSmemPerBlockSm80, "d=256 smem");

/* ---------------------------------------------------------------------------------
 * Kernel arguments
 * ------------------------------------------------------------------------------ */

struct BwdParams {
    const void *q, *k, *v, *o, *dout;
    const float *lse;  // natural log, [batch, heads_q, seqlen_q]
    void *dq, *dk, *dv;
    float *dq_accum;      // fp32, contiguous [batch, seqlen_q, heads_q, head_dim]
    float *lse_log2, *D;  // fp32 [batch, heads_q, seqlen_q_rounded]
    // Element strides (head_dim is contiguous); dO uses O's, dQ Q's, dK K's, dV V's.
    int64_t q_batch_stride, q_head_stride;
    int64_t k_batch_stride, k_head_stride;
    int64_t v_batch_stride, v_head_stride;
    int64_t o_batch_stride, o_head_stride;
    int q_row_stride, k_row_stride, v_row_stride, o_row_stride;
    int batch, seqlen_q, seqlen_k, seqlen_q_rounded;
    int heads_q, head_dim;
    int q_per_kv;  // heads_q / heads_kv: query heads that share one kv head
    float softmax_scale;
    float scale_log2;  // softmax_scale · log2(e)
};

/* ---------------------------------------------------------------------------------
 * Preprocess: D = rowsum(dO∘O), LSE_log2, dQaccum = 0 (one warp per query row)
 * ------------------------------------------------------------------------------ */

constexpr int kPreWarps = 8;  // rows per CTA of the pre- and postprocess kernels

template <class Element>
__global__ void __launch_bounds__(kPreWarps *kWarpSize)
    bwd_preprocess_kernel(const __grid_constant__ BwdParams p)
{
    using Ops = ElementOps<Element>;
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    // Row `row` of the padded [batch, heads_q, seqlen_q_rounded] arrays.
    const int64_t row = (int64_t)blockIdx.x * kPreWarps + warp;
    if (row >= (int64_t)p.batch * p.heads_q * p.seqlen_q_rounded)
        return;
    const int i = (int)(row % p.seqlen_q_rounded);
    const int bh = (int)(row / p.seqlen_q_rounded);
    const int head = bh % p.heads_q, batch = bh / p.heads_q;
    if (i >= p.seqlen_q) {
        // Padding: P of such a row is masked anyway; 0 keeps every later value finite.
        if (lane == 0) {
            p.D[row] = 0.f;
            p.lse_log2[row] = 0.f;
        }
        return;
    }
    const int64_t at =
        batch * p.o_batch_stride + (int64_t)i * p.o_row_stride + head * p.o_head_stride;
    const uint32_t *O = reinterpret_cast<const uint32_t *>(static_cast<const Element *>(p.o) + at);
    const uint32_t *dO =
        reinterpret_cast<const uint32_t *>(static_cast<const Element *>(p.dout) + at);
    float sum = 0.f;
    for (int pair = lane; pair < p.head_dim / 2; pair += kWarpSize) {
        const float2 o = Ops::unpack(O[pair]), d = Ops::unpack(dO[pair]);
        sum = fmaf(o.x, d.x, sum);
        sum = fmaf(o.y, d.y, sum);
    }
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
        sum += __shfl_xor_sync(kFullWarp, sum, offset);
    if (lane == 0) {
        p.D[row] = sum;
        const float lse = p.lse[((int64_t)batch * p.heads_q + head) * p.seqlen_q + i];
        // A row that sees no key has LSE = -inf: store 0, so that recomputing P never forms
        // -inf - (-inf); the main kernel masks every P of such a row to 0 explicitly.
        p.lse_log2[row] = lse == -INFINITY ? 0.f : lse * kLog2e;
    }
    float *acc = p.dq_accum + (((int64_t)batch * p.seqlen_q + i) * p.heads_q + head) * p.head_dim;
    for (int c = lane; c < p.head_dim; c += kWarpSize)
        acc[c] = 0.f;
}

/* ---------------------------------------------------------------------------------
 * Postprocess: dQ = softmax_scale · dQaccum in the dtype
 * ------------------------------------------------------------------------------ */

template <class Element>
__global__ void __launch_bounds__(kPreWarps *kWarpSize)
    bwd_postprocess_kernel(const __grid_constant__ BwdParams p)
{
    using Ops = ElementOps<Element>;
    const int64_t pairs = (int64_t)p.batch * p.seqlen_q * p.heads_q * p.head_dim / 2;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < pairs;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = 2 * idx;  // element of the contiguous dQaccum
        const int c = (int)(e % p.head_dim);
        int64_t rest = e / p.head_dim;
        const int head = (int)(rest % p.heads_q);
        rest /= p.heads_q;
        const int i = (int)(rest % p.seqlen_q);
        const int batch = (int)(rest / p.seqlen_q);
        const float2 a = *reinterpret_cast<const float2 *>(p.dq_accum + e);
        *reinterpret_cast<uint32_t *>(static_cast<Element *>(p.dq) + batch * p.q_batch_stride +
                                      (int64_t)i * p.q_row_stride + head * p.q_head_stride + c) =
            Ops::pack(a.x * p.softmax_scale, a.y * p.softmax_scale);
    }
}

/* ---------------------------------------------------------------------------------
 * Producer: global -> shared by cp.async (the forward's copy loop)
 * ------------------------------------------------------------------------------ */

/* load_tile: traits.cuh (the forward's copy loop, rows checked). */

/* ---------------------------------------------------------------------------------
 * ldmatrix addressing (lane l; lanes 8j..8j+7 address matrix j; see the forward's table)
 *
 *   a_rows    A operand, rows as stored:   row row0 + l%16, chunk chunk0 + l/16
 *             -> a[0..3] = (rows 0-7 | 8-15) × (k chunk 0 | 1)
 *   b_rows    B operand, n = stored row, k along the row:
 *             row row0 + l%8 + 8·(l/16), chunk chunk0 + (l/8)%2
 *             -> b[0], b[1] of n-tile 0; b[2], b[3] of n-tile 1
 *   b_trans   B operand, k = stored row, n along the row (.trans):
 *             row row0 + l%16, chunk chunk0 + l/16
 *             -> b[0], b[1] of n-tile 0; b[2], b[3] of n-tile 1
 *   a_trans   A operand, k = stored row, m along the row (.trans; dS from dSᵀ):
 *             row row0 + l%8 + 8·(l/16), chunk chunk0 + (l/8)%2
 *             -> matrix 0 = (k 0-7, m 0-7) transposed = a[0]; 1 = (k 0-7, m 8-15) = a[1];
 *                2 = (k 8-15, m 0-7) = a[2]; 3 = (k 8-15, m 8-15) = a[3]
 * ------------------------------------------------------------------------------ */

__device__ __forceinline__ int lane_row16(int lane)
{
    return lane % kMmaM;
}
__device__ __forceinline__ int lane_chunk16(int lane)
{
    return lane / kMmaM;
}
__device__ __forceinline__ int lane_row8x2(int lane)
{
    return lane % kSwizzleChunks + kSwizzleChunks * (lane / kMmaM);
}
__device__ __forceinline__ int lane_chunk8x2(int lane)
{
    return (lane / kSwizzleChunks) % 2;
}

/* Swizzled Q/dO/K/V tiles. */
template <class Cfg>
__device__ __forceinline__ void ldsm_a_rows(uint32_t r[4], uint32_t tile, int row0, int chunk0,
                                            int lane)
{
    fx_ldmatrix_x4(
        r, tile + swizzled_offset<Cfg>(row0 + lane_row16(lane), chunk0 + lane_chunk16(lane)));
}
template <class Cfg>
__device__ __forceinline__ void ldsm_b_rows(uint32_t r[4], uint32_t tile, int row0, int chunk0,
                                            int lane)
{
    fx_ldmatrix_x4(
        r, tile + swizzled_offset<Cfg>(row0 + lane_row8x2(lane), chunk0 + lane_chunk8x2(lane)));
}
template <class Cfg>
__device__ __forceinline__ void ldsm_b_trans(uint32_t r[4], uint32_t tile, int row0, int chunk0,
                                             int lane)
{
    fx_ldmatrix_x4_trans(
        r, tile + swizzled_offset<Cfg>(row0 + lane_row16(lane), chunk0 + lane_chunk16(lane)));
}
/* Byte offset of 16-byte chunk `chunk` of row `row` (a key) in a Pᵀ/dSᵀ tile, rows
 * kPRowBytes apart: XOR-swizzled like Q (swizzled_offset) when the rows are whole 128-byte
 * lines, else padded (BwdConfig::kPSwizzled); either way the 8 rows an ldmatrix
 * matrix reads fall in 8 different 16-byte bank groups. */
template <class Cfg>
__device__ __forceinline__ uint32_t p_offset(int row, int chunk)
{
    const int xor_key = Cfg::kPSwizzled ? row % kSwizzleChunks : 0;
    return (uint32_t)(row * Cfg::kPRowBytes + (chunk ^ xor_key) * kChunkBytes);
}
template <class Cfg>
__device__ __forceinline__ void ldsm_a_rows_p(uint32_t r[4], uint32_t tile, int row0, int chunk0,
                                              int lane)
{
    fx_ldmatrix_x4(r, tile + p_offset<Cfg>(row0 + lane_row16(lane), chunk0 + lane_chunk16(lane)));
}
template <class Cfg>
__device__ __forceinline__ void ldsm_a_trans_p(uint32_t r[4], uint32_t tile, int row0, int chunk0,
                                               int lane)
{
    fx_ldmatrix_x4_trans(
        r, tile + p_offset<Cfg>(row0 + lane_row8x2(lane), chunk0 + lane_chunk8x2(lane)));
}

/*
 * Pᵀ = exp2(Sᵀ·scale_log2 − LSE_log2[query]) and dSᵀ = Pᵀ∘(dPᵀ − D[query]) of a warp's
 * phase-A tile, rounded to the dtype into shared memory (row = key, column = query).
 *   acc_s, acc_dp  the warp tile's Sᵀ and dPᵀ accumulators (layout: the kernel's table)
 *   lse_log2, D    fp32 [kBlockM] of the Q block in flight, LSE in log2 units
 *   p_tile, ds_tile  generic pointers to the Pᵀ and dSᵀ tiles (p_offset's layout)
 *   key_base, q_base  the warp tile's first key and query within the block
 *   key0, q_block0    the block's first key and query within the sequence
 * kMasked: P = 0 where the key is not visible — a key past seqlen_k, a query row past
 * seqlen_q (zero-filled, LSE_log2 = 0: exp2(0 − 0) would be 1), and (causal) a key right
 * of the diagonal, which covers the rows that see no key at all (their LSE_log2 is 0 and
 * would otherwise give exp2(S·scale_log2) ≠ 0). The caller takes the unmasked copy for a
 * block that holds none of these, as FA2's backward does (its mask is applied only to
 * the blocks that need it): no index arithmetic per element there.
 */
template <class Cfg, class Element, bool kCausal, bool kMasked>
__device__ __forceinline__ void store_p_ds(const float (&acc_s)[Cfg::kSMTiles][Cfg::kSNTiles][4],
                                           const float (&acc_dp)[Cfg::kSMTiles][Cfg::kSNTiles][4],
                                           const float *lse_log2, const float *D,
                                           unsigned char *p_tile, unsigned char *ds_tile,
                                           int key_base, int q_base, int lane, int key0,
                                           int q_block0, const BwdParams &p)
{
    using Ops = ElementOps<Element>;
    const int g = lane / kLanesPerRow, t = lane % kLanesPerRow;
#pragma unroll
    for (int nt = 0; nt < Cfg::kSNTiles; ++nt) {
        const int q_local = q_base + nt * kMmaN + 2 * t;
        const float2 lse = *reinterpret_cast<const float2 *>(&lse_log2[q_local]);
        const float2 dd = *reinterpret_cast<const float2 *>(&D[q_local]);
#pragma unroll
        for (int mt = 0; mt < Cfg::kSMTiles; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int key_local = key_base + mt * kMmaM + g + h * (kMmaM / 2);
                float pv[2], dsv[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    bool visible = true;
                    if (kMasked) {
                        const int key = key0 + key_local, q = q_block0 + q_local + e;
                        visible = key < p.seqlen_k && q < p.seqlen_q;
                        if (kCausal)
                            visible = visible && key <= q + p.seqlen_k - p.seqlen_q;
                    }
                    const float s = acc_s[mt][nt][2 * h + e];
                    const float P =
                        visible ? fx_ex2(fmaf(s, p.scale_log2, -(e ? lse.y : lse.x))) : 0.f;
                    pv[e] = P;
                    dsv[e] = P * (acc_dp[mt][nt][2 * h + e] - (e ? dd.y : dd.x));
                }
                const uint32_t off = p_offset<Cfg>(key_local, q_local / kChunkElems) +
                                     (uint32_t)(q_local % kChunkElems * kElemBytes);
                *reinterpret_cast<uint32_t *>(p_tile + off) = Ops::pack(pv[0], pv[1]);
                *reinterpret_cast<uint32_t *>(ds_tile + off) = Ops::pack(dsv[0], dsv[1]);
            }
    }
}

/* ---------------------------------------------------------------------------------
 * The main kernel: one CTA per (K/V block, kv head, batch)
 *
 * Accumulator layout of every phase (PTX ISA mma.m16n8k16; g = lane/4, t = lane%4), per
 * m16 tile mt and n8 tile nt of the warp tile:
 *
 *        cols 8nt+2t, 8nt+2t+1
 *   row g    | [0] [1] |          phase A: rows = keys,    cols = queries (Sᵀ, dPᵀ)
 *   row g+8  | [2] [3] |          phase B: rows = keys,    cols = head_dim (dK, dV)
 *                                 phase C: rows = queries, cols = head_dim (dQ)
 *
 * Why Sᵀ and not S: with keys as the rows, Pᵀ and dSᵀ come out of phase A exactly in the
 * row-major [key][query] layout that phase B's A operand (Pᵀ for dV = Pᵀ·dO, dSᵀ for
 * dK = dSᵀ·Q) reads, and phase A reads K and V as the A operand and Q and dO as the B
 * operand straight as stored (no transposed load). Phase B and C read Q, dO and K with
 * k along the stored rows: ldmatrix.trans. dS for phase C is dSᵀ read transposed.
 *
 * P and dS pass through shared memory because the warp that computes an element of Pᵀ is
 * not the warp that needs it: phase B splits dK/dV by key rows and head_dim columns, phase
 * C splits dQ by query rows, and both need a whole k range (all queries, all keys).
 * ------------------------------------------------------------------------------ */

template <class Cfg, class Element, bool kCausal>
__global__ void __launch_bounds__(Cfg::kNThreads, 1) bwd_kernel(const __grid_constant__ BwdParams p)
{
    extern __shared__ __align__(kSmemAlign) unsigned char smem_raw[];
    BwdSharedStorage<Cfg> &smem = *reinterpret_cast<BwdSharedStorage<Cfg> *>(smem_raw);
    using Ops = ElementOps<Element>;

    // ---- Block info: which keys, which heads, which Q blocks ----
    const int n_block = blockIdx.x, head_kv = blockIdx.y, batch = blockIdx.z;
    const int key0 = n_block * Cfg::kBlockN;
    const int m_block_max = (p.seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
    // The trapezoid: row i sees key key0 iff i >= key0 - (seqlen_k - seqlen_q), so the Q
    // blocks above the one holding that row see no key of this block and are skipped.
    int m_block_min = 0;
    if (kCausal)
        m_block_min = max(0, key0 - (p.seqlen_k - p.seqlen_q)) / Cfg::kBlockM;
    const int n_m = max(0, m_block_max - m_block_min);
    // GQA: this CTA loops over the q_per_kv query heads of its kv head as well, so that
    // dK and dV, which sum over those heads, stay in its registers (see the launcher).
    const int n_iters = n_m * p.q_per_kv;

    const Element *K = static_cast<const Element *>(p.k) + batch * p.k_batch_stride +
                       head_kv * p.k_head_stride + (int64_t)key0 * p.k_row_stride;
    const Element *V = static_cast<const Element *>(p.v) + batch * p.v_batch_stride +
                       head_kv * p.v_head_stride + (int64_t)key0 * p.v_row_stride;

    const uint32_t sK = fx_smem_addr(smem.K), sV = fx_smem_addr(smem.V);
    const uint32_t sQ0 = fx_smem_addr(smem.Q[0]), sdO0 = fx_smem_addr(smem.dO[0]);
    const uint32_t sP = fx_smem_addr(smem.P), sdS = fx_smem_addr(smem.dS);
    constexpr uint32_t kQStageBytes = sizeof(smem.Q[0]);

    // Copies Q, dO, LSE_log2 and D of (query head, Q block) into `stage`.
    auto load_q_block = [&](int head, int m_block, int stage) {
        const int64_t row0 = (int64_t)m_block * Cfg::kBlockM;
        const Element *Q = static_cast<const Element *>(p.q) + batch * p.q_batch_stride +
                           head * p.q_head_stride + row0 * p.q_row_stride;
        const Element *dO = static_cast<const Element *>(p.dout) + batch * p.o_batch_stride +
                            head * p.o_head_stride + row0 * p.o_row_stride;
        const int rows_valid = p.seqlen_q - (int)row0;
        // A whole block (every one but a tail) copies without a row test per pass.
        if (rows_valid >= Cfg::kBlockM) {
            load_tile<Cfg, Cfg::kBlockM, false>(sQ0 + stage * kQStageBytes, Q, p.q_row_stride,
                                                rows_valid);
            load_tile<Cfg, Cfg::kBlockM, false>(sdO0 + stage * kQStageBytes, dO, p.o_row_stride,
                                                rows_valid);
        } else {
            load_tile<Cfg, Cfg::kBlockM, true>(sQ0 + stage * kQStageBytes, Q, p.q_row_stride,
                                               rows_valid);
            load_tile<Cfg, Cfg::kBlockM, true>(sdO0 + stage * kQStageBytes, dO, p.o_row_stride,
                                               rows_valid);
        }
        // LSE_log2 and D are padded to whole Q blocks (kRowPad): no row test needed.
        const int64_t stat0 = ((int64_t)batch * p.heads_q + head) * p.seqlen_q_rounded + row0;
        constexpr int kStatChunks = Cfg::kBlockM / kFloatsPerChunk;
        const int tid = thread_index_uncached();
        if (tid < kStatChunks)
            fx_cp_async_cg_16(fx_smem_addr(&smem.LSE_log2[stage][tid * kFloatsPerChunk]),
                              p.lse_log2 + stat0 + tid * kFloatsPerChunk, true);
        else if (tid < 2 * kStatChunks)
            fx_cp_async_cg_16(fx_smem_addr(&smem.D[stage][(tid - kStatChunks) * kFloatsPerChunk]),
                              p.D + stat0 + (tid - kStatChunks) * kFloatsPerChunk, true);
    };

    // (head, m_block) of the iteration in flight and of the next one: the GQA loop order
    // is head-major, kept as two counters (no integer division per iteration).
    int head = head_kv * p.q_per_kv, m_block = m_block_min;
    int next_head = head, next_m_block = m_block;

    // ---- Prologue: K, V (once) and the first Q block, one cp.async group ----
    if (n_iters > 0) {
        load_tile<Cfg, Cfg::kBlockN, true>(sK, K, p.k_row_stride, p.seqlen_k - key0);
        load_tile<Cfg, Cfg::kBlockN, true>(sV, V, p.v_row_stride, p.seqlen_k - key0);
        load_q_block(head, m_block, 0);
        fx_cp_async_commit();
    }

    // ---- Accumulators of dK and dV (phase B warp tile), for the CTA's whole life ----
    float acc_dk[Cfg::kDKMTiles][Cfg::kDKNTiles][4];
    float acc_dv[Cfg::kDKMTiles][Cfg::kDKNTiles][4];
#pragma unroll
    for (int mt = 0; mt < Cfg::kDKMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < Cfg::kDKNTiles; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                acc_dk[mt][nt][e] = 0.f;
                acc_dv[mt][nt][e] = 0.f;
            }

    // ---- Mainloop over (query head, Q block), two-stage Q/dO ring ----
    for (int it = 0, stage = 0; it < n_iters; ++it, stage ^= 1) {
        head = next_head;
        m_block = next_m_block;
        if (++next_m_block == m_block_max) {
            next_m_block = m_block_min;
            ++next_head;
        }
        // Q block `it` has landed for this thread; the barrier makes every thread's copies
        // visible and proves every warp is done with iteration it-1: its reads of the other
        // Q/dO stage (overwritten next) and of P and dS (overwritten in phase A).
        fx_cp_async_wait<0>();
        __syncthreads();
        if (it + 1 < n_iters) {
            load_q_block(next_head, next_m_block, stage ^ 1);
            fx_cp_async_commit();
        }
        const uint32_t sQ = sQ0 + stage * kQStageBytes, sdO = sdO0 + stage * kQStageBytes;
        // Unsigned, so that the compiler knows warp and lane are not negative and divides
        // and takes remainders by powers of two with shifts and masks.
        const unsigned tid = (unsigned)thread_index_uncached();
        const int warp = (int)(tid / kWarpSize), lane = (int)(tid % kWarpSize);
        const int q_block0 = m_block * Cfg::kBlockM;

        // ---- Phase A: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for the warp's keys × queries ----
        {
            const int key_base = (warp % Cfg::kWarpsSKeys) * Cfg::kSKeysPerWarp;
            const int q_base = (warp / Cfg::kWarpsSKeys) * Cfg::kSQueriesPerWarp;
            float acc_s[Cfg::kSMTiles][Cfg::kSNTiles][4];
            float acc_dp[Cfg::kSMTiles][Cfg::kSNTiles][4];
#pragma unroll
            for (int mt = 0; mt < Cfg::kSMTiles; ++mt)
#pragma unroll
                for (int nt = 0; nt < Cfg::kSNTiles; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        acc_s[mt][nt][e] = 0.f;
                        acc_dp[mt][nt][e] = 0.f;
                    }
#pragma unroll
            for (int kk = 0; kk < Cfg::kHeadDim / kMmaK; ++kk) {
                uint32_t a_k[Cfg::kSMTiles][4], a_v[Cfg::kSMTiles][4];
#pragma unroll
                for (int mt = 0; mt < Cfg::kSMTiles; ++mt) {
                    ldsm_a_rows<Cfg>(a_k[mt], sK, key_base + mt * kMmaM, 2 * kk, lane);
                    ldsm_a_rows<Cfg>(a_v[mt], sV, key_base + mt * kMmaM, 2 * kk, lane);
                }
#pragma unroll
                for (int np = 0; np < Cfg::kSNTiles / 2; ++np) {
                    uint32_t b[4];
                    ldsm_b_rows<Cfg>(b, sQ, q_base + np * 2 * kMmaN, 2 * kk, lane);
#pragma unroll
                    for (int mt = 0; mt < Cfg::kSMTiles; ++mt) {
                        Ops::mma(acc_s[mt][2 * np], a_k[mt], b[0], b[1]);
                        Ops::mma(acc_s[mt][2 * np + 1], a_k[mt], b[2], b[3]);
                    }
                    ldsm_b_rows<Cfg>(b, sdO, q_base + np * 2 * kMmaN, 2 * kk, lane);
#pragma unroll
                    for (int mt = 0; mt < Cfg::kSMTiles; ++mt) {
                        Ops::mma(acc_dp[mt][2 * np], a_v[mt], b[0], b[1]);
                        Ops::mma(acc_dp[mt][2 * np + 1], a_v[mt], b[2], b[3]);
                    }
                }
            }

            // Does the block need the mask? Only if it holds a key past seqlen_k, a query
            // past seqlen_q, or (causal) a key right of the diagonal — which its last key
            // and first query decide. The same for the whole CTA: the branch is uniform.
            const bool masked =
                key0 + Cfg::kBlockN > p.seqlen_k || q_block0 + Cfg::kBlockM > p.seqlen_q ||
                (kCausal && key0 + Cfg::kBlockN - 1 > q_block0 + p.seqlen_k - p.seqlen_q);
            unsigned char *p_tile = reinterpret_cast<unsigned char *>(smem.P);
            unsigned char *ds_tile = reinterpret_cast<unsigned char *>(smem.dS);
            if (masked)
                store_p_ds<Cfg, Element, kCausal, true>(acc_s, acc_dp, smem.LSE_log2[stage],
                                                        smem.D[stage], p_tile, ds_tile, key_base,
                                                        q_base, lane, key0, q_block0, p);
            else
                store_p_ds<Cfg, Element, kCausal, false>(acc_s, acc_dp, smem.LSE_log2[stage],
                                                         smem.D[stage], p_tile, ds_tile, key_base,
                                                         q_base, lane, key0, q_block0, p);
        }
        // Every warp's Pᵀ and dSᵀ are in shared memory before any warp reads them.
        __syncthreads();

        // ---- Phase B: dV += Pᵀ·dO, dK += dSᵀ·Q (warp: its keys × its head_dim columns) ----
        {
            const int key_base = (warp % Cfg::kWarpsDKKeys) * Cfg::kDKKeysPerWarp;
            const int chunk_base = (warp / Cfg::kWarpsDKKeys) * Cfg::kDKColsPerWarp / kChunkElems;
#pragma unroll
            for (int kk = 0; kk < Cfg::kBlockM / kMmaK; ++kk) {
                uint32_t a_p[Cfg::kDKMTiles][4], a_ds[Cfg::kDKMTiles][4];
#pragma unroll
                for (int mt = 0; mt < Cfg::kDKMTiles; ++mt) {
                    ldsm_a_rows_p<Cfg>(a_p[mt], sP, key_base + mt * kMmaM, 2 * kk, lane);
                    ldsm_a_rows_p<Cfg>(a_ds[mt], sdS, key_base + mt * kMmaM, 2 * kk, lane);
                }
#pragma unroll
                for (int dp = 0; dp < Cfg::kDKNTiles / 2; ++dp) {
                    uint32_t b[4];
                    ldsm_b_trans<Cfg>(b, sdO, kk * kMmaK, chunk_base + 2 * dp, lane);
#pragma unroll
                    for (int mt = 0; mt < Cfg::kDKMTiles; ++mt) {
                        Ops::mma(acc_dv[mt][2 * dp], a_p[mt], b[0], b[1]);
                        Ops::mma(acc_dv[mt][2 * dp + 1], a_p[mt], b[2], b[3]);
                    }
                    ldsm_b_trans<Cfg>(b, sQ, kk * kMmaK, chunk_base + 2 * dp, lane);
#pragma unroll
                    for (int mt = 0; mt < Cfg::kDKMTiles; ++mt) {
                        Ops::mma(acc_dk[mt][2 * dp], a_ds[mt], b[0], b[1]);
                        Ops::mma(acc_dk[mt][2 * dp + 1], a_ds[mt], b[2], b[3]);
                    }
                }
            }
        }

        // ---- Phase C: dQaccum += dS·K (warp: its query rows × its head_dim columns) ----
        //
        // The dQ race: a query row's dQ = Σ over all key blocks of dS·K, and every key
        // block belongs to another CTA, running on another SM at the same time. Each CTA
        // adds its partial product into fp32 dQaccum with red.global.add (.v2.f32 on
        // sm_90), resolved in L2, so no CTA waits for another and no CTA owns dQ. The
        // price: the order of the additions varies from run to run, so dQ is not bitwise
        // repeatable (caps.deterministic_backward = false; stage 11 adds a deterministic
        // mode).
        {
            const int q_base = (warp % Cfg::kWarpsDQRows) * Cfg::kDQRowsPerWarp;
            const int chunk_base = (warp / Cfg::kWarpsDQRows) * Cfg::kDQColsPerWarp / kChunkElems;
            float acc_dq[Cfg::kDQMTiles][Cfg::kDQNTiles][4];
#pragma unroll
            for (int mt = 0; mt < Cfg::kDQMTiles; ++mt)
#pragma unroll
                for (int nt = 0; nt < Cfg::kDQNTiles; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        acc_dq[mt][nt][e] = 0.f;
#pragma unroll
            for (int kk = 0; kk < Cfg::kBlockN / kMmaK; ++kk) {
                uint32_t a[Cfg::kDQMTiles][4];
#pragma unroll
                for (int mt = 0; mt < Cfg::kDQMTiles; ++mt)
                    ldsm_a_trans_p<Cfg>(a[mt], sdS, kk * kMmaK, (q_base + mt * kMmaM) / kChunkElems,
                                        lane);
#pragma unroll
                for (int dp = 0; dp < Cfg::kDQNTiles / 2; ++dp) {
                    uint32_t b[4];
                    ldsm_b_trans<Cfg>(b, sK, kk * kMmaK, chunk_base + 2 * dp, lane);
#pragma unroll
                    for (int mt = 0; mt < Cfg::kDQMTiles; ++mt) {
                        Ops::mma(acc_dq[mt][2 * dp], a[mt], b[0], b[1]);
                        Ops::mma(acc_dq[mt][2 * dp + 1], a[mt], b[2], b[3]);
                    }
                }
            }
            // dQaccum rows of this Q block are heads_q·head_dim floats apart; the block's
            // first row is computed once, the thread's rows as 32-bit offsets from it
            // (fx_problem_validate keeps every tensor under 2^31 elements). Every column a
            // thread adds at is even (chunk_base·8 + 8nt + 2t) and rows are head_dim floats
            // apart, so each pair is 8-byte aligned, as red.global.add.v2.f32 needs, given a
            // workspace aligned to 16 bytes (fx_bwd_03 checks it).
            const int g = lane / kLanesPerRow, t = lane % kLanesPerRow;
            float *dq_block =
                p.dq_accum +
                (((int64_t)batch * p.seqlen_q + q_block0) * p.heads_q + head) * Cfg::kHeadDim +
                chunk_base * kChunkElems + 2 * t;
            const int dq_row_stride = p.heads_q * Cfg::kHeadDim;
#pragma unroll
            for (int mt = 0; mt < Cfg::kDQMTiles; ++mt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int q_local = q_base + mt * kMmaM + g + h * (kMmaM / 2);
                    if (q_block0 + q_local >= p.seqlen_q)
                        continue;
                    float *row = dq_block + q_local * dq_row_stride;
#pragma unroll
                    for (int nt = 0; nt < Cfg::kDQNTiles; ++nt)
                        fx_red_add_f32x2(row + nt * kMmaN, acc_dq[mt][nt][2 * h],
                                         acc_dq[mt][nt][2 * h + 1]);
                }
        }
    }

    // ---- Epilogue: dK = scale·Σ dSᵀQ and dV, written once in the dtype ----
    {
        const int tid = thread_index_uncached();
        const int warp = tid / kWarpSize, lane = tid % kWarpSize;
        const int g = lane / kLanesPerRow, t = lane % kLanesPerRow;
        const int key_base = (warp % Cfg::kWarpsDKKeys) * Cfg::kDKKeysPerWarp;
        const int col_base = (warp / Cfg::kWarpsDKKeys) * Cfg::kDKColsPerWarp + 2 * t;
        Element *dK =
            static_cast<Element *>(p.dk) + batch * p.k_batch_stride + head_kv * p.k_head_stride;
        Element *dV =
            static_cast<Element *>(p.dv) + batch * p.v_batch_stride + head_kv * p.v_head_stride;
#pragma unroll
        for (int mt = 0; mt < Cfg::kDKMTiles; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int key = key0 + key_base + mt * kMmaM + g + h * (kMmaM / 2);
                if (key >= p.seqlen_k)
                    continue;
#pragma unroll
                for (int nt = 0; nt < Cfg::kDKNTiles; ++nt) {
                    const int col = col_base + nt * kMmaN;
                    *reinterpret_cast<uint32_t *>(dK + (int64_t)key * p.k_row_stride + col) =
                        Ops::pack(acc_dk[mt][nt][2 * h] * p.softmax_scale,
                                  acc_dk[mt][nt][2 * h + 1] * p.softmax_scale);
                    *reinterpret_cast<uint32_t *>(dV + (int64_t)key * p.v_row_stride + col) =
                        Ops::pack(acc_dv[mt][nt][2 * h], acc_dv[mt][nt][2 * h + 1]);
                }
            }
    }
}

/* ---------------------------------------------------------------------------------
 * Host launcher
 * ------------------------------------------------------------------------------ */

size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}
constexpr size_t kWorkspaceAlign = 256;  // each workspace array starts on 256 bytes

int seqlen_q_rounded_of(int seqlen_q)
{
    return (int)align_up((size_t)seqlen_q, kRowPad);
}

template <class Cfg, class Element, bool kCausal>
cudaError_t launch(const fx_bwd_args *a)
{
    const fx_problem *pr = a->p;
    BwdParams p;
    p.q = a->q;
    p.k = a->k;
    p.v = a->v;
    p.o = a->o;
    p.dout = a->dout;
    p.lse = a->lse;
    p.dq = a->dq;
    p.dk = a->dk;
    p.dv = a->dv;
    set_strides(p, a->q_layout, a->k_layout, a->v_layout, a->o_layout);
    p.batch = pr->batch;
    p.seqlen_q = pr->seqlen_q;
    p.seqlen_k = pr->seqlen_k;
    p.seqlen_q_rounded = seqlen_q_rounded_of(pr->seqlen_q);
    p.heads_q = pr->heads_q;
    p.head_dim = pr->head_dim;
    p.q_per_kv = pr->heads_q / pr->heads_kv;
    p.softmax_scale = (float)pr->softmax_scale;
    p.scale_log2 = (float)(pr->softmax_scale * M_LOG2E);
    const size_t accum = fx_numel_q(pr) * sizeof(float);
    const size_t stats = (size_t)pr->batch * pr->heads_q * p.seqlen_q_rounded * sizeof(float);
    unsigned char *ws = static_cast<unsigned char *>(a->workspace);
    p.dq_accum = reinterpret_cast<float *>(ws);
    p.lse_log2 = reinterpret_cast<float *>(ws + align_up(accum, kWorkspaceAlign));
    p.D = reinterpret_cast<float *>(ws + align_up(accum, kWorkspaceAlign) +
                                    align_up(stats, kWorkspaceAlign));

    // Preprocess: one warp per row of the padded statistics.
    const int64_t stat_rows = (int64_t)pr->batch * pr->heads_q * p.seqlen_q_rounded;
    bwd_preprocess_kernel<Element><<<(unsigned)((stat_rows + kPreWarps - 1) / kPreWarps),
                                     kPreWarps * kWarpSize, 0, a->stream>>>(p);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;

    // Main kernel. GQA: one CTA per (K/V block, kv head, batch) that loops over the group's
    // query heads. The alternative, a CTA per query head with per-head dK/dV in a workspace
    // and a reduce kernel, has q_per_kv times the CTAs but costs fp32 dK/dV round trips
    // through HBM and one more kernel; here dK and dV stay in registers and are written
    // once, without atomics, and the seqlen_k/kBlockN × heads_kv × batch CTAs fill the GPU
    // at the sizes that matter (4096/128 × 16 × 4 = 2048).
    const size_t smem_bytes = sizeof(BwdSharedStorage<Cfg>);
    auto kernel = bwd_kernel<Cfg, Element, kCausal>;
    err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes);
    if (err != cudaSuccess)
        return err;
    const dim3 grid((unsigned)((pr->seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN),
                    (unsigned)pr->heads_kv, (unsigned)pr->batch);
    kernel<<<grid, Cfg::kNThreads, smem_bytes, a->stream>>>(p);
    err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;

    // Postprocess: dQ = scale·dQaccum, two elements per thread, grid-stride.
    constexpr int kPostBlocksMax = 65535;  // plenty of CTAs for a memory-bound loop
    const int64_t pairs = (int64_t)fx_numel_q(pr) / 2;
    const int64_t blocks = (pairs + kPreWarps * kWarpSize - 1) / (kPreWarps * kWarpSize);
    bwd_postprocess_kernel<Element><<<(unsigned)(blocks < kPostBlocksMax ? blocks : kPostBlocksMax),
                                      kPreWarps * kWarpSize, 0, a->stream>>>(p);
    return cudaGetLastError();
}

template <class Cfg, class Element>
cudaError_t launch_masking(const fx_bwd_args *a)
{
    return a->p->causal ? launch<Cfg, Element, true>(a) : launch<Cfg, Element, false>(a);
}

template <class Cfg>
cudaError_t launch_dtype(const fx_bwd_args *a)
{
    switch (a->p->dtype) {
    case FX_BF16: return launch_masking<Cfg, __nv_bfloat16>(a);
    case FX_FP16: return launch_masking<Cfg, __half>(a);
    default: return cudaErrorInvalidValue;
    }
}

template <class Cfg>
fx_tiles_03 tiles_of(void)
{
    fx_tiles_03 t;
    t.block_m = Cfg::kBlockM;
    t.block_n = Cfg::kBlockN;
    return t;
}

}  // namespace

/* Workspace: dQaccum (fp32, Q's contiguous shape), then LSE_log2 and D (fp32, padded). */
extern "C" size_t fx_bwd_workspace_bytes_03(const fx_problem *p)
{
    const size_t accum = fx_numel_q(p) * sizeof(float);
    const size_t stats =
        (size_t)p->batch * p->heads_q * seqlen_q_rounded_of(p->seqlen_q) * sizeof(float);
    return align_up(accum, kWorkspaceAlign) + 2 * align_up(stats, kWorkspaceAlign);
}

/* The backward's dynamic shared memory per CTA in bytes at head_dim (0 for a head_dim the
 * stage does not build): stage.c holds it against the GPU's opt-in limit. */
extern "C" size_t fx_bwd_smem_bytes_03(int head_dim)
{
    switch (head_dim) {
    case 64: return sizeof(BwdSharedStorage<BwdConfigD64>);
    case 96: return sizeof(BwdSharedStorage<BwdConfigD96>);
    case 128: return sizeof(BwdSharedStorage<BwdConfigD128>);
    case 256: return sizeof(BwdSharedStorage<BwdConfigD256>);
    default: return 0;
    }
}

/* Enqueues the backward on a->stream: the preprocess, the main kernel and the postprocess;
 * dQ, dK, dV (dtype) from Q, K, V, O, dO and the forward's LSE. Returns the launch error,
 * cudaErrorInvalidValue for a workspace smaller than fx_bwd_workspace_bytes_03, or
 * cudaErrorMisalignedAddress for a tensor or workspace the 16-byte copies cannot read. */
extern "C" cudaError_t fx_bwd_03(const fx_bwd_args *a)
{
    if (!aligned_for_chunks(a->q, &a->q_layout) || !aligned_for_chunks(a->k, &a->k_layout) ||
        !aligned_for_chunks(a->v, &a->v_layout) || !aligned_for_chunks(a->dout, &a->o_layout) ||
        !aligned_for_chunks(a->o, &a->o_layout))
        return cudaErrorMisalignedAddress;
    if (a->workspace_bytes < fx_bwd_workspace_bytes_03(a->p))
        return cudaErrorInvalidValue;
    // cp.async copies LSE_log2 and D in 16-byte chunks, and dQaccum takes 8-byte vector reds.
    if ((uintptr_t)a->workspace % kChunkBytes != 0)
        return cudaErrorMisalignedAddress;
    switch (a->p->head_dim) {
    case 64: return launch_dtype<BwdConfigD64>(a);
    case 96: return launch_dtype<BwdConfigD96>(a);
    case 128: return launch_dtype<BwdConfigD128>(a);
    case 256: return launch_dtype<BwdConfigD256>(a);
    default: return cudaErrorInvalidValue;
    }
}

/* The backward's kBlockM × kBlockN per head_dim (model.h), for the CPU model and its
 * tests; {0, 0} for a head_dim the stage does not build. */
extern "C" fx_tiles_03 fx_bwd_tiles_03(int head_dim)
{
    fx_tiles_03 t = {0, 0};
    switch (head_dim) {
    case 64: return tiles_of<BwdConfigD64>();
    case 96: return tiles_of<BwdConfigD96>();
    case 128: return tiles_of<BwdConfigD128>();
    case 256: return tiles_of<BwdConfigD256>();
    default: return t;
    }
}
