/*
 * fwd.cu — stage 04: stage 03's FlashAttention-2 forward, its tiles moved by the
 * Tensor Memory Accelerator.
 *
 * Over stage 03 only the data movement changes. Q, K and V arrive in shared memory by
 * TMA (cp.async.bulk.tensor): one thread issues one instruction per 64-column box, the
 * copy engine computes the addresses, clips the tile at seqlen (zero fill) and writes it
 * 128-byte swizzled; completion is counted in bytes on an mbarrier that the consumers
 * wait on by phase parity, in stage 03's two-stage K/V ring (the next block is requested
 * while this one is computed). O leaves by a TMA store from shared memory, which the
 * generic-proxy writes before it must fence (fence.proxy.async). Compute — mma.sync,
 * ldmatrix, the online softmax, the tiles, warps and register budget — is stage 03's.
 * `scripts/stage_diff.sh 03 04` shows the copies and the addresses of the new layout;
 * docs/04_tma_mbarrier.md gives the measured gain (fewer instructions per copy, not more
 * overlap: the ring is stage 03's).
 *
 * Sources: PTX ISA 9.0 §9.7.9.25.5.2 "cp.async.bulk.tensor", §9.7.13.15 "mbarrier",
 * §9.7.13.4 "membar/fence" (fence.proxy.async, fence.mbarrier_init), §5.5 "Tensors"
 * (tensor maps, bounding box, swizzle modes); CUDA driver API cuTensorMapEncodeTiled;
 * FA2 (Dao 2023) Algorithm 1 for the computation. The wrappers are in
 * common/ptx/hopper.cuh, the tensor-map encoding in common/fx_tma.c.
 *
 * Layouts (fx_problem.h): Q, O [batch, seqlen_q, heads_q, head_dim]; K, V [batch,
 * seqlen_k, heads_kv, head_dim]; LSE fp32 [batch, heads_q, seqlen_q], natural log.
 * Query head h reads kv head h / (heads_q / heads_kv). Causal is bottom-right aligned:
 * row i sees key j iff j <= i + seqlen_k - seqlen_q. A row that sees no key gets
 * O = 0 and LSE = -inf.
 */
#include <cuda.h>  // CUtensorMap (a type: nothing here links libcuda)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "fx_exact_rows.cuh"
#include "fx_msg.h"
#include "fx_stage.h"
#include "fx_tma.h"
#include "ptx/hopper.cuh"
#include "ptx/mma_sm80.cuh"

#include "traits.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ---------------------------------------------------------------------------------
 * Compile-time configuration
 * ------------------------------------------------------------------------------ */

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kMinBlocksPerSm_,
          int kStages_>
struct Config {
    static constexpr int kHeadDim = kHeadDim_;
    static constexpr int kBlockM = kBlockM_;  // query rows per CTA
    static constexpr int kBlockN = kBlockN_;  // keys per K/V block
    static constexpr int kNWarps = kNWarps_;
    static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;  // CTAs per SM the smem plan allows
    static constexpr int kNThreads = kNWarps * kWarpSize;
    // K/V ring depth: block n_block − (kStages − 1) is requested while block n_block is
    // computed (see the mainloop). Any kStages >= 2 that fits shared memory works.
    static constexpr int kStages = kStages_;
    // Split-Q: warp w owns rows [w·kRowsPerWarp, (w+1)·kRowsPerWarp) of the Q block, as
    // kMTiles m16 tiles. With two tiles per warp every K or V fragment a warp loads by
    // ldmatrix feeds two mma (half the shared-memory traffic per FLOP of one tile).
    static constexpr int kRowsPerWarp = kBlockM / kNWarps;
    static constexpr int kMTiles = kRowsPerWarp / kMmaM;
    static constexpr int kNTiles = kBlockN / kMmaN;         // n8 tiles of a warp's S rows
    static constexpr int kDTiles = kHeadDim / kMmaN;        // n8 tiles of a warp's O rows
    static constexpr int kChunks = kHeadDim / kChunkElems;  // 16-byte chunks of a row in HBM
    // With the 128-byte swizzle a TMA box row is at most 128 bytes (64 elements): a tile
    // is kSlabs boxes side by side, each stored as its own slab of rows × 128 bytes
    // (swizzled_offset, traits.cuh). In a slab, a row is 128 bytes.
    static constexpr int kSlabs = kHeadDim / kSwizzleRowElems;
    static constexpr int kSmemRowBytes = kSwizzleRowBytes;
    static constexpr int kSlabBytesQ = kBlockM * kSmemRowBytes;   // one 64-column slab of Q
    static constexpr int kSlabBytesKV = kBlockN * kSmemRowBytes;  // one of K or V

    static_assert(kRowsPerWarp % kMmaM == 0, "a warp owns whole m16 tiles");
    static_assert(kBlockN % (2 * kMmaN) == 0 && kHeadDim % (2 * kMmaN) == 0,
                  "ldmatrix.x4 loads n8 tiles in pairs");
    static_assert(kHeadDim % kMmaK == 0 && kBlockN % kMmaK == 0, "whole k16 steps");
    static_assert(kHeadDim % kSwizzleRowElems == 0, "a row is whole 64-column TMA boxes");
    static_assert(kBlockM <= FX_TMA_MAX_BOX && kBlockN <= FX_TMA_MAX_BOX,
                  "a tile's rows are one box dimension (at most 256)");
    static_assert(kStages >= 2, "a ring: one stage computed while another fills");
};

/*
 * The tile per head_dim: stage 03's, with its two K/V stages, so that the registers and
 * the work per block are the same and only the copies differ. A thread holds
 * kMTiles·(kNTiles + kDTiles)·4 fp32 accumulators
 * (S and O) beside its fragments, addresses and row statistics, within 255 registers;
 * ptxas schedules ldmatrix far ahead of the mma that use them, and at 192 accumulators
 * (FA2's own 128×64 tile for head_dim 128) it spilled, as it does for FA2. At most 160
 * accumulators compile without spills, so every tile below stays at or under 160. Shared
 * memory per CTA is (kBlockM + 2·kStages·kBlockN)·2·head_dim bytes, plus the barriers and
 * the alignment slack (smem_bytes_of).
 *
 * Why not three stages where they fit (d=64: 64 KiB, d=128: 80 KiB, still two CTAs per
 * SM)? TMA needs no registers per copy, so a deeper ring costs only shared memory and
 * requests each block two blocks ahead instead of one. Measured, three stages were slower
 * non-causal and at best level causal: one block ahead hides the copy already
 * (docs/04_tma_mbarrier.md, "What limits it", has the numbers).
 */
// d=64: 128×64, 4 warps of 32 rows: S 64 + O 64 accumulators (the 128×128 of FA2 would
// be S 128 + O 64 = 192). 48 KiB of smem; registers (≤ 255 × 128 threads) allow two CTAs
// (8 warps) per SM.
using ConfigD64 = Config<64, 128, 64, 4, 2, 2>;
// d=128: 128×32, 4 warps of 32 rows: S 32 + O 128 = 160 (FA2's 128×64 is 192 and spills).
// Two m16 tiles per warp keep each K/V fragment feeding two mma; 64 KiB, two CTAs per SM.
// The price of kBlockN = 32 is twice the per-block work that does not scale with it:
// the barrier, the row-max shuffles and the O rescale.
using ConfigD128 = Config<128, 128, 32, 4, 2, 2>;
// d=256: O alone is 16·256/32 = 128 registers per m16 tile, so a warp owns one tile:
// 128×64 with 8 warps of 16 rows (S 32 + O 128 = 160), FA2's tile. 192 KiB: one CTA of
// 8 warps per SM; a third K/V stage (256 KiB) would not fit the 227 KiB of one block.
using ConfigD256 = Config<256, 128, 64, 8, 1, 2>;

/* ---------------------------------------------------------------------------------
 * Shared-memory plan
 *
 * Q [kBlockM rows], K and V [kStages][kBlockN rows], each a tile of kSlabs slabs of
 * rows × 128 bytes that TMA writes with CU_TENSOR_MAP_SWIZZLE_128B: chunk c (16 bytes)
 * of row r of a slab is stored at chunk c ^ (r % 8) — stage 03's XOR, now done by the
 * copy engine. The hardware takes the XOR key from the shared address bits [7, 10), so
 * each slab must start on a 1024-byte boundary (8 rows × 128 bytes: the pattern's
 * period) for row r's key to be r % 8: every tile below is 1024-aligned and every slab
 * size (kBlockN·128 ≥ 4096) a multiple of 1024.
 *  - ldmatrix reads one chunk from each of 8 consecutive rows: 8 different bank groups,
 *    one pass over the 32 banks (as in stage 03).
 * Then one mbarrier per buffer that TMA fills (8 bytes each, 8-aligned).
 * ------------------------------------------------------------------------------ */

constexpr int kSmemAlign = FX_SWIZZLE128_ATOM_BYTES;  // 1024: the swizzle's period

template <class Cfg>
struct SharedStorage {
    alignas(kSmemAlign) uint16_t Q[Cfg::kBlockM * Cfg::kHeadDim];
    alignas(kSmemAlign) uint16_t K[Cfg::kStages][Cfg::kBlockN * Cfg::kHeadDim];
    alignas(kSmemAlign) uint16_t V[Cfg::kStages][Cfg::kBlockN * Cfg::kHeadDim];
    uint64_t q_full;                 // Q has landed (one phase: Q is loaded once)
    uint64_t kv_full[Cfg::kStages];  // K and V of stage s have landed (one phase per fill)
};

/* Dynamic shared memory is only promised 16-byte alignment; the kernel rounds its base up
 * to kSmemAlign, inside this much slack. */
template <class Cfg>
constexpr size_t smem_bytes_of(void)
{
    return sizeof(SharedStorage<Cfg>) + kSmemAlign;
}

// The most dynamic shared memory one CTA may have on Hopper (sm_90: 227 KiB), and what
// one SM has for all its CTAs (228 KiB, of which the system reserves 1 KiB per CTA).
constexpr size_t kMaxSmemPerBlockHopper = FX_SMEM_PER_BLOCK_OPTIN_SM90;
constexpr size_t kMaxSmemPerSmHopper = 228 * 1024;
constexpr size_t kReservedSmemPerBlock = 1024;
template <class Cfg>
constexpr bool smem_fits(void)
{
    return smem_bytes_of<Cfg>() <= kMaxSmemPerBlockHopper &&
           Cfg::kMinBlocksPerSm * (smem_bytes_of<Cfg>() + kReservedSmemPerBlock) <=
               kMaxSmemPerSmHopper;
}
static_assert(smem_fits<ConfigD64>(), "d=64: smem for two CTAs per SM");
static_assert(smem_fits<ConfigD128>(), "d=128: smem for two CTAs per SM");
static_assert(smem_fits<ConfigD256>(), "d=256: smem for one CTA");

/* ---------------------------------------------------------------------------------
 * Kernel arguments
 *
 * Q, K, V and O are reached through tensor maps, passed beside these as
 * `const __grid_constant__ CUtensorMap` parameters (see the kernel); O's pointer stays
 * for the CTAs whose rows see no key, which write zeros without TMA.
 * ------------------------------------------------------------------------------ */

struct FwdParams {
    void *o;
    float *lse;
    // Element strides of O (head_dim is contiguous). Rows step by 32-bit strides: every
    // tensor has fewer than 2^31 elements (fx_problem_validate).
    int64_t o_batch_stride, o_head_stride;
    int o_row_stride;
    // Q, K and V as plain pointers, for the exact path alone (exact_rows_args); the
    // mainloop reads them through the tensor maps.
    const void *q, *k, *v;
    int64_t q_batch_stride, q_head_stride, k_batch_stride, k_head_stride;
    int64_t v_batch_stride, v_head_stride;
    int q_row_stride, k_row_stride, v_row_stride;
    int seqlen_q, seqlen_k;
    int heads_q;
    int q_per_kv;           // heads_q / heads_kv: query heads that share one kv head
    uint32_t q_per_kv_mul;  // head / q_per_kv = umulhi(head, q_per_kv_mul) (see kv_head_of)
    float softmax_scale;    // for the LSE, in natural-log units
    float scale_log2;       // softmax_scale · log2(e): exp(x·scale) = 2^(x·scale_log2)
};

/*
 * GQA: the kv head of query head `head`, head / q_per_kv, as a multiply-high by
 * q_per_kv_mul = floor(2^32 / q_per_kv) + 1 (exact for head, q_per_kv < 2^16, which the
 * grid's y limit of 65535 guarantees; q_per_kv = 1 is the identity). An integer division
 * by a runtime value is a dozen instructions on the per-thread datapath, and the K/V base
 * pointers derived from it then occupied per-thread registers through the whole mainloop
 * (which spilled at head_dim 96 and 128); the multiply-high stays CTA-uniform.
 */
__device__ __forceinline__ int kv_head_of(int head, int q_per_kv, uint32_t q_per_kv_mul)
{
    return q_per_kv == 1 ? head : (int)__umulhi((uint32_t)head, q_per_kv_mul);
}

/* ---------------------------------------------------------------------------------
 * Producer: global -> shared by TMA, completing on mbarriers
 * ------------------------------------------------------------------------------ */

/*
 * Requests the tile of kRows rows starting at sequence row `row0` of (head, batch): one
 * cp.async.bulk.tensor per 64-column slab, box {64 columns, 1 head, kRows rows, 1 batch}
 * at coordinates {64·slab, head, row0, batch} of the 4D map {head_dim, heads, seqlen,
 * batch} (fx_tma_tiled_qkv). Rows at or past seqlen are out of the map's bounds: TMA fills
 * them with zeros (what stage 03's cp.async zero-fill did by hand: a K row past seqlen_k
 * must give a finite score to mask, a V row must be 0) and still counts them in the bytes
 * it delivers. Each box signals its bytes on `bar` (complete_tx); the caller announced
 * them first with expect_tx. Called by one thread.
 */
template <class Cfg, int kRows>
__device__ __forceinline__ void load_tile(uint32_t smem_tile, const CUtensorMap *map, uint32_t bar,
                                          int row0, int head, int batch)
{
    /* ASSIGNMENT(tma_load): request the tile by TMA, one fx_tma_load_4d per 64-column slab
     * (slab s lands kSlabBytes after slab s − 1), each completing its bytes on `bar`. */
    constexpr uint32_t kSlabBytes = kRows * Cfg::kSmemRowBytes;
#pragma unroll
    for (int slab = 0; slab < Cfg::kSlabs; ++slab)
        fx_tma_load_4d(smem_tile + slab * kSlabBytes, map, bar, slab * kSwizzleRowElems, head, row0,
                       batch);
    /* END ASSIGNMENT */
}

/* ---------------------------------------------------------------------------------
 * Consumer: one K/V block — S = QKᵀ, mask, online softmax, O += PV
 * ------------------------------------------------------------------------------ */

/* Byte offset of k16 step (or n16 pair) `step` of a swizzled row for a lane whose XOR key
 * (·16 bytes) is `key`: the step's two chunks inside their 128-byte line are XORed with
 * the key; whole lines are added — here a line is a row of the next 64-column slab,
 * kSlabBytes further — so the compiler keeps at most four XORed values alive and folds
 * the rest into the instruction's immediate offset. */
constexpr int kStepsPerLine = kSwizzleChunks / 2;  // k16 steps per line
template <int kSlabBytes>
__device__ __forceinline__ uint32_t swizzled_step(int step, uint32_t key)
{
    return (((step % kStepsPerLine) * 2 * kChunkBytes) ^ key) + (step / kStepsPerLine) * kSlabBytes;
}

/* Per-lane state of the fragments (layouts drawn above attention_block). */
struct LaneAddrs {
    uint32_t q;      // this lane's ldmatrix row of the warp's first Q m-tile
    uint32_t k_row;  // byte offset of this lane's ldmatrix row in a K tile (before XOR)
    uint32_t v_row;  // the same in a V tile
    uint32_t key_a;  // XOR key ·16 of the Q and V loads
    uint32_t key_b;  // XOR key ·16 of the K loads
};

/* Made afresh for every K/V block from the uncached thread index, rather than kept in
 * registers across the mainloop: five integer values, recomputed in a dozen instructions. */
template <class Cfg>
__device__ __forceinline__ LaneAddrs lane_addrs(uint32_t sQ, int warp, int lane)
{
    const int lane_r8 = lane % 8, lane_m = (lane / 8) % 2, lane_hi = lane / 16;
    LaneAddrs la;
    la.q = sQ + (uint32_t)((warp * Cfg::kRowsPerWarp + lane % kMmaM) * Cfg::kSmemRowBytes);
    la.k_row = (uint32_t)((lane_r8 + 8 * lane_hi) * Cfg::kSmemRowBytes);
    la.v_row = (uint32_t)((lane % kMmaK) * Cfg::kSmemRowBytes);
    la.key_a = (uint32_t)((lane_hi ^ lane_r8) * kChunkBytes);
    la.key_b = (uint32_t)((lane_m ^ lane_r8) * kChunkBytes);
    return la;
}

/* UNIT(softmax_exp) */
/* P = 2^(fma(S, c, −R)) in place, R = m_scaled = m·c rounded up, c = scale_log2: one FFMA and
 * one EX2 per score, none above 1, and this lane's part of ℓ. The row's P all carry the
 * factor 2^(m·c − R), which cancels in O; the LSE, R·ln 2 + ln ℓ, is that of the P computed.
 * Past |R| = FX_SOFTMAX_FAST_BELOW the factor may be small enough to lose the row, and the
 * epilogue's one check sends such rows to the exact path (common/fx_exact_rows.cuh; stage
 * 05's softmax state draws it in full). */
template <class Cfg>
__device__ __forceinline__ void softmax_exp(float (&acc_s)[Cfg::kMTiles][Cfg::kNTiles][4],
                                            float (&row_sum)[Cfg::kMTiles][2],
                                            const float (&m_scaled)[Cfg::kMTiles][2],
                                            float scale_log2)
{
#pragma unroll
    for (int i = 0; i < Cfg::kMTiles; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int n = 0; n < Cfg::kNTiles; ++n)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float p =
                        fx_ex2(fmaf(acc_s[i][n][2 * h + e], scale_log2, -m_scaled[i][h]));
                    acc_s[i][n][2 * h + e] = p;
                    row_sum[i][h] += p;  // this lane's partial; reduced over the row at the end
                }
}
/* END UNIT */

/* Byte offset of k16 step `step` of the PV GEMM (an n16 pair of V's rows read .trans) in a
 * lane's swizzled V row: V is stored as TMA's 64-column slabs, kSlabBytesKV apart. */
template <class Cfg>
__device__ __forceinline__ uint32_t v_step(int step, uint32_t key)
{
    return swizzled_step<Cfg::kSlabBytesKV>(step, key);
}

/* UNIT(rescale_o_pv) */
/*
 * The rest of one K/V block once P is known: O *= alpha per row, then O += P·V, P converted
 * from the S accumulators in registers (layouts drawn above attention_block). V's address
 * per k16 step is v_step's: the one thing here that stage 03 (cp.async rows) and stage 04
 * (TMA slabs) lay out differently.
 */
template <class Cfg, class Element>
__device__ __forceinline__ void rescale_o_pv(float (&acc_o)[Cfg::kMTiles][Cfg::kDTiles][4],
                                             const float (&acc_s)[Cfg::kMTiles][Cfg::kNTiles][4],
                                             const float (&alpha)[Cfg::kMTiles][2], uint32_t sV,
                                             const LaneAddrs &la)
{
    using Ops = ElementOps<Element>;
    constexpr int kM = Cfg::kMTiles;
    constexpr int kTileRowBytes = kMmaM * Cfg::kSmemRowBytes;  // 16 rows: one k16 step
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
        for (int d = 0; d < Cfg::kDTiles; ++d)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                acc_o[i][d][2 * h] *= alpha[i][h];
                acc_o[i][d][2 * h + 1] *= alpha[i][h];
            }
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / kMmaK; ++kk) {
        uint32_t a[kM][4];
#pragma unroll
        for (int i = 0; i < kM; ++i) {
            a[i][0] = Ops::pack(acc_s[i][2 * kk][0], acc_s[i][2 * kk][1]);
            a[i][1] = Ops::pack(acc_s[i][2 * kk][2], acc_s[i][2 * kk][3]);
            a[i][2] = Ops::pack(acc_s[i][2 * kk + 1][0], acc_s[i][2 * kk + 1][1]);
            a[i][3] = Ops::pack(acc_s[i][2 * kk + 1][2], acc_s[i][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < Cfg::kDTiles / 2; ++dp) {
            uint32_t b[4];
            fx_ldmatrix_x4_trans(b, sV + la.v_row + kk * kTileRowBytes + v_step<Cfg>(dp, la.key_a));
#pragma unroll
            for (int i = 0; i < kM; ++i) {
                Ops::mma(acc_o[i][2 * dp], a[i], b[0], b[1]);
                Ops::mma(acc_o[i][2 * dp + 1], a[i], b[2], b[3]);
            }
        }
    }
}
/* END UNIT */

/*
 * One K/V block for the warp's kRowsPerWarp rows. kMask: the block crosses the causal
 * diagonal or the end of seqlen_k, so scores of keys a row may not see become -inf.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16; g = lane/4, t = lane%4), per m16 tile i:
 *
 *   acc_s[i][n] (S, 16 rows × keys 8n..8n+7)      acc_o[i][d] (O, 16 rows × cols 8d..8d+7)
 *        cols 8n+2t, 8n+2t+1                           cols 8d+2t, 8d+2t+1
 *   row g    | [0] [1] |                          row g    | [0] [1] |
 *   row g+8  | [2] [3] |                          row g+8  | [2] [3] |
 *
 * So a lane holds 2 columns of rows g and g+8 per n8 tile: the row statistics are per
 * lane partials reduced over the 4 lanes t = 0..3 (shuffle xor 1, 2).
 *
 * ldmatrix.x4 address of lane l (lanes 8j..8j+7 address matrix j):
 *   Q (A operand, 16×16 at rows R, k-chunks 2kk, 2kk+1):
 *       row R + l%16, chunk 2kk + l/16         -> a[0..3] = (rows 0-7|8-15) × (chunk 0|1)
 *   K (B operand of S, keys 16np..16np+15 = n8 tiles 2np, 2np+1, chunks 2kk, 2kk+1):
 *       row 16np + l%8 + 8·(l/16), chunk 2kk + (l/8)%2
 *                                               -> b[0], b[1] of tile 2np; b[2], b[3] of 2np+1
 *   V (.trans, B operand of PV, keys 16kk..16kk+15, head_dim chunks 2dp, 2dp+1):
 *       row 16kk + l%16, chunk 2dp + l/16       -> b[0], b[1] of tile 2dp; b[2], b[3] of 2dp+1
 * Every such row is ≡ l%8 mod 8, so the swizzled chunk is (2kk + bit) ^ (l%8) =
 * 2kk ^ (bit ^ l%8): a per-lane key XORed with a compile-time chunk (key_a, key_b).
 *
 * P as the A operand of PV, k-step kk (keys 16kk..16kk+15) of m-tile i, from S in place:
 *   a[0] = (acc_s[i][2kk][0],   acc_s[i][2kk][1])     row g,   keys 2t, 2t+1
 *   a[1] = (acc_s[i][2kk][2],   acc_s[i][2kk][3])     row g+8, keys 2t, 2t+1
 *   a[2] = (acc_s[i][2kk+1][0], acc_s[i][2kk+1][1])   row g,   keys 8+2t, 8+2t+1
 *   a[3] = (acc_s[i][2kk+1][2], acc_s[i][2kk+1][3])   row g+8, keys 8+2t, 8+2t+1
 * — the accumulator of two adjacent n8 tiles is exactly the A fragment of one k16 step.
 */
template <class Cfg, class Element, bool kCausal, bool kMask>
__device__ __forceinline__ void attention_block(float (&acc_o)[Cfg::kMTiles][Cfg::kDTiles][4],
                                                float (&row_max_scaled)[Cfg::kMTiles][2],
                                                float (&row_sum)[Cfg::kMTiles][2], uint32_t sQ,
                                                uint32_t sK, uint32_t sV, int n_block, int m_block,
                                                int seqlen_q, int seqlen_k, float scale_log2)
{
    using Ops = ElementOps<Element>;
    constexpr int kM = Cfg::kMTiles;
    constexpr int kTileRowBytes = kMmaM * Cfg::kSmemRowBytes;  // 16 rows: one m16 or k16 step
    const unsigned tid = (unsigned)thread_index_uncached();
    const int warp = (int)(tid / kWarpSize), lane = (int)(tid % kWarpSize);
    const LaneAddrs la = lane_addrs<Cfg>(sQ, warp, lane);

    // ---- S = Q·Kᵀ (fp32 accumulators) ----
    float acc_s[kM][Cfg::kNTiles][4];
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
        for (int n = 0; n < Cfg::kNTiles; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc_s[i][n][e] = 0.f;

#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / kMmaK; ++kk) {
        uint32_t a[kM][4];
#pragma unroll
        for (int i = 0; i < kM; ++i)
            fx_ldmatrix_x4(a[i], la.q + i * kTileRowBytes +
                                     swizzled_step<Cfg::kSlabBytesQ>(kk, la.key_a));
#pragma unroll
        for (int np = 0; np < Cfg::kNTiles / 2; ++np) {
            uint32_t b[4];
            fx_ldmatrix_x4(b, sK + la.k_row + np * kTileRowBytes +
                                  swizzled_step<Cfg::kSlabBytesKV>(kk, la.key_b));
#pragma unroll
            for (int i = 0; i < kM; ++i) {
                Ops::mma(acc_s[i][2 * np], a[i], b[0], b[1]);
                Ops::mma(acc_s[i][2 * np + 1], a[i], b[2], b[3]);
            }
        }
    }

    /* UNIT(mask_softmax) */
    // ---- Mask: keys past seqlen_k, and (causal) keys past row + seqlen_k − seqlen_q ----
    if (kMask) {
        // Query row of this lane's (m-tile 0, row g) entries; key of its column 2t of tile 0.
        const int row0 = m_block * Cfg::kBlockM + warp * Cfg::kRowsPerWarp + lane / kLanesPerRow;
        const int col0 = n_block * Cfg::kBlockN + 2 * (lane % kLanesPerRow);
#pragma unroll
        for (int i = 0; i < kM; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = row0 + i * kMmaM + h * (kMmaM / 2);
                int key_end = seqlen_k;  // keys [0, key_end) are visible to this row
                if (kCausal)
                    key_end = min(key_end, row + 1 + seqlen_k - seqlen_q);
#pragma unroll
                for (int n = 0; n < Cfg::kNTiles; ++n)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        if (col0 + n * kMmaN + e >= key_end)
                            acc_s[i][n][2 * h + e] = -INFINITY;
            }
    }

    // ---- Online softmax (FA2 Algorithm 1, lines 9-10), O left unnormalized ----
    // P = exp(scale·(S − m)) = 2^(S·c − R), c = scale_log2, R = m·c rounded up (softmax_exp).
    // The running max is kept as R (row_max_scaled, -inf before any visible key): x -> x·c
    // rounded up is monotone for c > 0 (fx_problem_validate keeps softmax_scale in [2^-100,
    // 2^100]), so R_new = max(R_old, block max · c rounded up) is m_new·c rounded up, and
    // R_old is at hand, not rounded again. alpha = exp(m_old − m_new) = 2^(R_old − R_new)
    // rescales what was accumulated so far, from the same ROUNDED products as P (__fmul_ru:
    // not fused into an FFMA with the subtraction), so that ℓ and the LSE agree with the P
    // that the backward recomputes (docs/03_flash2.md, "The LSE must match the forward's P").
    float m_scaled[kM][2], alpha[kM][2];
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float block_max = fmaxf(acc_s[i][0][2 * h], acc_s[i][0][2 * h + 1]);
#pragma unroll
            for (int n = 1; n < Cfg::kNTiles; ++n)
                block_max = fmaxf(block_max, fmaxf(acc_s[i][n][2 * h], acc_s[i][n][2 * h + 1]));
            // The 4 lanes of the row; no other warp holds it (split-Q).
            block_max = fmaxf(block_max, __shfl_xor_sync(kFullWarp, block_max, 1));
            block_max = fmaxf(block_max, __shfl_xor_sync(kFullWarp, block_max, 2));
            // R = m·c rounded up, so that no P exceeds 1. A block that shows this row no key
            // (-inf, or NaN from NaN inputs, which fmaxf drops) leaves R as it was.
            const float r = fmaxf(row_max_scaled[i][h], __fmul_ru(block_max, scale_log2));
            // A row that has seen only masked keys keeps R = -inf; exponentiate against 0
            // then, so that every P is 2^-inf = 0 and no -inf - (-inf) = NaN appears.
            m_scaled[i][h] = r == -INFINITY ? 0.f : r;
            alpha[i][h] = fx_ex2(row_max_scaled[i][h] - m_scaled[i][h]);
            row_max_scaled[i][h] = r;
            row_sum[i][h] *= alpha[i][h];
        }
    // ---- P (softmax_exp), O rescaled, O += P·V ----
    softmax_exp<Cfg>(acc_s, row_sum, m_scaled, scale_log2);
    rescale_o_pv<Cfg, Element>(acc_o, acc_s, alpha, sV, la);

    /* END UNIT */
}

/* ---------------------------------------------------------------------------------
 * Epilogue helpers
 * ------------------------------------------------------------------------------ */

/* A causal block whose rows all see no key (seqlen_q > seqlen_k): O = 0, LSE = -inf. */
template <class Cfg, class Element>
__device__ __forceinline__ void write_empty_block(Element *O, int o_row_stride, float *LSE,
                                                  int rows_valid, int tid)
{
    const int rows = min(Cfg::kBlockM, rows_valid);
    for (int idx = tid; idx < rows * Cfg::kChunks; idx += Cfg::kNThreads) {
        const int row = idx / Cfg::kChunks, chunk = idx % Cfg::kChunks;
        *reinterpret_cast<uint4 *>(O + row * o_row_stride + chunk * kChunkElems) =
            make_uint4(0, 0, 0, 0);
    }
    for (int row = tid; row < rows; row += Cfg::kNThreads)
        LSE[row] = -INFINITY;
}

/* ---------------------------------------------------------------------------------
 * The kernel: one CTA per (Q block, query head, batch)
 *
 * The tensor maps are kernel parameters: a CUtensorMap must sit in parameter, constant
 * or global memory for cp.async.bulk.tensor to read it, and `const __grid_constant__`
 * keeps it in parameter space (its address may be taken without a copy to local memory).
 * ------------------------------------------------------------------------------ */

template <class Cfg, class Element, bool kCausal>
__global__ void __launch_bounds__(Cfg::kNThreads, Cfg::kMinBlocksPerSm)
    fwd_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ CUtensorMap tma_q,
               const __grid_constant__ CUtensorMap tma_k, const __grid_constant__ CUtensorMap tma_v,
               const __grid_constant__ CUtensorMap tma_o)
{
    extern __shared__ __align__(kSmemAlign) unsigned char smem_raw[];
    // The 128B swizzle needs 1024-byte aligned tiles; the runtime promises 16 bytes, so the
    // base is rounded up inside the kSmemAlign bytes of slack the launcher adds.
    unsigned char *smem_base =
        smem_raw + (kSmemAlign - fx_smem_addr(smem_raw) % kSmemAlign) % kSmemAlign;
    SharedStorage<Cfg> &smem = *reinterpret_cast<SharedStorage<Cfg> *>(smem_base);
    using Ops = ElementOps<Element>;
    constexpr int kM = Cfg::kMTiles;
    constexpr int kStages = Cfg::kStages;

    // ---- Block info: which rows, which heads, which K/V blocks ----
    const int m_block = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int head_kv = kv_head_of(head, p.q_per_kv, p.q_per_kv_mul);  // GQA
    const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
    const int rows_valid = p.seqlen_q - m_block * Cfg::kBlockM;  // Q rows of this block in range

    Element *O = static_cast<Element *>(p.o) + batch * p.o_batch_stride + head * p.o_head_stride +
                 (int64_t)m_block * Cfg::kBlockM * p.o_row_stride;
    float *LSE =
        p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q + (int64_t)m_block * Cfg::kBlockM;

    // K/V blocks [0, n_block_max) hold a key some row of this block sees. Causal early exit:
    // the blocks past the last row's diagonal are never loaded (FA2 §3.1.1).
    int n_block_max = (p.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
    if (kCausal) {
        const int last_row = m_block * Cfg::kBlockM + min(Cfg::kBlockM, rows_valid) - 1;
        const int keys_seen = last_row + 1 + p.seqlen_k - p.seqlen_q;
        n_block_max =
            keys_seen <= 0 ? 0 : min(n_block_max, (keys_seen + Cfg::kBlockN - 1) / Cfg::kBlockN);
    }
    if (n_block_max == 0) {
        write_empty_block<Cfg>(O, p.o_row_stride, LSE, rows_valid, tid);
        return;
    }
    // Blocks [0, n_block_unmasked) are wholly visible to every row of this block: no mask.
    int n_block_unmasked = p.seqlen_k / Cfg::kBlockN;
    if (kCausal) {
        const int keys_seen_first_row = m_block * Cfg::kBlockM + 1 + p.seqlen_k - p.seqlen_q;
        n_block_unmasked = min(n_block_unmasked, max(keys_seen_first_row, 0) / Cfg::kBlockN);
    }

    // ---- Barriers: one thread initialises them, the fence and bar.sync publish them ----
    const uint32_t sQ = fx_smem_addr(smem.Q);
    // Stage s of K is at sK0 + s·kStageBytes (arithmetic: an indexed array would be local memory).
    const uint32_t sK0 = fx_smem_addr(smem.K[0]), sV0 = fx_smem_addr(smem.V[0]);
    constexpr uint32_t kStageBytes = sizeof(smem.K[0]);
    const uint32_t q_full = fx_smem_addr(&smem.q_full);
    const uint32_t kv_full0 = fx_smem_addr(&smem.kv_full[0]);  // stage s: + s·kBarrierBytes
    constexpr uint32_t kBarrierBytes = sizeof(smem.kv_full[0]);
    // One elected thread issues every copy: a TMA is one instruction for a whole box, so
    // the other threads have nothing to add to it (their registers stay with the compute).
    const bool producer = tid == 0;
    if (producer) {
        // Count 1: the phase completes when the producer's one arrive.expect_tx has
        // arrived AND every byte it announced has landed (tx-count back to 0).
        fx_mbarrier_init(q_full, 1);
#pragma unroll
        for (int s = 0; s < kStages; ++s)
            fx_mbarrier_init(kv_full0 + s * kBarrierBytes, 1);
        // mbarrier.init is a generic-proxy write; the TMA unit signals the barriers through
        // the async proxy. This fence orders the inits before them (and the bar.sync below
        // before any other thread's wait).
        fx_fence_mbarrier_init();
    }
    __syncthreads();

    // ---- Prologue: Q, and the first kStages − 1 K/V blocks, in flight ----
    int n_block = n_block_max - 1;  // the masked blocks come first (largest n_block first)
    if (producer) {
        fx_mbarrier_arrive_expect_tx(q_full, sizeof(smem.Q));
        load_tile<Cfg, Cfg::kBlockM>(sQ, &tma_q, q_full, m_block * Cfg::kBlockM, head, batch);
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
            if (n_block - s < 0)
                break;
            const uint32_t bar = kv_full0 + s * kBarrierBytes;
            fx_mbarrier_arrive_expect_tx(bar, 2 * kStageBytes);  // K and V: one phase
            load_tile<Cfg, Cfg::kBlockN>(sK0 + s * kStageBytes, &tma_k, bar,
                                         (n_block - s) * Cfg::kBlockN, head_kv, batch);
            load_tile<Cfg, Cfg::kBlockN>(sV0 + s * kStageBytes, &tma_v, bar,
                                         (n_block - s) * Cfg::kBlockN, head_kv, batch);
        }
    }

    // ---- Accumulators: O unnormalized, the running row max m (as R = m·c rounded up, in
    // log2 units: attention_block) and row sum ℓ ----
    float acc_o[kM][Cfg::kDTiles][4];
    float row_max_scaled[kM][2], row_sum[kM][2];
#pragma unroll
    for (int i = 0; i < kM; ++i) {
#pragma unroll
        for (int d = 0; d < Cfg::kDTiles; ++d)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc_o[i][d][e] = 0.f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            row_max_scaled[i][h] = -INFINITY;
            row_sum[i][h] = 0.f;
        }
    }
    fx_mbarrier_wait_named(q_full, 0, "q_full",
                           0);  // Q is loaded once: its only phase has parity 0

    // ---- Mainloop: KV inner loop, a kStages-deep TMA ring ----
    // Block n_block is in stage `stage`, filled for the (fill count)-th time, whose parity
    // is `phase`: stages are used in order 0, 1, ..., kStages − 1, 0, ..., so the parity
    // of every stage's barrier flips each time the ring wraps around.
    for (int stage = 0, phase = 0; n_block >= 0; --n_block) {
        // Every warp is done with block n_block + 1 (the previous iteration): its stage,
        // the one the copy below refills, may be overwritten (write-after-read). One
        // bar.sync does it here, where every warp is also a consumer; an "empty" mbarrier
        // per stage (each warp arrives, the producer waits) makes warp 0 wait for the
        // slowest warp all the same, at the cost of kNWarps arrives and a wait loop per
        // block. Measured, that was no uniform win for the extra protocol (docs/04, "The
        // mbarrier protocol"); it pays once the producer is a warp of its own (stage 06).
        __syncthreads();
        /* ASSIGNMENT(kv_ring): refill the stage that block n_block + 1 used with block
         * n_block − (kStages − 1) (announce its bytes with expect_tx first), then wait until
         * block n_block has landed in stage `stage` (parity `phase`). */
        if (producer && n_block >= kStages - 1) {
            const int next = n_block - (kStages - 1);                 // kStages − 1 blocks ahead
            const int refill = stage == 0 ? kStages - 1 : stage - 1;  // block n_block + 1's
            const uint32_t bar = kv_full0 + refill * kBarrierBytes;
            fx_mbarrier_arrive_expect_tx(bar, 2 * kStageBytes);
            load_tile<Cfg, Cfg::kBlockN>(sK0 + refill * kStageBytes, &tma_k, bar,
                                         next * Cfg::kBlockN, head_kv, batch);
            load_tile<Cfg, Cfg::kBlockN>(sV0 + refill * kStageBytes, &tma_v, bar,
                                         next * Cfg::kBlockN, head_kv, batch);
        }
        // Block n_block has landed: the try_wait's acquire makes the TMA's bytes visible.
        fx_mbarrier_wait_named(kv_full0 + stage * kBarrierBytes, phase, "kv_full", stage);
        /* END ASSIGNMENT */
        const uint32_t sK = sK0 + stage * kStageBytes, sV = sV0 + stage * kStageBytes;
        if (n_block >= n_block_unmasked)
            attention_block<Cfg, Element, kCausal, true>(acc_o, row_max_scaled, row_sum, sQ, sK, sV,
                                                         n_block, m_block, p.seqlen_q, p.seqlen_k,
                                                         p.scale_log2);
        else
            attention_block<Cfg, Element, kCausal, false>(acc_o, row_max_scaled, row_sum, sQ, sK,
                                                          sV, n_block, m_block, p.seqlen_q,
                                                          p.seqlen_k, p.scale_log2);
        /* ASSIGNMENT(kv_ring): advance to the next stage of the ring; when it wraps, every
         * stage's barrier is in its next phase. */
        if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
        }
        /* END ASSIGNMENT */
    }

    /* UNIT(finalize) */
    // ---- Epilogue: ℓ over the row, O /= ℓ once (FA2 Algorithm 1, line 12), LSE ----
    float lse[kM][2];
    bool in_range = true;  // every row of this lane within the fast path's range
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float l = row_sum[i][h];
            l += __shfl_xor_sync(kFullWarp, l, 1);
            l += __shfl_xor_sync(kFullWarp, l, 2);
            // The last block's R (0 for a row that saw no key): ℓ is relative to it, and the
            // LSE is R·ln 2 + ln ℓ. In range: |R| below FX_SOFTMAX_FAST_BELOW, ℓ finite (NaN
            // fails too).
            const float r = row_max_scaled[i][h] == -INFINITY ? 0.f : row_max_scaled[i][h];
            in_range = in_range && fabsf(r) < FX_SOFTMAX_FAST_BELOW && l < INFINITY;
            // ℓ = 0 only for a row that saw no key: O = 0 and LSE = -inf there, never NaN.
            // A NaN ℓ (NaN inputs) gets LSE = -inf too, as in FlashAttention; O stays NaN.
            const bool empty = (l == 0.f || l != l);
            const float inv_l = empty ? 0.f : 1.f / l;
            lse[i][h] = empty ? -INFINITY : r * FX_LN2 + logf(l);
#pragma unroll
            for (int d = 0; d < Cfg::kDTiles; ++d) {
                acc_o[i][d][2 * h] *= inv_l;
                acc_o[i][d][2 * h + 1] *= inv_l;
            }
        }
    // A row of this warp out of the fast path's range: the warp computes its rows again on
    // the exact path (common/fx_exact_rows.cuh) and stores them itself, instead of what
    // follows.
    if (__any_sync(kFullWarp, !in_range)) {
        const int row_begin = m_block * Cfg::kBlockM + warp * Cfg::kRowsPerWarp;
        fx_exact_rows<Element>(
            fx_exact_rows_view(p, batch, head, Cfg::kHeadDim, Cfg::kHeadDim, kCausal), row_begin,
            min(row_begin + Cfg::kRowsPerWarp, p.seqlen_q));
        return;
    }
    /* END UNIT */

    // O goes through shared memory, in Q's swizzled slabs, and leaves by TMA stores. A
    // warp writes only its own rows of the Q tile, which only it has read: __syncwarp
    // before (its lanes are done reading Q) and after (the rows are written) suffices.
    __syncwarp();
    // Lane (g, t) writes columns 8d+2t, 8d+2t+1 of rows g, g+8: 4 bytes at byte 4t of
    // chunk d of the row; rows g = 0..7 put chunk d in 8 different bank groups.
    const int local_row0 = warp * Cfg::kRowsPerWarp + lane / kLanesPerRow;
    const int byte_in_chunk = (lane % kLanesPerRow) * (2 * kElemBytes);
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = local_row0 + i * kMmaM + h * (kMmaM / 2);
#pragma unroll
            for (int d = 0; d < Cfg::kDTiles; ++d)
                *reinterpret_cast<uint32_t *>(reinterpret_cast<unsigned char *>(smem.Q) +
                                              swizzled_offset<Cfg::kBlockM>(r, d) + byte_in_chunk) =
                    Ops::pack(acc_o[i][d][2 * h], acc_o[i][d][2 * h + 1]);
        }
    // The TMA store reads shared memory through the async proxy, which is not ordered
    // with the generic-proxy st.shared above: every writer fences, then the warp syncs,
    // then one lane issues. (The Q bytes these stores overwrite came from TMA, i.e. the
    // async proxy, but the q_full wait already ordered them before any generic access.)
    fx_fence_proxy_async_smem();
    __syncwarp();
    if (lane == 0) {
        // The warp's kRowsPerWarp rows of each slab: a box {64, 1, kRowsPerWarp, 1}. Rows
        // at or past seqlen_q are outside the map and not written (TMA clips the box).
        // The warp's rows start at a multiple of 8 rows, i.e. of 1024 bytes, so the
        // swizzle that the store undoes is the one written above.
        const uint32_t sO = sQ + warp * Cfg::kRowsPerWarp * Cfg::kSmemRowBytes;
#pragma unroll
        for (int slab = 0; slab < Cfg::kSlabs; ++slab)
            fx_tma_store_4d(&tma_o, sO + slab * Cfg::kSlabBytesQ, slab * kSwizzleRowElems, head,
                            m_block * Cfg::kBlockM + warp * Cfg::kRowsPerWarp, batch);
        fx_tma_store_commit();
    }
    // LSE: lane t = 0 of each row writes it.
    if (lane % kLanesPerRow == 0) {
#pragma unroll
        for (int i = 0; i < kM; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = local_row0 + i * kMmaM + h * (kMmaM / 2);
                if (r < rows_valid)
                    LSE[r] = lse[i][h];
            }
    }
    // The CTA's shared memory must outlive the stores' reads of it (the writes to global
    // complete on their own).
    if (lane == 0)
        fx_tma_store_wait_read<0>();
}

/* ---------------------------------------------------------------------------------
 * Host launcher
 * ------------------------------------------------------------------------------ */

/* The request for one tensor's map: [batch, seqlen, heads, head_dim] with boxes of
 * box_rows × 64 columns, 128B swizzle (fx_tma_tiled_qkv). */
fx_tma_tiled tma_request(const void *base, const fx_problem *pr, fx_layout l, int seqlen, int heads,
                         int box_rows)
{
    return fx_tma_tiled_qkv(base, pr->dtype, l, pr->batch, seqlen, heads, pr->head_dim,
                            (uint32_t)box_rows, (uint32_t)kSwizzleRowElems);
}

/* Encodes one map; the reason of a failure goes to stderr (the cudaError alone would not
 * name it). No driver (FX_TMA_NO_DRIVER) cannot happen once a device was opened. */
cudaError_t encode(CUtensorMap *map, const char *name, const fx_tma_tiled *t)
{
    char why[256];
    const int rc = fx_tma_encode_tiled(map, t, why, sizeof why);
    if (rc == FX_TMA_OK)
        return cudaSuccess;
    fx_error("the tensor map of %s: %s", name, why);
    return rc == FX_TMA_NO_DRIVER ? cudaErrorInsufficientDriver : cudaErrorInvalidValue;
}

template <class Cfg, class Element, bool kCausal>
cudaError_t launch(const fx_fwd_args *a)
{
    const fx_problem *pr = a->p;
    FwdParams p;
    p.o = a->o;
    p.lse = a->lse;
    p.q = a->q;
    p.k = a->k;
    p.v = a->v;
    p.o_batch_stride = a->o_layout.batch_stride;
    p.o_row_stride = (int)a->o_layout.row_stride;
    p.o_head_stride = a->o_layout.head_stride;
    p.q_batch_stride = a->q_layout.batch_stride;
    p.q_row_stride = (int)a->q_layout.row_stride;
    p.q_head_stride = a->q_layout.head_stride;
    p.k_batch_stride = a->k_layout.batch_stride;
    p.k_row_stride = (int)a->k_layout.row_stride;
    p.k_head_stride = a->k_layout.head_stride;
    p.v_batch_stride = a->v_layout.batch_stride;
    p.v_row_stride = (int)a->v_layout.row_stride;
    p.v_head_stride = a->v_layout.head_stride;
    p.seqlen_q = pr->seqlen_q;
    p.seqlen_k = pr->seqlen_k;
    p.heads_q = pr->heads_q;
    p.q_per_kv = pr->heads_q / pr->heads_kv;
    p.q_per_kv_mul = (uint32_t)((1ull << 32) / (uint64_t)p.q_per_kv + 1);  // unused when 1
    p.softmax_scale = (float)pr->softmax_scale;
    p.scale_log2 = (float)(pr->softmax_scale * M_LOG2E);

    // Boxes: Q a whole Q block, K and V a K/V block, O one warp's rows (the stores are
    // per warp). K and V are mapped over heads_kv: GQA is the coordinate kv_head_of(head).
    CUtensorMap tma_q, tma_k, tma_v, tma_o;
    const fx_tma_tiled tq =
        tma_request(a->q, pr, a->q_layout, pr->seqlen_q, pr->heads_q, Cfg::kBlockM);
    const fx_tma_tiled tk =
        tma_request(a->k, pr, a->k_layout, pr->seqlen_k, pr->heads_kv, Cfg::kBlockN);
    const fx_tma_tiled tv =
        tma_request(a->v, pr, a->v_layout, pr->seqlen_k, pr->heads_kv, Cfg::kBlockN);
    const fx_tma_tiled to =
        tma_request(a->o, pr, a->o_layout, pr->seqlen_q, pr->heads_q, Cfg::kRowsPerWarp);
    cudaError_t err;
    if ((err = encode(&tma_q, "Q", &tq)) != cudaSuccess ||
        (err = encode(&tma_k, "K", &tk)) != cudaSuccess ||
        (err = encode(&tma_v, "V", &tv)) != cudaSuccess ||
        (err = encode(&tma_o, "O", &to)) != cudaSuccess)
        return err;

    const size_t smem_bytes = smem_bytes_of<Cfg>();
    auto kernel = fwd_kernel<Cfg, Element, kCausal>;
    // Past 48 KiB of dynamic shared memory a kernel must opt in.
    err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes);
    if (err != cudaSuccess)
        return err;
    const dim3 grid((unsigned)((pr->seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM),
                    (unsigned)pr->heads_q, (unsigned)pr->batch);
    kernel<<<grid, Cfg::kNThreads, smem_bytes, a->stream>>>(p, tma_q, tma_k, tma_v, tma_o);
    return cudaGetLastError();
}

template <class Cfg, class Element>
cudaError_t launch_masking(const fx_fwd_args *a)
{
    return a->p->causal ? launch<Cfg, Element, true>(a) : launch<Cfg, Element, false>(a);
}

template <class Cfg>
cudaError_t launch_dtype(const fx_fwd_args *a)
{
    switch (a->p->dtype) {
    case FX_BF16: return launch_masking<Cfg, __nv_bfloat16>(a);
    case FX_FP16: return launch_masking<Cfg, __half>(a);
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace

/* The dynamic shared memory one CTA needs at this head_dim; 0 for a head_dim the stage does
 * not build. */
extern "C" size_t FX_ENTRY(fwd_smem_bytes)(int head_dim)
{
    switch (head_dim) {
    case 64: return smem_bytes_of<ConfigD64>();
    case 128: return smem_bytes_of<ConfigD128>();
    case 256: return smem_bytes_of<ConfigD256>();
    default: return 0;
    }
}

extern "C" cudaError_t FX_ENTRY(fwd)(const fx_fwd_args *a)
{
    switch (a->p->head_dim) {
    case 64: return launch_dtype<ConfigD64>(a);
    case 128: return launch_dtype<ConfigD128>(a);
    case 256: return launch_dtype<ConfigD256>(a);
    default: return cudaErrorInvalidValue;
    }
}
