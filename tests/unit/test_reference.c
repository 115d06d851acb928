/*
 * test_reference.c — the CPU reference (fx_reference.h) against closed forms:
 * what attention must give on inputs whose answer is known without computing it,
 * the gradients against finite differences, the causal mask against a problem with
 * the masked keys removed, and the dtype emulation against fp64.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fx_check.h"
#include "fx_host.h"
#include "fx_problem.h"
#include "fx_reference.h"
#include "fx_model_check.h" /* fx_test_calloc */

/* ---- helpers ------------------------------------------------------------------------ */

/* A problem and its host inputs, filled from the problem's seed and distribution. */
typedef struct tensors {
    fx_problem p;
    float *q, *k, *v, *dout; /* Q, dO: [batch, seqlen_q, heads_q, head_dim]; K, V: heads_kv */
} tensors;

/* fx_test_problem (fx_model_check.c) in the default dtype, with this suite's own seed. */
static fx_problem problem(int batch, int seqlen_q, int seqlen_k, int heads_q, int heads_kv,
                          int head_dim, bool causal)
{
    fx_problem p = fx_test_problem(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal,
                                   fx_problem_default().dtype);
    p.seed = 20240901;
    return p;
}

static tensors make(fx_problem p)
{
    char why[256];
    ck_assert_msg(fx_problem_validate(&p, why, sizeof why) == 0, "%s", why);
    tensors t = {.p = p};
    size_t nq = fx_numel_q(&p), nkv = fx_numel_kv(&p);
    t.q = fx_test_calloc(nq, sizeof(float));
    t.k = fx_test_calloc(nkv, sizeof(float));
    t.v = fx_test_calloc(nkv, sizeof(float));
    t.dout = fx_test_calloc(nq, sizeof(float));
    fx_fill(&p, FX_T_Q, t.q, nq);
    fx_fill(&p, FX_T_K, t.k, nkv);
    fx_fill(&p, FX_T_V, t.v, nkv);
    fx_fill(&p, FX_T_DO, t.dout, nq);
    return t;
}

static void release(tensors *t)
{
    free(t->q);
    free(t->k);
    free(t->v);
    free(t->dout);
}

/* The kv head that query head h reads. */
static int kv_head(const fx_problem *p, int h)
{
    return h / (p->heads_q / p->heads_kv);
}

/* scale·q_i·k_j in fp64: the score a row with a single key must report as its LSE. */
static double score(const tensors *t, int b, int i, int h, int j)
{
    double s = 0.0;
    for (int d = 0; d < t->p.head_dim; d++)
        s += (double)t->q[fx_at_q(&t->p, b, i, h, d)] *
             t->k[fx_at_kv(&t->p, b, j, kv_head(&t->p, h), d)];
    return t->p.softmax_scale * s;
}

/* Whole forward of one (b, h) slice, fp64 and emulated. */
typedef struct slice {
    double *o, *lse; /* fp64:     [seqlen_q, head_dim], [seqlen_q] */
    float *o_emu, *lse_emu;
} slice;

static slice forward_slice(const tensors *t, int b, int h)
{
    const fx_problem *p = &t->p;
    slice s;
    s.o = fx_test_calloc((size_t)p->seqlen_q * p->head_dim, sizeof(double));
    s.lse = fx_test_calloc((size_t)p->seqlen_q, sizeof(double));
    s.o_emu = fx_test_calloc((size_t)p->seqlen_q * p->head_dim, sizeof(float));
    s.lse_emu = fx_test_calloc((size_t)p->seqlen_q, sizeof(float));
    fx_ref_forward_rows(p, t->q, t->k, t->v, b, h, 0, p->seqlen_q, s.o, s.lse);
    fx_emu_forward_rows(p, t->q, t->k, t->v, b, h, 0, p->seqlen_q, s.o_emu, s.lse_emu);
    return s;
}

static void free_slice(slice *s)
{
    free(s->o);
    free(s->lse);
    free(s->o_emu);
    free(s->lse_emu);
}

/* Whole backward of one (b, kv head) group, fp64 and emulated. */
typedef struct group {
    double *dq, *dk, *dv; /* [G, seqlen_q, head_dim], [seqlen_k, head_dim] x2 */
    float *dq_emu, *dk_emu, *dv_emu;
} group;

static group backward_group(const tensors *t, int b, int hk)
{
    const fx_problem *p = &t->p;
    const size_t G = (size_t)(p->heads_q / p->heads_kv);
    const size_t nq = G * p->seqlen_q * p->head_dim, nk = (size_t)p->seqlen_k * p->head_dim;
    group g;
    g.dq = fx_test_calloc(nq, sizeof(double));
    g.dk = fx_test_calloc(nk, sizeof(double));
    g.dv = fx_test_calloc(nk, sizeof(double));
    g.dq_emu = fx_test_calloc(nq, sizeof(float));
    g.dk_emu = fx_test_calloc(nk, sizeof(float));
    g.dv_emu = fx_test_calloc(nk, sizeof(float));
    fx_ref_backward_group(p, t->q, t->k, t->v, t->dout, b, hk, g.dq, g.dk, g.dv);
    fx_emu_backward_group(p, t->q, t->k, t->v, t->dout, b, hk, g.dq_emu, g.dk_emu, g.dv_emu);
    return g;
}

static void free_group(group *g)
{
    free(g->dq);
    free(g->dk);
    free(g->dv);
    free(g->dq_emu);
    free(g->dk_emu);
    free(g->dv_emu);
}

static void assert_no_nan_f64(const double *x, size_t n, const char *what)
{
    for (size_t e = 0; e < n; e++)
        ck_assert_msg(!isnan(x[e]), "%s[%zu] is NaN", what, e);
}

static void assert_no_nan_f32(const float *x, size_t n, const char *what)
{
    for (size_t e = 0; e < n; e++)
        ck_assert_msg(!isnan(x[e]), "%s[%zu] is NaN", what, e);
}

/* ---- closed forms ------------------------------------------------------------------- */

/* With a single key, softmax is [1]: every row's O is that key's V, and its LSE is the
 * one score. The emulation agrees exactly on O (P = 1 is exact in every dtype). */
START_TEST(one_key_gives_o_equal_v_and_lse_equal_its_score)
{
    for (int causal = 0; causal <= 1; causal++) {
        /* Causal with seqlen_q = 1: the one row sees key 0 (0 <= 0 + 1 - 1). */
        tensors t = make(problem(2, causal ? 1 : 4, 1, 4, 2, 16, causal));
        const fx_problem *p = &t.p;
        for (int b = 0; b < p->batch; b++) {
            for (int h = 0; h < p->heads_q; h++) {
                slice s = forward_slice(&t, b, h);
                for (int i = 0; i < p->seqlen_q; i++) {
                    double expected_lse = score(&t, b, i, h, 0);
                    ck_assert_double_eq_tol(s.lse[i], expected_lse,
                                            1e-12 * fmax(1, fabs(expected_lse)));
                    ck_assert_double_eq_tol(s.lse_emu[i], expected_lse,
                                            1e-5 * fmax(1, fabs(expected_lse)));
                    for (int d = 0; d < p->head_dim; d++) {
                        float vd = t.v[fx_at_kv(p, b, 0, kv_head(p, h), d)];
                        ck_assert_double_eq(s.o[(size_t)i * p->head_dim + d], vd);
                        ck_assert_float_eq(s.o_emu[(size_t)i * p->head_dim + d], vd);
                    }
                }
                free_slice(&s);
            }
        }
        release(&t);
    }
}
END_TEST

/* Q = 0 makes every score 0: P is uniform over the keys a row sees, O is the mean of
 * their V and LSE = log(number of keys). Causal rows average their own prefix. */
/* head_dim_v != head_dim (192 with 128): a row with one key gets O = V's row, head_dim_v
 * wide (V's layout, not K's), and LSE = its score over head_dim columns of Q and K; the
 * emulation gives the same O rounded to the dtype. */
START_TEST(one_key_gives_o_equal_v_at_head_dim_v)
{
    fx_problem p = fx_test_problem(2, 3, 1, 4, 2, 192, false, FX_BF16);
    p.head_dim_v = 128;
    char why[256];
    ck_assert_msg(fx_problem_validate(&p, why, sizeof why) == 0, "%s", why);
    const size_t nq = fx_numel_q(&p), nk = fx_numel_kv(&p), nv = fx_numel_v(&p);
    float *q = fx_test_calloc(nq, sizeof(float)), *k = fx_test_calloc(nk, sizeof(float)),
          *v = fx_test_calloc(nv, sizeof(float));
    fx_fill(&p, FX_T_Q, q, nq);
    fx_fill(&p, FX_T_K, k, nk);
    fx_fill(&p, FX_T_V, v, nv);
    const fx_layout lq = fx_layout_q(&p), lk = fx_layout_kv(&p), lv = fx_layout_v(&p);
    double o[3 * 128], lse[3];
    float o_emu[3 * 128], lse_emu[3];
    for (int b = 0; b < p.batch; ++b)
        for (int h = 0; h < p.heads_q; ++h) {
            const int hk = h / (p.heads_q / p.heads_kv);
            fx_ref_forward_rows(&p, q, k, v, b, h, 0, p.seqlen_q, o, lse);
            fx_emu_forward_rows(&p, q, k, v, b, h, 0, p.seqlen_q, o_emu, lse_emu);
            for (int i = 0; i < p.seqlen_q; ++i) {
                double s = 0.0;
                for (int d = 0; d < p.head_dim; ++d)
                    s += (double)q[fx_offset(lq, b, i, h, d)] * k[fx_offset(lk, b, 0, hk, d)];
                ck_assert_double_eq_tol(lse[i], p.softmax_scale * s, 1e-12);
                for (int d = 0; d < 128; ++d) {
                    const float want = v[fx_offset(lv, b, 0, hk, d)];
                    ck_assert_double_eq(o[i * 128 + d], (double)want);
                    ck_assert_float_eq(o_emu[i * 128 + d], fx_round(p.dtype, want));
                }
            }
        }
    free(q);
    free(k);
    free(v);
}
END_TEST

START_TEST(equal_scores_give_the_mean_of_v)
{
    for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
        for (int causal = 0; causal <= 1; causal++) {
            fx_problem pr = problem(1, 9, 13, 2, 1, 32, causal);
            pr.dtype = (fx_dtype)dt;
            tensors t = make(pr);
            const fx_problem *p = &t.p;
            memset(t.q, 0, fx_numel_q(p) * sizeof(float));
            for (int h = 0; h < p->heads_q; h++) {
                slice s = forward_slice(&t, 0, h);
                for (int i = 0; i < p->seqlen_q; i++) {
                    int n = fx_keys_seen(p, i);
                    ck_assert_int_eq(n, causal ? i + 13 - 9 + 1 : 13);
                    ck_assert_double_eq_tol(s.lse[i], log((double)n), 1e-12);
                    ck_assert_double_eq_tol(s.lse_emu[i], log((double)n), 1e-6);
                    for (int d = 0; d < p->head_dim; d++) {
                        double mean = 0.0, mean_abs = 0.0;
                        for (int j = 0; j < n; j++) {
                            mean += t.v[fx_at_kv(p, 0, j, 0, d)];
                            mean_abs += fabs(t.v[fx_at_kv(p, 0, j, 0, d)]);
                        }
                        mean /= n;
                        mean_abs /= n;
                        ck_assert_double_eq_tol(s.o[(size_t)i * p->head_dim + d], mean, 1e-12);
                        /* The emulation rounds P = 1/n to the dtype (relative error at most
                         * u, the unit roundoff, on every term of the mean) and O once more
                         * (one ulp bounds that and the fp32 accumulation). */
                        ck_assert_double_le(fabs(s.o_emu[(size_t)i * p->head_dim + d] - mean),
                                            fx_slack(p->dtype, fabs(mean)) +
                                                fx_dtype_epsilon(p->dtype) * mean_abs);
                    }
                }
                free_slice(&s);
            }
            release(&t);
        }
    }
}
END_TEST

/* Causal with seqlen_q = 6 > seqlen_k = 2: rows 0..3 have i + 2 - 6 < 0 and see no
 * key. They get O = 0 and LSE = -inf, a zero dQ, and they add nothing to dK and dV:
 * the gradients equal those of the problem holding only rows 4 and 5. No NaN anywhere,
 * although the dO of the masked rows is huge. */
START_TEST(a_fully_masked_row_gives_zero_o_minus_inf_lse_and_zero_gradients)
{
    enum { SQ = 6, SK = 2, HQ = 4, HKV = 2, D = 16, FIRST_SEEN = 4 };
    tensors t = make(problem(1, SQ, SK, HQ, HKV, D, true));
    const fx_problem *p = &t.p;
    for (int i = 0; i < FIRST_SEEN; i++)
        for (int h = 0; h < HQ; h++)
            for (int d = 0; d < D; d++)
                t.dout[fx_at_q(p, 0, i, h, d)] = 1e4f;

    for (int h = 0; h < HQ; h++) {
        slice s = forward_slice(&t, 0, h);
        for (int i = 0; i < SQ; i++) {
            ck_assert_int_eq(fx_keys_seen(p, i), i < FIRST_SEEN ? 0 : i - FIRST_SEEN + 1);
            if (i >= FIRST_SEEN) {
                ck_assert_double_finite(s.lse[i]);
                continue;
            }
            ck_assert_double_infinite(s.lse[i]);
            ck_assert_double_lt(s.lse[i], 0);
            ck_assert_double_infinite(s.lse_emu[i]);
            ck_assert_double_lt(s.lse_emu[i], 0);
            for (int d = 0; d < D; d++) {
                ck_assert_double_eq(s.o[i * D + d], 0.0);
                ck_assert_float_eq(s.o_emu[i * D + d], 0.0f);
            }
        }
        free_slice(&s);
    }

    /* The same problem without the masked rows: rows 4, 5 become rows 0, 1, and with
     * seqlen_q = seqlen_k = 2 row i' sees keys <= i', as rows 4, 5 did. */
    tensors trimmed = make(problem(1, SQ - FIRST_SEEN, SK, HQ, HKV, D, true));
    size_t row_elems = (size_t)HQ * D;
    memcpy(trimmed.q, t.q + FIRST_SEEN * row_elems, (SQ - FIRST_SEEN) * row_elems * sizeof(float));
    memcpy(trimmed.dout, t.dout + FIRST_SEEN * row_elems,
           (SQ - FIRST_SEEN) * row_elems * sizeof(float));
    memcpy(trimmed.k, t.k, fx_numel_kv(p) * sizeof(float));
    memcpy(trimmed.v, t.v, fx_numel_kv(p) * sizeof(float));

    const int G = HQ / HKV;
    for (int hk = 0; hk < HKV; hk++) {
        group g = backward_group(&t, 0, hk), gt = backward_group(&trimmed, 0, hk);
        assert_no_nan_f64(g.dq, (size_t)G * SQ * D, "dQ");
        assert_no_nan_f64(g.dk, (size_t)SK * D, "dK");
        assert_no_nan_f64(g.dv, (size_t)SK * D, "dV");
        assert_no_nan_f32(g.dq_emu, (size_t)G * SQ * D, "emulated dQ");
        assert_no_nan_f32(g.dk_emu, (size_t)SK * D, "emulated dK");
        assert_no_nan_f32(g.dv_emu, (size_t)SK * D, "emulated dV");
        for (int gi = 0; gi < G; gi++) {
            for (int i = 0; i < SQ; i++) {
                for (int d = 0; d < D; d++) {
                    size_t e = ((size_t)gi * SQ + i) * D + d;
                    if (i < FIRST_SEEN) {
                        ck_assert_double_eq(g.dq[e], 0.0);
                        ck_assert_float_eq(g.dq_emu[e], 0.0f);
                    } else {
                        size_t et = ((size_t)gi * (SQ - FIRST_SEEN) + i - FIRST_SEEN) * D + d;
                        ck_assert_double_eq_tol(g.dq[e], gt.dq[et], 1e-12);
                        ck_assert_float_eq(g.dq_emu[e], gt.dq_emu[et]);
                    }
                }
            }
        }
        for (int e = 0; e < SK * D; e++) {
            ck_assert_double_eq_tol(g.dk[e], gt.dk[e], 1e-12);
            ck_assert_double_eq_tol(g.dv[e], gt.dv[e], 1e-12);
            ck_assert_float_eq(g.dk_emu[e], gt.dk_emu[e]);
            ck_assert_float_eq(g.dv_emu[e], gt.dv_emu[e]);
        }
        free_group(&g);
        free_group(&gt);
    }
    release(&trimmed);
    release(&t);
}
END_TEST

/* seqlen_q = seqlen_k = 1 (causal or not): P = [1], so O = V and LSE = the score; in
 * the backward dP - D = dO·v - dO·O = 0, so dQ = dK = 0 exactly, and dV is the sum of
 * dO over the query heads of the group. */
START_TEST(seqlen_one_gives_o_equal_v_and_dv_equal_the_sum_of_do)
{
    for (int causal = 0; causal <= 1; causal++) {
        tensors t = make(problem(2, 1, 1, 6, 2, 64, causal));
        const fx_problem *p = &t.p;
        const int G = 3, D = 64;
        for (int b = 0; b < p->batch; b++) {
            for (int h = 0; h < p->heads_q; h++) {
                slice s = forward_slice(&t, b, h);
                ck_assert_double_eq_tol(s.lse[0], score(&t, b, 0, h, 0), 1e-12);
                for (int d = 0; d < D; d++) {
                    ck_assert_double_eq(s.o[d], t.v[fx_at_kv(p, b, 0, kv_head(p, h), d)]);
                    ck_assert_float_eq(s.o_emu[d], t.v[fx_at_kv(p, b, 0, kv_head(p, h), d)]);
                }
                free_slice(&s);
            }
            for (int hk = 0; hk < p->heads_kv; hk++) {
                group g = backward_group(&t, b, hk);
                for (int d = 0; d < D; d++) {
                    double sum = 0.0;
                    float sum_f32 = 0.0f;
                    for (int gi = 0; gi < G; gi++) {
                        ck_assert_double_eq(g.dq[gi * D + d], 0.0);
                        ck_assert_float_eq(g.dq_emu[gi * D + d], 0.0f);
                        sum += t.dout[fx_at_q(p, b, 0, hk * G + gi, d)];
                        sum_f32 += t.dout[fx_at_q(p, b, 0, hk * G + gi, d)];
                    }
                    ck_assert_double_eq(g.dk[d], 0.0);
                    ck_assert_float_eq(g.dk_emu[d], 0.0f);
                    ck_assert_double_eq_tol(g.dv[d], sum, 1e-12);
                    ck_assert_float_eq(g.dv_emu[d], fx_round(p->dtype, sum_f32));
                }
                free_group(&g);
            }
        }
        release(&t);
    }
}
END_TEST

/* ---- gradients ---------------------------------------------------------------------- */

/* L = Σ O∘dO over every (b, h, i, d), O from the fp64 forward: the scalar whose gradient
 * the backward computes (dO is dL/dO). */
static double loss(const tensors *t)
{
    const fx_problem *p = &t->p;
    double L = 0.0;
    double *o = fx_test_calloc((size_t)p->seqlen_q * p->head_dim, sizeof(double));
    double *lse = fx_test_calloc((size_t)p->seqlen_q, sizeof(double));
    for (int b = 0; b < p->batch; b++) {
        for (int h = 0; h < p->heads_q; h++) {
            fx_ref_forward_rows(p, t->q, t->k, t->v, b, h, 0, p->seqlen_q, o, lse);
            for (int i = 0; i < p->seqlen_q; i++)
                for (int d = 0; d < p->head_dim; d++)
                    L += o[(size_t)i * p->head_dim + d] * t->dout[fx_at_q(p, b, i, h, d)];
        }
    }
    free(o);
    free(lse);
    return L;
}

/* Central difference (L(x + h) - L(x - h)) / (2h) of input element x[e], with the step
 * actually taken (x ± h rounded to float). */
static double central_difference(tensors *t, float *x, size_t e)
{
    const double step = 0x1p-10;
    float saved = x[e];
    float plus = (float)(saved + step), minus = (float)(saved - step);
    x[e] = plus;
    double L_plus = loss(t);
    x[e] = minus;
    double L_minus = loss(t);
    x[e] = saved;
    return (L_plus - L_minus) / ((double)plus - (double)minus);
}

/* Tolerance of the finite-difference check. The central difference's truncation error
 * is h²/6·|L'''| = 2^-20/6·|L'''| ≈ 1.6e-7·|L'''|; with unit-variance inputs, head_dim 8
 * and scale 1/sqrt(8), the logits are O(1) and |L'''| is O(1) to O(10): at most about
 * 2e-6 (measured: 1.9e-7). The rounding error of fp64 L (~1e-15·|L|, |L| ~ 10) divided
 * by 2h is ~1e-11. The gradients themselves are O(0.1 to 1), so a wrong term (no D, no
 * scale, a missing GQA head, a masked key let in) is off by 1e-2 or more. */
#define FD_TOLERANCE 2e-6

START_TEST(the_fp64_backward_matches_central_differences_with_gqa_and_causal)
{
    /* seqlen_q < seqlen_k (every row sees a prefix) and seqlen_q > seqlen_k (the first
     * rows see nothing); heads_q = 4 over heads_kv = 2: dK, dV sum two query heads. */
    const int shapes[2][2] = {{5, 7}, {7, 4}};
    for (int s = 0; s < 2; s++) {
        tensors t = make(problem(1, shapes[s][0], shapes[s][1], 4, 2, 8, true));
        const fx_problem *p = &t.p;
        const int G = p->heads_q / p->heads_kv, D = p->head_dim;
        double worst = 0.0;
        for (int hk = 0; hk < p->heads_kv; hk++) {
            group g = backward_group(&t, 0, hk);
            for (int gi = 0; gi < G; gi++) {
                for (int i = 0; i < p->seqlen_q; i++) {
                    for (int d = 0; d < D; d++) {
                        double fd = central_difference(&t, t.q, fx_at_q(p, 0, i, hk * G + gi, d));
                        double an = g.dq[((size_t)gi * p->seqlen_q + i) * D + d];
                        ck_assert_msg(fabs(fd - an) < FD_TOLERANCE,
                                      "dQ[h=%d i=%d d=%d]: backward %.9f, finite difference %.9f",
                                      hk * G + gi, i, d, an, fd);
                        worst = fmax(worst, fabs(fd - an));
                    }
                }
            }
            for (int j = 0; j < p->seqlen_k; j++) {
                for (int d = 0; d < D; d++) {
                    double fd_k = central_difference(&t, t.k, fx_at_kv(p, 0, j, hk, d));
                    double fd_v = central_difference(&t, t.v, fx_at_kv(p, 0, j, hk, d));
                    double an_k = g.dk[(size_t)j * D + d], an_v = g.dv[(size_t)j * D + d];
                    ck_assert_msg(fabs(fd_k - an_k) < FD_TOLERANCE,
                                  "dK[hk=%d j=%d d=%d]: backward %.9f, finite difference %.9f", hk,
                                  j, d, an_k, fd_k);
                    ck_assert_msg(fabs(fd_v - an_v) < FD_TOLERANCE,
                                  "dV[hk=%d j=%d d=%d]: backward %.9f, finite difference %.9f", hk,
                                  j, d, an_v, fd_v);
                    worst = fmax(worst, fmax(fabs(fd_k - an_k), fabs(fd_v - an_v)));
                }
            }
            free_group(&g);
        }
        /* The gradients are not trivially zero: the check above compared real numbers. */
        ck_assert_double_gt(worst, 0.0);
        release(&t);
    }
}
END_TEST

/* ---- causal alignment --------------------------------------------------------------- */

/* Row i of a causal problem must equal the non-causal attention of that row over keys
 * 0 .. i + seqlen_k - seqlen_q alone: the mask is bottom-right aligned and removes
 * exactly the later keys. Checked on every row, fp64 and emulated. */
static void check_alignment(int seqlen_q, int seqlen_k)
{
    tensors t = make(problem(2, seqlen_q, seqlen_k, 4, 2, 24, true));
    const fx_problem *p = &t.p;
    const int D = p->head_dim;
    for (int b = 0; b < p->batch; b++) {
        for (int h = 0; h < p->heads_q; h++) {
            slice s = forward_slice(&t, b, h);
            for (int i = 0; i < seqlen_q; i++) {
                int last = fx_causal_last_key(seqlen_q, seqlen_k, i);
                int n = last < 0 ? 0 : (last + 1 > seqlen_k ? seqlen_k : last + 1);
                ck_assert_int_eq(fx_keys_seen(p, i), n);
                if (n == 0) {
                    ck_assert_double_infinite(s.lse[i]);
                    ck_assert_double_infinite(s.lse_emu[i]);
                    for (int d = 0; d < D; d++) {
                        ck_assert_double_eq(s.o[i * D + d], 0.0);
                        ck_assert_float_eq(s.o_emu[i * D + d], 0.0f);
                    }
                    continue;
                }
                /* One row, one head, keys 0 .. n-1, no mask. */
                tensors kept = make(problem(1, 1, n, 1, 1, D, false));
                for (int d = 0; d < D; d++)
                    kept.q[d] = t.q[fx_at_q(p, b, i, h, d)];
                for (int j = 0; j < n; j++) {
                    for (int d = 0; d < D; d++) {
                        kept.k[(size_t)j * D + d] = t.k[fx_at_kv(p, b, j, kv_head(p, h), d)];
                        kept.v[(size_t)j * D + d] = t.v[fx_at_kv(p, b, j, kv_head(p, h), d)];
                    }
                }
                slice r = forward_slice(&kept, 0, 0);
                ck_assert_double_eq_tol(s.lse[i], r.lse[0], 1e-12);
                ck_assert_float_eq(s.lse_emu[i], r.lse_emu[0]);
                for (int d = 0; d < D; d++) {
                    ck_assert_double_eq_tol(s.o[i * D + d], r.o[d], 1e-12);
                    ck_assert_float_eq(s.o_emu[i * D + d], r.o_emu[d]);
                }
                free_slice(&r);
                release(&kept);
            }
            free_slice(&s);
        }
    }
    release(&t);
}

START_TEST(causal_row_i_sees_exactly_keys_up_to_i_plus_seqlen_k_minus_seqlen_q_when_sq_lt_sk)
{
    check_alignment(5, 11);
}
END_TEST

START_TEST(causal_row_i_sees_exactly_keys_up_to_i_plus_seqlen_k_minus_seqlen_q_when_sq_gt_sk)
{
    check_alignment(11, 5);
}
END_TEST

START_TEST(causal_row_i_sees_exactly_keys_up_to_i_when_sq_eq_sk)
{
    check_alignment(7, 7);
}
END_TEST

/* ---- emulation ---------------------------------------------------------------------- */

/* The emulation against fp64, in ulps of the dtype at the reference's largest
 * magnitude (fx_slack). O is off by at most half an ulp from its final rounding plus
 * what the rounding of the normalized P adds (relative error u on each P_j, averaging
 * out over many keys, not over few): measured ≤ 1.04 ulps on the cases below, so two
 * ulps bound it. The gradients sum many
 * products of dS rounded with relative error u: measured ≤ 1.1 ulps here and up to 2.2 on
 * other seeds; 4 bounds them. A stage error of a few ulps is what the pass rule (2x this
 * error + 1 ulp) accepts, so an emulation off by more would make the rule useless.
 * The gradients under large-magnitude logits are left out: with P nearly one-hot,
 * dK_j = scale·Σ_i dS_ij q_i cancels, and its error scales with the terms, not the sum.
 * LSE is fp32: within FX_LSE_REL_SLACK relative of the fp64 LSE. */
#define EMU_MAX_ULPS_O 2.0
#define EMU_MAX_ULPS_GRAD 4.0

static double ulps(fx_err e, fx_dtype dt)
{
    return e.max_abs / fx_slack(dt, e.ref_max);
}

START_TEST(the_emulation_lands_within_a_few_dtype_ulps_of_fp64)
{
    const int shapes[2][6] = {/* sq, sk, hq, hkv, d */ {128, 128, 2, 1, 64}, {150, 100, 2, 2, 128}};
    for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
        for (int dist = 0; dist < FX_DIST_COUNT; dist++) {
            for (int causal = 0; causal <= 1; causal++) {
                for (int s = 0; s < 2; s++) {
                    fx_problem pr = problem(1, shapes[s][0], shapes[s][1], shapes[s][2],
                                            shapes[s][3], shapes[s][4], causal);
                    pr.dtype = (fx_dtype)dt;
                    pr.dist = (fx_dist)dist;
                    tensors t = make(pr);
                    const fx_problem *p = &t.p;
                    char desc[160];
                    fx_problem_format(p, desc, sizeof desc);

                    slice sl = forward_slice(&t, 0, p->heads_q - 1);
                    size_t n_o = (size_t)p->seqlen_q * p->head_dim;
                    fx_err e_o = fx_compare_f64(sl.o_emu, sl.o, n_o);
                    ck_assert_msg(e_o.nan_count == 0 && ulps(e_o, p->dtype) <= EMU_MAX_ULPS_O,
                                  "%s: O off by %.2f ulps", desc, ulps(e_o, p->dtype));
                    for (int i = 0; i < p->seqlen_q; i++) {
                        if (isinf(sl.lse[i])) /* a row that sees no key: -inf, exactly */
                            ck_assert_double_eq(sl.lse_emu[i], sl.lse[i]);
                        else
                            ck_assert_msg(fabs(sl.lse_emu[i] - sl.lse[i]) <=
                                              FX_LSE_REL_SLACK * fmax(1.0, fabs(sl.lse[i])),
                                          "%s: LSE[%d] %.9g vs %.9g", desc, i, sl.lse_emu[i],
                                          sl.lse[i]);
                    }
                    free_slice(&sl);

                    if (p->dist != FX_DIST_LARGE_LOGITS) {
                        group g = backward_group(&t, 0, p->heads_kv - 1);
                        size_t G = (size_t)(p->heads_q / p->heads_kv);
                        size_t nq = G * p->seqlen_q * p->head_dim,
                               nk = (size_t)p->seqlen_k * p->head_dim;
                        fx_err e_dq = fx_compare_f64(g.dq_emu, g.dq, nq);
                        fx_err e_dk = fx_compare_f64(g.dk_emu, g.dk, nk);
                        fx_err e_dv = fx_compare_f64(g.dv_emu, g.dv, nk);
                        ck_assert_msg(ulps(e_dq, p->dtype) <= EMU_MAX_ULPS_GRAD,
                                      "%s: dQ off by %.2f ulps", desc, ulps(e_dq, p->dtype));
                        ck_assert_msg(ulps(e_dk, p->dtype) <= EMU_MAX_ULPS_GRAD,
                                      "%s: dK off by %.2f ulps", desc, ulps(e_dk, p->dtype));
                        ck_assert_msg(ulps(e_dv, p->dtype) <= EMU_MAX_ULPS_GRAD,
                                      "%s: dV off by %.2f ulps", desc, ulps(e_dv, p->dtype));
                        ck_assert(e_dq.nan_count + e_dk.nan_count + e_dv.nan_count == 0);
                        /* And not trivially: the emulation does round (it is not fp64). */
                        ck_assert_double_gt(e_dq.max_abs, 0.0);
                        free_group(&g);
                    }
                    release(&t);
                }
            }
        }
    }
}
END_TEST

/* The emulation rounds what it claims to: its O and gradients are values of the dtype. */
START_TEST(the_emulation_outputs_are_values_of_the_dtype)
{
    for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
        fx_problem pr = problem(1, 33, 47, 4, 1, 40, true);
        pr.dtype = (fx_dtype)dt;
        tensors t = make(pr);
        const fx_problem *p = &t.p;
        slice s = forward_slice(&t, 0, 2);
        for (int e = 0; e < p->seqlen_q * p->head_dim; e++)
            ck_assert_float_eq(s.o_emu[e], fx_round(p->dtype, s.o_emu[e]));
        group g = backward_group(&t, 0, 0);
        for (int e = 0; e < 4 * p->seqlen_q * p->head_dim; e++)
            ck_assert_float_eq(g.dq_emu[e], fx_round(p->dtype, g.dq_emu[e]));
        for (int e = 0; e < p->seqlen_k * p->head_dim; e++) {
            ck_assert_float_eq(g.dk_emu[e], fx_round(p->dtype, g.dk_emu[e]));
            ck_assert_float_eq(g.dv_emu[e], fx_round(p->dtype, g.dv_emu[e]));
        }
        free_group(&g);
        free_slice(&s);
        release(&t);
    }
}
END_TEST

/* The emulation's rounding, step by step, on one query and two keys whose arithmetic is
 * exact in fp32 except where the emulation says it rounds: q = e0, k0 = 0, k1 = a·e0,
 * v0 = 0, v1 = a row of dtype values, dO = c·e0. Then S = (0, scale·a), and
 *   forward:  P_j = exp(S_j − m) / l in fp32, l = Σ exp(S_j − m),
 *             O = round(round(P1)·v1), LSE = m + log l;
 *   backward: P_j = exp(S_j − LSE), D = dO·O = c·O[0], dP_j = c·v_j[0],
 *             dS_j = round(P_j (dP_j − D)), dV_j = round(round(P_j)·dO),
 *             dK_j = round(scale·dS_j·q), dQ = round(scale·dS_1·k1).
 * Products of two dtype values are exact in fp32 (at most 2·11 significant bits), so the
 * formulas below fix the result bit for bit. Over a few values of a, skipping any one
 * rounding changes some output: the test also checks that it would notice. */
START_TEST(the_emulation_rounds_p_and_ds_to_the_dtype_before_the_gemms_that_read_them)
{
    enum { D = 8 };
    const float a_values[] = {-1.0f, -2.5f, 0.75f, 3.0f, -0.3125f, 1.625f};
    const float c = 3.0f;
    for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
        int p_rounding_shows = 0, ds_rounding_shows = 0;
        for (size_t ai = 0; ai < sizeof a_values / sizeof a_values[0]; ai++) {
            fx_problem pr = problem(1, 1, 2, 1, 1, D, false);
            pr.dtype = (fx_dtype)dt;
            tensors t = make(pr);
            const fx_problem *p = &t.p;
            const fx_dtype T = p->dtype;
            const float a = a_values[ai], scale = (float)p->softmax_scale;
            memset(t.q, 0, D * sizeof(float));
            memset(t.k, 0, 2 * D * sizeof(float));
            memset(t.v, 0, 2 * D * sizeof(float));
            memset(t.dout, 0, D * sizeof(float));
            t.q[0] = 1.0f;
            t.k[D] = a;
            for (int d = 0; d < D; d++)
                t.v[D + d] = fx_round(T, 1.0f + 0.37f * (float)d);
            t.dout[0] = c;

            /* Forward. */
            const float s1 = scale * a, m = fmaxf(0.0f, s1);
            const float P[2] = {expf(0.0f - m), expf(s1 - m)};
            const float l = P[0] + P[1];
            slice sl = forward_slice(&t, 0, 0);
            ck_assert_float_eq(sl.lse_emu[0], m + logf(l));
            for (int d = 0; d < D; d++) {
                float expected = fx_round(T, fx_round(T, P[1] / l) * t.v[D + d]);
                ck_assert_float_eq(sl.o_emu[d], expected);
                p_rounding_shows += expected != fx_round(T, P[1] / l * t.v[D + d]);
            }

            /* Backward. */
            const float lse = sl.lse_emu[0], Dr = c * sl.o_emu[0];
            float dS[2], dS_unrounded[2], Pb[2];
            for (int j = 0; j < 2; j++) {
                Pb[j] = expf((j ? s1 : 0.0f) - lse);
                dS_unrounded[j] = Pb[j] * (c * t.v[j * D] - Dr);
                dS[j] = fx_round(T, dS_unrounded[j]);
            }
            group g = backward_group(&t, 0, 0);
            for (int j = 0; j < 2; j++) {
                ck_assert_float_eq(g.dv_emu[j * D], fx_round(T, fx_round(T, Pb[j]) * c));
                ck_assert_float_eq(g.dk_emu[j * D], fx_round(T, scale * dS[j]));
                p_rounding_shows += g.dv_emu[j * D] != fx_round(T, Pb[j] * c);
                ds_rounding_shows += g.dk_emu[j * D] != fx_round(T, scale * dS_unrounded[j]);
                for (int d = 1; d < D; d++) {
                    ck_assert_float_eq(g.dv_emu[j * D + d], 0.0f);
                    ck_assert_float_eq(g.dk_emu[j * D + d], 0.0f);
                }
            }
            ck_assert_float_eq(g.dq_emu[0], fx_round(T, scale * (dS[1] * a)));
            ds_rounding_shows += g.dq_emu[0] != fx_round(T, scale * (dS_unrounded[1] * a));
            free_group(&g);
            free_slice(&sl);
            release(&t);
        }
        ck_assert_int_gt(p_rounding_shows, 0);
        ck_assert_int_gt(ds_rounding_shows, 0);
    }
}
END_TEST

/* A sampled row range gives the same rows as the whole slice: rows are independent. */
START_TEST(a_sample_of_rows_equals_the_same_rows_of_the_whole_slice)
{
    tensors t = make(problem(2, 40, 30, 2, 2, 16, true));
    const fx_problem *p = &t.p;
    slice whole = forward_slice(&t, 1, 1);
    double o[7 * 16], lse[7];
    float o_emu[7 * 16], lse_emu[7];
    fx_ref_forward_rows(p, t.q, t.k, t.v, 1, 1, 20, 27, o, lse);
    fx_emu_forward_rows(p, t.q, t.k, t.v, 1, 1, 20, 27, o_emu, lse_emu);
    for (int r = 0; r < 7; r++) {
        ck_assert_double_eq(lse[r], whole.lse[20 + r]);
        ck_assert_float_eq(lse_emu[r], whole.lse_emu[20 + r]);
        for (int d = 0; d < 16; d++) {
            ck_assert_double_eq(o[r * 16 + d], whole.o[(20 + r) * 16 + d]);
            ck_assert_float_eq(o_emu[r * 16 + d], whole.o_emu[(20 + r) * 16 + d]);
        }
    }
    free_slice(&whole);
    release(&t);
}
END_TEST

static Suite *reference_suite(void)
{
    Suite *s = suite_create("reference");

    TCase *closed = tcase_create("closed_forms");
    tcase_add_test(closed, one_key_gives_o_equal_v_and_lse_equal_its_score);
    tcase_add_test(closed, equal_scores_give_the_mean_of_v);
    tcase_add_test(closed, one_key_gives_o_equal_v_at_head_dim_v);
    tcase_add_test(closed, a_fully_masked_row_gives_zero_o_minus_inf_lse_and_zero_gradients);
    tcase_add_test(closed, seqlen_one_gives_o_equal_v_and_dv_equal_the_sum_of_do);
    tcase_add_test(closed, a_sample_of_rows_equals_the_same_rows_of_the_whole_slice);
    suite_add_tcase(s, closed);

    TCase *grad = tcase_create("gradients");
    tcase_set_timeout(grad, 120);
    tcase_add_test(grad, the_fp64_backward_matches_central_differences_with_gqa_and_causal);
    suite_add_tcase(s, grad);

    TCase *causal = tcase_create("causal_alignment");
    tcase_add_test(
        causal, causal_row_i_sees_exactly_keys_up_to_i_plus_seqlen_k_minus_seqlen_q_when_sq_lt_sk);
    tcase_add_test(
        causal, causal_row_i_sees_exactly_keys_up_to_i_plus_seqlen_k_minus_seqlen_q_when_sq_gt_sk);
    tcase_add_test(causal, causal_row_i_sees_exactly_keys_up_to_i_when_sq_eq_sk);
    suite_add_tcase(s, causal);

    TCase *emu = tcase_create("emulation");
    tcase_set_timeout(emu, 300);
    tcase_add_test(emu, the_emulation_lands_within_a_few_dtype_ulps_of_fp64);
    tcase_add_test(emu, the_emulation_outputs_are_values_of_the_dtype);
    tcase_add_test(emu, the_emulation_rounds_p_and_ds_to_the_dtype_before_the_gemms_that_read_them);
    suite_add_tcase(s, emu);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(reference_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
