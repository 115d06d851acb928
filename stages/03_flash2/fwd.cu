/*
 * fwd.cu — stage 03: the FlashAttention-2 forward on tensor cores.
 *
 * Over stage 02 (FA1: KV-block outer loop, O, m and ℓ round-tripping HBM, fp32 CUDA
 * cores) this stage swaps the loops: one CTA owns a block of kBlockM query rows for its
 * whole life and streams every K/V block past it, so O, m and ℓ never leave registers
 * (FA2 Algorithm 1). Inside the CTA the Q block is split between warps ("split-Q",
 * FA2 §3.3): a warp owns its rows outright, so the row max and row sum are reduced over
 * the 4 lanes that share a row and never across warps. The 1/ℓ division is deferred to
 * the epilogue (FA2 §3.1) and the LSE is stored for the backward. Both GEMMs run on
 * tensor cores with mma.sync m16n8k16 fed by ldmatrix, K/V tiles arrive by cp.async into
 * a two-stage ring, P goes from the S accumulator to the PV A operand in registers, and
 * a causal CTA skips the K/V blocks wholly above the diagonal (FA2 §3.1.1). The gain
 * over stage 02 and the comparison with FlashAttention-2 itself: docs/03_flash2.md,
 * "Measured". The backward is in bwd.cu, what both share in traits.cuh.
 *
 * Sources: Tri Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work
 * Partitioning" (2023), Algorithm 1, §3.1-3.3; PTX ISA "mma" (m16n8k16 fragments),
 * "ldmatrix", "cp.async", "ex2", "cvt" — the wrappers are in common/ptx/mma_sm80.cuh.
 *
 * Layouts (fx_problem.h): Q, O [batch, seqlen_q, heads_q, head_dim]; K, V [batch,
 * seqlen_k, heads_kv, head_dim]; LSE fp32 [batch, heads_q, seqlen_q], natural log.
 * Query head h reads kv head h / (heads_q / heads_kv). Causal is bottom-right aligned:
 * row i sees key j iff j <= i + seqlen_k - seqlen_q. A row that sees no key gets
 * O = 0 and LSE = -inf.
 */
#include "fx_exact_rows.cuh"
#include "model.h"
#include "traits.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ---------------------------------------------------------------------------------
 * Compile-time configuration
 * ------------------------------------------------------------------------------ */

// Two K/V stages: block n_block − 1 is copied while block n_block is computed.
constexpr int kStages = 2;

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kMinBlocksPerSm_>
struct Config {
    static constexpr int kHeadDim = kHeadDim_;
    static constexpr int kBlockM = kBlockM_;  // query rows per CTA
    static constexpr int kBlockN = kBlockN_;  // keys per K/V block
    static constexpr int kNWarps = kNWarps_;
    static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;  // CTAs per SM the smem plan allows
    static constexpr int kNThreads = kNWarps * kWarpSize;
    // Split-Q: warp w owns rows [w·kRowsPerWarp, (w+1)·kRowsPerWarp) of the Q block, as
    // kMTiles m16 tiles. With two tiles per warp every K or V fragment a warp loads by
    // ldmatrix feeds two mma (half the shared-memory traffic per FLOP of one tile).
    static constexpr int kRowsPerWarp = kBlockM / kNWarps;
    static constexpr int kMTiles = kRowsPerWarp / kMmaM;
    static constexpr int kNTiles = kBlockN / kMmaN;         // n8 tiles of a warp's S rows
    static constexpr int kDTiles = kHeadDim / kMmaN;        // n8 tiles of a warp's O rows
    static constexpr int kChunks = kHeadDim / kChunkElems;  // 16-byte chunks of a row in HBM
    // A shared-memory row is head_dim rounded up to whole 128-byte lines (64 elements), so
    // the XOR swizzle below never leaves its row; only head_dim 96 is padded (to 128).
    static constexpr int kSmemRowElems = ceil_div(kHeadDim, kSwizzleRowElems) * kSwizzleRowElems;
    static constexpr int kSmemChunks = kSmemRowElems / kChunkElems;
    static constexpr int kSmemRowBytes = kSmemRowElems * kElemBytes;

    static_assert(kRowsPerWarp % kMmaM == 0, "a warp owns whole m16 tiles");
    static_assert(kBlockN % (2 * kMmaN) == 0 && kHeadDim % (2 * kMmaN) == 0,
                  "ldmatrix.x4 loads n8 tiles in pairs");
    static_assert(kHeadDim % kMmaK == 0 && kBlockN % kMmaK == 0, "whole k16 steps");
    static_assert(kNThreads % kSmemChunks == 0, "a copy pass covers whole rows");
};

/*
 * The tile per head_dim. A thread holds kMTiles·(kNTiles + kDTiles)·4 fp32 accumulators
 * (S and O) beside its fragments, addresses and row statistics, within 255 registers;
 * ptxas schedules ldmatrix far ahead of the mma that use them, and at 192 accumulators
 * (FA2's own 128×64 tile for head_dim 128) it spilled, as it does for FA2. At most 160
 * accumulators compile without spills, so every tile below stays at or under 160. Shared
 * memory per CTA is (kBlockM + 2·kStages·kBlockN)·kSmemRowBytes.
 */
// d=64: 128×64, 4 warps of 32 rows: S 64 + O 64 accumulators (the 128×128 of FA2 would
// be S 128 + O 64 = 192). 48 KiB of smem; registers (≤ 255 × 128 threads) allow two CTAs
// (8 warps) per SM.
using ConfigD64 = Config<64, 128, 64, 4, 2>;
// d=96: 128×64, 4 warps of 32 rows: S 64 + O 96 = 160. Rows padded to 128 elements for
// the swizzle: 96 KiB, two CTAs per SM on Hopper (one on A100).
using ConfigD96 = Config<96, 128, 64, 4, 2>;
// d=128: 128×32, 4 warps of 32 rows: S 32 + O 128 = 160 (FA2's 128×64 is 192 and spills).
// Two m16 tiles per warp keep each K/V fragment feeding two mma; 64 KiB, two CTAs per SM.
// The price of kBlockN = 32 is twice the per-block work that does not scale with it:
// the barrier, the row-max shuffles and the O rescale.
using ConfigD128 = Config<128, 128, 32, 4, 2>;
// d=256: O alone is 16·256/32 = 128 registers per m16 tile, so a warp owns one tile:
// 128×64 with 8 warps of 16 rows (S 32 + O 128 = 160), FA2's tile. 192 KiB: one CTA of
// 8 warps per SM, Hopper only (A100 has 163 KiB per block). It is faster than 128×32
// (128 KiB, which A100 could run; docs/03_flash2.md, "Tiles per head_dim"): half the
// blocks, so half the barriers and O rescales per key.
using ConfigD256 = Config<256, 128, 64, 8, 1>;

/* ---------------------------------------------------------------------------------
 * Shared-memory plan
 *
 * Q [kBlockM rows], K and V [kStages][kBlockN rows], each row kSmemRowBytes.
 * Swizzle, not padding: chunk c of row r is stored at chunk c ^ (r % 8) of that row.
 *  - ldmatrix reads one chunk from each of 8 consecutive rows (one 8×8 matrix per
 *    8 lanes); with the XOR those 8 chunks sit in 8 different 16-byte bank groups, so
 *    the read takes one pass over the 32 banks instead of 8.
 *  - cp.async writes 16 bytes per lane; 8 consecutive lanes write the 8 chunks of one
 *    128-byte line of one row (the copy loop gives a row kSmemChunks lanes), and the
 *    XOR only permutes chunks within that line: no conflict either.
 * Padding (a row of kHeadDim + 8 elements) would also serve ldmatrix, but a quarter-warp
 * of cp.async that straddles two rows then conflicts whenever head_dim/8 is not a
 * multiple of 8 (d=96), and it is the XOR pattern that TMA's 128-byte swizzle uses in
 * stage 04, so a reader meets it here first.
 * ------------------------------------------------------------------------------ */

template <class Cfg>
struct SharedStorage {
    alignas(kSmemAlign) uint16_t Q[Cfg::kBlockM * Cfg::kSmemRowElems];
    alignas(kSmemAlign) uint16_t K[kStages][Cfg::kBlockN * Cfg::kSmemRowElems];
    alignas(kSmemAlign) uint16_t V[kStages][Cfg::kBlockN * Cfg::kSmemRowElems];
};

static_assert(sizeof(SharedStorage<ConfigD64>) <= kMaxSmemPerBlockHopper, "d=64 smem");
static_assert(sizeof(SharedStorage<ConfigD96>) <= kMaxSmemPerBlockHopper, "d=96 smem");
static_assert(sizeof(SharedStorage<ConfigD128>) <= kMaxSmemPerBlockHopper, "d=128 smem");
static_assert(sizeof(SharedStorage<ConfigD256>) <= kMaxSmemPerBlockHopper, "d=256 smem");
static_assert(2 * sizeof(SharedStorage<ConfigD128>) <= kMaxSmemPerBlockHopper,
              "d=128: two CTAs per SM");
static_assert(2 * sizeof(SharedStorage<ConfigD96>) <= kMaxSmemPerBlockHopper,
              "d=96: two CTAs per SM");

/* ---------------------------------------------------------------------------------
 * Kernel arguments
 * ------------------------------------------------------------------------------ */

struct FwdParams {
    const void *q, *k, *v;
    void *o;
    float *lse;
    // Element strides (head_dim is contiguous). Rows step by 32-bit strides: every tensor
    // has fewer than 2^31 elements (fx_problem_validate).
    int64_t q_batch_stride, q_head_stride;
    int64_t k_batch_stride, k_head_stride;
    int64_t v_batch_stride, v_head_stride;
    int64_t o_batch_stride, o_head_stride;
    int q_row_stride, k_row_stride, v_row_stride, o_row_stride;
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
 * (with `head / q_per_kv` the forward spills at head_dim 96 and 256, ptxas for sm_90);
 * the multiply-high stays CTA-uniform.
 */
__device__ __forceinline__ int kv_head_of(int head, int q_per_kv, uint32_t q_per_kv_mul)
{
    return q_per_kv == 1 ? head : (int)__umulhi((uint32_t)head, q_per_kv_mul);
}

/* ---------------------------------------------------------------------------------
 * Producer: global -> shared by cp.async
 * ------------------------------------------------------------------------------ */

/* load_tile (traits.cuh) copies a tile: the forward and the backward share it. */

/* ---------------------------------------------------------------------------------
 * Consumer: one K/V block — S = QKᵀ, mask, online softmax, O += PV
 * ------------------------------------------------------------------------------ */

/* Byte offset of k16 step (or n16 pair) `step` of a swizzled row for a lane whose XOR key
 * (·16 bytes) is `key`: the step's two chunks inside their 128-byte line are XORed with
 * the key; whole lines are added, so the compiler keeps at most four XORed values alive
 * and folds the rest into the instruction's immediate offset. */
constexpr int kLineBytes = kSwizzleChunks * kChunkBytes;  // 128
constexpr int kStepsPerLine = kSwizzleChunks / 2;         // k16 steps per line
__device__ __forceinline__ uint32_t swizzled_step(int step, uint32_t key)
{
    return (((step % kStepsPerLine) * 2 * kChunkBytes) ^ key) + (step / kStepsPerLine) * kLineBytes;
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
 * lane's swizzled V row: V's rows are whole 128-byte-swizzled rows here (cp.async). Cfg is
 * unused here; stage 04's v_step, called the same way, takes its slab size from it. */
template <class Cfg>
__device__ __forceinline__ uint32_t v_step(int step, uint32_t key)
{
    return swizzled_step(step, key);
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
            fx_ldmatrix_x4(a[i], la.q + i * kTileRowBytes + swizzled_step(kk, la.key_a));
#pragma unroll
        for (int np = 0; np < Cfg::kNTiles / 2; ++np) {
            uint32_t b[4];
            fx_ldmatrix_x4(b, sK + la.k_row + np * kTileRowBytes + swizzled_step(kk, la.key_b));
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
 * ------------------------------------------------------------------------------ */

template <class Cfg, class Element, bool kCausal>
__global__ void __launch_bounds__(Cfg::kNThreads, Cfg::kMinBlocksPerSm)
    fwd_kernel(const __grid_constant__ FwdParams p)
{
    extern __shared__ __align__(kSmemAlign) unsigned char smem_raw[];
    SharedStorage<Cfg> &smem = *reinterpret_cast<SharedStorage<Cfg> *>(smem_raw);
    using Ops = ElementOps<Element>;
    constexpr int kM = Cfg::kMTiles;

    // ---- Block info: which rows, which heads, which K/V blocks ----
    const int m_block = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int head_kv = kv_head_of(head, p.q_per_kv, p.q_per_kv_mul);  // GQA
    const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
    const int rows_valid = p.seqlen_q - m_block * Cfg::kBlockM;  // Q rows of this block in range

    const Element *Q = static_cast<const Element *>(p.q) + batch * p.q_batch_stride +
                       head * p.q_head_stride + (int64_t)m_block * Cfg::kBlockM * p.q_row_stride;
    const Element *K =
        static_cast<const Element *>(p.k) + batch * p.k_batch_stride + head_kv * p.k_head_stride;
    const Element *V =
        static_cast<const Element *>(p.v) + batch * p.v_batch_stride + head_kv * p.v_head_stride;
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

    // ---- Prologue: Q and the last K/V block in flight as one cp.async group ----
    const uint32_t sQ = fx_smem_addr(smem.Q);
    // Stage s of K is at sK0 + s·kStageBytes (arithmetic: an indexed array would be local memory).
    const uint32_t sK0 = fx_smem_addr(smem.K[0]), sV0 = fx_smem_addr(smem.V[0]);
    constexpr uint32_t kStageBytes = sizeof(smem.K[0]);
    int n_block = n_block_max - 1;  // the masked blocks come first (largest n_block first)
    load_tile<Cfg, Cfg::kBlockM, true>(sQ, Q, p.q_row_stride, rows_valid);
    load_tile<Cfg, Cfg::kBlockN, true>(sK0, K + (int64_t)n_block * Cfg::kBlockN * p.k_row_stride,
                                       p.k_row_stride, p.seqlen_k - n_block * Cfg::kBlockN);
    load_tile<Cfg, Cfg::kBlockN, true>(sV0, V + (int64_t)n_block * Cfg::kBlockN * p.v_row_stride,
                                       p.v_row_stride, p.seqlen_k - n_block * Cfg::kBlockN);
    fx_cp_async_commit();

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

    // ---- Mainloop: KV inner loop, two-stage cp.async ring ----
    for (int stage = 0; n_block >= 0; --n_block, stage ^= 1) {
        // Block n_block (one group) has landed for this thread; the barrier makes every
        // thread's copies visible and proves that all warps are done with block
        // n_block + 1, whose stage the next copy overwrites.
        fx_cp_async_wait<0>();
        __syncthreads();
        if (n_block > 0) {
            // Only the last block can end inside seqlen_k, and the prologue loaded it: the
            // blocks fetched here are whole, so their copies test no rows.
            const int next = n_block - 1;
            load_tile<Cfg, Cfg::kBlockN, false>(sK0 + (stage ^ 1) * kStageBytes,
                                                K + (int64_t)next * Cfg::kBlockN * p.k_row_stride,
                                                p.k_row_stride, Cfg::kBlockN);
            load_tile<Cfg, Cfg::kBlockN, false>(sV0 + (stage ^ 1) * kStageBytes,
                                                V + (int64_t)next * Cfg::kBlockN * p.v_row_stride,
                                                p.v_row_stride, Cfg::kBlockN);
            fx_cp_async_commit();
        }
        const uint32_t sK = sK0 + stage * kStageBytes, sV = sV0 + stage * kStageBytes;
        if (n_block >= n_block_unmasked)
            attention_block<Cfg, Element, kCausal, true>(acc_o, row_max_scaled, row_sum, sQ, sK, sV,
                                                         n_block, m_block, p.seqlen_q, p.seqlen_k,
                                                         p.scale_log2);
        else
            attention_block<Cfg, Element, kCausal, false>(acc_o, row_max_scaled, row_sum, sQ, sK,
                                                          sV, n_block, m_block, p.seqlen_q,
                                                          p.seqlen_k, p.scale_log2);
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

    // O goes through shared memory so that HBM sees whole 16-byte chunks of a row. A warp
    // writes only its own rows of the Q tile, which only it has read: __syncwarp before
    // (its lanes are done reading Q) and after (the rows are written) suffices.
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
                                              swizzled_offset<Cfg>(r, d) + byte_in_chunk) =
                    Ops::pack(acc_o[i][d][2 * h], acc_o[i][d][2 * h + 1]);
        }
    __syncwarp();
    {
        constexpr int kRowsPerCopy = kWarpSize / Cfg::kSmemChunks;  // rows per warp pass
        static_assert(Cfg::kRowsPerWarp % kRowsPerCopy == 0, "whole copy passes");
        const int chunk = lane % Cfg::kSmemChunks;
        if (chunk < Cfg::kChunks) {
#pragma unroll
            for (int pass = 0; pass < Cfg::kRowsPerWarp / kRowsPerCopy; ++pass) {
                const int r =
                    warp * Cfg::kRowsPerWarp + lane / Cfg::kSmemChunks + pass * kRowsPerCopy;
                if (r < rows_valid)
                    *reinterpret_cast<uint4 *>(O + r * p.o_row_stride + chunk * kChunkElems) =
                        *reinterpret_cast<const uint4 *>(
                            reinterpret_cast<const unsigned char *>(smem.Q) +
                            swizzled_offset<Cfg>(r, chunk));
            }
        }
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
}

/* ---------------------------------------------------------------------------------
 * Host launcher
 * ------------------------------------------------------------------------------ */

template <class Cfg, class Element, bool kCausal>
cudaError_t launch(const fx_fwd_args *a)
{
    const fx_problem *pr = a->p;
    FwdParams p;
    p.q = a->q;
    p.k = a->k;
    p.v = a->v;
    p.o = a->o;
    p.lse = a->lse;
    set_strides(p, a->q_layout, a->k_layout, a->v_layout, a->o_layout);
    p.seqlen_q = pr->seqlen_q;
    p.seqlen_k = pr->seqlen_k;
    p.heads_q = pr->heads_q;
    p.q_per_kv = pr->heads_q / pr->heads_kv;
    p.q_per_kv_mul = (uint32_t)((1ull << 32) / (uint64_t)p.q_per_kv + 1);  // unused when 1
    p.softmax_scale = (float)pr->softmax_scale;
    p.scale_log2 = (float)(pr->softmax_scale * M_LOG2E);

    const size_t smem_bytes = sizeof(SharedStorage<Cfg>);
    auto kernel = fwd_kernel<Cfg, Element, kCausal>;
    // Past 48 KiB of dynamic shared memory a kernel must opt in.
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes);
    if (err != cudaSuccess)
        return err;
    const dim3 grid((unsigned)((pr->seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM),
                    (unsigned)pr->heads_q, (unsigned)pr->batch);
    kernel<<<grid, Cfg::kNThreads, smem_bytes, a->stream>>>(p);
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

template <class Cfg>
fx_tiles_03 tiles_of(void)
{
    fx_tiles_03 t;
    t.block_m = Cfg::kBlockM;
    t.block_n = Cfg::kBlockN;
    return t;
}

}  // namespace

/* The forward's kBlockM × kBlockN per head_dim (model.h), for the CPU model and its tests;
 * {0, 0} for a head_dim the stage does not build. */
extern "C" fx_tiles_03 fx_fwd_tiles_03(int head_dim)
{
    fx_tiles_03 t = {0, 0};
    switch (head_dim) {
    case 64: return tiles_of<ConfigD64>();
    case 96: return tiles_of<ConfigD96>();
    case 128: return tiles_of<ConfigD128>();
    case 256: return tiles_of<ConfigD256>();
    default: return t;
    }
}

/* The forward's dynamic shared memory per CTA in bytes at head_dim (0 for a head_dim the
 * stage does not build): stage.c holds it against the GPU's opt-in limit. */
extern "C" size_t fx_fwd_smem_bytes_03(int head_dim)
{
    switch (head_dim) {
    case 64: return sizeof(SharedStorage<ConfigD64>);
    case 96: return sizeof(SharedStorage<ConfigD96>);
    case 128: return sizeof(SharedStorage<ConfigD128>);
    case 256: return sizeof(SharedStorage<ConfigD256>);
    default: return 0;
    }
}

/* Enqueues the forward on a->stream: O (dtype) and LSE from Q, K, V; returns the launch
 * error, or cudaErrorMisalignedAddress for a tensor the 16-byte copies cannot read. */
extern "C" cudaError_t fx_fwd_03(const fx_fwd_args *a)
{
    if (!aligned_for_chunks(a->q, &a->q_layout) || !aligned_for_chunks(a->k, &a->k_layout) ||
        !aligned_for_chunks(a->v, &a->v_layout) || !aligned_for_chunks(a->o, &a->o_layout))
        return cudaErrorMisalignedAddress;
    switch (a->p->head_dim) {
    case 64: return launch_dtype<ConfigD64>(a);
    case 96: return launch_dtype<ConfigD96>(a);
    case 128: return launch_dtype<ConfigD128>(a);
    case 256: return launch_dtype<ConfigD256>(a);
    default: return cudaErrorInvalidValue;
    }
}
