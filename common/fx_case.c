/*
 * fx_case.c — one case, end to end (fx_case.h).
 *
 * One case = one problem, run through this program's stage and, on the same inputs,
 * through the previous stage (the nearest earlier one whose capabilities cover the
 * case). The stage is compared with the fp64 reference under the pass rule of
 * fx_check.h on sampled rows (forward) or whole GQA groups (backward), and with the
 * previous stage over every element (fx_compare.h). Outputs are poisoned with NaN before
 * each launch, so an element a kernel never writes fails the check (fx_run.h).
 */
#include "fx_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_compare.h"
#include "fx_csv.h"
#include "fx_fp8_case.h"
#include "fx_msg.h"
#include "fx_run.h"
#include "fx_save.h"

/* Above this many FLOPs the CPU model (fp32, a few GFLOP/s per core) takes minutes: say so. */
#define FX_CPU_MODEL_SLOW_FLOPS 2e10
/* The rate the size note assumes for the CPU model and its check, FLOP/s: about what a
 * two-core machine gives (the CI's). The note gives an order of magnitude, not a promise. */
#define FX_CPU_MODEL_FLOPS_PER_S 1.5e9

/* seconds as "N minutes", "N hours" or "N days", whichever unit gives a number from 1 up. */
static void duration_text(double seconds, char *buf, size_t len)
{
    if (seconds < 3600)
        snprintf(buf, len, "%.0f minutes", fmax(1.0, seconds / 60));
    else if (seconds < 86400)
        snprintf(buf, len, "%.0f hours", seconds / 3600);
    else
        snprintf(buf, len, "%.0f days", seconds / 86400);
}

static size_t count_nan(const float *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
        bad += isnan(x[i]) ? 1 : 0;
    return bad;
}

/* ---- the forward's checks ------------------------------------------------------------ */

/* What a per-sequence run of the previous stage did (prev_forward_per_seq). */
typedef struct seq_counts {
    int ran, no_keys, no_queries;
} seq_counts;

/* The previous stage `prev` (no caps.varlen) on the variable-length batch in->p, sequence
 * by sequence: each sequence with query rows and keys runs as the fixed-length problem of
 * batch 1 fx_seq_problem makes, on views of the packed device inputs (pointer offsets at
 * its first row, the packed row strides), into its own outputs, which are then placed at
 * the sequence's packed rows of o_h [fx_numel_o] and lse_h [fx_numel_lse] (LSE head h of
 * sequence b at h·total_q + cu_seqlens_q[b]). A sequence with no key cannot run on a
 * fixed-length stage (seqlen_k >= 1): its expected rows are O = 0 and LSE = -inf, as the
 * contract says. Elements no sequence places stay NaN and fail the comparison. Returns a
 * CUDA error (cudaErrorMemoryAllocation after naming the bytes). */
static cudaError_t prev_forward_per_seq(const fx_stage *prev, const fx_inputs *in, float *o_h,
                                        float *lse_h, seq_counts *n)
{
    const fx_problem *p = in->p;
    const fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p), lv = fx_layout_v(p);
    const size_t no = fx_numel_o(p), nl = fx_numel_lse(p), esize = fx_dtype_bytes(p->dtype);
    /* Elements no sequence places stay NaN, and fail the comparison. */
    for (size_t x = 0; x < no; ++x)
        o_h[x] = NAN;
    for (size_t x = 0; x < nl; ++x)
        lse_h[x] = NAN;
    memset(n, 0, sizeof *n);
    for (int b = 0; b < p->batch; ++b) {
        const fx_problem sp = fx_seq_problem(p, b);
        const size_t oq = fx_offset(lq, b, fx_seq_start_q(p, b), 0, 0);
        const size_t ok = fx_offset(lkv, b, fx_seq_start_k(p, b), 0, 0);
        const size_t ov = fx_offset(lv, b, fx_seq_start_k(p, b), 0, 0);
        if (sp.seqlen_q == 0) {
            n->no_queries++;
            continue;
        }
        if (sp.seqlen_k == 0) {
            n->no_keys++;
            fx_place_seq_forward(p, b, NULL, NULL, o_h, lse_h);
            continue;
        }
        /* Views: the sub-problem's contiguous layouts have the packed row and head strides. */
        fx_inputs view = {.p = &sp,
                          .q = (char *)in->q + oq * esize,
                          .k = (char *)in->k + ok * esize,
                          .v = (char *)in->v + ov * esize};
        fx_run r = {0};
        cudaError_t err = fx_run_stage(&r, prev, &view, false);
        if (err == cudaSuccess) {
            fx_place_seq_forward(p, b, r.out.o_h, r.out.lse_h, o_h, lse_h);
            n->ran++;
        }
        fx_run_free(&r);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

/* The forward of `st` against fp64 (sampled rows), NaN over every element, then against
 * the previous stage's forward on the same inputs. Fills res->err_ref, prev, err_prev.
 * Returns a CUDA error of the previous stage's run (its not fitting in memory is not one:
 * the comparison is then n/a). */
static cudaError_t check_forward_case(const fx_ctx *c, const fx_case_host *h, const fx_inputs *in,
                                      const fx_run *st, bool verbose, bool *pass,
                                      fx_case_result *res, fx_run *pv)
{
    const fx_problem *p = in->p;
    size_t nq = fx_numel_o(p), nl = fx_numel_lse(p); /* O's elements, LSE's */
    char why[512];
    fx_fwd_check fc;
    fx_check_forward(p, c->opt.ref_slices, h, &st->out, &fc);
    res->err_ref = fc.o.max_abs;
    *pass &= fc.pass;
    size_t nan_all = count_nan(st->out.o_h, nq);
    const size_t nan_lse = count_nan(st->out.lse_h, nl); /* rows the reference did not sample */
    *pass &= nan_all == 0 && nan_lse == 0;
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
    res->prev = fx_find_prev(c, p, false, why, sizeof why);
    if (!res->prev) {
        if (verbose)
            printf("  prev: n/a (%s)\n", why);
        return cudaSuccess;
    }
    const bool per_seq = fx_prev_per_seq(res->prev, p);
    float *prev_o = NULL, *prev_lse = NULL; /* the packed outputs of a per-sequence run */
    seq_counts n = {0, 0, 0};
    cudaError_t err;
    if (per_seq) {
        prev_o = fx_xmalloc(nq * sizeof(float));
        prev_lse = fx_xmalloc(nl * sizeof(float));
        err = prev_forward_per_seq(res->prev, in, prev_o, prev_lse, &n);
    } else {
        err = fx_run_stage(pv, res->prev, in, false);
    }
    if (err == cudaErrorMemoryAllocation) {
        printf("  prev: n/a (%s does not fit in device memory)\n", res->prev->id);
        res->prev = NULL;
        err = cudaSuccess;
        goto done;
    }
    if (err != cudaSuccess)
        goto done;
    if (per_seq && verbose)
        printf("  prev: %s sequence by sequence, each a fixed-length batch of 1: %d run, %d "
               "without keys (O = 0, LSE = -inf expected), %d without query rows\n",
               res->prev->id, n.ran, n.no_keys, n.no_queries);
    fx_err e = fx_compare_f32(st->out.o_h, per_seq ? prev_o : pv->out.o_h, nq);
    res->err_prev = e.max_abs;
    *pass &= fx_compare_prev(e, 2.0 * fc.o_bound, "O", res->prev->id, verbose);
    e = fx_compare_f32(st->out.lse_h, per_seq ? prev_lse : pv->out.lse_h, nl);
    *pass &= fx_compare_prev(e, 2.0 * fc.lse_bound, "LSE", res->prev->id, verbose);
done:
    free(prev_o);
    free(prev_lse);
    return err;
}

/* ---- the backward's checks ----------------------------------------------------------- */

/* The gradients of `st` against fp64 (whole groups), NaN over every element, then against
 * the previous stage's backward. Fills res's backward fields. Returns as
 * check_forward_case. */
static cudaError_t check_backward_case(const fx_ctx *c, const fx_case_host *h, const fx_inputs *in,
                                       const fx_run *st, bool verbose, bool *pass,
                                       fx_case_result *res, fx_run *pvb)
{
    const fx_problem *p = in->p;
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p);
    char why[512];
    fx_bwd_check bc;
    fx_check_backward(p, c->opt.ref_slices, h, &st->out, &bc);
    res->checked_bwd = bc.ran;
    *pass &= bc.pass;
    for (int t = 0; t < 3 && bc.ran; ++t) {
        if (bc.g[t].max_abs > res->err_ref_bwd)
            res->err_ref_bwd = bc.g[t].max_abs;
        if (verbose) {
            char b1[160], b2[160];
            fx_err_format(bc.g[t], b1, sizeof b1);
            fx_err_format(bc.g_emu[t], b2, sizeof b2);
            printf("  %-3s vs fp64 (%d groups): %s  bound %.2e  %s\n", fx_grad_names[t], bc.groups,
                   b1, bc.bound[t], bc.g_pass[t] ? "PASS" : "FAIL");
            printf("      emulation in %s:    %s\n", fx_dtype_name(p->dtype), b2);
        }
    }
    if (!bc.ran && verbose)
        printf("  backward vs fp64: skipped (one group costs more than the reference budget;"
               " checked against the previous stage only)\n");
    const float *mine[3] = {st->out.dq_h, st->out.dk_h, st->out.dv_h};
    size_t counts[3] = {nq, nkv, nkv};
    for (int t = 0; t < 3; ++t) {
        size_t nan_all = count_nan(mine[t], counts[t]);
        if (nan_all) {
            *pass = false;
            if (verbose)
                printf("  %s has %zu NaN over all %zu elements: FAIL\n", fx_grad_names[t], nan_all,
                       counts[t]);
        }
    }

    res->prev_bwd = fx_find_prev(c, p, true, why, sizeof why);
    if (!res->prev_bwd) {
        if (verbose)
            printf("  prev backward: n/a (%s)\n", why);
        return cudaSuccess;
    }
    cudaError_t err = fx_run_stage(pvb, res->prev_bwd, in, true);
    if (err == cudaErrorMemoryAllocation) {
        printf("  prev backward: n/a (%s does not fit in device memory)\n", res->prev_bwd->id);
        res->prev_bwd = NULL;
        return cudaSuccess;
    }
    if (err != cudaSuccess)
        return err;
    const float *theirs[3] = {pvb->out.dq_h, pvb->out.dk_h, pvb->out.dv_h};
    for (int t = 0; t < 3; ++t) {
        fx_err e = fx_compare_f32(mine[t], theirs[t], counts[t]);
        /* Both stages meet the reference's bound B on the sampled groups: 2B apart at most.
         * Without a reference bound, hold the two to each other within FX_PREV_ONLY_ULPS
         * of the dtype at the gradient's largest magnitude (fx_check.h says why). */
        double bound =
            bc.ran ? 2.0 * bc.bound[t] : FX_PREV_ONLY_ULPS * fx_slack(p->dtype, e.ref_max);
        *pass &= fx_compare_prev(e, bound, fx_grad_names[t], res->prev_bwd->id, verbose);
        if (e.max_abs > res->err_prev_bwd)
            res->err_prev_bwd = e.max_abs;
    }
    return cudaSuccess;
}

/* ---- timing and the CSV -------------------------------------------------------------- */

/* One timed direction of a case. */
typedef struct bench_point {
    bool bwd;
    fx_timing t;
    double tflops;
    int clock_mhz; /* NVML's SM clock right after the timed calls */
    bool checked;  /* the case's verdict applies to this direction */
} bench_point;

/* Appends the point's row to --csv FILE; false when it is lost (said on stderr). */
static bool csv_append(const fx_ctx *c, const fx_problem *p, const fx_case_result *r,
                       const bench_point *b)
{
    const fx_stage *prev = b->bwd ? r->prev_bwd : r->prev;
    double eref = b->bwd ? r->err_ref_bwd : r->err_ref;
    double eprev = b->bwd ? r->err_prev_bwd : r->err_prev;
    fx_csv_row row = {
        .stage = c->self->id,
        .direction = b->bwd ? "bwd" : "fwd",
        .device = c->dev.name,
        .sm_count = c->dev.sm_count,
        .sm_clock_mhz = b->clock_mhz,
        .batch = p->batch,
        .seqlen_q = p->seqlen_q,
        .seqlen_k = p->seqlen_k,
        .heads_q = p->heads_q,
        .heads_kv = p->heads_kv,
        .head_dim = p->head_dim,
        .dtype = fx_dtype_name(p->dtype),
        .causal = p->causal ? 1 : 0,
        .repeats = b->t.repeats,
        .ms = b->t.median_ms,
        .ms_min = b->t.min_ms,
        .ms_max = b->t.max_ms,
        .tflops = b->tflops,
        /* Empty (negative) where not checked: a backward too large for the reference has
         * no error against it. */
        .err_ref_max = b->checked && eref >= 0 && (!b->bwd || r->checked_bwd) ? eref : -1,
        .err_prev_max = b->checked && prev && eprev >= 0 ? eprev : -1,
        .prev_stage = prev ? prev->id : "",
        .check = b->checked ? (r->pass ? "pass" : "fail") : "skipped",
        .head_dim_v = fx_head_dim_v(p),
    };
    fx_csv_row_stamp(&row);
    return fx_csv_append(c->opt.csv, &row);
}

/* Times one direction of the stage's run r (fx_time), prints it (the method first, when
 * `method`) and appends its CSV row. Returns a CUDA error; *csv_ok turns false when the
 * row is lost. */
static cudaError_t bench_direction(const fx_ctx *c, const fx_problem *p, fx_run *r,
                                   const fx_case_result *res, bench_point *b, bool *csv_ok)
{
    const fx_time_config tc = {.stream = 0,
                               .l2_bytes = c->dev.l2_bytes,
                               .warmup = c->opt.warmup,
                               .repeats = c->opt.iters,
                               .spin_us = c->opt.spin_us};
    cudaError_t err =
        FX_CUDA(fx_time(b->bwd ? fx_launch_backward : fx_launch_forward, r, &tc, &b->t));
    if (err != cudaSuccess)
        return err;
    b->clock_mhz = fx_sm_clock_mhz(c->dev.ordinal);
    const double flops = b->bwd ? fx_flops_backward(p) : fx_flops_forward(p);
    b->tflops = flops / (b->t.median_ms * 1e-3) / 1e12;
    if (!b->bwd) {
        char method[256];
        fx_timing_describe(&b->t, method, sizeof method);
        printf("  timing: %s\n", method);
    }
    printf("  time %s: %.3f ms (min %.3f, max %.3f, %d repeats)  %.1f TFLOP/s  SM %d MHz\n",
           b->bwd ? "bwd" : "fwd", b->t.median_ms, b->t.min_ms, b->t.max_ms, b->t.repeats,
           b->tflops, b->clock_mhz);
    if (c->opt.csv && !csv_append(c, p, res, b))
        *csv_ok = false;
    return cudaSuccess;
}

cudaError_t fx_bench_forward(const fx_ctx *c, const fx_problem *p, fx_run *r,
                             const fx_case_result *res, bool *csv_ok)
{
    bench_point fwd = {.bwd = false, .checked = c->opt.check};
    return bench_direction(c, p, r, res, &fwd, csv_ok);
}

/* ---- one case ------------------------------------------------------------------------ */

void fx_print_loaded(const fx_ctx *c, const fx_problem *p, bool backward)
{
    if (p->dtype == FX_E4M3)
        printf("  inputs: loaded from %s (q.bin, k.bin, v.bin e4m3 codes; q_descale.f32, "
               "k_descale.f32, v_descale.f32%s)\n",
               c->opt.load, c->loaded.q ? "; q.f32, k.f32, v.f32" : "");
    else
        printf("  inputs: loaded from %s (q.bin, k.bin, v.bin%s)\n", c->opt.load,
               backward ? ", dout.bin" : "");
}

int fx_run_case(const fx_ctx *c, const fx_problem *p0, bool verbose, fx_case_result *res)
{
    fx_problem pb = *p0;
    const fx_problem *p = &pb;
    bool backward = c->opt.backward;
    char why[512], line[512];
    memset(res, 0, sizeof *res);
    res->err_ref = res->err_prev = res->err_ref_bwd = res->err_prev_bwd = -1;
    /* e4m3 inputs are quantized, checked against two references and a CPU model: a case
     * of its own (fx_fp8_case.h), after the same capability check. */
    if (p->dtype == FX_E4M3 && fx_stage_supports(c->self, p, backward, why, sizeof why) == 0)
        return fx_run_fp8_case(c, p, verbose, res);

    const int supported = fx_stage_supports(c->self, p, backward, why, sizeof why);
    if (supported != 0) {
        /* 77: this GPU lacks what the problem needs (a skip); else outside the stage. */
        fx_error("%s", why);
        return supported == FX_EXIT_NO_GPU ? FX_EXIT_NO_GPU : FX_EXIT_USAGE;
    }
    fx_problem_format(p, line, sizeof line);
    if (verbose)
        printf("%s %s%s: %s\n", c->self->id, "fwd", backward ? "+bwd" : "", line);
    if (verbose && c->opt.load)
        fx_print_loaded(c, p, backward);

    /* The checks read the inputs on the host; a run that only times draws them on the
     * device (the same numbers: fx_draw.h), which saves the host's drawing of every
     * element (about half a second at the sweep's sizes). */
    fx_case_host h = {0};
    if (c->opt.load)
        h = c->loaded; /* the context's: not freed here */
    else if (c->opt.check)
        fx_host_make(p, backward, &h);
    fx_inputs in;
    fx_run st = {0}, pv = {0}, pvb = {0}; /* the stage, its previous stage fwd and bwd */
    int rc = FX_EXIT_FAIL;
    bool pass = true, csv_ok = true; /* csv_ok: every --csv row was written */
    cudaError_t err = fx_inputs_make(p, &h, backward, &in);
    if (err == cudaSuccess && c->opt.check && !c->opt.load) {
        /* What a timing-only run would have drawn on the device must be what is checked;
         * compared before the stage allocates anything, so the comparison's buffer fits
         * wherever the inputs do. */
        const long long differ = fx_inputs_check_device_fill(p, &h);
        if (differ < 0)
            goto out;
        if (differ > 0) {
            printf("  inputs: the device's fill differs from the host's at %lld elements: "
                   "FAIL\n",
                   differ);
            pass = false;
        }
    }
    if (err == cudaSuccess)
        err = fx_run_stage(&st, c->self, &in, backward);
    if (err == cudaErrorMemoryAllocation) {
        rc = FX_EXIT_USAGE; /* the bytes were named; a problem too large is a refusal */
        goto out;
    }
    if (err != cudaSuccess)
        goto out;

    if (c->opt.check &&
        check_forward_case(c, &h, &in, &st, verbose, &pass, res, &pv) != cudaSuccess)
        goto out;
    if (backward && c->opt.check &&
        check_backward_case(c, &h, &in, &st, verbose, &pass, res, &pvb) != cudaSuccess)
        goto out;

    if (c->opt.digest)
        fx_print_digest(p, &st.out, backward);
    if (c->opt.save && fx_save_case(c->opt.save, c->self->id, p, &h, &st.out, backward) != 0)
        goto out; /* rc stays FX_EXIT_FAIL: the file was named */
    if (c->opt.repeat > 1) {
        int bad = fx_repeat_check(&st, &in, backward, c->opt.repeat, verbose);
        if (bad < 0)
            goto out;
        pass &= bad == 0;
    }

    res->pass = pass;
    if (c->opt.bench) {
        bench_point fwd = {.bwd = false, .checked = c->opt.check};
        if (bench_direction(c, p, &st, res, &fwd, &csv_ok) != cudaSuccess)
            goto out;
        /* The backward row counts as checked when the reference or the previous stage
         * held it to a bound. */
        bench_point bwd = {.bwd = true,
                           .checked = c->opt.check && (res->checked_bwd || res->prev_bwd)};
        if (backward && bench_direction(c, p, &st, res, &bwd, &csv_ok) != cudaSuccess)
            goto out;
    }
    rc = pass && csv_ok ? FX_EXIT_OK : FX_EXIT_FAIL;
    if (verbose && c->opt.check)
        printf("  %s\n", pass ? "PASS" : "FAIL");
out:
    fx_run_free(&st);
    fx_run_free(&pv);
    fx_run_free(&pvb);
    fx_inputs_free(&in);
    if (!c->opt.load)
        fx_host_free(&h);
    /* A sticky error (an illegal address) poisons the context: report it as a failure. */
    err = cudaGetLastError();
    if (err != cudaSuccess) {
        fx_error("CUDA error: %s", cudaGetErrorString(err));
        rc = FX_EXIT_FAIL;
    }
    return rc;
}

/* ---- the CPU model ------------------------------------------------------------------- */

int fx_run_cpu_case(const fx_ctx *c, const fx_problem *p)
{
    const fx_stage *s = c->self;
    char line[512];
    /* e4m3: the quantized inputs through stage 10's CPU model (fx_fp8_case.h). */
    if (p->dtype == FX_E4M3)
        return fx_run_fp8_cpu_case(c, p);
    if (!s->cpu_model) {
        fx_error("--cpu runs a stage's CPU model, and this stage has none (stages 02 and 03 "
                 "have one, and stage 10 at e4m3)");
        return FX_EXIT_USAGE;
    }
    bool backward = c->opt.backward && s->cpu_model->backward;
    /* The model computes every row in fp32 on the host (the reference only samples):
     * the forward, plus 2.5× it for the backward (fx_flops_backward). */
    double model_flops = fx_flops_forward(p) + (backward ? fx_flops_backward(p) : 0.0);
    if (model_flops > FX_CPU_MODEL_SLOW_FLOPS) {
        char eta[32];
        duration_text(model_flops / FX_CPU_MODEL_FLOPS_PER_S, eta, sizeof eta);
        fx_error("note: the CPU model runs %.2g FLOP on this machine's cores: of the order of "
                 "%s at this size (try --batch 1 --seqlen 256 --heads 2)",
                 model_flops, eta);
    }
    fx_problem_format(p, line, sizeof line);
    printf("%s cpu model %s%s: %s\n", s->id, "fwd", backward ? "+bwd" : "", line);
    if (c->opt.load)
        fx_print_loaded(c, p, backward);
    fx_case_host h;
    if (c->opt.load)
        h = c->loaded; /* the context's: not freed here */
    else
        fx_host_make(p, backward, &h);
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nl = fx_numel_lse(p);
    fx_outputs st = {0};
    st.o_h = fx_xmalloc(fx_numel_o(p) * sizeof(float));
    st.lse_h = fx_xmalloc(nl * sizeof(float));
    s->cpu_model->forward(p, h.q, h.k, h.v, st.o_h, st.lse_h);
    fx_fwd_check fc;
    fx_check_forward(p, c->opt.ref_slices, &h, &st, &fc);
    bool pass = fc.pass;
    char b1[160];
    fx_err_format(fc.o, b1, sizeof b1);
    printf("  O   vs fp64 (%zu rows): %s  bound %.2e\n", fc.rows, b1, fc.o_bound);
    fx_err_format(fc.lse, b1, sizeof b1);
    printf("  LSE vs fp64 (%zu rows): %s  bound %.2e\n", fc.rows, b1, fc.lse_bound);
    if (backward) {
        st.dq_h = fx_xmalloc(nq * sizeof(float));
        st.dk_h = fx_xmalloc(nkv * sizeof(float));
        st.dv_h = fx_xmalloc(nkv * sizeof(float));
        s->cpu_model->backward(p, h.q, h.k, h.v, st.o_h, st.lse_h, h.dout, st.dq_h, st.dk_h,
                               st.dv_h);
        fx_bwd_check bc;
        fx_check_backward(p, c->opt.ref_slices, &h, &st, &bc);
        pass &= bc.pass;
        for (int t = 0; t < 3 && bc.ran; ++t) {
            fx_err_format(bc.g[t], b1, sizeof b1);
            printf("  %-3s vs fp64 (%d groups): %s  bound %.2e\n", fx_grad_names[t], bc.groups, b1,
                   bc.bound[t]);
        }
        if (!bc.ran) {
            /* --cpu has no previous stage to hold the backward to instead: nothing checked
             * it, so the run must not pass. */
            printf("  backward vs fp64: not checked: one (batch, kv head) group is over the "
                   "reference budget, and --cpu has no previous stage to check it against "
                   "(give a smaller seqlen or head_dim)\n");
            pass = false;
        }
    }
    if (c->opt.digest)
        fx_print_digest(p, &st, backward);
    if (c->opt.save && fx_save_case(c->opt.save, s->id, p, &h, &st, backward) != 0)
        pass = false; /* the file was named */
    printf("  %s\n", pass ? "PASS" : "FAIL");
    free(st.o_h);
    free(st.lse_h);
    free(st.dq_h);
    free(st.dk_h);
    free(st.dv_h);
    if (!c->opt.load)
        fx_host_free(&h);
    return pass ? FX_EXIT_OK : FX_EXIT_FAIL;
}
