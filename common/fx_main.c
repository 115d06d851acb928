/*
 * fx_main.c — the shared main of every stage program (fx_main.h).
 *
 * One case = one problem, run through this program's stage and, on the same inputs,
 * through the previous stage (the nearest earlier one whose capabilities cover the
 * case). The stage is compared with the fp64 reference under the pass rule of
 * fx_check.h on sampled rows (forward) or whole GQA groups (backward), and with the
 * previous stage over every element. Outputs are poisoned with NaN before each
 * launch, so an element a kernel never writes fails the check.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fx_check.h"
#include "fx_gpu.h"
#include "fx_host.h"
#include "fx_main.h"
#include "fx_msg.h"
#include "fx_reference.h"

#ifndef FX_GIT_COMMIT
#define FX_GIT_COMMIT "unknown"
#endif

/* The reference costs about this many fp64 multiply-adds per check before it starts
 * sampling: a second or two on one core (DESIGN.md: "For large problems it evaluates
 * a sample"). */
#define FX_REF_BUDGET_FWD 1.0e9
#define FX_REF_BUDGET_BWD 4.0e9
/* Sampled forward rows per (batch, head) slice: the first and last rows (the causal
 * edges and the tails) and evenly spaced ones between. */
#define FX_EDGE_ROWS 8
/* Above this many FLOPs the CPU model (fp32, a few GFLOP/s per core) takes minutes: say so. */
#define FX_CPU_MODEL_SLOW_FLOPS 2e10
/* Streams of fx_rng_u64 (seeded by the problem's seed) that pick the sampled forward
 * slices and backward groups: apart from the input tensors' streams (fx_host.c). */
#define FX_RNG_STREAM_FWD_SLICES 99
#define FX_RNG_STREAM_BWD_GROUPS 98

typedef struct fx_ctx {
    const fx_stage *const *stages;
    int n_stages;
    const fx_stage *self;
    fx_options opt;
    fx_device_info dev;
} fx_ctx;

/* ------------------------------------------------------------------------ */
/* Host and device buffers of one case.                                      */

typedef struct fx_case_host {
    float *q, *k, *v, *dout; /* rounded to the dtype */
    uint16_t *qb, *kb, *vb, *dob;
} fx_case_host;

typedef struct fx_outputs {
    void *o; /* device */
    float *lse;
    void *dq, *dk, *dv;
    float *o_h, *lse_h; /* host copies, as float */
    float *dq_h, *dk_h, *dv_h;
} fx_outputs;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of host memory (%zu bytes)\n", n);
        exit(FX_EXIT_FAIL);
    }
    return p;
}

static void host_free(fx_case_host *h)
{
    free(h->q);
    free(h->k);
    free(h->v);
    free(h->dout);
    free(h->qb);
    free(h->kb);
    free(h->vb);
    free(h->dob);
    memset(h, 0, sizeof *h);
}

static void host_make(const fx_problem *p, bool backward, fx_case_host *h)
{
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p);
    memset(h, 0, sizeof *h);
    h->q = xmalloc(nq * sizeof(float));
    h->k = xmalloc(nkv * sizeof(float));
    h->v = xmalloc(nkv * sizeof(float));
    fx_fill(p, FX_T_Q, h->q, nq);
    fx_fill(p, FX_T_K, h->k, nkv);
    fx_fill(p, FX_T_V, h->v, nkv);
    h->qb = xmalloc(nq * 2);
    h->kb = xmalloc(nkv * 2);
    h->vb = xmalloc(nkv * 2);
    fx_to_bits(p->dtype, h->q, h->qb, nq);
    fx_to_bits(p->dtype, h->k, h->kb, nkv);
    fx_to_bits(p->dtype, h->v, h->vb, nkv);
    if (backward) {
        h->dout = xmalloc(nq * sizeof(float));
        fx_fill(p, FX_T_DO, h->dout, nq);
        h->dob = xmalloc(nq * 2);
        fx_to_bits(p->dtype, h->dout, h->dob, nq);
    }
}

static void outputs_free(fx_outputs *o)
{
    cudaFree(o->o);
    cudaFree(o->lse);
    cudaFree(o->dq);
    cudaFree(o->dk);
    cudaFree(o->dv);
    free(o->o_h);
    free(o->lse_h);
    free(o->dq_h);
    free(o->dk_h);
    free(o->dv_h);
    memset(o, 0, sizeof *o);
}

/* Device inputs shared by every stage run in a case. */
typedef struct fx_inputs {
    void *q, *k, *v, *dout;
} fx_inputs;

static void inputs_free(fx_inputs *in)
{
    cudaFree(in->q);
    cudaFree(in->k);
    cudaFree(in->v);
    cudaFree(in->dout);
    memset(in, 0, sizeof *in);
}

/* Allocation failures name the bytes (the harness contract: refuse, don't crash). */
static cudaError_t dev_alloc(void **ptr, size_t bytes, const char *what)
{
    cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        fprintf(stderr, "cannot allocate %s: %zu bytes needed, %zu free of %zu\n", what, bytes,
                free_b, total_b);
    }
    return err;
}

static cudaError_t inputs_make(const fx_problem *p, const fx_case_host *h, fx_inputs *in)
{
    size_t bq = fx_numel_q(p) * 2, bkv = fx_numel_kv(p) * 2;
    cudaError_t err;
    memset(in, 0, sizeof *in);
    if ((err = dev_alloc(&in->q, bq, "Q")) || (err = dev_alloc(&in->k, bkv, "K")) ||
        (err = dev_alloc(&in->v, bkv, "V")))
        return err;
    if ((err = FX_CUDA(cudaMemcpy(in->q, h->qb, bq, cudaMemcpyHostToDevice))) ||
        (err = FX_CUDA(cudaMemcpy(in->k, h->kb, bkv, cudaMemcpyHostToDevice))) ||
        (err = FX_CUDA(cudaMemcpy(in->v, h->vb, bkv, cudaMemcpyHostToDevice))))
        return err;
    if (h->dob) {
        if ((err = dev_alloc(&in->dout, bq, "dO")) ||
            (err = FX_CUDA(cudaMemcpy(in->dout, h->dob, bq, cudaMemcpyHostToDevice))))
            return err;
    }
    return cudaSuccess;
}

/* ------------------------------------------------------------------------ */
/* Running one stage on the device.                                          */

typedef struct fx_run {
    const fx_stage *s;
    fx_fwd_args fwd;
    fx_bwd_args bwd;
    void *workspace;
    size_t workspace_bytes;
} fx_run;

static cudaError_t launch_fwd(void *ctx)
{
    fx_run *r = ctx;
    return r->s->forward(&r->fwd);
}

static cudaError_t launch_bwd(void *ctx)
{
    fx_run *r = ctx;
    return r->s->backward(&r->bwd);
}

/* Every byte 0xff: NaN in bf16, fp16 and fp32 alike. */
static cudaError_t poison(void *ptr, size_t bytes)
{
    return cudaMemset(ptr, 0xff, bytes);
}

static void bits_to_host(fx_dtype dt, const uint16_t *bits, float **out, size_t n)
{
    if (!*out)
        *out = xmalloc(n * sizeof(float));
    fx_from_bits(dt, bits, *out, n);
}

/* Allocates outputs and workspace, runs the forward (and backward) of stage s once,
 * and copies the outputs to the host. Returns a CUDA error, or cudaErrorMemoryAllocation
 * after naming the bytes when something does not fit. */
static cudaError_t run_stage(const fx_stage *s, const fx_problem *p, const fx_inputs *in,
                             bool backward, fx_outputs *out, fx_run *r)
{
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nl = fx_numel_lse(p);
    cudaError_t err;
    memset(r, 0, sizeof *r);
    r->s = s;
    if (s->workspace_bytes) {
        size_t wf = s->workspace_bytes(p, false);
        size_t wb = backward ? s->workspace_bytes(p, true) : 0;
        r->workspace_bytes = wf > wb ? wf : wb;
    }
    char what[96];
    snprintf(what, sizeof what, "the workspace of stage %s", s->id);
    if (r->workspace_bytes && (err = dev_alloc(&r->workspace, r->workspace_bytes, what)))
        return err;
    if (!out->o) {
        if ((err = dev_alloc(&out->o, nq * 2, "O")) ||
            (err = dev_alloc((void **)&out->lse, nl * sizeof(float), "LSE")))
            return err;
        if (backward && ((err = dev_alloc(&out->dq, nq * 2, "dQ")) ||
                         (err = dev_alloc(&out->dk, nkv * 2, "dK")) ||
                         (err = dev_alloc(&out->dv, nkv * 2, "dV"))))
            return err;
    }
    fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p);
    r->fwd = (fx_fwd_args){.p = p,
                           .q = in->q,
                           .k = in->k,
                           .v = in->v,
                           .o = out->o,
                           .lse = out->lse,
                           .q_layout = lq,
                           .k_layout = lkv,
                           .v_layout = lkv,
                           .o_layout = lq,
                           .workspace = r->workspace,
                           .workspace_bytes = r->workspace_bytes,
                           .stream = 0};
    if ((err = FX_CUDA(poison(out->o, nq * 2))) ||
        (err = FX_CUDA(poison(out->lse, nl * sizeof(float)))))
        return err;
    if ((err = FX_CUDA(s->forward(&r->fwd))) || (err = FX_CUDA(cudaDeviceSynchronize())))
        return err;
    if (backward) {
        r->bwd = (fx_bwd_args){.p = p,
                               .q = in->q,
                               .k = in->k,
                               .v = in->v,
                               .o = out->o,
                               .dout = in->dout,
                               .lse = out->lse,
                               .dq = out->dq,
                               .dk = out->dk,
                               .dv = out->dv,
                               .q_layout = lq,
                               .k_layout = lkv,
                               .v_layout = lkv,
                               .o_layout = lq,
                               .workspace = r->workspace,
                               .workspace_bytes = r->workspace_bytes,
                               .stream = 0};
        if ((err = FX_CUDA(poison(out->dq, nq * 2))) || (err = FX_CUDA(poison(out->dk, nkv * 2))) ||
            (err = FX_CUDA(poison(out->dv, nkv * 2))))
            return err;
        if ((err = FX_CUDA(s->backward(&r->bwd))) || (err = FX_CUDA(cudaDeviceSynchronize())))
            return err;
    }
    /* Copy back through a 16-bit staging buffer. */
    uint16_t *stage = xmalloc((nq > nkv ? nq : nkv) * 2);
    if ((err = FX_CUDA(cudaMemcpy(stage, out->o, nq * 2, cudaMemcpyDeviceToHost))))
        goto done;
    bits_to_host(p->dtype, stage, &out->o_h, nq);
    if (!out->lse_h)
        out->lse_h = xmalloc(nl * sizeof(float));
    if ((err =
             FX_CUDA(cudaMemcpy(out->lse_h, out->lse, nl * sizeof(float), cudaMemcpyDeviceToHost))))
        goto done;
    if (backward) {
        if ((err = FX_CUDA(cudaMemcpy(stage, out->dq, nq * 2, cudaMemcpyDeviceToHost))))
            goto done;
        bits_to_host(p->dtype, stage, &out->dq_h, nq);
        if ((err = FX_CUDA(cudaMemcpy(stage, out->dk, nkv * 2, cudaMemcpyDeviceToHost))))
            goto done;
        bits_to_host(p->dtype, stage, &out->dk_h, nkv);
        if ((err = FX_CUDA(cudaMemcpy(stage, out->dv, nkv * 2, cudaMemcpyDeviceToHost))))
            goto done;
        bits_to_host(p->dtype, stage, &out->dv_h, nkv);
    }
done:
    free(stage);
    return err;
}

/* ------------------------------------------------------------------------ */
/* Checking.                                                                 */

typedef struct fx_fwd_check {
    fx_err o, lse, o_emu, lse_emu;
    double o_bound, lse_bound;
    bool o_pass, lse_pass, pass; /* fx_pass of O, fx_pass_lse of LSE, both */
    size_t rows;
} fx_fwd_check;

typedef struct fx_bwd_check {
    fx_err g[3], g_emu[3]; /* dQ, dK, dV */
    double bound[3];
    bool g_pass[3]; /* fx_pass of each */
    bool pass, ran;
    int groups;
} fx_bwd_check;

static const char *const grad_names[3] = {"dQ", "dK", "dV"};

/* Chooses the (batch, head) slices and the rows the forward reference evaluates. */
typedef struct fx_sample {
    int n_slices;
    int b[FX_MAX_REF_SLICES], h[FX_MAX_REF_SLICES];
    int n_rows; /* rows per slice */
    int *rows;  /* [n_rows] */
} fx_sample;

static void sample_forward(const fx_problem *p, int max_slices, fx_sample *s)
{
    double per_row = (double)p->seqlen_k * p->head_dim * 2.0;
    double all = per_row * p->seqlen_q * p->batch * p->heads_q;
    int slices_total = p->batch * p->heads_q;
    memset(s, 0, sizeof *s);
    if (all <= FX_REF_BUDGET_FWD && slices_total <= FX_MAX_REF_SLICES) {
        s->n_slices = slices_total;
        for (int i = 0; i < slices_total; ++i) {
            s->b[i] = i / p->heads_q;
            s->h[i] = i % p->heads_q;
        }
    } else {
        /* The first and the last slice, then ones spread by the seed. */
        if (max_slices > FX_MAX_REF_SLICES)
            max_slices = FX_MAX_REF_SLICES;
        if (max_slices > slices_total)
            max_slices = slices_total;
        for (int i = 0; i < max_slices; ++i) {
            int flat = i == 0   ? 0
                       : i == 1 ? slices_total - 1
                                : (int)(fx_rng_u64(p->seed, FX_RNG_STREAM_FWD_SLICES, (uint64_t)i) %
                                        (uint64_t)slices_total);
            s->b[i] = flat / p->heads_q;
            s->h[i] = flat % p->heads_q;
        }
        s->n_slices = max_slices;
    }
    int rows = (int)(FX_REF_BUDGET_FWD / (per_row * s->n_slices));
    if (rows < 2 * FX_EDGE_ROWS)
        rows = 2 * FX_EDGE_ROWS;
    if (rows > p->seqlen_q)
        rows = p->seqlen_q;
    s->n_rows = rows;
    s->rows = xmalloc((size_t)rows * sizeof(int));
    if (rows == p->seqlen_q) {
        for (int i = 0; i < rows; ++i)
            s->rows[i] = i;
        return;
    }
    /* First and last FX_EDGE_ROWS rows, the rest evenly spaced between (sorted, distinct). */
    int k = 0;
    for (int i = 0; i < FX_EDGE_ROWS; ++i)
        s->rows[k++] = i;
    int middle = rows - 2 * FX_EDGE_ROWS;
    int lo = FX_EDGE_ROWS, hi = p->seqlen_q - FX_EDGE_ROWS;
    for (int i = 0; i < middle; ++i)
        s->rows[k++] = lo + (int)(((long long)(hi - lo) * i) / (middle > 0 ? middle : 1));
    for (int i = 0; i < FX_EDGE_ROWS; ++i)
        s->rows[k++] = p->seqlen_q - FX_EDGE_ROWS + i;
}

static void check_forward(const fx_ctx *c, const fx_problem *p, const fx_case_host *h,
                          const fx_outputs *st, fx_fwd_check *out)
{
    fx_sample s;
    sample_forward(p, c->opt.ref_slices, &s);
    int d = p->head_dim, nr = s.n_rows;
    fx_err_acc o, l, oe, le;
    fx_err_acc_init(&o);
    fx_err_acc_init(&l);
    fx_err_acc_init(&oe);
    fx_err_acc_init(&le);
    /* Rows are independent: evaluate all sampled rows (in parallel where OpenMP is
     * there), then accumulate the metrics serially in a fixed order. */
    size_t total = (size_t)s.n_slices * nr;
    double *ro = xmalloc(total * d * sizeof(double)), *rl = xmalloc(total * sizeof(double));
    float *eo = xmalloc(total * d * sizeof(float)), *el = xmalloc(total * sizeof(float));
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 4)
#endif
    for (long long t = 0; t < (long long)total; ++t) {
        int sl = (int)(t / nr), i = s.rows[t % nr];
        fx_ref_forward_rows(p, h->q, h->k, h->v, s.b[sl], s.h[sl], i, i + 1, ro + t * d, rl + t);
        fx_emu_forward_rows(p, h->q, h->k, h->v, s.b[sl], s.h[sl], i, i + 1, eo + t * d, el + t);
    }
    for (size_t t = 0; t < total; ++t) {
        int sl = (int)(t / nr), i = s.rows[t % nr], b = s.b[sl], hh = s.h[sl];
        for (int col = 0; col < d; ++col) {
            float x = st->o_h[fx_offset(fx_layout_q(p), b, i, hh, col)];
            fx_err_acc_add(&o, x, ro[t * d + col]);
            fx_err_acc_add(&oe, eo[t * d + col], ro[t * d + col]);
        }
        float xl = st->lse_h[((size_t)b * p->heads_q + hh) * p->seqlen_q + i];
        fx_err_acc_add(&l, xl, rl[t]);
        fx_err_acc_add(&le, el[t], rl[t]);
    }
    free(rl);
    free(el);
    free(ro);
    free(eo);
    free(s.rows);
    out->o = fx_err_acc_result(&o);
    out->lse = fx_err_acc_result(&l);
    out->o_emu = fx_err_acc_result(&oe);
    out->lse_emu = fx_err_acc_result(&le);
    out->rows = (size_t)s.n_slices * nr;
    out->o_pass = fx_pass(out->o, out->o_emu, p->dtype, &out->o_bound);
    out->lse_pass = fx_pass_lse(out->lse, out->lse_emu, &out->lse_bound);
    out->pass = out->o_pass && out->lse_pass;
}

static void check_backward(const fx_ctx *c, const fx_problem *p, const fx_case_host *h,
                           const fx_outputs *st, fx_bwd_check *out)
{
    int G = p->heads_q / p->heads_kv, d = p->head_dim;
    int groups_total = p->batch * p->heads_kv;
    double per_group = 8.0 * G * p->seqlen_q * (double)p->seqlen_k * d;
    memset(out, 0, sizeof *out);
    int n = groups_total;
    if (per_group * groups_total > FX_REF_BUDGET_BWD) {
        n = (int)(FX_REF_BUDGET_BWD / per_group);
        if (n > c->opt.ref_slices)
            n = c->opt.ref_slices;
        if (n < 1) {
            out->ran = false;
            out->pass = true;
            return;
        }
    }
    out->ran = true;
    out->groups = n;
    size_t nq_g = (size_t)G * p->seqlen_q * d, nk_g = (size_t)p->seqlen_k * d;
    double *rq = xmalloc(nq_g * sizeof(double)), *rk = xmalloc(nk_g * sizeof(double)),
           *rv = xmalloc(nk_g * sizeof(double));
    float *eq = xmalloc(nq_g * sizeof(float)), *ek = xmalloc(nk_g * sizeof(float)),
          *ev = xmalloc(nk_g * sizeof(float));
    fx_err_acc acc[3], emu[3];
    for (int t = 0; t < 3; ++t) {
        fx_err_acc_init(&acc[t]);
        fx_err_acc_init(&emu[t]);
    }
    for (int gi = 0; gi < n; ++gi) {
        int flat = n == groups_total ? gi
                   : gi == 0         ? 0
                   : gi == 1         ? groups_total - 1
                             : (int)(fx_rng_u64(p->seed, FX_RNG_STREAM_BWD_GROUPS, (uint64_t)gi) %
                                     (uint64_t)groups_total);
        int b = flat / p->heads_kv, hk = flat % p->heads_kv;
        fx_ref_backward_group(p, h->q, h->k, h->v, h->dout, b, hk, rq, rk, rv);
        fx_emu_backward_group(p, h->q, h->k, h->v, h->dout, b, hk, eq, ek, ev);
        for (int g = 0; g < G; ++g)
            for (int i = 0; i < p->seqlen_q; ++i)
                for (int col = 0; col < d; ++col) {
                    size_t r = ((size_t)g * p->seqlen_q + i) * d + col;
                    float x = st->dq_h[fx_offset(fx_layout_q(p), b, i, hk * G + g, col)];
                    fx_err_acc_add(&acc[0], x, rq[r]);
                    fx_err_acc_add(&emu[0], eq[r], rq[r]);
                }
        for (int j = 0; j < p->seqlen_k; ++j)
            for (int col = 0; col < d; ++col) {
                size_t r = (size_t)j * d + col;
                size_t x = fx_offset(fx_layout_kv(p), b, j, hk, col);
                fx_err_acc_add(&acc[1], st->dk_h[x], rk[r]);
                fx_err_acc_add(&emu[1], ek[r], rk[r]);
                fx_err_acc_add(&acc[2], st->dv_h[x], rv[r]);
                fx_err_acc_add(&emu[2], ev[r], rv[r]);
            }
    }
    free(rq);
    free(rk);
    free(rv);
    free(eq);
    free(ek);
    free(ev);
    out->pass = true;
    for (int t = 0; t < 3; ++t) {
        out->g[t] = fx_err_acc_result(&acc[t]);
        out->g_emu[t] = fx_err_acc_result(&emu[t]);
        out->g_pass[t] = fx_pass(out->g[t], out->g_emu[t], p->dtype, &out->bound[t]);
        out->pass &= out->g_pass[t];
    }
}

/* The stage against the previous stage over every element: passes when no NaN or inf
 * mismatch appears and max |x − prev| <= bound (the caller's bound: twice the reference's
 * bound B, since both stages meet B on the sampled rows, or FX_PREV_ONLY_ULPS). */
static bool compare_prev(const char *what, const float *x, const float *prev, size_t n,
                         double bound, double *max_abs, const char *prev_id, bool verbose)
{
    fx_err e = fx_compare_f32(x, prev, n);
    bool pass = e.nan_count == 0 && e.inf_mismatch == 0 && e.max_abs <= bound;
    if (verbose) {
        char buf[160];
        fx_err_format(e, buf, sizeof buf);
        printf("  %-3s vs %s (all %zu): %s  bound %.2e  %s\n", what, prev_id, n, buf, bound,
               pass ? "PASS" : "FAIL");
    }
    *max_abs = e.max_abs;
    return pass;
}

/* Nearest earlier stage whose capabilities cover p (DESIGN.md, "The previous-stage rule"). */
static const fx_stage *find_prev(const fx_ctx *c, const fx_problem *p, bool backward, char *why,
                                 size_t why_len)
{
    char tmp[256];
    why[0] = '\0';
    for (int i = c->n_stages - 2; i >= 0; --i) {
        const fx_stage *s = c->stages[i];
        if (fx_stage_supports(s, p, backward, tmp, sizeof tmp) == 0) {
            int need = s->caps.sm90a_only ? 90 : s->caps.min_sm;
            int cc = 10 * c->dev.cc_major + c->dev.cc_minor;
            if (cc >= need && (!s->caps.sm90a_only || cc == 90))
                return s;
            snprintf(tmp, sizeof tmp, "stage %s needs sm_%d%s", s->id, need,
                     s->caps.sm90a_only ? "a" : " or newer");
        }
        if (!why[0])
            snprintf(why, why_len, "%s", tmp);
    }
    if (!why[0])
        snprintf(why, why_len, "%s is the first stage", c->self->id);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* One case, end to end.                                                     */

typedef struct fx_case_result {
    bool pass;
    double err_ref, err_prev; /* max-abs of O (fwd) */
    double err_ref_bwd, err_prev_bwd;
    bool checked_bwd;
    const fx_stage *prev, *prev_bwd;
} fx_case_result;

/* Appends one row (FX_CSV_HEADER) to --csv FILE; false, with a message, when the file
 * (checked writable at start-up) cannot be opened any more: the run then fails. */
static bool csv_row(const fx_ctx *c, const fx_problem *p, const char *dir, const fx_timing *t,
                    double tflops, int clock, const fx_case_result *r, bool checked, bool bwd)
{
    FILE *f = fopen(c->opt.csv, "a");
    if (!f) {
        fprintf(stderr, "--csv: cannot append to %s: the %s row is lost\n", c->opt.csv, dir);
        return false;
    }
    fseek(f, 0, SEEK_END);
    if (ftell(f) == 0)
        fprintf(f, "%s\n", FX_CSV_HEADER);
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char dev[256];
    snprintf(dev, sizeof dev, "%s", c->dev.name);
    for (char *ch = dev; *ch; ++ch)
        if (*ch == ',')
            *ch = ' ';
    const fx_stage *prev = bwd ? r->prev_bwd : r->prev;
    double eref = bwd ? r->err_ref_bwd : r->err_ref, eprev = bwd ? r->err_prev_bwd : r->err_prev;
    fprintf(f, "%s,%s,%s,%d,%d,%s,%s,%d,%d,%d,%d,%d,%d,%s,%d,%d,%.5f,%.5f,%.5f,%.2f,", c->self->id,
            dir, dev, c->dev.sm_count, clock, FX_GIT_COMMIT, date, p->batch, p->seqlen_q,
            p->seqlen_k, p->heads_q, p->heads_kv, p->head_dim, fx_dtype_name(p->dtype),
            p->causal ? 1 : 0, t->repeats, t->median_ms, t->min_ms, t->max_ms, tflops);
    if (checked && eref >= 0 && (!bwd || r->checked_bwd))
        fprintf(f, "%.3e", eref);
    fprintf(f, ",");
    if (checked && prev && eprev >= 0)
        fprintf(f, "%.3e", eprev);
    fprintf(f, ",%s,%s\n", prev ? prev->id : "", checked ? (r->pass ? "pass" : "fail") : "skipped");
    return fclose(f) == 0;
}

static size_t count_nan(const float *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
        bad += isnan(x[i]) ? 1 : 0;
    return bad;
}

static bool bitwise_equal(const void *a, const void *b, size_t bytes)
{
    return memcmp(a, b, bytes) == 0;
}

/* --repeat N: N more runs of the stage must give bitwise-equal outputs (forward, and a
 * deterministic backward). Races that tools miss show up here (DESIGN.md, "Tests"). */
static int check_repeat(const fx_ctx *c, const fx_problem *p, const fx_inputs *in, bool backward,
                        const fx_outputs *first, bool verbose)
{
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nl = fx_numel_lse(p);
    bool bwd = backward && c->self->caps.deterministic_backward;
    fx_outputs again = {0};
    fx_run r;
    int bad = 0;
    for (int it = 0; it < c->opt.repeat - 1 && !bad; ++it) {
        if (run_stage(c->self, p, in, bwd, &again, &r) != cudaSuccess) {
            cudaFree(r.workspace);
            outputs_free(&again);
            return -1;
        }
        cudaFree(r.workspace);
        bad |= !bitwise_equal(again.o_h, first->o_h, nq * sizeof(float));
        bad |= !bitwise_equal(again.lse_h, first->lse_h, nl * sizeof(float));
        if (bwd) {
            bad |= !bitwise_equal(again.dq_h, first->dq_h, nq * sizeof(float));
            bad |= !bitwise_equal(again.dk_h, first->dk_h, nkv * sizeof(float));
            bad |= !bitwise_equal(again.dv_h, first->dv_h, nkv * sizeof(float));
        }
        if (bad && verbose)
            printf("  repeat %d of %d differs bitwise from the first run: FAIL\n", it + 2,
                   c->opt.repeat);
    }
    if (!bad && verbose)
        printf("  repeat: %d runs bitwise equal (%s)  PASS\n", c->opt.repeat,
               bwd ? "forward and backward" : "forward");
    outputs_free(&again);
    return bad;
}

/* Runs one case on the GPU. Returns 0 pass, 1 fail, 2 refused (message printed). */
static int run_case(fx_ctx *c, const fx_problem *p0, bool verbose, fx_case_result *res)
{
    fx_problem pb = *p0;
    const fx_problem *p = &pb;
    bool backward = c->opt.backward;
    char why[512], line[256];
    memset(res, 0, sizeof *res);
    res->err_ref = res->err_prev = res->err_ref_bwd = res->err_prev_bwd = -1;

    const int supported = fx_stage_supports(c->self, p, backward, why, sizeof why);
    if (supported != 0) {
        /* 77: this GPU lacks what the problem needs (a skip); else outside the stage. */
        fprintf(stderr, "%s\n", why);
        return supported == FX_EXIT_NO_GPU ? FX_EXIT_NO_GPU : FX_EXIT_USAGE;
    }
    fx_problem_format(p, line, sizeof line);
    if (verbose)
        printf("%s %s%s: %s\n", c->self->id, "fwd", backward ? "+bwd" : "", line);

    fx_case_host h;
    host_make(p, backward, &h);
    fx_inputs in;
    fx_outputs st = {0}, pv = {0}, pvb = {0};
    fx_run r = {0}, rp = {0}, rpb = {0};
    int rc = FX_EXIT_FAIL;
    bool pass = true, csv_ok = true; /* csv_ok: every --csv row was written */
    cudaError_t err = inputs_make(p, &h, &in);
    if (err == cudaErrorMemoryAllocation) {
        rc = FX_EXIT_USAGE; /* the bytes were named; a problem too large is a refusal */
        goto out;
    }
    if (err != cudaSuccess)
        goto out;
    err = run_stage(c->self, p, &in, backward, &st, &r);
    if (err == cudaErrorMemoryAllocation) {
        rc = FX_EXIT_USAGE;
        goto out;
    }
    if (err != cudaSuccess)
        goto out;

    /* Forward against the reference. */
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nl = fx_numel_lse(p);
    fx_fwd_check fc;
    if (c->opt.check) {
        check_forward(c, p, &h, &st, &fc);
        res->err_ref = fc.o.max_abs;
        pass &= fc.pass;
        size_t nan_all = count_nan(st.o_h, nq);
        const size_t nan_lse = count_nan(st.lse_h, nl); /* rows the reference did not sample */
        pass &= nan_all == 0 && nan_lse == 0;
        if (verbose) {
            char b1[160], b2[160];
            fx_err_format(fc.o, b1, sizeof b1);
            fx_err_format(fc.o_emu, b2, sizeof b2);
            printf("  O   vs fp64 (%zu rows): %s  bound %.2e  %s\n", fc.rows, b1, fc.o_bound,
                   fc.o_pass ? "PASS" : "FAIL");
            printf("      emulation in %s:    %s\n", fx_dtype_name(p->dtype), b2);
            fx_err_format(fc.lse, b1, sizeof b1);
            printf("  LSE vs fp64 (%zu rows): %s  bound %.2e  %s\n", fc.rows, b1, fc.lse_bound,
                   fc.lse_pass ? "PASS" : "FAIL");
            if (nan_all)
                printf("  O has %zu NaN over all %zu elements: FAIL\n", nan_all, nq);
            if (nan_lse)
                printf("  LSE has %zu NaN over all %zu rows: FAIL\n", nan_lse, nl);
        }

        /* Forward against the previous stage, every element. */
        res->prev = find_prev(c, p, false, why, sizeof why);
        if (res->prev) {
            if ((err = run_stage(res->prev, p, &in, false, &pv, &rp)) != cudaSuccess) {
                if (err != cudaErrorMemoryAllocation)
                    goto out;
                printf("  prev: n/a (%s does not fit in device memory)\n", res->prev->id);
                res->prev = NULL;
            } else {
                pass &= compare_prev("O", st.o_h, pv.o_h, nq, 2.0 * fc.o_bound, &res->err_prev,
                                     res->prev->id, verbose);
                double lse_prev;
                pass &= compare_prev("LSE", st.lse_h, pv.lse_h, nl, 2.0 * fc.lse_bound, &lse_prev,
                                     res->prev->id, verbose);
            }
        } else if (verbose) {
            printf("  prev: n/a (%s)\n", why);
        }
    }

    if (backward && c->opt.check) {
        fx_bwd_check bc;
        check_backward(c, p, &h, &st, &bc);
        res->checked_bwd = bc.ran;
        pass &= bc.pass;
        for (int t = 0; t < 3 && bc.ran; ++t) {
            if (bc.g[t].max_abs > res->err_ref_bwd)
                res->err_ref_bwd = bc.g[t].max_abs;
            if (verbose) {
                char b1[160], b2[160];
                fx_err_format(bc.g[t], b1, sizeof b1);
                fx_err_format(bc.g_emu[t], b2, sizeof b2);
                printf("  %-3s vs fp64 (%d groups): %s  bound %.2e  %s\n", grad_names[t], bc.groups,
                       b1, bc.bound[t], bc.g_pass[t] ? "PASS" : "FAIL");
                printf("      emulation in %s:    %s\n", fx_dtype_name(p->dtype), b2);
            }
        }
        if (!bc.ran && verbose)
            printf("  backward vs fp64: skipped (one group costs more than the reference budget;"
                   " checked against the previous stage only)\n");
        const float *mine[3] = {st.dq_h, st.dk_h, st.dv_h};
        size_t counts[3] = {nq, nkv, nkv};
        for (int t = 0; t < 3; ++t) {
            size_t nan_all = count_nan(mine[t], counts[t]);
            if (nan_all) {
                pass = false;
                if (verbose)
                    printf("  %s has %zu NaN over all %zu elements: FAIL\n", grad_names[t], nan_all,
                           counts[t]);
            }
        }
        res->prev_bwd = find_prev(c, p, true, why, sizeof why);
        if (res->prev_bwd) {
            if ((err = run_stage(res->prev_bwd, p, &in, true, &pvb, &rpb)) != cudaSuccess) {
                if (err != cudaErrorMemoryAllocation)
                    goto out;
                printf("  prev backward: n/a (%s does not fit in device memory)\n",
                       res->prev_bwd->id);
                res->prev_bwd = NULL;
            } else if (bc.ran) {
                const float *theirs[3] = {pvb.dq_h, pvb.dk_h, pvb.dv_h};
                for (int t = 0; t < 3; ++t) {
                    double m;
                    pass &= compare_prev(grad_names[t], mine[t], theirs[t], counts[t],
                                         2.0 * bc.bound[t], &m, res->prev_bwd->id, verbose);
                    if (m > res->err_prev_bwd)
                        res->err_prev_bwd = m;
                }
            } else {
                /* No reference bound: hold the two stages to each other within
                 * FX_PREV_ONLY_ULPS of the dtype at the gradient's largest magnitude
                 * (fx_check.h says why and what was measured). */
                const float *theirs[3] = {pvb.dq_h, pvb.dk_h, pvb.dv_h};
                for (int t = 0; t < 3; ++t) {
                    fx_err e = fx_compare_f32(mine[t], theirs[t], counts[t]);
                    double bound = FX_PREV_ONLY_ULPS * fx_slack(p->dtype, e.ref_max);
                    double m;
                    pass &= compare_prev(grad_names[t], mine[t], theirs[t], counts[t], bound, &m,
                                         res->prev_bwd->id, verbose);
                    if (m > res->err_prev_bwd)
                        res->err_prev_bwd = m;
                }
            }
        } else if (verbose) {
            printf("  prev backward: n/a (%s)\n", why);
        }
    }

    if (c->opt.repeat > 1) {
        int bad = check_repeat(c, p, &in, backward, &st, verbose);
        if (bad < 0)
            goto out;
        pass &= bad == 0;
    }

    res->pass = pass;
    if (c->opt.bench) {
        fx_timing t;
        const fx_time_config tc = {.stream = 0,
                                   .l2_bytes = c->dev.l2_bytes,
                                   .warmup = c->opt.warmup,
                                   .repeats = c->opt.iters,
                                   .spin_us = FX_SPIN_US};
        if (FX_CUDA(fx_time(launch_fwd, &r, &tc, &t)))
            goto out;
        int clock = fx_sm_clock_mhz(c->dev.ordinal);
        double tf = fx_flops_forward(p) / (t.median_ms * 1e-3) / 1e12;
        char method[256];
        fx_timing_describe(&t, method, sizeof method);
        printf("  timing: %s\n", method);
        printf("  time fwd: %.3f ms (min %.3f, max %.3f, %d repeats)  %.1f TFLOP/s  SM %d MHz\n",
               t.median_ms, t.min_ms, t.max_ms, t.repeats, tf, clock);
        if (c->opt.csv && !csv_row(c, p, "fwd", &t, tf, clock, res, c->opt.check, false))
            csv_ok = false;
        if (backward) {
            if (FX_CUDA(fx_time(launch_bwd, &r, &tc, &t)))
                goto out;
            clock = fx_sm_clock_mhz(c->dev.ordinal);
            tf = fx_flops_backward(p) / (t.median_ms * 1e-3) / 1e12;
            printf(
                "  time bwd: %.3f ms (min %.3f, max %.3f, %d repeats)  %.1f TFLOP/s  SM %d MHz\n",
                t.median_ms, t.min_ms, t.max_ms, t.repeats, tf, clock);
            /* The backward row counts as checked when the reference or the previous
             * stage held it to a bound. */
            if (c->opt.csv && !csv_row(c, p, "bwd", &t, tf, clock, res,
                                       c->opt.check && (res->checked_bwd || res->prev_bwd), true))
                csv_ok = false;
        }
    }
    rc = pass && csv_ok ? FX_EXIT_OK : FX_EXIT_FAIL;
    if (verbose && c->opt.check)
        printf("  %s\n", pass ? "PASS" : "FAIL");
out:
    cudaFree(r.workspace);
    cudaFree(rp.workspace);
    cudaFree(rpb.workspace);
    outputs_free(&st);
    outputs_free(&pv);
    outputs_free(&pvb);
    inputs_free(&in);
    host_free(&h);
    /* A sticky error (an illegal address) poisons the context: report it as a failure. */
    err = cudaGetLastError();
    if (err != cudaSuccess) {
        fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));
        rc = FX_EXIT_FAIL;
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The CPU model path (--cpu): no GPU needed.                                */

static int run_cpu_case(fx_ctx *c, const fx_problem *p, bool verbose)
{
    const fx_stage *s = c->self;
    char line[256];
    if (!s->cpu_model) {
        fprintf(stderr, "stage %s has no CPU model\n", s->id);
        return FX_EXIT_USAGE;
    }
    bool backward = c->opt.backward && s->cpu_model->backward;
    /* The model computes every row in fp32 on the host (the reference only samples):
     * the forward, plus 2.5× it for the backward (fx_flops_backward). */
    double model_flops = fx_flops_forward(p) + (backward ? fx_flops_backward(p) : 0.0);
    if (model_flops > FX_CPU_MODEL_SLOW_FLOPS)
        fprintf(stderr,
                "note: the CPU model runs %.2g FLOP on this machine's cores: minutes at this "
                "size (try --batch 1 --seqlen 256 --heads 2)\n",
                model_flops);
    fx_problem_format(p, line, sizeof line);
    printf("%s cpu model %s%s: %s\n", s->id, "fwd", backward ? "+bwd" : "", line);
    fx_case_host h;
    host_make(p, backward, &h);
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nl = fx_numel_lse(p);
    fx_outputs st = {0};
    st.o_h = xmalloc(nq * sizeof(float));
    st.lse_h = xmalloc(nl * sizeof(float));
    s->cpu_model->forward(p, h.q, h.k, h.v, st.o_h, st.lse_h);
    fx_fwd_check fc;
    check_forward(c, p, &h, &st, &fc);
    bool pass = fc.pass;
    if (verbose) {
        char b1[160];
        fx_err_format(fc.o, b1, sizeof b1);
        printf("  O   vs fp64 (%zu rows): %s  bound %.2e\n", fc.rows, b1, fc.o_bound);
        fx_err_format(fc.lse, b1, sizeof b1);
        printf("  LSE vs fp64 (%zu rows): %s  bound %.2e\n", fc.rows, b1, fc.lse_bound);
    }
    if (backward) {
        st.dq_h = xmalloc(nq * sizeof(float));
        st.dk_h = xmalloc(nkv * sizeof(float));
        st.dv_h = xmalloc(nkv * sizeof(float));
        s->cpu_model->backward(p, h.q, h.k, h.v, st.o_h, st.lse_h, h.dout, st.dq_h, st.dk_h,
                               st.dv_h);
        fx_bwd_check bc;
        check_backward(c, p, &h, &st, &bc);
        pass &= bc.pass;
        for (int t = 0; t < 3 && bc.ran && verbose; ++t) {
            char b1[160];
            fx_err_format(bc.g[t], b1, sizeof b1);
            printf("  %-3s vs fp64 (%d groups): %s  bound %.2e\n", grad_names[t], bc.groups, b1,
                   bc.bound[t]);
        }
        if (!bc.ran)
            printf("  backward vs fp64: skipped (too large for the reference budget)\n");
    }
    printf("  %s\n", pass ? "PASS" : "FAIL");
    free(st.o_h);
    free(st.lse_h);
    free(st.dq_h);
    free(st.dk_h);
    free(st.dv_h);
    host_free(&h);
    return pass ? FX_EXIT_OK : FX_EXIT_FAIL;
}

/* ------------------------------------------------------------------------ */
/* The GPU test matrix, generated from the capabilities (DESIGN.md, "Tests").  */

typedef struct fx_shape {
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv;
    bool causal;
    bool needs_gqa;
    const char *why;
} fx_shape;

/* The first FX_MATRIX_MASK_SHAPES shapes vary only the masking (tails, causal with
 * seqlen_q = seqlen_k and both ways unequal) and run at every head_dim; the rest run
 * at the first and last head_dim of each dtype, to keep the matrix seconds. */
enum { FX_MATRIX_MASK_SHAPES = 4 };
/* Runs of the first case of each dtype under --repeat (bitwise equal, DESIGN.md "Tests"). */
enum { FX_MATRIX_REPEAT = 3 };

static const fx_shape matrix_shapes[] = {
    {2, 113, 113, 2, 2, false, false, "tails: seqlen not a multiple of any tile"},
    {2, 113, 113, 2, 2, true, false, "causal, tails"},
    {1, 65, 200, 4, 2, true, true, "causal, seqlen_q < seqlen_k, GQA"},
    {1, 200, 65, 2, 2, true, false, "causal, seqlen_q > seqlen_k: rows that see no key"},
    {1, 200, 65, 2, 2, false, false, "seqlen_q > seqlen_k"},
    {1, 128, 128, 4, 1, false, true, "MQA"},
    {1, 1, 1, 1, 1, false, false, "length 1, batch·heads = 1"},
    {1, 1, 300, 1, 1, true, false, "one query row (decode), causal"},
};

/* Representatives of "multiples of m up to max": a non-power of two, the common sizes,
 * FA3's largest, and the smallest. */
static const int matrix_head_dim_candidates[] = {40, 64, 96, 128, 256, 8};
_Static_assert(sizeof matrix_head_dim_candidates / sizeof(int) <= FX_MAX_HEAD_DIMS,
               "the matrix's head_dims fit the array of a caps' explicit list");

/* The head_dims the matrix runs, into out[FX_MAX_HEAD_DIMS]: the caps' list, or the
 * candidates that are multiples of head_dim_multiple up to head_dim_max. */
static int matrix_head_dims(const fx_caps *c, int *out)
{
    if (c->n_head_dims > 0) {
        memcpy(out, c->head_dims, (size_t)c->n_head_dims * sizeof(int));
        return c->n_head_dims;
    }
    int n = 0;
    for (size_t i = 0; i < sizeof matrix_head_dim_candidates / sizeof(int); ++i) {
        const int d = matrix_head_dim_candidates[i];
        if (c->head_dim_multiple > 0 && d % c->head_dim_multiple == 0 && d <= c->head_dim_max)
            out[n++] = d;
    }
    return n;
}

static int run_matrix(fx_ctx *c)
{
    const fx_caps *caps = &c->self->caps;
    int dims[FX_MAX_HEAD_DIMS];
    int n_dims = matrix_head_dims(caps, dims);
    int passed = 0, failed = 0, skipped = 0, index = 0;
    fx_options saved = c->opt;
    c->opt.check = true;
    c->opt.bench = false;
    c->opt.csv = NULL;
    printf("GPU matrix of stage %s on %s (sm_%d%d, %d SMs)\n", c->self->id, c->dev.name,
           c->dev.cc_major, c->dev.cc_minor, c->dev.sm_count);
    for (int dt = 0; dt < FX_DTYPE_COUNT; ++dt) {
        if (!(caps->dtypes & FX_DTYPE_BIT(dt)))
            continue;
        for (int di = 0; di < n_dims; ++di) {
            for (size_t si = 0; si < sizeof matrix_shapes / sizeof matrix_shapes[0]; ++si) {
                const fx_shape *sh = &matrix_shapes[si];
                if (si >= FX_MATRIX_MASK_SHAPES && di != 0 && di != n_dims - 1)
                    continue;
                if ((sh->causal && !caps->causal) || (sh->needs_gqa && !caps->gqa))
                    continue;
                fx_problem p = fx_problem_default();
                p.batch = sh->batch;
                p.seqlen_q = sh->seqlen_q;
                p.seqlen_k = sh->seqlen_k;
                p.heads_q = sh->heads_q;
                p.heads_kv = sh->heads_kv;
                p.causal = sh->causal;
                p.head_dim = dims[di];
                p.dtype = (fx_dtype)dt;
                p.softmax_scale = 0;
                p.seed = saved.fuzz ? fx_fresh_seed() : 1000u + (uint64_t)index;
                p.dist = (fx_dist)(index % FX_DIST_COUNT);
                ++index;
                char why[256];
                if (fx_problem_validate(&p, why, sizeof why) != 0) {
                    printf("  skip: %s\n", why);
                    ++skipped;
                    continue;
                }
                c->opt.backward = caps->backward;
                c->opt.repeat = (si == 0 && di == 0) ? FX_MATRIX_REPEAT : 1;
                fx_case_result res;
                char line[256];
                fx_problem_format(&p, line, sizeof line);
                int rc = run_case(c, &p, false, &res);
                /* The matrix holds only shapes the capabilities cover: a refusal of one
                 * (exit 2, from check_problem) is a regression, not a skip; a shape this GPU
                 * lacks the shared memory for (77) is a skip. */
                const char *verdict = rc == 0 ? "PASS" : rc == FX_EXIT_NO_GPU ? "SKIP" : "FAIL";
                printf("  %-4s %s%s  [%s]  O err %.2e", verdict, line,
                       c->opt.backward ? " +bwd" : "", sh->why, res.err_ref);
                if (res.prev)
                    printf(" (vs %s %.2e)", res.prev->id, res.err_prev);
                if (c->opt.backward && res.checked_bwd)
                    printf("  grad err %.2e", res.err_ref_bwd);
                printf("\n");
                if (rc == 0)
                    ++passed;
                else if (rc == FX_EXIT_NO_GPU)
                    ++skipped;
                else {
                    ++failed;
                    /* Re-run verbosely so the log says which tensor failed and by how much. */
                    run_case(c, &p, true, &res);
                }
                fflush(stdout);
            }
        }
    }
    c->opt = saved;
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? FX_EXIT_FAIL : FX_EXIT_OK;
}

/* ------------------------------------------------------------------------ */

static void usage(const fx_ctx *c, FILE *f)
{
    char caps[1024];
    fprintf(f,
            "usage: stage_%s [options]\n\n"
            "stage %s: %s\n\n",
            c->self->id, c->self->id, c->self->summary);
    fx_caps_describe(c->self, caps, sizeof caps);
    fprintf(f, "capabilities:\n%s\n", caps);
    if (c->n_stages > 1) {
        fprintf(f, "checks against:");
        for (int i = 0; i < c->n_stages - 1; ++i)
            fprintf(f, " %s", c->stages[i]->id);
        fprintf(f, " (the nearest that covers the case), and the fp64 reference\n\n");
    } else {
        fprintf(f, "checks against: the fp64 reference\n\n");
    }
    /* The defaults printed are the ones fx_options_default sets. */
    fx_options d;
    fx_options_default(&d);
    const fx_problem *dp = &d.problem;
    fprintf(f,
            "problem (default: batch %d, seqlen %d, heads %d, head_dim %d, %s):\n"
            "  --batch N  --seqlen N (q and k)  --seqlen-q N  --seqlen-k N\n"
            "  --heads N (q and kv)  --heads-q N  --heads-kv N  --head-dim N\n"
            "  --dtype bf16|fp16  --causal (bottom-right)  --scale F (default 1/sqrt(head_dim))\n"
            "  --seed N (decimal or 0x hex; %llu)  --dist normal|outliers|large-logits\n",
            dp->batch, dp->seqlen_q, dp->heads_q, dp->head_dim, fx_dtype_name(dp->dtype),
            (unsigned long long)dp->seed);
    fprintf(f,
            "modes (default --check):\n"
            "  --check      compare with the fp64 reference (pass rule of common/fx_check.h)\n"
            "               and with the previous stage\n"
            "  --bwd        also run and check the backward\n"
            "  --bench      time with CUDA events: --warmup N (%d), --iters N (%d, at most %d),\n"
            "               median\n"
            "  --csv FILE   append benchmark rows to FILE\n"
            "  --repeat N   run N times; outputs must be bitwise equal\n"
            "  --fuzz N     N checks, each on a fresh seed (printed)\n"
            "  --matrix     the GPU test matrix generated from the capabilities\n"
            "  --cpu        run the stage's CPU model instead of the GPU (slow: give a small\n"
            "               problem, e.g. --batch 1 --seqlen 256 --heads 2)\n"
            "  --ref-slices N  (batch, head) slices the reference samples on large problems (%d)\n"
            "exit codes: 0 ok, 1 check failed or CUDA error, 2 bad usage or outside the\n"
            "capabilities, 77 no suitable GPU (FX_REQUIRE_GPU=1 makes that 1)\n",
            d.warmup, d.iters, FX_MAX_ITERS, d.ref_slices);
}

int fx_main(int argc, char **argv, const fx_stage *const *stages, int n_stages)
{
    fx_ctx c;
    memset(&c, 0, sizeof c);
    c.stages = stages;
    c.n_stages = n_stages;
    c.self = stages[n_stages - 1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    char program[96];
    snprintf(program, sizeof program, "stage_%s", c.self->id);
    fx_msg_set_program(program);

    char why[512];
    fx_options_default(&c.opt);
    if (fx_options_parse(argc, argv, &c.opt, why, sizeof why) != 0) {
        fprintf(stderr, "stage_%s: %s\n", c.self->id, why);
        return FX_EXIT_USAGE;
    }
    if (c.opt.help) {
        usage(&c, stdout);
        return FX_EXIT_OK;
    }
    if (!c.opt.check && !c.opt.bench && !c.opt.matrix)
        c.opt.check = true;

    if (c.opt.cpu) {
        /* The CPU model keeps the stage's capabilities: outside them it is a usage error.
         * A refusal for this GPU's resources (77) does not concern the CPU model. */
        const int supported =
            fx_stage_supports(c.self, &c.opt.problem, c.opt.backward, why, sizeof why);
        if (supported != 0 && supported != FX_EXIT_NO_GPU) {
            fprintf(stderr, "%s\n", why);
            return FX_EXIT_USAGE;
        }
        if (c.opt.backward && c.self->cpu_model && !c.self->cpu_model->backward) {
            fprintf(stderr, "stage %s: its CPU model has no backward\n", c.self->id);
            return FX_EXIT_USAGE;
        }
        int runs = c.opt.fuzz ? c.opt.fuzz : 1, worst = 0;
        for (int i = 0; i < runs; ++i) {
            fx_problem p = c.opt.problem;
            if (c.opt.fuzz)
                p.seed = fx_fresh_seed();
            int rc = run_cpu_case(&c, &p, true);
            if (rc > worst)
                worst = rc;
        }
        return worst;
    }

    /* Rows must not be lost after minutes of timing: the CSV file must open now. */
    if (c.opt.csv) {
        FILE *existing = fopen(c.opt.csv, "r");
        if (existing)
            fclose(existing);
        FILE *f = fopen(c.opt.csv, "a");
        if (!f) {
            fprintf(stderr, "stage_%s: --csv: cannot open %s for appending\n", c.self->id,
                    c.opt.csv);
            return FX_EXIT_USAGE;
        }
        fclose(f);
        /* Only the test of writability: a run that writes no row leaves no empty file. */
        if (!existing)
            remove(c.opt.csv);
    }
    /* A problem outside the capabilities is a usage error even without a GPU; one this
     * GPU lacks the resources for is a skip, as for no GPU at all. */
    if (!c.opt.matrix) {
        const int supported =
            fx_stage_supports(c.self, &c.opt.problem, c.opt.backward, why, sizeof why);
        if (supported == FX_EXIT_NO_GPU) {
            printf("stage %s: skipped: %s\n", c.self->id, why);
            return fx_exit_code_no_gpu();
        }
        if (supported != 0) {
            fprintf(stderr, "%s\n", why);
            return FX_EXIT_USAGE;
        }
    }
    int rc = fx_device_open(c.self, &c.dev, why, sizeof why);
    if (rc == FX_EXIT_NO_GPU) {
        printf("stage %s: skipped: %s\n", c.self->id, why);
        return fx_exit_code_no_gpu();
    }
    if (rc != 0) {
        fprintf(stderr, "stage %s: %s\n", c.self->id, why);
        return FX_EXIT_FAIL;
    }
    if (c.opt.matrix)
        return run_matrix(&c);

    int runs = c.opt.fuzz ? c.opt.fuzz : 1, worst = 0;
    for (int i = 0; i < runs; ++i) {
        fx_problem p = c.opt.problem;
        if (c.opt.fuzz)
            p.seed = fx_fresh_seed();
        fx_case_result res;
        rc = run_case(&c, &p, true, &res);
        if (rc == FX_EXIT_USAGE)
            return rc;
        if (rc > worst)
            worst = rc;
    }
    return worst;
}
