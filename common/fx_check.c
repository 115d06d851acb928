/*
 * fx_check.c — error metrics and the pass rule (fx_check.h states the rule and its
 * source; the constants live there).
 */
#include "fx_check.h"

#include <math.h>
#include <stdio.h>

void fx_err_acc_init(fx_err_acc *a)
{
    a->max_abs = a->sum_sq_diff = a->sum_sq_ref = a->ref_max = 0.0;
    a->nan_count = a->inf_mismatch = a->n = 0;
}

void fx_err_acc_add(fx_err_acc *a, double x, double ref)
{
    a->n++;
    if (isnan(x) || isnan(ref)) { /* a NaN reference is a broken harness: fail it too */
        a->nan_count++;
        return;
    }
    if (isinf(x) || isinf(ref)) {
        /* -inf LSE of a row that sees no key: equal infinities are exact (error 0);
         * anything else is a disagreement no finite error can express. */
        if (x != ref)
            a->inf_mismatch++;
        return;
    }
    double diff = fabs(x - ref);
    a->max_abs = fmax(a->max_abs, diff);
    a->sum_sq_diff += diff * diff;
    a->sum_sq_ref += ref * ref;
    a->ref_max = fmax(a->ref_max, fabs(ref));
}

fx_err fx_err_acc_result(const fx_err_acc *a)
{
    fx_err e;
    e.max_abs = a->max_abs;
    e.rel_l2 = a->sum_sq_ref > 0.0 ? sqrt(a->sum_sq_diff / a->sum_sq_ref) : 0.0;
    e.rmse = a->n ? sqrt(a->sum_sq_diff / (double)a->n) : 0.0;
    e.ref_max = a->ref_max;
    e.nan_count = a->nan_count;
    e.inf_mismatch = a->inf_mismatch;
    e.n = a->n;
    return e;
}

fx_err fx_compare_f64(const float *x, const double *ref, size_t n)
{
    fx_err_acc a;
    fx_err_acc_init(&a);
    for (size_t i = 0; i < n; i++)
        fx_err_acc_add(&a, x[i], ref[i]);
    return fx_err_acc_result(&a);
}

fx_err fx_compare_f32(const float *x, const float *ref, size_t n)
{
    fx_err_acc a;
    fx_err_acc_init(&a);
    for (size_t i = 0; i < n; i++)
        fx_err_acc_add(&a, x[i], ref[i]);
    return fx_err_acc_result(&a);
}

/* Mantissa bits and smallest normal exponent of each dtype. */
static int mantissa_bits(fx_dtype dt)
{
    return dt == FX_FP16 ? 10 : 7;
}
static int min_normal_exp(fx_dtype dt)
{
    return dt == FX_FP16 ? -14 : -126;
}

double fx_slack(fx_dtype dt, double ref_max)
{
    /* ulp(x) = 2^(floor(log2 x) − mantissa bits) for a normal x. Below the smallest
     * normal (ref_max = 0 included) the spacing stops shrinking: it is the subnormal
     * step 2^(min exponent − mantissa bits), which is the floor. */
    int e = min_normal_exp(dt);
    if (ref_max > ldexp(1.0, e)) {
        int exp2;
        frexp(ref_max, &exp2); /* ref_max = f·2^exp2, f in [0.5, 1): floor(log2) = exp2 − 1 */
        e = exp2 - 1;
    }
    return ldexp(1.0, e - mantissa_bits(dt));
}

/* A NaN, or an infinity where the other side has none, fails whatever the bound. The
 * emulation must be clean as well, or its error says nothing. */
static bool clean(fx_err e)
{
    return e.nan_count == 0 && e.inf_mismatch == 0;
}

bool fx_pass(fx_err stage, fx_err emu, fx_dtype dt, double *bound)
{
    double b = FX_PASS_FACTOR * emu.max_abs +
               fmax(fx_slack(dt, fmax(stage.ref_max, emu.ref_max)), FX_ACCUM_SLACK);
    if (bound)
        *bound = b;
    return clean(stage) && clean(emu) && stage.max_abs <= b;
}

bool fx_pass_lse(fx_err stage, fx_err emu, double *bound)
{
    double ref_max = fmax(stage.ref_max, emu.ref_max);
    double b = FX_PASS_FACTOR * emu.max_abs + FX_LSE_REL_SLACK * fmax(1.0, ref_max);
    if (bound)
        *bound = b;
    return clean(stage) && clean(emu) && stage.max_abs <= b;
}

void fx_err_format(fx_err e, char *buf, size_t len)
{
    /* max to the bound's precision (the pass rule compares the two); rel is undefined
     * where the reference is all zero and the error is not (rel_l2 is 0 there). */
    char rel[16];
    if (e.rel_l2 == 0.0 && e.max_abs > 0.0)
        snprintf(rel, sizeof rel, "n/a");
    else
        snprintf(rel, sizeof rel, "%.1e", e.rel_l2);
    int used = snprintf(buf, len, "max %.2e rel %s rmse %.1e nan %zu", e.max_abs, rel, e.rmse,
                        e.nan_count);
    if (e.inf_mismatch && used >= 0 && (size_t)used < len)
        snprintf(buf + used, len - (size_t)used, " inf-mismatch %zu", e.inf_mismatch);
}
