/*
 * bwd.cu — stage 01: standard attention, backward, with S, P, dP and dS in HBM.
 *
 * The standard backward (FlashAttention paper, Algorithm 3 and the derivation of
 * Appendix B.2; FlashAttention-2 paper §2.2 writes the same equations):
 *     D  = rowsum(dO∘O)     dV = Pᵀ·dO      dP = dO·Vᵀ
 *     dS = P∘(dP − D)       dQ = scale·dS·K  dK = scale·dSᵀ·Q
 * It keeps nothing from the forward but O and LSE: it recomputes S with the forward's
 * scores_kernel (traits.cuh), then P as exp(S − LSE) (the FlashAttention-2 way, and the
 * formula of the CPU emulation), and writes S, P, dP and dS to HBM in turn. Every
 * product is the forward's tiled GEMM (tile_gemm, traits.cuh).
 *
 * Layouts: traits.cuh. LSE: fp32 [batch, heads_q, seqlen_q], natural log, from the
 * forward.
 */
#include "traits.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ---------------------------------------------------------------------------------
 * Compile-time configuration (the tiled GEMM's: traits.cuh)
 * ------------------------------------------------------------------------------ */

// D = rowsum(dO∘O) works one thread per row (see bwd_dot_do_o_kernel for why), 128
// rows per block.
constexpr int kRowThreads = 128;

// The elementwise kernels (P and dS): 256 threads per block in a grid-stride loop over at
// most 65536 blocks, plenty to fill any GPU; the loop covers what is beyond.
constexpr int kElementwiseThreads = 256;
constexpr int64_t kElementwiseMaxBlocks = 65536;

/* ---------------------------------------------------------------------------------
 * Backward: FA1 Algorithm 3, with S recomputed by scores_kernel and P from LSE
 * ------------------------------------------------------------------------------ */

// P_ij = exp(S_ij − LSE_i), fp32: the softmax rebuilt from the log of its row sum, which
// the forward stored. A row that sees no key has LSE = −inf (and S = −inf everywhere):
// its P is 0 rather than exp(−inf − (−inf)) = NaN.
__device__ __forceinline__ float prob_from_lse(float S, float LSE)
{
    return LSE == -INFINITY ? 0.0f : expf(S - LSE);
}

// P = exp(S − LSE) in the dtype, elementwise over n = batch·heads_q·seqlen_q·seqlen_k
// elements of [batch, heads_q, seqlen_q, seqlen_k]. Reads S (fp32, from scores_kernel)
// and LSE (fp32 [batch, heads_q, seqlen_q], natural log, from the forward); writes P,
// the operand of dV = Pᵀ·dO. Masked entries (S = −inf) give P = 0.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    bwd_probs_kernel(const float *S, const float *LSE, T *P, int64_t n, int seqlen_k)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride)
        P[e] = from_float<T>(prob_from_lse(S[e], LSE[e / seqlen_k]));
}

// D = rowsum(dO∘O), fp32 [batch, heads_q, seqlen_q]: the dot product of row i of dO and
// of O, which is Σ_j P_ij·dP_ij (FA1 Appendix B.2). dO and O (dtype) by o_layout. One
// thread per row, adding head_dim terms in order with fma, exactly as tile_gemm adds
// dP_ij = dO_i·V_j: so when a row sees one key (P = 1, O = V_j bit for bit) D equals
// dP_ij bit for bit and dS is exactly 0, as it is in exact arithmetic. A row that sees
// no key has O = 0, so D = 0.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    bwd_dot_do_o_kernel(const T *dO, const T *O, float *D, fx_layout o_layout, fx_problem p)
{
    const int64_t row = (int64_t)blockIdx.x * kRowThreads + threadIdx.x;
    const int64_t rows = (int64_t)p.batch * p.heads_q * p.seqlen_q;
    if (row >= rows)
        return;
    const int i = (int)(row % p.seqlen_q);
    const int64_t slice = row / p.seqlen_q;
    const int b = (int)(slice / p.heads_q), h = (int)(slice % p.heads_q);
    const int64_t offset =
        b * o_layout.batch_stride + (int64_t)i * o_layout.row_stride + h * o_layout.head_stride;

    float sum = 0.0f;
    for (int d = 0; d < p.head_dim; ++d)
        sum = fmaf(to_float(dO[offset + d]), to_float(O[offset + d]), sum);
    D[row] = sum;
}

// dV = Pᵀ·dO, summed over the query heads of a kv head. One block per 16×16 tile of dV
// [seqlen_k, head_dim] of one (batch b, kv head h_kv); the block loops over the group's
// query heads h = h_kv·G .. h_kv·G + G − 1 (G = heads_q / heads_kv) and keeps one fp32
// accumulator, so the sum is deterministic with no atomics. Reads P (dtype) and dO by
// o_layout; writes dV in the dtype by v_layout.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    bwd_dv_kernel(const T *P, const T *dO, T *dV, fx_layout o_layout, fx_layout v_layout,
                  fx_problem p)
{
    const TileCoord t = tile_coord(p.seqlen_k, p.head_dim);
    const int b = t.slice / p.heads_kv, h_kv = t.slice % p.heads_kv;
    const int group = p.heads_q / p.heads_kv;
    float acc = 0.0f;
    for (int g = 0; g < group; ++g) {
        const int h = h_kv * group + g;
        // Pᵀ [seqlen_k, seqlen_q]: P's rows read as columns.
        const Operand<T> P_hT = {P + score_row(p, (int64_t)b * p.heads_q + h, 0), 1, p.seqlen_k};
        const Operand<T> dO_h = {dO + b * o_layout.batch_stride + h * o_layout.head_stride,
                                 o_layout.row_stride, 1};
        acc = tile_gemm(acc, P_hT, dO_h, p.seqlen_k, p.head_dim, p.seqlen_q, t.m0, t.n0);
    }
    const int j = t.m0 + threadIdx.y, d = t.n0 + threadIdx.x;
    if (j < p.seqlen_k && d < p.head_dim)
        dV[b * v_layout.batch_stride + (int64_t)j * v_layout.row_stride +
           h_kv * v_layout.head_stride + d] = from_float<T>(acc);
}

// dP = dO·Vᵀ, fp32 [batch, heads_q, seqlen_q, seqlen_k]. One block per 16×16 tile of one
// slice (b, h); dO by o_layout, V of kv head h / G by v_layout. Masked entries are
// computed too: dS multiplies them by P = 0.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    bwd_dp_kernel(const T *dO, const T *V, float *dP, fx_layout o_layout, fx_layout v_layout,
                  fx_problem p)
{
    const TileCoord t = tile_coord(p.seqlen_q, p.seqlen_k);
    const int b = t.slice / p.heads_q, h = t.slice % p.heads_q;
    const int h_kv = h / (p.heads_q / p.heads_kv);
    const Operand<T> dO_h = {dO + b * o_layout.batch_stride + h * o_layout.head_stride,
                             o_layout.row_stride, 1};
    // Vᵀ [head_dim, seqlen_k]: V's rows read as columns.
    const Operand<T> V_hT = {V + b * v_layout.batch_stride + h_kv * v_layout.head_stride, 1,
                             v_layout.row_stride};
    const float acc = tile_gemm(0.0f, dO_h, V_hT, p.seqlen_q, p.seqlen_k, p.head_dim, t.m0, t.n0);

    const int i = t.m0 + threadIdx.y, j = t.n0 + threadIdx.x;
    if (i < p.seqlen_q && j < p.seqlen_k)
        dP[score_row(p, t.slice, i) + j] = acc;
}

// dS = P∘(dP − D), elementwise over n = batch·heads_q·seqlen_q·seqlen_k elements: the
// gradient through the softmax (FA1 Appendix B.2). P is taken in fp32 from S and LSE, not
// from the rounded P that dV read, so dS is rounded once, when it is stored. Reads S and
// dP (fp32, [batch, heads_q, seqlen_q, seqlen_k]), LSE and D (fp32, one per row); writes
// dS in the dtype. P = 0 (masked, or a row that sees no key) gives dS = 0.
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    bwd_ds_kernel(const float *S, const float *LSE, const float *dP, const float *D, T *dS,
                  int64_t n, int seqlen_k)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const int64_t row = e / seqlen_k;
        dS[e] = from_float<T>(prob_from_lse(S[e], LSE[row]) * (dP[e] - D[row]));
    }
}

// dQ = scale·dS·K. One block per 16×16 tile of dQ [seqlen_q, head_dim] of one slice (b, h);
// dS (dtype) from the workspace, K of kv head h / G by k_layout. Writes dQ in the dtype
// by q_layout.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    bwd_dq_kernel(const T *dS, const T *K, T *dQ, fx_layout q_layout, fx_layout k_layout,
                  fx_problem p)
{
    const TileCoord t = tile_coord(p.seqlen_q, p.head_dim);
    const int b = t.slice / p.heads_q, h = t.slice % p.heads_q;
    const int h_kv = h / (p.heads_q / p.heads_kv);
    const Operand<T> dS_h = {dS + score_row(p, t.slice, 0), p.seqlen_k, 1};
    const Operand<T> K_h = {K + b * k_layout.batch_stride + h_kv * k_layout.head_stride,
                            k_layout.row_stride, 1};
    const float acc = tile_gemm(0.0f, dS_h, K_h, p.seqlen_q, p.head_dim, p.seqlen_k, t.m0, t.n0);

    const int i = t.m0 + threadIdx.y, d = t.n0 + threadIdx.x;
    if (i < p.seqlen_q && d < p.head_dim)
        dQ[b * q_layout.batch_stride + (int64_t)i * q_layout.row_stride + h * q_layout.head_stride +
           d] = from_float<T>(acc * (float)p.softmax_scale);
}

// dK = scale·dSᵀ·Q, summed over the query heads of a kv head, as in bwd_dv_kernel: one
// block per 16×16 tile of dK [seqlen_k, head_dim] of one (b, h_kv), looping over the
// group's G query heads into one fp32 accumulator. Writes dK in the dtype by k_layout.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    bwd_dk_kernel(const T *dS, const T *Q, T *dK, fx_layout q_layout, fx_layout k_layout,
                  fx_problem p)
{
    const TileCoord t = tile_coord(p.seqlen_k, p.head_dim);
    const int b = t.slice / p.heads_kv, h_kv = t.slice % p.heads_kv;
    const int group = p.heads_q / p.heads_kv;
    float acc = 0.0f;
    for (int g = 0; g < group; ++g) {
        const int h = h_kv * group + g;
        // dSᵀ [seqlen_k, seqlen_q]: dS's rows read as columns.
        const Operand<T> dS_hT = {dS + score_row(p, (int64_t)b * p.heads_q + h, 0), 1, p.seqlen_k};
        const Operand<T> Q_h = {Q + b * q_layout.batch_stride + h * q_layout.head_stride,
                                q_layout.row_stride, 1};
        acc = tile_gemm(acc, dS_hT, Q_h, p.seqlen_k, p.head_dim, p.seqlen_q, t.m0, t.n0);
    }
    const int j = t.m0 + threadIdx.y, d = t.n0 + threadIdx.x;
    if (j < p.seqlen_k && d < p.head_dim)
        dK[b * k_layout.batch_stride + (int64_t)j * k_layout.row_stride +
           h_kv * k_layout.head_stride + d] = from_float<T>(acc * (float)p.softmax_scale);
}

/* ---------------------------------------------------------------------------------
 * Host launcher
 * ------------------------------------------------------------------------------ */

// The eight kernels of the backward on a->stream, in data order; S, P (then dS), dP and
// D in the workspace (traits.cuh).
template <typename T>
cudaError_t launch(const fx_bwd_args *a)
{
    const fx_problem p = *a->p;
    const Workspace w = workspace_layout(&p, true);
    float *S = (float *)((char *)a->workspace + w.S_offset);
    T *P_dS = (T *)((char *)a->workspace + w.P_offset);  // P, then dS
    float *dP = (float *)((char *)a->workspace + w.dP_offset);
    float *D = (float *)((char *)a->workspace + w.D_offset);
    const int64_t slices = (int64_t)p.batch * p.heads_q;
    const int64_t slices_kv = (int64_t)p.batch * p.heads_kv;
    const int64_t rows = slices * p.seqlen_q;
    const int64_t scores = rows * p.seqlen_k;
    const int64_t blocks_S = tile_blocks(slices, p.seqlen_q, p.seqlen_k);
    const int64_t blocks_dQ = tile_blocks(slices, p.seqlen_q, p.head_dim);
    const int64_t blocks_dKV = tile_blocks(slices_kv, p.seqlen_k, p.head_dim);
    const int64_t blocks_D = ceil_div(rows, kRowThreads);
    const int64_t blocks_elementwise = ceil_div(scores, kElementwiseThreads) < kElementwiseMaxBlocks
                                           ? ceil_div(scores, kElementwiseThreads)
                                           : kElementwiseMaxBlocks;
    if (w.bytes > a->workspace_bytes || blocks_S > kMaxGridX || blocks_dQ > kMaxGridX ||
        blocks_dKV > kMaxGridX)
        return cudaErrorInvalidValue;  // check_problem refuses such problems first
    const dim3 tile_threads(kTile, kTile);
    const T *Q = (const T *)a->q, *K = (const T *)a->k, *V = (const T *)a->v;
    const T *O = (const T *)a->o, *dO = (const T *)a->dout;

    scores_kernel<T>
        <<<(unsigned)blocks_S, tile_threads, 0, a->stream>>>(Q, K, S, a->q_layout, a->k_layout, p);
    bwd_probs_kernel<T><<<(unsigned)blocks_elementwise, kElementwiseThreads, 0, a->stream>>>(
        S, a->lse, P_dS, scores, p.seqlen_k);
    bwd_dot_do_o_kernel<T>
        <<<(unsigned)blocks_D, kRowThreads, 0, a->stream>>>(dO, O, D, a->o_layout, p);
    bwd_dv_kernel<T><<<(unsigned)blocks_dKV, tile_threads, 0, a->stream>>>(
        P_dS, dO, (T *)a->dv, a->o_layout, a->v_layout, p);
    bwd_dp_kernel<T><<<(unsigned)blocks_S, tile_threads, 0, a->stream>>>(dO, V, dP, a->o_layout,
                                                                         a->v_layout, p);
    bwd_ds_kernel<T><<<(unsigned)blocks_elementwise, kElementwiseThreads, 0, a->stream>>>(
        S, a->lse, dP, D, P_dS, scores, p.seqlen_k);
    bwd_dq_kernel<T><<<(unsigned)blocks_dQ, tile_threads, 0, a->stream>>>(
        P_dS, K, (T *)a->dq, a->q_layout, a->k_layout, p);
    bwd_dk_kernel<T><<<(unsigned)blocks_dKV, tile_threads, 0, a->stream>>>(
        P_dS, Q, (T *)a->dk, a->q_layout, a->k_layout, p);
    return cudaGetLastError();
}

}  // namespace

/* The backward's workspace in bytes: S, P/dS, dP and D, 10n bytes plus D for n scores. */
extern "C" size_t fx_bwd_workspace_bytes_01(const fx_problem *p)
{
    return workspace_layout(p, true).bytes;
}

/* Enqueues the backward on a->stream: dQ, dK, dV (dtype) from Q, K, V, O, dO and the
 * forward's LSE; returns the launch error. */
extern "C" cudaError_t fx_bwd_01(const fx_bwd_args *a)
{
    switch (a->p->dtype) {
    case FX_BF16: return launch<__nv_bfloat16>(a);
    case FX_FP16: return launch<__half>(a);
    default: return cudaErrorInvalidValue;
    }
}
