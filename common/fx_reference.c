/*
 * fx_reference.c — exact attention on the CPU: the fp64 ground truth, and the same
 * computation emulated in the stage's dtype (fp32 accumulation, bf16/fp16 operands).
 *
 * Forward, per query row i of (batch b, query head h, kv head hk = h / G):
 *   S_j = scale · q_i·k_j            for the keys j the mask lets row i see
 *   P_j = exp(S_j − m) / l,  m = max_j S_j,  l = Σ_j exp(S_j − m)
 *   O_i = Σ_j P_j v_j,       LSE_i = m + log l
 * Backward (FA2 paper, Algorithm 2, here in exact arithmetic):
 *   D_i = dO_i·O_i,  dV_j = Σ_i P_ij dO_i,  dP_ij = dO_i·v_j,
 *   dS_ij = P_ij (dP_ij − D_i),  dQ_i = scale Σ_j dS_ij k_j,  dK_j = scale Σ_i dS_ij q_i,
 * with dK and dV summed over the G query heads that share the kv head.
 *
 * The backward runs in two passes so that nothing of size seqlen_q × seqlen_k is
 * stored: pass 1 walks query rows (S, P, O, LSE, D and dQ of a row need only that
 * row), pass 2 walks keys and recomputes P_ij = exp(S_ij − LSE_i) from the stored LSE,
 * exactly as FlashAttention's backward does. Each pass writes disjoint rows, so the
 * threads never share an output.
 *
 * A row that sees no key has O = 0 and LSE = −inf and is skipped by the backward:
 * no expression ever forms −inf − (−inf).
 */
#include "fx_reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_host.h"

#ifndef _OPENMP
/* The omp pragmas only spread independent rows over threads; without OpenMP the loops
 * run serially and give the same numbers. */
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

/* The reference has no error path: running out of host memory is fatal. */
static void *xmalloc(size_t bytes)
{
    void *ptr = malloc(bytes ? bytes : 1);
    if (!ptr) {
        fprintf(stderr, "fx_reference: out of host memory (%zu bytes)\n", bytes);
        abort();
    }
    return ptr;
}

/* Pointers to row `row` of head `head` in batch b of a tensor in the contiguous layout. */
static const float *row_ptr(const float *x, fx_layout l, int b, int row, int head)
{
    return x + fx_offset(l, b, row, head, 0);
}

/* Whether query row i sees key j (bottom-right causal, fx_problem.h). */
static int sees(const fx_problem *p, int i, int j)
{
    return j < fx_keys_seen(p, i);
}

/* ---- fp64 ------------------------------------------------------------------------ */

/* a·b in fp64. Four partial sums make four independent add chains, several times
 * faster than one; in fp64 the summation order changes nothing that matters here. */
static double dot_f64(const float *a, const float *b, int n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int d = 0;
    for (; d + 4 <= n; d += 4) {
        s0 += (double)a[d] * b[d];
        s1 += (double)a[d + 1] * b[d + 1];
        s2 += (double)a[d + 2] * b[d + 2];
        s3 += (double)a[d + 3] * b[d + 3];
    }
    for (; d < n; d++)
        s0 += (double)a[d] * b[d];
    return (s0 + s1) + (s2 + s3);
}

/* y += alpha·x, fp64. */
static void axpy_f64(double *y, double alpha, const float *x, int n)
{
    for (int d = 0; d < n; d++)
        y[d] += alpha * x[d];
}

/* One query row in fp64 against its n_keys visible keys (always keys 0 .. n_keys-1:
 * the causal mask keeps a prefix). q_row: [head_dim]; key j's row is k_head + j·k_stride
 * ([head_dim]), its value row v_head + j·v_stride ([head_dim_v]). Writes P_j into
 * p_row[0 .. n_keys) and O into o_row[0 .. head_dim_v); returns LSE, or −inf with O = 0 when
 * the row sees no key. */
static double ref_attend_row(const fx_problem *p, const float *q_row, const float *k_head,
                             int64_t k_stride, const float *v_head, int64_t v_stride, int n_keys,
                             double *p_row, double *o_row)
{
    const int D = p->head_dim, Dv = fx_head_dim_v(p);
    for (int d = 0; d < Dv; d++)
        o_row[d] = 0.0;
    if (n_keys == 0)
        return -INFINITY;

    double m = -INFINITY;
    for (int j = 0; j < n_keys; j++) {
        p_row[j] = p->softmax_scale * dot_f64(q_row, k_head + j * k_stride, D);
        m = fmax(m, p_row[j]);
    }
    double l = 0.0;
    for (int j = 0; j < n_keys; j++) {
        p_row[j] = exp(p_row[j] - m);
        l += p_row[j];
    }
    for (int j = 0; j < n_keys; j++) {
        p_row[j] /= l;
        axpy_f64(o_row, p_row[j], v_head + j * v_stride, Dv);
    }
    return m + log(l);
}

void fx_ref_forward_rows(const fx_problem *p, const float *q, const float *k, const float *v, int b,
                         int h, int i0, int i1, double *o, double *lse)
{
    const int Dv = fx_head_dim_v(p);
    const int hk = h / (p->heads_q / p->heads_kv);
    const fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p), lv = fx_layout_v(p);
    const float *k_head = row_ptr(k, lkv, b, 0, hk), *v_head = row_ptr(v, lv, b, 0, hk);

#pragma omp parallel for schedule(dynamic, 1)
    for (int i = i0; i < i1; i++) {
        int n_keys = fx_keys_seen(p, i);
        double *p_row = xmalloc((size_t)n_keys * sizeof(double));
        lse[i - i0] = ref_attend_row(p, row_ptr(q, lq, b, i, h), k_head, lkv.row_stride, v_head,
                                     lv.row_stride, n_keys, p_row, o + (size_t)(i - i0) * Dv);
        free(p_row);
    }
}

void fx_ref_backward_group(const fx_problem *p, const float *q, const float *k, const float *v,
                           const float *dout, int b, int hk, double *dq, double *dk, double *dv)
{
    const int D = p->head_dim, sq = p->seqlen_q, sk = p->seqlen_k;
    const int G = p->heads_q / p->heads_kv;
    const double scale = p->softmax_scale;
    const fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p);
    const float *k_head = row_ptr(k, lkv, b, 0, hk), *v_head = row_ptr(v, lkv, b, 0, hk);
    double *lse = xmalloc((size_t)G * sq * sizeof(double));   /* [G, seqlen_q] */
    double *D_row = xmalloc((size_t)G * sq * sizeof(double)); /* [G, seqlen_q]: dO_i·O_i */

/* Pass 1, one query row r = (g, i) at a time: P, O, LSE, D, then dQ_i. */
#pragma omp parallel for schedule(dynamic, 1)
    for (int r = 0; r < G * sq; r++) {
        const int g = r / sq, i = r % sq, h = hk * G + g;
        const float *q_row = row_ptr(q, lq, b, i, h), *do_row = row_ptr(dout, lq, b, i, h);
        const int n_keys = fx_keys_seen(p, i);
        double *p_row = xmalloc(((size_t)n_keys + D) * sizeof(double));
        double *o_row = p_row + n_keys;
        double *dq_row = dq + (size_t)r * D;

        lse[r] = ref_attend_row(p, q_row, k_head, lkv.row_stride, v_head, lkv.row_stride, n_keys,
                                p_row, o_row);
        D_row[r] = 0.0;
        for (int d = 0; d < D; d++)
            D_row[r] += (double)do_row[d] * o_row[d];

        for (int d = 0; d < D; d++)
            dq_row[d] = 0.0;
        for (int j = 0; j < n_keys; j++) {
            double dP = dot_f64(do_row, v_head + j * lkv.row_stride, D);
            double dS = p_row[j] * (dP - D_row[r]);
            axpy_f64(dq_row, dS, k_head + j * lkv.row_stride, D);
        }
        for (int d = 0; d < D; d++)
            dq_row[d] *= scale;
        free(p_row);
    }

/* Pass 2, one key j at a time: dV_j and dK_j over every (g, i) that sees key j,
     * with P_ij recomputed from the LSE of pass 1. Rows that see nothing (LSE = −inf)
     * see no key, so the mask test skips them before any exp. */
#pragma omp parallel for schedule(dynamic, 1)
    for (int j = 0; j < sk; j++) {
        const float *k_row = k_head + j * lkv.row_stride, *v_row = v_head + j * lkv.row_stride;
        double *dk_row = dk + (size_t)j * D, *dv_row = dv + (size_t)j * D;
        for (int d = 0; d < D; d++)
            dk_row[d] = dv_row[d] = 0.0;
        for (int g = 0; g < G; g++) {
            const int h = hk * G + g;
            for (int i = 0; i < sq; i++) {
                if (!sees(p, i, j))
                    continue;
                const int r = g * sq + i;
                const float *q_row = row_ptr(q, lq, b, i, h), *do_row = row_ptr(dout, lq, b, i, h);
                double P = exp(scale * dot_f64(q_row, k_row, D) - lse[r]);
                axpy_f64(dv_row, P, do_row, D);
                double dP = dot_f64(do_row, v_row, D);
                axpy_f64(dk_row, P * (dP - D_row[r]), q_row, D);
            }
        }
        for (int d = 0; d < D; d++)
            dk_row[d] *= scale;
    }
    free(lse);
    free(D_row);
}

/* ---- emulation in the stage's dtype ---------------------------------------------- */

/* fx_reference.h. Four interleaved partial sums, added in a tree at the end. */
float fx_dot_f32(const float *a, const float *b, int n)
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int d = 0;
    for (; d + 4 <= n; d += 4) {
        s0 += a[d] * b[d];
        s1 += a[d + 1] * b[d + 1];
        s2 += a[d + 2] * b[d + 2];
        s3 += a[d + 3] * b[d + 3];
    }
    for (; d < n; d++)
        s0 += a[d] * b[d];
    return (s0 + s1) + (s2 + s3);
}

/* y += alpha·x, fp32. */
static void axpy_f32(float *y, float alpha, const float *x, int n)
{
    for (int d = 0; d < n; d++)
        y[d] += alpha * x[d];
}

void fx_emu_forward_rows(const fx_problem *p, const float *q, const float *k, const float *v, int b,
                         int h, int i0, int i1, float *o, float *lse)
{
    const int D = p->head_dim, Dv = fx_head_dim_v(p);
    const int hk = h / (p->heads_q / p->heads_kv);
    const float scale = (float)p->softmax_scale;
    const fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p), lv = fx_layout_v(p);
    const float *k_head = row_ptr(k, lkv, b, 0, hk), *v_head = row_ptr(v, lv, b, 0, hk);

#pragma omp parallel for schedule(dynamic, 1)
    for (int i = i0; i < i1; i++) {
        const float *q_row = row_ptr(q, lq, b, i, h);
        const int n_keys = fx_keys_seen(p, i);
        float *o_row = o + (size_t)(i - i0) * Dv;
        if (n_keys == 0) {
            for (int d = 0; d < Dv; d++)
                o_row[d] = 0.0f;
            lse[i - i0] = -INFINITY;
            continue;
        }
        float *p_row = xmalloc(((size_t)n_keys + Dv) * sizeof(float));
        float *acc = p_row + n_keys;

        float m = -INFINITY;
        for (int j = 0; j < n_keys; j++) {
            p_row[j] = scale * fx_dot_f32(q_row, k_head + j * lkv.row_stride, D);
            m = fmaxf(m, p_row[j]);
        }
        /* Standard attention in the dtype, as FlashAttention's tests build their
         * baseline (softmax in fp32, then P cast to the dtype): P is normalized in fp32
         * and rounded to the dtype, the operand type of the PV GEMM. Flash stages round
         * the unnormalized exp(S − m) instead and divide by ℓ at the end, which is no
         * less accurate (the row's largest P is exactly 1 there), so they meet the bound. */
        float l = 0.0f;
        for (int j = 0; j < n_keys; j++) {
            p_row[j] = expf(p_row[j] - m);
            l += p_row[j];
        }
        for (int j = 0; j < n_keys; j++)
            p_row[j] = fx_round(p->dtype, p_row[j] / l);
        for (int d = 0; d < Dv; d++)
            acc[d] = 0.0f;
        for (int j = 0; j < n_keys; j++)
            axpy_f32(acc, p_row[j], v_head + j * lv.row_stride, Dv);
        for (int d = 0; d < Dv; d++)
            o_row[d] = fx_round(p->dtype, acc[d]);
        lse[i - i0] = m + logf(l);
        free(p_row);
    }
}

void fx_emu_backward_group(const fx_problem *p, const float *q, const float *k, const float *v,
                           const float *dout, int b, int hk, float *dq, float *dk, float *dv)
{
    const int D = p->head_dim, sq = p->seqlen_q, sk = p->seqlen_k;
    const int G = p->heads_q / p->heads_kv;
    const float scale = (float)p->softmax_scale;
    const fx_dtype dt = p->dtype;
    const fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p);
    const float *k_head = row_ptr(k, lkv, b, 0, hk), *v_head = row_ptr(v, lkv, b, 0, hk);
    float *o = xmalloc((size_t)G * sq * D * sizeof(float)); /* [G, seqlen_q, head_dim] */
    float *lse = xmalloc((size_t)G * sq * sizeof(float));   /* [G, seqlen_q] */
    float *D_row = xmalloc((size_t)G * sq * sizeof(float)); /* [G, seqlen_q] */

    /* O (in the dtype) and LSE as the stage's forward hands them to its backward. */
    for (int g = 0; g < G; g++)
        fx_emu_forward_rows(p, q, k, v, b, hk * G + g, 0, sq, o + (size_t)g * sq * D,
                            lse + (size_t)g * sq);

/* Pass 1, per query row: D_i, then dQ_i from dS rounded to the dtype. */
#pragma omp parallel for schedule(dynamic, 1)
    for (int r = 0; r < G * sq; r++) {
        const int g = r / sq, i = r % sq, h = hk * G + g;
        const float *q_row = row_ptr(q, lq, b, i, h), *do_row = row_ptr(dout, lq, b, i, h);
        const int n_keys = fx_keys_seen(p, i);
        float *acc = xmalloc((size_t)D * sizeof(float));

        D_row[r] = fx_dot_f32(do_row, o + (size_t)r * D, D);
        for (int d = 0; d < D; d++)
            acc[d] = 0.0f;
        for (int j = 0; j < n_keys; j++) {
            float P = expf(scale * fx_dot_f32(q_row, k_head + j * lkv.row_stride, D) - lse[r]);
            float dP = fx_dot_f32(do_row, v_head + j * lkv.row_stride, D);
            float dS = fx_round(dt, P * (dP - D_row[r]));
            axpy_f32(acc, dS, k_head + j * lkv.row_stride, D);
        }
        for (int d = 0; d < D; d++)
            dq[(size_t)r * D + d] = fx_round(dt, scale * acc[d]);
        free(acc);
    }

/* Pass 2, per key: dV_j from P rounded to the dtype, dK_j from dS rounded to it. */
#pragma omp parallel for schedule(dynamic, 1)
    for (int j = 0; j < sk; j++) {
        const float *k_row = k_head + j * lkv.row_stride, *v_row = v_head + j * lkv.row_stride;
        float *acc_k = xmalloc(2 * (size_t)D * sizeof(float)), *acc_v = acc_k + D;
        for (int d = 0; d < D; d++)
            acc_k[d] = acc_v[d] = 0.0f;
        for (int g = 0; g < G; g++) {
            const int h = hk * G + g;
            for (int i = 0; i < sq; i++) {
                if (!sees(p, i, j))
                    continue;
                const int r = g * sq + i;
                const float *q_row = row_ptr(q, lq, b, i, h), *do_row = row_ptr(dout, lq, b, i, h);
                float P = expf(scale * fx_dot_f32(q_row, k_row, D) - lse[r]);
                axpy_f32(acc_v, fx_round(dt, P), do_row, D);
                float dP = fx_dot_f32(do_row, v_row, D);
                axpy_f32(acc_k, fx_round(dt, P * (dP - D_row[r])), q_row, D);
            }
        }
        for (int d = 0; d < D; d++) {
            dk[(size_t)j * D + d] = fx_round(dt, scale * acc_k[d]);
            dv[(size_t)j * D + d] = fx_round(dt, acc_v[d]);
        }
        free(acc_k);
    }
    free(o);
    free(lse);
    free(D_row);
}
