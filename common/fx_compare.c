/*
 * fx_compare.c — the checks of one case (fx_compare.h): the reference's sample, the
 * forward and backward against fp64, the stage against its previous stage.
 */
#include "fx_compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_host.h"
#include "fx_reference.h"

/* Sampled forward rows per (batch, head) slice: the first and last rows (the causal
 * edges and the tails) and evenly spaced ones between. */
#define FX_EDGE_ROWS 8
/* Streams of fx_rng_u64 (seeded by the problem's seed) that pick the sampled forward
 * slices and backward groups: apart from the input tensors' streams (fx_host.c). */
#define FX_RNG_STREAM_FWD_SLICES 99
#define FX_RNG_STREAM_BWD_GROUPS 98

const char *const fx_grad_names[3] = {"dQ", "dK", "dV"};

/* The (batch, head) slices and the rows the forward reference evaluates: task t is row
 * rows[t] of slice slice[t]. A variable-length batch's slices have their own lengths, so
 * each slice has its own rows (all of them, or the edges and evenly spaced ones). */
typedef struct fx_sample {
    int n_slices;
    int b[FX_MAX_REF_SLICES], h[FX_MAX_REF_SLICES];
    size_t n_tasks;
    int *slice, *rows; /* [n_tasks] */
} fx_sample;

/* The rows of a slice of `len` rows when `want` are asked for: all, or the first and last
 * FX_EDGE_ROWS and evenly spaced ones between (sorted, distinct). Writes them to out (NULL:
 * only counts) and returns how many. */
static int slice_rows(int len, int want, int *out)
{
    if (want >= len) {
        for (int i = 0; out && i < len; ++i)
            out[i] = i;
        return len;
    }
    if (!out)
        return want;
    int k = 0;
    for (int i = 0; i < FX_EDGE_ROWS; ++i)
        out[k++] = i;
    int middle = want - 2 * FX_EDGE_ROWS;
    int lo = FX_EDGE_ROWS, hi = len - FX_EDGE_ROWS;
    for (int i = 0; i < middle; ++i)
        out[k++] = lo + (int)(((long long)(hi - lo) * i) / (middle > 0 ? middle : 1));
    for (int i = 0; i < FX_EDGE_ROWS; ++i)
        out[k++] = len - FX_EDGE_ROWS + i;
    return want;
}

static void sample_forward(const fx_problem *p, int max_slices, fx_sample *s)
{
    /* Only sequences with query rows have slices to sample (in a fixed-length batch, all). */
    int *seqs = fx_xmalloc((size_t)p->batch * sizeof(int)), n_seqs = 0;
    double rows_all = 0;
    for (int b = 0; b < p->batch; ++b) {
        if (fx_seq_len_q(p, b) > 0)
            seqs[n_seqs++] = b;
        rows_all += fx_seq_len_q(p, b);
    }
    /* A varlen batch's seqlen_k (its largest) may be 0: count a row as one key at least. */
    double per_row = (double)(p->seqlen_k > 0 ? p->seqlen_k : 1) * (p->head_dim + fx_head_dim_v(p));
    double all = per_row * rows_all * p->heads_q;
    int slices_total = n_seqs * p->heads_q;
    memset(s, 0, sizeof *s);
    if (all <= FX_REF_BUDGET_FWD && slices_total <= FX_MAX_REF_SLICES) {
        s->n_slices = slices_total;
        for (int i = 0; i < slices_total; ++i) {
            s->b[i] = seqs[i / p->heads_q];
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
            s->b[i] = seqs[flat / p->heads_q];
            s->h[i] = flat % p->heads_q;
        }
        s->n_slices = max_slices;
    }
    free(seqs);
    int want = s->n_slices ? (int)(FX_REF_BUDGET_FWD / (per_row * s->n_slices)) : 0;
    if (want < 2 * FX_EDGE_ROWS)
        want = 2 * FX_EDGE_ROWS;
    s->n_tasks = 0;
    for (int sl = 0; sl < s->n_slices; ++sl)
        s->n_tasks += (size_t)slice_rows(fx_seq_len_q(p, s->b[sl]), want, NULL);
    s->slice = fx_xmalloc(s->n_tasks * sizeof(int));
    s->rows = fx_xmalloc(s->n_tasks * sizeof(int));
    size_t t = 0;
    for (int sl = 0; sl < s->n_slices; ++sl) {
        int n = slice_rows(fx_seq_len_q(p, s->b[sl]), want, s->rows + t);
        for (int i = 0; i < n; ++i)
            s->slice[t + i] = sl;
        t += (size_t)n;
    }
}

/* Sequence b of p as a fixed-length problem of batch 1 and its inputs as views of h's
 * (fx_seq_problem): the reference and the emulation then run on it as on any problem. */
typedef struct fx_seq_view {
    fx_problem p;
    const float *q, *k, *v, *dout;
} fx_seq_view;

static fx_seq_view seq_view(const fx_problem *p, const fx_case_host *h, int b)
{
    const fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p);
    const size_t oq = fx_offset(lq, b, fx_seq_start_q(p, b), 0, 0);
    const size_t ok = fx_offset(lkv, b, fx_seq_start_k(p, b), 0, 0);
    const size_t ov = fx_offset(fx_layout_v(p), b, fx_seq_start_k(p, b), 0, 0);
    const size_t oo = fx_offset(fx_layout_o(p), b, fx_seq_start_q(p, b), 0, 0);
    fx_seq_view v = {fx_seq_problem(p, b), h->q + oq, h->k + ok, h->v + ov,
                     h->dout ? h->dout + oo : NULL};
    return v;
}

void fx_check_forward(const fx_problem *p, int ref_slices, const fx_case_host *h,
                      const fx_outputs *st, fx_fwd_check *out)
{
    fx_sample s;
    sample_forward(p, ref_slices, &s);
    const int d = fx_head_dim_v(p); /* O's columns */
    const fx_layout lo = fx_layout_o(p);
    fx_err_acc o, l, oe, le;
    fx_err_acc_init(&o);
    fx_err_acc_init(&l);
    fx_err_acc_init(&oe);
    fx_err_acc_init(&le);
    /* Rows are independent: evaluate all sampled rows (in parallel where OpenMP is
     * there), then accumulate the metrics serially in a fixed order. */
    size_t total = s.n_tasks;
    double *ro = fx_xmalloc(total * d * sizeof(double)), *rl = fx_xmalloc(total * sizeof(double));
    float *eo = fx_xmalloc(total * d * sizeof(float)), *el = fx_xmalloc(total * sizeof(float));
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 4)
#endif
    for (long long t = 0; t < (long long)total; ++t) {
        int sl = s.slice[t], i = s.rows[t];
        const fx_seq_view v = seq_view(p, h, s.b[sl]);
        fx_ref_forward_rows(&v.p, v.q, v.k, v.v, 0, s.h[sl], i, i + 1, ro + t * d, rl + t);
        fx_emu_forward_rows(&v.p, v.q, v.k, v.v, 0, s.h[sl], i, i + 1, eo + t * d, el + t);
    }
    for (size_t t = 0; t < total; ++t) {
        int sl = s.slice[t], i = s.rows[t], b = s.b[sl], hh = s.h[sl];
        const int row = fx_seq_start_q(p, b) + i;
        for (int col = 0; col < d; ++col) {
            float x = st->o_h[fx_offset(lo, b, row, hh, col)];
            fx_err_acc_add(&o, x, ro[t * d + col]);
            fx_err_acc_add(&oe, eo[t * d + col], ro[t * d + col]);
        }
        float xl = st->lse_h[fx_lse_index(p, b, hh, i)];
        fx_err_acc_add(&l, xl, rl[t]);
        fx_err_acc_add(&le, el[t], rl[t]);
    }
    free(rl);
    free(el);
    free(ro);
    free(eo);
    free(s.rows);
    free(s.slice);
    out->o = fx_err_acc_result(&o);
    out->lse = fx_err_acc_result(&l);
    out->o_emu = fx_err_acc_result(&oe);
    out->lse_emu = fx_err_acc_result(&le);
    out->rows = total;
    out->o_pass = fx_pass(out->o, out->o_emu, p->dtype, &out->o_bound);
    out->lse_pass = fx_pass_lse(out->lse, out->lse_emu, &out->lse_bound);
    out->pass = out->o_pass && out->lse_pass;
}

void fx_check_backward(const fx_problem *p, int ref_slices, const fx_case_host *h,
                       const fx_outputs *st, fx_bwd_check *out)
{
    int G = p->heads_q / p->heads_kv, d = p->head_dim;
    int groups_total = p->batch * p->heads_kv;
    double per_group = 8.0 * G * p->seqlen_q * (double)p->seqlen_k * d;
    memset(out, 0, sizeof *out);
    int n = groups_total;
    if (per_group * groups_total > FX_REF_BUDGET_BWD) {
        n = (int)(FX_REF_BUDGET_BWD / per_group);
        if (n > ref_slices)
            n = ref_slices;
        if (n < 1) {
            out->ran = false;
            out->pass = true;
            return;
        }
    }
    out->ran = true;
    out->groups = n;
    size_t nq_g = (size_t)G * p->seqlen_q * d, nk_g = (size_t)p->seqlen_k * d;
    double *rq = fx_xmalloc(nq_g * sizeof(double)), *rk = fx_xmalloc(nk_g * sizeof(double)),
           *rv = fx_xmalloc(nk_g * sizeof(double));
    float *eq = fx_xmalloc(nq_g * sizeof(float)), *ek = fx_xmalloc(nk_g * sizeof(float)),
          *ev = fx_xmalloc(nk_g * sizeof(float));
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
        /* Sequence b on its own (a view: fx_seq_problem), its rows at their packed offsets. */
        const fx_seq_view v = seq_view(p, h, b);
        const int sq = v.p.seqlen_q, sk = v.p.seqlen_k;
        const int q0 = fx_seq_start_q(p, b), k0 = fx_seq_start_k(p, b);
        fx_ref_backward_group(&v.p, v.q, v.k, v.v, v.dout, 0, hk, rq, rk, rv);
        fx_emu_backward_group(&v.p, v.q, v.k, v.v, v.dout, 0, hk, eq, ek, ev);
        for (int g = 0; g < G; ++g)
            for (int i = 0; i < sq; ++i)
                for (int col = 0; col < d; ++col) {
                    size_t r = ((size_t)g * sq + i) * d + col;
                    float x = st->dq_h[fx_offset(fx_layout_q(p), b, q0 + i, hk * G + g, col)];
                    fx_err_acc_add(&acc[0], x, rq[r]);
                    fx_err_acc_add(&emu[0], eq[r], rq[r]);
                }
        for (int j = 0; j < sk; ++j)
            for (int col = 0; col < d; ++col) {
                size_t r = (size_t)j * d + col;
                size_t x = fx_offset(fx_layout_kv(p), b, k0 + j, hk, col);
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

bool fx_compare_prev(fx_err e, double bound, const char *what, const char *prev_id, bool verbose)
{
    bool pass = e.nan_count == 0 && e.inf_mismatch == 0 && e.max_abs <= bound;
    if (verbose) {
        char buf[160];
        fx_err_format(e, buf, sizeof buf);
        printf("  %-3s vs %s (all %zu): %s  bound %.2e  %s\n", what, prev_id, e.n, buf, bound,
               pass ? "PASS" : "FAIL");
    }
    return pass;
}

void fx_place_seq_forward(const fx_problem *p, int b, const float *o_seq, const float *lse_seq,
                          float *o, float *lse)
{
    const int len = fx_seq_len_q(p, b);
    const fx_layout lo = fx_layout_o(p);
    /* The sub-problem's rows have the packed row stride: its O is one block of rows. */
    const size_t first = fx_offset(lo, b, fx_seq_start_q(p, b), 0, 0);
    const size_t n = (size_t)len * (size_t)lo.row_stride;
    for (size_t x = 0; x < n; ++x)
        o[first + x] = o_seq ? o_seq[x] : 0.0f;
    for (int h = 0; h < p->heads_q; ++h)
        for (int i = 0; i < len; ++i)
            lse[fx_lse_index(p, b, h, i)] = lse_seq ? lse_seq[(size_t)h * len + i] : -INFINITY;
}

bool fx_prev_per_seq(const fx_stage *prev, const fx_problem *p)
{
    return p->varlen && !prev->caps.varlen;
}

/* Whether stage s covers p: its capabilities do, or (the forward of a varlen batch on a
 * fixed-length stage) they cover every sequence that has queries and keys, each as the
 * fixed-length problem of batch 1 fx_seq_problem makes. 0, or fx_stage_supports's code
 * with the reason (naming the sequence) in why. */
static int prev_covers(const fx_stage *s, const fx_problem *p, bool backward, char *why,
                       size_t why_len)
{
    if (!fx_prev_per_seq(s, p) || backward)
        return fx_stage_supports(s, p, backward, why, why_len);
    for (int b = 0; b < p->batch; ++b) {
        const fx_problem sp = fx_seq_problem(p, b);
        if (sp.seqlen_q == 0 || sp.seqlen_k == 0)
            continue; /* nothing to run: fx_case.c expects O = 0, LSE = -inf there */
        char tmp[256];
        const int rc = fx_stage_supports(s, &sp, false, tmp, sizeof tmp);
        if (rc != 0) {
            snprintf(why, why_len, "sequence %d (sq=%d sk=%d) as a fixed-length batch: %s", b,
                     sp.seqlen_q, sp.seqlen_k, tmp);
            return rc;
        }
    }
    return 0;
}

const fx_stage *fx_find_prev(const fx_ctx *c, const fx_problem *p, bool backward, char *why,
                             size_t why_len)
{
    char tmp[384];
    why[0] = '\0';
    for (int i = c->n_stages - 2; i >= 0; --i) {
        const fx_stage *s = c->stages[i];
        if (prev_covers(s, p, backward, tmp, sizeof tmp) == 0) {
            int need = s->caps.sm90a_only ? 90 : s->caps.min_sm;
            int cc = 10 * c->dev.cc_major + c->dev.cc_minor;
            if (cc >= need && (!s->caps.sm90a_only || cc == 90))
                return s;
            snprintf(tmp, sizeof tmp, "needs sm_%d%s", need,
                     s->caps.sm90a_only ? "a" : " or newer");
        }
        if (!why[0])
            snprintf(why, why_len, "%s: %s", s->id, tmp);
    }
    if (!why[0])
        snprintf(why, why_len, "%s is the first stage", c->self->id);
    return NULL;
}
