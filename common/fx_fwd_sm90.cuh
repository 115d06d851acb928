/*
 * fx_fwd_sm90.cuh — what the warpgroup (wgmma) forward stages share by design and do not
 * teach: the thread and tile constants, the element-type traits (which wgmma, how fp32 pairs
 * are packed), the kernel arguments and their host-side setup (tensor maps), and the
 * dispatch from a problem to a compiled tile (head_dim), element type and mask.
 *
 * Stages 05–08 include it, and every later Hopper forward will; what a stage teaches (the
 * pipeline, the softmax, the mainloop, the epilogue) stays in its own fwd.cu, where the
 * reader needs it, and tests/shape/check_units.sh keeps the inherited copies equal.
 *
 * Everything here has internal linkage (an anonymous namespace, or static): several stages
 * are linked into one program, each with its own instantiations.
 *
 * Layouts (fx_problem.h): Q, O [batch, seqlen_q, heads_q, head_dim]; K, V [batch, seqlen_k,
 * heads_kv, head_dim] (V and O at head_dim_v columns where a stage has it: stage 09); LSE
 * fp32 [batch, heads_q, seqlen_q], natural log. Query head h reads kv head h / (heads_q /
 * heads_kv). Causal is bottom-right aligned: row i sees key j iff
 * j <= i + seqlen_k - seqlen_q. A row that sees no key gets O = 0 and LSE = -inf.
 *
 * Sources of the Hopper forwards: Shah et al., "FlashAttention-3: Fast and Accurate Attention
 * with Asynchrony and Low-precision" (2024); Dao, "FlashAttention-2" (2023), Algorithm 1;
 * PTX ISA 9.0 §9.7.15 (wgmma), §9.7.9.25.5.2 (cp.async.bulk.tensor, load and store),
 * §9.7.13.15 (mbarrier), §9.7.13.1 (bar.sync, bar.arrive), §9.7.13.4 (fence.proxy.async),
 * §9.7.19.5 (setmaxnreg), §9.7.13.14 (elect.sync), §5.5 (tensor maps); common/fx_tma.h (the
 * map encoding) and common/ptx/ (the wrappers, each with its ISA section).
 */
#ifndef FX_FWD_SM90_CUH
#define FX_FWD_SM90_CUH

#include <cuda.h> /* CUtensorMap: a type; nothing here links libcuda */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "fx_exact_rows.cuh"
#include "fx_msg.h"
#include "fx_stage.h"
#include "fx_tma.h"
#include "ptx/hopper.cuh"
#include "ptx/wgmma_desc.h"

namespace {

/* ---------------------------------------------------------------------------------
 * Threads, wgmma shapes and the swizzled tile layout
 * ------------------------------------------------------------------------------ */

constexpr int kWarpSize = 32;
constexpr int kWarpgroupThreads = 128;  // 4 warps issue one wgmma together
constexpr int kWarpsPerWarpgroup = 4;
constexpr int kWgmmaM = 64;  // rows of one wgmma (m64nNk16): one warpgroup's rows
constexpr int kWgmmaK = 16;  // the k of one 16-bit wgmma
constexpr int kRowsPerWarp = 16;
constexpr int kLanesPerRow = 4;  // lanes 4g..4g+3 hold row g (and g + 8) of a warp's 16
constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int kElemBytes = 2;  // bf16 and fp16
// A 128B-swizzled slab is rows × 64 elements (128 bytes per row); TMA's box is one slab.
constexpr int kSlabCols = 64;
constexpr int kSlabRowBytes = FX_SWIZZLE128_ROW_BYTES;       // 128 (wgmma_desc.h)
constexpr int kSwizzleAtomBytes = FX_SWIZZLE128_ATOM_BYTES;  // 1024: 8 rows of 128 bytes
constexpr int kBarrierBytes = 8;                             // one mbarrier (a b64)
constexpr int kChunkBytes = 16;                              // the widest plain store: 8 elements
constexpr int kChunkElems = 8;

/* ---------------------------------------------------------------------------------
 * The element type: which wgmma, and how fp32 pairs are packed to it
 * ------------------------------------------------------------------------------ */

template <class Element, int N>
struct Wgmma;

// SS: A (Q) and B (K) both K-major (trans 0). RS: A (P) from registers, B (V) MN-major
// (trans-b 1: 16-bit wgmma reads an MN-major B transposed).
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
FX_DEFINE_WGMMA(__nv_bfloat16, bf16, 80)  // stage 09's FA3 tiles (docs/09): kBlockN at 256
FX_DEFINE_WGMMA(__nv_bfloat16, bf16, 96)  // stage 09, head_dim 192: kBlockN
FX_DEFINE_WGMMA(__nv_bfloat16, bf16, 128)
FX_DEFINE_WGMMA(__nv_bfloat16, bf16, 176)  // stage 09's FA3 tiles: kBlockN at 128
FX_DEFINE_WGMMA(__nv_bfloat16, bf16, 192)  // stage 09, head_dim 192: O = P·V
FX_DEFINE_WGMMA(__nv_bfloat16, bf16, 256)
FX_DEFINE_WGMMA(__half, fp16, 64)
FX_DEFINE_WGMMA(__half, fp16, 80)
FX_DEFINE_WGMMA(__half, fp16, 96)
FX_DEFINE_WGMMA(__half, fp16, 128)
FX_DEFINE_WGMMA(__half, fp16, 176)
FX_DEFINE_WGMMA(__half, fp16, 192)
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

/* The dynamic shared-memory window is only promised 16-byte alignment; the tiles need the
 * 1024-byte swizzle atom. Returns the window's shared address rounded up (the launch
 * reserves kSwizzleAtomBytes of slack for it). */
__device__ __forceinline__ uint32_t smem_base_aligned(const void *smem_raw)
{
    return (fx_smem_addr(smem_raw) + kSwizzleAtomBytes - 1) & ~(uint32_t)(kSwizzleAtomBytes - 1);
}

/* ---------------------------------------------------------------------------------
 * Kernel arguments. The tensor maps live in the kernel's parameter space (the struct is a
 * __grid_constant__ parameter): TMA reads them there, by generic address.
 * ------------------------------------------------------------------------------ */

struct FwdParams {
    CUtensorMap tma_q;  // box {64, 1, kBlockM, 1}: one 64-column slab of a Q block of one head
    CUtensorMap tma_k;  // box {64, 1, kBlockN, 1}
    CUtensorMap tma_v;  // box {64, 1, kBlockN, 1}
    CUtensorMap tma_o;  // box {64, 1, 64, 1}: one consumer warpgroup's rows of one O slab
    void *o;            // for the CTAs whose rows see no key (they store zeros without TMA)
    float *lse;         // [batch, heads_q, seqlen_q], natural log
    int64_t o_batch_stride, o_head_stride;  // elements
    int o_row_stride;                       // elements (every tensor has < 2^31 of them)
    int seqlen_q, seqlen_k;
    int heads_q;
    int q_per_kv;         // heads_q / heads_kv: query heads that read one kv head
    float softmax_scale;  // natural-log units, for the LSE
    float scale_log2;     // softmax_scale · log2(e): exp(x·scale) = 2^(x·scale_log2)
    // Q, K and V as plain pointers, for the exact path alone (exact_rows_args); the
    // mainloop reads them through the tensor maps.
    const void *q, *k, *v;
    int64_t q_batch_stride, q_head_stride, k_batch_stride, k_head_stride;  // elements
    int64_t v_batch_stride, v_head_stride;
    int q_row_stride, k_row_stride, v_row_stride;
    int head_dim, head_dim_v;
    int causal;
    // Stage 10 (e4m3) alone: the descales [batch, heads, n_blocks] of Q (one per kBlockM
    // rows), K and V (one per kBlockN rows), fx_fp8.h; n_blocks of Q and of K/V. NULL, 0 in
    // the 16-bit stages.
    const float *q_descale, *k_descale, *v_descale;
    int q_descale_blocks, kv_descale_blocks;
};

/* Encodes the 4D map {cols, heads, seqlen, batch} of one tensor (cols: head_dim, or
 * head_dim_v for V and O) with boxes of box_rows × 64 columns and the 128B swizzle; on
 * failure prints the reason (a stride that is not a multiple of 16 bytes, an unaligned base)
 * and returns false. */
bool encode_map(CUtensorMap *map, const void *base, const fx_problem *pr, fx_layout l, int seqlen,
                int heads, int cols, int box_rows, const char *name)
{
    char why[256];
    const fx_tma_tiled t = fx_tma_tiled_qkv(base, pr->dtype, l, pr->batch, seqlen, heads, cols,
                                            (uint32_t)box_rows, kSlabCols);
    if (fx_tma_encode_tiled(map, &t, why, sizeof why) != FX_TMA_OK) {
        fx_error("the tensor map of %s: %s", name, why);
        return false;
    }
    return true;
}

/* The scalar kernel arguments every Hopper forward fills alike (make_fwd_params; stage 10's
 * make_fp8_params): O and LSE with O's strides (elements), the lengths and head counts
 * (q_per_kv = heads_q / heads_kv: GQA), the softmax scale and its log2 form, the mask. */
void fill_fwd_scalars(FwdParams *p, const fx_fwd_args *a)
{
    const fx_problem *pr = a->p;
    p->o = a->o;
    p->lse = a->lse;
    p->o_batch_stride = a->o_layout.batch_stride;
    p->o_head_stride = a->o_layout.head_stride;
    p->o_row_stride = (int)a->o_layout.row_stride;
    p->seqlen_q = pr->seqlen_q;
    p->seqlen_k = pr->seqlen_k;
    p->heads_q = pr->heads_q;
    p->q_per_kv = pr->heads_q / pr->heads_kv;
    p->softmax_scale = (float)pr->softmax_scale;
    p->scale_log2 = (float)(pr->softmax_scale * M_LOG2E);
    p->causal = pr->causal;
}

/* The kernel arguments of one forward call with Q/K/V boxes of block_m and block_n rows;
 * false (reason printed) when a tensor map cannot be encoded. */
bool make_fwd_params(FwdParams *p, const fx_fwd_args *a, int block_m, int block_n)
{
    const fx_problem *pr = a->p;
    const int d = pr->head_dim, dv = fx_head_dim_v(pr);
    if (!encode_map(&p->tma_q, a->q, pr, a->q_layout, pr->seqlen_q, pr->heads_q, d, block_m, "Q") ||
        !encode_map(&p->tma_k, a->k, pr, a->k_layout, pr->seqlen_k, pr->heads_kv, d, block_n,
                    "K") ||
        !encode_map(&p->tma_v, a->v, pr, a->v_layout, pr->seqlen_k, pr->heads_kv, dv, block_n,
                    "V") ||
        !encode_map(&p->tma_o, a->o, pr, a->o_layout, pr->seqlen_q, pr->heads_q, dv, kWgmmaM, "O"))
        return false;
    fill_fwd_scalars(p, a);
    p->q = a->q;
    p->k = a->k;
    p->v = a->v;
    p->q_batch_stride = a->q_layout.batch_stride;
    p->q_head_stride = a->q_layout.head_stride;
    p->q_row_stride = (int)a->q_layout.row_stride;
    p->k_batch_stride = a->k_layout.batch_stride;
    p->k_head_stride = a->k_layout.head_stride;
    p->k_row_stride = (int)a->k_layout.row_stride;
    p->v_batch_stride = a->v_layout.batch_stride;
    p->v_head_stride = a->v_layout.head_stride;
    p->v_row_stride = (int)a->v_layout.row_stride;
    p->head_dim = d;
    p->head_dim_v = dv;
    return true;
}

/* The exact path's view (fx_exact_rows.cuh) of query head `head` of batch `batch`. */
__device__ __forceinline__ fx_exact_rows_args exact_rows_args(const FwdParams &p, int batch,
                                                              int head)
{
    return fx_exact_rows_view(p, batch, head, p.head_dim, p.head_dim_v, p.causal != 0);
}

/* Launches `kernel` on one CTA per (Q block, query head, batch) of Cfg's tile: the grid of
 * every stage before the persistent one (stage 09). */
template <class Cfg, class Kernel>
cudaError_t launch_per_tile(Kernel kernel, const FwdParams &p, const fx_fwd_args *a, int smem_bytes)
{
    // Past 48 KiB of dynamic shared memory a kernel must opt in.
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (err != cudaSuccess)
        return err;
    const fx_problem *pr = a->p;
    const dim3 grid((unsigned)((pr->seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM),
                    (unsigned)pr->heads_q, (unsigned)pr->batch);
    kernel<<<grid, Cfg::kNThreads, (size_t)smem_bytes, a->stream>>>(p);
    return cudaGetLastError();
}

/* O stored without TMA (the CTAs whose rows see no key write 16-byte chunks of zeros) needs
 * 16-byte aligned rows; the tensor maps check Q, K, V and O for TMA. */
bool o_aligned(const void *o, const fx_layout *l)
{
    return ((uintptr_t)o % kChunkBytes) == 0 && l->row_stride % kChunkElems == 0 &&
           l->head_stride % kChunkElems == 0 && l->batch_stride % kChunkElems == 0;
}

/*
 * From a problem to a compiled kernel: head_dim picks the tile (C64, C128, C256), then the
 * element type and the mask. Launch<Cfg, Element, kCausal>::run(a) is the stage's launcher.
 * Returns its error, cudaErrorMisalignedAddress for an O that o_aligned refuses, or
 * cudaErrorInvalidValue for a head_dim or dtype the stage does not build (its descriptor's
 * caps refuse those before a call).
 */
template <template <class, class, bool> class Launch, class Cfg>
cudaError_t dispatch_dtype_mask(const fx_fwd_args *a)
{
    const bool causal = a->p->causal;
    switch (a->p->dtype) {
    case FX_BF16:
        return causal ? Launch<Cfg, __nv_bfloat16, true>::run(a)
                      : Launch<Cfg, __nv_bfloat16, false>::run(a);
    case FX_FP16:
        return causal ? Launch<Cfg, __half, true>::run(a) : Launch<Cfg, __half, false>::run(a);
    default: return cudaErrorInvalidValue;
    }
}

template <template <class, class, bool> class Launch, class C64, class C128, class C256>
cudaError_t dispatch_forward(const fx_fwd_args *a)
{
    if (!o_aligned(a->o, &a->o_layout))
        return cudaErrorMisalignedAddress;
    switch (a->p->head_dim) {
    case 64: return dispatch_dtype_mask<Launch, C64>(a);
    case 128: return dispatch_dtype_mask<Launch, C128>(a);
    case 256: return dispatch_dtype_mask<Launch, C256>(a);
    default: return cudaErrorInvalidValue;
    }
}

/* Dynamic shared memory per CTA at this head_dim, given the three tiles' bytes; 0 for a
 * head_dim the stage does not build. */
size_t smem_bytes_for(int head_dim, int bytes_d64, int bytes_d128, int bytes_d256)
{
    switch (head_dim) {
    case 64: return (size_t)bytes_d64;
    case 128: return (size_t)bytes_d128;
    case 256: return (size_t)bytes_d256;
    default: return 0;
    }
}

}  // namespace

#endif
