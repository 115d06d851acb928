/*
 * test_check.c — the pass rule (fx_check.h): a stage passes when its max error against
 * fp64 is at most 2x the dtype emulation's plus one ulp of the dtype at the reference's
 * largest magnitude, never less than FX_ACCUM_SLACK; any NaN fails; a -inf LSE must be
 * matched by -inf.
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

/* A real tensor and its two reference answers: fp64 and the emulation in the dtype. */
typedef struct case_data {
    fx_problem p;
    size_t n;
    double *ref; /* fp64 */
    float *emu;  /* emulation in p.dtype */
} case_data;

static fx_problem small_problem(fx_dtype dt, fx_dist dist, int seqlen_q, int seqlen_k, bool causal)
{
    fx_problem p = fx_problem_default();
    p.batch = 1;
    p.seqlen_q = seqlen_q;
    p.seqlen_k = seqlen_k;
    p.heads_q = p.heads_kv = 1;
    p.head_dim = 128;
    p.dtype = dt;
    p.dist = dist;
    p.causal = causal;
    p.seed = 77;
    char why[256];
    ck_assert_msg(fx_problem_validate(&p, why, sizeof why) == 0, "%s", why);
    return p;
}

typedef enum which { WHICH_O, WHICH_LSE, WHICH_DK } which;

/* O, LSE or dK of batch 0, head 0 of p: fp64 and emulated. */
static case_data compute(fx_problem p, which w)
{
    size_t nq = fx_numel_q(&p), nkv = fx_numel_kv(&p);
    float *q = fx_test_calloc(nq, sizeof(float)), *k = fx_test_calloc(nkv, sizeof(float));
    float *v = fx_test_calloc(nkv, sizeof(float)), *dout = fx_test_calloc(nq, sizeof(float));
    fx_fill(&p, FX_T_Q, q, nq);
    fx_fill(&p, FX_T_K, k, nkv);
    fx_fill(&p, FX_T_V, v, nkv);
    fx_fill(&p, FX_T_DO, dout, nq);

    case_data c = {.p = p};
    const int D = p.head_dim;
    if (w == WHICH_DK) {
        c.n = (size_t)p.seqlen_k * D;
        c.ref = fx_test_calloc(c.n, sizeof(double));
        c.emu = fx_test_calloc(c.n, sizeof(float));
        double *dq = fx_test_calloc(nq, sizeof(double)), *dv = fx_test_calloc(c.n, sizeof(double));
        float *dq_emu = fx_test_calloc(nq, sizeof(float)),
              *dv_emu = fx_test_calloc(c.n, sizeof(float));
        fx_ref_backward_group(&p, q, k, v, dout, 0, 0, dq, c.ref, dv);
        fx_emu_backward_group(&p, q, k, v, dout, 0, 0, dq_emu, c.emu, dv_emu);
        free(dq);
        free(dv);
        free(dq_emu);
        free(dv_emu);
    } else {
        double *o = fx_test_calloc((size_t)p.seqlen_q * D, sizeof(double));
        double *lse = fx_test_calloc((size_t)p.seqlen_q, sizeof(double));
        float *o_emu = fx_test_calloc((size_t)p.seqlen_q * D, sizeof(float));
        float *lse_emu = fx_test_calloc((size_t)p.seqlen_q, sizeof(float));
        fx_ref_forward_rows(&p, q, k, v, 0, 0, 0, p.seqlen_q, o, lse);
        fx_emu_forward_rows(&p, q, k, v, 0, 0, 0, p.seqlen_q, o_emu, lse_emu);
        if (w == WHICH_O) {
            c.n = (size_t)p.seqlen_q * D;
            c.ref = o;
            c.emu = o_emu;
            free(lse);
            free(lse_emu);
        } else {
            c.n = (size_t)p.seqlen_q;
            c.ref = lse;
            c.emu = lse_emu;
            free(o);
            free(o_emu);
        }
    }
    free(q);
    free(k);
    free(v);
    free(dout);
    return c;
}

static void release(case_data *c)
{
    free(c->ref);
    free(c->emu);
}

/* A stage whose error is `factor` times the emulation's, element by element:
 * stage = ref + factor·(emu − ref). */
static float *scaled_error(const case_data *c, double factor)
{
    float *stage = fx_test_calloc(c->n, sizeof(float));
    for (size_t e = 0; e < c->n; e++)
        stage[e] = (float)(c->ref[e] + factor * ((double)c->emu[e] - c->ref[e]));
    return stage;
}

/* ---- the rule on real tensors -------------------------------------------------------- */

START_TEST(a_stage_equal_to_the_emulation_passes)
{
    for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
        for (int causal = 0; causal <= 1; causal++) {
            case_data o =
                compute(small_problem((fx_dtype)dt, FX_DIST_NORMAL, 64, 96, causal), WHICH_O);
            fx_err emu = fx_compare_f64(o.emu, o.ref, o.n);
            fx_err stage = fx_compare_f64(o.emu, o.ref, o.n);
            double bound = -1.0;
            ck_assert(fx_pass(stage, emu, (fx_dtype)dt, &bound));
            ck_assert_double_eq(bound,
                                FX_PASS_FACTOR * emu.max_abs +
                                    fmax(fx_slack((fx_dtype)dt, emu.ref_max), FX_ACCUM_SLACK));
            release(&o);

            case_data lse =
                compute(small_problem((fx_dtype)dt, FX_DIST_NORMAL, 64, 96, causal), WHICH_LSE);
            fx_err lse_emu = fx_compare_f64(lse.emu, lse.ref, lse.n);
            ck_assert(fx_pass_lse(lse_emu, lse_emu, NULL));
            release(&lse);
        }
    }
}
END_TEST

/* 3x the emulation's error against a bound of 2x + one ulp fails exactly when the
 * emulation is off by more than one ulp at ref_max. dK with large-magnitude logits is
 * such a tensor (a cancelling sum of rounded dS: 1.8 ulps here); for O the
 * emulation's own error is about half an ulp, so 3x of it stays inside the slack —
 * there the rule's teeth are the slack, not the factor. */
START_TEST(three_times_the_emulation_error_fails)
{
    case_data dk = compute(small_problem(FX_FP16, FX_DIST_LARGE_LOGITS, 300, 200, false), WHICH_DK);
    fx_err emu = fx_compare_f64(dk.emu, dk.ref, dk.n);
    double slack = fx_slack(FX_FP16, emu.ref_max);
    ck_assert_msg(emu.max_abs > slack,
                  "precondition: the emulation error %.3g must exceed one ulp %.3g", emu.max_abs,
                  slack);

    float *three = scaled_error(&dk, 3.0), *two = scaled_error(&dk, 2.0);
    fx_err e3 = fx_compare_f64(three, dk.ref, dk.n), e2 = fx_compare_f64(two, dk.ref, dk.n);
    ck_assert_double_eq_tol(e3.max_abs, 3.0 * emu.max_abs, 1e-6 * emu.ref_max);
    double bound;
    ck_assert(!fx_pass(e3, emu, FX_FP16, &bound));
    ck_assert_double_gt(e3.max_abs, bound);
    ck_assert(fx_pass(e2, emu, FX_FP16, &bound));
    free(three);
    free(two);
    release(&dk);
}
END_TEST

/* The same line, drawn with error summaries alone: emulation error 4 ulps. */
START_TEST(the_bound_is_twice_the_emulation_error_plus_one_ulp)
{
    fx_err emu = {.max_abs = 4 * 0x1p-7, .ref_max = 1.5, .n = 10};
    fx_err stage = emu;
    double bound;
    stage.max_abs = 9 * 0x1p-7; /* 2·4 + 1 ulps of bf16 at 1.5: exactly on the bound */
    ck_assert(fx_pass(stage, emu, FX_BF16, &bound));
    ck_assert_double_eq(bound, 9 * 0x1p-7);
    stage.max_abs = 12 * 0x1p-7; /* 3x */
    ck_assert(!fx_pass(stage, emu, FX_BF16, &bound));
    stage.max_abs = nextafter(9 * 0x1p-7, 1.0);
    ck_assert(!fx_pass(stage, emu, FX_BF16, NULL));
}
END_TEST

START_TEST(one_nan_fails)
{
    case_data o = compute(small_problem(FX_BF16, FX_DIST_NORMAL, 32, 32, false), WHICH_O);
    fx_err emu = fx_compare_f64(o.emu, o.ref, o.n);
    float *stage = scaled_error(&o, 1.0);
    stage[o.n / 2] = NAN;
    fx_err e = fx_compare_f64(stage, o.ref, o.n);
    ck_assert_uint_eq(e.nan_count, 1);
    ck_assert_double_le(e.max_abs, emu.max_abs); /* every finite element is fine ... */
    ck_assert(!fx_pass(e, emu, FX_BF16, NULL));  /* ... and still it fails */
    /* The same for LSE, and for a NaN in the emulation (its error would mean nothing). */
    ck_assert(!fx_pass_lse(e, emu, NULL));
    ck_assert(!fx_pass(emu, e, FX_BF16, NULL));
    free(stage);
    release(&o);
}
END_TEST

/* LSE of rows that see no key is -inf: -inf against -inf is exact (error 0); -inf
 * against a finite value, or +inf against -inf, fails whatever the bound. */
START_TEST(minus_inf_against_minus_inf_passes)
{
    const float lse_ref_f[4] = {-INFINITY, -INFINITY, 2.5f, 3.0f};
    const double lse_ref[4] = {-INFINITY, -INFINITY, 2.5, 3.0};
    const float stage[4] = {-INFINITY, -INFINITY, 2.5f, 3.0f + 1e-6f};
    fx_err e = fx_compare_f64(stage, lse_ref, 4);
    ck_assert_uint_eq(e.inf_mismatch, 0);
    ck_assert_uint_eq(e.nan_count, 0);
    ck_assert_double_le(e.max_abs, 1e-6);
    ck_assert_double_eq(e.ref_max, 3.0); /* the infinities are not magnitudes */
    fx_err emu = fx_compare_f32(lse_ref_f, lse_ref_f, 4);
    ck_assert_double_eq(emu.max_abs, 0.0);
    ck_assert(fx_pass_lse(e, emu, NULL));
}
END_TEST

START_TEST(minus_inf_against_finite_fails)
{
    const double lse_ref[3] = {-INFINITY, 2.5, 3.0};
    const float emu_lse[3] = {-INFINITY, 2.5f, 3.0f};
    fx_err emu = fx_compare_f64(emu_lse, lse_ref, 3);

    const float finite[3] = {-1e30f, 2.5f, 3.0f}; /* a very negative number is not -inf */
    fx_err e = fx_compare_f64(finite, lse_ref, 3);
    ck_assert_uint_eq(e.inf_mismatch, 1);
    ck_assert(!fx_pass_lse(e, emu, NULL));

    const float plus_inf[3] = {INFINITY, 2.5f, 3.0f};
    e = fx_compare_f64(plus_inf, lse_ref, 3);
    ck_assert_uint_eq(e.inf_mismatch, 1);
    ck_assert(!fx_pass_lse(e, emu, NULL));

    const float spurious[3] = {-INFINITY, -INFINITY, 3.0f}; /* a row that did see keys */
    e = fx_compare_f64(spurious, lse_ref, 3);
    ck_assert_uint_eq(e.inf_mismatch, 1);
    ck_assert(!fx_pass_lse(e, emu, NULL));
    ck_assert(!fx_pass(e, emu, FX_FP16, NULL));
}
END_TEST

/* ---- slack and metrics --------------------------------------------------------------- */

/* Where the exact value is 0, the bound is the fp32-accumulation floor, not a subnormal
 * step: a residue of 3e-6 passes, one of 1e-4 does not. */
START_TEST(an_exact_zero_is_held_to_the_accumulation_floor)
{
    const float zero_ref[2] = {0.0f, 0.0f}, residue[2] = {3e-6f, -2e-6f}, big[2] = {1e-4f, 0.0f};
    fx_err emu = fx_compare_f32(zero_ref, zero_ref, 2);
    double bound = -1.0;
    ck_assert(fx_pass(fx_compare_f32(residue, zero_ref, 2), emu, FX_BF16, &bound));
    ck_assert_double_eq(bound, FX_ACCUM_SLACK);
    ck_assert(!fx_pass(fx_compare_f32(big, zero_ref, 2), emu, FX_FP16, NULL));
}
END_TEST

START_TEST(slack_is_one_ulp_of_the_dtype_at_ref_max)
{
    /* bf16 keeps 7 mantissa bits: ulp(x) = 2^(floor(log2 x) - 7). */
    ck_assert_double_eq(fx_slack(FX_BF16, 1.0), 0x1p-7);
    ck_assert_double_eq(fx_slack(FX_BF16, 1.99), 0x1p-7);
    ck_assert_double_eq(fx_slack(FX_BF16, 2.0), 0x1p-6);
    ck_assert_double_eq(fx_slack(FX_BF16, 0.75), 0x1p-8);
    ck_assert_double_eq(fx_slack(FX_BF16, 300.0), 0x1p+1);
    /* fp16 keeps 10: ulp(x) = 2^(floor(log2 x) - 10). */
    ck_assert_double_eq(fx_slack(FX_FP16, 1.0), 0x1p-10);
    ck_assert_double_eq(fx_slack(FX_FP16, 3.5), 0x1p-9);
    ck_assert_double_eq(fx_slack(FX_FP16, 0.1), 0x1p-14);
    ck_assert_double_eq(fx_slack(FX_FP16, 65504.0), 32.0);
    /* Zero and tiny magnitudes: the spacing of the subnormals. */
    ck_assert_double_eq(fx_slack(FX_FP16, 0.0), 0x1p-24);
    ck_assert_double_eq(fx_slack(FX_FP16, 1e-6), 0x1p-24);
    ck_assert_double_eq(fx_slack(FX_BF16, 0.0), 0x1p-133);

    /* And it is the real spacing: the next value of the dtype above 2^k, minus 2^k. */
    for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
        for (int k = -10; k <= 12; k++) {
            float x = ldexpf(1.0f, k);
            uint16_t bits = fx_float_to_bits((fx_dtype)dt, x);
            double spacing = (double)fx_bits_to_float((fx_dtype)dt, (uint16_t)(bits + 1)) - x;
            ck_assert_double_eq(fx_slack((fx_dtype)dt, x), spacing);
            ck_assert_double_eq(fx_slack((fx_dtype)dt, 1.5 * x), spacing);
        }
    }
}
END_TEST

START_TEST(lse_slack_is_relative_beyond_one)
{
    fx_err exact = {.max_abs = 0.0, .ref_max = 0.5, .n = 1};
    fx_err stage = exact;
    double bound;
    ck_assert(fx_pass_lse(stage, exact, &bound));
    ck_assert_double_eq(bound, FX_LSE_REL_SLACK); /* max(1, 0.5) = 1 */
    exact.ref_max = stage.ref_max = 30.0;
    stage.max_abs = 29.0 * FX_LSE_REL_SLACK;
    ck_assert(fx_pass_lse(stage, exact, &bound));
    ck_assert_double_eq(bound, 30.0 * FX_LSE_REL_SLACK);
    stage.max_abs = 31.0 * FX_LSE_REL_SLACK;
    ck_assert(!fx_pass_lse(stage, exact, NULL));
}
END_TEST

START_TEST(metrics_follow_their_definitions)
{
    const float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    const double ref[4] = {1.0, 2.5, -3.0, 3.0}; /* differences 0, 0.5, 6, 1 */
    fx_err e = fx_compare_f64(x, ref, 4);
    ck_assert_double_eq(e.max_abs, 6.0);
    ck_assert_double_eq(e.ref_max, 3.0);
    ck_assert_double_eq_tol(e.rmse, sqrt((0.25 + 36.0 + 1.0) / 4.0), 1e-15);
    ck_assert_double_eq_tol(e.rel_l2, sqrt(37.25 / (1.0 + 6.25 + 9.0 + 9.0)), 1e-15);
    ck_assert_uint_eq(e.n, 4);
    ck_assert_uint_eq(e.nan_count, 0);

    /* The accumulator, fed in two halves, gives the same as one call. */
    fx_err_acc acc;
    fx_err_acc_init(&acc);
    for (int i = 0; i < 2; i++)
        fx_err_acc_add(&acc, x[i], ref[i]);
    for (int i = 2; i < 4; i++)
        fx_err_acc_add(&acc, x[i], ref[i]);
    fx_err a = fx_err_acc_result(&acc);
    ck_assert_double_eq(a.max_abs, e.max_abs);
    ck_assert_double_eq(a.rmse, e.rmse);
    ck_assert_double_eq(a.rel_l2, e.rel_l2);

    /* fp32 against fp32, and a zero reference: rel_l2 is 0 by definition. */
    const float zeros[2] = {0.0f, 0.0f}, small[2] = {0.0f, 1e-3f};
    fx_err z = fx_compare_f32(small, zeros, 2);
    ck_assert_double_eq(z.rel_l2, 0.0);
    ck_assert_double_eq_tol(z.max_abs, 1e-3, 1e-10);

    char line[128];
    fx_err_format(e, line, sizeof line);
    ck_assert_str_eq(line, "max 6.00e+00 rel 1.2e+00 rmse 3.1e+00 nan 0");
    /* An error against an all-zero reference has no relative size: "n/a", not 0. */
    fx_err_format(z, line, sizeof line);
    ck_assert_str_eq(line, "max 1.00e-03 rel n/a rmse 7.1e-04 nan 0");
}
END_TEST

static Suite *check_suite(void)
{
    Suite *s = suite_create("check");
    TCase *rule = tcase_create("pass_rule");
    tcase_set_timeout(rule, 60);
    tcase_add_test(rule, a_stage_equal_to_the_emulation_passes);
    tcase_add_test(rule, three_times_the_emulation_error_fails);
    tcase_add_test(rule, the_bound_is_twice_the_emulation_error_plus_one_ulp);
    tcase_add_test(rule, one_nan_fails);
    tcase_add_test(rule, minus_inf_against_minus_inf_passes);
    tcase_add_test(rule, minus_inf_against_finite_fails);
    suite_add_tcase(s, rule);

    TCase *metrics = tcase_create("slack_and_metrics");
    tcase_add_test(metrics, slack_is_one_ulp_of_the_dtype_at_ref_max);
    tcase_add_test(metrics, an_exact_zero_is_held_to_the_accumulation_floor);
    tcase_add_test(metrics, lse_slack_is_relative_beyond_one);
    tcase_add_test(metrics, metrics_follow_their_definitions);
    suite_add_tcase(s, metrics);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(check_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
