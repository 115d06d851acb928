/*
 * model.c — stage 03's algorithm on the CPU, step for step as the kernels run it.
 *
 * Forward (fwd.cu, FA2 Algorithm 1): per (batch, query head) and Q block of kBlockM
 * rows, the K/V blocks of kBlockN keys from the last one that a row of the block sees down
 * to the first; per block the running max m, its reference R = m·scale_log2 rounded up,
 * the unnormalised O and ℓ rescaled by α = 2^(R_old − R_new), P = 2^(S·scale_log2 − R) added
 * to ℓ in fp32 and rounded to the dtype before O += P·V; O /= ℓ and LSE = R·ln 2 + ln ℓ once
 * at the end, or the row again on the exact path where the last |R| reached
 * FX_SOFTMAX_FAST_BELOW (exact_row). m is kept in raw score units, as in the kernel.
 *
 * Backward (bwd.cu, FA2 Algorithm 2): the preprocess computes D = rowsum(dO∘O) and
 * LSE_log2 = LSE·log2 e (0 where LSE = -inf) and zeroes an fp32 dQaccum; then per (batch,
 * kv head, K/V block of kBlockN keys), dK and dV accumulate in fp32 over the group's query
 * heads and their Q blocks of kBlockM rows at or below the diagonal; per Q block P is
 * recomputed (0 where masked), dS = P∘(dP − D), P and dS are rounded to the dtype before
 * the GEMMs that read them, and the block's partial dS·K is added to dQaccum (the kernel's
 * red.global.add); dK = scale·dK and dV are rounded once; the postprocess rounds
 * scale·dQaccum. What the model does not copy is the thread layout and the order of the
 * additions inside one GEMM.
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
#include "fx_reference.h"

/* exp(x) = 2^(x·log2 e), as the kernels compute it. */
static const float kLog2e = 1.4426950408889634f;

static int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

static void *xmalloc(size_t n)
{
    void *ptr = malloc(n ? n : 1);
    if (!ptr)
        abort();
    return ptr;
}

static bool key_visible(const fx_problem *p, int row, int key)
{
    return row < p->seqlen_q && key < p->seqlen_k &&
           (!p->causal || key <= row + p->seqlen_k - p->seqlen_q);
}

/* Row `row` of head `head` in a contiguous [batch, seqlen, heads, head_dim] tensor. */
static size_t row_offset(int seqlen, int heads, int head_dim, int b, int row, int head)
{
    return (((size_t)b * seqlen + row) * heads + head) * head_dim;
}

/* x·y in fp32: fx_dot_f32 (fx_reference.h), the emulation's own sum, in four interleaved
 * partial sums. A sequential sum's error (~n ulps of the result instead of ~√n) would be
 * the model's own, not the kernel's: at logits ~1e4 (fp16 inputs times 100) it alone took
 * the model's O past the pass rule, an exact S passing it by 3x. */
static float dot(const float *x, const float *y, int n)
{
    return fx_dot_f32(x, y, n);
}

/* The exact path (common/fx_exact_rows.cuh) for row `row` of head `h_kv`'s query head: two
 * passes over the keys it sees, m first, then P = 2^((S − m)·c) — 1 for the maximum —, ℓ and
 * O = P·V in fp32, O rounded once. The kernel sums S in another order (a warp's butterfly);
 * both are fp32 dot products of the same inputs. */
static void exact_row(const fx_problem *p, const float *q_row, const float *k, const float *v,
                      int b, int h_kv, int row, float *o_row, float *lse)
{
    const int seqlen_k = p->seqlen_k, head_dim = p->head_dim;
    const float scale_log2 = (float)(p->softmax_scale * 1.4426950408889634);
    float m = -INFINITY;
    for (int key = 0; key < seqlen_k; ++key)
        if (key_visible(p, row, key))
            m = fmaxf(m, dot(q_row, k + row_offset(seqlen_k, p->heads_kv, head_dim, b, key, h_kv),
                             head_dim));
    float l = 0.0f;
    float *acc = xmalloc((size_t)head_dim * sizeof(float));
    memset(acc, 0, (size_t)head_dim * sizeof(float));
    for (int key = 0; key < seqlen_k; ++key) {
        if (!key_visible(p, row, key))
            continue;
        const float s =
            dot(q_row, k + row_offset(seqlen_k, p->heads_kv, head_dim, b, key, h_kv), head_dim);
        const float P = exp2f((s - m) * scale_log2);
        l += P;
        const float *v_row = v + row_offset(seqlen_k, p->heads_kv, head_dim, b, key, h_kv);
        for (int col = 0; col < head_dim; ++col)
            acc[col] += P * v_row[col];
    }
    const bool empty = (l == 0.0f || l != l);
    const float inv_l = empty ? 0.0f : 1.0f / l;
    for (int col = 0; col < head_dim; ++col)
        o_row[col] = fx_round(p->dtype, acc[col] * inv_l);
    *lse = empty ? -INFINITY : m * (float)p->softmax_scale + logf(l);
    free(acc);
}

/* FA2 Algorithm 1, as fwd_kernel. */
static void model_forward(const fx_problem *p, const float *q, const float *k, const float *v,
                          float *o, float *lse)
{
    const int seqlen_q = p->seqlen_q, seqlen_k = p->seqlen_k, head_dim = p->head_dim;
    const int group = p->heads_q / p->heads_kv;
    const float scale_log2 = (float)(p->softmax_scale * 1.4426950408889634);
    const fx_tiles_03 tiles = fx_fwd_tiles_03(head_dim);
    const int kBlockM = tiles.block_m, kBlockN = tiles.block_n;
    if (kBlockM == 0)
        abort(); /* the harness refuses other head_dims before this */

    float *acc_o = xmalloc((size_t)head_dim * sizeof(float));
    float *S = xmalloc((size_t)kBlockN * sizeof(float));

    for (int b = 0; b < p->batch; ++b)
        for (int h = 0; h < p->heads_q; ++h) {
            const int h_kv = h / group;
            for (int m_block = 0; m_block < ceil_div(seqlen_q, kBlockM); ++m_block) {
                /* K/V blocks [0, n_block_max) hold a key some row of the block sees. */
                int n_block_max = ceil_div(seqlen_k, kBlockN);
                if (p->causal) {
                    const int last_row = m_block * kBlockM + kBlockM - 1 < seqlen_q
                                             ? m_block * kBlockM + kBlockM - 1
                                             : seqlen_q - 1;
                    const int keys_seen = last_row + 1 + seqlen_k - seqlen_q;
                    n_block_max =
                        keys_seen <= 0
                            ? 0
                            : ceil_div(keys_seen < seqlen_k ? keys_seen : seqlen_k, kBlockN);
                }
                /* Rows are independent: each runs the block loop on its own. */
                for (int row = m_block * kBlockM; row < (m_block + 1) * kBlockM && row < seqlen_q;
                     ++row) {
                    const float *q_row = q + row_offset(seqlen_q, p->heads_q, head_dim, b, row, h);
                    float row_max = -INFINITY, row_sum = 0.0f;
                    memset(acc_o, 0, (size_t)head_dim * sizeof(float));
                    for (int n_block = n_block_max - 1; n_block >= 0; --n_block) {
                        const int key0 = n_block * kBlockN;
                        /* S = Q·Kᵀ, masked to -inf. */
                        float m_new = row_max;
                        for (int c = 0; c < kBlockN; ++c) {
                            const int key = key0 + c;
                            S[c] = key_visible(p, row, key)
                                       ? dot(q_row,
                                             k + row_offset(seqlen_k, p->heads_kv, head_dim, b, key,
                                                            h_kv),
                                             head_dim)
                                       : -INFINITY;
                            m_new = fmaxf(m_new, S[c]);
                        }
                        /* Online softmax, O left unnormalised (lines 9-10). */
                        /* R = m·c rounded up, as the kernel's __fmul_ru (no P exceeds 1):
                         * alpha must be 2^(m_scaled_old − m_scaled), the m_scaled_old the
                         * earlier P used (fwd.cu, the online softmax), the product rounded on
                         * its own, not fused into an FMA with the subtraction. The kernel keeps
                         * R itself as its running max instead of m; the two give the same R
                         * and alpha (tests/unit/test_running_max.c). */
                        const float m_scaled =
                            fx_mul_round_up(m_new == -INFINITY ? 0.0f : m_new, scale_log2);
                        const float m_scaled_old = fx_mul_round_up(row_max, scale_log2);
                        const float alpha = exp2f(m_scaled_old - m_scaled);
                        row_max = m_new;
                        row_sum *= alpha;
                        for (int col = 0; col < head_dim; ++col)
                            acc_o[col] *= alpha;
                        for (int c = 0; c < kBlockN; ++c) {
                            const float P = exp2f(fmaf(S[c], scale_log2, -m_scaled));
                            row_sum += P;
                            if (key0 + c >= seqlen_k)
                                continue; /* P = 0; V zero-filled there */
                            const float P_rounded = fx_round(p->dtype, P);
                            const float *v_row =
                                v + row_offset(seqlen_k, p->heads_kv, head_dim, b, key0 + c, h_kv);
                            for (int col = 0; col < head_dim; ++col)
                                acc_o[col] += P_rounded * v_row[col];
                        }
                    }
                    /* The fast path's one check (fwd.cu, the epilogue): the last R and ℓ.
                     * The kernel decides for a whole warp; here the row decides alone. */
                    const float r_last =
                        fx_mul_round_up(row_max == -INFINITY ? 0.0f : row_max, scale_log2);
                    if (!(fabsf(r_last) < FX_SOFTMAX_FAST_BELOW && row_sum < INFINITY)) {
                        exact_row(p, q_row, k, v, b, h_kv, row,
                                  o + row_offset(seqlen_q, p->heads_q, head_dim, b, row, h),
                                  lse + ((size_t)b * p->heads_q + h) * seqlen_q + row);
                        continue;
                    }
                    /* Epilogue (lines 12-13): O /= ℓ, LSE; a row that saw no key: O = 0, -inf. */
                    const bool empty = row_sum == 0.0f;
                    const float inv_l = empty ? 0.0f : 1.0f / row_sum;
                    float *o_row = o + row_offset(seqlen_q, p->heads_q, head_dim, b, row, h);
                    for (int col = 0; col < head_dim; ++col)
                        o_row[col] = fx_round(p->dtype, acc_o[col] * inv_l);
                    lse[((size_t)b * p->heads_q + h) * seqlen_q + row] =
                        empty ? -INFINITY : r_last * FX_LN2 + logf(row_sum);
                }
            }
        }
    free(acc_o);
    free(S);
}

/* FA2 Algorithm 2, as the three kernels of bwd.cu. */
static void model_backward(const fx_problem *p, const float *q, const float *k, const float *v,
                           const float *o, const float *lse, const float *dout, float *dq,
                           float *dk, float *dv)
{
    const int seqlen_q = p->seqlen_q, seqlen_k = p->seqlen_k, head_dim = p->head_dim;
    const int group = p->heads_q / p->heads_kv;
    const float scale = (float)p->softmax_scale;
    const float scale_log2 = (float)(p->softmax_scale * 1.4426950408889634);
    const fx_tiles_03 tiles = fx_bwd_tiles_03(head_dim);
    const int kBlockM = tiles.block_m, kBlockN = tiles.block_n;
    if (kBlockM == 0)
        abort();
    const size_t n_rows = (size_t)p->batch * p->heads_q * seqlen_q;
    const size_t nq = fx_numel_q(p);

    /* Preprocess: D, LSE_log2, dQaccum = 0. */
    float *D = xmalloc(n_rows * sizeof(float));
    float *lse_log2 = xmalloc(n_rows * sizeof(float));
    float *dq_accum = calloc(nq ? nq : 1, sizeof(float));
    if (!dq_accum)
        abort();
    for (int b = 0; b < p->batch; ++b)
        for (int h = 0; h < p->heads_q; ++h)
            for (int i = 0; i < seqlen_q; ++i) {
                const size_t at = row_offset(seqlen_q, p->heads_q, head_dim, b, i, h);
                const size_t r = ((size_t)b * p->heads_q + h) * seqlen_q + i;
                D[r] = dot(dout + at, o + at, head_dim);
                lse_log2[r] = lse[r] == -INFINITY ? 0.0f : lse[r] * kLog2e;
            }

    float *dK_acc = xmalloc((size_t)kBlockN * head_dim * sizeof(float));
    float *dV_acc = xmalloc((size_t)kBlockN * head_dim * sizeof(float));
    float *dQ_part = xmalloc((size_t)kBlockM * head_dim * sizeof(float));

    for (int b = 0; b < p->batch; ++b)
        for (int h_kv = 0; h_kv < p->heads_kv; ++h_kv)
            for (int n_block = 0; n_block < ceil_div(seqlen_k, kBlockN); ++n_block) {
                /* One CTA. */
                const int key0 = n_block * kBlockN;
                int m_block_min = 0;
                if (p->causal) {
                    const int first_row = key0 - (seqlen_k - seqlen_q);
                    m_block_min = (first_row > 0 ? first_row : 0) / kBlockM;
                }
                memset(dK_acc, 0, (size_t)kBlockN * head_dim * sizeof(float));
                memset(dV_acc, 0, (size_t)kBlockN * head_dim * sizeof(float));
                for (int g = 0; g < group; ++g) {
                    const int h = h_kv * group + g;
                    for (int m_block = m_block_min; m_block < ceil_div(seqlen_q, kBlockM);
                         ++m_block) {
                        memset(dQ_part, 0, (size_t)kBlockM * head_dim * sizeof(float));
                        for (int r = 0; r < kBlockM; ++r) {
                            const int row = m_block * kBlockM + r;
                            if (row >= seqlen_q)
                                break;
                            const size_t q_at =
                                row_offset(seqlen_q, p->heads_q, head_dim, b, row, h);
                            const float *q_row = q + q_at, *do_row = dout + q_at;
                            const size_t s = ((size_t)b * p->heads_q + h) * seqlen_q + row;
                            for (int c = 0; c < kBlockN; ++c) {
                                const int key = key0 + c;
                                /* Masked explicitly: a row that sees no key has LSE_log2 = 0. */
                                if (!key_visible(p, row, key))
                                    continue; /* P = dS = 0 */
                                const size_t kv_at =
                                    row_offset(seqlen_k, p->heads_kv, head_dim, b, key, h_kv);
                                const float S = dot(q_row, k + kv_at, head_dim);
                                const float P = exp2f(fmaf(S, scale_log2, -lse_log2[s]));
                                const float dP = dot(do_row, v + kv_at, head_dim);
                                const float dS = P * (dP - D[s]);
                                const float P_rounded = fx_round(p->dtype, P);
                                const float dS_rounded = fx_round(p->dtype, dS);
                                for (int col = 0; col < head_dim; ++col) {
                                    dV_acc[(size_t)c * head_dim + col] += P_rounded * do_row[col];
                                    dK_acc[(size_t)c * head_dim + col] += dS_rounded * q_row[col];
                                    dQ_part[(size_t)r * head_dim + col] +=
                                        dS_rounded * k[kv_at + col];
                                }
                            }
                            /* red.global.add of the block's partial product. */
                            float *acc = dq_accum + q_at;
                            for (int col = 0; col < head_dim; ++col)
                                acc[col] += dQ_part[(size_t)r * head_dim + col];
                        }
                    }
                }
                /* Epilogue: dK = scale·dK, dV, rounded once. */
                for (int c = 0; c < kBlockN && key0 + c < seqlen_k; ++c) {
                    const size_t kv_at =
                        row_offset(seqlen_k, p->heads_kv, head_dim, b, key0 + c, h_kv);
                    for (int col = 0; col < head_dim; ++col) {
                        dk[kv_at + col] =
                            fx_round(p->dtype, dK_acc[(size_t)c * head_dim + col] * scale);
                        dv[kv_at + col] = fx_round(p->dtype, dV_acc[(size_t)c * head_dim + col]);
                    }
                }
            }

    /* Postprocess: dQ = scale·dQaccum in the dtype. */
    for (size_t e = 0; e < nq; ++e)
        dq[e] = fx_round(p->dtype, dq_accum[e] * scale);

    free(D);
    free(lse_log2);
    free(dq_accum);
    free(dK_acc);
    free(dV_acc);
    free(dQ_part);
}

const fx_cpu_model fx_cpu_model_03 = {
    .forward = model_forward,
    .backward = model_backward,
};
