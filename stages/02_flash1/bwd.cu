/*
 * bwd.cu — stage 02: the FlashAttention-1 backward on FP32 CUDA cores.
 *
 * FlashAttention-1's Algorithm 4 (Dao et al. 2022): for every K/V block j, for every Q
 * block i, recompute S_ij and P_ij on chip from the forward's LSE, then dV_j += P_ijᵀdO_i,
 * dP_ij = dO_iV_jᵀ, dS_ij = P_ij∘(dP_ij − D_i), dQ_i += τ·dS_ijK_j (a read-modify-write
 * of an fp32 dQ in HBM) and dK_j += τ·dS_ijᵀQ_i — no S or P in HBM, as in the forward
 * (fwd.cu). One block per (batch, kv head) loops over the query heads of its GQA group,
 * so dK and dV sum over them in a fixed order (deterministic) and dQ's read-modify-write
 * has a single writer. What both passes share is in traits.cuh.
 */
#include "traits.cuh"

// Stages linked into one program define the same names: internal linkage keeps them apart.
namespace {

/* ------------------------------------------------------------------------------------
 * Shared-memory plan: fp32 tiles, converted from the dtype once on load so the inner
 * loops are pure FMAs. Row pitch head_dim bucket + kSmemPad. (The tiles: traits.cuh.)
 * ---------------------------------------------------------------------------------- */

template <int kHeadDimMax>
struct BwdSharedStorage {
    static constexpr int kBlockM = Config<kHeadDimMax>::kBwdBlockM;
    static constexpr int kBlockN = Config<kHeadDimMax>::kBwdBlockN;
    static constexpr int kPitch = kHeadDimMax + kSmemPad;
    float K[kBlockN][kPitch];              /* K_j  (Algorithm 4 line 7)        */
    float V[kBlockN][kPitch];              /* V_j  (line 7)                    */
    float Q[kBlockM][kPitch];              /* Q_i  (line 10)                   */
    float dO[kBlockM][kPitch];             /* dO_i (line 10)                   */
    float O[kBlockM][kPitch];              /* O_i  (line 10), for D_i (line 19) */
    float P[kBlockM][kBlockN + kSmemPad];  /* P_ij, recomputed (line 13)       */
    float dS[kBlockM][kBlockN + kSmemPad]; /* dS_ij = P ∘ (dP - D_i) (line 20) */
};
static_assert(sizeof(BwdSharedStorage<64>) <= kSmemBudgetBytes, "backward d<=64 plan over 96 KiB");
static_assert(sizeof(BwdSharedStorage<128>) <= kSmemBudgetBytes,
              "backward d<=128 plan over 96 KiB");
static_assert(sizeof(BwdSharedStorage<192>) <= kSmemBudgetBytes,
              "backward d<=192 plan over 96 KiB");
static_assert(sizeof(BwdSharedStorage<256>) <= kSmemBudgetBytes,
              "backward d<=256 plan over 96 KiB");

/* ------------------------------------------------------------------------------------
 * Kernel arguments (C structs passed by value)
 * ---------------------------------------------------------------------------------- */

struct BwdParams {
    const void *q, *k, *v, *o, *dout; /* dtype; dO has O's layout                      */
    const float *lse;                 /* from this stage's forward                     */
    void *dq, *dk, *dv;               /* dtype; dQ in Q's layout, dK K's, dV V's       */
    fx_layout q_layout, k_layout, v_layout, o_layout;
    float *dq_accum; /* fp32 workspace [batch, heads_q, seqlen_q, head_dim] */
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    int causal;
    float softmax_scale;
};

/* ------------------------------------------------------------------------------------
 * Backward: Algorithm 4 (no dropout), P recomputed from the forward's LSE
 *
 * The paper stores m and ℓ and recomputes P_ij = diag(ℓ_i)⁻¹ exp(S_ij - m_i) (line 13).
 * We recompute the same thing from LSE = m + log ℓ, which the forward already writes:
 * diag(ℓ)⁻¹ exp(S - m) = exp(S - (m + log ℓ)) = exp(S - LSE). So the backward needs no
 * state beyond the harness's O and LSE. A row with LSE = -inf sees no key: all its S
 * are masked to -inf and we subtract 0 instead, so P = 0, dS = 0, dQ = 0.
 * ---------------------------------------------------------------------------------- */

/* bwd_kernel — one block per (batch b, kv head h_kv): grid batch·heads_kv.
 * Loops over the G = heads_q/heads_kv query heads h of its group inside the Q-block
 * loop, so dK_j, dV_j sum over them in a fixed order and the dQ slices have one writer.
 * Reads Q, dO, O (query heads h, dO in O's layout), K, V (head h_kv) in the dtype,
 * LSE fp32; read-modify-writes the fp32 workspace dQ [batch, heads_q, seqlen_q,
 * head_dim]; writes dK, dV (dtype, K's and V's layouts).
 *   line 5      dQ = 0 in HBM (this group's slices)
 *   line 6-8    for j: load K_j, V_j; dK_j = dV_j = 0 in registers
 *   line 9-10   for h in group, for i: load Q_i, dO_i, O_i (shared), LSE_i, dQ_i
 *   line 11-13  S_ij = τ Q_i K_jᵀ, masked, P_ij = exp(S_ij - LSE_i)
 *   line 16     dV_j += P_ijᵀ dO_i
 *   line 17     dP_ij = dO_i V_jᵀ
 *   line 19     D_i = rowsum(dO_i ∘ O_i)
 *   line 20     dS_ij = P_ij ∘ (dP_ij - D_i)
 *   line 21     dQ_i += τ dS_ij K_j      (read-modify-write, HBM)
 *   line 22     dK_j += τ dS_ijᵀ Q_i     (τ applied once, at line 24)
 *   line 24     write dK_j, dV_j
 * Thread (tx, ty) owns, in S/dP, query rows ty + 16·u × keys tx + 16·v; in dQ_i, rows
 * ty + 16·u × columns 4·tx + 64·w + {0..3}; in dK_j, dV_j, keys ty + 16·u × those
 * columns. */
template <typename Element, int kHeadDimMax>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) bwd_kernel(const BwdParams params)
{
    using Smem = BwdSharedStorage<kHeadDimMax>;
    constexpr int kBlockM = Smem::kBlockM;                     /* B_r */
    constexpr int kBlockN = Smem::kBlockN;                     /* B_c */
    constexpr int kRowsPerThread = kBlockM / kRowGroups;       /* query rows u of S, dP, dQ */
    constexpr int kKeysPerThread = kBlockN / kLanesPerRow;     /* keys v of S, dP           */
    constexpr int kKeyRowsPerThread = kBlockN / kRowGroups;    /* keys u of dK, dV          */
    constexpr int kVectorsPerRow = kHeadDimMax / kColsPerPass; /* float4 w of a d-wide row  */

    extern __shared__ float4 smem_raw[];
    Smem &smem = *reinterpret_cast<Smem *>(smem_raw);

    const int tx = threadIdx.x % kLanesPerRow;
    const int ty = threadIdx.x / kLanesPerRow;
    const int b = blockIdx.x / params.heads_kv;
    const int h_kv = blockIdx.x % params.heads_kv;
    const int group = params.heads_q / params.heads_kv;
    const int seqlen_q = params.seqlen_q, seqlen_k = params.seqlen_k;
    const int head_dim = params.head_dim;
    const int causal_offset = seqlen_k - seqlen_q;
    const float scale = params.softmax_scale;

    const Element *K = (const Element *)params.k + b * params.k_layout.batch_stride +
                       h_kv * params.k_layout.head_stride;
    const Element *V = (const Element *)params.v + b * params.v_layout.batch_stride +
                       h_kv * params.v_layout.head_stride;
    Element *dK = (Element *)params.dk + b * params.k_layout.batch_stride +
                  h_kv * params.k_layout.head_stride;
    Element *dV = (Element *)params.dv + b * params.v_layout.batch_stride +
                  h_kv * params.v_layout.head_stride;

    /* Line 5: dQ = 0 for the group's query heads (dK, dV start in registers, line 8). */
    for (int g = 0; g < group; ++g) {
        float *dQ = params.dq_accum +
                    ((int64_t)b * params.heads_q + h_kv * group + g) * seqlen_q * head_dim;
        for (int idx = threadIdx.x; idx < seqlen_q * head_dim; idx += kThreads)
            dQ[idx] = 0.0f;
    }
    __syncthreads();

    const int T_c = ceil_div(seqlen_k, kBlockN);
    const int T_r = ceil_div(seqlen_q, kBlockM);
    for (int j = 0; j < T_c; ++j) {
        const int key0 = j * kBlockN;
        __syncthreads(); /* the previous j has finished reading K_j, V_j */
        {
            const auto K_j = load_tile_fragment<Element, kBlockN, kHeadDimMax>(
                K, params.k_layout.row_stride, key0, seqlen_k, head_dim);
            const auto V_j = load_tile_fragment<Element, kBlockN, kHeadDimMax>(
                V, params.v_layout.row_stride, key0, seqlen_k, head_dim);
            store_tile_fragment<Element, kBlockN, kHeadDimMax>(smem.K, K_j);
            store_tile_fragment<Element, kBlockN, kHeadDimMax>(smem.V, V_j);
        }
        float4 dK_acc[kKeyRowsPerThread][kVectorsPerRow], dV_acc[kKeyRowsPerThread][kVectorsPerRow];
#pragma unroll
        for (int u = 0; u < kKeyRowsPerThread; ++u)
#pragma unroll
            for (int w = 0; w < kVectorsPerRow; ++w) {
                dK_acc[u][w] = make_float4(0.f, 0.f, 0.f, 0.f);
                dV_acc[u][w] = make_float4(0.f, 0.f, 0.f, 0.f);
            }

        const int i_begin = params.causal ? fx_m_block_min_02(key0, causal_offset, kBlockM) : 0;
        for (int g = 0; g < group; ++g) {
            const int h = h_kv * group + g;
            const Element *Q = (const Element *)params.q + b * params.q_layout.batch_stride +
                               h * params.q_layout.head_stride;
            const Element *dO = (const Element *)params.dout + b * params.o_layout.batch_stride +
                                h * params.o_layout.head_stride;
            const Element *O = (const Element *)params.o + b * params.o_layout.batch_stride +
                               h * params.o_layout.head_stride;
            const int64_t slice = ((int64_t)b * params.heads_q + h) * seqlen_q;
            const float *LSE = params.lse + slice;
            float *dQ = params.dq_accum + slice * head_dim;

            for (int i = i_begin; i < T_r; ++i) {
                const int row0 = i * kBlockM;
                __syncthreads(); /* the previous step has finished reading Q, dO, O, P, dS */
                /* Line 10: LSE_i (for line 13) and this thread's part of dQ_i (for line
                 * 21) to registers, Q_i, dO_i, O_i to shared memory; every load issued
                 * before the first store, so the HBM latencies overlap. */
                float lse_use[kRowsPerThread];
                float4 dQ_old[kRowsPerThread][kVectorsPerRow];
#pragma unroll
                for (int u = 0; u < kRowsPerThread; ++u) {
                    const int row = row0 + ty + kRowGroups * u;
                    const bool row_valid = row < seqlen_q;
                    const float lse = row_valid ? LSE[row] : 0.0f;
                    lse_use[u] = lse == -INFINITY ? 0.0f : lse;
#pragma unroll
                    for (int w = 0; w < kVectorsPerRow; ++w) {
                        const int col = kVector * tx + kColsPerPass * w;
                        dQ_old[u][w] = row_valid && col < head_dim
                                           ? load4(&dQ[(int64_t)row * head_dim + col])
                                           : make_float4(0.f, 0.f, 0.f, 0.f);
                    }
                }
                {
                    const auto Q_i = load_tile_fragment<Element, kBlockM, kHeadDimMax>(
                        Q, params.q_layout.row_stride, row0, seqlen_q, head_dim);
                    const auto dO_i = load_tile_fragment<Element, kBlockM, kHeadDimMax>(
                        dO, params.o_layout.row_stride, row0, seqlen_q, head_dim);
                    const auto O_i = load_tile_fragment<Element, kBlockM, kHeadDimMax>(
                        O, params.o_layout.row_stride, row0, seqlen_q, head_dim);
                    store_tile_fragment<Element, kBlockM, kHeadDimMax>(smem.Q, Q_i);
                    store_tile_fragment<Element, kBlockM, kHeadDimMax>(smem.dO, dO_i);
                    store_tile_fragment<Element, kBlockM, kHeadDimMax>(smem.O, O_i);
                }
                __syncthreads(); /* K_j, V_j, Q_i, dO_i, O_i in shared memory */

                /* Lines 11, 17 and 19 in one pass over head_dim: S_ij = Q_i K_jᵀ,
                 * dP_ij = dO_i V_jᵀ and D_i = rowsum(dO_i ∘ O_i). D is summed in the same
                 * order and with the same FMAs as dP, so where P is one-hot (a single
                 * visible key, whose V row is that row's O) dP - D is exactly 0, as in
                 * exact arithmetic: every lane of a row computes its row's D whole. */
                float S[kRowsPerThread][kKeysPerThread], dP[kRowsPerThread][kKeysPerThread];
                float D[kRowsPerThread];
#pragma unroll
                for (int u = 0; u < kRowsPerThread; ++u) {
                    D[u] = 0.0f;
#pragma unroll
                    for (int v = 0; v < kKeysPerThread; ++v)
                        S[u][v] = dP[u][v] = 0.0f;
                }
                for (int d = 0; d < head_dim; d += kVector) {
                    float4 q[kRowsPerThread], do_[kRowsPerThread], k[kKeysPerThread],
                        v_[kKeysPerThread];
#pragma unroll
                    for (int u = 0; u < kRowsPerThread; ++u) {
                        q[u] = load4(&smem.Q[ty + kRowGroups * u][d]);
                        do_[u] = load4(&smem.dO[ty + kRowGroups * u][d]);
                        D[u] = dot4(do_[u], load4(&smem.O[ty + kRowGroups * u][d]), D[u]);
                    }
#pragma unroll
                    for (int v = 0; v < kKeysPerThread; ++v) {
                        k[v] = load4(&smem.K[tx + kLanesPerRow * v][d]);
                        v_[v] = load4(&smem.V[tx + kLanesPerRow * v][d]);
                    }
#pragma unroll
                    for (int u = 0; u < kRowsPerThread; ++u)
#pragma unroll
                        for (int v = 0; v < kKeysPerThread; ++v) {
                            S[u][v] = dot4(q[u], k[v], S[u][v]);
                            dP[u][v] = dot4(do_[u], v_[v], dP[u][v]);
                        }
                }

                /* Lines 12-13 and 20: mask, P_ij = exp(S_ij - LSE_i), dS_ij = P ∘ (dP - D_i). */
#pragma unroll
                for (int u = 0; u < kRowsPerThread; ++u) {
                    const int r = ty + kRowGroups * u;
                    const int row = row0 + r;
#pragma unroll
                    for (int v = 0; v < kKeysPerThread; ++v) {
                        const int c = tx + kLanesPerRow * v;
                        const int key = key0 + c;
                        const bool visible = row < seqlen_q && key < seqlen_k &&
                                             (!params.causal || key <= row + causal_offset);
                        const float p =
                            visible ? exp2f((S[u][v] * scale - lse_use[u]) * kLog2e) : 0.0f;
                        smem.P[r][c] = p;
                        smem.dS[r][c] = p * (dP[u][v] - D[u]);
                    }
                }
                __syncthreads(); /* P_ij, dS_ij complete in shared memory */

                /* Line 16: dV_j += P_ijᵀ dO_i; line 22: dK_j += dS_ijᵀ Q_i (τ at line 24). */
                for (int r = 0; r < kBlockM; ++r) {
                    float4 do_[kVectorsPerRow], q[kVectorsPerRow];
#pragma unroll
                    for (int w = 0; w < kVectorsPerRow; ++w) {
                        do_[w] = load4(&smem.dO[r][kVector * tx + kColsPerPass * w]);
                        q[w] = load4(&smem.Q[r][kVector * tx + kColsPerPass * w]);
                    }
#pragma unroll
                    for (int u = 0; u < kKeyRowsPerThread; ++u) {
                        const float p = smem.P[r][ty + kRowGroups * u];
                        const float ds = smem.dS[r][ty + kRowGroups * u];
#pragma unroll
                        for (int w = 0; w < kVectorsPerRow; ++w) {
                            dV_acc[u][w] = axpy4(p, do_[w], dV_acc[u][w]);
                            dK_acc[u][w] = axpy4(ds, q[w], dK_acc[u][w]);
                        }
                    }
                }

                /* Line 21: dQ_i += τ dS_ij K_j, read-modify-write of the fp32 workspace. */
                float4 dQ_step[kRowsPerThread][kVectorsPerRow];
#pragma unroll
                for (int u = 0; u < kRowsPerThread; ++u)
#pragma unroll
                    for (int w = 0; w < kVectorsPerRow; ++w)
                        dQ_step[u][w] = make_float4(0.f, 0.f, 0.f, 0.f);
                for (int n = 0; n < kBlockN; n += kVector) {
                    float4 ds[kRowsPerThread];
#pragma unroll
                    for (int u = 0; u < kRowsPerThread; ++u)
                        ds[u] = load4(&smem.dS[ty + kRowGroups * u][n]);
#pragma unroll
                    for (int e = 0; e < kVector; ++e) {
#pragma unroll
                        for (int w = 0; w < kVectorsPerRow; ++w) {
                            const float4 k = load4(&smem.K[n + e][kVector * tx + kColsPerPass * w]);
#pragma unroll
                            for (int u = 0; u < kRowsPerThread; ++u)
                                dQ_step[u][w] = axpy4(component(ds[u], e), k, dQ_step[u][w]);
                        }
                    }
                }
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
                        *reinterpret_cast<float4 *>(&dQ[(int64_t)row * head_dim + col]) =
                            axpy4(scale, dQ_step[u][w], dQ_old[u][w]);
                    }
                }
            }
        }

        /* Line 24: write dK_j = τ·(Σ dSᵀ Q), dV_j in the dtype. */
#pragma unroll
        for (int u = 0; u < kKeyRowsPerThread; ++u) {
            const int key = key0 + ty + kRowGroups * u;
            if (key >= seqlen_k)
                continue;
#pragma unroll
            for (int w = 0; w < kVectorsPerRow; ++w) {
                const int col = kVector * tx + kColsPerPass * w;
                if (col >= head_dim)
                    continue;
#pragma unroll
                for (int e = 0; e < kVector; ++e) {
                    dK[(int64_t)key * params.k_layout.row_stride + col + e] =
                        from_float<Element>(scale * component(dK_acc[u][w], e));
                    dV[(int64_t)key * params.v_layout.row_stride + col + e] =
                        from_float<Element>(component(dV_acc[u][w], e));
                }
            }
        }
    }
}

/* bwd_postprocess_kernel — after Algorithm 4's loops: one thread per element of dQ.
 * Reads the fp32 workspace dQ [batch, heads_q, seqlen_q, head_dim]; writes dQ in the
 * dtype with Q's layout (line 26, "return dQ"). */
template <typename Element>
__global__ void __launch_bounds__(kThreads) bwd_postprocess_kernel(const BwdParams params)
{
    const int64_t idx = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    const int64_t rows = (int64_t)params.batch * params.heads_q * params.seqlen_q;
    if (idx >= rows * params.head_dim)
        return;
    const int col = (int)(idx % params.head_dim);
    const int64_t slice_row = idx / params.head_dim;
    const int row = (int)(slice_row % params.seqlen_q);
    const int h = (int)((slice_row / params.seqlen_q) % params.heads_q);
    const int b = (int)(slice_row / ((int64_t)params.seqlen_q * params.heads_q));
    Element *dQ = (Element *)params.dq;
    dQ[b * params.q_layout.batch_stride + row * params.q_layout.row_stride +
       h * params.q_layout.head_stride + col] = from_float<Element>(params.dq_accum[idx]);
}

/* ------------------------------------------------------------------------------------
 * Host launcher
 * ---------------------------------------------------------------------------------- */

template <int kHeadDimMax>
fx_tiles_02 tiles_of(void)
{
    fx_tiles_02 t;
    t.head_dim_max = kHeadDimMax;
    t.block_m = Config<kHeadDimMax>::kBwdBlockM;
    t.block_n = Config<kHeadDimMax>::kBwdBlockN;
    return t;
}

template <typename Element, int kHeadDimMax>
cudaError_t launch(const BwdParams &params, const fx_problem *p, cudaStream_t stream)
{
    const int smem_bytes = (int)sizeof(BwdSharedStorage<kHeadDimMax>);
    cudaError_t err = cudaFuncSetAttribute(bwd_kernel<Element, kHeadDimMax>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (err != cudaSuccess)
        return err;
    bwd_kernel<Element, kHeadDimMax>
        <<<p->batch * p->heads_kv, kThreads, smem_bytes, stream>>>(params);
    bwd_postprocess_kernel<Element><<<elementwise_blocks(p), kThreads, 0, stream>>>(params);
    return cudaGetLastError();
}

template <typename Element>
cudaError_t launch_head_dim(const BwdParams &params, const fx_problem *p, cudaStream_t stream)
{
    switch (head_dim_bucket(p->head_dim)) {
    case 64: return launch<Element, 64>(params, p, stream);
    case 128: return launch<Element, 128>(params, p, stream);
    case 192: return launch<Element, 192>(params, p, stream);
    default: return launch<Element, 256>(params, p, stream);
    }
}

}  // namespace

/* The backward's workspace in bytes: the fp32 dQ [batch, heads_q, seqlen_q, head_dim]. */
extern "C" size_t fx_bwd_workspace_bytes_02(const fx_problem *p)
{
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    return align_up(rows * p->head_dim * sizeof(float));
}

/* The backward's tiles for head_dim (model.h), from the constants the kernels use. */
extern "C" fx_tiles_02 fx_bwd_tiles_02(int head_dim)
{
    switch (head_dim_bucket(head_dim)) {
    case 64: return tiles_of<64>();
    case 128: return tiles_of<128>();
    case 192: return tiles_of<192>();
    default: return tiles_of<256>();
    }
}

/* Enqueues the backward on a->stream: the main kernel, then the dQ conversion. */
extern "C" cudaError_t fx_bwd_02(const fx_bwd_args *a)
{
    const fx_problem *p = a->p;
    BwdParams params;
    params.q = a->q;
    params.k = a->k;
    params.v = a->v;
    params.o = a->o;
    params.dout = a->dout;
    params.lse = a->lse;
    params.dq = a->dq;
    params.dk = a->dk;
    params.dv = a->dv;
    params.q_layout = a->q_layout;
    params.k_layout = a->k_layout;
    params.v_layout = a->v_layout;
    params.o_layout = a->o_layout;
    params.dq_accum = (float *)a->workspace;
    params.batch = p->batch;
    params.seqlen_q = p->seqlen_q;
    params.seqlen_k = p->seqlen_k;
    params.heads_q = p->heads_q;
    params.heads_kv = p->heads_kv;
    params.head_dim = p->head_dim;
    params.causal = p->causal ? 1 : 0;
    params.softmax_scale = (float)p->softmax_scale;
    if (a->workspace_bytes < fx_bwd_workspace_bytes_02(p))
        return cudaErrorInvalidValue;
    if (!aligned_for_chunks(a->q, &a->q_layout) || !aligned_for_chunks(a->k, &a->k_layout) ||
        !aligned_for_chunks(a->v, &a->v_layout) || !aligned_for_chunks(a->o, &a->o_layout) ||
        !aligned_for_chunks(a->dout, &a->o_layout))
        return refuse_misaligned("backward");
    if (p->dtype == FX_BF16)
        return launch_head_dim<__nv_bfloat16>(params, p, a->stream);
    return launch_head_dim<__half>(params, p, a->stream);
}
