/*
 * test_fp8_table3.c — the FA3 paper's Table 3 reproduced on the CPU (tests/fp8/fx_table3.h):
 * the RMSE of O against fp64 on the outlier distribution N(0,1) + N(0,100)·Bernoulli(0.001)
 * (N(0,100) read as variance 100: standard deviation 10), for the e4m3 forward's model under
 * the paper's four ways of preparing the inputs, and for fp16 attention.
 *
 * The case: batch 1, seqlen 8192, 1 head, head_dim 128, non-causal, softmax scale 1/√128,
 * seed 1 (the inputs' and the Hadamard signs'); about 30 s on two cores. At this length the
 * paper's numbers come back (docs/10_fp8.md, "Table 3", has the other lengths: the baseline's
 * error grows with seqlen, incoherent processing's does not, so their ratio falls from 0.6
 * at 512 to 0.35 at 16k; the paper does not state its shape).
 *
 * What is asserted, and with what tolerance:
 *  - each RMSE at seed 1 within 2 % of the value measured here (printed by the test). The
 *    run is deterministic: fixed seed, every row computed alone (the thread count changes
 *    nothing); only another libm's exp2f/expf/logf could move a P across an e4m3 rounding
 *    boundary, a change of ~1e-6 of the RMSE. 2 % is under a tenth of the seed-to-seed
 *    spread of these numbers (8 seeds at this shape: (max − min)/mean from 22 to 40 %,
 *    docs/10_fp8.md), so a change to the model or the quantization that moves a number by
 *    what a new seed would is caught; per-head equals per-tensor here (one head);
 *  - each e4m3 method's ratio to the per-tensor baseline within 25 % of the paper's ratio
 *    (block quantization alone 1.0, incoherent processing alone 0.39, both 0.38), which
 *    holds at every one of the 8 seeds measured (ratios 0.86..1.06, 0.36..0.48 and
 *    0.35..0.46; docs/10_fp8.md), and the paper's
 *    qualitative claims: incoherent processing is what helps, block quantization adds
 *    little to it, e4m3 is two orders of magnitude less accurate than fp16, FlashAttention-2
 *    is no less accurate than standard attention in fp16.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "03_flash2/model.h"
#include "fx_table3.h"

/* Measured at seed 1 with this file's setup (2026-12-05, Debian 12, gcc 12, glibc 2.36);
 * `build/tests/fp8_table3 --seqlen 8192 --heads 1 --seeds 1` prints the same. */
static const double kMeasured[FX_T3_COUNT] = {
    [FX_T3_FP16_STANDARD] = 2.4197e-04,  [FX_T3_FP16_FA2] = 2.4107e-04,
    [FX_T3_FP8_PER_TENSOR] = 2.2843e-02, [FX_T3_FP8_PER_HEAD] = 2.2843e-02,
    [FX_T3_FP8_BLOCK] = 1.9626e-02,      [FX_T3_FP8_INCOHERENT] = 9.4454e-03,
    [FX_T3_FP8_BOTH] = 9.3612e-03,
};
static const double kRelTol = 0.02; /* the file's comment says why */

static fx_table3_result result;

/* Runs the experiment once for the whole suite (the case takes ~30 s) and prints it. */
static void run_once(void)
{
    const fx_table3_setup s = {.batch = 1, .seqlen = 8192, .heads = 1, .head_dim = 128, .seed = 1};
    fx_table3_run(&s, &fx_cpu_model_03, false, &result);
    printf("Table 3 on the CPU: batch 1, seqlen 8192, heads 1, head_dim 128, seed 1; "
           "|O| rms %.4g\n  %-30s %12s %12s %10s %10s\n",
           result.o_rms, "method", "RMSE", "paper", "ratio", "paper's");
    for (int m = 0; m < FX_T3_COUNT; ++m)
        printf("  %-30s %12.4e %12.2g %10.3f %10.3f\n", fx_table3_name((fx_table3_method)m),
               result.rmse[m], fx_table3_paper((fx_table3_method)m),
               result.rmse[m] / result.rmse[FX_T3_FP8_PER_TENSOR],
               fx_table3_paper((fx_table3_method)m) / fx_table3_paper(FX_T3_FP8_PER_TENSOR));
    fflush(stdout);
}

static double ratio(fx_table3_method m)
{
    return result.rmse[m] / result.rmse[FX_T3_FP8_PER_TENSOR];
}

START_TEST(every_rmse_is_the_measured_value)
{
    ck_assert_uint_eq(result.past_fast_range, 0);
    for (int m = 0; m < FX_T3_COUNT; ++m)
        ck_assert_msg(fabs(result.rmse[m] - kMeasured[m]) <= kRelTol * kMeasured[m],
                      "%s: RMSE %.4e, measured %.4e", fx_table3_name((fx_table3_method)m),
                      result.rmse[m], kMeasured[m]);
}
END_TEST

/* The paper's Table 3, e4m3 columns, as ratios to its per-tensor baseline (2.4e-2): no
 * incoherent processing (block quantization alone) 2.4e-2, no block quantization
 * (incoherent processing alone) 9.3e-3, FA3 (both) 9.1e-3. */
START_TEST(ratios_to_the_baseline_are_within_25_percent_of_the_papers)
{
    const fx_table3_method methods[] = {FX_T3_FP8_BLOCK, FX_T3_FP8_INCOHERENT, FX_T3_FP8_BOTH};
    for (size_t e = 0; e < 3; ++e) {
        const double paper = fx_table3_paper(methods[e]) / fx_table3_paper(FX_T3_FP8_PER_TENSOR);
        ck_assert_msg(fabs(ratio(methods[e]) - paper) <= 0.25 * paper,
                      "%s: %.3f of the baseline, the paper %.3f", fx_table3_name(methods[e]),
                      ratio(methods[e]), paper);
    }
}
END_TEST

/* Incoherent processing more than halves the error; block quantization on top of it changes
 * it by under 5 %, and alone by under 25 %; per-head descales (FA3's) are between. */
START_TEST(incoherent_processing_is_what_helps)
{
    ck_assert_double_lt(ratio(FX_T3_FP8_INCOHERENT), 0.5);
    ck_assert_double_lt(fabs(result.rmse[FX_T3_FP8_BOTH] / result.rmse[FX_T3_FP8_INCOHERENT] - 1),
                        0.05);
    ck_assert_double_gt(ratio(FX_T3_FP8_BLOCK), 0.75);
    ck_assert_double_le(result.rmse[FX_T3_FP8_BLOCK], result.rmse[FX_T3_FP8_PER_TENSOR]);
    ck_assert_double_le(result.rmse[FX_T3_FP8_PER_HEAD], result.rmse[FX_T3_FP8_PER_TENSOR]);
}
END_TEST

/* fp16 is ~100× more accurate than e4m3 with per-tensor scaling, and FlashAttention-2 (fp32
 * softmax, P rounded unnormalised) no less accurate than standard attention in fp16. */
START_TEST(fp16_is_two_orders_of_magnitude_more_accurate)
{
    ck_assert_double_lt(result.rmse[FX_T3_FP16_FA2], result.rmse[FX_T3_FP8_PER_TENSOR] / 50);
    ck_assert_double_le(result.rmse[FX_T3_FP16_FA2], result.rmse[FX_T3_FP16_STANDARD]);
}
END_TEST

static Suite *fp8_table3_suite(void)
{
    Suite *s = suite_create("fp8_table3");
    TCase *t = tcase_create("table3");
    /* One run for all four tests, in the runner's process (unchecked fixture). */
    tcase_add_unchecked_fixture(t, run_once, NULL);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, every_rmse_is_the_measured_value);
    tcase_add_test(t, ratios_to_the_baseline_are_within_25_percent_of_the_papers);
    tcase_add_test(t, incoherent_processing_is_what_helps);
    tcase_add_test(t, fp16_is_two_orders_of_magnitude_more_accurate);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(fp8_table3_suite());
    srunner_run_all(runner, CK_NORMAL);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
