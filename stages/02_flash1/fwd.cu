/*
 * fwd.cu — stage 02: the FlashAttention-1 forward on FP32 CUDA cores.
 *
 * Stage 01 writes S = QKᵀ and P = softmax(S) to HBM: Θ(seqlen_q·seqlen_k) bytes each
 * way. This stage never materialises them. It follows FlashAttention-1 as the paper
 * states it (Dao et al. 2022, "FlashAttention: Fast and Memory-Efficient Exact
 * Attention with IO-Awareness", Algorithm 1): K and V are cut into blocks of B_c keys
 * (outer loop j), Q into blocks of B_r rows (inner loop i); each (i, j) step computes
 * S_ij on chip (registers), folds it into the running row maximum m and row sum ℓ (the
 * online softmax, Milakov & Gimelshein 2018) and rescales O_i. O, m and ℓ go back to HBM
 * after every step — T_c = ⌈seqlen_k/B_c⌉ round trips — which is the cost stage 03
 * (FlashAttention-2) removes by swapping the loops. Every product here is an fp32 FMA on
 * the CUDA cores; tensor cores arrive in stage 03.
 *
 * Parallelism is FlashAttention-1's: one thread block per (batch, query head) runs both
 * loops, so the O/m/ℓ round trips of one row are made by one block and need no
 * synchronisation between blocks; batch·heads below the SM count leaves SMs idle (the
 * measurements: docs/02_flash1.md, "Measured" and "What limits it now"). The backward is
 * in bwd.cu, what both share in traits.cuh.
 *
 * Sections, as in FlashAttention-3's hopper/ sources: configuration (traits.cuh),
 * shared-memory plan, kernel arguments, device helpers, mainloop + softmax + epilogue,
 * host launcher.
 */
#include "traits.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ------------------------------------------------------------------------------------
 * Compile-time configuration (the tiles: traits.cuh)
 * ---------------------------------------------------------------------------------- */

constexpr unsigned kFullWarp = 0xffffffffu; /* all 32 lanes take part in shuffles */

/* ------------------------------------------------------------------------------------
 * Shared-memory plan: fp32 tiles, converted from the dtype once on load so the inner
 * loops are pure FMAs. Row pitch head_dim bucket + kSmemPad.
 * ---------------------------------------------------------------------------------- */

template <int kHeadDimMax>
struct SharedStorage {
    static constexpr int kBlockM = Config<kHeadDimMax>::kBlockM;
    static constexpr int kBlockN = Config<kHeadDimMax>::kBlockN;
    static constexpr int kPitch = kHeadDimMax + kSmemPad;
    float K[kBlockN][kPitch];             /* K_j, B_c × d (Algorithm 1 line 6)          */
    float V[kBlockN][kPitch];             /* V_j, B_c × d (line 6)                      */
    float Q[kBlockM][kPitch];             /* Q_i, B_r × d (line 8)                      */
    float P[kBlockM][kBlockN + kSmemPad]; /* P̃_ij = exp(S_ij - m̃_ij), B_r × B_c (line 10) */
};
static_assert(sizeof(SharedStorage<64>) <= kSmemBudgetBytes, "forward d<=64 plan over 96 KiB");
static_assert(sizeof(SharedStorage<128>) <= kSmemBudgetBytes, "forward d<=128 plan over 96 KiB");
static_assert(sizeof(SharedStorage<192>) <= kSmemBudgetBytes, "forward d<=192 plan over 96 KiB");
static_assert(sizeof(SharedStorage<256>) <= kSmemBudgetBytes, "forward d<=256 plan over 96 KiB");

/* ------------------------------------------------------------------------------------
 * Kernel arguments (C structs passed by value)
 * ---------------------------------------------------------------------------------- */

struct FwdParams {
    const void *q, *k, *v; /* dtype, [batch, seqlen, heads, head_dim] with the layouts */
    void *o;               /* dtype, O's layout                                        */
    float *lse;            /* fp32 [batch, heads_q, seqlen_q], natural log             */
    fx_layout q_layout, k_layout, v_layout, o_layout;
    /* Workspace (fp32, this stage's own layout): O [batch, heads_q, seqlen_q, head_dim]
     * normalised after every step, m and ℓ [batch, heads_q, seqlen_q]. */
    float *o_accum, *m, *l;
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    int causal;
    float softmax_scale; /* τ of the paper */
};

/* ------------------------------------------------------------------------------------
 * Device helpers (the shared ones: traits.cuh)
 * ---------------------------------------------------------------------------------- */

/* Max and sum over the 16 lanes tx of one half-warp (they hold one row's keys). */
__device__ __forceinline__ float row_max16(float x)
{
    for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2)
        x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, offset));
    return x;
}
__device__ __forceinline__ float row_sum16(float x)
{
    for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2)
        x += __shfl_xor_sync(kFullWarp, x, offset);
    return x;
}

/* ------------------------------------------------------------------------------------
 * Forward: Algorithm 1 (with Algorithm 2's scale τ and causal mask, no dropout)
 * ---------------------------------------------------------------------------------- */

/* fwd_kernel — one block per (batch b, query head h): grid batch·heads_q.
 * Reads Q (rows of head h), K and V (kv head h / (heads_q/heads_kv)) in the dtype with
 * their layouts; reads and writes the fp32 workspace O [seqlen_q, head_dim], m and ℓ
 * [seqlen_q] of its (b, h) slice (natural-log units: m is a max of τ·q·k).
 *   line 2    O = 0, ℓ = 0, m = -inf in HBM
 *   line 5-6  for j: load K_j, V_j to shared memory
 *   line 7-8  for i: load Q_i (shared), O_i, ℓ_i, m_i (registers) from HBM
 *   line 9    S_ij = τ Q_i K_jᵀ                          B_r × B_c, registers
 *   line 10   m̃ = rowmax(S), P̃ = exp(S - m̃), ℓ̃ = rowsum(P̃)
 *   line 11   m_new = max(m_i, m̃), ℓ_new = e^(m_i-m_new) ℓ_i + e^(m̃-m_new) ℓ̃
 *   line 12   O_i ← diag(ℓ_new)⁻¹ (diag(ℓ_i) e^(m_i-m_new) O_i + e^(m̃-m_new) P̃ V_j) to HBM
 *   line 13   ℓ_i ← ℓ_new, m_i ← m_new to HBM
 * Thread (tx, ty) owns rows ty + 16·u of the Q block; in S_ij keys tx + 16·v, in O_i
 * columns 4·tx + 64·w + {0..3}. A row that sees no key of the block has m̃ = -inf and
 * exponentiates against 0 instead, so P̃ = 0 and nothing is NaN; a row that sees no key
 * at all keeps ℓ = 0, O = 0. */
template <typename Element, int kHeadDimMax>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) fwd_kernel(const FwdParams params)
{
    using Smem = SharedStorage<kHeadDimMax>;
    constexpr int kBlockM = Smem::kBlockM;                     /* B_r */
    constexpr int kBlockN = Smem::kBlockN;                     /* B_c */
    constexpr int kRowsPerThread = kBlockM / kRowGroups;       /* rows u of S and O   */
    constexpr int kKeysPerThread = kBlockN / kLanesPerRow;     /* keys v of S         */
    constexpr int kVectorsPerRow = kHeadDimMax / kColsPerPass; /* float4 w of an O row */

    extern __shared__ float4 smem_raw[];
    Smem &smem = *reinterpret_cast<Smem *>(smem_raw);

    const int tx = threadIdx.x % kLanesPerRow;
    const int ty = threadIdx.x / kLanesPerRow;
    const int b = blockIdx.x / params.heads_q;
    const int h = blockIdx.x % params.heads_q;
    const int h_kv = h / (params.heads_q / params.heads_kv);
    const int seqlen_q = params.seqlen_q, seqlen_k = params.seqlen_k;
    const int head_dim = params.head_dim;
    const int causal_offset = seqlen_k - seqlen_q;
    const float scale = params.softmax_scale;

    const Element *Q = (const Element *)params.q + b * params.q_layout.batch_stride +
                       h * params.q_layout.head_stride;
    const Element *K = (const Element *)params.k + b * params.k_layout.batch_stride +
                       h_kv * params.k_layout.head_stride;
    const Element *V = (const Element *)params.v + b * params.v_layout.batch_stride +
                       h_kv * params.v_layout.head_stride;
    const int64_t slice = ((int64_t)b * params.heads_q + h) * seqlen_q;
    float *O = params.o_accum + slice * head_dim; /* [seqlen_q, head_dim] fp32 */
    float *m = params.m + slice;                  /* [seqlen_q] */
    float *l = params.l + slice;                  /* [seqlen_q] */

    /* Line 2: initialise this slice's O, ℓ, m in HBM. */
    for (int idx = threadIdx.x; idx < seqlen_q * head_dim; idx += kThreads)
        O[idx] = 0.0f;
    for (int row = threadIdx.x; row < seqlen_q; row += kThreads) {
        m[row] = -INFINITY;
        l[row] = 0.0f;
    }
    __syncthreads();

    const int T_c = ceil_div(seqlen_k, kBlockN);
    const int T_r = ceil_div(seqlen_q, kBlockM);
    for (int j = 0; j < T_c; ++j) {
        const int key0 = j * kBlockN;
        __syncthreads(); /* the previous j's last step has finished reading K_j, V_j */
        {
            const auto K_j = load_tile_fragment<Element, kBlockN, kHeadDimMax>(
                K, params.k_layout.row_stride, key0, seqlen_k, head_dim);
            const auto V_j = load_tile_fragment<Element, kBlockN, kHeadDimMax>(
                V, params.v_layout.row_stride, key0, seqlen_k, head_dim);
            store_tile_fragment<Element, kBlockN, kHeadDimMax>(smem.K, K_j);
            store_tile_fragment<Element, kBlockN, kHeadDimMax>(smem.V, V_j);
        }

        const int i_begin = params.causal ? fx_m_block_min_02(key0, causal_offset, kBlockM) : 0;
        for (int i = i_begin; i < T_r; ++i) {
            const int row0 = i * kBlockM;
            /* Line 8: this thread's part of O_i, m_i, ℓ_i to registers, Q_i to shared
             * memory. All the loads are issued before the first store so their HBM
             * latencies overlap instead of adding up. */
            const auto Q_i = load_tile_fragment<Element, kBlockM, kHeadDimMax>(
                Q, params.q_layout.row_stride, row0, seqlen_q, head_dim);
            float4 O_old[kRowsPerThread][kVectorsPerRow];
            float m_old[kRowsPerThread], l_old[kRowsPerThread];
#pragma unroll
            for (int u = 0; u < kRowsPerThread; ++u) {
                const int row = row0 + ty + kRowGroups * u;
                const bool row_valid = row < seqlen_q;
                m_old[u] = row_valid ? m[row] : -INFINITY; /* 16 lanes read one word */
                l_old[u] = row_valid ? l[row] : 0.0f;
#pragma unroll
                for (int w = 0; w < kVectorsPerRow; ++w) {
                    const int col = kVector * tx + kColsPerPass * w;
                    O_old[u][w] = row_valid && col < head_dim
                                      ? load4(&O[(int64_t)row * head_dim + col])
                                      : make_float4(0.f, 0.f, 0.f, 0.f);
                }
            }
            store_tile_fragment<Element, kBlockM, kHeadDimMax>(smem.Q, Q_i);
            __syncthreads(); /* K_j, V_j, Q_i in shared memory */

            /* Line 9: S_ij = Q_i K_jᵀ, each thread a kRowsPerThread × kKeysPerThread tile. */
            float S[kRowsPerThread][kKeysPerThread];
#pragma unroll
            for (int u = 0; u < kRowsPerThread; ++u)
#pragma unroll
                for (int v = 0; v < kKeysPerThread; ++v)
                    S[u][v] = 0.0f;
            for (int d = 0; d < head_dim; d += kVector) {
                float4 q[kRowsPerThread], k[kKeysPerThread];
#pragma unroll
                for (int u = 0; u < kRowsPerThread; ++u)
                    q[u] = load4(&smem.Q[ty + kRowGroups * u][d]);
#pragma unroll
                for (int v = 0; v < kKeysPerThread; ++v)
                    k[v] = load4(&smem.K[tx + kLanesPerRow * v][d]);
#pragma unroll
                for (int u = 0; u < kRowsPerThread; ++u)
#pragma unroll
                    for (int v = 0; v < kKeysPerThread; ++v)
                        S[u][v] = dot4(q[u], k[v], S[u][v]);
            }

            /* Line 10 (softmax of the block) and line 11 (the running statistics). */
            float alpha[kRowsPerThread], beta[kRowsPerThread]; /* O ← α·O + β·P̃V */
            float m_new[kRowsPerThread], l_new[kRowsPerThread];
#pragma unroll
            for (int u = 0; u < kRowsPerThread; ++u) {
                const int r = ty + kRowGroups * u;
                const int row = row0 + r;
                float m_tilde = -INFINITY;
#pragma unroll
                for (int v = 0; v < kKeysPerThread; ++v) {
                    const int key = key0 + tx + kLanesPerRow * v;
                    const bool visible =
                        key < seqlen_k && (!params.causal || key <= row + causal_offset);
                    S[u][v] = visible ? S[u][v] * scale : -INFINITY;
                    m_tilde = fmaxf(m_tilde, S[u][v]);
                }
                m_tilde = row_max16(m_tilde);
                /* A row with no visible key here: exponentiate against 0, not -inf. */
                const float m_tilde_use = m_tilde == -INFINITY ? 0.0f : m_tilde;
                float l_tilde = 0.0f;
#pragma unroll
                for (int v = 0; v < kKeysPerThread; ++v) {
                    const float p = exp2f((S[u][v] - m_tilde_use) * kLog2e);
                    smem.P[r][tx + kLanesPerRow * v] = p;
                    l_tilde += p;
                }
                l_tilde = row_sum16(l_tilde);

                m_new[u] = fmaxf(m_old[u], m_tilde);
                const float m_new_use = m_new[u] == -INFINITY ? 0.0f : m_new[u];
                const float scale_old = l_old[u] * exp2f((m_old[u] - m_new_use) * kLog2e);
                const float scale_block = exp2f((m_tilde - m_new_use) * kLog2e);
                l_new[u] = scale_old + scale_block * l_tilde;
                const float inv_l_new = l_new[u] > 0.0f ? 1.0f / l_new[u] : 0.0f;
                alpha[u] = scale_old * inv_l_new;
                beta[u] = scale_block * inv_l_new;
            }
            __syncthreads(); /* P̃_ij complete in shared memory */

            /* Line 12: P̃_ij V_j, each thread kRowsPerThread rows × kVectorsPerRow float4. */
            float4 PV[kRowsPerThread][kVectorsPerRow];
#pragma unroll
            for (int u = 0; u < kRowsPerThread; ++u)
#pragma unroll
                for (int w = 0; w < kVectorsPerRow; ++w)
                    PV[u][w] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 2
            for (int n = 0; n < kBlockN; n += kVector) {
                float4 p[kRowsPerThread];
#pragma unroll
                for (int u = 0; u < kRowsPerThread; ++u)
                    p[u] = load4(&smem.P[ty + kRowGroups * u][n]);
#pragma unroll
                for (int e = 0; e < kVector; ++e) {
#pragma unroll
                    for (int w = 0; w < kVectorsPerRow; ++w) {
                        const float4 v = load4(&smem.V[n + e][kVector * tx + kColsPerPass * w]);
#pragma unroll
                        for (int u = 0; u < kRowsPerThread; ++u)
                            PV[u][w] = axpy4(component(p[u], e), v, PV[u][w]);
                    }
                }
            }

            /* Line 12 (write O_i) and line 13 (write ℓ_i, m_i). */
#pragma unroll
            for (int u = 0; u < kRowsPerThread; ++u) {
                const int row = row0 + ty + kRowGroups * u;
                if (row >= seqlen_q)
                    continue;
#pragma unroll
                for (int w = 0; w < kVectorsPerRow; ++w) {
                    const int col = kVector * tx + kColsPerPass * w;
                    if (col >= head_dim)
                        continue;
                    float4 o_new;
                    o_new.x = fmaf(alpha[u], O_old[u][w].x, beta[u] * PV[u][w].x);
                    o_new.y = fmaf(alpha[u], O_old[u][w].y, beta[u] * PV[u][w].y);
                    o_new.z = fmaf(alpha[u], O_old[u][w].z, beta[u] * PV[u][w].z);
                    o_new.w = fmaf(alpha[u], O_old[u][w].w, beta[u] * PV[u][w].w);
                    *reinterpret_cast<float4 *>(&O[(int64_t)row * head_dim + col]) = o_new;
                }
                if (tx == 0) {
                    m[row] = m_new[u];
                    l[row] = l_new[u];
                }
            }
            __syncthreads(); /* Q_i and P̃_ij may be overwritten by the next step */
        }
    }
}

/* fwd_epilogue_kernel — after Algorithm 1's loops: one thread per element of O. Reads
 * the fp32 workspace O [batch, heads_q, seqlen_q, head_dim] (already normalised by ℓ at
 * line 12) and m, ℓ [batch, heads_q, seqlen_q]; writes O in the dtype with O's layout and
 * LSE = m + log ℓ (fp32, natural log, [batch, heads_q, seqlen_q]; -inf where ℓ = 0, the
 * rows that see no key). */
template <typename Element>
__global__ void __launch_bounds__(kThreads) fwd_epilogue_kernel(const FwdParams params)
{
    const int64_t idx = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    const int64_t rows = (int64_t)params.batch * params.heads_q * params.seqlen_q;
    if (idx >= rows * params.head_dim)
        return;
    const int col = (int)(idx % params.head_dim);
    const int64_t slice_row = idx / params.head_dim; /* (b·heads_q + h)·seqlen_q + row */
    const int row = (int)(slice_row % params.seqlen_q);
    const int h = (int)((slice_row / params.seqlen_q) % params.heads_q);
    const int b = (int)(slice_row / ((int64_t)params.seqlen_q * params.heads_q));

    Element *O = (Element *)params.o;
    O[b * params.o_layout.batch_stride + row * params.o_layout.row_stride +
      h * params.o_layout.head_stride + col] = from_float<Element>(params.o_accum[idx]);
    if (col == 0) {
        const float l = params.l[slice_row];
        params.lse[slice_row] = l > 0.0f ? params.m[slice_row] + logf(l) : -INFINITY;
    }
}

/* ------------------------------------------------------------------------------------
 * Host launcher
 * ---------------------------------------------------------------------------------- */

template <int kHeadDimMax>
fx_tiles_02 tiles_of(void)
{
    fx_tiles_02 t;
    t.head_dim_max = kHeadDimMax;
    t.block_m = Config<kHeadDimMax>::kBlockM;
    t.block_n = Config<kHeadDimMax>::kBlockN;
    return t;
}

template <typename Element, int kHeadDimMax>
cudaError_t launch(const FwdParams &params, const fx_problem *p, cudaStream_t stream)
{
    const int smem_bytes = (int)sizeof(SharedStorage<kHeadDimMax>);
    cudaError_t err = cudaFuncSetAttribute(fwd_kernel<Element, kHeadDimMax>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (err != cudaSuccess)
        return err;
    fwd_kernel<Element, kHeadDimMax>
        <<<p->batch * p->heads_q, kThreads, smem_bytes, stream>>>(params);
    fwd_epilogue_kernel<Element><<<elementwise_blocks(p), kThreads, 0, stream>>>(params);
    return cudaGetLastError();
}

template <typename Element>
cudaError_t launch_head_dim(const FwdParams &params, const fx_problem *p, cudaStream_t stream)
{
    switch (head_dim_bucket(p->head_dim)) {
    case 64: return launch<Element, 64>(params, p, stream);
    case 128: return launch<Element, 128>(params, p, stream);
    case 192: return launch<Element, 192>(params, p, stream);
    default: return launch<Element, 256>(params, p, stream);
    }
}

}  // namespace

/* The forward's workspace in bytes: fp32 O [batch, heads_q, seqlen_q, head_dim], then m
 * and ℓ [batch, heads_q, seqlen_q], each region 256-byte aligned (align_up). */
extern "C" size_t fx_fwd_workspace_bytes_02(const fx_problem *p)
{
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    return align_up(rows * p->head_dim * sizeof(float)) + 2 * align_up(rows * sizeof(float));
}

/* The forward's tiles for head_dim (model.h), from the constants the kernels use. */
extern "C" fx_tiles_02 fx_fwd_tiles_02(int head_dim)
{
    switch (head_dim_bucket(head_dim)) {
    case 64: return tiles_of<64>();
    case 128: return tiles_of<128>();
    case 192: return tiles_of<192>();
    default: return tiles_of<256>();
    }
}

/* Enqueues the forward on a->stream: the main kernel, then the epilogue. The harness
 * has checked the problem against the caps (head_dim a multiple of 8 up to 256). */
extern "C" cudaError_t fx_fwd_02(const fx_fwd_args *a)
{
    const fx_problem *p = a->p;
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    FwdParams params;
    params.q = a->q;
    params.k = a->k;
    params.v = a->v;
    params.o = a->o;
    params.lse = a->lse;
    params.q_layout = a->q_layout;
    params.k_layout = a->k_layout;
    params.v_layout = a->v_layout;
    params.o_layout = a->o_layout;
    params.o_accum = (float *)a->workspace;
    params.m = (float *)((char *)a->workspace + align_up(rows * p->head_dim * sizeof(float)));
    params.l = (float *)((char *)params.m + align_up(rows * sizeof(float)));
    params.batch = p->batch;
    params.seqlen_q = p->seqlen_q;
    params.seqlen_k = p->seqlen_k;
    params.heads_q = p->heads_q;
    params.heads_kv = p->heads_kv;
    params.head_dim = p->head_dim;
    params.causal = p->causal ? 1 : 0;
    params.softmax_scale = (float)p->softmax_scale;
    if (a->workspace_bytes < fx_fwd_workspace_bytes_02(p))
        return cudaErrorInvalidValue;
    if (!aligned_for_chunks(a->q, &a->q_layout) || !aligned_for_chunks(a->k, &a->k_layout) ||
        !aligned_for_chunks(a->v, &a->v_layout))
        return refuse_misaligned("forward");
    if (p->dtype == FX_BF16)
        return launch_head_dim<__nv_bfloat16>(params, p, a->stream);
    return launch_head_dim<__half>(params, p, a->stream);
}
