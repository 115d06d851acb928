/*
 * model.c — stage 02's algorithm on the CPU, step for step as fwd.cu and bwd.cu run it.
 *
 * Same loops (K/V blocks j outside, Q blocks i inside; in the backward, the query heads
 * of a GQA group between them), same tiles (fx_fwd_tiles_02 and fx_bwd_tiles_02, from
 * fwd.cu and bwd.cu), same fp32 arithmetic and the same formulas — exp as 2^(x·log2 e), O
 * normalised after every step, P recomputed from LSE — so a difference between the model
 * and the kernels is a bug in one of them, not in the algorithm. What the model does not
 * copy is the thread layout: sums that the kernels split across lanes are plain loops
 * here.
 *
 * Host tensors are contiguous (fx_problem.h):
 *   q, o, dout, dq : [batch, seqlen_q, heads_q,  head_dim]
 *   k, v, dk, dv   : [batch, seqlen_k, heads_kv, head_dim]
 *   lse            : [batch, heads_q, seqlen_q], natural log
 */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fx_host.h"

/* exp(x) = 2^(x·log2 e), as the kernels compute it. */
static const float kLog2e = 1.4426950408889634f;

static int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

static bool key_visible(const fx_problem *p, int row, int key)
{
    return key < p->seqlen_k && (!p->causal || key <= row + p->seqlen_k - p->seqlen_q);
}

/* Row `row` of head `head` in a contiguous [batch, seqlen, heads, head_dim] tensor. */
static size_t row_offset(int seqlen, int heads, int head_dim, int b, int row, int head)
{
    return (((size_t)b * seqlen + row) * heads + head) * head_dim;
}

static float dot(const float *x, const float *y, int n)
{
    float acc = 0.0f;
    for (int d = 0; d < n; ++d)
        acc += x[d] * y[d];
    return acc;
}

/* Algorithm 1 (fwd_kernel + fwd_epilogue_kernel). */
static void model_forward(const fx_problem *p, const float *q, const float *k, const float *v,
                          float *o, float *lse)
{
    const int seqlen_q = p->seqlen_q, seqlen_k = p->seqlen_k, head_dim = p->head_dim;
    const int group = p->heads_q / p->heads_kv;
    const float scale = (float)p->softmax_scale;
    const fx_tiles_02 tiles = fx_fwd_tiles_02(head_dim);
    const int B_r = tiles.block_m, B_c = tiles.block_n;
    const int T_c = ceil_div(seqlen_k, B_c), T_r = ceil_div(seqlen_q, B_r);

    /* The fp32 workspace of one (b, h) slice: O [seqlen_q, head_dim], m, ℓ [seqlen_q]. */
    float *O = malloc((size_t)seqlen_q * head_dim * sizeof(float));
    float *m = malloc((size_t)seqlen_q * sizeof(float));
    float *l = malloc((size_t)seqlen_q * sizeof(float));
    float *P = malloc((size_t)B_c * sizeof(float)); /* one row of P̃_ij */
    if (!O || !m || !l || !P)
        abort();

    for (int b = 0; b < p->batch; ++b)
        for (int h = 0; h < p->heads_q; ++h) {
            const int h_kv = h / group;
            /* Line 2. */
            memset(O, 0, (size_t)seqlen_q * head_dim * sizeof(float));
            for (int row = 0; row < seqlen_q; ++row) {
                m[row] = -INFINITY;
                l[row] = 0.0f;
            }
            for (int j = 0; j < T_c; ++j) {
                const int key0 = j * B_c;
                const int i_begin =
                    p->causal ? fx_m_block_min_02(key0, seqlen_k - seqlen_q, B_r) : 0;
                for (int i = i_begin; i < T_r; ++i)
                    for (int r = 0; r < B_r && i * B_r + r < seqlen_q; ++r) {
                        const int row = i * B_r + r;
                        const float *q_row =
                            q + row_offset(seqlen_q, p->heads_q, head_dim, b, row, h);
                        /* Lines 9-10: S = τ·q·kᵀ (masked), m̃, P̃, ℓ̃. */
                        float m_tilde = -INFINITY;
                        for (int c = 0; c < B_c; ++c) {
                            const int key = key0 + c;
                            float s = -INFINITY;
                            if (key_visible(p, row, key))
                                s = dot(q_row,
                                        k + row_offset(seqlen_k, p->heads_kv, head_dim, b, key,
                                                       h_kv),
                                        head_dim) *
                                    scale;
                            P[c] = s;
                            m_tilde = fmaxf(m_tilde, s);
                        }
                        const float m_tilde_use = m_tilde == -INFINITY ? 0.0f : m_tilde;
                        float l_tilde = 0.0f;
                        for (int c = 0; c < B_c; ++c) {
                            P[c] = exp2f((P[c] - m_tilde_use) * kLog2e);
                            l_tilde += P[c];
                        }
                        /* Line 11. */
                        const float m_old = m[row], l_old = l[row];
                        const float m_new = fmaxf(m_old, m_tilde);
                        const float m_new_use = m_new == -INFINITY ? 0.0f : m_new;
                        const float scale_old = l_old * exp2f((m_old - m_new_use) * kLog2e);
                        const float scale_block = exp2f((m_tilde - m_new_use) * kLog2e);
                        const float l_new = scale_old + scale_block * l_tilde;
                        const float inv_l_new = l_new > 0.0f ? 1.0f / l_new : 0.0f;
                        const float alpha = scale_old * inv_l_new, beta = scale_block * inv_l_new;
                        /* Line 12: O_i ← α·O_i + β·P̃V_j; line 13: m, ℓ. */
                        for (int col = 0; col < head_dim; ++col) {
                            float pv = 0.0f;
                            for (int c = 0; c < B_c && key0 + c < seqlen_k; ++c)
                                pv += P[c] * v[row_offset(seqlen_k, p->heads_kv, head_dim, b,
                                                          key0 + c, h_kv) +
                                               col];
                            float *o_acc = &O[(size_t)row * head_dim + col];
                            *o_acc = alpha * *o_acc + beta * pv;
                        }
                        m[row] = m_new;
                        l[row] = l_new;
                    }
            }
            /* Epilogue: O to the dtype, LSE = m + log ℓ (-inf where ℓ = 0). */
            for (int row = 0; row < seqlen_q; ++row) {
                float *o_row = o + row_offset(seqlen_q, p->heads_q, head_dim, b, row, h);
                for (int col = 0; col < head_dim; ++col)
                    o_row[col] = fx_round(p->dtype, O[(size_t)row * head_dim + col]);
                lse[((size_t)b * p->heads_q + h) * seqlen_q + row] =
                    l[row] > 0.0f ? m[row] + logf(l[row]) : -INFINITY;
            }
        }
    free(O);
    free(m);
    free(l);
    free(P);
}

/* Algorithm 4 (bwd_kernel + bwd_postprocess_kernel); P = exp(S - LSE). */
static void model_backward(const fx_problem *p, const float *q, const float *k, const float *v,
                           const float *o, const float *lse, const float *dout, float *dq,
                           float *dk, float *dv)
{
    const int seqlen_q = p->seqlen_q, seqlen_k = p->seqlen_k, head_dim = p->head_dim;
    const int group = p->heads_q / p->heads_kv;
    const float scale = (float)p->softmax_scale;
    const fx_tiles_02 tiles = fx_bwd_tiles_02(head_dim);
    const int B_r = tiles.block_m, B_c = tiles.block_n;
    const int T_c = ceil_div(seqlen_k, B_c), T_r = ceil_div(seqlen_q, B_r);

    /* The fp32 dQ workspace of one group [group, seqlen_q, head_dim], dK_j, dV_j
     * accumulators [B_c, head_dim], one step's dQ row, one row's P and dS. */
    float *dQ = malloc((size_t)group * seqlen_q * head_dim * sizeof(float));
    float *dK_acc = malloc((size_t)B_c * head_dim * sizeof(float));
    float *dV_acc = malloc((size_t)B_c * head_dim * sizeof(float));
    float *dQ_step = malloc((size_t)head_dim * sizeof(float));
    if (!dQ || !dK_acc || !dV_acc || !dQ_step)
        abort();

    for (int b = 0; b < p->batch; ++b)
        for (int h_kv = 0; h_kv < p->heads_kv; ++h_kv) {
            /* Line 5. */
            memset(dQ, 0, (size_t)group * seqlen_q * head_dim * sizeof(float));
            for (int j = 0; j < T_c; ++j) {
                const int key0 = j * B_c;
                const int i_begin =
                    p->causal ? fx_m_block_min_02(key0, seqlen_k - seqlen_q, B_r) : 0;
                /* Line 8. */
                memset(dK_acc, 0, (size_t)B_c * head_dim * sizeof(float));
                memset(dV_acc, 0, (size_t)B_c * head_dim * sizeof(float));
                for (int g = 0; g < group; ++g) {
                    const int h = h_kv * group + g;
                    for (int i = i_begin; i < T_r; ++i)
                        for (int r = 0; r < B_r && i * B_r + r < seqlen_q; ++r) {
                            const int row = i * B_r + r;
                            const size_t q_at =
                                row_offset(seqlen_q, p->heads_q, head_dim, b, row, h);
                            const float *q_row = q + q_at, *o_row = o + q_at, *do_row = dout + q_at;
                            const float lse_row =
                                lse[((size_t)b * p->heads_q + h) * seqlen_q + row];
                            const float lse_use = lse_row == -INFINITY ? 0.0f : lse_row;
                            /* Line 19: D_i = rowsum(dO_i ∘ O_i). */
                            const float D = dot(do_row, o_row, head_dim);
                            memset(dQ_step, 0, (size_t)head_dim * sizeof(float));
                            for (int c = 0; c < B_c && key0 + c < seqlen_k; ++c) {
                                const int key = key0 + c;
                                const size_t kv_at =
                                    row_offset(seqlen_k, p->heads_kv, head_dim, b, key, h_kv);
                                /* Lines 11-13: P = exp(τ·q·kᵀ - LSE), masked to 0. */
                                float P = 0.0f;
                                if (key_visible(p, row, key))
                                    P = exp2f((dot(q_row, k + kv_at, head_dim) * scale - lse_use) *
                                              kLog2e);
                                /* Line 17 and 20: dP = dO·vᵀ, dS = P (dP - D). */
                                const float dS = P * (dot(do_row, v + kv_at, head_dim) - D);
                                for (int col = 0; col < head_dim; ++col) {
                                    dV_acc[(size_t)c * head_dim + col] +=
                                        P * do_row[col]; /* line 16 */
                                    dK_acc[(size_t)c * head_dim + col] +=
                                        dS * q_row[col];                 /* line 22 */
                                    dQ_step[col] += dS * k[kv_at + col]; /* line 21 */
                                }
                            }
                            float *dq_row = dQ + ((size_t)g * seqlen_q + row) * head_dim;
                            for (int col = 0; col < head_dim; ++col)
                                dq_row[col] += scale * dQ_step[col];
                        }
                }
                /* Line 24: dK_j = τ·Σ dSᵀ Q, dV_j, in the dtype. */
                for (int c = 0; c < B_c && key0 + c < seqlen_k; ++c) {
                    const size_t kv_at =
                        row_offset(seqlen_k, p->heads_kv, head_dim, b, key0 + c, h_kv);
                    for (int col = 0; col < head_dim; ++col) {
                        dk[kv_at + col] =
                            fx_round(p->dtype, scale * dK_acc[(size_t)c * head_dim + col]);
                        dv[kv_at + col] = fx_round(p->dtype, dV_acc[(size_t)c * head_dim + col]);
                    }
                }
            }
            /* dQ to the dtype. */
            for (int g = 0; g < group; ++g)
                for (int row = 0; row < seqlen_q; ++row) {
                    float *dq_row =
                        dq + row_offset(seqlen_q, p->heads_q, head_dim, b, row, h_kv * group + g);
                    for (int col = 0; col < head_dim; ++col)
                        dq_row[col] =
                            fx_round(p->dtype, dQ[((size_t)g * seqlen_q + row) * head_dim + col]);
                }
        }
    free(dQ);
    free(dK_acc);
    free(dV_acc);
    free(dQ_step);
}

const fx_cpu_model fx_cpu_model_02 = {
    .forward = model_forward,
    .backward = model_backward,
};
