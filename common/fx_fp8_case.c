/*
 * fx_fp8_case.c — one e4m3 case (fx_fp8_case.h says what it checks and why).
 */
#include "fx_fp8_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_check.h"
#include "fx_compare.h"
#include "fx_draw.h"
#include "fx_fp8.h"
#include "fx_fp8_model.h"
#include "fx_gpu.h"
#include "fx_host.h"
#include "fx_msg.h"
#include "fx_reference.h"
#include "fx_run.h"
#include "fx_save.h"

/* The (batch, head) slices the checks evaluate, every row of each: all of them while the
 * three CPU passes (two fp64 references and the model) stay within this many multiply-adds
 * and FX_MAX_REF_SLICES slices, else --ref-slices of them (the first, the last, then spread
 * by the seed, as fx_compare.c samples). */
#define FP8_CHECK_BUDGET 3.0e9
#define FP8_RNG_STREAM_SLICES 98 /* fx_rng_u64's stream for the slice choice (fx_compare: 99) */

typedef struct fp8_slices {
    int n;
    int b[FX_MAX_REF_SLICES], h[FX_MAX_REF_SLICES];
} fp8_slices;

static void choose_slices(const fx_problem *p, int ref_slices, fp8_slices *s)
{
    const int total = p->batch * p->heads_q;
    const double per_slice = 3.0 * p->seqlen_q * (double)p->seqlen_k * 2.0 * p->head_dim;
    int n = total;
    bool spread = false;
    if (total > FX_MAX_REF_SLICES || per_slice * total > FP8_CHECK_BUDGET) {
        n = ref_slices < total ? ref_slices : total;
        n = n < FX_MAX_REF_SLICES ? n : FX_MAX_REF_SLICES;
        spread = true;
    }
    s->n = 0;
    for (int i = 0; i < n; ++i) {
        int flat = i;
        if (spread && i > 0) {
            flat = i == 1 ? total - 1
                          : (int)(fx_rng_u64(p->seed, FP8_RNG_STREAM_SLICES, (uint64_t)i) %
                                  (uint64_t)total);
            bool seen = false; /* the model writes a slice once: keep them distinct */
            for (int j = 0; j < s->n; ++j)
                seen |= s->b[j] * p->heads_q + s->h[j] == flat;
            if (seen)
                continue;
        }
        s->b[s->n] = flat / p->heads_q;
        s->h[s->n] = flat % p->heads_q;
        s->n++;
    }
}

/* Q, K, V drawn in fp32: fx_draw's numbers, before any rounding to a dtype. */
static float *draw_f32(const fx_problem *p, fx_tensor_id id, size_t n)
{
    float *x = fx_xmalloc(n * sizeof(float));
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++)
        x[i] = (float)fx_draw(p, id, (uint64_t)i);
    return x;
}

/* One case's inputs on the host (fx_case_host's e4m3 members): Q, K, V drawn in fp32 and their
 * e4m3 codes and descales by p's recipe (fp8_scaling, fp8_hadamard with the seed's signs) in
 * c->self's tiles; with --load, the folder's (c->loaded, fx_load_fp8_case), which host_free
 * leaves to fx_main. What the GPU case hands the kernel and --cpu hands the model: the same
 * numbers for the same problem. */
static void host_make(const fx_ctx *c, const fx_problem *p, fx_case_host *h)
{
    if (c->opt.load) {
        *h = c->loaded;
        return;
    }
    memset(h, 0, sizeof *h);
    h->q = draw_f32(p, FX_T_Q, fx_numel_q(p));
    h->k = draw_f32(p, FX_T_K, fx_numel_kv(p));
    h->v = draw_f32(p, FX_T_V, fx_numel_kv(p));
    const fx_fp8_recipe recipe = {.scaling = p->fp8_scaling,
                                  .incoherent = p->fp8_hadamard,
                                  .sign_seed = p->seed,
                                  .tiles = c->self->fp8_tiles(p->head_dim)};
    fx_fp8_prepare(p, h->q, h->k, h->v, recipe, &h->fp8);
}

static void host_free(const fx_ctx *c, fx_case_host *h)
{
    if (!c->opt.load)
        fx_host_free(h);
}

/* The option e4m3 does not take, and a stage without fp8 tiles: a usage error (fx_error). */
static bool refused(const fx_ctx *c)
{
    if (c->opt.backward || !c->self->fp8_tiles) {
        fx_error("e4m3 has no backward, and needs a stage with fp8 tiles");
        return true;
    }
    return false;
}

/* V's codes [batch, seqlen_k, heads_kv, head_dim] as Vᵀ [batch, heads_kv, head_dim,
 * seqlen_k]: what --fp8-vt hands the kernel. */
static uint8_t *transpose_v(const fx_problem *p, const uint8_t *v)
{
    const int sk = p->seqlen_k, hk = p->heads_kv, d = p->head_dim;
    uint8_t *vt = fx_xmalloc(fx_numel_kv(p));
    const fx_layout l = fx_layout_kv(p);
    for (int b = 0; b < p->batch; ++b)
        for (int h = 0; h < hk; ++h)
            for (int c = 0; c < d; ++c)
                for (int j = 0; j < sk; ++j)
                    vt[(((size_t)b * hk + h) * d + c) * sk + j] = v[fx_offset(l, b, j, h, c)];
    return vt;
}

/* The device side of one case: inputs, descales, outputs, and the run whose fwd arguments
 * fx_launch_forward (timing) launches again. */
typedef struct fp8_device {
    void *q, *k, *v;
    float *q_descale, *k_descale, *v_descale;
    fx_run run; /* run.s, run.fwd; run.out.o (bf16) and run.out.lse on the device */
} fp8_device;

static void device_free(fp8_device *d)
{
    cudaFree(d->q);
    cudaFree(d->k);
    cudaFree(d->v);
    cudaFree(d->q_descale);
    cudaFree(d->k_descale);
    cudaFree(d->v_descale);
    cudaFree(d->run.out.o);
    cudaFree(d->run.out.lse);
    memset(d, 0, sizeof *d);
}

/* cudaMalloc + copy; names the bytes when they do not fit (fx_error). */
static cudaError_t upload(void **dst, const void *src, size_t bytes, const char *what)
{
    cudaError_t err = cudaMalloc(dst, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        cudaGetLastError();
        fx_error("cannot allocate %s: %zu bytes", what, bytes);
        return err;
    }
    return src ? FX_CUDA(cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice)) : cudaSuccess;
}

static size_t descale_bytes(const fx_fp8_tensor *t)
{
    return fx_fp8_tensor_descales(t) * sizeof(float);
}

static cudaError_t device_make(const fx_ctx *c, const fx_problem *p, const fx_fp8_inputs *in,
                               fp8_device *d)
{
    const size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nl = fx_numel_lse(p);
    cudaError_t err;
    memset(d, 0, sizeof *d);
    uint8_t *vt = p->fp8_v_transposed ? transpose_v(p, in->v.codes) : NULL;
    err = upload(&d->q, in->q.codes, nq, "Q (e4m3)");
    if (!err)
        err = upload(&d->k, in->k.codes, nkv, "K (e4m3)");
    if (!err)
        err = upload(&d->v, vt ? vt : in->v.codes, nkv, "V (e4m3)");
    free(vt);
    if (!err)
        err = upload((void **)&d->q_descale, in->q.descale, descale_bytes(&in->q), "Q's descales");
    if (!err)
        err = upload((void **)&d->k_descale, in->k.descale, descale_bytes(&in->k), "K's descales");
    if (!err)
        err = upload((void **)&d->v_descale, in->v.descale, descale_bytes(&in->v), "V's descales");
    if (!err)
        err = upload(&d->run.out.o, NULL, nq * 2, "O (bf16)");
    if (!err)
        err = upload((void **)&d->run.out.lse, NULL, nl * sizeof(float), "LSE");
    if (err)
        return err;
    d->run.s = c->self;
    d->run.fwd = (fx_fwd_args){.p = p,
                               .q = d->q,
                               .k = d->k,
                               .v = d->v,
                               .o = d->run.out.o,
                               .lse = d->run.out.lse,
                               .q_layout = fx_layout_q(p),
                               .k_layout = fx_layout_kv(p),
                               .v_layout = fx_layout_kv(p),
                               .o_layout = fx_layout_o(p),
                               .stream = 0,
                               .q_descale = d->q_descale,
                               .k_descale = d->k_descale,
                               .v_descale = d->v_descale,
                               .fp8_block_m = in->q.block_rows,
                               .fp8_block_n = in->k.block_rows};
    return cudaSuccess;
}

/* One launch on poisoned outputs (every byte 0xff: NaN in bf16 and fp32), then O (bf16 →
 * float) and LSE copied into o_h and lse_h. */
static cudaError_t run_once(const fx_problem *p, fp8_device *d, float *o_h, float *lse_h)
{
    const size_t no = fx_numel_o(p), nl = fx_numel_lse(p);
    cudaError_t err;
    if ((err = FX_CUDA(cudaMemset(d->run.out.o, 0xff, no * 2))) ||
        (err = FX_CUDA(cudaMemset(d->run.out.lse, 0xff, nl * sizeof(float)))) ||
        (err = FX_CUDA(d->run.s->forward(&d->run.fwd))) || (err = FX_CUDA(cudaDeviceSynchronize())))
        return err;
    uint16_t *bits = fx_xmalloc(no * 2);
    err = FX_CUDA(cudaMemcpy(bits, d->run.out.o, no * 2, cudaMemcpyDeviceToHost));
    if (!err)
        err =
            FX_CUDA(cudaMemcpy(lse_h, d->run.out.lse, nl * sizeof(float), cudaMemcpyDeviceToHost));
    fx_from_bits(FX_BF16, bits, o_h, no);
    free(bits);
    return err;
}

static size_t count_nan(const float *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
        bad += isnan(x[i]) ? 1 : 0;
    return bad;
}

/* The metrics of x against ref over the chosen slices' rows (O: every column). */
typedef struct fp8_errs {
    fx_err o, lse;
} fp8_errs;

static fp8_errs slice_errors(const fx_problem *p, const fp8_slices *s, const float *o,
                             const float *lse, const double *ref_o, const double *ref_lse)
{
    const int d = p->head_dim, sq = p->seqlen_q;
    const fx_layout lo = fx_layout_o(p);
    fx_err_acc ao, al;
    fx_err_acc_init(&ao);
    fx_err_acc_init(&al);
    for (int i = 0; i < s->n; ++i)
        for (int r = 0; r < sq; ++r) {
            const size_t t = (size_t)i * sq + r;
            for (int col = 0; col < d; ++col)
                fx_err_acc_add(&ao, o[fx_offset(lo, s->b[i], r, s->h[i], col)], ref_o[t * d + col]);
            fx_err_acc_add(&al, lse[fx_lse_index(p, s->b[i], s->h[i], r)], ref_lse[t]);
        }
    fp8_errs e = {fx_err_acc_result(&ao), fx_err_acc_result(&al)};
    return e;
}

/* The fp64 forward of every row of the chosen slices on inputs q, k, v (fp32 values):
 * ref_o [n·seqlen_q, head_dim], ref_lse [n·seqlen_q]. */
static void reference_slices(const fx_problem *p, const fp8_slices *s, const float *q,
                             const float *k, const float *v, double *ref_o, double *ref_lse)
{
    const int sq = p->seqlen_q, d = p->head_dim;
#pragma omp parallel for schedule(dynamic, 4)
    for (long long t = 0; t < (long long)s->n * sq; ++t) {
        const int i = (int)(t / sq), r = (int)(t % sq);
        fx_ref_forward_rows(p, q, k, v, s->b[i], s->h[i], r, r + 1, ref_o + t * d, ref_lse + t);
    }
}

static void print_err(const char *what, fx_err e)
{
    char b[160];
    fx_err_format(e, b, sizeof b);
    printf("  %-34s %s\n", what, b);
}

/* A judged line: the error, its bound and the verdict. */
static void print_judged(const char *what, fx_err e, double bound, bool pass)
{
    char b[160];
    fx_err_format(e, b, sizeof b);
    printf("  %-31s %s  bound %.2e  %s\n", what, b, bound, pass ? "PASS" : "FAIL");
}

/* One previous-stage comparison over the checked slices' elements: no NaN, the same infinities,
 * max-abs difference within bound. */
static bool prev_within(fx_err e, double bound, const char *what, const char *prev_id, bool verbose)
{
    const bool pass = e.nan_count == 0 && e.inf_mismatch == 0 && e.max_abs <= bound;
    if (verbose) {
        char b[160];
        fx_err_format(e, b, sizeof b);
        printf("  %-3s vs %s (%zu, the checked slices): %s  bound %.2e  %s\n", what, prev_id, e.n,
               b, bound, pass ? "PASS" : "FAIL");
    }
    return pass;
}

/* Stage 08 (or whichever earlier stage covers it) in bf16 on the dequantized inputs rounded
 * to bf16, against the stage's O and LSE on the checked slices.
 *
 * The two stages do not see the same numbers: a 4-bit significand times an fp32 descale does
 * not fit bf16's 8 bits. So the rule is the one every stage's previous-stage check uses (both
 * within their bound of the truth: 2·bound apart) plus how far the truth itself moves between
 * the two inputs, measured: the fp64 forward on the bf16-rounded inputs (ref_b) against the one
 * on the dequantized inputs (dq_o, dq_l), max over the checked rows. That distance is a fact of
 * the inputs, not of either stage; at large logits it is large (rounding q·k to bf16 moves S by
 * up to 2^-8·Σ|q·k|, times the softmax scale), and the check says so rather than pretending to
 * see more. Adds to *pass; err_prev gets O's max-abs difference. Returns a CUDA error (not
 * fitting in memory is not one: n/a). */
static cudaError_t check_prev(const fx_ctx *c, const fx_problem *p, const fp8_slices *s,
                              const float *qd, const float *kd, const float *vd, const double *dq_o,
                              const double *dq_l, const float *o_h, const float *lse_h,
                              double o_bound, double lse_bound, bool verbose, bool *pass,
                              fx_case_result *res)
{
    fx_problem pb = *p;
    pb.dtype = FX_BF16;
    pb.fp8_scaling = FX_FP8_PER_TENSOR;
    pb.fp8_hadamard = false;
    pb.fp8_v_transposed = false;
    char why[512];
    res->prev = fx_find_prev(c, &pb, false, why, sizeof why);
    if (!res->prev) {
        if (verbose)
            printf("  prev: n/a (%s)\n", why);
        return cudaSuccess;
    }
    const size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p);
    fx_case_host h = {0};
    const float *src[3] = {qd, kd, vd};
    float **dst[3] = {&h.q, &h.k, &h.v};
    uint16_t **bits[3] = {&h.qb, &h.kb, &h.vb};
    const size_t n[3] = {nq, nkv, nkv};
    for (int t = 0; t < 3; ++t) {
        *dst[t] = fx_xmalloc(n[t] * sizeof(float));
        *bits[t] = fx_xmalloc(n[t] * 2);
        fx_to_bits(FX_BF16, src[t], *bits[t], n[t]);
        fx_from_bits(FX_BF16, *bits[t], *dst[t], n[t]);
    }
    fx_inputs in;
    fx_run pv = {0};
    cudaError_t err = fx_inputs_make(&pb, &h, false, &in);
    if (!err)
        err = fx_run_stage(&pv, res->prev, &in, false);
    if (err == cudaErrorMemoryAllocation) {
        printf("  prev: n/a (%s does not fit in device memory)\n", res->prev->id);
        res->prev = NULL;
        err = cudaSuccess;
    } else if (!err) {
        const size_t rows = (size_t)s->n * p->seqlen_q;
        double *rb_o = fx_xmalloc(rows * p->head_dim * sizeof(double));
        double *rb_l = fx_xmalloc(rows * sizeof(double));
        reference_slices(p, s, h.q, h.k, h.v, rb_o, rb_l);
        /* How far the truth moves from the dequantized inputs to their bf16 roundings. */
        float *dq_of = fx_xmalloc(nq * sizeof(float)),
              *dq_lf = fx_xmalloc(fx_numel_lse(p) * sizeof(float));
        const fx_layout lo = fx_layout_o(p);
        for (int i = 0; i < s->n; ++i)
            for (int r = 0; r < p->seqlen_q; ++r) {
                const size_t t = (size_t)i * p->seqlen_q + r;
                for (int col = 0; col < p->head_dim; ++col)
                    dq_of[fx_offset(lo, s->b[i], r, s->h[i], col)] =
                        (float)dq_o[t * p->head_dim + col];
                dq_lf[fx_lse_index(p, s->b[i], s->h[i], r)] = (float)dq_l[t];
            }
        const fp8_errs moved = slice_errors(p, s, dq_of, dq_lf, rb_o, rb_l);
        /* The stage against the previous stage, over the same rows. */
        float *pv_o = pv.out.o_h, *pv_l = pv.out.lse_h;
        for (int i = 0; i < s->n; ++i)
            for (int r = 0; r < p->seqlen_q; ++r) {
                const size_t t = (size_t)i * p->seqlen_q + r;
                for (int col = 0; col < p->head_dim; ++col)
                    rb_o[t * p->head_dim + col] = pv_o[fx_offset(lo, s->b[i], r, s->h[i], col)];
                rb_l[t] = pv_l[fx_lse_index(p, s->b[i], s->h[i], r)];
            }
        const fp8_errs e = slice_errors(p, s, o_h, lse_h, rb_o, rb_l);
        if (verbose)
            printf("  prev: %s in bf16 on the dequantized inputs rounded to bf16; the fp64 "
                   "truth moves by O %.2e, LSE %.2e between the two inputs\n",
                   res->prev->id, moved.o.max_abs, moved.lse.max_abs);
        res->err_prev = e.o.max_abs;
        *pass &= prev_within(e.o, 2.0 * o_bound + moved.o.max_abs, "O", res->prev->id, verbose);
        *pass &=
            prev_within(e.lse, 2.0 * lse_bound + moved.lse.max_abs, "LSE", res->prev->id, verbose);
        free(rb_o);
        free(rb_l);
        free(dq_of);
        free(dq_lf);
    }
    fx_run_free(&pv);
    fx_inputs_free(&in);
    fx_host_free(&h);
    return err;
}

/* The report's lines against fp64 on the fp32 inputs need those inputs: a loaded folder
 * without q.f32, k.f32, v.f32 has none (fx_load.h), and the report says so instead. */
static void print_no_fp32_inputs(const fx_ctx *c)
{
    printf("  vs fp64 on fp32 inputs:  n/a (%s has no q.f32, k.f32, v.f32: the inputs before "
           "quantization)\n",
           c->opt.load);
}

/* What both checks (the GPU's check_case and fx_run_fp8_cpu_case) compare against, on the
 * chosen (batch, head) slices: the dequantized inputs (layouts of Q, K, V), fp64 on them and
 * on the fp32 inputs before quantization (rows·head_dim and rows, the slices' rows in order;
 * f_o and f_l NULL when the case has no fp32 inputs: loaded without them), and the CPU model
 * summing as Hopper's e4m3 wgmma (O and LSE tensors whole, the rows outside the slices NaN).
 * past: the model's rows past the fast range (|R| >= 2^24). */
typedef struct fp8_truths {
    fp8_slices s;
    size_t rows;
    float *qd, *kd, *vd;
    double *dq_o, *dq_l;
    double *f_o, *f_l;
    float *m_o, *m_l;
    size_t past;
} fp8_truths;

static void truths_make(const fx_ctx *c, const fx_problem *p, const fx_case_host *h, fp8_truths *t)
{
    const fx_fp8_inputs *in = &h->fp8;
    const size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nl = fx_numel_lse(p);
    const int d = p->head_dim;
    choose_slices(p, c->opt.ref_slices, &t->s);
    t->rows = (size_t)t->s.n * p->seqlen_q;
    t->qd = fx_xmalloc(nq * sizeof(float));
    t->kd = fx_xmalloc(nkv * sizeof(float));
    t->vd = fx_xmalloc(nkv * sizeof(float));
    fx_fp8_dequantize(&in->q, t->qd);
    fx_fp8_dequantize(&in->k, t->kd);
    fx_fp8_dequantize(&in->v, t->vd);
    t->dq_o = fx_xmalloc(t->rows * d * sizeof(double));
    t->dq_l = fx_xmalloc(t->rows * sizeof(double));
    reference_slices(p, &t->s, t->qd, t->kd, t->vd, t->dq_o, t->dq_l);
    t->f_o = t->f_l = NULL;
    if (h->q) {
        t->f_o = fx_xmalloc(t->rows * d * sizeof(double));
        t->f_l = fx_xmalloc(t->rows * sizeof(double));
        reference_slices(p, &t->s, h->q, h->k, h->v, t->f_o, t->f_l);
    }
    /* The model writes the chosen slices' rows; the rest stay NaN (every byte 0xff), read
     * by --digest and --save alone. */
    t->m_o = fx_xmalloc(nq * sizeof(float));
    t->m_l = fx_xmalloc(nl * sizeof(float));
    memset(t->m_o, 0xff, nq * sizeof(float));
    memset(t->m_l, 0xff, nl * sizeof(float));
    t->past = fx_fp8_forward_slices(p, in, FX_FP8_MAX_OFFSET, fx_fp8_acc_hopper(), t->s.n, t->s.b,
                                    t->s.h, t->m_o, t->m_l);
}

static void truths_free(fp8_truths *t)
{
    free(t->qd);
    free(t->kd);
    free(t->vd);
    free(t->dq_o);
    free(t->dq_l);
    free(t->f_o);
    free(t->f_l);
    free(t->m_o);
    free(t->m_l);
}

/* The checks of fx_fp8_case.h on one run's outputs o_h, lse_h; h's fp32 inputs (NULL when
 * loaded without them) for the unjudged lines. */
static cudaError_t check_case(const fx_ctx *c, const fx_problem *p, const fx_case_host *h,
                              const float *o_h, const float *lse_h, bool verbose, bool *pass,
                              fx_case_result *res)
{
    const fx_fp8_inputs *in = &h->fp8;
    const bool fp32_inputs = h->q != NULL;
    const size_t nq = fx_numel_q(p), nl = fx_numel_lse(p);
    const int sq = p->seqlen_q, d = p->head_dim;
    fp8_truths t;
    truths_make(c, p, h, &t);
    const fp8_slices s = t.s;
    const float *m_o = t.m_o, *m_l = t.m_l;

    const fp8_errs st_dq = slice_errors(p, &s, o_h, lse_h, t.dq_o, t.dq_l);
    const fp8_errs md_dq = slice_errors(p, &s, m_o, m_l, t.dq_o, t.dq_l);
    static const fp8_errs none; /* zeros: the lines below are left out without the inputs */
    fp8_errs st_f = none, md_f = none;
    if (fp32_inputs) {
        st_f = slice_errors(p, &s, o_h, lse_h, t.f_o, t.f_l);
        md_f = slice_errors(p, &s, m_o, m_l, t.f_o, t.f_l);
    }
    /* The stage against the model, as if the model were the reference (fp32 values). */
    fx_err_acc am, aml;
    fx_err_acc_init(&am);
    fx_err_acc_init(&aml);
    const fx_layout lo = fx_layout_o(p);
    for (int i = 0; i < s.n; ++i)
        for (int r = 0; r < sq; ++r) {
            for (int col = 0; col < d; ++col) {
                const size_t at = fx_offset(lo, s.b[i], r, s.h[i], col);
                fx_err_acc_add(&am, o_h[at], m_o[at]);
            }
            const size_t at = fx_lse_index(p, s.b[i], s.h[i], r);
            fx_err_acc_add(&aml, lse_h[at], m_l[at]);
        }
    const fx_err st_md = fx_err_acc_result(&am), st_mdl = fx_err_acc_result(&aml);

    double o_bound = 0, lse_bound = 0;
    const bool o_pass = fx_pass(st_dq.o, md_dq.o, FX_BF16, &o_bound);
    /* The LSE's rule is fx_pass_lse's: the model sums both GEMMs as Hopper's e4m3 wgmma
     * does (fx_fp8_acc_hopper), so its error includes the tensor cores' own. */
    fx_pass_lse(st_dq.lse, md_dq.lse, &lse_bound);
    const bool lse_pass = st_dq.lse.nan_count == 0 && st_dq.lse.inf_mismatch == 0 &&
                          md_dq.lse.nan_count == 0 && md_dq.lse.inf_mismatch == 0 &&
                          st_dq.lse.max_abs <= lse_bound;
    const size_t nan_o = count_nan(o_h, nq), nan_l = count_nan(lse_h, nl);
    *pass &= o_pass && lse_pass && nan_o == 0 && nan_l == 0 && t.past == 0;
    res->err_ref = st_dq.o.max_abs;
    if (verbose) {
        printf("  %d (batch, head) slices, %zu rows; fp8 recipe: %s%s, tiles %d x %d\n", s.n,
               t.rows, fx_fp8_scaling_name(p->fp8_scaling), p->fp8_hadamard ? " + hadamard" : "",
               in->q.block_rows, in->k.block_rows);
        print_judged("O   vs fp64 on dequantized:", st_dq.o, o_bound, o_pass);
        print_err("    CPU model vs the same:", md_dq.o);
        print_judged("LSE vs fp64 on dequantized:", st_dq.lse, lse_bound, lse_pass);
        print_err("    CPU model vs the same:", md_dq.lse);
        if (fp32_inputs) {
            print_err("O   vs fp64 on fp32 inputs:", st_f.o);
            print_err("    CPU model vs the same:", md_f.o);
            print_err("LSE vs fp64 on fp32 inputs:", st_f.lse);
        } else {
            print_no_fp32_inputs(c);
        }
        print_err("O   vs CPU model:", st_md);
        print_err("LSE vs CPU model:", st_mdl);
        if (fp32_inputs && md_f.o.rmse > 0)
            printf("  RMSE of O vs fp64 on fp32 inputs, stage / CPU model: %.4f\n",
                   st_f.o.rmse / md_f.o.rmse);
        if (nan_o || nan_l)
            printf("  NaN over all elements: O %zu, LSE %zu: FAIL\n", nan_o, nan_l);
        if (t.past)
            printf("  %zu rows past the fast range (|R| >= 2^24), which the stage does not "
                   "handle: FAIL\n",
                   t.past);
    }
    cudaError_t err = check_prev(c, p, &s, t.qd, t.kd, t.vd, t.dq_o, t.dq_l, o_h, lse_h, o_bound,
                                 lse_bound, verbose, pass, res);
    truths_free(&t);
    return err;
}

/* --repeat N: N − 1 more launches, each bitwise equal to the first run's outputs. */
static cudaError_t repeat_check(const fx_problem *p, fp8_device *d, const float *o_h,
                                const float *lse_h, int repeat, bool verbose, bool *pass)
{
    const size_t no = fx_numel_o(p), nl = fx_numel_lse(p);
    float *o2 = fx_xmalloc(no * sizeof(float)), *l2 = fx_xmalloc(nl * sizeof(float));
    cudaError_t err = cudaSuccess;
    bool same = true;
    for (int it = 1; it < repeat && same; ++it) {
        if ((err = run_once(p, d, o2, l2)))
            break;
        same =
            memcmp(o2, o_h, no * sizeof(float)) == 0 && memcmp(l2, lse_h, nl * sizeof(float)) == 0;
        if (!same && verbose)
            printf("  repeat %d of %d differs bitwise from the first run: FAIL\n", it + 1, repeat);
    }
    if (!err && same && verbose)
        printf("  repeat: %d runs bitwise equal (forward)  PASS\n", repeat);
    *pass &= same;
    free(o2);
    free(l2);
    return err;
}

int fx_run_fp8_case(const fx_ctx *c, const fx_problem *p, bool verbose, fx_case_result *res)
{
    char line[512];
    if (refused(c))
        return FX_EXIT_USAGE;
    fx_problem_format(p, line, sizeof line);
    if (verbose)
        printf("%s fwd: %s\n", c->self->id, line);
    if (verbose && c->opt.load)
        fx_print_loaded(c, p, false);
    const size_t nq = fx_numel_q(p), nl = fx_numel_lse(p);
    fx_case_host h;
    host_make(c, p, &h);
    fp8_device d;
    float *o_h = fx_xmalloc(nq * sizeof(float)), *lse_h = fx_xmalloc(nl * sizeof(float));
    const fx_outputs outputs = {.o_h = o_h, .lse_h = lse_h};
    int rc = FX_EXIT_FAIL;
    bool pass = true, csv_ok = true;
    cudaError_t err = device_make(c, p, &h.fp8, &d);
    if (err == cudaErrorMemoryAllocation) {
        rc = FX_EXIT_USAGE;
        goto out;
    }
    if (err || (err = run_once(p, &d, o_h, lse_h)))
        goto out;
    if (c->opt.check && (err = check_case(c, p, &h, o_h, lse_h, verbose, &pass, res)))
        goto out;
    if (c->opt.digest)
        fx_print_digest(p, &outputs, false);
    if (c->opt.save && fx_save_case(c->opt.save, c->self->id, p, &h, &outputs, false) != 0)
        goto out; /* rc stays FX_EXIT_FAIL: the file was named */
    if (c->opt.repeat > 1 && (err = repeat_check(p, &d, o_h, lse_h, c->opt.repeat, verbose, &pass)))
        goto out;
    res->pass = pass;
    if (c->opt.bench && (err = fx_bench_forward(c, p, &d.run, res, &csv_ok)))
        goto out;
    rc = pass && csv_ok ? FX_EXIT_OK : FX_EXIT_FAIL;
    if (verbose && c->opt.check)
        printf("  %s\n", pass ? "PASS" : "FAIL");
out:
    device_free(&d);
    host_free(c, &h);
    free(o_h);
    free(lse_h);
    err = cudaGetLastError();
    if (err != cudaSuccess) {
        fx_error("CUDA error: %s", cudaGetErrorString(err));
        rc = FX_EXIT_FAIL;
    }
    return rc;
}

/* ---- --cpu: the CPU model alone ------------------------------------------------------ */

/* The emulation of the pass rule for --cpu: standard attention in e4m3, the baseline that
 * fx_emu_forward_rows builds for the 16-bit dtypes (FlashAttention's tests' way), on the
 * same codes and descales: S = Q8·K8ᵀ summed as Hopper's e4m3 wgmma sums it
 * (fx_fp8_dot_model with fx_fp8_acc_hopper: that baseline runs on the same tensor cores)
 * times softmax_scale·δQ·δK in fp32; the softmax in fp32; the normalized P rounded to e4m3
 * with FA3's range use (2^8·P, P <= 1 so nothing saturates; the power of two undone after
 * the sum); O = Σ P8·V in fp32 on the dequantized V (vd), rounded to bf16; LSE fp32. Every
 * row of the chosen slices: e_o [n·seqlen_q, head_dim], e_l [n·seqlen_q]. */
static void emulate_slices(const fx_problem *p, const fp8_slices *s, const fx_fp8_inputs *in,
                           const float *vd, float *e_o, float *e_l)
{
    const int sq = p->seqlen_q, d = p->head_dim;
    const float scale = (float)p->softmax_scale, up = 0x1p8f;
    const fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p);
    const fx_fp8_acc_params *acc_prm = fx_fp8_acc_hopper();
    float e4m3[256]; /* every code's value */
    for (int code = 0; code < 256; ++code)
        e4m3[code] = fx_e4m3_to_float((uint8_t)code);
#pragma omp parallel for schedule(dynamic, 4)
    for (long long t = 0; t < (long long)s->n * sq; ++t) {
        const int i = (int)(t / sq), r = (int)(t % sq), b = s->b[i], h = s->h[i];
        const int hk = h / (p->heads_q / p->heads_kv), n_keys = fx_keys_seen(p, r);
        float *o = e_o + (size_t)t * d;
        if (n_keys == 0) {
            for (int col = 0; col < d; ++col)
                o[col] = 0.0f;
            e_l[t] = -INFINITY;
            continue;
        }
        float *pr = fx_xmalloc(((size_t)n_keys + 3 * (size_t)d) * sizeof(float));
        float *acc = pr + n_keys, *q8 = acc + d, *k8 = q8 + d;
        const uint8_t *q_codes = in->q.codes + fx_offset(lq, b, r, h, 0);
        for (int col = 0; col < d; ++col)
            q8[col] = e4m3[q_codes[col]];
        const float q_scale = scale * fx_fp8_row_descale(&in->q, b, r, h);
        float m = -INFINITY, l = 0.0f;
        for (int j = 0; j < n_keys; ++j) {
            const uint8_t *k_codes = in->k.codes + fx_offset(lkv, b, j, hk, 0);
            for (int col = 0; col < d; ++col)
                k8[col] = e4m3[k_codes[col]];
            pr[j] = fx_fp8_dot_model(q8, k8, d, 0.0f, acc_prm) *
                    (q_scale * fx_fp8_row_descale(&in->k, b, j, hk));
            m = fmaxf(m, pr[j]);
        }
        for (int j = 0; j < n_keys; ++j) {
            pr[j] = expf(pr[j] - m);
            l += pr[j];
        }
        for (int col = 0; col < d; ++col)
            acc[col] = 0.0f;
        for (int j = 0; j < n_keys; ++j) {
            const float p8 = fx_e4m3_round(up * (pr[j] / l));
            const float *v_row = vd + fx_offset(lkv, b, j, hk, 0);
            for (int col = 0; col < d; ++col)
                acc[col] += p8 * v_row[col];
        }
        for (int col = 0; col < d; ++col)
            o[col] = fx_round(FX_BF16, acc[col] / up);
        e_l[t] = m + logf(l);
        free(pr);
    }
}

int fx_run_fp8_cpu_case(const fx_ctx *c, const fx_problem *p)
{
    char line[512];
    if (refused(c))
        return FX_EXIT_USAGE;
    fx_problem_format(p, line, sizeof line);
    printf("%s cpu model fwd: %s\n", c->self->id, line);
    if (c->opt.load)
        fx_print_loaded(c, p, false);
    const int d = p->head_dim;
    fx_case_host h;
    host_make(c, p, &h);
    fp8_truths t;
    truths_make(c, p, &h, &t);
    const fp8_slices s = t.s;
    const size_t rows = t.rows, past = t.past;
    float *e_o = fx_xmalloc(rows * d * sizeof(float)), *e_l = fx_xmalloc(rows * sizeof(float));
    emulate_slices(p, &s, &h.fp8, t.vd, e_o, e_l);
    const fp8_errs md_dq = slice_errors(p, &s, t.m_o, t.m_l, t.dq_o, t.dq_l);
    const fp8_errs em_dq = {fx_compare_f64(e_o, t.dq_o, rows * d),
                            fx_compare_f64(e_l, t.dq_l, rows)};

    /* The rule of every stage's --cpu (fx_check_forward): the model as the stage, the
     * emulation as the baseline, against fp64 on the inputs both read. */
    double o_bound = 0, lse_bound = 0;
    const bool o_pass = fx_pass(md_dq.o, em_dq.o, FX_BF16, &o_bound);
    const bool lse_pass = fx_pass_lse(md_dq.lse, em_dq.lse, &lse_bound);
    bool pass = o_pass && lse_pass && past == 0;
    printf("  %d (batch, head) slices, %zu rows; fp8 recipe: %s%s, tiles %d x %d; the model "
           "sums as Hopper's e4m3 wgmma (%s)%s\n",
           s.n, rows, fx_fp8_scaling_name(p->fp8_scaling), p->fp8_hadamard ? " + hadamard" : "",
           h.fp8.q.block_rows, h.fp8.k.block_rows, FX_FP8_ACC_HOPPER_E4M3,
           p->fp8_v_transposed ? "; --fp8-vt is V's layout for the kernel: the model reads the "
                                 "same codes"
                               : "");
    print_judged("O   vs fp64 on dequantized:", md_dq.o, o_bound, o_pass);
    print_err("    emulation vs the same:", em_dq.o);
    print_judged("LSE vs fp64 on dequantized:", md_dq.lse, lse_bound, lse_pass);
    print_err("    emulation vs the same:", em_dq.lse);
    if (h.q) {
        const fp8_errs md_f = slice_errors(p, &s, t.m_o, t.m_l, t.f_o, t.f_l);
        print_err("O   vs fp64 on fp32 inputs:", md_f.o);
        print_err("LSE vs fp64 on fp32 inputs:", md_f.lse);
    } else {
        print_no_fp32_inputs(c);
    }
    if (past)
        printf("  %zu rows past the fast range (|R| >= 2^24), which the model does not "
               "handle: FAIL\n",
               past);
    const fx_outputs outputs = {.o_h = t.m_o, .lse_h = t.m_l};
    if (c->opt.digest)
        fx_print_digest(p, &outputs, false);
    if (c->opt.save && fx_save_case(c->opt.save, c->self->id, p, &h, &outputs, false) != 0)
        pass = false; /* the file was named */
    printf("  %s: the CPU model against fp64 on the dequantized inputs, held to 2x the "
           "emulation's error (standard attention in e4m3); no kernel ran\n",
           pass ? "PASS" : "FAIL");
    free(e_o);
    free(e_l);
    truths_free(&t);
    host_free(c, &h);
    return pass ? FX_EXIT_OK : FX_EXIT_FAIL;
}
