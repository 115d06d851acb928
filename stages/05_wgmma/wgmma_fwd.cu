/*
 * wgmma_fwd.cu — stage 05: the FlashAttention forward on Hopper's warpgroup tensor cores.
 *
 * Over stage 04 (TMA + mbarriers feeding mma.sync) this stage changes the GEMMs, not how
 * Q, K and V arrive: a warpgroup (4 warps, 128 threads) issues one asynchronous
 * wgmma.mma_async per k16 slice for its whole 64-row slice of the Q block, instead of each
 * warp issuing a grid of m16n8k16 mma.sync fed by ldmatrix.
 *   - S = Q·Kᵀ is an "SS" wgmma: both operands are read by the tensor cores straight out
 *     of the 128B-swizzled tiles that TMA wrote, through 64-bit matrix descriptors
 *     (common/ptx/wgmma_desc.h). No ldmatrix, no operand registers.
 *   - O += P·V is an "RS" wgmma: P stays in registers, converted from S's fp32
 *     accumulators to the A fragment in place (the same register shuffle-free trick as
 *     stage 03's mma.sync), and V is the "MN-major" B operand (head_dim contiguous), which
 *     16-bit wgmma reads transposed through the descriptor's trans-b bit.
 * A warpgroup's wgmmas run asynchronously: fx_wgmma_fence before them, fx_wgmma_commit
 * after, fx_wgmma_wait<0> before the accumulators are read. With two or three warpgroups
 * per CTA and no further coordination, one warpgroup's softmax runs while another's
 * wgmmas occupy the tensor cores — by chance, not by schedule; stages 06-08 make it a
 * schedule (warp specialization, pingpong, intra-warpgroup overlap).
 *
 * Loads: one thread (threadIdx.x == 0) is also the TMA producer: Q once, then K and V of
 * each block into a ring of kStages stages, each stage with a "full" mbarrier per tensor
 * (TMA's complete_tx) and an "empty" mbarrier (one arrival per consumer warp once its
 * wgmmas reading the stage have completed). Without warp specialization the producer is
 * a consumer too, so it refills a stage only after finishing its own work on it.
 *
 * O leaves as in stage 03 (each warp stages its own 16 rows in the Q tile and writes
 * 16-byte chunks), not by stage 04's TMA store: a simplification kept through stage 07,
 * so that 05-07 differ from each other only in the mainloop; stage 08 stores O by TMA
 * again, per consumer warpgroup (docs/08_intra_wg_overlap.md).
 *
 * Sources: Shah et al., "FlashAttention-3: Fast and Accurate Attention with Asynchrony and
 * Low-precision" (2024), §3.1 (the wgmma/TMA building blocks); FA2 Algorithm 1 for the
 * online softmax; PTX ISA §9.7.15 (wgmma: fragments §9.7.15.5.1.1, descriptors
 * §9.7.15.5.1.2, wgmma.mma_async §9.7.15.5.2, fence/commit/wait §9.7.15.7), §9.7.9.25.5.2
 * (cp.async.bulk.tensor), §9.7.13.15 (mbarrier). Wrappers: common/ptx/hopper.cuh.
 *
 * Layouts (fx_problem.h): Q, O [batch, seqlen_q, heads_q, head_dim]; K, V [batch,
 * seqlen_k, heads_kv, head_dim]; LSE fp32 [batch, heads_q, seqlen_q], natural log.
 * Query head h reads kv head h / (heads_q / heads_kv). Causal is bottom-right aligned:
 * row i sees key j iff j <= i + seqlen_k - seqlen_q. A row that sees no key gets
 * O = 0 and LSE = -inf.
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "fx_stage.h"
#include "fx_tma.h"
#include "ptx/hopper.cuh"
#include "ptx/wgmma_desc.h"

/* ---------------------------------------------------------------------------------
 * Compile-time configuration
 * ------------------------------------------------------------------------------ */

static constexpr int kWarpSize = 32;
static constexpr int kWarpgroupThreads = 128;  // 4 warps issue one wgmma together
static constexpr int kWarpsPerWarpgroup = 4;
static constexpr int kWgmmaM = 64;  // rows of one wgmma (m64nNk16)
static constexpr int kWgmmaK = 16;
static constexpr int kLanesPerRow = 4;  // lanes 4g..4g+3 hold row g of a warp's 16
static constexpr unsigned kFullWarp = 0xffffffffu;
static constexpr int kElemBytes = 2;
// A 128B-swizzled slab is rows × 64 elements (128 bytes per row); TMA's box is one slab.
static constexpr int kSlabCols = 64;
static constexpr int kSlabRowBytes = FX_SWIZZLE128_ROW_BYTES;       // 128 (wgmma_desc.h)
static constexpr int kSwizzleAtomBytes = FX_SWIZZLE128_ATOM_BYTES;  // 1024: 8 rows
static constexpr int kMaxSmemPerBlockHopper = 227 * 1024;           // sm_90 opt-in limit
static constexpr int kChunkBytes = 16;
static constexpr int kChunkElems = 8;

template <int kHeadDim_, int kNumWarpgroups_, int kBlockN_, int kStages_>
struct WgmmaConfig {
    static constexpr int kHeadDim = kHeadDim_;
    static constexpr int kNumWarpgroups = kNumWarpgroups_;    // consumer warpgroups
    static constexpr int kBlockM = kNumWarpgroups * kWgmmaM;  // query rows per CTA
    static constexpr int kBlockN = kBlockN_;                  // keys per K/V block
    static constexpr int kStages = kStages_;                  // K/V ring depth
    static constexpr int kNThreads = kNumWarpgroups * kWarpgroupThreads;
    static constexpr int kNWarps = kNThreads / kWarpSize;
    static constexpr int kSlabs = kHeadDim / kSlabCols;  // 64-column slabs per row
    // Per thread: S is m64 × kBlockN fp32 over 128 threads = kBlockN/2 registers, O is
    // kHeadDim/2, P (16-bit pairs) kBlockN/4.
    static constexpr int kAccS = kBlockN / 2;
    static constexpr int kAccO = kHeadDim / 2;
    static constexpr int kNTiles = kBlockN / 8;   // n8 column blocks of S per thread's row
    static constexpr int kDTiles = kHeadDim / 8;  // n8 column blocks of O
    // Shared memory, in bytes, every tile 1024-byte aligned (the swizzle atom): Q, then
    // kStages K tiles, then kStages V tiles, then the mbarriers.
    static constexpr int kSlabQBytes = kBlockM * kSlabRowBytes;
    static constexpr int kSlabKVBytes = kBlockN * kSlabRowBytes;
    static constexpr int kTileQBytes = kSlabs * kSlabQBytes;
    static constexpr int kTileKVBytes = kSlabs * kSlabKVBytes;
    static constexpr int kOffK = kTileQBytes;
    static constexpr int kOffV = kOffK + kStages * kTileKVBytes;
    static constexpr int kOffBarriers = kOffV + kStages * kTileKVBytes;
    static constexpr int kNumBarriers = 1 + 3 * kStages;  // Q full; K full, V full, empty
    // The dynamic smem base is only guaranteed 16-byte aligned: reserve one atom to round
    // it up to 1024 bytes in the kernel.
    static constexpr int kSmemBytes = kOffBarriers + kNumBarriers * 8 + kSwizzleAtomBytes;

    static_assert(kHeadDim % kSlabCols == 0, "head_dim is whole 64-column slabs");
    static_assert(kBlockN % kWgmmaK == 0 && kBlockN <= 256, "S is one wgmma of N = kBlockN");
    static_assert(kBlockM <= FX_TMA_MAX_BOX && kBlockN <= FX_TMA_MAX_BOX,
                  "a TMA box has at most 256 rows");
    static_assert(kTileQBytes % kSwizzleAtomBytes == 0 && kTileKVBytes % kSwizzleAtomBytes == 0,
                  "tiles keep the 1024-byte alignment of the swizzle atom");
    static_assert(kSmemBytes <= kMaxSmemPerBlockHopper, "fits Hopper's smem per block");
};

/*
 * The tiles. Registers: kNThreads threads at one CTA per SM may use 65536 / kNThreads
 * each, rounded down to a multiple of 8 (255 at most): 255 at 2 warpgroups, 168 at 3. Each thread holds S (kBlockN/2),
 * O (head_dim/2) and P (kBlockN/4) beside its row statistics and addresses.
 *  - d=64: 3 warpgroups, 192×128 (FA3's causal tile for head_dim 64; its non-causal one is
 *    192×192): S 64 + O 32 + P 32.
 *    Smem 24 + 2·(16 + 16) = 88 KiB; the third warpgroup adds a softmax to hide behind
 *    the others' wgmmas where the short head_dim makes each GEMM brief.
 *  - d=128: 2 warpgroups, 128×128: S 64 + O 64 + P 32. Smem 32 + 2·(32 + 32) = 160 KiB.
 *  - d=256: 2 warpgroups, 128×64: S 32 + O 128 + P 16 (O dominates; a wider kBlockN
 *    would need S 64 more). Smem 64 + 2·(32 + 32) = 192 KiB.
 */
using ConfigD64 = WgmmaConfig<64, 3, 128, 2>;
using ConfigD128 = WgmmaConfig<128, 2, 128, 2>;
using ConfigD256 = WgmmaConfig<256, 2, 64, 2>;

/* ---------------------------------------------------------------------------------
 * The element type: which wgmma, and how fp32 pairs are packed to it.
 * ------------------------------------------------------------------------------ */

template <class Element, int N>
struct Wgmma;

// SS: A (Q) and B (K) both K-major (trans 0). RS: B (V) MN-major (trans-b 1).
#define FX_DEFINE_WGMMA(ELEMENT, SUFFIX, N)                                                        \
    template <>                                                                                    \
    struct Wgmma<ELEMENT, N> {                                                                     \
        static __device__ __forceinline__ void ss_k_major(float (&d)[N / 2], uint64_t da,          \
                                                          uint64_t db, bool acc)                   \
        {                                                                                          \
            fx_wgmma_m64n##N##k16_ss_##SUFFIX<0, 0>(d, da, db, acc);                               \
        }                                                                                          \
        static __device__ __forceinline__ void rs_b_mn_major(float (&d)[N / 2],                    \
                                                             const uint32_t (&a)[4], uint64_t db,  \
                                                             bool acc)                             \
        {                                                                                          \
            fx_wgmma_m64n##N##k16_rs_##SUFFIX<1>(d, a, db, acc);                                   \
        }                                                                                          \
    };
FX_DEFINE_WGMMA(__nv_bfloat16, bf16, 64)
FX_DEFINE_WGMMA(__nv_bfloat16, bf16, 128)
FX_DEFINE_WGMMA(__nv_bfloat16, bf16, 256)
FX_DEFINE_WGMMA(__half, fp16, 64)
FX_DEFINE_WGMMA(__half, fp16, 128)
FX_DEFINE_WGMMA(__half, fp16, 256)
#undef FX_DEFINE_WGMMA

template <class Element>
struct Pack;
template <>
struct Pack<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        return fx_pack_bf16x2(lo, hi);
    }
};
template <>
struct Pack<__half> {
    static __device__ __forceinline__ uint32_t pack(float lo, float hi)
    {
        return fx_pack_f16x2(lo, hi);
    }
};

/* ---------------------------------------------------------------------------------
 * Kernel arguments. The tensor maps live in the kernel's parameter space (the struct is
 * a __grid_constant__ parameter): TMA reads them there, by generic address.
 * ------------------------------------------------------------------------------ */

struct WgmmaFwdParams {
    CUtensorMap tma_q;  // box {64, 1, kBlockM, 1}: one Q slab of one head
    CUtensorMap tma_k;  // box {64, 1, kBlockN, 1}
    CUtensorMap tma_v;  // box {64, 1, kBlockN, 1}
    void *o;
    float *lse;
    int64_t o_batch_stride, o_head_stride;
    int o_row_stride;
    int seqlen_q, seqlen_k;
    int heads_q;
    int q_per_kv;         // heads_q / heads_kv
    float softmax_scale;  // natural-log units, for the LSE
    float scale_log2;     // softmax_scale · log2(e)
};

/* ---------------------------------------------------------------------------------
 * wgmma descriptors of the tiles (layouts: common/ptx/wgmma_desc.h)
 *
 * A tile of R rows × head_dim columns is head_dim/64 slabs of R × 128 bytes, each written
 * by one TMA box with 128B swizzle. For S = Q·Kᵀ (both K-major, K = head_dim), k16 slice kk
 * lies in slab kk/4 at byte 32·(kk%4) of every row: the descriptor's start address moves
 * by 32 bytes inside the swizzle atom (the hardware applies the XOR to the full address,
 * which is why every slab starts on 1024 bytes), and SBO = 1024 steps from 8 rows to the
 * next 8. For O = P·V, V is the MN-major B operand (N = head_dim contiguous); k16 slice kk
 * is keys 16kk..16kk+15: rows 16kk.. of every slab, 16 · 128 = 2048 bytes further; SBO =
 * 1024 steps from keys 0-7 to 8-15, LBO = slab bytes steps from head_dim columns 0-63 to
 * 64-127 (read when N = head_dim > 64).
 * ------------------------------------------------------------------------------ */

template <class Cfg>
static __device__ __forceinline__ uint64_t desc_q(uint32_t sQ, int warpgroup, int kk)
{
    const uint32_t addr =
        sQ + (uint32_t)((kk / 4) * Cfg::kSlabQBytes + warpgroup * kWgmmaM * kSlabRowBytes +
                        (kk % 4) * FX_WGMMA_K16_STEP_K_MAJOR_BYTES);
    return fx_wgmma_desc_k_sw128(addr);
}

template <class Cfg>
static __device__ __forceinline__ uint64_t desc_k(uint32_t sK, int kk)
{
    const uint32_t addr =
        sK + (uint32_t)((kk / 4) * Cfg::kSlabKVBytes + (kk % 4) * FX_WGMMA_K16_STEP_K_MAJOR_BYTES);
    return fx_wgmma_desc_k_sw128(addr);
}

template <class Cfg>
static __device__ __forceinline__ uint64_t desc_v(uint32_t sV, int kk)
{
    return fx_wgmma_desc_mn_sw128(sV + (uint32_t)(kk * FX_WGMMA_K16_STEP_MN_MAJOR_BYTES),
                                  (uint32_t)Cfg::kSlabKVBytes);
}

/* ---------------------------------------------------------------------------------
 * Producer (thread 0): TMA loads of one tile, one box per 64-column slab
 * ------------------------------------------------------------------------------ */

/* Announces the tile's bytes on `bar`, then issues its head_dim/64 boxes. Rows past the
 * tensor's seqlen are zero-filled by TMA and still count as delivered bytes. */
template <class Cfg>
static __device__ __forceinline__ void tma_load_tile(uint32_t dst, const CUtensorMap *map,
                                                     uint32_t bar, int rows, int slab_bytes,
                                                     int head, int row0, int batch)
{
    fx_mbarrier_arrive_expect_tx(bar, (uint32_t)(rows * Cfg::kHeadDim * kElemBytes));
#pragma unroll
    for (int s = 0; s < Cfg::kSlabs; ++s)
        fx_tma_load_4d(dst + (uint32_t)(s * slab_bytes), map, bar, s * kSlabCols, head, row0,
                       batch);
}

/* ---------------------------------------------------------------------------------
 * Consumer: one K/V block for this warpgroup's 64 rows
 * ------------------------------------------------------------------------------ */

/*
 * Accumulator layout of m64nNk16 (PTX ISA §9.7.15.5.1.1), per warp w of the warpgroup,
 * lane l (g = l/4, t = l%4): acc[4j + 2h + e] = D[16w + g + 8h][8j + 2t + e] — the n8
 * blocks of an mma.sync m16n8k16 accumulator side by side, so stage 03's softmax applies
 * unchanged with n8 tile j at acc[4j .. 4j+3]: a lane holds 2 columns of rows g and g+8 per
 * n8 block, and the row statistics are reduced over the 4 lanes t = 0..3.
 *
 * P as the RS A fragment of k16 slice kk (keys 16kk..16kk+15 = n8 blocks 2kk, 2kk+1):
 *   a[0] = (acc[8kk+0], acc[8kk+1])  row g,   keys 2t, 2t+1
 *   a[1] = (acc[8kk+2], acc[8kk+3])  row g+8, keys 2t, 2t+1
 *   a[2] = (acc[8kk+4], acc[8kk+5])  row g,   keys 8+2t, 8+2t+1
 *   a[3] = (acc[8kk+6], acc[8kk+7])  row g+8, keys 8+2t, 8+2t+1
 */
template <class Cfg, class Element, bool kCausal, bool kMask>
static __device__ __forceinline__ void attention_block(
    float (&acc_o)[Cfg::kAccO], float (&row_max)[2], float (&row_sum)[2], uint32_t sQ, uint32_t sK,
    uint32_t sV, uint32_t full_v, uint32_t full_phase, int warpgroup, int warp_in_wg, int lane,
    int n_block, int m_block, int seqlen_q, int seqlen_k, float scale_log2)
{
    // ---- S = Q·Kᵀ: head_dim/16 SS wgmmas, one commit group ----
    float acc_s[Cfg::kAccS];
    fx_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / kWgmmaK; ++kk)
        Wgmma<Element, Cfg::kBlockN>::ss_k_major(acc_s, desc_q<Cfg>(sQ, warpgroup, kk),
                                                 desc_k<Cfg>(sK, kk), kk > 0);
    fx_wgmma_commit();
    fx_wgmma_wait<0>();
    fx_wgmma_fence_operand(acc_s);

    // ---- Mask: keys past seqlen_k, and (causal) keys past row + seqlen_k − seqlen_q ----
    if (kMask) {
        const int row0 =
            m_block * Cfg::kBlockM + warpgroup * kWgmmaM + warp_in_wg * 16 + lane / kLanesPerRow;
        const int col0 = n_block * Cfg::kBlockN + 2 * (lane % kLanesPerRow);
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

    // ---- Online softmax (FA2 Algorithm 1), O left unnormalized ----
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float m_new = row_max[h];
#pragma unroll
        for (int j = 0; j < Cfg::kNTiles; ++j)
            m_new = fmaxf(m_new, fmaxf(acc_s[4 * j + 2 * h], acc_s[4 * j + 2 * h + 1]));
        m_new = fmaxf(m_new, __shfl_xor_sync(kFullWarp, m_new, 1));
        m_new = fmaxf(m_new, __shfl_xor_sync(kFullWarp, m_new, 2));
        // A row that has seen only masked keys keeps m = -inf: exponentiate against 0, so
        // every P is 0 and no -inf - (-inf) = NaN appears.
        const float m_scaled = (m_new == -INFINITY ? 0.f : m_new) * scale_log2;
        const float alpha = fx_ex2(row_max[h] * scale_log2 - m_scaled);
        row_max[h] = m_new;
        row_sum[h] *= alpha;
        // O is not in use by a wgmma here: the previous block's PV group was waited for.
#pragma unroll
        for (int d = 0; d < Cfg::kDTiles; ++d) {
            acc_o[4 * d + 2 * h] *= alpha;
            acc_o[4 * d + 2 * h + 1] *= alpha;
        }
#pragma unroll
        for (int j = 0; j < Cfg::kNTiles; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float p = fx_ex2(fmaf(acc_s[4 * j + 2 * h + e], scale_log2, -m_scaled));
                acc_s[4 * j + 2 * h + e] = p;
                row_sum[h] += p;  // this lane's partial; reduced over the row at the end
            }
    }

    // ---- P to 16-bit A fragments, in registers ----
    uint32_t p_frag[Cfg::kBlockN / kWgmmaK][4];
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / kWgmmaK; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r)
            p_frag[kk][r] = Pack<Element>::pack(acc_s[8 * kk + 2 * r], acc_s[8 * kk + 2 * r + 1]);

    // ---- O += P·V: kBlockN/16 RS wgmmas, one commit group, once V has landed ----
    fx_mbarrier_wait(full_v, full_phase);
    fx_wgmma_fence();  // the O rescale and the P fragments were written by ordinary code
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / kWgmmaK; ++kk)
        Wgmma<Element, Cfg::kHeadDim>::rs_b_mn_major(acc_o, p_frag[kk], desc_v<Cfg>(sV, kk), true);
    fx_wgmma_commit();
    fx_wgmma_wait<0>();
    fx_wgmma_fence_operand(acc_o);
}

/* A causal block whose rows all see no key (seqlen_q > seqlen_k): O = 0, LSE = -inf. */
template <class Cfg, class Element>
static __device__ __forceinline__ void write_empty_block(Element *O, int o_row_stride, float *LSE,
                                                         int rows_valid, int tid)
{
    constexpr int kChunks = Cfg::kHeadDim / kChunkElems;
    const int rows = min(Cfg::kBlockM, rows_valid);
    for (int idx = tid; idx < rows * kChunks; idx += Cfg::kNThreads) {
        const int row = idx / kChunks, chunk = idx % kChunks;
        *reinterpret_cast<uint4 *>(O + row * o_row_stride + chunk * kChunkElems) =
            make_uint4(0, 0, 0, 0);
    }
    for (int row = tid; row < rows; row += Cfg::kNThreads)
        LSE[row] = -INFINITY;
}

/* ---------------------------------------------------------------------------------
 * The kernel: one CTA per (Q block, query head, batch); kNumWarpgroups consumer
 * warpgroups of 64 rows each; thread 0 also issues every TMA load.
 * ------------------------------------------------------------------------------ */

template <class Cfg, class Element, bool kCausal>
__global__ void __launch_bounds__(Cfg::kNThreads, 1)
    wgmma_fwd_kernel(const __grid_constant__ WgmmaFwdParams p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    // Round up to the 1024-byte swizzle atom (kSmemBytes reserves the slack).
    const uint32_t smem_base =
        (fx_smem_addr(smem_raw) + kSwizzleAtomBytes - 1) & ~(uint32_t)(kSwizzleAtomBytes - 1);
    unsigned char *smem =
        smem_raw + (smem_base - fx_smem_addr(smem_raw));  // the same bytes, generic address
    const uint32_t sQ = smem_base;
    const uint32_t sK0 = smem_base + Cfg::kOffK, sV0 = smem_base + Cfg::kOffV;
    // Barriers: [0] Q full; then per stage s: [1+s] K full, [1+kStages+s] V full,
    // [1+2·kStages+s] empty.
    const uint32_t bar0 = smem_base + Cfg::kOffBarriers;
    const uint32_t bar_q = bar0;
    auto bar_k_full = [&](int s) { return bar0 + 8u * (uint32_t)(1 + s); };
    auto bar_v_full = [&](int s) { return bar0 + 8u * (uint32_t)(1 + Cfg::kStages + s); };
    auto bar_empty = [&](int s) { return bar0 + 8u * (uint32_t)(1 + 2 * Cfg::kStages + s); };

    const int m_block = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int head_kv = head / p.q_per_kv;  // GQA (CTA-uniform: one division per CTA)
    const int tid = threadIdx.x, lane = tid % kWarpSize;
    const int warpgroup = tid / kWarpgroupThreads;
    const int warp_in_wg = (tid / kWarpSize) % kWarpsPerWarpgroup;
    const int rows_valid = p.seqlen_q - m_block * Cfg::kBlockM;

    Element *O = static_cast<Element *>(p.o) + batch * p.o_batch_stride + head * p.o_head_stride +
                 (int64_t)m_block * Cfg::kBlockM * p.o_row_stride;
    float *LSE =
        p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q + (int64_t)m_block * Cfg::kBlockM;

    // K/V blocks [0, n_block_max) hold a key some row of this block sees (causal early exit).
    int n_block_max = (p.seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
    if (kCausal) {
        const int last_row = m_block * Cfg::kBlockM + min(Cfg::kBlockM, rows_valid) - 1;
        const int keys_seen = last_row + 1 + p.seqlen_k - p.seqlen_q;
        n_block_max =
            keys_seen <= 0 ? 0 : min(n_block_max, (keys_seen + Cfg::kBlockN - 1) / Cfg::kBlockN);
    }
    if (n_block_max == 0) {  // before any barrier or load: nothing is in flight
        write_empty_block<Cfg>(O, p.o_row_stride, LSE, rows_valid, tid);
        return;
    }
    // Blocks [0, n_block_unmasked) are wholly visible to every row of this block.
    int n_block_unmasked = p.seqlen_k / Cfg::kBlockN;
    if (kCausal) {
        const int keys_seen_first_row = m_block * Cfg::kBlockM + 1 + p.seqlen_k - p.seqlen_q;
        n_block_unmasked = min(n_block_unmasked, max(keys_seen_first_row, 0) / Cfg::kBlockN);
    }
    // Blocks run from n_block_max − 1 down to 0 (the masked ones first); iteration `it`
    // works on block n_block_max − 1 − it in stage it % kStages.
    const int n_iters = n_block_max;

    // ---- Barriers, then the prologue loads: Q and the first kStages K/V blocks ----
    if (tid == 0) {
        fx_mbarrier_init(bar_q, 1);
        for (int s = 0; s < Cfg::kStages; ++s) {
            fx_mbarrier_init(bar_k_full(s), 1);  // the producer's arrive.expect_tx
            fx_mbarrier_init(bar_v_full(s), 1);
            fx_mbarrier_init(bar_empty(s), Cfg::kNWarps);  // one lane per consumer warp
        }
        fx_fence_mbarrier_init();
    }
    __syncthreads();
    if (tid == 0) {
        tma_load_tile<Cfg>(sQ, &p.tma_q, bar_q, Cfg::kBlockM, Cfg::kSlabQBytes, head,
                           m_block * Cfg::kBlockM, batch);
        for (int it = 0; it < Cfg::kStages && it < n_iters; ++it) {
            const int n = n_block_max - 1 - it;
            tma_load_tile<Cfg>(sK0 + it * Cfg::kTileKVBytes, &p.tma_k, bar_k_full(it), Cfg::kBlockN,
                               Cfg::kSlabKVBytes, head_kv, n * Cfg::kBlockN, batch);
            tma_load_tile<Cfg>(sV0 + it * Cfg::kTileKVBytes, &p.tma_v, bar_v_full(it), Cfg::kBlockN,
                               Cfg::kSlabKVBytes, head_kv, n * Cfg::kBlockN, batch);
        }
    }

    float acc_o[Cfg::kAccO];
#pragma unroll
    for (int i = 0; i < Cfg::kAccO; ++i)
        acc_o[i] = 0.f;
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

    fx_mbarrier_wait(bar_q, 0);

    // ---- Mainloop ----
    for (int it = 0; it < n_iters; ++it) {
        const int stage = it % Cfg::kStages;
        const uint32_t phase = (uint32_t)((it / Cfg::kStages) & 1);
        const int n_block = n_block_max - 1 - it;
        const uint32_t sK = sK0 + stage * Cfg::kTileKVBytes, sV = sV0 + stage * Cfg::kTileKVBytes;

        fx_mbarrier_wait(bar_k_full(stage), phase);
        if (n_block >= n_block_unmasked)
            attention_block<Cfg, Element, kCausal, true>(
                acc_o, row_max, row_sum, sQ, sK, sV, bar_v_full(stage), phase, warpgroup,
                warp_in_wg, lane, n_block, m_block, p.seqlen_q, p.seqlen_k, p.scale_log2);
        else
            attention_block<Cfg, Element, kCausal, false>(
                acc_o, row_max, row_sum, sQ, sK, sV, bar_v_full(stage), phase, warpgroup,
                warp_in_wg, lane, n_block, m_block, p.seqlen_q, p.seqlen_k, p.scale_log2);

        // This warp's wgmmas reading the stage have completed (wait_group 0): release it.
        if (lane == 0)
            fx_mbarrier_arrive(bar_empty(stage));
        // The producer refills the stage with block it + kStages once every consumer warp
        // has released it (this empty phase completes when the last warp arrives).
        if (tid == 0 && it + Cfg::kStages < n_iters) {
            fx_mbarrier_wait(bar_empty(stage), phase);
            const int n = n_block_max - 1 - (it + Cfg::kStages);
            tma_load_tile<Cfg>(sK, &p.tma_k, bar_k_full(stage), Cfg::kBlockN, Cfg::kSlabKVBytes,
                               head_kv, n * Cfg::kBlockN, batch);
            tma_load_tile<Cfg>(sV, &p.tma_v, bar_v_full(stage), Cfg::kBlockN, Cfg::kSlabKVBytes,
                               head_kv, n * Cfg::kBlockN, batch);
        }
    }

    // ---- Epilogue: ℓ over the row, O /= ℓ once, LSE ----
    float lse[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = row_sum[h];
        l += __shfl_xor_sync(kFullWarp, l, 1);
        l += __shfl_xor_sync(kFullWarp, l, 2);
        // ℓ = 0: a row that saw no key. A NaN ℓ (NaN inputs) gets LSE = -inf too, as in
        // FlashAttention; its O stays NaN (NaN · 0), so the NaN is not hidden.
        const bool empty = (l == 0.f || l != l);
        const float inv_l = empty ? 0.f : 1.f / l;
        lse[h] = empty ? -INFINITY : row_max[h] * p.softmax_scale + logf(l);
#pragma unroll
        for (int d = 0; d < Cfg::kDTiles; ++d) {
            acc_o[4 * d + 2 * h] *= inv_l;
            acc_o[4 * d + 2 * h + 1] *= inv_l;
        }
    }

    // O goes through this warp's own 16 rows of the Q tile in smem (same swizzled slab
    // layout), so that HBM sees whole 16-byte chunks of a row. Only this warpgroup's
    // wgmmas read those rows, and they have completed; a warp writes and reads back only
    // its own rows, so __syncwarp orders it.
    const int local_row0 = warpgroup * kWgmmaM + warp_in_wg * 16;
    const int g = lane / kLanesPerRow, t = lane % kLanesPerRow;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = local_row0 + g + 8 * h;
#pragma unroll
        for (int d = 0; d < Cfg::kDTiles; ++d) {
            const int col = 8 * d + 2 * t;
            const uint32_t off =
                (uint32_t)((col / kSlabCols) * Cfg::kSlabQBytes) +
                fx_swizzle128_offset((uint32_t)r, (uint32_t)((col % kSlabCols) * kElemBytes));
            *reinterpret_cast<uint32_t *>(smem + off) =
                Pack<Element>::pack(acc_o[4 * d + 2 * h], acc_o[4 * d + 2 * h + 1]);
        }
    }
    __syncwarp();
    {
        constexpr int kChunks = Cfg::kHeadDim / kChunkElems;
#pragma unroll
        for (int idx = lane; idx < 16 * kChunks; idx += kWarpSize) {
            const int r = local_row0 + idx / kChunks, chunk = idx % kChunks;
            const int col_bytes = chunk * kChunkBytes;
            const uint32_t off =
                (uint32_t)((col_bytes / kSlabRowBytes) * Cfg::kSlabQBytes) +
                fx_swizzle128_offset((uint32_t)r, (uint32_t)(col_bytes % kSlabRowBytes));
            if (r < rows_valid)
                *reinterpret_cast<uint4 *>(O + r * p.o_row_stride + chunk * kChunkElems) =
                    *reinterpret_cast<const uint4 *>(smem + off);
        }
    }
    if (t == 0) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = local_row0 + g + 8 * h;
            if (r < rows_valid)
                LSE[r] = lse[h];
        }
    }
}

/* ---------------------------------------------------------------------------------
 * Host launcher
 * ------------------------------------------------------------------------------ */

/* Encodes the 4D map {head_dim, heads, seqlen, batch} of one tensor with a box of
 * box_rows × 64 columns; prints the reason and returns false if the driver or the layout
 * refuses (a stride that is not a multiple of 16 bytes, an unaligned base). */
static bool encode_map(CUtensorMap *map, const void *base, const fx_problem *pr, fx_layout l,
                       int seqlen, int heads, uint32_t box_rows, const char *name)
{
    char why[256];
    const fx_tma_tiled t = fx_tma_tiled_qkv(base, pr->dtype, l, pr->batch, seqlen, heads,
                                            pr->head_dim, box_rows, kSlabCols);
    if (fx_tma_encode_tiled(map, &t, why, sizeof why) != FX_TMA_OK) {
        fprintf(stderr, "05_wgmma: the tensor map of %s: %s\n", name, why);
        return false;
    }
    return true;
}

template <class Cfg, class Element, bool kCausal>
static cudaError_t launch(const fx_fwd_args *a)
{
    const fx_problem *pr = a->p;
    WgmmaFwdParams p;
    if (!encode_map(&p.tma_q, a->q, pr, a->q_layout, pr->seqlen_q, pr->heads_q, Cfg::kBlockM,
                    "Q") ||
        !encode_map(&p.tma_k, a->k, pr, a->k_layout, pr->seqlen_k, pr->heads_kv, Cfg::kBlockN,
                    "K") ||
        !encode_map(&p.tma_v, a->v, pr, a->v_layout, pr->seqlen_k, pr->heads_kv, Cfg::kBlockN, "V"))
        return cudaErrorInvalidValue;
    p.o = a->o;
    p.lse = a->lse;
    p.o_batch_stride = a->o_layout.batch_stride;
    p.o_head_stride = a->o_layout.head_stride;
    p.o_row_stride = (int)a->o_layout.row_stride;
    p.seqlen_q = pr->seqlen_q;
    p.seqlen_k = pr->seqlen_k;
    p.heads_q = pr->heads_q;
    p.q_per_kv = pr->heads_q / pr->heads_kv;
    p.softmax_scale = (float)pr->softmax_scale;
    p.scale_log2 = (float)(pr->softmax_scale * M_LOG2E);

    auto kernel = wgmma_fwd_kernel<Cfg, Element, kCausal>;
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
    if (err != cudaSuccess)
        return err;
    const dim3 grid((unsigned)((pr->seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM),
                    (unsigned)pr->heads_q, (unsigned)pr->batch);
    kernel<<<grid, Cfg::kNThreads, Cfg::kSmemBytes, a->stream>>>(p);
    return cudaGetLastError();
}

template <class Cfg, class Element>
static cudaError_t launch_masking(const fx_fwd_args *a)
{
    return a->p->causal ? launch<Cfg, Element, true>(a) : launch<Cfg, Element, false>(a);
}

template <class Cfg>
static cudaError_t launch_dtype(const fx_fwd_args *a)
{
    switch (a->p->dtype) {
    case FX_BF16: return launch_masking<Cfg, __nv_bfloat16>(a);
    case FX_FP16: return launch_masking<Cfg, __half>(a);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" size_t fx_wgmma_fwd_smem_bytes(int head_dim)
{
    switch (head_dim) {
    case 64: return ConfigD64::kSmemBytes;
    case 128: return ConfigD128::kSmemBytes;
    case 256: return ConfigD256::kSmemBytes;
    default: return 0;
    }
}

/* O's 16-byte chunk stores need 16-byte aligned rows (the tensor maps check Q, K and V). */
static bool o_aligned(const void *o, const fx_layout *l)
{
    return ((uintptr_t)o % kChunkBytes) == 0 && l->row_stride % kChunkElems == 0 &&
           l->head_stride % kChunkElems == 0 && l->batch_stride % kChunkElems == 0;
}

extern "C" cudaError_t fx_wgmma_forward(const fx_fwd_args *a)
{
    if (!o_aligned(a->o, &a->o_layout))
        return cudaErrorMisalignedAddress;
    switch (a->p->head_dim) {
    case 64: return launch_dtype<ConfigD64>(a);
    case 128: return launch_dtype<ConfigD128>(a);
    case 256: return launch_dtype<ConfigD256>(a);
    default: return cudaErrorInvalidValue;
    }
}
