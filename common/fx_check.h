/*
 * fx_check.h — error metrics and the pass rule, in one place.
 *
 * The pass rule is FlashAttention's (its tests/test_flash_attn.py): a stage passes
 * when, against the fp64 reference,
 *     max|stage - ref| <= FX_PASS_FACTOR · max|emu - ref| + slack,
 * where emu is the CPU emulation in the stage's dtype (fx_reference.h) and slack
 * is one unit in the last place of the dtype at the reference's largest magnitude,
 * never below FX_ACCUM_SLACK (for LSE, kept in fp32: FX_LSE_REL_SLACK relative). Any
 * NaN fails, and a -inf LSE must be matched exactly.
 */
#ifndef FX_CHECK_H
#define FX_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FX_PASS_FACTOR 2.0 /* FlashAttention's tests use 2× the emulation's error   */
/* The LSE's slack, relative to its largest |LSE|: 1e-5, about 84 fp32 ulps. It is wide
 * because ex2.approx (2 ulps) and the FFMA-folded scale each add an error that grows with
 * |m·scale·log2e| (the large-logit cases of the matrix); what was measured against it:
 * docs/harness.md, "The pass rule". */
#define FX_LSE_REL_SLACK 1e-5
/* The smallest slack of a tensor in the dtype: 2^-16. Where the exact value is 0 (dQ and
 * dK of a row that sees one key: dP − D cancels exactly) the ulp at ref_max is
 * subnormal, while a stage that sums D = rowsum(dO∘O) and dP = dO·Vᵀ in different
 * orders in fp32 (CUDA cores against tensor cores) keeps a residue of about
 * FLT_EPSILON·Σ|terms| (docs/harness.md gives what was measured). The
 * floor equals one ulp of a bf16 value in [2^-9, 2^-8) or an fp16 value in [2^-6, 2^-5):
 * it widens the bound of every tensor whose largest magnitude is below those ranges
 * (e.g. an fp16 tensor with ref_max 2^-10 is allowed 2^-16, 16 of its ulps), and leaves
 * the bound of every larger tensor unchanged. */
#define FX_ACCUM_SLACK 0x1p-16

/* A backward too large for the fp64 reference is held to the previous stage's within
 * this many ulps of the dtype at the gradient's largest magnitude (fx_compare.c). Each
 * stage passes the pass rule at smaller problems, i.e. stays within 2×(emulation error, ≤ 4
 * ulps, EMU_MAX_ULPS_GRAD in tests/unit/test_reference.c) + 1 ulp of fp64, so two stages
 * may in principle differ by up to ~18 ulps; 8 is tighter than that bound and was chosen,
 * not derived (docs/harness.md, "The previous stage", gives the measured gap). */
#define FX_PREV_ONLY_ULPS 8.0

typedef struct fx_err {
    double max_abs;      /* max |x - ref| over finite pairs                                  */
    double rel_l2;       /* ||x - ref||_2 / ||ref||_2 (0 when ref is 0)                       */
    double rmse;         /* sqrt(mean (x - ref)²)                                              */
    double ref_max;      /* max |ref| over finite ref                                          */
    size_t nan_count;    /* NaN in x (or in ref, which only a broken reference has)           */
    size_t inf_mismatch; /* x and ref disagree on being ±inf (LSE of rows that see no key);
                          * equal infinities count as error 0 and are not in ref_max      */
    size_t n;            /* all pairs, those with NaN or ±inf included (rmse divides by it)    */
} fx_err;

/* Running accumulator, so metrics can be gathered over sampled rows. */
typedef struct fx_err_acc {
    double max_abs, sum_sq_diff, sum_sq_ref, ref_max;
    size_t nan_count, inf_mismatch, n;
} fx_err_acc;

void fx_err_acc_init(fx_err_acc *a);
void fx_err_acc_add(fx_err_acc *a, double x, double ref);
fx_err fx_err_acc_result(const fx_err_acc *a);

/* Metrics of n pairs at once. */
fx_err fx_compare_f64(const float *x, const double *ref, size_t n);
fx_err fx_compare_f32(const float *x, const float *ref, size_t n);

/* The slack added to the bound for a tensor stored in dt whose largest reference
 * magnitude is ref_max: one ulp of dt at ref_max, 2^(floor(log2 ref_max) - 7) for bf16
 * and 2^(floor(log2 ref_max) - 10) for fp16. Below dt's smallest normal (ref_max = 0
 * included) it is the subnormal step: 2^-133 for bf16, 2^-24 for fp16. */
double fx_slack(fx_dtype dt, double ref_max);

/* bound = FX_PASS_FACTOR·emu.max_abs + slack (ref_max: the larger of the two);
 * returns stage.max_abs <= bound. Any NaN or inf_mismatch in stage (or in emu, whose
 * error would then mean nothing) fails. bound may be NULL. For tensors in the
 * problem's dtype (O, dQ, dK, dV). */
bool fx_pass(fx_err stage, fx_err emu, fx_dtype dt, double *bound);
/* The same rule for the fp32 LSE: slack FX_LSE_REL_SLACK·max(1, ref_max). */
bool fx_pass_lse(fx_err stage, fx_err emu, double *bound);

/* "max 1.23e-03 rel 3.4e-03 rmse 5.6e-04 nan 0" (max to the bounds' three digits; rel
 * "n/a" against an all-zero reference), then " inf-mismatch N" when N > 0. */
void fx_err_format(fx_err e, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
