/*
 * naive.cu — stage 01: standard attention, forward and backward, with S and P in HBM.
 *
 * The baseline every later stage is measured against. The forward is Algorithm 0 of
 * the FlashAttention paper (Dao et al. 2022, §2.2 "Standard attention
 * implementation"): three kernels, each reading its operands from device memory
 * (HBM) and writing its result back there.
 *     S = scale·Q·Kᵀ   fp32     scores_kernel
 *     P = softmax(S)   dtype    softmax_kernel (and LSE)
 *     O = P·V          dtype    output_kernel
 * The backward is the standard one (FlashAttention paper, Algorithm 3 and the
 * derivation of Appendix B.2; FlashAttention-2 paper §2.2 writes the same equations):
 *     D  = rowsum(dO∘O)     dV = Pᵀ·dO      dP = dO·Vᵀ
 *     dS = P∘(dP − D)       dQ = scale·dS·K  dK = scale·dSᵀ·Q
 * It keeps nothing from the forward but O and LSE: it recomputes S, then P as
 * exp(S − LSE) (the FlashAttention-2 way, and the formula of the CPU emulation), and
 * writes S, P, dP and dS to HBM in turn.
 * Every matrix product here is the same textbook shared-memory tiled GEMM (one
 * 16×16 tile of outputs per block, one output per thread, fp32 accumulation on the
 * CUDA cores), so the only idea of this stage is where the data lives: S and P hold
 * batch·heads_q·seqlen_q·seqlen_k elements each, written to HBM and read back. That
 * quadratic memory and traffic is what FlashAttention removes (stage 02).
 * Measured on an H200 (bf16, batch 4, seqlen 4096, 16 heads of 128): forward 93.5 ms
 * (plots/data/ladder_default_2026-12-01_nvidia-h200.csv), backward 232 ms (an earlier
 * run the same day), 5.9 TFLOP/s each, the baseline of every later stage's gain.
 *
 * Layouts (fx_problem.h): Q, O, dO, dQ [batch, seqlen_q, heads_q, head_dim];
 * K, V, dK, dV [batch, seqlen_k, heads_kv, head_dim]; element strides from
 * fx_layout, head_dim contiguous. dO has O's layout. Query head h reads kv head
 * h / (heads_q / heads_kv) (GQA); dK and dV of a kv head sum over its query heads.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "fx_stage.h"

/* ---------------------------------------------------------------------------------
 * Compile-time configuration
 * ------------------------------------------------------------------------------ */

// A 16×16 tile of outputs per block, one output per thread (256 threads): the tiled
// matrix multiply of the CUDA C Programming Guide. Obviously right, not fast.
static constexpr int kTile = 16;
// One extra float per tile row: operands read transposed (Kᵀ, Vᵀ, Pᵀ, dSᵀ) are stored
// into the tile column by column, and the padding spreads a column over distinct banks.
static constexpr int kTilePad = 1;
static constexpr int kTileThreads = kTile * kTile;

// The softmax works one warp per row: the warp's shuffles reduce the row with no
// shared memory and no block-wide barrier. Four rows (128 threads) per block.
static constexpr int kWarpSize = 32;
static constexpr unsigned kFullWarp = 0xffffffffu;  // all 32 lanes take part in a shuffle
static constexpr int kRowsPerBlock = 4;

// D = rowsum(dO∘O) works one thread per row (see bwd_dot_do_o_kernel for why), 128
// rows per block.
static constexpr int kRowThreads = 128;

// The elementwise kernels (P and dS of the backward): 256 threads per block in a grid-stride loop over at most
// 65536 blocks, plenty to fill any GPU; the loop covers what is beyond.
static constexpr int kElementwiseThreads = 256;
static constexpr int64_t kElementwiseMaxBlocks = 65536;

// Every tile kernel numbers its blocks in blockIdx.x alone (gridDim.y and .z stop at
// 65535, too few for batch·heads or seqlen/16), and gridDim.x stops at 2^31 − 1.
static constexpr int64_t kMaxGridX = INT_MAX;

// Workspace segments start on 256-byte boundaries, the alignment cudaMalloc gives.
static constexpr size_t kWorkspaceAlign = 256;

/* ---------------------------------------------------------------------------------
 * Shared-memory plan of the tiled GEMM
 * ------------------------------------------------------------------------------ */

struct GemmSmem {
    float A[kTile][kTile + kTilePad];  // rows m0.., columns k0.. of A, converted to fp32
    float B[kTile][kTile + kTilePad];  // rows k0.., columns n0.. of B, converted to fp32
};
static_assert(sizeof(GemmSmem) <= 48 * 1024, "static shared memory stops at 48 KiB");

/* ---------------------------------------------------------------------------------
 * Device helpers
 * ------------------------------------------------------------------------------ */

__device__ __forceinline__ float to_float(__nv_bfloat16 x)
{
    return __bfloat162float(x);
}
__device__ __forceinline__ float to_float(__half x)
{
    return __half2float(x);
}

// Round to nearest even, as the CPU emulation (fx_reference.h) rounds.
template <typename T>
__device__ T from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x)
{
    return __float2half_rn(x);
}

__host__ __device__ __forceinline__ int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

// A matrix seen through element strides: element (r, c) is data[r·row_stride + c·col_stride].
// The same memory with the strides swapped is the transpose, so Kᵀ, Vᵀ, Pᵀ and dSᵀ
// need no copy.
template <typename T>
struct Operand {
    const T *data;
    int64_t row_stride, col_stride;
};

// Loads rows [r0, r0 + kTile) × columns [c0, c0 + kTile) of X, an operand of rows × cols,
// into tile as fp32, with zeros outside the matrix (so tails need no other care).
// Neighbouring threads (threadIdx.x) take neighbouring addresses: along a row when
// the columns are contiguous, down a column otherwise (then the rows are).
template <typename T>
__device__ void load_tile(float (*tile)[kTile + kTilePad], Operand<T> X, int rows, int cols, int r0,
                          int c0)
{
    const bool along_row = X.col_stride == 1;
    const int r = along_row ? threadIdx.y : threadIdx.x;
    const int c = along_row ? threadIdx.x : threadIdx.y;
    float x = 0.0f;
    if (r0 + r < rows && c0 + c < cols)
        x = to_float(X.data[(int64_t)(r0 + r) * X.row_stride + (int64_t)(c0 + c) * X.col_stride]);
    tile[r][c] = x;
}

// Returns acc + (row m0 + threadIdx.y of A)·(column n0 + threadIdx.x of B) for
// A [M, K] and B [K, N], walking K one kTile-wide slab at a time through shared
// memory. Every thread of the block must call it (it synchronizes), also a thread
// whose output lies outside [M, N].
template <typename T>
__device__ float tile_gemm(float acc, Operand<T> A, Operand<T> B, int M, int N, int K, int m0,
                           int n0)
{
    __shared__ GemmSmem smem;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        load_tile(smem.A, A, M, K, m0, k0);
        load_tile(smem.B, B, K, N, k0, n0);
        __syncthreads();  // both tiles are complete before anyone reads them
        for (int kk = 0; kk < kTile; ++kk)
            acc = fmaf(smem.A[threadIdx.y][kk], smem.B[kk][threadIdx.x], acc);
        __syncthreads();  // and fully read before the next slab overwrites them
    }
    return acc;
}

// The output tile of this block. Blocks are numbered (slice, tile row, tile column),
// the column fastest, flattened into blockIdx.x; a slice is one (batch, head).
struct TileCoord {
    int slice;
    int m0, n0;
};
__device__ TileCoord tile_coord(int M, int N)
{
    const int64_t tiles_n = ceil_div(N, kTile), tiles_m = ceil_div(M, kTile);
    int64_t t = blockIdx.x;
    TileCoord c;
    c.n0 = (int)(t % tiles_n) * kTile;
    t /= tiles_n;
    c.m0 = (int)(t % tiles_m) * kTile;
    c.slice = (int)(t / tiles_m);
    return c;
}

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

// Offset of element (i, 0) of the row-major [seqlen_q, seqlen_k] matrix of slice
// (b·heads_q + h) in S, P, dP, dS: 64-bit, since batch·heads·seqlen² passes 2^31.
__device__ __forceinline__ int64_t score_row(const fx_problem &p, int64_t slice, int i)
{
    return (slice * p.seqlen_q + i) * p.seqlen_k;
}

/* ---------------------------------------------------------------------------------
 * Forward: FA1 Algorithm 0
 * ------------------------------------------------------------------------------ */

// S = scale·Q·Kᵀ, masked. One block per 16×16 tile of S of one slice (batch b, query
// head h); Q of head h and K of kv head h / (heads_q / heads_kv), both by their layout.
// Writes S: fp32 [batch, heads_q, seqlen_q, seqlen_k], logits in natural units, and −inf
// where the bottom-right causal mask hides key j from query row i
// (j > i + seqlen_k − seqlen_q), so that exp() turns them into P = 0. Algorithm 0, line 1.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    scores_kernel(const T *Q, const T *K, float *S, fx_layout q_layout, fx_layout k_layout,
                  fx_problem p)
{
    const TileCoord t = tile_coord(p.seqlen_q, p.seqlen_k);
    const int b = t.slice / p.heads_q, h = t.slice % p.heads_q;
    const int h_kv = h / (p.heads_q / p.heads_kv);
    const Operand<T> Q_h = {Q + b * q_layout.batch_stride + h * q_layout.head_stride,
                            q_layout.row_stride, 1};
    // Kᵀ [head_dim, seqlen_k]: K's rows read as columns.
    const Operand<T> K_hT = {K + b * k_layout.batch_stride + h_kv * k_layout.head_stride, 1,
                             k_layout.row_stride};
    const float acc = tile_gemm(0.0f, Q_h, K_hT, p.seqlen_q, p.seqlen_k, p.head_dim, t.m0, t.n0);

    const int i = t.m0 + threadIdx.y, j = t.n0 + threadIdx.x;
    if (i < p.seqlen_q && j < p.seqlen_k) {
        const bool visible = !p.causal || j <= i + p.seqlen_k - p.seqlen_q;
        S[score_row(p, t.slice, i) + j] = visible ? acc * (float)p.softmax_scale : -INFINITY;
    }
}

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
 * Host launchers
 * ------------------------------------------------------------------------------ */

// The workspace, in this order, each segment 256-byte aligned:
//   S   fp32  [batch, heads_q, seqlen_q, seqlen_k]
//   P   dtype [batch, heads_q, seqlen_q, seqlen_k]  the backward writes dS over it
//   dP  fp32  [batch, heads_q, seqlen_q, seqlen_k]  backward only
//   D   fp32  [batch, heads_q, seqlen_q]            backward only
// dS can take P's place because dV, the only reader of P, runs before dS is written.
// So with n = batch·heads_q·seqlen_q·seqlen_k the forward needs 6n bytes, the backward
// 10n bytes plus D.
struct Workspace {
    size_t S_offset, P_offset, dP_offset, D_offset, bytes;
};

static size_t align_up(size_t x)
{
    return (x + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

static Workspace workspace_layout(const fx_problem *p, bool backward)
{
    Workspace w = {0, 0, 0, 0, 0};
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    // rows < 2^31 (the harness bounds Q's element count) and seqlen_k < 2^31, so
    // scores < 2^62; past SIZE_MAX / 16 the byte counts below would wrap.
    const size_t scores = rows * (size_t)p->seqlen_k;
    if (scores > SIZE_MAX / 16) {
        w.bytes = SIZE_MAX;  // no device has that much: the memory check refuses it
        return w;
    }
    w.S_offset = 0;
    w.P_offset = align_up(scores * sizeof(float));
    w.dP_offset = w.P_offset + align_up(scores * fx_dtype_bytes(p->dtype));
    if (!backward) {
        w.bytes = w.dP_offset;
        return w;
    }
    w.D_offset = w.dP_offset + align_up(scores * sizeof(float));
    w.bytes = w.D_offset + align_up(rows * sizeof(float));
    return w;
}

extern "C" size_t fx_naive_workspace_bytes(const fx_problem *p, bool backward)
{
    return workspace_layout(p, backward).bytes;
}

// Blocks of a tile kernel over `slices` matrices of M × N outputs.
static int64_t tile_blocks(int64_t slices, int M, int N)
{
    return slices * ceil_div(M, kTile) * ceil_div(N, kTile);
}

template <typename T>
static cudaError_t forward_typed(const fx_fwd_args *a)
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

template <typename T>
static cudaError_t backward_typed(const fx_bwd_args *a)
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

extern "C" cudaError_t fx_naive_forward(const fx_fwd_args *a)
{
    switch (a->p->dtype) {
    case FX_BF16: return forward_typed<__nv_bfloat16>(a);
    case FX_FP16: return forward_typed<__half>(a);
    default: return cudaErrorInvalidValue;  // outside caps: the harness refuses it first
    }
}

extern "C" cudaError_t fx_naive_backward(const fx_bwd_args *a)
{
    switch (a->p->dtype) {
    case FX_BF16: return backward_typed<__nv_bfloat16>(a);
    case FX_FP16: return backward_typed<__half>(a);
    default: return cudaErrorInvalidValue;
    }
}
