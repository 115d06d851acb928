/*
 * traits.cuh — what stage 01's forward (fwd.cu) and backward (bwd.cu) share: the tiled GEMM
 * that is every matrix product of the stage, the element conversions, S = scale·Q·Kᵀ
 * (scores_kernel: the backward recomputes S with the forward's kernel) and the workspace
 * that holds S, P, dP and D. Each .cu file includes it and instantiates its own copy.
 *
 * Layouts (fx_problem.h): Q, O, dO, dQ [batch, seqlen_q, heads_q, head_dim];
 * K, V, dK, dV [batch, seqlen_k, heads_kv, head_dim]; element strides from
 * fx_layout, head_dim contiguous. dO has O's layout. Query head h reads kv head
 * h / (heads_q / heads_kv) (GQA); dK and dV of a kv head sum over its query heads.
 */
#ifndef FX_STAGE01_TRAITS_CUH
#define FX_STAGE01_TRAITS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "fx_stage.h"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ---------------------------------------------------------------------------------
 * Compile-time configuration
 * ------------------------------------------------------------------------------ */

// A 16×16 tile of outputs per block, one output per thread (256 threads): the tiled
// matrix multiply of the CUDA C Programming Guide. Obviously right, not fast.
constexpr int kTile = 16;
// One extra float per tile row: operands read transposed (Kᵀ, Vᵀ, Pᵀ, dSᵀ) are stored
// into the tile column by column, and the padding spreads a column over distinct banks.
constexpr int kTilePad = 1;
constexpr int kTileThreads = kTile * kTile;

// Every tile kernel numbers its blocks in blockIdx.x alone (gridDim.y and .z stop at
// 65535, too few for batch·heads or seqlen/16), and gridDim.x stops at 2^31 − 1.
constexpr int64_t kMaxGridX = INT_MAX;

// Workspace segments start on 256-byte boundaries, the alignment cudaMalloc gives.
constexpr size_t kWorkspaceAlign = 256;

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

// Offset of element (i, 0) of the row-major [seqlen_q, seqlen_k] matrix of slice
// (b·heads_q + h) in S, P, dP, dS: 64-bit, since batch·heads·seqlen² passes 2^31.
__device__ __forceinline__ int64_t score_row(const fx_problem &p, int64_t slice, int i)
{
    return (slice * p.seqlen_q + i) * p.seqlen_k;
}

/* ---------------------------------------------------------------------------------
 * S = scale·Q·Kᵀ: FA1 Algorithm 0, line 1, and the backward's recomputed S
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

/* ---------------------------------------------------------------------------------
 * Host helpers: the workspace and the grids
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

size_t align_up(size_t x)
{
    return (x + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

Workspace workspace_layout(const fx_problem *p, bool backward)
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

// Blocks of a tile kernel over `slices` matrices of M × N outputs.
int64_t tile_blocks(int64_t slices, int M, int N)
{
    return slices * ceil_div(M, kTile) * ceil_div(N, kTile);
}

}  // namespace

#endif
