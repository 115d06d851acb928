/*
 * test_stage.c — the capability checks every stage program runs before any kernel
 * (fx_stage.h: fx_stage_supports, fx_caps_describe): a problem outside a stage's
 * capabilities is refused with 2 and a message that names the limit.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fx_problem.h"
#include "fx_stage.h"

static cudaError_t no_launch(const fx_fwd_args *a)
{
    (void)a;
    return cudaSuccess;
}
static cudaError_t no_launch_bwd(const fx_bwd_args *a)
{
    (void)a;
    return cudaSuccess;
}

/* A stage like 03: head_dim 64/128, bf16 only, causal, no GQA, a backward. */
static const fx_stage listed = {
    .id = "99_listed",
    .summary = "a test stage with a list of head dims",
    .caps = {.head_dims = {64, 128},
             .n_head_dims = 2,
             .dtypes = FX_DTYPE_BIT(FX_BF16),
             .causal = true,
             .gqa = false,
             .backward = true,
             .min_sm = 80},
    .forward = no_launch,
    .backward = no_launch_bwd,
};

/* A stage with a range: any multiple of 8 up to 128, both dtypes, no causal, no backward. */
static const fx_stage ranged = {
    .id = "98_ranged",
    .summary = "a test stage with a head_dim range",
    .caps = {.head_dim_multiple = 8,
             .head_dim_max = 128,
             .dtypes = FX_DTYPE_BIT(FX_BF16) | FX_DTYPE_BIT(FX_FP16),
             .causal = false,
             .gqa = true,
             .backward = false,
             .min_sm = 90,
             .sm90a_only = true,
             .limits = "a limit in words"},
    .forward = no_launch,
};

/* A stage like 09: head_dim 128/192, and 192 with head_dim_v 128. */
static const fx_stage paired = {
    .id = "97_paired",
    .summary = "a test stage with a head_dim_v pair",
    .caps = {.head_dims = {128, 192},
             .n_head_dims = 2,
             .head_dim_v_pairs = {{192, 128}},
             .n_head_dim_v_pairs = 1,
             .dtypes = FX_DTYPE_BIT(FX_BF16),
             .causal = true,
             .gqa = true,
             .backward = true,
             .min_sm = 90},
    .forward = no_launch,
    .backward = no_launch_bwd,
};

static fx_problem small(int head_dim)
{
    fx_problem p = fx_problem_default();
    p.batch = 1;
    p.seqlen_q = p.seqlen_k = 64;
    p.heads_q = p.heads_kv = 2;
    p.head_dim = head_dim;
    char why[256];
    ck_assert_msg(fx_problem_validate(&p, why, sizeof why) == 0, "%s", why);
    return p;
}

static void assert_refused(const fx_stage *s, fx_problem p, bool backward, const char *needle)
{
    char why[512] = "";
    ck_assert_int_eq(fx_stage_supports(s, &p, backward, why, sizeof why), 2);
    ck_assert_msg(strstr(why, needle) != NULL, "message '%s' does not name '%s'", why, needle);
    /* The program's prefix names the stage (fx_msg.h); the message itself does not. */
    ck_assert_msg(strstr(why, s->id) == NULL, "message '%s' names the stage", why);
}

START_TEST(a_problem_inside_the_capabilities_is_accepted)
{
    char why[256];
    fx_problem p = small(128);
    p.causal = true;
    ck_assert_int_eq(fx_stage_supports(&listed, &p, true, why, sizeof why), 0);
    fx_problem r = small(40);
    r.dtype = FX_FP16;
    r.heads_q = 4;
    ck_assert_int_eq(fx_stage_supports(&ranged, &r, false, why, sizeof why), 0);
}
END_TEST

START_TEST(each_limit_is_refused_by_name)
{
    assert_refused(&listed, small(96), false, "head_dim 96");
    assert_refused(&ranged, small(136), false, "head_dim 136");
    fx_problem fp16 = small(64);
    fp16.dtype = FX_FP16;
    assert_refused(&listed, fp16, false, "fp16");
    fx_problem causal = small(64);
    causal.causal = true;
    assert_refused(&ranged, causal, false, "causal");
    fx_problem gqa = small(64);
    gqa.heads_q = 4;
    assert_refused(&listed, gqa, false, "GQA");
    assert_refused(&ranged, small(64), true, "no backward");
}
END_TEST

static fx_problem small_v(int head_dim, int head_dim_v)
{
    fx_problem p = small(head_dim);
    p.head_dim_v = head_dim_v;
    return p;
}

/* head_dim_v != head_dim only where the caps list the pair, forward only; head_dim_v equal
 * to head_dim is no head_dim_v at all. */
START_TEST(head_dim_v_is_refused_unless_the_caps_list_the_pair)
{
    char why[256];
    const fx_problem ok[] = {small_v(192, 128), small_v(192, 192), small_v(128, 128)};
    ck_assert_int_eq(fx_stage_supports(&paired, &ok[0], false, why, sizeof why), 0);
    ck_assert_int_eq(fx_stage_supports(&paired, &ok[1], true, why, sizeof why), 0);
    ck_assert_int_eq(fx_stage_supports(&listed, &ok[2], false, why, sizeof why), 0);
    assert_refused(&listed, small_v(128, 64), false,
                   "head_dim_v 64 with head_dim 128 is not supported (head_dim_v: head_dim only)");
    assert_refused(&ranged, small_v(64, 32), false, "head_dim_v 32 with head_dim 64");
    assert_refused(&paired, small_v(192, 64), false,
                   "head_dim_v 64 with head_dim 192 is not supported (head_dim_v: head_dim, or "
                   "128 with head_dim 192)");
    assert_refused(&paired, small_v(128, 192), false, "head_dim_v 192 with head_dim 128");
    /* A head_dim outside the list is named as such first. */
    assert_refused(&paired, small_v(256, 128), false, "head_dim 256 is not supported");
    assert_refused(&paired, small_v(192, 128), true,
                   "head_dim_v 128 != head_dim 192 has no backward");
}
END_TEST

START_TEST(a_grid_past_65535_heads_or_batches_is_refused_by_name)
{
    char why[256] = "";
    fx_problem p = fx_problem_default();
    ck_assert_int_eq(fx_check_grid_heads_batch(&p, why, sizeof why), 0);
    p.heads_q = p.heads_kv = FX_MAX_GRID_YZ + 1;
    ck_assert_int_eq(fx_check_grid_heads_batch(&p, why, sizeof why), 2);
    ck_assert_ptr_nonnull(strstr(why, "the grid is one CTA per"));
    ck_assert_ptr_nonnull(strstr(why, "heads_q (65536)"));
    p = fx_problem_default();
    p.batch = FX_MAX_GRID_YZ + 1;
    why[0] = '\0';
    ck_assert_int_eq(fx_check_grid_heads_batch(&p, why, sizeof why), 2);
    ck_assert_ptr_nonnull(strstr(why, "batch (65536)"));
}
END_TEST

START_TEST(the_description_lists_every_capability)
{
    char buf[1024];
    fx_caps_describe(&listed, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "64/128"));
    ck_assert_ptr_nonnull(strstr(buf, "bf16"));
    ck_assert_ptr_null(strstr(buf, "fp16"));
    ck_assert_ptr_nonnull(strstr(buf, "sm_80 or newer"));
    ck_assert_ptr_nonnull(strstr(buf, "  CPU model: none (--cpu is refused)\n"));
    /* An e4m3 stage (fp8 tiles) has --cpu through the fp8 model, without a cpu_model. */
    fx_stage fp8 = listed;
    fp8.fp8_tiles = fx_fp8_tiles_for;
    fx_caps_describe(&fp8, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "  CPU model: yes (--cpu; forward, e4m3)\n"));
    fx_caps_describe(&ranged, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "multiples of 8 up to 128"));
    ck_assert_ptr_nonnull(strstr(buf, "bf16/fp16"));
    ck_assert_ptr_nonnull(strstr(buf, "sm_90a (Hopper) only"));
    ck_assert_ptr_nonnull(strstr(buf, "a limit in words"));
    ck_assert_ptr_null(strstr(buf, "head_dim_v"));
    fx_caps_describe(&paired, buf, sizeof buf);
    ck_assert_ptr_nonnull(
        strstr(buf, "  head_dim: 128/192; head_dim_v: head_dim, or 128 with head_dim 192\n"));
}
END_TEST

/* The environment settings' check (FX_ABLATION, FX_SCHEDULER, FX_SCHED_ORDER): unset or
 * empty is the default, a known value its index, anything else refused with the value
 * quoted, a long one cut, and the known values listed. */
START_TEST(an_environment_setting_is_one_of_its_values_or_refused_quoted)
{
    static const char *const values[] = {"l2", "lpt", "m-fastest"};
    char why[256] = "";
    unsetenv("FX_TEST_SETTING");
    ck_assert_int_eq(fx_env_choice("FX_TEST_SETTING", values, 3, 7, why, sizeof why), 7);
    setenv("FX_TEST_SETTING", "", 1);
    ck_assert_int_eq(fx_env_choice("FX_TEST_SETTING", values, 3, 7, why, sizeof why), 7);
    setenv("FX_TEST_SETTING", "m-fastest", 1);
    ck_assert_int_eq(fx_env_choice("FX_TEST_SETTING", values, 3, 7, why, sizeof why), 2);
    setenv("FX_TEST_SETTING", "xyz", 1);
    ck_assert_int_eq(fx_env_choice("FX_TEST_SETTING", values, 3, 7, why, sizeof why), -1);
    ck_assert_str_eq(why, "FX_TEST_SETTING=\"xyz\" is not l2, lpt or m-fastest");
    setenv("FX_TEST_SETTING", "abcdefghijklmnopqrstuvwxyz0123456789", 1);
    ck_assert_int_eq(fx_env_choice("FX_TEST_SETTING", values, 2, 7, why, sizeof why), -1);
    ck_assert_str_eq(why, "FX_TEST_SETTING=\"abcdefghijklmnopqrstuvwxyz012345…\" is not l2 or lpt");
    unsetenv("FX_TEST_SETTING");
}
END_TEST

START_TEST(a_quoted_value_is_cut_at_a_character_and_shows_no_control_bytes)
{
    char buf[64];
    fx_quote_value("a\"b\nc", buf, sizeof buf);
    ck_assert_str_eq(buf, "\"a?b?c\"");
    // 31 ASCII bytes then a two-byte character across the cut at 32: cut before it.
    fx_quote_value("0123456789012345678901234567890\xc3\xa9xyz", buf, sizeof buf);
    ck_assert_str_eq(buf, "\"0123456789012345678901234567890…\"");
    fx_quote_value("01234567890123456789012345678901", buf, sizeof buf);  // 32: not cut
    ck_assert_str_eq(buf, "\"01234567890123456789012345678901\"");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stage capabilities");
    TCase *tc = tcase_create("supports");
    tcase_add_test(tc, a_problem_inside_the_capabilities_is_accepted);
    tcase_add_test(tc, each_limit_is_refused_by_name);
    tcase_add_test(tc, head_dim_v_is_refused_unless_the_caps_list_the_pair);
    tcase_add_test(tc, the_description_lists_every_capability);
    tcase_add_test(tc, a_grid_past_65535_heads_or_batches_is_refused_by_name);
    tcase_add_test(tc, an_environment_setting_is_one_of_its_values_or_refused_quoted);
    tcase_add_test(tc, a_quoted_value_is_cut_at_a_character_and_shows_no_control_bytes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
