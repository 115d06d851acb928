/*
 * fx_model_check.c — what the CPU-model suites share (fx_model_check.h): a stage's CPU
 * model run on seeded inputs and held to the fp64 reference under the pass rule.
 */
#include "fx_model_check.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_check.h"
#include "fx_host.h"
#include "fx_reference.h"

fx_problem fx_test_problem(int batch, int seqlen_q, int seqlen_k, int heads_q, int heads_kv,
                           int head_dim, bool causal, fx_dtype dtype)
{
    fx_problem p = fx_problem_default();
    p.batch = batch;
    p.seqlen_q = seqlen_q;
    p.seqlen_k = seqlen_k;
    p.heads_q = heads_q;
    p.heads_kv = heads_kv;
    p.head_dim = head_dim;
    p.causal = causal;
    p.dtype = dtype;
    p.softmax_scale = 0.0; /* 1/sqrt(head_dim), filled by fx_problem_validate */
    p.seed = 20220527;     /* fixed per suite: a failure is reproducible */
    char why[256];
    ck_assert_msg(fx_problem_validate(&p, why, sizeof why) == 0, "%s", why);
    return p;
}

void *fx_test_calloc(size_t n, size_t size)
{
    void *ptr = calloc(n ? n : 1, size);
    ck_assert_ptr_nonnull(ptr);
    return ptr;
}

fx_model_run fx_run_model(const fx_cpu_model *model, fx_problem p, bool backward)
{
    const size_t nq = fx_numel_q(&p), nkv = fx_numel_kv(&p);
    fx_model_run r = {.p = p};
    r.q = fx_test_calloc(nq, sizeof(float));
    r.k = fx_test_calloc(nkv, sizeof(float));
    r.v = fx_test_calloc(nkv, sizeof(float));
    r.dout = fx_test_calloc(nq, sizeof(float));
    fx_fill(&p, FX_T_Q, r.q, nq);
    fx_fill(&p, FX_T_K, r.k, nkv);
    fx_fill(&p, FX_T_V, r.v, nkv);
    fx_fill(&p, FX_T_DO, r.dout, nq);
    r.o = fx_test_calloc(nq, sizeof(float));
    r.lse = fx_test_calloc(fx_numel_lse(&p), sizeof(float));
    model->forward(&r.p, r.q, r.k, r.v, r.o, r.lse);
    if (backward) {
        r.dq = fx_test_calloc(nq, sizeof(float));
        r.dk = fx_test_calloc(nkv, sizeof(float));
        r.dv = fx_test_calloc(nkv, sizeof(float));
        model->backward(&r.p, r.q, r.k, r.v, r.o, r.lse, r.dout, r.dq, r.dk, r.dv);
    }
    return r;
}

void fx_model_release(fx_model_run *r)
{
    free(r->q);
    free(r->k);
    free(r->v);
    free(r->dout);
    free(r->o);
    free(r->lse);
    free(r->dq);
    free(r->dk);
    free(r->dv);
}

size_t fx_at_q(const fx_problem *p, int b, int i, int h, int d)
{
    return fx_offset(fx_layout_q(p), b, i, h, d);
}
size_t fx_at_kv(const fx_problem *p, int b, int j, int h, int d)
{
    return fx_offset(fx_layout_kv(p), b, j, h, d);
}
size_t fx_at_lse(const fx_problem *p, int b, int h, int i)
{
    return ((size_t)b * p->heads_q + h) * p->seqlen_q + i;
}

/* One tensor's verdict: the model's and the emulation's error against fp64. */
typedef struct verdict {
    fx_err_acc model, emu;
} verdict;

static void verdict_init(verdict *v)
{
    fx_err_acc_init(&v->model);
    fx_err_acc_init(&v->emu);
}

static void assert_pass(const verdict *v, const fx_problem *p, const char *what, bool is_lse)
{
    const fx_err model = fx_err_acc_result(&v->model), emu = fx_err_acc_result(&v->emu);
    double bound;
    const bool ok =
        is_lse ? fx_pass_lse(model, emu, &bound) : fx_pass(model, emu, p->dtype, &bound);
    char shape[160], em[96], ee[96];
    fx_problem_format(p, shape, sizeof shape);
    fx_err_format(model, em, sizeof em);
    fx_err_format(emu, ee, sizeof ee);
    ck_assert_msg(ok, "%s: %s: model %s (inf mismatches %zu), emulation %s, bound %.2e", shape,
                  what, em, model.inf_mismatch, ee, bound);
}

/* The model's forward (and backward) against fp64, every row of every slice. */
void fx_model_check_against_reference(const fx_cpu_model *model, fx_problem p, bool backward)
{
    fx_model_run r = fx_run_model(model, p, backward);
    const int sq = p.seqlen_q, sk = p.seqlen_k, d = p.head_dim;
    const int G = p.heads_q / p.heads_kv;

    verdict o, lse;
    verdict_init(&o);
    verdict_init(&lse);
    double *o_ref = fx_test_calloc((size_t)sq * d, sizeof(double)),
           *lse_ref = fx_test_calloc(sq, sizeof(double));
    float *o_emu = fx_test_calloc((size_t)sq * d, sizeof(float)),
          *lse_emu = fx_test_calloc(sq, sizeof(float));
    for (int b = 0; b < p.batch; ++b)
        for (int h = 0; h < p.heads_q; ++h) {
            fx_ref_forward_rows(&p, r.q, r.k, r.v, b, h, 0, sq, o_ref, lse_ref);
            fx_emu_forward_rows(&p, r.q, r.k, r.v, b, h, 0, sq, o_emu, lse_emu);
            for (int i = 0; i < sq; ++i) {
                for (int c = 0; c < d; ++c) {
                    fx_err_acc_add(&o.model, r.o[fx_at_q(&p, b, i, h, c)],
                                   o_ref[(size_t)i * d + c]);
                    fx_err_acc_add(&o.emu, o_emu[(size_t)i * d + c], o_ref[(size_t)i * d + c]);
                }
                fx_err_acc_add(&lse.model, r.lse[fx_at_lse(&p, b, h, i)], lse_ref[i]);
                fx_err_acc_add(&lse.emu, lse_emu[i], lse_ref[i]);
            }
        }
    assert_pass(&o, &p, "O", false);
    assert_pass(&lse, &p, "LSE", true);
    free(o_ref);
    free(lse_ref);
    free(o_emu);
    free(lse_emu);

    if (backward) {
        verdict dq, dk, dv;
        verdict_init(&dq);
        verdict_init(&dk);
        verdict_init(&dv);
        const size_t nq = (size_t)G * sq * d, nk = (size_t)sk * d;
        double *dq_ref = fx_test_calloc(nq, sizeof(double)),
               *dk_ref = fx_test_calloc(nk, sizeof(double)),
               *dv_ref = fx_test_calloc(nk, sizeof(double));
        float *dq_emu = fx_test_calloc(nq, sizeof(float)),
              *dk_emu = fx_test_calloc(nk, sizeof(float)),
              *dv_emu = fx_test_calloc(nk, sizeof(float));
        for (int b = 0; b < p.batch; ++b)
            for (int hk = 0; hk < p.heads_kv; ++hk) {
                fx_ref_backward_group(&p, r.q, r.k, r.v, r.dout, b, hk, dq_ref, dk_ref, dv_ref);
                fx_emu_backward_group(&p, r.q, r.k, r.v, r.dout, b, hk, dq_emu, dk_emu, dv_emu);
                for (int g = 0; g < G; ++g)
                    for (int i = 0; i < sq; ++i)
                        for (int c = 0; c < d; ++c) {
                            const size_t e = ((size_t)g * sq + i) * d + c;
                            fx_err_acc_add(&dq.model, r.dq[fx_at_q(&p, b, i, hk * G + g, c)],
                                           dq_ref[e]);
                            fx_err_acc_add(&dq.emu, dq_emu[e], dq_ref[e]);
                        }
                for (int j = 0; j < sk; ++j)
                    for (int c = 0; c < d; ++c) {
                        const size_t e = (size_t)j * d + c;
                        fx_err_acc_add(&dk.model, r.dk[fx_at_kv(&p, b, j, hk, c)], dk_ref[e]);
                        fx_err_acc_add(&dk.emu, dk_emu[e], dk_ref[e]);
                        fx_err_acc_add(&dv.model, r.dv[fx_at_kv(&p, b, j, hk, c)], dv_ref[e]);
                        fx_err_acc_add(&dv.emu, dv_emu[e], dv_ref[e]);
                    }
            }
        assert_pass(&dq, &p, "dQ", false);
        assert_pass(&dk, &p, "dK", false);
        assert_pass(&dv, &p, "dV", false);
        free(dq_ref);
        free(dk_ref);
        free(dv_ref);
        free(dq_emu);
        free(dk_emu);
        free(dv_emu);
    }
    fx_model_release(&r);
}

/* ---- the masked-row checks (fx_model_check.h) ---- */

void fx_model_check_unseen_rows(const fx_cpu_model *model)
{
    fx_problem p = fx_test_problem(1, 203, 70, 2, 2, 64, true, FX_BF16);
    fx_model_run r = fx_run_model(model, p, true);
    const int first_seeing_row = p.seqlen_q - p.seqlen_k;
    for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.seqlen_q; ++i) {
            const float lse = r.lse[fx_at_lse(&p, 0, h, i)];
            if (i < first_seeing_row) {
                ck_assert_msg(lse == -INFINITY, "row %d: LSE %g, expected -inf", i, lse);
                for (int c = 0; c < p.head_dim; ++c) {
                    ck_assert_float_eq(r.o[fx_at_q(&p, 0, i, h, c)], 0.0f);
                    ck_assert_float_eq(r.dq[fx_at_q(&p, 0, i, h, c)], 0.0f);
                }
            } else {
                ck_assert_msg(isfinite(lse), "row %d sees a key: LSE %g", i, lse);
            }
            for (int c = 0; c < p.head_dim; ++c) {
                ck_assert(!isnan(r.o[fx_at_q(&p, 0, i, h, c)]));
                ck_assert(!isnan(r.dq[fx_at_q(&p, 0, i, h, c)]));
            }
        }
    for (size_t e = 0; e < fx_numel_kv(&p); ++e) {
        ck_assert(!isnan(r.dk[e]));
        ck_assert(!isnan(r.dv[e]));
    }
    fx_model_release(&r);
}

void fx_model_check_row0_sees_key0(const fx_cpu_model *model)
{
    fx_problem p = fx_test_problem(1, 200, 200, 1, 1, 64, true, FX_BF16);
    fx_model_run r = fx_run_model(model, p, false);
    for (int c = 0; c < p.head_dim; ++c)
        ck_assert_float_eq(r.o[fx_at_q(&p, 0, 0, 0, c)], r.v[fx_at_kv(&p, 0, 0, 0, c)]);
    double s = 0.0;
    for (int c = 0; c < p.head_dim; ++c)
        s += (double)r.q[fx_at_q(&p, 0, 0, 0, c)] * r.k[fx_at_kv(&p, 0, 0, 0, c)];
    s *= p.softmax_scale;
    ck_assert_double_eq_tol(r.lse[fx_at_lse(&p, 0, 0, 0)], s, 1e-5 * fmax(1.0, fabs(s)));
    fx_model_release(&r);
}

void fx_model_check_single_key(const fx_cpu_model *model, int head_dim)
{
    fx_problem p = fx_test_problem(1, 1, 1, 1, 1, head_dim, false, FX_FP16);
    p.dist = FX_DIST_LARGE_LOGITS;
    fx_model_run r = fx_run_model(model, p, true);
    for (int c = 0; c < p.head_dim; ++c) {
        ck_assert_float_eq(r.o[c], r.v[c]);
        ck_assert_float_eq(r.dq[c], 0.0f);
        ck_assert_float_eq(r.dk[c], 0.0f);
        ck_assert_float_eq(r.dv[c], r.dout[c]);
    }
    fx_model_release(&r);
}

int fx_test_parse_args(const char *line, fx_options *o, char *why, size_t why_len)
{
    enum { kMaxArgs = 64 };
    static char buf[16384];
    char *argv[kMaxArgs];
    int argc = 0;
    argv[argc++] = "stage_test";
    snprintf(buf, sizeof buf, "%s", line);
    for (char *word = strtok(buf, " "); word && argc < kMaxArgs; word = strtok(NULL, " "))
        argv[argc++] = word;
    fx_options_default(o);
    return fx_options_parse(argc, argv, o, why, why_len);
}
