/*
 * test_harness.c — the harness's jobs that need no GPU beside the options and the CSV:
 * the one message prefix (fx_msg.h), the inputs --qk-scale gives (fx_fill), and the
 * timing method's description (fx_timing_describe).
 */
#define _POSIX_C_SOURCE 200809L /* dup, dup2, fileno */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fx_gpu.h"
#include "fx_host.h"
#include "fx_msg.h"

/* What fx_error(fmt, arg) writes to stderr, into buf. */
static void captured_error(const char *fmt, int arg, char *buf, size_t len)
{
    fflush(stderr);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    int saved = dup(fileno(stderr));
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(f), fileno(stderr)), 0);
    fx_error(fmt, arg);
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    rewind(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

START_TEST(messages_carry_the_program_name_once_it_is_set)
{
    char line[256];
    ck_assert_str_eq(fx_msg_prefix(), FX_MSG_DEFAULT_PREFIX ": ");
    captured_error("head_dim %d is not supported", 80, line, sizeof line);
    ck_assert_str_eq(line, "flash-explorer: head_dim 80 is not supported\n");

    fx_msg_set_program("stage_08_intra_wg_overlap");
    ck_assert_str_eq(fx_msg_prefix(), "stage_08_intra_wg_overlap: ");
    captured_error("head_dim %d is not supported", 80, line, sizeof line);
    ck_assert_str_eq(line, "stage_08_intra_wg_overlap: head_dim 80 is not supported\n");

    fx_msg_set_program(NULL);
    ck_assert_str_eq(fx_msg_prefix(), FX_MSG_DEFAULT_PREFIX ": ");
}
END_TEST

START_TEST(a_message_too_long_is_cut_and_still_ends_its_line)
{
    static char fmt[4096], line[4096];
    memset(fmt, 'x', sizeof fmt - 8);
    fmt[sizeof fmt - 8] = '\0';
    strcat(fmt, "%d");
    captured_error(fmt, 7, line, sizeof line);
    size_t n = strlen(line);
    ck_assert_uint_lt(n, 1024);
    ck_assert_int_eq(line[n - 1], '\n');
    ck_assert(!strncmp(line, FX_MSG_DEFAULT_PREFIX ": xxx", strlen(FX_MSG_DEFAULT_PREFIX) + 5));
}
END_TEST

/* ---- --qk-scale ----------------------------------------------------------------------- */

enum { N_FILL = 4096 };

static void fill(fx_problem p, fx_tensor_id id, float *x)
{
    fx_fill(&p, id, x, N_FILL);
}

START_TEST(qk_scale_multiplies_q_and_k_before_rounding_and_leaves_v)
{
    static float q1[N_FILL], k1[N_FILL], v1[N_FILL], q2[N_FILL], k2[N_FILL], v2[N_FILL];
    for (int dist = 0; dist < FX_DIST_COUNT; ++dist) {
        fx_problem p = fx_problem_default();
        p.dtype = FX_FP16;
        p.dist = (fx_dist)dist;
        fill(p, FX_T_Q, q1);
        fill(p, FX_T_K, k1);
        fill(p, FX_T_V, v1);
        /* A power of two commutes with rounding (no overflow here): the scaled inputs are
         * exactly twice the unscaled ones, drawn from the same numbers. */
        p.qk_scale = 2.0;
        fill(p, FX_T_Q, q2);
        fill(p, FX_T_K, k2);
        fill(p, FX_T_V, v2);
        for (int i = 0; i < N_FILL; ++i) {
            ck_assert_float_eq(q2[i], 2.0f * q1[i]);
            ck_assert_float_eq(k2[i], 2.0f * k1[i]);
            ck_assert_float_eq(v2[i], v1[i]);
        }
        /* Another scale: the same numbers times 3, each rounded to the dtype, so within
         * two roundings of 3·q1 (plus fp16's subnormal step), and the same on every call. */
        p.qk_scale = 3.0;
        fill(p, FX_T_Q, q2);
        const double u = fx_dtype_epsilon(FX_FP16);
        for (int i = 0; i < N_FILL; ++i) {
            const double want = 3.0 * q1[i];
            ck_assert_msg(fabs(q2[i] - want) <= 2.01 * u * fabs(want) + 0x1p-24,
                          "dist %d, Q[%d]: %g at qk_scale 3, %g at 1", dist, i, q2[i], q1[i]);
        }
        fill(p, FX_T_Q, q1);
        ck_assert_int_eq(memcmp(q1, q2, sizeof q1), 0);
    }
}
END_TEST

START_TEST(qk_scale_is_printed_with_the_problem_and_validated)
{
    fx_problem p = fx_problem_default();
    char line[200], why[256];
    fx_problem_format(&p, line, sizeof line);
    ck_assert_ptr_null(strstr(line, "qk-scale"));
    p.qk_scale = 250;
    fx_problem_format(&p, line, sizeof line);
    ck_assert_str_eq(line, "b=4 sq=4096 sk=4096 hq=16 hkv=16 d=128 bf16 non-causal normal "
                           "qk-scale=250 seed=1");
    ck_assert_int_eq(fx_problem_validate(&p, why, sizeof why), 0);
    p.qk_scale = 0;
    ck_assert_int_eq(fx_problem_validate(&p, why, sizeof why), 2);
    ck_assert_msg(strstr(why, "qk_scale"), "%s", why);
    p.qk_scale = NAN;
    ck_assert_int_eq(fx_problem_validate(&p, why, sizeof why), 2);
}
END_TEST

START_TEST(the_dtype_limits_and_q_k_spreads_are_those_named)
{
    ck_assert_double_eq(fx_dtype_max(FX_FP16), 65504.0);
    ck_assert_float_eq(fx_round(FX_BF16, (float)fx_dtype_max(FX_BF16)),
                       (float)fx_dtype_max(FX_BF16));
    ck_assert(isinf(fx_round(FX_FP16, 65520.0f)));
    ck_assert_double_eq(fx_dist_qk_sigma(FX_DIST_NORMAL), 1.0);
    ck_assert_double_eq(fx_dist_qk_sigma(FX_DIST_LARGE_LOGITS), 8.0);
    ck_assert_double_eq_tol(fx_dist_qk_sigma(FX_DIST_OUTLIERS), sqrt(101.0), 1e-12);
}
END_TEST

/* ---- the timing method ---------------------------------------------------------------- */

START_TEST(the_timing_line_names_the_flush_and_the_spin)
{
    char buf[256];
    fx_timing t = {.repeats = 10, .flush_bytes = (size_t)100 << 20, .spin_us = FX_SPIN_US};
    fx_timing_describe(&t, buf, sizeof buf);
    char want[64];
    snprintf(want, sizeof want, "spin %d us", FX_SPIN_US);
    ck_assert_msg(strstr(buf, "median of 10 calls") && strstr(buf, "L2 flush 100 MiB") &&
                      strstr(buf, want),
                  "%s", buf);
    t.spin_us = 0;
    fx_timing_describe(&t, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "no spin (--spin-us 0)"), "%s", buf);
}
END_TEST

static Suite *harness_suite(void)
{
    Suite *s = suite_create("harness");
    TCase *msg = tcase_create("messages");
    tcase_add_test(msg, messages_carry_the_program_name_once_it_is_set);
    tcase_add_test(msg, a_message_too_long_is_cut_and_still_ends_its_line);
    suite_add_tcase(s, msg);
    TCase *qk = tcase_create("qk_scale");
    tcase_add_test(qk, qk_scale_multiplies_q_and_k_before_rounding_and_leaves_v);
    tcase_add_test(qk, qk_scale_is_printed_with_the_problem_and_validated);
    tcase_add_test(qk, the_dtype_limits_and_q_k_spreads_are_those_named);
    suite_add_tcase(s, qk);
    TCase *timing = tcase_create("timing");
    tcase_add_test(timing, the_timing_line_names_the_flush_and_the_spin);
    suite_add_tcase(s, timing);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(harness_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
