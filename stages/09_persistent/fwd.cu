/*
 * fwd.cu — stage 09: stage 08's kernel made persistent, with a tile scheduler.
 *
 * Stage 08 launches one CTA per (Q block, head, batch): 8 to 16 waves of CTAs, each of which
 * initialises its barriers, loads Q and its first K/V block with the tensor cores idle, and
 * leaves its SM idle while its epilogue stores O. Here the grid is one CTA per SM and each
 * CTA loops over tiles in the order a tile scheduler gives: the producer loads the next
 * tile's first K/V block while the consumers still finish this tile (the K/V ring and its
 * mbarrier phases simply run on from tile to tile), and the next Q as soon as every consumer
 * warpgroup has taken its last turn of the tile, the last S GEMM having read Q (q_empty: at
 * head_dim 64 and 128 O has a staging tile of its own; at 256 it is staged in Q's tile, and
 * the next Q waits for its TMA store to have read it). The scheduler hands out the Q blocks of
 * a (batch, head) from the last to the first, which with the causal mask is longest first
 * (the last Q blocks see the most keys); causal problems take the (batch, head) pairs in
 * sections whose K and V fit the L2 together (FA3 §3.1's persistent kernel; FA3's
 * SingleTileLPTScheduler and DynamicPersistentTileScheduler, hopper/tile_scheduler.hpp).
 * A variable-length batch (fx_problem.h's packed layout) runs sequence by sequence: a small
 * prepare kernel counts each sequence's tiles, and every tile carries its sequence's rows and
 * lengths (tile_at_varlen).
 * FX_ABLATION turns the pingpong and/or the overlap off, as in stage 08. docs/09 draws the
 * tile boundary and gives the numbers.
 *
 * The shape every Hopper forward keeps (stage 05 settles it): the pipeline state, the block
 * range and mask, the softmax state, the named barriers, the epilogue, and a mainloop split
 * into masked and unmasked blocks. Code marked UNIT(name) is inherited verbatim from the
 * stage that introduced it (tests/shape/check_units.sh compares the copies).
 *
 * Sources: FA3 §3.1 (persistent kernel) and §3.2, Algorithm 2; PTX ISA §9.7.15.7
 * (wgmma.wait_group), §9.7.13.15 (mbarrier phases), §9.7.9.25.6.2 (cp.async.bulk.wait_group
 * .read: when a TMA store has read its shared memory).
 * Layouts, the other sources and what the Hopper forwards share: common/fx_fwd_sm90.cuh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_fwd_sm90.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ---------------------------------------------------------------------------------
 * Compile-time configuration
 * ------------------------------------------------------------------------------ */

template <int kHeadDim_, int kNumConsumers_, int kBlockN_, int kStages_, int kProducerRegs_,
          int kConsumerRegs_, int kHeadDimGmem_ = kHeadDim_, int kHeadDimV_ = kHeadDim_>
struct Config {
    static constexpr int kHeadDim = kHeadDim_;  // columns of the Q and K tiles in shared memory
    // Columns of the tensors in global memory: kHeadDim, or fewer when the tile is padded
    // (head_dim 96 in a 128-column tile: TMA fills columns past the tensor's with zeros on
    // load and drops them on store; what the threads store themselves stops at this).
    static constexpr int kHeadDimGmem = kHeadDimGmem_;
    // Columns of the V and O tiles (head_dim_v): kHeadDim, or fewer (192 with 128: V's and O's
    // own width, not padded), and of V and O in global memory.
    static constexpr int kHeadDimV = kHeadDimV_;
    static constexpr int kHeadDimVGmem = kHeadDimV_ == kHeadDim_ ? kHeadDimGmem_ : kHeadDimV_;
    static constexpr int kNumConsumers = kNumConsumers_;     // consumer warpgroups
    static constexpr int kBlockM = kNumConsumers * kWgmmaM;  // query rows per CTA
    static constexpr int kBlockN = kBlockN_;                 // keys per K/V block
    static constexpr int kStages = kStages_;                 // K/V ring depth
    // K's release: true, after the S GEMM on k_empty, a softmax and a PV GEMM before V's on
    // v_empty, so that a producer warpgroup can refill K meanwhile (stage 06 on); false, with
    // V's after the PV GEMM, on v_empty alone (stage 05: thread 0 refills only after its own
    // PV GEMM, and the extra arrival and wait per block measured slower, docs/05_wgmma.md).
    // It selects in load_kv and mainloop_step; 07's and later mainloops assume it true.
    static constexpr bool kReleaseKAfterS = true;
    // The causal mask's form (apply_mask): FA3's, one limit per row against constant column
    // offsets, where it measured faster (head_dim 64: 192 × 128, two masked blocks per tile);
    // elsewhere that of stages 05-08, which measured about 1 % faster at head_dim 128 and 256
    // causal (docs/09_persistent.md, "The mask after the descriptor change").
    static constexpr bool kMaskPerRowLimit = kHeadDim_ == 64;
    static constexpr int kNThreads = (kNumConsumers + 1) * kWarpgroupThreads;  // + producer
    static constexpr int kNConsumerWarps = kNumConsumers * kWarpsPerWarpgroup;
    static constexpr int kSlabs = kHeadDim / kSlabCols;    // 64-column slabs per Q, K row
    static constexpr int kSlabsV = kHeadDimV / kSlabCols;  // ... per V, O row
    // Per thread: S is m64 × kBlockN fp32 over 128 threads = kBlockN/2 registers, O is
    // kHeadDimV/2, P (16-bit pairs) kBlockN/4 in kPFrags A fragments of 4.
    static constexpr int kAccS = kBlockN / 2;
    static constexpr int kAccO = kHeadDimV / 2;
    static constexpr int kPFrags = kBlockN / kWgmmaK;
    static constexpr int kNTiles = kBlockN / 8;    // n8 column blocks of S per thread's row
    static constexpr int kDTiles = kHeadDimV / 8;  // n8 column blocks of O
    static constexpr int kSlabQBytes = kBlockM * kSlabRowBytes;
    static constexpr int kSlabKVBytes = kBlockN * kSlabRowBytes;
    // setmaxnreg targets (multiples of 8). It only moves registers between warpgroups: they
    // must fit (kNumConsumers + 1) entry caps, or setmaxnreg.inc waits for them forever.
    static constexpr int kProducerRegs = kProducerRegs_;
    static constexpr int kConsumerRegs = kConsumerRegs_;
    static constexpr int kEntryRegs = (65536 / kNThreads) / 8 * 8;
    static_assert(kProducerRegs + kNumConsumers * kConsumerRegs <=
                      (kNumConsumers + 1) * (kEntryRegs < 255 ? kEntryRegs : 255),
                  "setmaxnreg: the warpgroups ask for more registers than the launch gives");

    static_assert(kHeadDim % kSlabCols == 0 && kHeadDimV % kSlabCols == 0,
                  "head_dim and head_dim_v are whole 64-column slabs");
    static_assert(kHeadDimV <= kHeadDim, "O may be staged in Q's tile: no wider than it");
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
 *  - d=256: 2 consumer warpgroups, 128×80 (FA3's tile for head_dim 256): S 40 + O 128 + P 20
 *    (O dominates); Q and two K/V stages of 2 · 40 KiB fill the 227 KiB a CTA may have. Stage
 *    08's 128×64 was 1-3.5 % slower from 2k keys on under the persistent grid (docs/09, "FA3's
 *    tiles"); 128×80 fits the consumers' 240 registers only with the lane, the consumer and
 *    the softmax scale not held in registers across the mainloop (consumer_now, lane_now).
 *  - d=96: d=128's tile, its last 32 columns zeros. A 96-column row is 192 bytes, one and a
 *    half 128B-swizzle spans: the second 64-column box of each row reaches past the tensor,
 *    and TMA fills its last 32 columns with zeros on the load (so they add 0 to S and make
 *    O's last 32 columns 0) and drops them on the store. It costs a quarter of the tensor
 *    cores' work, as a 128-column head would (FA3 instead keeps 96 columns: 192×144 tiles,
 *    the last 32 columns in a 64B-swizzled box of their own).
 *  - d=192: 2 consumer warpgroups, 128×96: S 48 + O 96 + P 24, three 64-column slabs per
 *    row. FA3's 128×112 (S 56, P 28) spilled 8 bytes here (ptxas, sm_90a, the causal kernel).
 *    Q's 48 KiB and two K/V stages of 2 · 36 KiB leave no room for O's own staging tile, so O
 *    is staged in Q's, as at 256.
 *  - d=192 with head_dim_v 128 (DeepSeek's shape): 2 consumer warpgroups, 128×128, FA3's
 *    tile for it (hopper/tile_size.h: kBlockN 128 where head_dim_v <= 128): S 64 + O 64 + P
 *    32, d=128's registers, as O is 128 columns wide. Q and K are three 64-column slabs a
 *    row, V and O two. Q's 48 KiB and two stages of K (48 KiB) and V (32 KiB) make 208 KiB:
 *    no room for O's own 32 KiB, so O is staged in Q's tile (its first two slabs).
 * Registers after setmaxnreg (the budgets of the public FA3 kernels): d=64, 512 threads:
 * entry cap 128, producer 32, consumers 160 (32 + 3·160 = 512); d=96 to 256, 384 threads:
 * entry cap 168, producer 24, consumers 240 (24 + 2·240 = 504).
 */
using ConfigD64 = Config<64, 3, 128, 2, 32, 160>;
using ConfigD96 = Config<128, 2, 128, 2, 24, 240, 96>;
using ConfigD192 = Config<192, 2, 96, 2, 24, 240>;
using ConfigD192V128 = Config<192, 2, 128, 2, 24, 240, 192, 128>;
using ConfigD256 = Config<256, 2, 80, 2, 24, 240>;
#ifndef FX_STAGE09_FA3_TILES
using ConfigD128 = Config<128, 2, 128, 2, 24, 240>;
#else
/* FA3's tile at head_dim 128 (hopper/tile_size.h: 128×176, without its 2-CTA cluster), built
 * only to measure it under persistence (cmake -DFX_STAGE09_FA3_TILES=ON; docs/09, "FA3's
 * tiles"): slower than 128×128 below 8k keys. The K/V ring of 176-key blocks leaves no room
 * for O's own staging tile. */
using ConfigD128 = Config<128, 2, 176, 2, 24, 240>;
#endif

/* ---------------------------------------------------------------------------------
 * Shared-memory plan: Q, O's staging tile (at head_dim 256 Q's tile is O's), kStages K and V
 * tiles,
 * each tile head_dim/64 slabs of rows × 128 bytes as TMA writes them with the 128B swizzle
 * (each slab on a 1024-byte boundary: the swizzle's period), then the mbarriers.
 * ------------------------------------------------------------------------------ */

/* O gets a staging tile of its own where it fits beside Q and the K/V ring (with 2 KiB for
 * the barriers and the alignment slack): at head_dim 64, 96 and 128 (114, 194 and 194 KiB per
 * CTA with it); at 192 (with head_dim_v 192 or 128) and 256 Q and the K/V ring leave no room
 * for it. Q and K have kHeadDim columns, V and O kHeadDimV. */
template <class Cfg>
constexpr bool kSeparateO = (Cfg::kBlockM + Cfg::kStages * Cfg::kBlockN) *
                                    (Cfg::kHeadDim + Cfg::kHeadDimV) * kElemBytes
                                + 2048 <=
                            FX_SMEM_PER_BLOCK_OPTIN_SM90;

template <class Cfg>
struct SharedStorage {
    alignas(kSwizzleAtomBytes) uint16_t q[Cfg::kBlockM * Cfg::kHeadDim];
    // O's staging tile, apart from Q's where shared memory allows (kSeparateO): then the next
    // tile's Q may land while this tile's epilogue stores O. Head_dim 256 stages O in Q's tile.
    alignas(kSwizzleAtomBytes) uint16_t o[kSeparateO<Cfg> ? Cfg::kBlockM * Cfg::kHeadDimV : 8];
    alignas(kSwizzleAtomBytes) uint16_t k[Cfg::kStages][Cfg::kBlockN * Cfg::kHeadDim];
    alignas(kSwizzleAtomBytes) uint16_t v[Cfg::kStages][Cfg::kBlockN * Cfg::kHeadDimV];
    uint64_t q_full;   // Q of this CTA's current tile has landed (one phase per tile)
    uint64_t q_empty;  // Q's tile is free: every consumer warpgroup is done with it (kSeparateO:
                       // its last turn; else: its store of O, staged there, has read it)
    // The scheduler's hand-off: the producer writes the next tile's position into
    // tile_idx[s] and arrives on tile_full[s]; every consumer warp reads it and arrives on
    // tile_empty[s]. Two slots, so the producer can publish tile i+1 while tile i runs.
    int tile_idx[2];
    uint64_t tile_full[2];
    uint64_t tile_empty[2];
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
static_assert(kSmemBytes<ConfigD96> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=96 fits");
static_assert(kSmemBytes<ConfigD128> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=128 fits");
static_assert(kSmemBytes<ConfigD192> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=192 fits");
static_assert(kSmemBytes<ConfigD192V128> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=192, dv=128 fits");
static_assert(kSmemBytes<ConfigD256> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=256 fits");

/* UNIT(named_barriers, changed: the turn barriers of the pingpong schedule) */
/* Hardware named barriers (PTX ISA §9.7.13.1; id 0 is __syncthreads'), the threads that
 * meet at each. */
enum NamedBarrier : uint32_t {
    // + consumer (at most 3): one consumer warpgroup's threads before its TMA store of O.
    kBarrierEpilogue = 1,
    // + consumer (at most 3): consumer c's turn at the tensor cores (2 warpgroups meet).
    kBarrierTurn = 4,
};
constexpr uint32_t kEpilogueThreads = kWarpgroupThreads;
static_assert(ConfigD64::kNumConsumers <= 3 && ConfigD128::kNumConsumers <= 3 &&
                  ConfigD256::kNumConsumers <= 3,
              "at most 3 consumer warpgroups: the epilogue's barriers are ids 1-3");
constexpr uint32_t kTurnThreads = 2 * kWarpgroupThreads;
/* END UNIT */

/* UNIT(descriptors, changed: a k16 slice's descriptor is its tile's, advanced by an add) */
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

/* Stage 09: a slice's descriptor is the tile's descriptor advanced by the slice's offset (a
 * compile-time constant once the k loop is unrolled), not encoded anew from its address. The
 * encoding masks, shifts and ors the address (ULOP3, USHF, ULOP3 on the uniform datapath),
 * and ptxas cannot turn that into an add, since address + offset might carry out of the
 * 14-bit field: encoded per slice, that was three uniform instructions more per wgmma, 16
 * wgmmas a K/V block at head_dim 128 (docs/09, "Where the extra instructions are"). Now one
 * encoding per tile (per stage of the ring), then one 32-bit add per slice, as CUTLASS's
 * descriptor iterator does. */
template <class Cfg>
__device__ __forceinline__ uint64_t desc_q(uint32_t sQ, int consumer, int kk)
{
    const uint64_t tile =
        fx_wgmma_desc_k_sw128(sQ + (uint32_t)(consumer * kWgmmaM * kSlabRowBytes));
    return fx_wgmma_desc_advance(
        tile, (uint32_t)((kk / 4) * Cfg::kSlabQBytes + (kk % 4) * FX_WGMMA_K16_STEP_K_MAJOR_BYTES));
}

template <class Cfg>
__device__ __forceinline__ uint64_t desc_k(uint32_t sK, int kk)
{
    return fx_wgmma_desc_advance(
        fx_wgmma_desc_k_sw128(sK),
        (uint32_t)((kk / 4) * Cfg::kSlabKVBytes + (kk % 4) * FX_WGMMA_K16_STEP_K_MAJOR_BYTES));
}

template <class Cfg>
__device__ __forceinline__ uint64_t desc_v(uint32_t sV, int kk)
{
    return fx_wgmma_desc_advance(fx_wgmma_desc_mn_sw128(sV, (uint32_t)Cfg::kSlabKVBytes),
                                 (uint32_t)(kk * FX_WGMMA_K16_STEP_MN_MAJOR_BYTES));
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

/* UNIT(loads, changed: K/V rows from the sequence's first row, for a varlen batch; V's tile
 * has head_dim_v columns) */
/* ---------------------------------------------------------------------------------
 * Producer: TMA loads of one tile, one box per 64-column slab
 * ------------------------------------------------------------------------------ */

/* Announces the tile's bytes on `bar`, then issues its kSlabs boxes (head_dim/64 for Q and
 * K, head_dim_v/64 for V) at coordinates {64·slab, head, row0, batch} of the map {head_dim,
 * heads, seqlen, batch}. Rows past the tensor's seqlen are zero-filled by TMA and still
 * count as delivered bytes. */
template <class Cfg, int kSlabs>
__device__ __forceinline__ void load_tile(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                          int rows, int head, int row0, int batch)
{
    fx_mbarrier_arrive_expect_tx(bar, (uint32_t)(rows * kSlabs * kSlabRowBytes));
#pragma unroll
    for (int s = 0; s < kSlabs; ++s)
        fx_tma_load_4d(dst + (uint32_t)(s * rows * kSlabRowBytes), map, bar, s * kSlabCols, head,
                       row0, batch);
}

/* K and V of block n_block into the ring at `write`; the block's first row is key_row0 +
 * n_block·kBlockN (key_row0: the sequence's first row in a packed varlen batch, else 0). A
 * refill (the second pass over the ring on) first waits until every consumer warp has
 * released the stage: its empty barriers' phase for the pass before has the parity
 * write.phase ^ 1. */
template <class Cfg>
__device__ __forceinline__ void load_kv(const FwdParams &p, SharedStorage<Cfg> &smem,
                                        PipelineState write, bool refill, int n_block, int head_kv,
                                        int batch, int key_row0)
{
    const int row = key_row0 + n_block * Cfg::kBlockN;
    if (refill)
        fx_mbarrier_wait(fx_smem_addr(Cfg::kReleaseKAfterS ? &smem.k_empty[write.stage]
                                                           : &smem.v_empty[write.stage]),
                         write.phase ^ 1);
    load_tile<Cfg, Cfg::kSlabs>(fx_smem_addr(smem.k[write.stage]), &p.tma_k,
                                fx_smem_addr(&smem.k_full[write.stage]), Cfg::kBlockN, head_kv, row,
                                batch);
    if (refill && Cfg::kReleaseKAfterS)
        fx_mbarrier_wait(fx_smem_addr(&smem.v_empty[write.stage]), write.phase ^ 1);
    load_tile<Cfg, Cfg::kSlabsV>(fx_smem_addr(smem.v[write.stage]), &p.tma_v,
                                 fx_smem_addr(&smem.v_full[write.stage]), Cfg::kBlockN, head_kv,
                                 row, batch);
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

/* ---------------------------------------------------------------------------------
 * Tile scheduler: which (Q block, head, batch) a CTA works on next
 *
 * A tile is one Q block of one (batch, head). The grid is at most one CTA per SM. CTA b
 * starts with position b of one fixed order and then takes either position b + gridDim.x,
 * b + 2·gridDim.x, .. (static round-robin) or the next position no CTA has taken yet (an
 * atomic counter: dynamic). The producer decides and hands each position to the consumers
 * through shared memory (publish_tile, consumer_next_tile). The order, as FA3's LPT
 * scheduler: the (batch, head) pairs in sections of `section` pairs (causal: as many as
 * have their K and V in the L2 together, sized by the host; else one pair, m-fastest), a
 * section's tiles before the next section's; inside a section the Q blocks from the last to
 * the first, the section's pairs side by side at each. With causal masking the last Q block
 * sees the most keys, so the longest tiles go first and the short ones fill the end of the
 * launch (with the dynamic fetch: round-robin over a sorted order is not balanced, docs/09);
 * the CTAs running at one time read the K and V of one section, which stay in the L2.
 * ------------------------------------------------------------------------------ */

struct SchedParams {
    int num_m_blocks;  // Q blocks per (batch, head)
    int num_bh;        // batch · heads_q
    int section;       // (batch, head) pairs per section, 1..num_bh
    int num_tiles;     // num_m_blocks · num_bh
    // Dynamic fetching: a CTA's first tile is its blockIdx.x, every next one the position
    // gridDim.x + atomicAdd(counter, 1), so a CTA that finishes early takes the next tile
    // of the order instead of a fixed one. The counter lives in the call's workspace and is
    // zeroed in stream order before the launch (launch_persistent), so calls on different
    // streams, each with its own workspace, do not share it. nullptr: static round-robin.
    int *counter;
    // A variable-length batch (fx_problem.h's packed layout), nullptr otherwise: the
    // sequences' row offsets and lengths, and tile_start[b], the position of sequence b's
    // first tile (b = 0..batch; tile_start[batch] is the number of tiles), which
    // varlen_prepare_kernel computes in the call's workspace before the launch.
    const int *cu_seqlens_q, *cu_seqlens_k, *seqused_k;
    const int *tile_start;
    int batch;    // sequences
    int total_q;  // rows of the packed Q and O: the LSE's head stride
};

/* One tile: Q block m_block of one (sequence, head). The rows of the tensor maps it reads and
 * writes start at q_row0 (Q, O) and k_row0 (K, V) of batch index `batch`; the sequence has
 * seqlen_q queries and seqlen_k keys, the lengths every mask and block range is taken in. A
 * fixed-length batch: rows from 0 and the problem's lengths. A varlen batch: the packed
 * tensors' rows of the sequence (cu_seqlens), batch index 0 (their maps have one batch). */
struct Tile {
    int m_block, head, batch;
    int q_row0, k_row0;
    int seqlen_q, seqlen_k;
};

/* The number of tiles in the order (every position from it on means: no more tiles). */
template <bool kVarlen>
__device__ __forceinline__ int num_tiles(const SchedParams &s)
{
    return kVarlen ? __ldg(&s.tile_start[s.batch]) : s.num_tiles;
}

/* The tile at position idx (0 <= idx < num_tiles) of the order above, fixed-length batch. */
__device__ __forceinline__ Tile tile_at_fixed(const FwdParams &p, const SchedParams &s, int idx)
{
    /* ASSIGNMENT(scheduler): the tile at position idx of the order drawn above: sections of
     * s.section (batch, head) pairs, and in a section the Q blocks last to first, the
     * section's pairs side by side at each (the last section may hold fewer pairs).
     * stub: return Tile{}; */
    const int per_section = s.section * s.num_m_blocks;
    const int sec = idx / per_section;
    const int in_sec = idx - sec * per_section;
    // The last section may hold fewer pairs.
    const int pairs = min(s.section, s.num_bh - sec * s.section);
    const int rank = in_sec / pairs;  // 0: the last Q block
    const int bh = sec * s.section + (in_sec - rank * pairs);
    Tile t;
    t.m_block = s.num_m_blocks - 1 - rank;
    t.head = bh % p.heads_q;
    t.batch = bh / p.heads_q;
    t.q_row0 = 0;
    t.k_row0 = 0;
    t.seqlen_q = p.seqlen_q;
    t.seqlen_k = p.seqlen_k;
    return t;
    /* END ASSIGNMENT */
}

/*
 * The tile at position idx of a variable-length batch. The order: sequence by sequence, as
 * the batch lists them; in a sequence, head by head, and in a head the Q blocks from the last
 * to the first (the m-fastest order of the fixed-length batch, one sequence at a time:
 * consecutive tiles read the same K and V, and with the mask the longest go first). Sequence
 * b holds the positions [tile_start[b], tile_start[b+1]), heads_q · ceil(seqlen_q(b) /
 * kBlockM) of them (none for an empty sequence): the sequence of idx is the last b with
 * tile_start[b] <= idx, found by a binary search over the batch (at most 10 steps for 1024
 * sequences, L1-resident loads), by every thread that needs the tile, independently.
 */
template <class Cfg>
__device__ __forceinline__ Tile tile_at_varlen(const SchedParams &s, int idx)
{
    int lo = 0, hi = s.batch - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (__ldg(&s.tile_start[mid]) <= idx)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int b = lo;
    const int first = __ldg(&s.tile_start[b]);
    const int q_row0 = __ldg(&s.cu_seqlens_q[b]);
    const int seqlen_q = __ldg(&s.cu_seqlens_q[b + 1]) - q_row0;
    const int m_blocks = (seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;  // >= 1: idx is here
    const int local = idx - first;
    Tile t;
    t.head = local / m_blocks;
    t.m_block = m_blocks - 1 - (local - t.head * m_blocks);
    t.batch = 0;
    t.q_row0 = q_row0;
    t.seqlen_q = seqlen_q;
    t.k_row0 = __ldg(&s.cu_seqlens_k[b]);
    t.seqlen_k = s.seqused_k ? __ldg(&s.seqused_k[b]) : __ldg(&s.cu_seqlens_k[b + 1]) - t.k_row0;
    return t;
}

template <class Cfg, bool kVarlen>
__device__ __forceinline__ Tile tile_at(const FwdParams &p, const SchedParams &s, int idx)
{
    return kVarlen ? tile_at_varlen<Cfg>(s, idx) : tile_at_fixed(p, s, idx);
}

/*
 * A variable-length batch's tile positions: tile_start[b] = heads_q · Σ_{b' < b} ceil(
 * seqlen_q(b') / block_m) for b = 0..batch, an exclusive scan over the sequences, and the
 * dynamic scheduler's counter zeroed (nullptr: static), in the stream before the persistent
 * kernel reads them. One CTA of batch rounded up to 32 threads (batch <= 1024): a scan within
 * each warp (shfl_up), one over the warps' totals, one sequence per thread. FA3 computes the
 * same in its prepare kernel (hopper/flash_prepare_scheduler.cu), with the warp scan done
 * again in the scheduler instead of stored.
 */
__global__ void varlen_prepare_kernel(const int *cu_seqlens_q, int batch, int heads_q, int block_m,
                                      int *tile_start, int *counter)
{
    __shared__ int warp_total[32];
    const int b = (int)threadIdx.x, lane = b % kWarpSize, warp = b / kWarpSize;
    int x = 0;  // this sequence's tiles, then the inclusive scan of the warp's
    if (b < batch)
        x = (cu_seqlens_q[b + 1] - cu_seqlens_q[b] + block_m - 1) / block_m * heads_q;
    for (int d = 1; d < kWarpSize; d *= 2) {
        const int y = __shfl_up_sync(kFullWarp, x, d);
        if (lane >= d)
            x += y;
    }
    if (lane == kWarpSize - 1)
        warp_total[warp] = x;
    __syncthreads();
    if (warp == 0) {
        const int n_warps = ((int)blockDim.x + kWarpSize - 1) / kWarpSize;
        int w = lane < n_warps ? warp_total[lane] : 0;
        for (int d = 1; d < kWarpSize; d *= 2) {
            const int y = __shfl_up_sync(kFullWarp, w, d);
            if (lane >= d)
                w += y;
        }
        if (lane < n_warps)
            warp_total[lane] = w;  // now the inclusive scan over the warps
    }
    __syncthreads();
    if (b < batch)
        tile_start[b + 1] = (warp > 0 ? warp_total[warp - 1] : 0) + x;
    if (b == 0) {
        tile_start[0] = 0;
        if (counter)
            *counter = 0;
    }
}

/* The producer's next position after idx: the static stride, or the counter's next. The grid
 * size is read here each time (asm volatile, %nctaid.x), not hoisted out of the producer's
 * loop: with its 24 registers ptxas kept it in local memory there. */
__device__ __forceinline__ int next_tile(const SchedParams &s, int idx)
{
    /* ASSIGNMENT(scheduler): the position after idx: with a counter (dynamic), the grid size
     * plus the counter's next value, so a CTA done early takes the next untaken tile; without
     * one (static), idx plus the grid size.
     * stub: return idx; */
    int grid;
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(grid));
    return s.counter ? grid + atomicAdd(s.counter, 1) : idx + grid;
    /* END ASSIGNMENT */
}

/* The hand-off ring of tile positions (SharedStorage::tile_idx). `n` counts the hand-offs
 * so far: slot n % 2, whose barriers complete one phase per use, parity (n / 2) % 2 (one
 * register for the ring's stage and phase). The mbarriers order the accesses (arrive is a
 * release, the wait an acquire, PTX ISA §9.7.13.15). The accesses are atomics only for
 * compute-sanitizer's racecheck, which does not see the mbarriers' ordering and reported the
 * plain load and store as a race. */
template <class Storage>
__device__ __forceinline__ void publish_tile(Storage &smem, int &n, int idx)
{
    const int slot = n & 1;
    const uint32_t phase = (uint32_t)(n >> 1) & 1;
    if (n >= 2)  // the consumers must have read what this slot held before
        fx_mbarrier_wait(fx_smem_addr(&smem.tile_empty[slot]), phase ^ 1);
    atomicExch(&smem.tile_idx[slot], idx);
    fx_mbarrier_arrive(fx_smem_addr(&smem.tile_full[slot]));  // release: idx is visible
    ++n;
}

/* The next position, for every thread of a consumer warp: lane 0 reads it and passes it on,
 * then tells the producer the slot is free. */
template <class Storage>
__device__ __forceinline__ int consumer_next_tile(Storage &smem, int &n)
{
    int lane;  // read here (%laneid), so no lane index stays live across the tile loop
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    const int slot = n & 1;
    fx_mbarrier_wait(fx_smem_addr(&smem.tile_full[slot]), (uint32_t)(n >> 1) & 1);
    int idx = 0;
    if (lane == 0) {
        idx = atomicAdd(&smem.tile_idx[slot], 0);
        fx_mbarrier_arrive(fx_smem_addr(&smem.tile_empty[slot]));
    }
    ++n;
    return __shfl_sync(kFullWarp, idx, 0);
}

/* UNIT(mask, changed: head_dim 64 causal compares column offsets with one limit per row) */
/*
 * Accumulator layout of m64nNk16 (PTX ISA §9.7.15.5.1.1), per warp w of the warpgroup, lane
 * l (g = l/4, t = l%4): acc[4j + 2h + e] = D[16w + g + 8h][8j + 2t + e] — the n8 blocks of
 * an mma.sync m16n8k16 accumulator side by side: a lane holds 2 columns of rows g and g+8
 * per n8 block, and the row statistics are reduced over the 4 lanes t = 0..3.
 *
 * Sets S to -inf where this lane's rows (query row0 and row0 + 8) must not see the key: keys
 * at or past seqlen_k, and (causal) keys past row + seqlen_k − seqlen_q. col0 is this lane's
 * first key (n_block·kBlockN + 2t).
 *
 * Stage 09, causal: the limit is taken relative to col0 once per row (col_end: this lane's
 * columns col0 + [0, col_end) are visible), and each column compares its offset 8j + e, a
 * constant, against it, as FA3's mask does (hopper/mask.h). Written as col0 + 8j + e >=
 * key_end, each of the 2·kNTiles columns was an add and a register of its own; with the
 * descriptors advanced by an add, ptxas moved those adds and the compares above the turn
 * barrier and the S wgmma and, short of predicate registers, kept the compares packed as bits
 * of two registers (a LOP3 to set each bit, another to test it): the masked block grew by a
 * third at head_dim 64, causal. It is used there alone (Cfg::kMaskPerRowLimit): without
 * causality only the seqlen_k tail is masked, once per tile, and the new form, harmless in
 * itself, moved ptxas's schedule of the whole kernel (4 % slower at head_dim 64 on an H100);
 * at head_dim 128 and 256 causal it measured about 1 % slower (docs/09, "The mask after the
 * descriptor change").
 */
template <class Cfg, bool kCausal>
__device__ __forceinline__ void apply_mask(float (&acc_s)[Cfg::kAccS], int row0, int col0,
                                           int seqlen_q, int seqlen_k)
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (kCausal && Cfg::kMaskPerRowLimit) {
            // keys col0 + [0, col_end) are visible to this row
            const int col_end = min(seqlen_k - col0, row0 + 8 * h + 1 + seqlen_k - seqlen_q - col0);
#pragma unroll
            for (int j = 0; j < Cfg::kNTiles; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    if (8 * j + e >= col_end)
                        acc_s[4 * j + 2 * h + e] = -INFINITY;
        } else {                     // the form of stages 05-08 (see above)
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

/* UNIT(gemms, changed: PV's N is head_dim_v, O's width) */
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
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / kWgmmaK; ++kk)
        Wgmma<Element, Cfg::kBlockN>::ss_k_major(acc_s, desc_q<Cfg>(sQ, consumer, kk),
                                                 desc_k<Cfg>(sK, kk), kk > 0);
    fx_wgmma_commit();
}

/* Issues O += P·V: kBlockN/16 RS wgmmas of N = head_dim_v reading the P fragments, one
 * commit group. The
 * fragments must stay untouched until the group has completed (the tensor cores read them
 * asynchronously). */
template <class Cfg, class Element>
__device__ __forceinline__ void issue_pv(float (&acc_o)[Cfg::kAccO],
                                         const uint32_t (&p_frag)[Cfg::kPFrags][4], uint32_t sV)
{
#pragma unroll
    for (int kk = 0; kk < Cfg::kPFrags; ++kk)
        Wgmma<Element, Cfg::kHeadDimV>::rs_b_mn_major(acc_o, p_frag[kk], desc_v<Cfg>(sV, kk), true);
    fx_wgmma_commit();
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

/* The consumer warpgroup, the lane and the softmax scale in the mainloop. At head_dim 256
 * (128×80: O 128 + S 40 + P 20 registers a thread) the three registers that hold them across
 * the mainloop made the consumers spill (ptxas, sm_90a), so there they are read where they are
 * used: the warpgroup and the lane from %tid.x and %laneid (asm volatile: one S2R each), the
 * scale from the kernel's parameters (an operand of the FFMA, no register). At the other head
 * dims they stay in the ConsumerCtx: re-read there, head_dim 128 without the mask ran about
 * 3.5 % slower from 4k keys on (measured, docs/09). */
template <class Cfg>
constexpr bool kLeanMainloop = Cfg::kHeadDim == 256;

/* UNIT(consumer_ctx, changed: the tile, its rows and lengths come from the scheduler; the
 * softmax scale only where the mainloop keeps it, kLeanMainloop) */
/* What a consumer thread's mainloop needs that does not change from block to block. */
struct ConsumerCtx {
    int consumer;  // which consumer warpgroup: rows [64·consumer, 64·consumer + 64) of the block
    int warp_in_wg;  // its warp, 16 rows each
    int lane;
    int row0;  // this lane's first query row (g; the other is g + 8), in the sequence
    int m_block, head, batch;
    int q_row0;  // the sequence's first row in Q, O and the LSE (a varlen batch), else 0
    int k_row0;  // its first row in K and V (the epilogue's exact path alone reads it)
    int seqlen_q, seqlen_k;
    float scale_log2;
};

template <class Cfg>
__device__ __forceinline__ ConsumerCtx make_consumer_ctx(const FwdParams &p, int consumer,
                                                         int warp_in_wg, int lane, Tile tile)
{
    ConsumerCtx c;
    c.consumer = consumer;
    c.warp_in_wg = warp_in_wg;
    c.lane = lane;
    c.m_block = tile.m_block;
    c.head = tile.head;
    c.batch = tile.batch;
    c.row0 = c.m_block * Cfg::kBlockM + consumer * kWgmmaM + warp_in_wg * kRowsPerWarp +
             lane / kLanesPerRow;
    c.q_row0 = tile.q_row0;
    c.k_row0 = tile.k_row0;
    c.seqlen_q = tile.seqlen_q;
    c.seqlen_k = tile.seqlen_k;
    if (!kLeanMainloop<Cfg>)  // else unused (scale_log2_of): no register is spent on it
        c.scale_log2 = p.scale_log2;
    return c;
}
/* END UNIT */

/* UNIT(softmax_tail, changed: the scale is an argument, read from the kernel's parameters) */
/* The online softmax's second half, and what ordinary code does to the block before its PV
 * GEMM: P (softmax_exp), O *= alpha (kRescale: not while O is still 0), P packed. */
template <class Cfg, class Element, bool kRescale>
__device__ __forceinline__ void softmax_tail(float scale_log2, SoftmaxState &sm,
                                             float (&acc_s)[Cfg::kAccS], float (&acc_o)[Cfg::kAccO],
                                             uint32_t (&p_frag)[Cfg::kPFrags][4])
{
    softmax_exp<Cfg>(sm, acc_s, scale_log2);
    if (kRescale)
        softmax_rescale_o<Cfg>(acc_o, sm.alpha);
    pack_p<Cfg, Element>(acc_s, p_frag);
}
/* END UNIT */

/* ---------------------------------------------------------------------------------
 * Mainloop
 * ------------------------------------------------------------------------------ */

__device__ __forceinline__ int consumer_now()
{
    int tid;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
    return tid / kWarpgroupThreads - 1;  // warpgroup 0 is the producer
}
__device__ __forceinline__ int lane_now()
{
    int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}
template <class Cfg>
__device__ __forceinline__ int consumer_of(const ConsumerCtx &c)
{
    return kLeanMainloop<Cfg> ? consumer_now() : c.consumer;
}
template <class Cfg>
__device__ __forceinline__ int lane_of(const ConsumerCtx &c)
{
    return kLeanMainloop<Cfg> ? lane_now() : c.lane;
}
template <class Cfg>
__device__ __forceinline__ float scale_log2_of(const FwdParams &p, const ConsumerCtx &c)
{
    return kLeanMainloop<Cfg> ? p.scale_log2 : c.scale_log2;
}

/* Consumer c waits for its turn on barrier kBarrierTurn + c (bar.sync: its 128 threads)
 * and passes it to c + 1 mod kNumConsumers (bar.arrive: 128 more complete it). Consumer 0
 * arrives once to take the first turn and the last one passes no last turn, so arrivals and
 * waits match exactly. Without kPingpong (the ablation) the consumers run free. */
template <class Cfg, bool kPingpong>
__device__ __forceinline__ void take_turn(const ConsumerCtx &c)
{
    if (kPingpong)
        fx_named_barrier_sync(kBarrierTurn + (uint32_t)consumer_of<Cfg>(c), kTurnThreads);
}
template <class Cfg, bool kPingpong>
__device__ __forceinline__ void pass_turn(const ConsumerCtx &c)
{
    if (kPingpong)
        fx_named_barrier_arrive(kBarrierTurn +
                                    (uint32_t)((consumer_of<Cfg>(c) + 1) % Cfg::kNumConsumers),
                                kTurnThreads);
}

/*
 * One turn at the tensor cores: S of block n_block (in the ring at `read`) and PV of the
 * block before it (at `prev`); then the softmax of the new S and P packed for the next turn.
 * The first turn has no PV (kPV false: O is still 0), the last one no S (kS false). kMask:
 * the block needs the causal or seqlen_k mask. kOverlap: the softmax runs while PV_{j-1} is
 * still on the tensor cores; kPingpong: the turns of stage 07 (both off in the ablation).
 */
template <class Cfg, class Element, bool kCausal, bool kMask, bool kS, bool kPV, bool kPingpong,
          bool kOverlap>
__device__ __forceinline__ void mainloop_turn(const FwdParams &p, const ConsumerCtx &c,
                                              SharedStorage<Cfg> &smem, PipelineState read,
                                              PipelineState prev, int n_block,
                                              float (&acc_s)[Cfg::kAccS],
                                              float (&acc_o)[Cfg::kAccO],
                                              uint32_t (&p_frag)[Cfg::kPFrags][4], SoftmaxState &sm)
{
    // Wait for the data before taking the turn, so a late load does not hold it.
    if (kS)
        fx_mbarrier_wait(fx_smem_addr(&smem.k_full[read.stage]), read.phase);
    if (kPV)
        fx_mbarrier_wait(fx_smem_addr(&smem.v_full[prev.stage]), prev.phase);
    take_turn<Cfg, kPingpong>(c);
    fx_wgmma_fence();
    if (kS)
        issue_s<Cfg, Element>(acc_s, fx_smem_addr(smem.q), fx_smem_addr(smem.k[read.stage]),
                              consumer_of<Cfg>(c));
    if (kPV)
        issue_pv<Cfg, Element>(acc_o, p_frag, fx_smem_addr(smem.v[prev.stage]));
    fx_wgmma_fence_operand(acc_s);
    fx_wgmma_fence_operand(acc_o);
    if (kS ||
        consumer_of<Cfg>(c) != Cfg::kNumConsumers - 1)  // no one takes the last consumer's last
        pass_turn<Cfg, kPingpong>(c);

    if (kOverlap && kS && kPV) {
        fx_wgmma_wait<1>();  // the S group (committed first) is done; PV may still run
        fx_wgmma_fence_operand(acc_s);
        if (lane_of<Cfg>(c) == 0)
            fx_mbarrier_arrive(fx_smem_addr(&smem.k_empty[read.stage]));
        if (kMask)
            apply_mask<Cfg, kCausal>(acc_s, c.row0,
                                     n_block * Cfg::kBlockN + 2 * (lane_of<Cfg>(c) % kLanesPerRow),
                                     c.seqlen_q, c.seqlen_k);
        // P while PV_{j-1} runs: P is written into acc_s, which PV_{j-1} does not read.
        softmax_max<Cfg>(sm, acc_s, scale_log2_of<Cfg>(p, c));
        softmax_exp<Cfg>(sm, acc_s, scale_log2_of<Cfg>(p, c));
        // O and the P fragments are PV_{j-1}'s operands: ours again only once it is done.
        fx_wgmma_wait<0>();
        fx_wgmma_fence_operand(acc_o);
        if (lane_of<Cfg>(c) == 0)
            fx_mbarrier_arrive(fx_smem_addr(&smem.v_empty[prev.stage]));
        softmax_rescale_o<Cfg>(acc_o, sm.alpha);
        pack_p<Cfg, Element>(acc_s, p_frag);
        return;
    }
    fx_wgmma_wait<0>();  // both groups: S_j and PV_{j-1}
    fx_wgmma_fence_operand(acc_s);
    fx_wgmma_fence_operand(acc_o);
    if (kS && lane_of<Cfg>(c) == 0)
        fx_mbarrier_arrive(fx_smem_addr(&smem.k_empty[read.stage]));
    if (kPV && lane_of<Cfg>(c) == 0)
        fx_mbarrier_arrive(fx_smem_addr(&smem.v_empty[prev.stage]));
    if (!kS)
        return;

    // ---- Mask, online softmax, O rescale (no PV group is in flight: O is ours) ----
    if (kMask)
        apply_mask<Cfg, kCausal>(acc_s, c.row0,
                                 n_block * Cfg::kBlockN + 2 * (lane_of<Cfg>(c) % kLanesPerRow),
                                 c.seqlen_q, c.seqlen_k);
    softmax_max<Cfg>(sm, acc_s, scale_log2_of<Cfg>(p, c));
    softmax_tail<Cfg, Element, kPV>(scale_log2_of<Cfg>(p, c), sm, acc_s, acc_o, p_frag);
}

/* ---------------------------------------------------------------------------------
 * Producer warpgroup: one elected lane issues every load
 * ------------------------------------------------------------------------------ */

/* One tile's loads: K and V of every block in mainloop order, each into the ring's next
 * stage once the consumers have released it (load_kv), and Q after the first block. The
 * ring's cursor `write` and its count of fills `loaded` run on from tile to tile, so the
 * first K/V block of a tile loads while the consumers still finish the tile before. The
 * tile_count-th Q (from 0) may overwrite Q's tile only once every consumer warpgroup is done
 * with the Q before, the phase (tile_count − 1) & 1 of q_empty: after its last turn
 * (kSeparateO), or once its store of O, staged in Q's tile at head_dim 256, has read it. */
template <class Cfg>
__device__ __forceinline__ void producer_tile(const FwdParams &p, SharedStorage<Cfg> &smem,
                                              PipelineState &write, int &loaded, int tile_count,
                                              int n_block_max, Tile tile, int head_kv)
{
    for (int it = 0; it < n_block_max; ++it) {
        load_kv<Cfg>(p, smem, write, loaded >= Cfg::kStages, n_block_max - 1 - it, head_kv,
                     tile.batch, tile.k_row0);
        advance<Cfg::kStages>(write);
        ++loaded;
        if (it == 0) {
            if (tile_count > 0)
                fx_mbarrier_wait(fx_smem_addr(&smem.q_empty), (uint32_t)((tile_count - 1) & 1));
            load_tile<Cfg, Cfg::kSlabs>(fx_smem_addr(smem.q), &p.tma_q, fx_smem_addr(&smem.q_full),
                                        Cfg::kBlockM, tile.head,
                                        tile.q_row0 + tile.m_block * Cfg::kBlockM, tile.batch);
        }
    }
}

/* The exact path (common/fx_exact_rows.cuh) for this warp's 16 rows of the tile: the rows of
 * its sequence, the sequence's keys (a varlen batch's views start at q_row0 and k_row0). */
template <class Element>
__device__ __forceinline__ void exact_rows_of_warp(const ConsumerCtx &c, const FwdParams &p,
                                                   int lse_head_stride)
{
    fx_exact_rows_args a = exact_rows_args(p, c.batch, c.head);
    a.q = static_cast<const Element *>(a.q) + (int64_t)c.q_row0 * a.q_row_stride;
    a.k = static_cast<const Element *>(a.k) + (int64_t)c.k_row0 * a.k_row_stride;
    a.v = static_cast<const Element *>(a.v) + (int64_t)c.k_row0 * a.v_row_stride;
    a.o = static_cast<Element *>(a.o) + (int64_t)c.q_row0 * a.o_row_stride;
    a.lse = p.lse + ((int64_t)c.batch * p.heads_q + c.head) * lse_head_stride + c.q_row0;
    a.seqlen_q = c.seqlen_q;
    a.seqlen_k = c.seqlen_k;
    const int row_begin = c.row0 - (c.lane / kLanesPerRow);  // this warp's first row
    fx_exact_rows<Element>(a, row_begin, min(row_begin + kRowsPerWarp, c.seqlen_q));
}

/* UNIT(epilogue, changed: q_empty tells the producer when the Q tile is free; the empty
 * block is written by the consumers alone; a varlen sequence's last rows are stored by the
 * threads; O has head_dim_v columns) */
/* ---------------------------------------------------------------------------------
 * Epilogue: O normalized, through this warpgroup's rows of the staging tile, out by TMA; LSE
 * ------------------------------------------------------------------------------ */

/*
 * O goes through this consumer warpgroup's 64 rows of the staging tile in shared memory (O's
 * own at head_dim 64, 96 and 128; at 192 and 256 the Q tile, whose rows only this
 * warpgroup's wgmmas read, and they have completed), in the 128B-swizzled slab layout that
 * TMA reads. Then every writer fences its generic-proxy stores against the async proxy (PTX
 * ISA §9.7.13.4: without it the TMA may read stale shared memory), the warpgroup's 128
 * threads meet, and one thread stores the 64 × head_dim_v box, one TMA per 64-column slab; rows
 * past seqlen_q lie outside the tensor map and are dropped (a varlen batch: see rows_in
 * below). lse_head_stride: the LSE's elements from one head to the next (seqlen_q; total_q in
 * a varlen batch). The meeting is also the vote on softmax_finalize's range check: a
 * warpgroup with a row out of the fast path's range stores nothing it staged, and each of
 * its warps computes its 16 rows again on the exact path (exact_rows_of_warp).
 */
template <class Cfg, class Element, bool kVarlen>
__device__ __forceinline__ void epilogue(const ConsumerCtx &c, const FwdParams &p,
                                         int lse_head_stride, SharedStorage<Cfg> &smem,
                                         float (&acc_o)[Cfg::kAccO], const SoftmaxState &sm)
{
    float lse[2];
    const bool in_range = softmax_finalize<Cfg>(sm, acc_o, lse);

    unsigned char *sO = reinterpret_cast<unsigned char *>(kSeparateO<Cfg> ? smem.o : smem.q);
    if (kSeparateO<Cfg>) {
        // The tile before's TMA store may still be reading this warpgroup's rows of O: its
        // storing thread waits for the reads, then the warpgroup meets before writing.
        if (threadIdx.x % kWarpgroupThreads == 0)  // warp 0, lane 0: the storing thread
            fx_tma_store_wait_read<0>();
        fx_named_barrier_sync(kBarrierEpilogue + (uint32_t)c.consumer, kEpilogueThreads);
    }
    // The lane's place in O, from threadIdx.x through an empty asm volatile the compiler may
    // not move: its swizzled addresses depend on nothing but the thread, and hoisted out of
    // the loop over tiles they stayed live across the whole mainloop, in local memory
    // (ptxas: 228 bytes of spills at head_dim 256, 60-76 at 64).
    int tid = (int)threadIdx.x;  // read again here, not kept live from the tile's start
    asm volatile("" : "+r"(tid));
    const int lane = tid % kWarpSize, warp_in_wg = (tid / kWarpSize) % kWarpsPerWarpgroup;
    const int local_row0 = c.consumer * kWgmmaM + warp_in_wg * kRowsPerWarp;
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
            *reinterpret_cast<uint32_t *>(sO + off) =
                Pack<Element>::pack(acc_o[4 * d + 2 * h], acc_o[4 * d + 2 * h + 1]);
        }
    }
    fx_fence_proxy_async_smem();
    if (fx_named_barrier_sync_or(kBarrierEpilogue + (uint32_t)c.consumer, kEpilogueThreads,
                                 !in_range)) {
        // Nothing staged is stored; a staging tile that is Q's is free for the next Q now.
        if (!kSeparateO<Cfg> && warp_in_wg == 0 && lane == 0)
            fx_mbarrier_arrive(fx_smem_addr(&smem.q_empty));
        exact_rows_of_warp<Element>(c, p, lse_head_stride);
        return;
    }
    // This warpgroup's rows of the tile that lie in the sequence. TMA drops the rows past the
    // end of the tensor, not past the end of a sequence: in a varlen batch the rows after a
    // sequence's last are the next sequence's, so a box that reaches past it is stored by the
    // warpgroup's threads, 16 bytes each, from the staged tile.
    const int wg_row0 = c.m_block * Cfg::kBlockM + c.consumer * kWgmmaM;  // in the sequence
    const int rows_in = c.seqlen_q - wg_row0;
    if (!kVarlen || rows_in >= kWgmmaM) {
        if (warp_in_wg == 0 && lane == 0) {
            const uint32_t sStage = fx_smem_addr(kSeparateO<Cfg> ? smem.o : smem.q);
#pragma unroll
            for (int s = 0; s < Cfg::kSlabsV; ++s)
                fx_tma_store_4d(&p.tma_o,
                                sStage + (uint32_t)(s * Cfg::kSlabQBytes +
                                                    c.consumer * kWgmmaM * kSlabRowBytes),
                                s * kSlabCols, c.head, c.q_row0 + wg_row0, c.batch);
            fx_tma_store_commit();
            if (!kSeparateO<Cfg>) {
                // The smem must outlive the reads (the CTA may exit next), and the Q tile is
                // then free for the next tile's Q (the producer waits for every consumer).
                fx_tma_store_wait_read<0>();
                fx_mbarrier_arrive(fx_smem_addr(&smem.q_empty));
            }  // else: the next epilogue, or the kernel's end, waits for the reads
        }
    } else {
        constexpr int kChunksPerRow = Cfg::kHeadDimVGmem / kChunkElems;
        Element *O = static_cast<Element *>(p.o) + c.batch * p.o_batch_stride +
                     c.head * p.o_head_stride + (int64_t)(c.q_row0 + wg_row0) * p.o_row_stride;
        for (int i = tid % kWarpgroupThreads; i < rows_in * kChunksPerRow; i += kWarpgroupThreads) {
            const int r = i / kChunksPerRow, col_bytes = (i % kChunksPerRow) * kChunkBytes;
            const uint32_t off = (uint32_t)((col_bytes / kSlabRowBytes) * Cfg::kSlabQBytes) +
                                 fx_swizzle128_offset((uint32_t)(c.consumer * kWgmmaM + r),
                                                      (uint32_t)(col_bytes % kSlabRowBytes));
            *reinterpret_cast<uint4 *>(O + (int64_t)r * p.o_row_stride + col_bytes / kElemBytes) =
                *reinterpret_cast<const uint4 *>(sO + off);
        }
        if (!kSeparateO<Cfg>) {
            // Every thread's reads of the Q tile are done before it is given back.
            fx_named_barrier_sync(kBarrierEpilogue + (uint32_t)c.consumer, kEpilogueThreads);
            if (warp_in_wg == 0 && lane == 0)
                fx_mbarrier_arrive(fx_smem_addr(&smem.q_empty));
        }  // else: the next epilogue's barrier orders these reads before its writes
    }
    if (t == 0) {
        float *LSE = p.lse + ((int64_t)c.batch * p.heads_q + c.head) * lse_head_stride + c.q_row0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = c.row0 + 8 * h;
            if (row < c.seqlen_q)
                LSE[row] = lse[h];
        }
    }
}

/* A Q block whose rows all see no key (causal with seqlen_q > seqlen_k, or a sequence of a
 * varlen batch without keys): O = 0, LSE = -inf,
 * written by the consumer threads (ctid of kNumConsumers · 128) in 16-byte chunks; nothing is
 * loaded for it. */
template <class Cfg, class Element>
__device__ __forceinline__ void write_empty_block(const FwdParams &p, int lse_head_stride,
                                                  Tile tile, int ctid)
{
    constexpr int kChunks = Cfg::kHeadDimVGmem / kChunkElems;
    constexpr int kThreads = Cfg::kNumConsumers * kWarpgroupThreads;
    const int row0 = tile.q_row0 + tile.m_block * Cfg::kBlockM;
    Element *O = static_cast<Element *>(p.o) + tile.batch * p.o_batch_stride +
                 tile.head * p.o_head_stride + (int64_t)row0 * p.o_row_stride;
    float *LSE = p.lse + ((int64_t)tile.batch * p.heads_q + tile.head) * lse_head_stride + row0;
    const int rows = min(Cfg::kBlockM, tile.seqlen_q - tile.m_block * Cfg::kBlockM);
    for (int idx = ctid; idx < rows * kChunks; idx += kThreads) {
        const int row = idx / kChunks, chunk = idx % kChunks;
        *reinterpret_cast<uint4 *>(O + row * p.o_row_stride + chunk * kChunkElems) =
            make_uint4(0, 0, 0, 0);
    }
    for (int row = ctid; row < rows; row += kThreads)
        LSE[row] = -INFINITY;
}
/* END UNIT */

/* ---------------------------------------------------------------------------------
 * The kernel: at most one CTA per SM, each looping over its tiles (tile_at); warpgroup 0
 * produces (TMA), warpgroups 1..kNumConsumers consume 64 rows of each Q block.
 *
 * Grid: min(SMs, tiles) CTAs (launch_persistent) of Cfg::kNThreads threads and
 * kSmemBytes<Cfg> bytes of dynamic shared memory. p: the tensor maps of Q, K, V and O
 * ([batch, seqlen, heads, head_dim], or the packed varlen tensors as batch 1) and the
 * softmax's constants; sched: the tile order, the counter (dynamic) and the varlen arrays
 * (kVarlen). Writes O (p.tma_o, or plain stores for the rows a box may not reach) and the LSE
 * (fp32, natural log; [batch, heads_q, seqlen_q], varlen [heads_q, total_q]).
 * ------------------------------------------------------------------------------ */

template <class Cfg, class Element, bool kCausal, bool kPingpong, bool kOverlap, bool kVarlen>
__global__ void __launch_bounds__(Cfg::kNThreads, 1)
    fwd_kernel(const __grid_constant__ FwdParams p, const SchedParams sched)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t smem_addr = smem_base_aligned(smem_raw);
    SharedStorage<Cfg> &smem = *reinterpret_cast<SharedStorage<Cfg> *>(
        smem_raw + (smem_addr - fx_smem_addr(smem_raw)));  // the same bytes, generic address

    const int tid = threadIdx.x;
    // Broadcast from lane 0, so that ptxas knows the warpgroup is the same in every lane of
    // the warp (a uniform register): Q's wgmma descriptors, which derive from it, then stay in
    // uniform registers across the mainloop instead of two R2UR moves before every S wgmma
    // (CUTLASS's canonical_warp_group_idx does the same).
    const int warpgroup = __shfl_sync(kFullWarp, tid / kWarpgroupThreads, 0);
    const int warp_in_wg = (tid / kWarpSize) % kWarpsPerWarpgroup;

    // ---- Barriers: initialised once per CTA; their phases run on from tile to tile ----
    if (tid == 0) {
        fx_mbarrier_init(fx_smem_addr(&smem.q_full), 1);
        fx_mbarrier_init(fx_smem_addr(&smem.q_empty), Cfg::kNumConsumers);
        for (int s = 0; s < 2; ++s) {
            fx_mbarrier_init(fx_smem_addr(&smem.tile_full[s]), 1);
            fx_mbarrier_init(fx_smem_addr(&smem.tile_empty[s]), Cfg::kNConsumerWarps);
        }
        for (int s = 0; s < Cfg::kStages; ++s) {
            fx_mbarrier_init(fx_smem_addr(&smem.k_full[s]), 1);  // the producer's expect_tx
            fx_mbarrier_init(fx_smem_addr(&smem.v_full[s]), 1);
            fx_mbarrier_init(fx_smem_addr(&smem.k_empty[s]), Cfg::kNConsumerWarps);
            fx_mbarrier_init(fx_smem_addr(&smem.v_empty[s]), Cfg::kNConsumerWarps);
        }
        fx_fence_mbarrier_init();
    }
    __syncthreads();

    // ---- Producer warpgroup: the loads of every tile of this CTA ----
    if (warpgroup == 0) {
        fx_setmaxnreg_dec<Cfg::kProducerRegs>();
        if (warp_in_wg == 0 && fx_elect_one()) {
            PipelineState write = {0, 0};
            int loaded = 0, tile_count = 0, handed = 0;
            for (int idx = blockIdx.x;; idx = next_tile(sched, idx)) {
                publish_tile(smem, handed, idx);  // num_tiles and past: the end
                if (idx >= num_tiles<kVarlen>(sched))
                    break;
                const Tile tile = tile_at<Cfg, kVarlen>(p, sched, idx);
                const BlockRange range =
                    block_range<Cfg, kCausal>(tile.m_block, tile.seqlen_q, tile.seqlen_k);
                if (range.n_block_max == 0)  // the consumers write it; nothing to load
                    continue;
                producer_tile<Cfg>(p, smem, write, loaded, tile_count, range.n_block_max, tile,
                                   tile.head / p.q_per_kv);
                ++tile_count;
            }
        }
        return;  // the loads complete on the consumers' barriers; nothing here waits for them
    }

    // ---- Consumer warpgroups ----
    fx_setmaxnreg_inc<Cfg::kConsumerRegs>();
    // The ring's read cursor runs on from tile to tile, as the producer's write cursor does.
    PipelineState read = {0, 0};
    // What the consumers count from tile to tile, in one register (at head_dim 256 every
    // register counts): bits 0-1 the positions taken from the producer (mod 4: the hand-off
    // ring's slot and phase), bit 2 the tiles with loads (mod 2: the phase of q_full).
    int counts = 0;
    for (;;) {
        int handed = counts & 3;
        const int idx = consumer_next_tile(smem, handed);
        counts = (counts & ~3) | (handed & 3);
        if (idx >= num_tiles<kVarlen>(sched))
            break;
        const Tile tile = tile_at<Cfg, kVarlen>(p, sched, idx);
        const BlockRange range =
            block_range<Cfg, kCausal>(tile.m_block, tile.seqlen_q, tile.seqlen_k);
        if (range.n_block_max == 0) {
            write_empty_block<Cfg, Element>(p, kVarlen ? sched.total_q : p.seqlen_q, tile,
                                            tid - kWarpgroupThreads);
            continue;
        }
        // Blocks run from n_block_max − 1 down to 0, the masked ones first; iteration `it`
        // works on block n_block_max − 1 − it.
        const int n_iters = range.n_block_max;
        const int n_masked = range.n_block_max - range.n_block_unmasked;
        // The lane and warp from threadIdx.x read through an empty asm volatile, once per
        // tile: what derives from them is computed in the tile, not hoisted before setmaxnreg
        // and kept in local memory across every tile (ptxas spilled such values at head_dim
        // 64 and 256).
        int tid_t = (int)threadIdx.x;
        asm volatile("" : "+r"(tid_t));
        const ConsumerCtx c = make_consumer_ctx<Cfg>(
            p, warpgroup - 1, (tid_t / kWarpSize) % kWarpsPerWarpgroup, tid_t % kWarpSize, tile);
        float acc_o[Cfg::kAccO];
#pragma unroll
        for (int i = 0; i < Cfg::kAccO; ++i)
            acc_o[i] = 0.f;
        SoftmaxState sm;
        softmax_init(sm);
        fx_mbarrier_wait(fx_smem_addr(&smem.q_full), (uint32_t)(counts >> 2) & 1);

        // ---- Mainloop, split: the masked blocks first, then the rest without a mask ----
        // (in turns: the first S alone, the last PV alone)
        float acc_s[Cfg::kAccS];
        uint32_t p_frag[Cfg::kPFrags][4];
        PipelineState prev = read;
        // Consumer 0 takes the first turn of every tile. That it cannot pass a turn of this
        // tile to consumer 1 before consumer 1 has taken its last turn of the tile before is
        // q_full's doing: this Q waited for every consumer's q_empty, arrived after that turn.
        if (kPingpong && c.consumer == 0)
            fx_named_barrier_arrive(kBarrierTurn, kTurnThreads);  // take the first turn
        // The first block is masked whether it needs it or not (a mask that hides nothing).
        mainloop_turn<Cfg, Element, kCausal, true, true, false, kPingpong, kOverlap>(
            p, c, smem, read, prev, n_iters - 1, acc_s, acc_o, p_frag, sm);
        prev = read;
        advance<Cfg::kStages>(read);
        int it = 1;
        for (; it < n_masked; ++it) {
            const int n_block = range.n_block_max - 1 - it;
            mainloop_turn<Cfg, Element, kCausal, true, true, true, kPingpong, kOverlap>(
                p, c, smem, read, prev, n_block, acc_s, acc_o, p_frag, sm);
            prev = read;
            advance<Cfg::kStages>(read);
        }
        for (; it < n_iters; ++it) {
            const int n_block = range.n_block_max - 1 - it;
            mainloop_turn<Cfg, Element, kCausal, false, true, true, kPingpong, kOverlap>(
                p, c, smem, read, prev, n_block, acc_s, acc_o, p_frag, sm);
            prev = read;
            advance<Cfg::kStages>(read);
        }
        mainloop_turn<Cfg, Element, kCausal, false, false, true, kPingpong, kOverlap>(
            p, c, smem, read, prev, 0, acc_s, acc_o, p_frag, sm);
        // With O staged apart, Q is free after this warpgroup's last turn: its last S GEMM,
        // in the turn before, has completed. The next Q loads during the epilogue.
        if (kSeparateO<Cfg> && threadIdx.x % kWarpgroupThreads == 0)  // the storing thread
            fx_mbarrier_arrive(fx_smem_addr(&smem.q_empty));

        // The tile's coordinates again, from its position through an empty asm volatile, for
        // the epilogue: kept from the tile's start they are three more registers live across
        // the K/V loop, which at head_dim 256 put a wgmma descriptor in local memory.
        int idx_e = idx, tid_e = (int)threadIdx.x;
        asm volatile("" : "+r"(idx_e), "+r"(tid_e));
        const ConsumerCtx ce =
            make_consumer_ctx<Cfg>(p, warpgroup - 1, (tid_e / kWarpSize) % kWarpsPerWarpgroup,
                                   tid_e % kWarpSize, tile_at<Cfg, kVarlen>(p, sched, idx_e));
        epilogue<Cfg, Element, kVarlen>(ce, p, kVarlen ? sched.total_q : p.seqlen_q, smem, acc_o,
                                        sm);
        counts ^= 4;
    }
    // The last TMA store of O must have read the staging tile before the CTA's shared
    // memory goes (kSeparateO: the epilogue no longer waits itself).
    if (kSeparateO<Cfg> && threadIdx.x % kWarpgroupThreads == 0)  // each storing thread
        fx_tma_store_wait_read<0>();
}

/* ---------------------------------------------------------------------------------
 * Host launcher
 * ------------------------------------------------------------------------------ */

/* The ablation of the FA3 paper's Table 2, chosen by the environment variable FX_ABLATION
 * (unset or "none": the full schedule). Built for head_dim 128 only. */
enum Ablation { kAblationNone, kAblationNoPingpong, kAblationNoOverlap, kAblationNeither };

/* The ablation FX_ABLATION asks for, or -1 with the reason in `why` for an unknown value, a
 * head_dim the variants were not built for, or a variable-length batch (they are built for
 * fixed-length batches only). */
int ablation_parse(int head_dim, bool varlen, char *why, size_t why_len)
{
    // In the order of enum Ablation.
    static const char *const kNames[] = {"none", "no-pingpong", "no-overlap", "neither"};
    const int mode = fx_env_choice("FX_ABLATION", kNames, (int)(sizeof kNames / sizeof kNames[0]),
                                   kAblationNone, why, why_len);
    if (mode > kAblationNone && head_dim != 128) {
        snprintf(why, why_len, "FX_ABLATION=\"%s\" is built for head_dim 128 only (got %d)",
                 kNames[mode], head_dim);
        return -1;
    }
    if (mode > kAblationNone && varlen) {
        snprintf(why, why_len, "FX_ABLATION=\"%s\" is built for fixed-length batches only",
                 kNames[mode]);
        return -1;
    }
    return mode;
}

/* The order's sections (tile_at): as many (batch, head) pairs as have K and V of
 * seqlen_k × head_dim together in half the L2 (the other half for Q, O and what the
 * other sections' stragglers still read), at least 1. */
int section_pairs(const fx_problem *pr, int l2_bytes)
{
    // K and V (head_dim and head_dim_v columns) of one query head's kv head; the heads_q /
    // heads_kv query heads side by side in the order (GQA) share it.
    const double kv_bytes = (double)pr->seqlen_k * (pr->head_dim + fx_head_dim_v(pr)) *
                            (double)kElemBytes * pr->heads_kv / pr->heads_q;
    const int bh = pr->batch * pr->heads_q;
    const double fit = (0.5 * l2_bytes) / (kv_bytes > 0 ? kv_bytes : 1.0);
    return fit < 1.0 ? 1 : (fit >= bh ? bh : (int)fit);
}

/* The scheduler, from the environment (for measuring one against another). The default
 * (docs/09, "Measured"): the dynamic fetch always (it beat the static round-robin with the
 * mask and without, where FA3 takes the static one), over L2 sections when causal (tiles
 * differ in length: longest first), over one (batch, head) at a time when not (tiles alike;
 * consecutive tiles read the same K and V). A varlen batch: m-fastest, sequence by sequence.
 *   FX_SCHEDULER=dynamic|static
 *   FX_SCHED_ORDER=l2 (sections sized to the L2) | lpt (one section: the whole launch, which
 *                  with the mask is longest first) | m-fastest (sections of one pair) */
enum SchedOrder { kOrderL2, kOrderLpt, kOrderMFastest };

struct SchedChoice {
    bool dynamic;
    SchedOrder order;
};

/* False, with the reason in `why`, for a value that is none of those named, or an order other
 * than m-fastest for a variable-length batch (its order is sequence by sequence,
 * tile_at_varlen: one sequence's heads m-fastest). */
bool sched_choice(SchedChoice *c, bool causal, bool varlen, char *why, size_t why_len)
{
    static const char *const kSchedulers[] = {"dynamic", "static"};
    static const char *const kOrders[] = {"l2", "lpt", "m-fastest"};  // in enum SchedOrder order
    const int scheduler = fx_env_choice("FX_SCHEDULER", kSchedulers, 2, 0, why, why_len);
    if (scheduler < 0)
        return false;
    const int order = fx_env_choice("FX_SCHED_ORDER", kOrders, 3,
                                    causal && !varlen ? kOrderL2 : kOrderMFastest, why, why_len);
    if (order < 0)
        return false;
    if (varlen && order != kOrderMFastest) {
        snprintf(why, why_len,
                 "FX_SCHED_ORDER=\"%s\" does not apply to a variable-length batch (its order is "
                 "m-fastest, sequence by sequence)",
                 kOrders[order]);
        return false;
    }
    c->dynamic = scheduler == 0;
    c->order = (SchedOrder)order;
    return true;
}

/* The workspace of one call (FX_ENTRY(fwd_workspace_bytes)): ints, the tile counter first. */
size_t workspace_bytes(const fx_problem *pr)
{
    return sizeof(int) * (1 + (pr->varlen ? (size_t)pr->batch + 1 : 0));
}

/* Launches `kernel` persistently: min(SMs, tiles) CTAs of Cfg's tile (one fits an SM: the
 * launch bounds and the shared memory say so), each looping over its tiles. A varlen batch
 * first runs varlen_prepare_kernel in the same stream (the tiles' positions, the counter);
 * its number of tiles is known only on the device, so the grid is min(SMs, a bound of it). */
template <class Cfg, class Kernel>
cudaError_t launch_persistent(Kernel kernel, const FwdParams &p, const fx_fwd_args *a)
{
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<Cfg>);
    if (err != cudaSuccess)
        return err;
    int dev = 0, sms = 0, l2 = 0;
    if ((err = cudaGetDevice(&dev)) != cudaSuccess ||
        (err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
        (err = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev)) != cudaSuccess)
        return err;
    const fx_problem *pr = a->p;
    SchedParams s;
    memset(&s, 0, sizeof s);
    s.num_m_blocks = (pr->seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
    s.num_bh = pr->batch * pr->heads_q;
    s.num_tiles = s.num_m_blocks * s.num_bh;
    SchedChoice choice;
    char why[200];
    if (!sched_choice(&choice, pr->causal, pr->varlen, why, sizeof why)) {  // check_problem skipped
        fx_error("%s", why);
        return cudaErrorInvalidValue;
    }
    s.section = choice.order == kOrderL2    ? section_pairs(pr, l2)
                : choice.order == kOrderLpt ? s.num_bh
                                            : 1;
    s.counter = nullptr;
    const size_t need = workspace_bytes(pr);
    if (need > 0 && (!a->workspace || a->workspace_bytes < need)) {
        fx_error("the tile scheduler needs a workspace of %zu bytes (got %zu)", need,
                 a->workspace ? a->workspace_bytes : (size_t)0);
        return cudaErrorInvalidValue;
    }
    int *ws = static_cast<int *>(a->workspace);
    if (choice.dynamic)
        s.counter = ws;  // the tile counter (workspace_bytes)
    int64_t tiles_bound = s.num_tiles;
    if (pr->varlen) {
        if (!a->cu_seqlens_q || !a->cu_seqlens_k) {
            fx_error("a variable-length batch needs the device copies of cu_seqlens_q and "
                     "cu_seqlens_k");
            return cudaErrorInvalidValue;
        }
        s.cu_seqlens_q = a->cu_seqlens_q;
        s.cu_seqlens_k = a->cu_seqlens_k;
        s.seqused_k = a->seqused_k;
        int *tile_start = ws + 1;  // written by the prepare kernel, read-only in the main one
        s.tile_start = tile_start;
        s.batch = pr->batch;
        s.total_q = pr->total_q;
        // Each sequence has at most seqlen_q(b) / kBlockM + 1 Q blocks.
        tiles_bound = (int64_t)pr->heads_q * (pr->total_q / Cfg::kBlockM + pr->batch);
        const int threads = (pr->batch + kWarpSize - 1) / kWarpSize * kWarpSize;
        varlen_prepare_kernel<<<1, threads, 0, a->stream>>>(a->cu_seqlens_q, pr->batch, pr->heads_q,
                                                            Cfg::kBlockM, tile_start, s.counter);
        if ((err = cudaGetLastError()) != cudaSuccess)
            return err;
    } else if (s.counter) {
        // Zeroed in the call's stream before the kernel reads it (one 4-byte memset per call).
        if ((err = cudaMemsetAsync(s.counter, 0, sizeof(int), a->stream)) != cudaSuccess)
            return err;
    }
    const int grid = tiles_bound < sms ? (int)tiles_bound : sms;
    kernel<<<grid, Cfg::kNThreads, (size_t)kSmemBytes<Cfg>, a->stream>>>(p, s);
    return cudaGetLastError();
}

/* One forward call with the kernel of these template arguments: the kernel's parameters from
 * `a` (fx_stage.h), then launch_persistent. Returns cudaErrorInvalidValue (reason printed) when
 * a tensor map cannot be encoded, else the launch's error; a varlen batch without query rows
 * launches nothing and returns cudaSuccess. */
template <class Cfg, class Element, bool kCausal, bool kPingpong, bool kOverlap, bool kVarlen>
cudaError_t launch(const fx_fwd_args *a)
{
    FwdParams p;
    if (!kVarlen) {
        if (!make_fwd_params(&p, a, Cfg::kBlockM, Cfg::kBlockN))
            return cudaErrorInvalidValue;
    } else {
        // The packed tensors are the fixed-length layout with batch 1 and seqlen total_q
        // (total_k): their tensor maps are made as such, and a tile's rows are offset into
        // them (Tile::q_row0, k_row0). A map needs a dimension of at least 1: with no key in
        // the batch no K/V block is ever loaded, so K's and V's maps are never read.
        if (a->p->total_q == 0)
            return cudaSuccess;  // no query row: nothing to compute, nothing to write
        fx_problem flat = *a->p;
        flat.varlen = false;
        flat.batch = 1;
        flat.seqlen_q = a->p->total_q;
        flat.seqlen_k = a->p->total_k > 0 ? a->p->total_k : 1;
        fx_fwd_args fa = *a;
        fa.p = &flat;
        fa.q_layout.batch_stride = fa.q_layout.row_stride * flat.seqlen_q;
        fa.o_layout.batch_stride = fa.o_layout.row_stride * flat.seqlen_q;
        fa.k_layout.batch_stride = fa.k_layout.row_stride * flat.seqlen_k;
        fa.v_layout.batch_stride = fa.v_layout.row_stride * flat.seqlen_k;
        if (!make_fwd_params(&p, &fa, Cfg::kBlockM, Cfg::kBlockN))
            return cudaErrorInvalidValue;
    }
    return launch_persistent<Cfg>(fwd_kernel<Cfg, Element, kCausal, kPingpong, kOverlap, kVarlen>,
                                  p, a);
}

/* The launcher dispatch_dtype_mask calls for one tile, element type and mask: picks the schedule
 * FX_ABLATION asks for (head_dim 128) and the varlen kernel. Returns cudaErrorInvalidValue
 * (reason printed) for an FX_ABLATION the descriptor's check_problem would have refused, else
 * launch's result. */
template <class Cfg, class Element, bool kCausal>
struct Launch {
    static cudaError_t run(const fx_fwd_args *a)
    {
        char why[160];
        const int mode = ablation_parse(Cfg::kHeadDim, a->p->varlen, why, sizeof why);
        if (mode < 0) {  // a caller that skipped the descriptor's check_problem
            fx_error("%s", why);
            return cudaErrorInvalidValue;
        }
        if (a->p->varlen)
            return launch<Cfg, Element, kCausal, true, true, true>(a);
        if constexpr (Cfg::kHeadDimGmem == 128) {
            switch (mode) {
            case kAblationNoPingpong: return launch<Cfg, Element, kCausal, false, true, false>(a);
            case kAblationNoOverlap: return launch<Cfg, Element, kCausal, true, false, false>(a);
            case kAblationNeither: return launch<Cfg, Element, kCausal, false, false, false>(a);
            default: break;
            }
        }
        return launch<Cfg, Element, kCausal, true, true, false>(a);
    }
};

}  // namespace

/* The stage's forward (fx_stage.h's contract; stage.c's descriptor): enqueues it on a->stream.
 * Returns cudaErrorMisalignedAddress for an O whose rows are not 16-byte aligned,
 * cudaErrorInvalidValue for a head_dim or dtype not built, a tensor map that cannot be encoded,
 * a workspace smaller than FX_ENTRY(fwd_workspace_bytes) or a scheduler choice that
 * check_problem refuses (each with its reason printed), else the launch's error. Its head_dim
 * switch is common/fx_fwd_sm90.cuh's dispatch_forward with six tiles instead of three (96
 * on the 128-column tile; 192 with head_dim_v 192 or 128), the same checks in the same
 * order; any other head_dim_v is cudaErrorInvalidValue (the caps refuse it first). */
extern "C" cudaError_t FX_ENTRY(fwd)(const fx_fwd_args *a)
{
    if (!o_aligned(a->o, &a->o_layout))
        return cudaErrorMisalignedAddress;
    const int head_dim_v = fx_head_dim_v(a->p);
    if (head_dim_v != a->p->head_dim)
        return a->p->head_dim == 192 && head_dim_v == 128
                   ? dispatch_dtype_mask<Launch, ConfigD192V128>(a)
                   : cudaErrorInvalidValue;
    switch (a->p->head_dim) {
    case 64: return dispatch_dtype_mask<Launch, ConfigD64>(a);
    case 96: return dispatch_dtype_mask<Launch, ConfigD96>(a);
    case 128: return dispatch_dtype_mask<Launch, ConfigD128>(a);
    case 192: return dispatch_dtype_mask<Launch, ConfigD192>(a);
    case 256: return dispatch_dtype_mask<Launch, ConfigD256>(a);
    default: return cudaErrorInvalidValue;
    }
}

/* The forward's device workspace: the dynamic scheduler's tile counter (one int), then for a
 * variable-length batch the positions of its sequences' tiles (batch + 1 ints,
 * varlen_prepare_kernel). */
extern "C" size_t FX_ENTRY(fwd_workspace_bytes)(const fx_problem *p, bool backward)
{
    return backward ? 0 : workspace_bytes(p);
}

/* The dynamic shared memory (bytes) one CTA needs at head_dim and head_dim_v (0: head_dim);
 * 0 for a pair not built. */
extern "C" size_t FX_ENTRY(fwd_smem_bytes)(int head_dim, int head_dim_v)
{
    if (head_dim_v > 0 && head_dim_v != head_dim)
        return head_dim == 192 && head_dim_v == 128 ? (size_t)kSmemBytes<ConfigD192V128> : 0;
    switch (head_dim) {
    case 64: return (size_t)kSmemBytes<ConfigD64>;
    case 96: return (size_t)kSmemBytes<ConfigD96>;
    case 128: return (size_t)kSmemBytes<ConfigD128>;
    case 192: return (size_t)kSmemBytes<ConfigD192>;
    case 256: return (size_t)kSmemBytes<ConfigD256>;
    default: return 0;
    }
}

/* For stage.c's check_problem: 0, or 2 with the reason (FX_ABLATION), before any input is
 * made. */
extern "C" int FX_ENTRY(fwd_check_ablation)(const fx_problem *p, char *why, size_t why_len)
{
    return ablation_parse(p->head_dim, p->varlen, why, why_len) < 0 ? 2 : 0;
}

/* For stage.c's check_problem: 0, or 2 with the reason (FX_SCHEDULER, FX_SCHED_ORDER). */
extern "C" int FX_ENTRY(fwd_check_scheduler)(const fx_problem *p, char *why, size_t why_len)
{
    SchedChoice c;
    return sched_choice(&c, p->causal, p->varlen, why, why_len) ? 0 : 2;
}
