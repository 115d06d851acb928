/*
 * fwd.cu — stage 05: the forward on Hopper's warpgroup tensor cores (FA3 §2.2, §3).
 *
 * Over stage 04 the GEMMs change, not how Q, K and V arrive: a warpgroup (4 warps) issues
 * asynchronous wgmma for its 64 rows of the Q block. S = Q·Kᵀ is an SS wgmma that reads both
 * operands straight from the TMA-written swizzled tiles through matrix descriptors; O += P·V
 * is an RS wgmma with P in registers and V read MN-major. Thread 0 also issues every TMA load
 * into a full/empty mbarrier ring. docs/05_wgmma.md draws the layouts and gives the gain.
 *
 * The shape every Hopper forward keeps (stage 05 settles it): the pipeline state, the block
 * range and mask, the softmax state, the named barriers, the epilogue, and a mainloop split
 * into masked and unmasked blocks. Code marked UNIT(name) is inherited verbatim from the
 * stage that introduced it (tests/shape/check_units.sh compares the copies).
 *
 * Sources: FA3 §3.1; FA2 Algorithm 1 (the online softmax); PTX ISA §9.7.15 (wgmma: fragments
 * §9.7.15.5.1.1, descriptors §9.7.15.5.1.2, fence/commit/wait §9.7.15.7).
 * Layouts, the other sources and what the Hopper forwards share: common/fx_fwd_sm90.cuh.
 */
#include "fx_fwd_sm90.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ---------------------------------------------------------------------------------
 * Compile-time configuration
 * ------------------------------------------------------------------------------ */

template <int kHeadDim_, int kNumConsumers_, int kBlockN_, int kStages_>
struct Config {
    static constexpr int kHeadDim = kHeadDim_;
    static constexpr int kNumConsumers = kNumConsumers_;     // consumer warpgroups
    static constexpr int kBlockM = kNumConsumers * kWgmmaM;  // query rows per CTA
    static constexpr int kBlockN = kBlockN_;                 // keys per K/V block
    static constexpr int kStages = kStages_;                 // K/V ring depth
    // K's release: true, after the S GEMM on k_empty, a softmax and a PV GEMM before V's on
    // v_empty, so that a producer warpgroup can refill K meanwhile (stage 06 on); false, with
    // V's after the PV GEMM, on v_empty alone (stage 05: thread 0 refills only after its own
    // PV GEMM, and the extra arrival and wait per block measured slower, docs/05_wgmma.md).
    // It selects in load_kv and mainloop_step; 07's and later mainloops assume it true.
    static constexpr bool kReleaseKAfterS = false;
    static constexpr int kNThreads = kNumConsumers * kWarpgroupThreads;
    static constexpr int kNConsumerWarps = kNumConsumers * kWarpsPerWarpgroup;
    static constexpr int kSlabs = kHeadDim / kSlabCols;  // 64-column slabs per row
    // Per thread: S is m64 × kBlockN fp32 over 128 threads = kBlockN/2 registers, O is
    // kHeadDim/2, P (16-bit pairs) kBlockN/4 in kPFrags A fragments of 4.
    static constexpr int kAccS = kBlockN / 2;
    static constexpr int kAccO = kHeadDim / 2;
    static constexpr int kPFrags = kBlockN / kWgmmaK;
    static constexpr int kNTiles = kBlockN / 8;   // n8 column blocks of S per thread's row
    static constexpr int kDTiles = kHeadDim / 8;  // n8 column blocks of O
    static constexpr int kSlabQBytes = kBlockM * kSlabRowBytes;
    static constexpr int kSlabKVBytes = kBlockN * kSlabRowBytes;

    static_assert(kHeadDim % kSlabCols == 0, "head_dim is whole 64-column slabs");
    static_assert(kBlockN % kWgmmaK == 0 && kBlockN <= 256, "S is one wgmma of N = kBlockN");
    static_assert(kBlockM <= FX_TMA_MAX_BOX && kBlockN <= FX_TMA_MAX_BOX,
                  "a TMA box has at most 256 rows");
};

/*
 * The tiles. Each consumer thread holds S (kBlockN/2 registers), O (head_dim/2) and P
 * (kBlockN/4) beside its row statistics.
 *  - d=64: 3 consumer warpgroups, 192×128 (FA3's causal tile for head_dim 64): S 64 + O 32 +
 *    P 32; the third warpgroup adds a softmax to hide behind the others' wgmmas where the
 *    short head_dim makes each GEMM brief.
 *  - d=128: 2 consumer warpgroups, 128×128: S 64 + O 64 + P 32.
 *  - d=256: 2 consumer warpgroups, 128×64: S 32 + O 128 + P 16 (O dominates; a wider kBlockN
 *    would need S 64 more).
 * Registers: at one CTA per SM each thread may use 65536 / kNThreads, rounded down to a
 * multiple of 8 (255 at most): 255 at 2 warpgroups, 168 at 3.
 */
using ConfigD64 = Config<64, 3, 128, 2>;
using ConfigD128 = Config<128, 2, 128, 2>;
using ConfigD256 = Config<256, 2, 64, 2>;

/* ---------------------------------------------------------------------------------
 * Shared-memory plan: Q (also O's staging area in the epilogue), kStages K and V tiles,
 * each tile head_dim/64 slabs of rows × 128 bytes as TMA writes them with the 128B swizzle
 * (each slab on a 1024-byte boundary: the swizzle's period), then the mbarriers.
 * ------------------------------------------------------------------------------ */

template <class Cfg>
struct SharedStorage {
    alignas(kSwizzleAtomBytes) uint16_t q[Cfg::kBlockM * Cfg::kHeadDim];
    alignas(kSwizzleAtomBytes) uint16_t k[Cfg::kStages][Cfg::kBlockN * Cfg::kHeadDim];
    alignas(kSwizzleAtomBytes) uint16_t v[Cfg::kStages][Cfg::kBlockN * Cfg::kHeadDim];
    uint64_t q_full;                 // Q has landed (one phase: Q is loaded once)
    uint64_t k_full[Cfg::kStages];   // K of stage s has landed (one phase per fill)
    uint64_t v_full[Cfg::kStages];   // V of stage s has landed
    uint64_t k_empty[Cfg::kStages];  // kReleaseKAfterS: every consumer warp is done with K of s
    uint64_t v_empty[Cfg::kStages];  // ... with V of s (without kReleaseKAfterS: K and V)
};

/* Dynamic shared memory per CTA: the plan plus the slack for rounding the base up to the
 * swizzle atom (smem_base_aligned). */
template <class Cfg>
constexpr int kSmemBytes = (int)sizeof(SharedStorage<Cfg>) + kSwizzleAtomBytes;

static_assert(kSmemBytes<ConfigD64> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=64 fits a CTA's smem");
static_assert(kSmemBytes<ConfigD128> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=128 fits");
static_assert(kSmemBytes<ConfigD256> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=256 fits");

/* UNIT(named_barriers) */
/* Hardware named barriers (PTX ISA §9.7.13.1; id 0 is __syncthreads'), the threads that
 * meet at each. */
enum NamedBarrier : uint32_t {
    // + consumer (at most 3): one consumer warpgroup's threads before its TMA store of O.
    kBarrierEpilogue = 1,
};
constexpr uint32_t kEpilogueThreads = kWarpgroupThreads;
static_assert(ConfigD64::kNumConsumers <= 3 && ConfigD128::kNumConsumers <= 3 &&
                  ConfigD256::kNumConsumers <= 3,
              "at most 3 consumer warpgroups: the epilogue's barriers are ids 1-3");
/* END UNIT */

/* UNIT(descriptors) */
/* ---------------------------------------------------------------------------------
 * wgmma descriptors of the tiles (layouts: common/ptx/wgmma_desc.h)
 *
 * A tile of R rows × head_dim columns is head_dim/64 slabs of R × 128 bytes, each written
 * by one TMA box with 128B swizzle. For S = Q·Kᵀ (both K-major, K = head_dim), k16 slice kk
 * lies in slab kk/4 at byte 32·(kk%4) of every row: the descriptor's start address moves by
 * 32 bytes inside the swizzle atom (the hardware applies the XOR to the full address, which
 * is why every slab starts on 1024 bytes), and SBO = 1024 steps from 8 rows to the next 8.
 * For O = P·V, V is the MN-major B operand (N = head_dim contiguous); k16 slice kk is keys
 * 16kk..16kk+15: rows 16kk.. of every slab, 16 · 128 = 2048 bytes further; SBO = 1024 steps
 * from keys 0-7 to 8-15, LBO = slab bytes steps from head_dim columns 0-63 to 64-127 (read
 * when N = head_dim > 64).
 * ------------------------------------------------------------------------------ */

template <class Cfg>
__device__ __forceinline__ uint64_t desc_q(uint32_t sQ, int consumer, int kk)
{
    /* ASSIGNMENT(descriptors): the K-major descriptor of k16 slice kk of this consumer's 64
     * rows of Q (the layout is drawn above; fx_wgmma_desc_k_sw128 encodes it).
     * stub: return 0; */
    const uint32_t addr =
        sQ + (uint32_t)((kk / 4) * Cfg::kSlabQBytes + consumer * kWgmmaM * kSlabRowBytes +
                        (kk % 4) * FX_WGMMA_K16_STEP_K_MAJOR_BYTES);
    return fx_wgmma_desc_k_sw128(addr);
    /* END ASSIGNMENT */
}

template <class Cfg>
__device__ __forceinline__ uint64_t desc_k(uint32_t sK, int kk)
{
    /* ASSIGNMENT(descriptors): the K-major descriptor of k16 slice kk of the K tile.
     * stub: return 0; */
    const uint32_t addr =
        sK + (uint32_t)((kk / 4) * Cfg::kSlabKVBytes + (kk % 4) * FX_WGMMA_K16_STEP_K_MAJOR_BYTES);
    return fx_wgmma_desc_k_sw128(addr);
    /* END ASSIGNMENT */
}

template <class Cfg>
__device__ __forceinline__ uint64_t desc_v(uint32_t sV, int kk)
{
    /* ASSIGNMENT(descriptors): the MN-major descriptor of k16 slice kk (keys 16kk..16kk+15)
     * of the V tile, with the slab stride as LBO (fx_wgmma_desc_mn_sw128).
     * stub: return 0; */
    return fx_wgmma_desc_mn_sw128(sV + (uint32_t)(kk * FX_WGMMA_K16_STEP_MN_MAJOR_BYTES),
                                  (uint32_t)Cfg::kSlabKVBytes);
    /* END ASSIGNMENT */
}
/* END UNIT */

/* UNIT(pipeline_state) */
/* ---------------------------------------------------------------------------------
 * Pipeline state: where a K/V block is in the ring
 *
 * Blocks go through the stages in order 0, 1, .., kStages − 1, 0, ..; each fill of a stage
 * completes one phase of its full barrier, so the phase a waiter wants flips each time the
 * ring wraps around (mbarrier.try_wait.parity waits for the phase of that parity, PTX ISA
 * §9.7.13.15.16). Producer and consumers each keep one and advance it in this one place.
 * ------------------------------------------------------------------------------ */

struct PipelineState {
    int stage;       // which K/V buffer
    uint32_t phase;  // the parity of the phase its barriers complete for this block
};

template <int kStages>
__device__ __forceinline__ void advance(PipelineState &s)
{
    if (++s.stage == kStages) {
        s.stage = 0;
        s.phase ^= 1;
    }
}
/* END UNIT */

/* UNIT(loads) */
/* ---------------------------------------------------------------------------------
 * Producer: TMA loads of one tile, one box per 64-column slab
 * ------------------------------------------------------------------------------ */

/* Announces the tile's bytes on `bar`, then issues its head_dim/64 boxes at coordinates
 * {64·slab, head, row0, batch} of the map {head_dim, heads, seqlen, batch}. Rows past the
 * tensor's seqlen are zero-filled by TMA and still count as delivered bytes. */
template <class Cfg>
__device__ __forceinline__ void load_tile(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                          int rows, int head, int row0, int batch)
{
    fx_mbarrier_arrive_expect_tx(bar, (uint32_t)(rows * Cfg::kHeadDim * kElemBytes));
#pragma unroll
    for (int s = 0; s < Cfg::kSlabs; ++s)
        fx_tma_load_4d(dst + (uint32_t)(s * rows * kSlabRowBytes), map, bar, s * kSlabCols, head,
                       row0, batch);
}

/* K and V of block n_block into the ring at `write`. A refill (the second pass over the ring
 * on) first waits until every consumer warp has released the stage: its empty barriers' phase
 * for the pass before has the parity write.phase ^ 1. */
template <class Cfg>
__device__ __forceinline__ void load_kv(const FwdParams &p, SharedStorage<Cfg> &smem,
                                        PipelineState write, bool refill, int n_block, int head_kv,
                                        int batch)
{
    if (refill)
        fx_mbarrier_wait(fx_smem_addr(Cfg::kReleaseKAfterS ? &smem.k_empty[write.stage]
                                                           : &smem.v_empty[write.stage]),
                         write.phase ^ 1);
    load_tile<Cfg>(fx_smem_addr(smem.k[write.stage]), &p.tma_k,
                   fx_smem_addr(&smem.k_full[write.stage]), Cfg::kBlockN, head_kv,
                   n_block * Cfg::kBlockN, batch);
    if (refill && Cfg::kReleaseKAfterS)
        fx_mbarrier_wait(fx_smem_addr(&smem.v_empty[write.stage]), write.phase ^ 1);
    load_tile<Cfg>(fx_smem_addr(smem.v[write.stage]), &p.tma_v,
                   fx_smem_addr(&smem.v_full[write.stage]), Cfg::kBlockN, head_kv,
                   n_block * Cfg::kBlockN, batch);
}
/* END UNIT */

/* UNIT(block_range) */
/* ---------------------------------------------------------------------------------
 * Block range and mask
 * ------------------------------------------------------------------------------ */

/* The K/V blocks of Q block m_block: [0, n_block_max) hold a key some row of it sees (the
 * causal early exit); [0, n_block_unmasked) are seen whole by every row, so only blocks
 * [n_block_unmasked, n_block_max) need the mask (the causal diagonal, the seqlen_k tail). */
struct BlockRange {
    int n_block_max;
    int n_block_unmasked;
};

template <class Cfg, bool kCausal>
__device__ __forceinline__ BlockRange block_range(int m_block, int seqlen_q, int seqlen_k)
{
    BlockRange r;
    r.n_block_max = (seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
    r.n_block_unmasked = seqlen_k / Cfg::kBlockN;
    if (kCausal) {
        const int rows_valid = min(Cfg::kBlockM, seqlen_q - m_block * Cfg::kBlockM);
        const int keys_seen_last_row = m_block * Cfg::kBlockM + rows_valid + seqlen_k - seqlen_q;
        r.n_block_max =
            keys_seen_last_row <= 0
                ? 0
                : min(r.n_block_max, (keys_seen_last_row + Cfg::kBlockN - 1) / Cfg::kBlockN);
        const int keys_seen_first_row = m_block * Cfg::kBlockM + 1 + seqlen_k - seqlen_q;
        r.n_block_unmasked = min(r.n_block_unmasked, max(keys_seen_first_row, 0) / Cfg::kBlockN);
    }
    return r;
}
/* END UNIT */

/* UNIT(mask) */
/*
 * Accumulator layout of m64nNk16 (PTX ISA §9.7.15.5.1.1), per warp w of the warpgroup, lane
 * l (g = l/4, t = l%4): acc[4j + 2h + e] = D[16w + g + 8h][8j + 2t + e] — the n8 blocks of
 * an mma.sync m16n8k16 accumulator side by side: a lane holds 2 columns of rows g and g+8
 * per n8 block, and the row statistics are reduced over the 4 lanes t = 0..3.
 *
 * Sets S to -inf where this lane's rows (query row0 and row0 + 8) must not see the key: keys
 * at or past seqlen_k, and (causal) keys past row + seqlen_k − seqlen_q. col0 is this lane's
 * first key (n_block·kBlockN + 2t).
 */
template <class Cfg, bool kCausal>
__device__ __forceinline__ void apply_mask(float (&acc_s)[Cfg::kAccS], int row0, int col0,
                                           int seqlen_q, int seqlen_k)
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        int key_end = seqlen_k;  // keys [0, key_end) are visible to this row
        if (kCausal)
            key_end = min(key_end, row0 + 8 * h + 1 + seqlen_k - seqlen_q);
#pragma unroll
        for (int j = 0; j < Cfg::kNTiles; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                if (col0 + 8 * j + e >= key_end)
                    acc_s[4 * j + 2 * h + e] = -INFINITY;
    }
}
/* END UNIT */

/* UNIT(softmax) */
/* ---------------------------------------------------------------------------------
 * Softmax state: the online softmax of FA2 Algorithm 1 for this thread's two rows
 *
 * P = exp(S·scale − m·scale) = 2^(S·c − m·c), c = scale·log2(e), taken relative to the
 * reference R = m·c rounded up to fp32: one FFMA per score, 2^(fma(S, c, −R)), as
 * FlashAttention does, and since R >= m·c no P exceeds 1. Every P of a row carries the same
 * factor 2^(m·c − R) ∈ (2^−ulp(R), 1], which cancels in O = P·V / ℓ; the LSE is R·ln 2 + ln ℓ,
 * the LSE of the P computed, so that factor costs nothing either — while it is not so small
 * that the row's P vanish: below |R| = 2^24 (FX_SOFTMAX_FAST_BELOW) it is above 1/2, and far
 * past it (|m·c| ~ 2^31, logits that finite inputs reach) every P of the block is 0. Nothing
 * in the mainloop tests for it: softmax_finalize checks each row's last R once, and the
 * epilogue sends a warpgroup with a row out of range to the exact path (common/fx_exact_rows.cuh
 * says why one check after the loop suffices). The running max is kept as R itself: x -> x·c
 * rounded up is monotone for c > 0 (fx_problem_validate keeps softmax_scale in [2^-100,
 * 2^100]), so R_new = max(R_old, block max · c rounded up) is m_new·c rounded up. The
 * online rescale alpha = 2^(R_old − R_new) comes from the same rounded products as P, so ℓ and
 * the LSE agree with the P a backward recomputes (stage 03 measured why, docs/03_flash2.md
 * "The LSE must match the forward's P").
 * ------------------------------------------------------------------------------ */

struct SoftmaxState {
    float row_max_scaled[2];  // R of rows g and g + 8, m·c rounded up (-inf before any key)
    float row_sum[2];         // ℓ of this lane's columns only: reduced over the row at the end
    // Of the block between softmax_max and softmax_exp (the last block's after the loop):
    float m_scaled[2];  // R (0 for a row with no visible key yet), the reference of its P
    float alpha[2];  // 2^(R_old − R_new) ≈ exp(m_old − m_new), O's rescale (softmax_rescale_o)
};

__device__ __forceinline__ void softmax_init(SoftmaxState &sm)
{
    for (int h = 0; h < 2; ++h) {
        sm.row_max_scaled[h] = -INFINITY;
        sm.row_sum[h] = 0.f;
        sm.m_scaled[h] = 0.f;  // a tile with no block still passes softmax_finalize's check
    }
}

/* P = 2^(fma(S, c, −R)) in place, R = sm.m_scaled: one FFMA and one EX2 per score, and this
 * lane's part of ℓ. */
template <class Cfg>
__device__ __forceinline__ void softmax_exp(SoftmaxState &sm, float (&acc_s)[Cfg::kAccS],
                                            float scale_log2)
{
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < Cfg::kNTiles; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float p = fx_ex2(fmaf(acc_s[4 * j + 2 * h + e], scale_log2, -sm.m_scaled[h]));
                acc_s[4 * j + 2 * h + e] = p;
                sm.row_sum[h] += p;  // this lane's partial; reduced over the row at the end
            }
}

/* The online softmax of one block's S, first half: the row maxima, R and alpha into sm (ℓ
 * rescaled). softmax_exp is the second. */
template <class Cfg>
__device__ __forceinline__ void softmax_max(SoftmaxState &sm, const float (&acc_s)[Cfg::kAccS],
                                            float scale_log2)
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float block_max = fmaxf(acc_s[2 * h], acc_s[2 * h + 1]);
#pragma unroll
        for (int j = 1; j < Cfg::kNTiles; ++j)
            block_max = fmaxf(block_max, fmaxf(acc_s[4 * j + 2 * h], acc_s[4 * j + 2 * h + 1]));
        block_max = fmaxf(block_max, __shfl_xor_sync(kFullWarp, block_max, 1));
        block_max = fmaxf(block_max, __shfl_xor_sync(kFullWarp, block_max, 2));
        // R = m·c rounded up, so that no P exceeds 1. A block that shows this row no key
        // (-inf, or NaN from NaN inputs, which fmaxf drops) leaves R as it was.
        const float r = fmaxf(sm.row_max_scaled[h], __fmul_ru(block_max, scale_log2));
        // A row that has seen only masked keys keeps R = -inf: exponentiate against 0, so
        // every P is 0 and no -inf - (-inf) = NaN appears.
        sm.m_scaled[h] = r == -INFINITY ? 0.f : r;
        sm.alpha[h] = fx_ex2(sm.row_max_scaled[h] - sm.m_scaled[h]);
        sm.row_max_scaled[h] = r;
        sm.row_sum[h] *= sm.alpha[h];
    }
}

/* O *= alpha per row (the online softmax's rescale of what was accumulated so far). */
template <class Cfg>
__device__ __forceinline__ void softmax_rescale_o(float (&acc_o)[Cfg::kAccO],
                                                  const float (&alpha)[2])
{
#pragma unroll
    for (int d = 0; d < Cfg::kDTiles; ++d)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                acc_o[4 * d + 2 * h + e] *= alpha[h];
}

/* ℓ over the row (its 4 lanes), O /= ℓ once (FA2 Algorithm 1, line 12), and the LSE of the
 * two rows in natural-log units, R·ln 2 + ln ℓ (ℓ is relative to the last R). ℓ = 0 is a row
 * that saw no key: O = 0, LSE = -inf. A NaN ℓ
 * (NaN inputs) gets LSE = -inf too, as in FlashAttention; its O stays NaN (NaN · 0), so the
 * NaN is not hidden. Returns whether both rows are within the fast path's range — the last
 * |R| below FX_SOFTMAX_FAST_BELOW and ℓ finite (NaN and inf fail) — the one test of it. */
template <class Cfg>
__device__ __forceinline__ bool softmax_finalize(const SoftmaxState &sm, float (&acc_o)[Cfg::kAccO],
                                                 float (&lse)[2])
{
    bool in_range = true;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = sm.row_sum[h];
        l += __shfl_xor_sync(kFullWarp, l, 1);
        l += __shfl_xor_sync(kFullWarp, l, 2);
        in_range = in_range && fabsf(sm.m_scaled[h]) < FX_SOFTMAX_FAST_BELOW && l < INFINITY;
        const bool empty = (l == 0.f || l != l);
        const float inv_l = empty ? 0.f : 1.f / l;
        lse[h] = empty ? -INFINITY : sm.m_scaled[h] * FX_LN2 + logf(l);
#pragma unroll
        for (int d = 0; d < Cfg::kDTiles; ++d) {
            acc_o[4 * d + 2 * h] *= inv_l;
            acc_o[4 * d + 2 * h + 1] *= inv_l;
        }
    }
    return in_range;
}
/* END UNIT */

/* UNIT(gemms) */
/* ---------------------------------------------------------------------------------
 * Consumer: the two GEMMs of one K/V block for this warpgroup's 64 rows
 *
 * P as the RS A fragment of k16 slice kk (keys 16kk..16kk+15 = n8 blocks 2kk, 2kk+1):
 *   a[0] = (acc[8kk+0], acc[8kk+1])  row g,   keys 2t, 2t+1
 *   a[1] = (acc[8kk+2], acc[8kk+3])  row g+8, keys 2t, 2t+1
 *   a[2] = (acc[8kk+4], acc[8kk+5])  row g,   keys 8+2t, 8+2t+1
 *   a[3] = (acc[8kk+6], acc[8kk+7])  row g+8, keys 8+2t, 8+2t+1
 * ------------------------------------------------------------------------------ */

/* Issues S = Q·K_jᵀ: head_dim/16 SS wgmmas into acc_s (overwritten by the first), one
 * commit group. The caller fences before and waits after. */
template <class Cfg, class Element>
__device__ __forceinline__ void issue_s(float (&acc_s)[Cfg::kAccS], uint32_t sQ, uint32_t sK,
                                        int consumer)
{
    /* ASSIGNMENT(ss_gemm): S = Q·Kᵀ as head_dim/16 SS wgmmas (Wgmma<...>::ss_k_major), the
     * first overwriting acc_s, the rest accumulating; then one commit group. */
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / kWgmmaK; ++kk)
        Wgmma<Element, Cfg::kBlockN>::ss_k_major(acc_s, desc_q<Cfg>(sQ, consumer, kk),
                                                 desc_k<Cfg>(sK, kk), kk > 0);
    fx_wgmma_commit();
    /* END ASSIGNMENT */
}

/* Issues O += P·V: kBlockN/16 RS wgmmas reading the P fragments, one commit group. The
 * fragments must stay untouched until the group has completed (the tensor cores read them
 * asynchronously). */
template <class Cfg, class Element>
__device__ __forceinline__ void issue_pv(float (&acc_o)[Cfg::kAccO],
                                         const uint32_t (&p_frag)[Cfg::kPFrags][4], uint32_t sV)
{
    /* ASSIGNMENT(rs_gemm): O += P·V as kBlockN/16 RS wgmmas, A = the P fragments in
     * registers, B = V through its MN-major descriptor (Wgmma<...>::rs_b_mn_major); then one
     * commit group. */
#pragma unroll
    for (int kk = 0; kk < Cfg::kPFrags; ++kk)
        Wgmma<Element, Cfg::kHeadDim>::rs_b_mn_major(acc_o, p_frag[kk], desc_v<Cfg>(sV, kk), true);
    fx_wgmma_commit();
    /* END ASSIGNMENT */
}

/* P (fp32, in acc_s) to the 16-bit A fragments of the PV wgmma (layout drawn above). */
template <class Cfg, class Element>
__device__ __forceinline__ void pack_p(const float (&acc_s)[Cfg::kAccS],
                                       uint32_t (&p_frag)[Cfg::kPFrags][4])
{
#pragma unroll
    for (int kk = 0; kk < Cfg::kPFrags; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r)
            p_frag[kk][r] = Pack<Element>::pack(acc_s[8 * kk + 2 * r], acc_s[8 * kk + 2 * r + 1]);
}
/* END UNIT */

/* UNIT(consumer_ctx) */
/* What a consumer thread's mainloop needs that does not change from block to block. */
struct ConsumerCtx {
    int consumer;  // which consumer warpgroup: rows [64·consumer, 64·consumer + 64) of the block
    int warp_in_wg;  // its warp, 16 rows each
    int lane;
    int row0;  // this lane's first query row (g; the other is g + 8), in the sequence
    int m_block, head, batch;
    int seqlen_q, seqlen_k;
    float scale_log2;
};

template <class Cfg>
__device__ __forceinline__ ConsumerCtx make_consumer_ctx(const FwdParams &p, int consumer,
                                                         int warp_in_wg, int lane)
{
    ConsumerCtx c;
    c.consumer = consumer;
    c.warp_in_wg = warp_in_wg;
    c.lane = lane;
    c.m_block = blockIdx.x;
    c.head = blockIdx.y;
    c.batch = blockIdx.z;
    c.row0 = c.m_block * Cfg::kBlockM + consumer * kWgmmaM + warp_in_wg * kRowsPerWarp +
             lane / kLanesPerRow;
    c.seqlen_q = p.seqlen_q;
    c.seqlen_k = p.seqlen_k;
    c.scale_log2 = p.scale_log2;
    return c;
}
/* END UNIT */

/* UNIT(softmax_tail) */
/* The online softmax's second half, and what ordinary code does to the block before its PV
 * GEMM: P (softmax_exp), O *= alpha (kRescale: not while O is still 0), P packed. */
template <class Cfg, class Element, bool kRescale>
__device__ __forceinline__ void softmax_tail(const ConsumerCtx &c, SoftmaxState &sm,
                                             float (&acc_s)[Cfg::kAccS], float (&acc_o)[Cfg::kAccO],
                                             uint32_t (&p_frag)[Cfg::kPFrags][4])
{
    softmax_exp<Cfg>(sm, acc_s, c.scale_log2);
    if (kRescale)
        softmax_rescale_o<Cfg>(acc_o, sm.alpha);
    pack_p<Cfg, Element>(acc_s, p_frag);
}
/* END UNIT */

/* ---------------------------------------------------------------------------------
 * Mainloop
 * ------------------------------------------------------------------------------ */

/* UNIT(mainloop_step) */
/* The K/V block n_block in the ring at `read`. kMask: the block needs the causal or
 * seqlen_k mask. This warp releases K and V each once the wgmmas reading it have completed
 * (wait_group 0). */
template <class Cfg, class Element, bool kCausal, bool kMask>
__device__ __forceinline__ void mainloop_step(const ConsumerCtx &c, SharedStorage<Cfg> &smem,
                                              PipelineState read, int n_block,
                                              float (&acc_s)[Cfg::kAccS],
                                              float (&acc_o)[Cfg::kAccO],
                                              uint32_t (&p_frag)[Cfg::kPFrags][4], SoftmaxState &sm)
{
    // ---- S = Q·Kᵀ, once K has landed ----
    fx_mbarrier_wait(fx_smem_addr(&smem.k_full[read.stage]), read.phase);
    fx_wgmma_fence();
    issue_s<Cfg, Element>(acc_s, fx_smem_addr(smem.q), fx_smem_addr(smem.k[read.stage]),
                          c.consumer);
    fx_wgmma_wait<0>();
    fx_wgmma_fence_operand(acc_s);
    // K is read no more: released a softmax and a PV GEMM earlier than V (kReleaseKAfterS).
    if (Cfg::kReleaseKAfterS && c.lane == 0)
        fx_mbarrier_arrive(fx_smem_addr(&smem.k_empty[read.stage]));

    // ---- Mask, online softmax, O rescale (no PV group is in flight: O is ours) ----
    if (kMask)
        apply_mask<Cfg, kCausal>(acc_s, c.row0,
                                 n_block * Cfg::kBlockN + 2 * (c.lane % kLanesPerRow), c.seqlen_q,
                                 c.seqlen_k);
    softmax_max<Cfg>(sm, acc_s, c.scale_log2);
    softmax_tail<Cfg, Element, true>(c, sm, acc_s, acc_o, p_frag);

    // ---- O += P·V, once V has landed ----
    fx_mbarrier_wait(fx_smem_addr(&smem.v_full[read.stage]), read.phase);
    fx_wgmma_fence();  // the O rescale and the P fragments were written by ordinary code
    issue_pv<Cfg, Element>(acc_o, p_frag, fx_smem_addr(smem.v[read.stage]));
    fx_wgmma_wait<0>();
    fx_wgmma_fence_operand(acc_o);
    if (c.lane == 0)
        fx_mbarrier_arrive(fx_smem_addr(&smem.v_empty[read.stage]));
}
/* END UNIT */

/* UNIT(epilogue) */
/* ---------------------------------------------------------------------------------
 * Epilogue: O normalized, through this warpgroup's rows of the Q tile, out by TMA; LSE
 * ------------------------------------------------------------------------------ */

/*
 * O goes through this consumer warpgroup's 64 rows of the Q tile in shared memory, in the
 * 128B-swizzled slab layout that TMA reads: only this warpgroup's wgmmas read those rows,
 * and they have completed. Then every writer fences its generic-proxy stores against the
 * async proxy (PTX ISA §9.7.13.4: without it the TMA may read stale shared memory), the
 * warpgroup's 128 threads meet, and one thread stores the 64 × head_dim box, one TMA per
 * 64-column slab; rows past seqlen_q lie outside the tensor map and are dropped. The meeting
 * is also the vote on softmax_finalize's range check (bar.red.or): a warpgroup with a row out
 * of the fast path's range stores nothing from the tile, and each of its warps computes its
 * 16 rows again on the exact path (common/fx_exact_rows.cuh) and stores them itself.
 */
template <class Cfg, class Element>
__device__ __forceinline__ void epilogue(const ConsumerCtx &c, const FwdParams &p,
                                         SharedStorage<Cfg> &smem, float (&acc_o)[Cfg::kAccO],
                                         const SoftmaxState &sm)
{
    float lse[2];
    const bool in_range = softmax_finalize<Cfg>(sm, acc_o, lse);

    unsigned char *sO = reinterpret_cast<unsigned char *>(smem.q);
    const int local_row0 = c.consumer * kWgmmaM + c.warp_in_wg * kRowsPerWarp;
    const int g = c.lane / kLanesPerRow, t = c.lane % kLanesPerRow;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = local_row0 + g + 8 * h;
#pragma unroll
        for (int d = 0; d < Cfg::kDTiles; ++d) {
            const int col = 8 * d + 2 * t;
            const uint32_t off =
                (uint32_t)((col / kSlabCols) * Cfg::kSlabQBytes) +
                fx_swizzle128_offset((uint32_t)r, (uint32_t)((col % kSlabCols) * kElemBytes));
            *reinterpret_cast<uint32_t *>(sO + off) =
                Pack<Element>::pack(acc_o[4 * d + 2 * h], acc_o[4 * d + 2 * h + 1]);
        }
    }
    fx_fence_proxy_async_smem();
    if (fx_named_barrier_sync_or(kBarrierEpilogue + (uint32_t)c.consumer, kEpilogueThreads,
                                 !in_range)) {
        const int row_begin = c.row0 - g;  // this warp's first row
        fx_exact_rows<Element>(exact_rows_args(p, c.batch, c.head), row_begin,
                               min(row_begin + kRowsPerWarp, p.seqlen_q));
        return;
    }
    if (c.warp_in_wg == 0 && c.lane == 0) {
        const uint32_t sQ = fx_smem_addr(smem.q);
#pragma unroll
        for (int s = 0; s < Cfg::kSlabs; ++s)
            fx_tma_store_4d(
                &p.tma_o,
                sQ + (uint32_t)(s * Cfg::kSlabQBytes + c.consumer * kWgmmaM * kSlabRowBytes),
                s * kSlabCols, c.head, c.m_block * Cfg::kBlockM + c.consumer * kWgmmaM, c.batch);
        fx_tma_store_commit();
        fx_tma_store_wait_read<0>();  // the smem must outlive the reads: the CTA may exit next
    }
    if (t == 0) {
        float *LSE = p.lse + ((int64_t)c.batch * p.heads_q + c.head) * p.seqlen_q;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = c.row0 + 8 * h;
            if (row < p.seqlen_q)
                LSE[row] = lse[h];
        }
    }
}

/* A causal Q block whose rows all see no key (seqlen_q > seqlen_k): O = 0, LSE = -inf,
 * written by every thread of the CTA in 16-byte chunks, before any barrier or load. */
template <class Cfg, class Element>
__device__ __forceinline__ void write_empty_block(const FwdParams &p, int m_block, int head,
                                                  int batch, int tid)
{
    constexpr int kChunks = Cfg::kHeadDim / kChunkElems;
    Element *O = static_cast<Element *>(p.o) + batch * p.o_batch_stride + head * p.o_head_stride +
                 (int64_t)m_block * Cfg::kBlockM * p.o_row_stride;
    float *LSE =
        p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q + (int64_t)m_block * Cfg::kBlockM;
    const int rows = min(Cfg::kBlockM, p.seqlen_q - m_block * Cfg::kBlockM);
    for (int idx = tid; idx < rows * kChunks; idx += Cfg::kNThreads) {
        const int row = idx / kChunks, chunk = idx % kChunks;
        *reinterpret_cast<uint4 *>(O + row * p.o_row_stride + chunk * kChunkElems) =
            make_uint4(0, 0, 0, 0);
    }
    for (int row = tid; row < rows; row += Cfg::kNThreads)
        LSE[row] = -INFINITY;
}
/* END UNIT */

/* ---------------------------------------------------------------------------------
 * The kernel: one CTA per (Q block, query head, batch); kNumConsumers consumer warpgroups
 * of 64 rows each; thread 0 also issues every TMA load.
 * ------------------------------------------------------------------------------ */

template <class Cfg, class Element, bool kCausal>
__global__ void __launch_bounds__(Cfg::kNThreads, 1) fwd_kernel(const __grid_constant__ FwdParams p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t smem_addr = smem_base_aligned(smem_raw);
    SharedStorage<Cfg> &smem = *reinterpret_cast<SharedStorage<Cfg> *>(
        smem_raw + (smem_addr - fx_smem_addr(smem_raw)));  // the same bytes, generic address

    const int m_block = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int head_kv = head / p.q_per_kv;  // GQA (CTA-uniform: one division per CTA)
    const int tid = threadIdx.x, lane = tid % kWarpSize;
    const int warpgroup = tid / kWarpgroupThreads;
    const int warp_in_wg = (tid / kWarpSize) % kWarpsPerWarpgroup;

    const BlockRange range = block_range<Cfg, kCausal>(m_block, p.seqlen_q, p.seqlen_k);
    if (range.n_block_max == 0) {  // before any barrier or load: nothing is in flight
        write_empty_block<Cfg, Element>(p, m_block, head, batch, tid);
        return;
    }
    // Blocks run from n_block_max − 1 down to 0, the masked ones first; iteration `it` works
    // on block n_block_max − 1 − it.
    const int n_iters = range.n_block_max;
    const int n_masked = range.n_block_max - range.n_block_unmasked;

    // ---- Barriers: initialised by one thread, published to all by the CTA barrier ----
    if (tid == 0) {
        fx_mbarrier_init(fx_smem_addr(&smem.q_full), 1);
        for (int s = 0; s < Cfg::kStages; ++s) {
            fx_mbarrier_init(fx_smem_addr(&smem.k_full[s]), 1);  // the producer's expect_tx
            fx_mbarrier_init(fx_smem_addr(&smem.v_full[s]), 1);
            fx_mbarrier_init(fx_smem_addr(&smem.k_empty[s]), Cfg::kNConsumerWarps);
            fx_mbarrier_init(fx_smem_addr(&smem.v_empty[s]), Cfg::kNConsumerWarps);
        }
        fx_fence_mbarrier_init();
    }
    __syncthreads();
    // Thread 0 is the producer too: Q and the first kStages blocks now, each later block once
    // the stage it goes to is released (in the mainloop, after its own step).
    PipelineState write = {0, 0};
    if (tid == 0) {
        load_tile<Cfg>(fx_smem_addr(smem.q), &p.tma_q, fx_smem_addr(&smem.q_full), Cfg::kBlockM,
                       head, m_block * Cfg::kBlockM, batch);
        for (int it = 0; it < Cfg::kStages && it < n_iters; ++it) {
            load_kv<Cfg>(p, smem, write, false, range.n_block_max - 1 - it, head_kv, batch);
            advance<Cfg::kStages>(write);
        }
    }

    // ---- Consumer warpgroups ----
    const ConsumerCtx c = make_consumer_ctx<Cfg>(p, warpgroup, warp_in_wg, lane);
    float acc_o[Cfg::kAccO];
#pragma unroll
    for (int i = 0; i < Cfg::kAccO; ++i)
        acc_o[i] = 0.f;
    SoftmaxState sm;
    softmax_init(sm);
    fx_mbarrier_wait(fx_smem_addr(&smem.q_full), 0);

    // ---- Mainloop, split: the masked blocks first, then the rest without a mask ----
    float acc_s[Cfg::kAccS];
    uint32_t p_frag[Cfg::kPFrags][4];
    PipelineState read = {0, 0};
    int it = 0;
    for (; it < n_masked; ++it) {
        const int n_block = range.n_block_max - 1 - it;
        mainloop_step<Cfg, Element, kCausal, true>(c, smem, read, n_block, acc_s, acc_o, p_frag,
                                                   sm);
        if (tid == 0 && it + Cfg::kStages < n_iters) {
            load_kv<Cfg>(p, smem, write, true, n_block - Cfg::kStages, head_kv, batch);
            advance<Cfg::kStages>(write);
        }
        advance<Cfg::kStages>(read);
    }
    for (; it < n_iters; ++it) {
        const int n_block = range.n_block_max - 1 - it;
        mainloop_step<Cfg, Element, kCausal, false>(c, smem, read, n_block, acc_s, acc_o, p_frag,
                                                    sm);
        if (tid == 0 && it + Cfg::kStages < n_iters) {
            load_kv<Cfg>(p, smem, write, true, n_block - Cfg::kStages, head_kv, batch);
            advance<Cfg::kStages>(write);
        }
        advance<Cfg::kStages>(read);
    }

    epilogue<Cfg, Element>(c, p, smem, acc_o, sm);
}

/* ---------------------------------------------------------------------------------
 * Host launcher
 * ------------------------------------------------------------------------------ */

template <class Cfg, class Element, bool kCausal>
struct Launch {
    static cudaError_t run(const fx_fwd_args *a)
    {
        FwdParams p;
        if (!make_fwd_params(&p, a, Cfg::kBlockM, Cfg::kBlockN))
            return cudaErrorInvalidValue;
        return launch_per_tile<Cfg>(fwd_kernel<Cfg, Element, kCausal>, p, a, kSmemBytes<Cfg>);
    }
};

}  // namespace

/* The stage's entry points (stage.c): the forward of fx_stage.h, and the dynamic shared
 * memory one CTA needs at head_dim (0: not built). */
extern "C" cudaError_t FX_ENTRY(fwd)(const fx_fwd_args *a)
{
    return dispatch_forward<Launch, ConfigD64, ConfigD128, ConfigD256>(a);
}

extern "C" size_t FX_ENTRY(fwd_smem_bytes)(int head_dim)
{
    return smem_bytes_for(head_dim, kSmemBytes<ConfigD64>, kSmemBytes<ConfigD128>,
                          kSmemBytes<ConfigD256>);
}
