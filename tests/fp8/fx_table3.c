/*
 * fx_table3.c — the FA3 paper's Table 3 on the CPU (fx_table3.h says what is measured).
 */
#include "fx_table3.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_check.h"
#include "fx_draw.h"
#include "fx_fp8.h"
#include "fx_fp8_model.h"
#include "fx_host.h"
#include "fx_reference.h"

#ifndef _OPENMP
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

const char *fx_table3_name(fx_table3_method m)
{
    static const char *const names[FX_T3_COUNT] = {
        "fp16 standard attention", "fp16 FlashAttention-2", "e4m3 per-tensor (baseline)",
        "e4m3 per-head",           "e4m3 per-block",        "e4m3 incoherent, per-tensor",
        "e4m3 incoherent + block",
    };
    return m < FX_T3_COUNT ? names[m] : "?";
}

double fx_table3_paper(fx_table3_method m)
{
    /* Table 3: fp16 baseline / FA2 / FA3; fp8 baseline / FA3 / no block quant / no
     * incoherent processing (shared/anchors/FA3_PAPER.md). */
    switch (m) {
    case FX_T3_FP16_STANDARD: return 3.2e-4;
    case FX_T3_FP16_FA2: return 1.9e-4;
    case FX_T3_FP8_PER_TENSOR: return 2.4e-2;
    case FX_T3_FP8_BLOCK: return 2.4e-2;
    case FX_T3_FP8_INCOHERENT: return 9.3e-3;
    case FX_T3_FP8_BOTH: return 9.1e-3;
    default: return NAN;
    }
}

static void *xcalloc(size_t n, size_t size)
{
    void *ptr = calloc(n ? n : 1, size);
    if (!ptr) {
        fprintf(stderr, "fx_table3: out of host memory\n");
        abort();
    }
    return ptr;
}

/* fp64 attention of every (batch, head) slice: o_ref [batch, seqlen, heads, head_dim]. */
static void reference(const fx_problem *p, const float *q, const float *k, const float *v,
                      double *o_ref)
{
    const int sq = p->seqlen_q, d = p->head_dim;
    double *slice = xcalloc((size_t)sq * d, sizeof(double));
    double *lse = xcalloc((size_t)sq, sizeof(double));
    for (int b = 0; b < p->batch; ++b)
        for (int h = 0; h < p->heads_q; ++h) {
            fx_ref_forward_rows(p, q, k, v, b, h, 0, sq, slice, lse); /* OpenMP inside */
            for (int i = 0; i < sq; ++i)
                memcpy(o_ref + fx_offset(fx_layout_q(p), b, i, h, 0), slice + (size_t)i * d,
                       (size_t)d * sizeof(double));
        }
    free(slice);
    free(lse);
}

static double rmse(const float *o, const double *o_ref, size_t n)
{
    fx_err_acc acc;
    fx_err_acc_init(&acc);
    for (size_t e = 0; e < n; ++e)
        fx_err_acc_add(&acc, o[e], o_ref[e]);
    const fx_err err = fx_err_acc_result(&acc);
    return err.nan_count ? NAN : err.rmse;
}

/* Standard attention in fp16, every slice (fx_emu_forward_rows: P normalised in fp32, then
 * rounded to fp16 before PV; O in fp16). */
static void standard_fp16(const fx_problem *p, const float *q, const float *k, const float *v,
                          float *o)
{
    const int sq = p->seqlen_q, d = p->head_dim;
    float *slice = xcalloc((size_t)sq * d, sizeof(float)), *lse = xcalloc(sq, sizeof(float));
    for (int b = 0; b < p->batch; ++b)
        for (int h = 0; h < p->heads_q; ++h) {
            fx_emu_forward_rows(p, q, k, v, b, h, 0, sq, slice, lse);
            for (int i = 0; i < sq; ++i)
                memcpy(o + fx_offset(fx_layout_q(p), b, i, h, 0), slice + (size_t)i * d,
                       (size_t)d * sizeof(float));
        }
    free(slice);
    free(lse);
}

void fx_table3_run(const fx_table3_setup *s, const fx_cpu_model *fa2_fp16, bool dequant_reference,
                   fx_table3_result *out)
{
    fx_problem p = fx_problem_default();
    p.batch = s->batch;
    p.seqlen_q = p.seqlen_k = s->seqlen;
    p.heads_q = p.heads_kv = s->heads;
    p.head_dim = s->head_dim;
    p.causal = false;
    p.dtype = FX_FP16;
    p.softmax_scale = 1.0 / sqrt((double)s->head_dim);
    p.seed = s->seed;
    p.dist = FX_DIST_OUTLIERS;
    memset(out, 0, sizeof *out);

    /* The inputs in fp32, as drawn (fx_draw: double, rounded once to float). */
    const size_t n = fx_numel_q(&p);
    float *q = xcalloc(n, sizeof(float)), *k = xcalloc(n, sizeof(float));
    float *v = xcalloc(n, sizeof(float)), *o = xcalloc(n, sizeof(float));
    float *lse = xcalloc(fx_numel_lse(&p), sizeof(float));
#pragma omp parallel for schedule(static)
    for (long long e = 0; e < (long long)n; ++e) {
        q[e] = (float)fx_draw(&p, FX_T_Q, (uint64_t)e);
        k[e] = (float)fx_draw(&p, FX_T_K, (uint64_t)e);
        v[e] = (float)fx_draw(&p, FX_T_V, (uint64_t)e);
    }
    double *o_ref = xcalloc(n, sizeof(double)), *o_own = xcalloc(n, sizeof(double));
    reference(&p, q, k, v, o_ref);
    double sum_sq = 0.0;
    for (size_t e = 0; e < n; ++e)
        sum_sq += o_ref[e] * o_ref[e];
    out->o_rms = sqrt(sum_sq / (double)n);

    /* fp16: the inputs rounded to fp16, then standard attention and FlashAttention-2. */
    float *q16 = xcalloc(n, sizeof(float)), *k16 = xcalloc(n, sizeof(float));
    float *v16 = xcalloc(n, sizeof(float));
    for (size_t e = 0; e < n; ++e) {
        q16[e] = fx_round(FX_FP16, q[e]);
        k16[e] = fx_round(FX_FP16, k[e]);
        v16[e] = fx_round(FX_FP16, v[e]);
    }
    if (dequant_reference)
        reference(&p, q16, k16, v16, o_own);
    standard_fp16(&p, q16, k16, v16, o);
    out->rmse[FX_T3_FP16_STANDARD] = rmse(o, o_ref, n);
    if (dequant_reference)
        out->rmse_dequant[FX_T3_FP16_STANDARD] = rmse(o, o_own, n);
    fa2_fp16->forward(&p, q16, k16, v16, o, lse);
    out->rmse[FX_T3_FP16_FA2] = rmse(o, o_ref, n);
    if (dequant_reference)
        out->rmse_dequant[FX_T3_FP16_FA2] = rmse(o, o_own, n);
    free(q16), free(k16), free(v16);

    /* e4m3: each way of preparing the inputs, then the same forward. */
    const fx_fp8_tiles tiles = fx_fp8_tiles_for(s->head_dim);
    const struct {
        fx_table3_method m;
        fx_fp8_scaling scaling;
        bool incoherent;
    } modes[] = {
        {FX_T3_FP8_PER_TENSOR, FX_FP8_PER_TENSOR, false},
        {FX_T3_FP8_PER_HEAD, FX_FP8_PER_HEAD, false},
        {FX_T3_FP8_BLOCK, FX_FP8_PER_BLOCK, false},
        {FX_T3_FP8_INCOHERENT, FX_FP8_PER_TENSOR, true},
        {FX_T3_FP8_BOTH, FX_FP8_PER_BLOCK, true},
    };
    for (size_t e = 0; e < sizeof modes / sizeof modes[0]; ++e) {
        const fx_fp8_recipe r = {modes[e].scaling, modes[e].incoherent, s->seed, tiles};
        fx_fp8_inputs in;
        fx_fp8_prepare(&p, q, k, v, r, &in);
        out->past_fast_range += fx_fp8_forward(&p, &in, FX_FP8_MAX_OFFSET, NULL, o, lse);
        out->rmse[modes[e].m] = rmse(o, o_ref, n);
        if (dequant_reference) {
            float *qd = xcalloc(n, sizeof(float)), *kd = xcalloc(n, sizeof(float));
            float *vd = xcalloc(n, sizeof(float));
            fx_fp8_dequantize(&in.q, qd);
            fx_fp8_dequantize(&in.k, kd);
            fx_fp8_dequantize(&in.v, vd);
            reference(&p, qd, kd, vd, o_own);
            out->rmse_dequant[modes[e].m] = rmse(o, o_own, n);
            free(qd), free(kd), free(vd);
        }
        fx_fp8_inputs_free(&in);
    }
    free(q), free(k), free(v), free(o), free(lse), free(o_ref), free(o_own);
}
