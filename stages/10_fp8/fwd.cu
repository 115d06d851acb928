/*
 * fwd.cu — stage 10: the FP8 (e4m3) forward (FA3 §3.3), on stage 08's kernel.
 *
 * Over stage 08 the operands are e4m3: Q·Kᵀ and P·V run as m64nNk32 wgmmas at twice the
 * 16-bit rate, with fp32 descales folded into the softmax (per tensor, head or block: the
 * running max is kept in scaled log2 units, the V descale rides on the O rescale), the max
 * offset 8 so that P fills e4m3's range (P = 2^(S·c − (R − 8)) ≤ 256 < 448), P converted to
 * e4m3 in registers, and O stored in bf16. 8-bit wgmma reads K-major operands only, so V
 * must come as Vᵀ (keys contiguous): a row-major V (the default) is transposed in shared
 * memory by the producer warpgroup (transpose_v below), or V comes already transposed in
 * global memory (--fp8-vt). The 8-bit A fragment's k order is not the accumulator's: the
 * transpose writes Vᵀ in P's order, so P is packed in place, while a Vᵀ given by the caller
 * is in the natural order and P's registers move across the quad (gemms below: the
 * derivation). Built on stage 08 rather than 09: 08 is one CTA per tile, so
 * `scripts/stage_diff.sh 08 10` shows FP8 alone, without the persistent scheduler.
 *
 * The shape every Hopper forward keeps (stage 05 settles it): the pipeline state, the block
 * range and mask, the softmax state, the named barriers, the epilogue, and a mainloop split
 * into masked and unmasked blocks. Code marked UNIT(name) is inherited verbatim from the
 * stage that introduced it (tests/shape/check_units.sh compares the copies).
 *
 * Sources: FA3 §3.3 (FP8: layout, max offset, block quantization, incoherent processing);
 * PTX ISA §9.7.15.5.1.1 (the wgmma register fragments, .e4m3 A at k32), §9.7.15.5.2
 * (wgmma.mma_async .e4m3), §9.7.9.21 (cvt .e4m3x2), and "prmt" and "shfl.sync" of its
 * data-movement instructions.
 * The descale algebra and the CPU model this kernel matches: docs/10_fp8.md,
 * common/fx_fp8_model.h. Layouts and what the Hopper forwards share: common/fx_fwd_sm90.cuh.
 */
#include <stddef.h> /* offsetof */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_fp8.h"
#include "fx_fp8_model.h" /* FX_FP8_MAX_OFFSET */
#include "fx_fwd_sm90.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* e4m3 tiles: one byte per element. */
constexpr int kWgmmaK8 = 32;         // the k of one 8-bit wgmma (m64nNk32)
constexpr int kSlab8RowBytes = 64;   // a 64-column slab row of Q or K: 64 B, the 64B swizzle
constexpr int kSlabVtRowBytes = 32;  // a Vᵀ row of one k32 slice: 32 keys, the 32B swizzle
constexpr int kVtSlabKeys = 32;      // keys per Vᵀ slab (one TMA box, one PV wgmma)
static_assert(kSlab8RowBytes == FX_SWIZZLE64_ROW_BYTES && kSlabVtRowBytes == FX_SWIZZLE32_ROW_BYTES,
              "the slabs are one swizzle span wide");

/* ---------------------------------------------------------------------------------
 * Compile-time configuration
 * ------------------------------------------------------------------------------ */

template <int kHeadDim_, int kNumConsumers_, int kBlockN_, int kStages_, int kProducerRegs_,
          int kConsumerRegs_, bool kTransposeV_>
struct Config {
    static constexpr int kHeadDim = kHeadDim_;
    static constexpr int kNumConsumers = kNumConsumers_;     // consumer warpgroups
    static constexpr int kBlockM = kNumConsumers * kWgmmaM;  // query rows per CTA
    static constexpr int kBlockN = kBlockN_;                 // keys per K/V block
    static constexpr int kStages = kStages_;                 // K/V ring depth
    static constexpr int kNThreads = (kNumConsumers + 1) * kWarpgroupThreads;  // + producer
    static constexpr int kNConsumerWarps = kNumConsumers * kWarpsPerWarpgroup;
    static constexpr int kSlabs = kHeadDim / kSlabCols;  // 64-column slabs of Q and K rows
    static constexpr int kVtSlabs = kBlockN / kWgmmaK8;  // 32-key slabs of a Vᵀ tile
    static_assert(kVtSlabs * kWgmmaK8 == kBlockN, "Vᵀ is whole 32-key slabs");
    // Per thread: S is m64 × kBlockN fp32 over 128 threads = kBlockN/2 registers, O is
    // kHeadDim/2, P (e4m3, four per register) kBlockN/8 in kPFrags A fragments of 4.
    static constexpr int kAccS = kBlockN / 2;
    static constexpr int kAccO = kHeadDim / 2;
    static constexpr int kPFrags = kBlockN / kWgmmaK8;
    static constexpr int kNTiles = kBlockN / 8;   // n8 column blocks of S per thread's row
    static constexpr int kDTiles = kHeadDim / 8;  // n8 column blocks of O
    static constexpr int kSlabQBytes = kBlockM * kSlab8RowBytes;
    static constexpr int kSlabKBytes = kBlockN * kSlab8RowBytes;
    static constexpr int kSlabVtBytes = kHeadDim * kSlabVtRowBytes;
    static constexpr int kSlabOBytes = kBlockM * kSlabRowBytes;  // bf16 O, as stage 08's
    // V's layout in global memory: false, Vᵀ (--fp8-vt), loaded by TMA as the PV GEMM reads
    // it; true, row-major V as K, loaded by TMA and transposed in shared memory by the
    // producer warpgroup (transpose_v below). The consumers read the same Vᵀ tile either way.
    static constexpr bool kTransposeV = kTransposeV_;
    // The transpose's unit: 16 keys × 32 head_dim bytes, one ldmatrix.x4.trans and one
    // stmatrix.x4 per warp; the producer warpgroup's 4 warps share a tile's units.
    static constexpr int kTransposeUnits = (kBlockN / 16) * (kHeadDim / 32);
    static_assert(kTransposeUnits % kWarpsPerWarpgroup == 0,
                  "every producer warp transposes alike");
    // setmaxnreg targets (multiples of 8). It only moves registers between warpgroups: they
    // must fit (kNumConsumers + 1) entry caps, or setmaxnreg.inc waits for them forever.
    static constexpr int kProducerRegs = kProducerRegs_;
    static constexpr int kConsumerRegs = kConsumerRegs_;
    static constexpr int kEntryRegs = (65536 / kNThreads) / 8 * 8;
    static_assert(kProducerRegs + kNumConsumers * kConsumerRegs <=
                      (kNumConsumers + 1) * (kEntryRegs < 255 ? kEntryRegs : 255),
                  "setmaxnreg: the warpgroups ask for more registers than the launch gives");

    static_assert(kHeadDim % kSlabCols == 0, "head_dim is whole 64-column slabs");
    static_assert(kBlockN % kWgmmaK8 == 0 && kBlockN <= 256, "S is one wgmma of N = kBlockN");
    static_assert(kBlockM <= FX_TMA_MAX_BOX && kBlockN <= FX_TMA_MAX_BOX &&
                      kHeadDim <= FX_TMA_MAX_BOX,
                  "a TMA box has at most 256 rows (Vᵀ's rows are head_dim)");
};

/*
 * The tiles, which are also the blocks of per-block quantization (the descriptor's fp8_tiles
 * hands them to the harness). Each consumer thread holds S (kBlockN/2 registers), O
 * (head_dim/2) and P (kBlockN/8):
 *  - d=64: 3 consumer warpgroups, 192×128: S 64 + O 32 + P 16.
 *  - d=128: 2 consumer warpgroups, 128×192: S 96 + O 64 + P 24. FA3's tile for a V stored
 *    column-major (its row-major V, transposed in the kernel, gets 128×224).
 *  - d=256: 2 consumer warpgroups, 128×96: S 48 + O 128 + P 12. (128×64 until 2026-12-06:
 *    96 keys a block are 1.05-1.09x as fast on an H100 with V transposed in the kernel, and the
 *    shared memory fits because O shares its bytes with the raw V ring, below.)
 * FA3's e4m3 tiles (hopper/tile_size.h: 192×160, 128×224, 128×128; fx_fp8_tiles_for) spill
 * here: ptxas -v gave 176-196 bytes of spill stores at d=64, 132-172 at d=256 (by the
 * register split and the nvcc build), and 12 at d=128 causal with 224 (docs/10_fp8.md).
 * Registers after setmaxnreg: d=64, 512 threads, producer 32, consumers 160 (stage 08's);
 * d=128 and 256, 384 threads, producer 24 and consumers 240 with V given transposed (stage
 * 08's), producer 32 and consumers 232 where the producer transposes V: two transpose units
 * in flight and their lane terms do not fit 24, and at 24 ptxas spilled 12-24 bytes of the
 * d=128 and 16-20 of the d=256 kernels (the consumers fit 232).
 */
template <bool kTransposeV>
using ConfigD64 = Config<64, 3, 128, 2, 32, 160, kTransposeV>;
template <bool kTransposeV>
using ConfigD128 =
    Config<128, 2, 192, 2, kTransposeV ? 32 : 24, kTransposeV ? 232 : 240, kTransposeV>;
template <bool kTransposeV>
using ConfigD256 =
    Config<256, 2, 96, 2, kTransposeV ? 32 : 24, kTransposeV ? 232 : 240, kTransposeV>;

/* ---------------------------------------------------------------------------------
 * Shared-memory plan: Q, kStages K and Vᵀ tiles in e4m3, then O's bf16 staging tile, which
 * shares its bytes with the kStages raw V tiles (row-major V only), then the mbarriers. The
 * two never live at once: a consumer writes its O only after its last PV GEMM, which waited
 * for the last block's v_full, which the producer warpgroup arrives on after the last
 * transpose's named barrier (every read of every raw tile done), and every raw load was
 * issued, and has landed, before that transpose. Q, K and raw V are
 * head_dim/64 slabs of rows × 64 bytes, as TMA writes them with the 64B swizzle; Vᵀ is
 * kBlockN/32 slabs of head_dim rows × 32 bytes (32B swizzle), one per k32 slice of the PV
 * GEMM; O is stage 08's 128B-swizzled bf16 slabs (e4m3 Q is half as wide as O, so O no
 * longer fits in Q's bytes). Each tile on a 1024-byte boundary.
 * ------------------------------------------------------------------------------ */

/* Row-major V as TMA lands it, kStages tiles laid out as K's, which the producer transposes
 * into Vᵀ; nothing with V given transposed (an empty struct: one byte). */
template <class Cfg, bool = Cfg::kTransposeV>
struct RawVStorage {
    alignas(kSwizzleAtomBytes) uint8_t v[Cfg::kStages][Cfg::kBlockN * Cfg::kHeadDim];
};
template <class Cfg>
struct RawVStorage<Cfg, false> {
};

template <class Cfg>
struct SharedStorage {
    alignas(kSwizzleAtomBytes) uint8_t q[Cfg::kBlockM * Cfg::kHeadDim];
    alignas(kSwizzleAtomBytes) uint8_t k[Cfg::kStages][Cfg::kBlockN * Cfg::kHeadDim];
    alignas(kSwizzleAtomBytes) uint8_t vt[Cfg::kStages][Cfg::kHeadDim * Cfg::kBlockN];
    union {
        alignas(kSwizzleAtomBytes) uint16_t o[Cfg::kBlockM * Cfg::kHeadDim];
        RawVStorage<Cfg> raw;
    };
    uint64_t q_full;                 // Q has landed (one phase: Q is loaded once)
    uint64_t k_full[Cfg::kStages];   // K of stage s has landed (one phase per fill)
    uint64_t v_full[Cfg::kStages];   // Vᵀ of stage s is ready: landed, or transposed
    uint64_t k_empty[Cfg::kStages];  // every consumer warp is done with K of s
    uint64_t v_empty[Cfg::kStages];  // ... with Vᵀ of s
    // Row-major V only: raw V of stage s has landed (the producer's own TMA; the producer
    // warpgroup is also the raw tile's only reader, so it needs no empty barrier:
    // producer_loop_transpose).
    uint64_t v_raw_full[Cfg::kStages];
};

/* Dynamic shared memory per CTA: the plan plus the slack for rounding the base up to the
 * swizzle atom (smem_base_aligned). */
template <class Cfg>
constexpr int kSmemBytes = (int)sizeof(SharedStorage<Cfg>) + kSwizzleAtomBytes;

static_assert(kSmemBytes<ConfigD64<false>> <= FX_SMEM_PER_BLOCK_OPTIN_SM90,
              "d=64 fits a CTA's smem");
static_assert(kSmemBytes<ConfigD128<false>> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=128 fits");
static_assert(kSmemBytes<ConfigD256<false>> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=256 fits");
static_assert(kSmemBytes<ConfigD64<true>> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=64 + raw V fits");
static_assert(kSmemBytes<ConfigD128<true>> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=128 + raw V fits");
static_assert(kSmemBytes<ConfigD256<true>> <= FX_SMEM_PER_BLOCK_OPTIN_SM90, "d=256 + raw V fits");

/* UNIT(named_barriers, changed: stage 08's, one CTA per tile: stage 10 builds on 08, not 09) */
/* Hardware named barriers (PTX ISA §9.7.13.1; id 0 is __syncthreads'), the threads that
 * meet at each. */
enum NamedBarrier : uint32_t {
    // + consumer (at most 3): one consumer warpgroup's threads before its TMA store of O.
    kBarrierEpilogue = 1,
    // + consumer (at most 3): consumer c's turn at the tensor cores (2 warpgroups meet).
    kBarrierTurn = 4,
    // Row-major V: the producer warpgroup's 128 threads after transposing a V tile.
    kBarrierTranspose = 7,
};
constexpr uint32_t kEpilogueThreads = kWarpgroupThreads;
static_assert(ConfigD64<true>::kNumConsumers <= 3 && ConfigD128<true>::kNumConsumers <= 3 &&
                  ConfigD256<true>::kNumConsumers <= 3,
              "at most 3 consumer warpgroups: the epilogue's barriers are ids 1-3");
constexpr uint32_t kTurnThreads = 2 * kWarpgroupThreads;
/* END UNIT */

/* UNIT(descriptors, changed: e4m3 tiles, 64B-swizzled Q and K, K-major Vᵀ; advanced as 09) */
/* ---------------------------------------------------------------------------------
 * wgmma descriptors of the tiles (layouts: common/ptx/wgmma_desc.h)
 *
 * 8-bit wgmma has no transpose immediates: both operands are K-major. For S = Q·Kᵀ
 * (K = head_dim) a Q or K tile is head_dim/64 slabs of R rows × 64 bytes (64B swizzle);
 * k32 slice kk lies in slab kk/2 at byte 32·(kk%2) of every row (the hardware applies the
 * XOR to the full address, so the slabs start on their atom), SBO = 512 steps from 8 rows
 * to the next 8. For O = P·V the B operand is Vᵀ (N = head_dim, K = keys contiguous):
 * slice kk is Vᵀ slab kk, head_dim rows × 32 bytes (32B swizzle), SBO = 256.
 * ------------------------------------------------------------------------------ */

/* As in stage 09, a slice's descriptor is its tile's descriptor advanced by the slice's byte offset
 * (a compile-time constant once the k loop is unrolled), not encoded anew from its address. The
 * encoding, (addr & 0x3FFFF) >> 4 or'ed with the other fields, is a mask, a shift and an or on the
 * uniform datapath (ULOP3, USHF, ULOP3), and ptxas cannot turn the encoding of tile + offset into
 * the tile's encoding + offset/16: for all it knows the sum carries out of the 18 bits the mask
 * keeps. Here it never does: a slice starts inside its tile, in this CTA's shared memory, whose
 * addresses lie below the SM's 228 KiB, under 2^18 = 256 KiB, and tile and offset are multiples of
 * 16. So the 14-bit field holds tile/16 + offset/16 with no carry into bit 14, and a 32-bit add of
 * offset/16 to the low word (fx_wgmma_desc_advance, which takes bytes) is the same descriptor bit
 * for bit. The offsets: Q and K, (kk/2)·slab bytes + 32·(kk%2), less than the tile; Vᵀ,
 * kk·kSlabVtBytes, likewise. One encoding per tile (Q's per consumer warpgroup, K's and Vᵀ's per
 * ring stage), then one add per wgmma, as CUTLASS's descriptor iterator does. */
template <class Cfg>
__device__ __forceinline__ uint64_t desc_q(uint32_t sQ, int consumer, int kk)
{
    const uint64_t tile =
        fx_wgmma_desc_k_sw64(sQ + (uint32_t)(consumer * kWgmmaM * kSlab8RowBytes));
    return fx_wgmma_desc_advance(tile,
                                 (uint32_t)((kk / 2) * Cfg::kSlabQBytes + (kk % 2) * kWgmmaK8));
}

template <class Cfg>
__device__ __forceinline__ uint64_t desc_k(uint32_t sK, int kk)
{
    return fx_wgmma_desc_advance(fx_wgmma_desc_k_sw64(sK),
                                 (uint32_t)((kk / 2) * Cfg::kSlabKBytes + (kk % 2) * kWgmmaK8));
}

template <class Cfg>
__device__ __forceinline__ uint64_t desc_v(uint32_t sVt, int kk)
{
    return fx_wgmma_desc_advance(fx_wgmma_desc_k_sw32(sVt), (uint32_t)(kk * Cfg::kSlabVtBytes));
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

/* UNIT(loads, changed: e4m3 Q and K in 64-byte slab rows, Vᵀ in 32-key slabs) */
/* ---------------------------------------------------------------------------------
 * Producer: TMA loads of one tile
 * ------------------------------------------------------------------------------ */

/* Announces the tile's bytes on `bar`, then issues its head_dim/64 boxes at coordinates
 * {64·slab, head, row0, batch} of the map {head_dim, heads, seqlen, batch}. Rows past the
 * tensor's seqlen are zero-filled by TMA and still count as delivered bytes. */
template <class Cfg>
__device__ __forceinline__ void load_tile(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                          int rows, int head, int row0, int batch)
{
    fx_mbarrier_arrive_expect_tx(bar, (uint32_t)(rows * Cfg::kHeadDim));
#pragma unroll
    for (int s = 0; s < Cfg::kSlabs; ++s)
        fx_tma_load_4d(dst + (uint32_t)(s * rows * kSlab8RowBytes), map, bar, s * kSlabCols, head,
                       row0, batch);
}

/* Vᵀ of keys [key0, key0 + kBlockN): kBlockN/32 boxes of head_dim rows × 32 keys at
 * coordinates {key, 0, head, batch} of the map {seqlen_k, head_dim, heads_kv, batch}.
 * Keys past seqlen_k are zero-filled (their P is 0: masked). */
template <class Cfg>
__device__ __forceinline__ void load_vt(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                        int head, int key0, int batch)
{
    fx_mbarrier_arrive_expect_tx(bar, (uint32_t)(Cfg::kBlockN * Cfg::kHeadDim));
#pragma unroll
    for (int s = 0; s < Cfg::kVtSlabs; ++s)
        fx_tma_load_4d(dst + (uint32_t)(s * Cfg::kSlabVtBytes), map, bar, key0 + s * kVtSlabKeys, 0,
                       head, batch);
}

/* K and V of block n_block into the ring at `write`. A refill (the second pass over the
 * ring on) first waits until every consumer warp has released the stage: its empty
 * barriers' phase for the pass before has the parity write.phase ^ 1. K is released after
 * the S GEMM, Vᵀ after the PV GEMM, so each is refilled as soon as it is free.
 * V given transposed: Vᵀ straight into the Vᵀ tile. Row-major V: into the raw tile, laid out
 * as K, completing on v_raw_full; no wait, since the producer warpgroup itself read that
 * tile last and finished before this call (producer_loop_transpose). */
template <class Cfg>
__device__ __forceinline__ void load_kv(const FwdParams &p, SharedStorage<Cfg> &smem,
                                        PipelineState write, bool refill, int n_block, int head_kv,
                                        int batch)
{
    if (refill)
        fx_mbarrier_wait(fx_smem_addr(&smem.k_empty[write.stage]), write.phase ^ 1);
    load_tile<Cfg>(fx_smem_addr(smem.k[write.stage]), &p.tma_k,
                   fx_smem_addr(&smem.k_full[write.stage]), Cfg::kBlockN, head_kv,
                   n_block * Cfg::kBlockN, batch);
    if constexpr (Cfg::kTransposeV) {
        load_tile<Cfg>(fx_smem_addr(smem.raw.v[write.stage]), &p.tma_v,
                       fx_smem_addr(&smem.v_raw_full[write.stage]), Cfg::kBlockN, head_kv,
                       n_block * Cfg::kBlockN, batch);
    } else {
        if (refill)
            fx_mbarrier_wait(fx_smem_addr(&smem.v_empty[write.stage]), write.phase ^ 1);
        load_vt<Cfg>(fx_smem_addr(smem.vt[write.stage]), &p.tma_v,
                     fx_smem_addr(&smem.v_full[write.stage]), head_kv, n_block * Cfg::kBlockN,
                     batch);
    }
}
/* END UNIT */

/* ---------------------------------------------------------------------------------
 * Producer: V transposed in shared memory (row-major V; FA3 §3.3, "in-kernel transpose")
 *
 * 8-bit wgmma reads B K-major only: the PV GEMM needs Vᵀ, keys contiguous, in the 32B-swizzled
 * slabs that desc_v describes. TMA lands row-major V as K: key rows of head_dim bytes in
 * 64B-swizzled slabs of 64 columns. The producer warpgroup turns one into the other in
 * units of 16 keys × 32 head_dim bytes per warp (docs/10_fp8.md draws it):
 *
 *  1. ldmatrix.x4.trans (PTX ISA §9.7.14.5.15; b16) reads four 8×8 matrices of 16-bit
 *     pairs: a matrix row is 16 bytes of one key (8 pairs of head_dim columns). Lanes give
 *     the row addresses, so the rows may be any keys: matrix A takes keys 0..7 (+ k0) and B
 *     keys 8..15, each for head_dim bytes [d0, d0+16) (A0, B0) and [d0+16, d0+32) (A1, B1).
 *     With .trans lane l receives, for the pair column c = l/4 (head_dim 2c, 2c+1) and
 *     t = l%4, matrix rows 2t, 2t+1: from A keys 2t, 2t+1 and from B keys 8+2t, 9+2t, as
 *     bytes {V[2t][2c], V[2t][2c+1], V[2t+1][2c], V[2t+1][2c+1]} (and B's likewise).
 *  2. The 16-bit transpose kept each (2c, 2c+1) byte pair together; Vᵀ wants the two
 *     head_dim columns in different rows. prmt splits them: the even bytes of A and B
 *     (selector 0x6420) are Vᵀ row 2c at keys 2t, 2t+1, 8+2t, 9+2t, the odd bytes (0x7531)
 *     row 2c+1.
 *  3. stmatrix.x4 (§9.7.14.5.16; b16) writes four 8×8 matrices, lane l's register i at row
 *     l/4, bytes 4t..4t+3 of matrix i, each row 16 bytes = k-slots k0..k0+15 of one Vᵀ row.
 *     Matrix 0 holds rows d0 + 2r for r < 4 and d0 + 2r + 1 for r >= 4, matrix 1 the other
 *     row of each pair, 2 and 3 the same 16 rows further: a lane of c >= 4 swaps its two
 *     selectors. Rows d0, d0+2, .. alone would fall on four of the eight 16-byte bank
 *     groups of the 32B swizzle (two-way conflicts); these eight cover all eight.
 *
 * So lane t's k-slots 4t..4t+3 hold keys 2t, 2t+1, 8+2t, 9+2t (+ k0): the k order of P's
 * accumulator (pack_p, "Where P must go" below), not the natural one. The PV GEMM sums over
 * k in any order in which P's columns and Vᵀ's keys agree, so P needs no shuffle here, and O
 * no un-permute (head_dim keeps its order). A Vᵀ loaded by TMA (--fp8-vt) is in the natural
 * key order, and there P moves across the quad instead. The raw tile's reads are conflict
 * free too: keys 0..7 of one 16-byte column fall on eight distinct bank groups of the 64B
 * swizzle.
 * ------------------------------------------------------------------------------ */

/* The unit's byte offsets. The raw tile is K's layout: slab col/64, key rows of 64 bytes, the
 * 16-byte chunk XORed with (key/2)%4 (the 64B swizzle, wgmma_desc.h). Vᵀ: slab key/32, head_dim
 * rows of 32 bytes, the chunk XORed with (d/4)%2 (the 32B swizzle). A unit starts at a key k0
 * that is a multiple of 16 and a head_dim byte d0 that is a multiple of 32, so the swizzles'
 * XOR terms depend on the lane's row within the unit alone: each offset is the unit's base
 * plus a per-lane term (lane_raw, lane_vt below), whose chunk bit d0 (raw: bit 5, d0 % 64 of
 * 0 or 32) or k0 (Vᵀ: bit 4, k0 % 32 of 0 or 16) flips. */
template <class Cfg>
__device__ __forceinline__ uint32_t raw_unit_base(int k0, int d0)
{
    return (uint32_t)((d0 / kSlab8RowBytes) * Cfg::kSlabKBytes + k0 * kSlab8RowBytes);
}
template <class Cfg>
__device__ __forceinline__ uint32_t vt_unit_base(int k0, int d0)
{
    return (uint32_t)((k0 / kSlabVtRowBytes) * Cfg::kSlabVtBytes + d0 * kSlabVtRowBytes);
}

/* Transposes one row-major V tile (shared address raw) into the Vᵀ tile vt, keys in P's
 * order (above): the 128 threads of the producer warpgroup (thread = 0..127) call it
 * together; each warp does kTransposeUnits/4 units. Only the shared-memory writes are done
 * when it returns: the caller fences and publishes them (transpose_block). */
template <class Cfg>
__device__ __forceinline__ void transpose_v(uint32_t raw, uint32_t vt, int thread)
{
    constexpr int kKeyUnits = Cfg::kBlockN / 16;
    const int warp = thread / kWarpSize, lane = thread % kWarpSize;
    /* ASSIGNMENT(transpose): the row each lane addresses: for ldmatrix.x4.trans, the key
     * ld_key and head_dim byte ld_col of its matrix row (A0, B0, A1, B1, as drawn above);
     * for stmatrix.x4, its Vᵀ row st_row (matrices 0..3 as in step 3), and which of a lane's
     * two rows goes to the even matrices (sel_even, sel_odd: the prmt selectors); then
     * both as byte offsets within a unit (lane_raw, lane_vt). */
    // ldmatrix: lane l gives row l%8 of matrix l/8: A (keys 0..7) or B (8..15) of the unit.
    const int ld_key = lane % 8 + 8 * ((lane / 8) % 2);
    const int ld_col = 16 * (lane / 16);
    // stmatrix: lane l gives row r = l%8 of matrix m = l/8, Vᵀ row 2r (+1 in matrices 1 and 3,
    // and for r >= 4 the other way round: the rows of a matrix then cover all eight residues
    // mod 8, eight distinct 16-byte bank groups), +16 in matrices 2 and 3.
    const int st_row = 16 * (lane / 16) + 2 * (lane % 8) + (((lane / 8) % 2) ^ ((lane % 8) / 4));
    // Lanes of pair columns c >= 4 (lane >= 16) hand their odd row to the even matrices.
    const uint32_t sel_even = lane < 16 ? 0x6420u : 0x7531u;
    const uint32_t sel_odd = lane < 16 ? 0x7531u : 0x6420u;
    // The lane's rows as byte offsets within a unit (raw_unit_base, vt_unit_base above).
    const uint32_t lane_raw =
        (uint32_t)(ld_key * kSlab8RowBytes + (((ld_col / 16) ^ ((ld_key / 2) % 4)) * 16));
    const uint32_t lane_vt = (uint32_t)(st_row * kSlabVtRowBytes + ((st_row / 4) % 2) * 16);
    /* END ASSIGNMENT */
    // Two units in flight per warp (FA3's "2 LDSM.T"), in the producer's 32 registers (Cfg):
    // the addresses are a base and a lane term, not recomputed from the swizzle rule.
#pragma unroll 2
    for (int i = 0; i < Cfg::kTransposeUnits / kWarpsPerWarpgroup; ++i) {
        const int unit = i * kWarpsPerWarpgroup + warp;
        const int k0 = 16 * (unit % kKeyUnits), d0 = 32 * (unit / kKeyUnits);
        /* ASSIGNMENT(transpose): the unit of keys k0..k0+15, head_dim bytes d0..d0+31: one
         * fx_ldmatrix_x4_trans of the raw tile (raw_unit_base + lane_raw, its chunk bit
         * flipped by d0), fx_prmt splitting each byte pair into two Vᵀ rows, one
         * fx_stmatrix_x4 into the Vᵀ tile (vt_unit_base + lane_vt, flipped by k0). */
        uint32_t r[4];
        fx_ldmatrix_x4_trans(r,
                             raw + raw_unit_base<Cfg>(k0, d0) + (lane_raw ^ (uint32_t)(d0 & 32)));
        const uint32_t row0 = fx_prmt(r[0], r[1], sel_even);  // Vᵀ row d0 + 2c (+1 for c >= 4)
        const uint32_t row1 = fx_prmt(r[0], r[1], sel_odd);   // the other one
        const uint32_t row16 = fx_prmt(r[2], r[3], sel_even);
        const uint32_t row17 = fx_prmt(r[2], r[3], sel_odd);
        fx_stmatrix_x4(vt + vt_unit_base<Cfg>(k0, d0) + (lane_vt ^ (uint32_t)(k0 & 16)), row0, row1,
                       row16, row17);
        /* END ASSIGNMENT */
    }
}

/*
 * One block's V through the transpose stage, by the whole producer warpgroup, at `vt_write`
 * (the ring position its load used): wait for the raw tile (v_raw_full, TMA) and, on a refill,
 * for the consumers to release the Vᵀ tile (v_empty, after their PV GEMM of the block
 * kStages back); transpose; every writer fences its generic-proxy stores against the async
 * proxy that wgmma reads through (PTX ISA §9.7.13.4); the 128 threads meet (kBarrierTranspose),
 * after which every read of the raw tile and write of the Vᵀ tile is done; one thread
 * arrives on v_full, which the consumers wait on as on a TMA-filled Vᵀ. Addresses come from
 * the plan's 32-bit shared base and offsetof, not from a generic pointer to it: the producer
 * runs at 32 registers, and a 64-bit pointer costs two.
 */
template <class Cfg>
__device__ __forceinline__ void transpose_block(uint32_t smem_addr, PipelineState vt_write,
                                                bool refill, int thread)
{
    using S = SharedStorage<Cfg>;
    constexpr uint32_t kTileBytes = Cfg::kBlockN * Cfg::kHeadDim;
    const uint32_t bar = (uint32_t)vt_write.stage * (uint32_t)sizeof(uint64_t);
    const uint32_t tile = (uint32_t)vt_write.stage * kTileBytes;
    fx_mbarrier_wait(smem_addr + (uint32_t)offsetof(S, v_raw_full) + bar, vt_write.phase);
    if (refill)
        fx_mbarrier_wait(smem_addr + (uint32_t)offsetof(S, v_empty) + bar, vt_write.phase ^ 1);
    transpose_v<Cfg>(smem_addr + (uint32_t)offsetof(S, raw) + tile,
                     smem_addr + (uint32_t)offsetof(S, vt) + tile, thread);
    fx_fence_proxy_async_smem();
    fx_named_barrier_sync(kBarrierTranspose, kWarpgroupThreads);
    if (thread == 0)
        fx_mbarrier_arrive(smem_addr + (uint32_t)offsetof(S, v_full) + bar);
}

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

/* UNIT(mask, changed: stage 08's form: stage 10 builds on 08, not 09) */
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

/* UNIT(softmax, changed: descales per K/V block, a running max in scaled units, the max offset) */
/* ---------------------------------------------------------------------------------
 * Softmax state: the online softmax of FA2 Algorithm 1 for this thread's two rows, with the
 * e4m3 descales and FA3's max offset (docs/10_fp8.md derives it; common/fx_fp8_model.c is
 * the same arithmetic on the CPU, and this must stay step for step equal to it)
 *
 * The scores S8 = Q8·K8ᵀ are in code units. With c = softmax_scale·log2(e) and the
 * descales δ, block n's score in log2 units is S8·c_n, c_n = (c·δQ)·δK(n): one per K/V
 * block (equal for all blocks when the scaling is per tensor or per head, where this is
 * FA3's q_descale·k_descale folded into the softmax scale). Because c_n may change from
 * block to block, the running max R is kept in those scaled units, R = max over blocks of
 * max_j(S8_j)·c_n rounded up (as stage 08's R = m·c); the max commutes with the scaling
 * because c_n >= 0. Then
 *     P = 2^(fma(S8, c_n, −(R − 8))) <= 2^8 = 256,
 * the max offset: P fills e4m3's range up to 256 (448 is its largest value) instead of
 * [0, 1], where everything below 2^-10 would round to 0. It cancels in O = Σ P·V / ℓ and is
 * subtracted in the LSE = (R − 8)·ln 2 + ln ℓ. A per-block V descale δV(n) rides on the
 * online rescale: the accumulator holds O/δV of the latest block, so it is multiplied by
 * α·δV(prev)/δV(n) (exactly α when the descales are equal) and O = acc·δV(last)/ℓ at the end.
 *
 * Not here, unlike stage 08: the exact path for rows whose final |R| reaches 2^24
 * (FX_SOFTMAX_FAST_BELOW). e4m3 inputs scaled by their descales would need logits above
 * 2^24/c to get there; the CPU model does not model it either and counts such rows.
 * ------------------------------------------------------------------------------ */

constexpr float kMaxOffset = FX_FP8_MAX_OFFSET;  // log2 units: P <= 2^8 (FA3's Max_offset)

struct SoftmaxState {
    float row_sum[2];   // ℓ of this lane's columns only: reduced over the row at the end
    float m_scaled[2];  // R: the running max of S8·c_n, log2 units, rounded up (-inf: none)
    float alpha[2];     // 2^(R_old − R_new): ℓ's rescale (the block's, after softmax_max)
    float alpha_o[2];   // α·δV(prev)/δV(n): O's rescale, which also moves O to block n's units
    float v_unit;       // the δV that O is expressed in (0 until a block with δV != 0)
};

__device__ __forceinline__ void softmax_init(SoftmaxState &sm)
{
    for (int h = 0; h < 2; ++h) {
        sm.row_sum[h] = 0.f;
        sm.m_scaled[h] = -INFINITY;
    }
    sm.v_unit = 0.f;
}

/* P = 2^(fma(S8, c_n, −(R − 8))) in place: one FFMA and one EX2 per score, and this lane's
 * part of ℓ. A row with no key seen yet (R = -inf) exponentiates against 0, so its P are 0.
 * kMask: the block has masked scores (-inf), whose P must be 0 also when c_n = 0 (an all-zero
 * K or Q block: -inf·0 would be NaN), so they are selected, not computed. */
template <class Cfg, bool kMask>
__device__ __forceinline__ void softmax_exp(SoftmaxState &sm, float (&acc_s)[Cfg::kAccS], float c_n)
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float r_ref = sm.m_scaled[h] == -INFINITY ? 0.f : sm.m_scaled[h] - kMaxOffset;
#pragma unroll
        for (int j = 0; j < Cfg::kNTiles; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float s = acc_s[4 * j + 2 * h + e];
                float p = fx_ex2(fmaf(s, c_n, -r_ref));
                if (kMask)
                    p = s == -INFINITY ? 0.f : p;
                acc_s[4 * j + 2 * h + e] = p;
                sm.row_sum[h] += p;  // this lane's partial; reduced over the row at the end
            }
    }
}

/* The online softmax of one block's S8, first half: R, α and O's rescale α_o into sm (ℓ
 * rescaled). c_n and delta_v: this block's scale (c·δQ·δK(n)) and V descale. softmax_exp
 * is the second half. */
template <class Cfg>
__device__ __forceinline__ void softmax_max(SoftmaxState &sm, const float (&acc_s)[Cfg::kAccS],
                                            float c_n, float delta_v)
{
    // O moves to this block's V units (δV = 0: an all-zero V block adds nothing, the units
    // stay): one ratio per block, the same for every row.
    const float units = (sm.v_unit != 0.f && delta_v != 0.f) ? sm.v_unit / delta_v : 1.f;
    if (delta_v != 0.f)
        sm.v_unit = delta_v;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float s_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < Cfg::kNTiles; ++j)
            s_max = fmaxf(s_max, fmaxf(acc_s[4 * j + 2 * h], acc_s[4 * j + 2 * h + 1]));
        s_max = fmaxf(s_max, __shfl_xor_sync(kFullWarp, s_max, 1));
        s_max = fmaxf(s_max, __shfl_xor_sync(kFullWarp, s_max, 2));
        // R in scaled units, rounded up. A row that sees none of this block keeps its R
        // (-inf·c_n is -inf, or NaN when c_n = 0, and fmaxf drops a NaN).
        const float m_new = fmaxf(sm.m_scaled[h], __fmul_ru(s_max, c_n));
        // Until the row has seen a key, ℓ and O are 0 and any α leaves them so: 1, not NaN.
        sm.alpha[h] = m_new == -INFINITY ? 1.f : fx_ex2(sm.m_scaled[h] - m_new);
        sm.alpha_o[h] = sm.alpha[h] * units;
        sm.m_scaled[h] = m_new;
        sm.row_sum[h] *= sm.alpha[h];
    }
}

/* O *= α_o per row (the online softmax's rescale, with the V units' ratio). */
template <class Cfg>
__device__ __forceinline__ void softmax_rescale_o(float (&acc_o)[Cfg::kAccO],
                                                  const float (&alpha_o)[2])
{
#pragma unroll
    for (int d = 0; d < Cfg::kDTiles; ++d)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                acc_o[4 * d + 2 * h + e] *= alpha_o[h];
}

/* ℓ over the row (its 4 lanes), O *= δV/ℓ once (FA3's final scale with v_descale), and the
 * LSE of the two rows in natural-log units, (R − 8)·ln 2 + ln ℓ (ℓ is relative to R − 8).
 * ℓ = 0 is a row that saw no key: O = 0, LSE = -inf; a NaN ℓ (NaN inputs) gets LSE = -inf
 * too, and its O stays NaN. */
template <class Cfg>
__device__ __forceinline__ void softmax_finalize(const SoftmaxState &sm, float (&acc_o)[Cfg::kAccO],
                                                 float (&lse)[2])
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = sm.row_sum[h];
        l += __shfl_xor_sync(kFullWarp, l, 1);
        l += __shfl_xor_sync(kFullWarp, l, 2);
        const bool empty = (l == 0.f || l != l);
        const float scale_o = empty ? 0.f : (1.f / l) * sm.v_unit;
        lse[h] = empty ? -INFINITY : (sm.m_scaled[h] - kMaxOffset) * FX_LN2 + logf(l);
#pragma unroll
        for (int d = 0; d < Cfg::kDTiles; ++d) {
            acc_o[4 * d + 2 * h] *= scale_o;
            acc_o[4 * d + 2 * h + 1] *= scale_o;
        }
    }
}
/* END UNIT */

/* UNIT(gemms, changed: e4m3 wgmmas of k32, and P rearranged for a K-major Vᵀ) */
/* ---------------------------------------------------------------------------------
 * Consumer: the two GEMMs of one K/V block for this warpgroup's 64 rows
 *
 * P as the A operand of an e4m3 RS wgmma: where each P must go. In a warp, lane l holds
 * rows g = l/4 and g + 8 of its 16, and t = l%4 picks its columns.
 *
 *  - S's fp32 accumulator (m64nNk32 has the same D layout as k16, PTX ISA §9.7.15.5.1.1
 *    "Accumulator D"): acc[4j + 2h + e] = S[g + 8h][8j + 2t + e]. Per k32 slice kk (keys
 *    32kk .. 32kk + 31 = n8 blocks j = 4kk .. 4kk + 3) a lane holds, of each row, keys
 *        2t, 2t+1,  8+2t, 9+2t,  16+2t, 17+2t,  24+2t, 25+2t     (of the slice).
 *  - The 8-bit A fragment (§9.7.15.5.1.1, "WGMMA .m64nNk32 register fragment layout for
 *    matrix A", .e4m3: like mma.sync m16n8k32's 8-bit A) is four b32 of four e4m3, the
 *    lowest byte the lowest k:
 *        a0 = A[g][4t .. 4t+3]        a1 = A[g+8][4t .. 4t+3]
 *        a2 = A[g][16+4t .. 16+4t+3]  a3 = A[g+8][16+4t .. 16+4t+3].
 *    So a lane must hand in keys 4t..4t+3 and 16+4t..19+4t of each row: half of them are
 *    another lane's. (16-bit P had no such problem: its A fragment is the accumulator's
 *    layout, pairs 2t, 2t+1 and 8+2t, 9+2t.)
 *
 * Two ways out. The sum Σ_k P[m][k]·V[k][n] does not care in which order k runs, as long as
 * P's columns and Vᵀ's keys (the B operand's k) follow the same order: so either P moves to
 * the natural order, or the kernel writes Vᵀ in P's order. V transposed in the kernel:
 * transpose_v writes P's order, and W below is the fragment register as it is. With V handed
 * in as Vᵀ, TMA loads it in the natural order and P must move. Per 16-key half q (n8 blocks
 * j0 = 4kk + 2q and j0 + 1) and row h, lane t packs its two pairs into one word
 *        W_t = e4m3(key 8·0 + 2t, 2t+1) | e4m3(key 8 + 2t, 9 + 2t) << 16
 * and needs keys 4t .. 4t+3, which lanes 2(t%2) and 2(t%2) + 1 hold: in their low pair when
 * t < 2 (block j0), in their high pair when t >= 2 (block j0 + 1). Two shfl.sync within the
 * quad fetch X = W_{2(t%2)} and Y = W_{2(t%2)+1}, and one prmt keeps the half it needs:
 * bytes {X.0, X.1, Y.0, Y.1} (selector 0x5410) for t < 2, {X.2, X.3, Y.2, Y.3} (0x7632)
 * otherwise. 8 shuffles per k32 slice: the price of a V stored transposed (FA3's
 * permute_Aregs_fp8 does the same for its column-major V).
 * ------------------------------------------------------------------------------ */

/* The e4m3 wgmmas of one N, as stage 08's Wgmma<Element, N> for the 16-bit ones. */
template <int N>
struct WgmmaE4m3;
#define FX_DEFINE_WGMMA_E4M3(N)                                                                    \
    template <>                                                                                    \
    struct WgmmaE4m3<N> {                                                                          \
        static __device__ __forceinline__ void ss(float (&d)[N / 2], uint64_t da, uint64_t db,     \
                                                  bool acc)                                        \
        {                                                                                          \
            fx_wgmma_m64n##N##k32_ss_e4m3(d, da, db, acc);                                         \
        }                                                                                          \
        static __device__ __forceinline__ void rs(float (&d)[N / 2], const uint32_t (&a)[4],       \
                                                  uint64_t db, bool acc)                           \
        {                                                                                          \
            fx_wgmma_m64n##N##k32_rs_e4m3(d, a, db, acc);                                          \
        }                                                                                          \
    };
FX_DEFINE_WGMMA_E4M3(64)   // O = P·V at head_dim 64
FX_DEFINE_WGMMA_E4M3(96)   // S at head_dim 256
FX_DEFINE_WGMMA_E4M3(128)  // O at head_dim 128, S at head_dim 64
FX_DEFINE_WGMMA_E4M3(192)  // S at head_dim 128
FX_DEFINE_WGMMA_E4M3(256)  // O at head_dim 256
#undef FX_DEFINE_WGMMA_E4M3

/* Issues S8 = Q8·K8_jᵀ: head_dim/32 SS wgmmas into acc_s (overwritten by the first), one
 * commit group. The caller fences before and waits after. */
template <class Cfg>
__device__ __forceinline__ void issue_s(float (&acc_s)[Cfg::kAccS], uint32_t sQ, uint32_t sK,
                                        int consumer)
{
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / kWgmmaK8; ++kk)
        WgmmaE4m3<Cfg::kBlockN>::ss(acc_s, desc_q<Cfg>(sQ, consumer, kk), desc_k<Cfg>(sK, kk),
                                    kk > 0);
    fx_wgmma_commit();
}

/* Issues O += P8·V8: kBlockN/32 RS wgmmas reading the P fragments, one commit group. The
 * fragments must stay untouched until the group has completed (the tensor cores read them
 * asynchronously). */
template <class Cfg>
__device__ __forceinline__ void issue_pv(float (&acc_o)[Cfg::kAccO],
                                         const uint32_t (&p_frag)[Cfg::kPFrags][4], uint32_t sVt)
{
#pragma unroll
    for (int kk = 0; kk < Cfg::kPFrags; ++kk)
        WgmmaE4m3<Cfg::kHeadDim>::rs(acc_o, p_frag[kk], desc_v<Cfg>(sVt, kk), true);
    fx_wgmma_commit();
}

/* P (fp32, in acc_s) to the e4m3 A fragments of the PV wgmma (the derivation above). Each
 * lane first packs, per 16-key half and row, its two pairs into one word W = e4m3(keys 2t,
 * 2t+1) | e4m3(keys 8+2t, 9+2t) << 16. V transposed in the kernel (kTransposeV): Vᵀ's keys are
 * in that order already (transpose_v), so W is the fragment register. V given transposed: Vᵀ
 * is in the natural key order, and W moves across the quad, 2 shuffles and a prmt per
 * register; every lane of the warp must call it then. cvt.rn.satfinite: P <= 256 never
 * saturates; it is the conversion the CPU model's fx_e4m3_round emulates. */
template <class Cfg>
__device__ __forceinline__ void pack_p(const float (&acc_s)[Cfg::kAccS],
                                       uint32_t (&p_frag)[Cfg::kPFrags][4], int lane)
{
    const int t = lane % kLanesPerRow;
    const int src_lo = (lane - t) + 2 * (t % 2);  // holds keys 4t, 4t+1 of the half
    const int src_hi = src_lo + 1;                // holds keys 4t+2, 4t+3
    const uint32_t keep = t < 2 ? 0x5410u : 0x7632u;
#pragma unroll
    for (int kk = 0; kk < Cfg::kPFrags; ++kk)
#pragma unroll
        for (int q = 0; q < 2; ++q)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int j0 = 4 * kk + 2 * q;  // the half's first n8 block
                const uint32_t w =
                    fx_pack_e4m3x4(acc_s[4 * j0 + 2 * h], acc_s[4 * j0 + 2 * h + 1],
                                   acc_s[4 * j0 + 4 + 2 * h], acc_s[4 * j0 + 4 + 2 * h + 1]);
                if constexpr (Cfg::kTransposeV) {
                    p_frag[kk][h + 2 * q] = w;
                } else {
                    const uint32_t x = __shfl_sync(kFullWarp, w, src_lo);
                    const uint32_t y = __shfl_sync(kFullWarp, w, src_hi);
                    p_frag[kk][h + 2 * q] = fx_prmt(x, y, keep);
                }
            }
}
/* END UNIT */

/* UNIT(consumer_ctx, changed: stage 08's, one CTA per tile: stage 10 builds on 08, not 09) */
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

/* UNIT(softmax_tail, changed: the block's scale c_n, the mask's select, O's units) */
/* The online softmax's second half, and what ordinary code does to the block before its PV
 * GEMM: P (softmax_exp), O *= α_o (kRescale: not while O is still 0), P packed. */
template <class Cfg, bool kMask, bool kRescale>
__device__ __forceinline__ void softmax_tail(const ConsumerCtx &c, SoftmaxState &sm, float c_n,
                                             float (&acc_s)[Cfg::kAccS], float (&acc_o)[Cfg::kAccO],
                                             uint32_t (&p_frag)[Cfg::kPFrags][4])
{
    softmax_exp<Cfg, kMask>(sm, acc_s, c_n);
    if (kRescale)
        softmax_rescale_o<Cfg>(acc_o, sm.alpha_o);
    pack_p<Cfg>(acc_s, p_frag, c.lane);
}
/* END UNIT */

/* ---------------------------------------------------------------------------------
 * Mainloop
 * ------------------------------------------------------------------------------ */

/* This CTA's descales (fx_fwd_args): c·δQ of its Q block, and the K and V descales of its
 * (batch, KV head), indexed by K/V block. */
struct Descales {
    float c_q;       // scale_log2 · δQ(m_block): c_n = c_q · k[n_block]
    const float *k;  // δK of each K/V block
    const float *v;  // δV of each K/V block
};

__device__ __forceinline__ Descales make_descales(const FwdParams &p, int m_block, int head,
                                                  int head_kv, int batch)
{
    Descales ds;
    ds.c_q =
        p.scale_log2 *
        __ldg(p.q_descale + ((int64_t)batch * p.heads_q + head) * p.q_descale_blocks + m_block);
    const int64_t kv_row =
        ((int64_t)batch * (p.heads_q / p.q_per_kv) + head_kv) * p.kv_descale_blocks;
    ds.k = p.k_descale + kv_row;
    ds.v = p.v_descale + kv_row;
    return ds;
}

/* Consumer c waits for its turn on barrier kBarrierTurn + c (bar.sync: its 128 threads)
 * and passes it to c + 1 mod kNumConsumers (bar.arrive: 128 more complete it). Consumer 0
 * arrives once to take the first turn and the last one passes no last turn, so arrivals and
 * waits match exactly. */
template <class Cfg>
__device__ __forceinline__ void take_turn(const ConsumerCtx &c)
{
    fx_named_barrier_sync(kBarrierTurn + (uint32_t)c.consumer, kTurnThreads);
}
template <class Cfg>
__device__ __forceinline__ void pass_turn(const ConsumerCtx &c)
{
    fx_named_barrier_arrive(kBarrierTurn + (uint32_t)((c.consumer + 1) % Cfg::kNumConsumers),
                            kTurnThreads);
}

/*
 * One turn at the tensor cores: S of block n_block (in the ring at `read`) and PV of the
 * block before it (at `prev`); then the softmax of the new S and P packed for the next turn.
 * The first turn has no PV (kPV false: O is still 0), the last one no S (kS false). kMask:
 * the block needs the causal or seqlen_k mask. As stage 08: the softmax runs while PV_{j-1}
 * is still on the tensor cores, and the consumers take turns (stage 07).
 */
template <class Cfg, bool kCausal, bool kMask, bool kS, bool kPV>
__device__ __forceinline__ void mainloop_turn(const ConsumerCtx &c, const Descales &ds,
                                              SharedStorage<Cfg> &smem, PipelineState read,
                                              PipelineState prev, int n_block,
                                              float (&acc_s)[Cfg::kAccS],
                                              float (&acc_o)[Cfg::kAccO],
                                              uint32_t (&p_frag)[Cfg::kPFrags][4], SoftmaxState &sm)
{
    // The block's descales, read before the waits so that the loads overlap them.
    const float c_n = kS ? ds.c_q * __ldg(ds.k + n_block) : 0.f;
    const float delta_v = kS ? __ldg(ds.v + n_block) : 0.f;
    // Wait for the data before taking the turn, so a late load does not hold it.
    if (kS)
        fx_mbarrier_wait(fx_smem_addr(&smem.k_full[read.stage]), read.phase);
    if (kPV)
        fx_mbarrier_wait(fx_smem_addr(&smem.v_full[prev.stage]), prev.phase);
    take_turn<Cfg>(c);
    fx_wgmma_fence();
    if (kS)
        issue_s<Cfg>(acc_s, fx_smem_addr(smem.q), fx_smem_addr(smem.k[read.stage]), c.consumer);
    if (kPV)
        issue_pv<Cfg>(acc_o, p_frag, fx_smem_addr(smem.vt[prev.stage]));
    fx_wgmma_fence_operand(acc_s);
    fx_wgmma_fence_operand(acc_o);
    if (kS || c.consumer != Cfg::kNumConsumers - 1)  // no one takes the last consumer's last
        pass_turn<Cfg>(c);

    if (kS && kPV) {
        // Wait for S_j alone (wgmma.wait_group 1), release K, mask, and run the softmax's
        // max and exponentials while PV_{j-1} still runs; then wait for PV_{j-1}, release
        // Vᵀ, rescale O and pack P for the next turn (stage 08).
        fx_wgmma_wait<1>();  // the S group (committed first) is done; PV may still run
        fx_wgmma_fence_operand(acc_s);
        if (c.lane == 0)
            fx_mbarrier_arrive(fx_smem_addr(&smem.k_empty[read.stage]));
        if (kMask)
            apply_mask<Cfg, kCausal>(acc_s, c.row0,
                                     n_block * Cfg::kBlockN + 2 * (c.lane % kLanesPerRow),
                                     c.seqlen_q, c.seqlen_k);
        // P while PV_{j-1} runs: P is written into acc_s, which PV_{j-1} does not read.
        softmax_max<Cfg>(sm, acc_s, c_n, delta_v);
        softmax_exp<Cfg, kMask>(sm, acc_s, c_n);
        // O and the P fragments are PV_{j-1}'s operands: ours again only once it is done.
        fx_wgmma_wait<0>();
        fx_wgmma_fence_operand(acc_o);
        // P (in acc_s) is converted into p_frag only now: without this fence ptxas may hoist
        // the conversions above the wait, and PV_{j-1}'s fragments and P_j's are then live
        // together (24 more registers at head_dim 128, which spill).
        fx_wgmma_fence_operand(acc_s);
        if (c.lane == 0)
            fx_mbarrier_arrive(fx_smem_addr(&smem.v_empty[prev.stage]));
        softmax_rescale_o<Cfg>(acc_o, sm.alpha_o);
        pack_p<Cfg>(acc_s, p_frag, c.lane);
        return;
    }
    fx_wgmma_wait<0>();  // both groups: S_j and PV_{j-1}
    fx_wgmma_fence_operand(acc_s);
    fx_wgmma_fence_operand(acc_o);
    if (kS && c.lane == 0)
        fx_mbarrier_arrive(fx_smem_addr(&smem.k_empty[read.stage]));
    if (kPV && c.lane == 0)
        fx_mbarrier_arrive(fx_smem_addr(&smem.v_empty[prev.stage]));
    if (!kS)
        return;

    // ---- Mask, online softmax, O rescale (no PV group is in flight: O is ours) ----
    if (kMask)
        apply_mask<Cfg, kCausal>(acc_s, c.row0,
                                 n_block * Cfg::kBlockN + 2 * (c.lane % kLanesPerRow), c.seqlen_q,
                                 c.seqlen_k);
    softmax_max<Cfg>(sm, acc_s, c_n, delta_v);
    softmax_tail<Cfg, kMask, kPV>(c, sm, c_n, acc_s, acc_o, p_frag);
}

/* ---------------------------------------------------------------------------------
 * Producer warpgroup: one elected lane issues every load
 * ------------------------------------------------------------------------------ */

/* V given transposed: one elected lane of warp 0 issues every load. Q once, then K and Vᵀ
 * of every block in mainloop order, each into the ring's next stage once the consumers have
 * released it (load_kv). K is released before Vᵀ (after S, not after PV), so it is refilled
 * first. */
template <class Cfg>
__device__ __forceinline__ void producer_loop(const FwdParams &p, SharedStorage<Cfg> &smem,
                                              int n_block_max, int m_block, int head, int head_kv,
                                              int batch)
{
    load_tile<Cfg>(fx_smem_addr(smem.q), &p.tma_q, fx_smem_addr(&smem.q_full), Cfg::kBlockM, head,
                   m_block * Cfg::kBlockM, batch);
    PipelineState write = {0, 0};
    for (int it = 0; it < n_block_max; ++it) {
        load_kv<Cfg>(p, smem, write, it >= Cfg::kStages, n_block_max - 1 - it, head_kv, batch);
        advance<Cfg::kStages>(write);
    }
}

/*
 * Row-major V: the whole producer warpgroup (thread = 0..127). One elected lane of warp 0
 * issues the loads as producer_loop does, K and raw V of block `it` into the ring; all 128
 * threads then transpose the V of the block before (FA3's order: the loads of block it fly
 * while block it − 1 is transposed), and the last block's V after the loop.
 *
 * The raw tiles need no empty barrier: the raw V of block it overwrites that of block
 * it − kStages, which the warpgroup transposed in iteration it − kStages + 1 <= it − 1
 * (kStages >= 2), and the issuing lane passed that transpose's kBarrierTranspose, after
 * every thread's last ldmatrix of it, before it issues this load.
 */
template <class Cfg>
__device__ __forceinline__ void producer_loop_transpose(const FwdParams &p,
                                                        SharedStorage<Cfg> &smem,
                                                        uint32_t smem_addr, int n_block_max,
                                                        int m_block, int head, int head_kv,
                                                        int batch, int thread)
{
    static_assert(Cfg::kStages >= 2, "the raw V ring is refilled one block after its transpose");
    const bool issuer = thread / kWarpSize == 0 && fx_elect_one();
    if (issuer)
        load_tile<Cfg>(fx_smem_addr(smem.q), &p.tma_q, fx_smem_addr(&smem.q_full), Cfg::kBlockM,
                       head, m_block * Cfg::kBlockM, batch);
    // Block it's ring position, from it alone (advance's order; fewer live registers than two
    // PipelineStates).
    auto ring = [](int it) {
        return PipelineState{it % Cfg::kStages, (uint32_t)((it / Cfg::kStages) & 1)};
    };
    for (int it = 0; it < n_block_max; ++it) {
        if (issuer)
            load_kv<Cfg>(p, smem, ring(it), it >= Cfg::kStages, n_block_max - 1 - it, head_kv,
                         batch);
        __syncwarp();  // warp 0 whole again before ldmatrix/stmatrix (.sync.aligned)
        if (it > 0)
            transpose_block<Cfg>(smem_addr, ring(it - 1), it - 1 >= Cfg::kStages, thread);
    }
    transpose_block<Cfg>(smem_addr, ring(n_block_max - 1), n_block_max - 1 >= Cfg::kStages, thread);
}

/* UNIT(epilogue, changed: bf16 O from e4m3 inputs, through its own tile; no exact path) */
/* ---------------------------------------------------------------------------------
 * Epilogue: O normalized, through this warpgroup's rows of the O tile, out by TMA; LSE
 * ------------------------------------------------------------------------------ */

/*
 * O (bf16: FA3's fp8 output type) goes through this consumer warpgroup's 64 rows of the O
 * staging tile, in the 128B-swizzled slab layout that TMA reads (stage 08's, in its own
 * buffer: e4m3 Q is too narrow to hold it). Every writer fences its generic-proxy stores
 * against the async proxy (PTX ISA §9.7.13.4), the warpgroup's 128 threads meet, and one
 * thread stores the 64 × head_dim box, one TMA per 64-column slab; rows past seqlen_q lie
 * outside the tensor map and are dropped. The accumulator is in the natural head_dim order
 * (both Vᵀ paths permute keys at most, never head_dim columns), so O needs no un-permute.
 */
template <class Cfg>
__device__ __forceinline__ void epilogue(const ConsumerCtx &c, const FwdParams &p,
                                         SharedStorage<Cfg> &smem, float (&acc_o)[Cfg::kAccO],
                                         const SoftmaxState &sm)
{
    float lse[2];
    softmax_finalize<Cfg>(sm, acc_o, lse);

    unsigned char *sO = reinterpret_cast<unsigned char *>(smem.o);
    // This warp's first row in the O tile, consumer·64 + warp_in_wg·16, from row0: holding
    // warp_in_wg across the mainloop cost a register that ptxas spilled (head_dim 256).
    const int local_row0 = c.row0 - c.m_block * Cfg::kBlockM - c.lane / kLanesPerRow;
    const int g = c.lane / kLanesPerRow, t = c.lane % kLanesPerRow;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = local_row0 + g + 8 * h;
#pragma unroll
        for (int d = 0; d < Cfg::kDTiles; ++d) {
            const int col = 8 * d + 2 * t;
            const uint32_t off =
                (uint32_t)((col / kSlabCols) * Cfg::kSlabOBytes) +
                fx_swizzle128_offset((uint32_t)r, (uint32_t)((col % kSlabCols) * kElemBytes));
            *reinterpret_cast<uint32_t *>(sO + off) =
                fx_pack_bf16x2(acc_o[4 * d + 2 * h], acc_o[4 * d + 2 * h + 1]);
        }
    }
    fx_fence_proxy_async_smem();
    fx_named_barrier_sync(kBarrierEpilogue + (uint32_t)c.consumer, kEpilogueThreads);
    if (local_row0 % kWgmmaM == 0 && c.lane == 0) {  // warp 0 of the warpgroup
        const uint32_t sOaddr = fx_smem_addr(smem.o);
#pragma unroll
        for (int s = 0; s < Cfg::kSlabs; ++s)
            fx_tma_store_4d(
                &p.tma_o,
                sOaddr + (uint32_t)(s * Cfg::kSlabOBytes + c.consumer * kWgmmaM * kSlabRowBytes),
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

/* A causal Q block whose rows all see no key (seqlen_q > seqlen_k): O = 0 (bf16), LSE = -inf,
 * written by every thread of the CTA in 16-byte chunks, before any barrier or load. */
template <class Cfg>
__device__ __forceinline__ void write_empty_block(const FwdParams &p, int m_block, int head,
                                                  int batch, int tid)
{
    constexpr int kChunks = Cfg::kHeadDim / kChunkElems;
    __nv_bfloat16 *O = static_cast<__nv_bfloat16 *>(p.o) + batch * p.o_batch_stride +
                       head * p.o_head_stride + (int64_t)m_block * Cfg::kBlockM * p.o_row_stride;
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
 * The kernel: one CTA per (Q block, query head, batch); warpgroup 0 produces (TMA),
 * warpgroups 1..kNumConsumers consume 64 rows of the Q block each.
 * ------------------------------------------------------------------------------ */

template <class Cfg, bool kCausal>
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
        write_empty_block<Cfg>(p, m_block, head, batch, tid);
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
            // Vᵀ: the TMA's expect_tx, or the transposing warpgroup's one arrive.
            fx_mbarrier_init(fx_smem_addr(&smem.v_full[s]), 1);
            if (Cfg::kTransposeV)
                fx_mbarrier_init(fx_smem_addr(&smem.v_raw_full[s]), 1);
            fx_mbarrier_init(fx_smem_addr(&smem.k_empty[s]), Cfg::kNConsumerWarps);
            fx_mbarrier_init(fx_smem_addr(&smem.v_empty[s]), Cfg::kNConsumerWarps);
        }
        fx_fence_mbarrier_init();
    }
    __syncthreads();

    // ---- Producer warpgroup ----
    if (warpgroup == 0) {
        fx_setmaxnreg_dec<Cfg::kProducerRegs>();
        if constexpr (Cfg::kTransposeV)
            producer_loop_transpose<Cfg>(p, smem, smem_addr, range.n_block_max, m_block, head,
                                         head_kv, batch, tid);
        else if (warp_in_wg == 0 && fx_elect_one())
            producer_loop<Cfg>(p, smem, range.n_block_max, m_block, head, head_kv, batch);
        // The loads complete on the consumers' barriers; with V row-major the warpgroup has
        // waited for every raw V tile it transposed and published each Vᵀ on v_full.
        return;
    }

    // ---- Consumer warpgroups ----
    fx_setmaxnreg_inc<Cfg::kConsumerRegs>();
    // The consumer index broadcast from lane 0, so that ptxas knows it is the same in every
    // lane of the warp (a uniform register): Q's wgmma descriptors, which derive from it, then
    // stay in uniform registers across the mainloop instead of two R2UR moves before every S
    // wgmma (stage 09 broadcasts the warpgroup index likewise, as CUTLASS's
    // canonical_warp_group_idx). Here after the split, not before it as in stage 09: with the
    // kernel's warpgroup index from the shuffle, ptxas spilled 4 bytes at head_dim 256 causal
    // with V row-major (docs/10_fp8.md).
    const int consumer = __shfl_sync(kFullWarp, warpgroup - 1, 0);
    const ConsumerCtx c = make_consumer_ctx<Cfg>(p, consumer, warp_in_wg, lane);
    const Descales ds = make_descales(p, m_block, head, head_kv, batch);
    float acc_o[Cfg::kAccO];
#pragma unroll
    for (int i = 0; i < Cfg::kAccO; ++i)
        acc_o[i] = 0.f;
    SoftmaxState sm;
    softmax_init(sm);
    fx_mbarrier_wait(fx_smem_addr(&smem.q_full), 0);

    // ---- Mainloop, split: the masked blocks first, then the rest without a mask ----
    // (in turns: the first S alone, the last PV alone)
    float acc_s[Cfg::kAccS];
    uint32_t p_frag[Cfg::kPFrags][4];
    PipelineState read = {0, 0}, prev = read;
    if (c.consumer == 0)
        fx_named_barrier_arrive(kBarrierTurn, kTurnThreads);  // take the first turn
    // The first block is masked whether it needs it or not (a mask that hides nothing).
    mainloop_turn<Cfg, kCausal, true, true, false>(c, ds, smem, read, prev, n_iters - 1, acc_s,
                                                   acc_o, p_frag, sm);
    prev = read;
    advance<Cfg::kStages>(read);
    int it = 1;
    for (; it < n_masked; ++it) {
        const int n_block = range.n_block_max - 1 - it;
        mainloop_turn<Cfg, kCausal, true, true, true>(c, ds, smem, read, prev, n_block, acc_s,
                                                      acc_o, p_frag, sm);
        prev = read;
        advance<Cfg::kStages>(read);
    }
    for (; it < n_iters; ++it) {
        const int n_block = range.n_block_max - 1 - it;
        mainloop_turn<Cfg, kCausal, false, true, true>(c, ds, smem, read, prev, n_block, acc_s,
                                                       acc_o, p_frag, sm);
        prev = read;
        advance<Cfg::kStages>(read);
    }
    mainloop_turn<Cfg, kCausal, false, false, true>(c, ds, smem, read, prev, 0, acc_s, acc_o,
                                                    p_frag, sm);

    epilogue<Cfg>(c, p, smem, acc_o, sm);
}

/* ---------------------------------------------------------------------------------
 * Host launcher
 * ------------------------------------------------------------------------------ */

/* Encodes one tensor map (fx_tma.h) and prints the reason when it cannot. */
bool encode(CUtensorMap *map, const fx_tma_tiled *t, const char *name)
{
    char why[256];
    if (fx_tma_encode_tiled(map, t, why, sizeof why) != FX_TMA_OK) {
        fx_error("the tensor map of %s: %s", name, why);
        return false;
    }
    return true;
}

/* Row-major e4m3 V [batch, seqlen_k, heads_kv, head_dim] (strides in l): K's map, boxes of
 * 64 columns (64 bytes, 64B swizzle) × kBlockN keys, which load_kv lands in the raw tile. */
template <class Cfg>
fx_tma_tiled v_row_major_map(const void *v, fx_layout l, int batch, int seqlen_k, int heads_kv)
{
    fx_tma_tiled t = fx_tma_tiled_qkv(v, FX_E4M3, l, batch, seqlen_k, heads_kv, Cfg::kHeadDim,
                                      Cfg::kBlockN, kSlabCols);
    t.swizzle = FX_TMA_SWIZZLE_64B;
    return t;
}

/* Vᵀ [batch, heads_kv, head_dim, row_keys] of which keys [0, seqlen_k) are read (--fp8-vt:
 * row_keys = seqlen_k): the map {seqlen_k, head_dim, heads_kv, batch}, boxes of 32 keys (32
 * bytes, 32B swizzle) × head_dim rows, which load_vt lands in the Vᵀ tile. TMA requires the
 * row stride, row_keys bytes, to be a multiple of 16. */
template <class Cfg>
fx_tma_tiled vt_map(const void *vt, int batch, int seqlen_k, int row_keys, int heads_kv)
{
    fx_tma_tiled t = {};
    t.dtype = FX_E4M3;
    t.rank = 4;
    t.global_address = vt;
    t.global_dim[0] = (uint64_t)seqlen_k;
    t.global_dim[1] = (uint64_t)Cfg::kHeadDim;
    t.global_dim[2] = (uint64_t)heads_kv;
    t.global_dim[3] = (uint64_t)batch;
    t.global_stride_bytes[0] = (uint64_t)row_keys;  // from head_dim row d to d + 1
    t.global_stride_bytes[1] = (uint64_t)row_keys * Cfg::kHeadDim;
    t.global_stride_bytes[2] = (uint64_t)row_keys * Cfg::kHeadDim * heads_kv;
    t.box_dim[0] = kVtSlabKeys;
    t.box_dim[1] = (uint32_t)Cfg::kHeadDim;
    t.box_dim[2] = 1;
    t.box_dim[3] = 1;
    t.swizzle = FX_TMA_SWIZZLE_32B;
    t.l2_promotion = FX_TMA_L2_256B;
    return t;
}

/* The kernel arguments of one e4m3 forward call (fx_fwd_args' e4m3 fields): Q and K as e4m3
 * [batch, seqlen, heads, head_dim] in boxes of 64 columns (64 bytes, 64B swizzle) × kBlockM
 * or kBlockN rows; V either row-major [batch, seqlen_k, heads_kv, head_dim] as K (kTransposeV:
 * the kernel transposes it) or, with p->fp8_v_transposed, Vᵀ [batch, heads_kv, head_dim,
 * seqlen_k] as the map {seqlen_k, head_dim, heads_kv, batch} in boxes of 32 keys (32B swizzle)
 * × head_dim rows; O bf16 as stage 08's. false (reason printed) when a map cannot be encoded
 * (a stride not a multiple of 16 bytes: Vᵀ's row stride is seqlen_k bytes), the descales are
 * missing or their blocks are not Cfg's tiles, or V's layout is not Cfg's. */
template <class Cfg>
bool make_fp8_params(FwdParams *p, const fx_fwd_args *a)
{
    const fx_problem *pr = a->p;
    const int d = pr->head_dim;
    if (!a->q_descale || !a->k_descale || !a->v_descale || a->fp8_block_m != Cfg::kBlockM ||
        a->fp8_block_n != Cfg::kBlockN || pr->fp8_v_transposed == Cfg::kTransposeV) {
        fx_error("e4m3 forward: needs descales in blocks of %d × %d rows (got %d × %d) and V %s",
                 Cfg::kBlockM, Cfg::kBlockN, a->fp8_block_m, a->fp8_block_n,
                 Cfg::kTransposeV ? "row-major" : "transposed (--fp8-vt)");
        return false;
    }
    fx_tma_tiled tq = fx_tma_tiled_qkv(a->q, FX_E4M3, a->q_layout, pr->batch, pr->seqlen_q,
                                       pr->heads_q, d, Cfg::kBlockM, kSlabCols);
    fx_tma_tiled tk = fx_tma_tiled_qkv(a->k, FX_E4M3, a->k_layout, pr->batch, pr->seqlen_k,
                                       pr->heads_kv, d, Cfg::kBlockN, kSlabCols);
    tq.swizzle = tk.swizzle = FX_TMA_SWIZZLE_64B;
    fx_tma_tiled tv = {};
    if (Cfg::kTransposeV)
        tv = v_row_major_map<Cfg>(a->v, a->v_layout, pr->batch, pr->seqlen_k, pr->heads_kv);
    else
        tv = vt_map<Cfg>(a->v, pr->batch, pr->seqlen_k, pr->seqlen_k, pr->heads_kv);
    const fx_tma_tiled to = fx_tma_tiled_qkv(a->o, FX_BF16, a->o_layout, pr->batch, pr->seqlen_q,
                                             pr->heads_q, d, kWgmmaM, kSlabCols);
    if (!encode(&p->tma_q, &tq, "Q") || !encode(&p->tma_k, &tk, "K") ||
        !encode(&p->tma_v, &tv, Cfg::kTransposeV ? "V" : "V (transposed)") ||
        !encode(&p->tma_o, &to, "O"))
        return false;
    fill_fwd_scalars(p, a);
    p->head_dim = p->head_dim_v = d;
    p->q_descale = a->q_descale;
    p->k_descale = a->k_descale;
    p->v_descale = a->v_descale;
    p->q_descale_blocks = (pr->seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
    p->kv_descale_blocks = (pr->seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
    return true;
}

template <class Cfg, bool kCausal>
cudaError_t launch(const fx_fwd_args *a)
{
    FwdParams p = {};
    if (!make_fp8_params<Cfg>(&p, a))
        return cudaErrorInvalidValue;
    return launch_per_tile<Cfg>(fwd_kernel<Cfg, kCausal>, p, a, kSmemBytes<Cfg>);
}

template <class Cfg>
cudaError_t dispatch_mask(const fx_fwd_args *a)
{
    return a->p->causal ? launch<Cfg, true>(a) : launch<Cfg, false>(a);
}

/* head_dim picks the tile, V's layout the kernel: row-major V (the default) transposed in
 * the kernel, or Vᵀ as given (--fp8-vt). */
template <bool kTransposeV>
cudaError_t dispatch_head_dim(const fx_fwd_args *a)
{
    switch (a->p->head_dim) {
    case 64: return dispatch_mask<ConfigD64<kTransposeV>>(a);
    case 128: return dispatch_mask<ConfigD128<kTransposeV>>(a);
    case 256: return dispatch_mask<ConfigD256<kTransposeV>>(a);
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace

/* The stage's entry points (stage.c). The forward of fx_stage.h for dtype e4m3 (fx_fwd_args'
 * e4m3 fields set; V row-major, or transposed when a->p->fp8_v_transposed):
 * cudaErrorInvalidValue for another dtype or head_dim, or arguments that make_fp8_params
 * refuses; cudaErrorMisalignedAddress for an O that o_aligned refuses. */
extern "C" cudaError_t FX_ENTRY(fwd)(const fx_fwd_args *a)
{
    if (a->p->dtype != FX_E4M3)
        return cudaErrorInvalidValue;
    if (!o_aligned(a->o, &a->o_layout))
        return cudaErrorMisalignedAddress;
    return a->p->fp8_v_transposed ? dispatch_head_dim<false>(a) : dispatch_head_dim<true>(a);
}

/* Dynamic shared memory one CTA needs at head_dim (0: not built), with V given transposed or
 * row-major (which adds kStages raw V tiles). */
extern "C" size_t FX_ENTRY(fwd_smem_bytes)(int head_dim, bool v_transposed)
{
    return v_transposed
               ? smem_bytes_for(head_dim, kSmemBytes<ConfigD64<false>>,
                                kSmemBytes<ConfigD128<false>>, kSmemBytes<ConfigD256<false>>)
               : smem_bytes_for(head_dim, kSmemBytes<ConfigD64<true>>, kSmemBytes<ConfigD128<true>>,
                                kSmemBytes<ConfigD256<true>>);
}

/* The kernel's tile at head_dim, kBlockM × kBlockN ({0, 0}: not built): the blocks that
 * per-block quantization must use (the descriptor's fp8_tiles). Both V layouts share it. */
extern "C" fx_fp8_tiles FX_ENTRY(fwd_tiles)(int head_dim)
{
    static_assert(ConfigD64<true>::kBlockN == ConfigD64<false>::kBlockN &&
                      ConfigD128<true>::kBlockN == ConfigD128<false>::kBlockN &&
                      ConfigD256<true>::kBlockN == ConfigD256<false>::kBlockN,
                  "one tile per head_dim, whatever V's layout: the descales' blocks");
    switch (head_dim) {
    case 64: return fx_fp8_tiles{ConfigD64<true>::kBlockM, ConfigD64<true>::kBlockN};
    case 128: return fx_fp8_tiles{ConfigD128<true>::kBlockM, ConfigD128<true>::kBlockN};
    case 256: return fx_fp8_tiles{ConfigD256<true>::kBlockM, ConfigD256<true>::kBlockN};
    default: return fx_fp8_tiles{0, 0};
    }
}

/* The stage's --self-test of the V transpose (its own file, so that this one reads as the
 * kernel): FX_ENTRY(self_test), on the device functions and plan above. */
#include "self_test.cuh"
