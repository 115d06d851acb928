/*
 * fwd.cu — stage 01: standard attention, forward, with S and P in HBM.
 *
 * The baseline every later stage is measured against (its times and rates:
 * docs/01_naive.md, "Measured"). The forward is Algorithm 0 of the FlashAttention paper
 * (Dao et al. 2022, §2.2 "Standard attention implementation"): three kernels, each
 * reading its operands from device memory (HBM) and writing its result back there.
 *     S = scale·Q·Kᵀ   fp32     scores_kernel (traits.cuh: the backward runs it too)
 *     P = softmax(S)   dtype    softmax_kernel (and LSE)
 *     O = P·V          dtype    output_kernel
 * Every matrix product here is the same textbook shared-memory tiled GEMM (tile_gemm,
 * traits.cuh: one 16×16 tile of outputs per block, one output per thread, fp32
 * accumulation on the CUDA cores), so the only idea of this stage is where the data
 * lives: S and P hold batch·heads_q·seqlen_q·seqlen_k elements each, written to HBM and
 * read back. That quadratic memory and traffic is what FlashAttention removes (stage 02).
 * The backward is in bwd.cu.
 *
 * Layouts: traits.cuh. LSE: fp32 [batch, heads_q, seqlen_q], natural log.
 */
#include "traits.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ---------------------------------------------------------------------------------
 * Compile-time configuration (the tiled GEMM's: traits.cuh)
 * ------------------------------------------------------------------------------ */

// The softmax works one warp per row: the warp's shuffles reduce the row with no
// shared memory and no block-wide barrier. Four rows (128 threads) per block.
constexpr int kWarpSize = 32;
constexpr unsigned kFullWarp = 0xffffffffu;  // all 32 lanes take part in a shuffle
constexpr int kRowsPerBlock = 4;

/* ---------------------------------------------------------------------------------
 * Device helpers
 * ------------------------------------------------------------------------------ */

__device__ float warp_max(float x)
{
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
        x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, offset));
    return x;  // every lane holds the row's maximum
}

__device__ float warp_sum(float x)
{
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
        x += __shfl_xor_sync(kFullWarp, x, offset);
    return x;  // every lane holds the same sum, added in the same order on every run
}

/* ---------------------------------------------------------------------------------
 * Forward: FA1 Algorithm 0 (line 1, scores_kernel, is in traits.cuh)
 * ------------------------------------------------------------------------------ */

// P = softmax(S) row by row, and LSE. One warp per row of S; rows = batch·heads_q·seqlen_q.
// Reads S (fp32 [batch, heads_q, seqlen_q, seqlen_k]); writes P (dtype, same shape) and,
// when LSE is not NULL, LSE (fp32 [batch, heads_q, seqlen_q], natural log). Three passes
// over the row, as the formula reads: m = max S, l = Σ exp(S − m), P = exp(S − m) / l;
// LSE = m + log l. A row that sees no key (all −inf) writes P = 0 and LSE = −inf instead
// of the NaN that exp(−inf − (−inf)) would give. Algorithm 0, line 2.
template <typename T>
__global__ void __launch_bounds__(kRowsPerBlock *kWarpSize)
    softmax_kernel(const float *S, T *P, float *LSE, int64_t rows, int seqlen_k)
{
    const int lane = threadIdx.x % kWarpSize;
    const int64_t row = (int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
    if (row >= rows)
        return;  // the whole warp leaves together: its shuffles below stay full
    const float *S_row = S + row * seqlen_k;
    T *P_row = P + row * seqlen_k;

    float m = -INFINITY;
    for (int j = lane; j < seqlen_k; j += kWarpSize)
        m = fmaxf(m, S_row[j]);
    m = warp_max(m);

    if (m == -INFINITY) {
        for (int j = lane; j < seqlen_k; j += kWarpSize)
            P_row[j] = from_float<T>(0.0f);
        if (lane == 0 && LSE != NULL)
            LSE[row] = -INFINITY;
        return;
    }

    float l = 0.0f;
    for (int j = lane; j < seqlen_k; j += kWarpSize)
        l += expf(S_row[j] - m);
    l = warp_sum(l);

    for (int j = lane; j < seqlen_k; j += kWarpSize)
        P_row[j] = from_float<T>(expf(S_row[j] - m) / l);
    if (lane == 0 && LSE != NULL)
        LSE[row] = m + logf(l);
}

// O = P·V. One block per 16×16 tile of O [seqlen_q, head_dim] of one slice (b, h).
// Reads P (dtype, from softmax_kernel) and V of kv head h / (heads_q / heads_kv);
// accumulates over all seqlen_k keys in fp32 (masked keys have P = 0) and writes O in
// the dtype by o_layout, rounded once. A row that sees no key gets O = 0. Algorithm 0, line 3.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    output_kernel(const T *P, const T *V, T *O, fx_layout v_layout, fx_layout o_layout,
                  fx_problem p)
{
    const TileCoord t = tile_coord(p.seqlen_q, p.head_dim);
    const int b = t.slice / p.heads_q, h = t.slice % p.heads_q;
    const int h_kv = h / (p.heads_q / p.heads_kv);
    const Operand<T> P_h = {P + score_row(p, t.slice, 0), p.seqlen_k, 1};
    const Operand<T> V_h = {V + b * v_layout.batch_stride + h_kv * v_layout.head_stride,
                            v_layout.row_stride, 1};
    const float acc = tile_gemm(0.0f, P_h, V_h, p.seqlen_q, p.head_dim, p.seqlen_k, t.m0, t.n0);

    const int i = t.m0 + threadIdx.y, d = t.n0 + threadIdx.x;
    if (i < p.seqlen_q && d < p.head_dim)
        O[b * o_layout.batch_stride + (int64_t)i * o_layout.row_stride + h * o_layout.head_stride +
          d] = from_float<T>(acc);
}

/* ---------------------------------------------------------------------------------
 * Host launcher
 * ------------------------------------------------------------------------------ */

// The three kernels of Algorithm 0 on a->stream; S and P in the workspace (traits.cuh).
template <typename T>
cudaError_t launch(const fx_fwd_args *a)
{
    const fx_problem p = *a->p;
    const Workspace w = workspace_layout(&p, false);
    float *S = (float *)((char *)a->workspace + w.S_offset);
    T *P = (T *)((char *)a->workspace + w.P_offset);
    const int64_t slices = (int64_t)p.batch * p.heads_q;
    const int64_t rows = slices * p.seqlen_q;
    const int64_t blocks_S = tile_blocks(slices, p.seqlen_q, p.seqlen_k);
    const int64_t blocks_O = tile_blocks(slices, p.seqlen_q, p.head_dim);
    if (w.bytes > a->workspace_bytes || blocks_S > kMaxGridX || blocks_O > kMaxGridX)
        return cudaErrorInvalidValue;  // check_problem refuses such problems first
    const dim3 tile_threads(kTile, kTile);

    scores_kernel<T><<<(unsigned)blocks_S, tile_threads, 0, a->stream>>>(
        (const T *)a->q, (const T *)a->k, S, a->q_layout, a->k_layout, p);
    softmax_kernel<T>
        <<<(unsigned)ceil_div(rows, kRowsPerBlock), kRowsPerBlock * kWarpSize, 0, a->stream>>>(
            S, P, a->lse, rows, p.seqlen_k);
    output_kernel<T><<<(unsigned)blocks_O, tile_threads, 0, a->stream>>>(
        P, (const T *)a->v, (T *)a->o, a->v_layout, a->o_layout, p);
    return cudaGetLastError();
}

}  // namespace

/* The forward's workspace in bytes: S (fp32) and P (dtype), 6n bytes for n scores. */
extern "C" size_t fx_fwd_workspace_bytes_01(const fx_problem *p)
{
    return workspace_layout(p, false).bytes;
}

/* Enqueues the forward on a->stream: O (dtype) and LSE from Q, K, V; returns the launch
 * error. bf16 and fp16; the harness has refused what the caps exclude. */
extern "C" cudaError_t fx_fwd_01(const fx_fwd_args *a)
{
    switch (a->p->dtype) {
    case FX_BF16: return launch<__nv_bfloat16>(a);
    case FX_FP16: return launch<__half>(a);
    default: return cudaErrorInvalidValue;  // outside caps: the harness refuses it first
    }
}
