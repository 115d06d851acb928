/*
 * test_options.c — the command line of every stage program (fx_options_parse and the
 * option table in fx_options.h): bad usage returns 2 with a message that names the bad
 * value, a valid line sets every field it mentions, and every row of the table is parsed
 * by its range and listed by --help.
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_main.h"
#include "fx_model_check.h"
#include "fx_usage.h"

typedef struct parsed {
    int rc;
    fx_options o;
    char why[512];
} parsed;

/* Parses `line` (words separated by single spaces) as the arguments after argv[0]. */
static parsed parse(const char *line)
{
    parsed r;
    memset(&r, 0, sizeof r);
    r.rc = fx_test_parse_args(line, &r.o, r.why, sizeof r.why);
    return r;
}

/* `line` is refused with 2 and a message that contains every string in `names`. */
static void assert_refused(const char *line, const char *name1, const char *name2)
{
    parsed r = parse(line);
    ck_assert_msg(r.rc == 2, "'%s' returned %d, expected 2 (message '%s')", line, r.rc, r.why);
    ck_assert_msg(strstr(r.why, name1) != NULL, "'%s': message '%s' does not name '%s'", line,
                  r.why, name1);
    if (name2)
        ck_assert_msg(strstr(r.why, name2) != NULL, "'%s': message '%s' does not name '%s'", line,
                      r.why, name2);
}

/* ---- refusals ----------------------------------------------------------------------- */

START_TEST(zero_or_negative_sizes_are_refused_naming_the_value)
{
    assert_refused("--batch 0", "batch", "0");
    assert_refused("--batch -4", "batch", "-4");
    assert_refused("--seqlen 0", "seqlen", "0");
    assert_refused("--seqlen-q -1", "seqlen-q", "-1");
    assert_refused("--seqlen-k 0", "seqlen-k", "0");
    assert_refused("--heads 0", "heads", "0");
    assert_refused("--heads-q -2", "heads-q", "-2");
    assert_refused("--heads-kv 0", "heads-kv", "0");
    assert_refused("--head-dim 0", "head-dim", "0");
    assert_refused("--head-dim -64", "head-dim", "-64");
}
END_TEST

START_TEST(heads_q_not_a_multiple_of_heads_kv_is_refused)
{
    assert_refused("--heads-q 6 --heads-kv 4", "heads_q (6) is not a multiple of heads_kv (4)",
                   NULL);
    assert_refused("--heads-kv 3", "heads_q (16) is not a multiple of heads_kv (3)", NULL);
}
END_TEST

START_TEST(head_dims_outside_multiples_of_8_up_to_256_are_refused)
{
    assert_refused("--head-dim 100", "head_dim", "100");
    assert_refused("--head-dim 264", "head_dim", "264");
    assert_refused("--head-dim 4", "head_dim", "4");
    assert_refused("--head-dim 512", "head_dim", "512");
}
END_TEST

START_TEST(head_dims_v_outside_multiples_of_8_up_to_256_are_refused)
{
    assert_refused("--head-dim 192 --head-dim-v 100", "head_dim_v", "100");
    assert_refused("--head-dim 192 --head-dim-v 264", "head_dim_v", "264");
    assert_refused("--head-dim 192 --head-dim-v 4", "head_dim_v", "4");
    assert_refused("--head-dim-v 0", "head-dim-v", "0");
    assert_refused("--head-dim-v -128", "head-dim-v", "-128");
}
END_TEST

START_TEST(head_dim_v_is_set_by_its_option_and_head_dim_by_default)
{
    parsed r = parse("--head-dim 192 --head-dim-v 128");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert_int_eq(r.o.problem.head_dim, 192);
    ck_assert_int_eq(r.o.problem.head_dim_v, 128);
    ck_assert_int_eq(fx_head_dim_v(&r.o.problem), 128);
    r = parse("--head-dim 64");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert_int_eq(fx_head_dim_v(&r.o.problem), 64);
}
END_TEST

START_TEST(an_unknown_dtype_or_distribution_is_refused)
{
    assert_refused("--dtype fp8x", "fp8x", NULL);
    assert_refused("--dtype BF16", "BF16", NULL);
    assert_refused("--dist gaussian", "gaussian", NULL);
}
END_TEST

/* The e4m3 recipe (stage 10) takes e4m3 alone, and e4m3 takes what its CPU model and kernel
 * do: fixed-length batches, head_dim_v = head_dim, Hadamard at a power-of-two head_dim. */
START_TEST(fp8_options_need_e4m3_and_e4m3_its_limits)
{
    assert_refused("--hadamard", "--hadamard", "e4m3");
    assert_refused("--fp8-vt --dtype fp16", "--fp8-vt", "fp16");
    assert_refused("--fp8-scaling per-block", "--fp8-scaling", "e4m3");
    assert_refused("--dtype e4m3 --fp8-scaling per-row", "per-row", "per-block");
    assert_refused("--dtype e4m3 --hadamard --head-dim 96", "power of two", "96");
    assert_refused("--dtype e4m3 --head-dim 192 --head-dim-v 128", "head_dim_v", "128");
    assert_refused("--dtype e4m3 --seqlens-q 3,4", "fixed-length", NULL);
}
END_TEST

START_TEST(the_fp8_recipe_is_set_by_its_options)
{
    parsed r = parse("--dtype e4m3 --fp8-scaling per-block --hadamard --fp8-vt");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert_int_eq(r.o.problem.dtype, FX_E4M3);
    ck_assert_int_eq(r.o.problem.fp8_scaling, FX_FP8_PER_BLOCK);
    ck_assert(r.o.problem.fp8_hadamard && r.o.problem.fp8_v_transposed);
    r = parse("--dtype e4m3");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert_int_eq(r.o.problem.fp8_scaling, FX_FP8_PER_TENSOR); /* the paper's baseline */
    ck_assert(!r.o.problem.fp8_hadamard && !r.o.problem.fp8_v_transposed);
}
END_TEST

/* --self-test runs a stage's own test of one device part (stage 10: the V transpose) and
 * nothing else: it takes no mode beside it. */
START_TEST(self_test_runs_alone)
{
    parsed r = parse("--self-test");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert(r.o.self_test && !r.o.check);
    assert_refused("--self-test --check", "--self-test", "--check");
    assert_refused("--self-test --bench", "--self-test", "--bench");
    assert_refused("--self-test --matrix", "--self-test", "--matrix");
    assert_refused("--self-test --repeat 2", "--self-test", "--repeat");
}
END_TEST

START_TEST(a_malformed_number_is_refused)
{
    assert_refused("--batch 4x", "4x", NULL);
    assert_refused("--seqlen 1e3", "1e3", NULL);
    assert_refused("--head-dim 12.5", "12.5", NULL);
    assert_refused("--repeat three", "three", NULL);
    assert_refused("--scale half", "half", NULL);
    assert_refused("--seed -1", "-1", NULL);
    assert_refused("--batch 99999999999", "99999999999", NULL); /* past INT_MAX */
    assert_refused("--seqlen +64", "+64", NULL);                /* a size is digits only */
}
END_TEST

START_TEST(an_unknown_option_or_a_missing_value_is_refused)
{
    assert_refused("--frobnicate", "--frobnicate", NULL);
    assert_refused("--frobnicate 3", "--frobnicate", NULL);
    assert_refused("--check --bnech", "--bnech", NULL);
    assert_refused("--batch", "--batch", NULL); /* no value follows */
}
END_TEST

START_TEST(a_scale_that_fp32_kernels_cannot_hold_is_refused)
{
    assert_refused("--scale 1e39", "1e+39", "softmax_scale");
    assert_refused("--scale 1e-300", "1e-300", "softmax_scale");
    assert_refused("--scale nan", "nan", NULL);
}
END_TEST

START_TEST(an_empty_csv_file_name_is_refused)
{
    char *argv[] = {"stage_test", "--csv", ""};
    fx_options o;
    char why[256];
    fx_options_default(&o);
    ck_assert_int_eq(fx_options_parse(3, argv, &o, why, sizeof why), 2);
    ck_assert_str_eq(why, "--csv needs a file name");
}
END_TEST

START_TEST(a_qk_scale_that_is_not_finite_and_positive_is_refused)
{
    assert_refused("--qk-scale 0", "--qk-scale", "positive");
    assert_refused("--qk-scale -2", "--qk-scale", "positive");
    assert_refused("--qk-scale nan", "--qk-scale", "nan");
    assert_refused("--qk-scale inf", "--qk-scale", "inf");
    assert_refused("--qk-scale 1e400", "--qk-scale", "1e400"); /* overflows a double */
    assert_refused("--qk-scale two", "--qk-scale", "two");
}
END_TEST

/* fp16's largest finite value is 65504: at 8 standard deviations (FX_QK_SCALE_SIGMAS) a
 * normal Q or K may be scaled by 65504/8 = 8188, large-logits' (sigma 8) by 65504/64. */
START_TEST(a_qk_scale_that_overflows_the_dtype_is_refused_naming_the_limit)
{
    parsed r = parse("--dtype fp16 --qk-scale 8188");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert_double_eq(r.o.problem.qk_scale, 8188);
    assert_refused("--dtype fp16 --qk-scale 8189", "65504", "8188");
    /* The dtype may come after the option: the limit is checked once all are read. */
    assert_refused("--qk-scale 8189 --dtype fp16", "65504", "fp16");
    r = parse("--dtype fp16 --dist large-logits --qk-scale 1023");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    assert_refused("--dtype fp16 --dist large-logits --qk-scale 1024", "65504", "1023.5");
    /* bf16 holds about 3.39e38: 8 sigma of a normal allows 4.2e37. */
    assert_refused("--qk-scale 1e38", "bf16", "largest finite");
}
END_TEST

/* The logits S·scale·log2 e must stay in fp32's range: at head_dim 128 and the default
 * scale, 128 · (8X)² · 0.0884 · 1.4427 < 2^127 holds for X up to about 4e17. */
START_TEST(logits_past_fp32s_range_are_refused_naming_the_limit)
{
    parsed r = parse("--qk-scale 1e17");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    assert_refused("--qk-scale 1e18", "fp32's range", "2^127");
    assert_refused("--qk-scale 1e10 --scale 1e20", "fp32's range", "--scale");
    r = parse("--scale 1e20");
    ck_assert_msg(r.rc == 0, "%s", r.why);
}
END_TEST

/* --matrix makes its own cases: a mode or problem option beside it would be ignored. */
START_TEST(the_matrix_refuses_the_options_it_would_ignore)
{
    parsed r = parse("--matrix");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert(r.o.matrix);
    assert_refused("--matrix --bench", "--matrix runs its own cases", "--bench");
    assert_refused("--matrix --head-dim 64", "--matrix runs its own cases", "problem options");
    assert_refused("--matrix --csv x.csv", "--matrix runs its own cases", "--csv");
}
END_TEST

START_TEST(the_cpu_model_refuses_the_modes_that_need_a_gpu)
{
    assert_refused("--cpu --bench", "--cpu", "--bench");
    assert_refused("--cpu --matrix", "--cpu", "--matrix");
    assert_refused("--cpu --csv x.csv", "--cpu", "--csv");
}
END_TEST

START_TEST(the_timing_options_need_the_benchmark)
{
    assert_refused("--cpu --iters 5", "--iters", "without --bench");
    assert_refused("--check --warmup 0", "--warmup", "without --bench");
    assert_refused("--spin-us 0", "--spin-us", "without --bench");
    parsed r = parse("--bench --iters 5 --warmup 0 --spin-us 0");
    ck_assert_msg(r.rc == 0, "%s", r.why);
}
END_TEST

START_TEST(a_seed_is_decimal_or_0x_hex_never_octal)
{
    parsed r = parse("--seed 010");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert_uint_eq(r.o.problem.seed, 10);
    r = parse("--seed 0x1F");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert_uint_eq(r.o.problem.seed, 31);
    assert_refused("--seed +5", "+5", NULL);
    assert_refused("--seed 0x-1", "0x-1", NULL); /* no sign after 0x either */
}
END_TEST

START_TEST(sizes_past_a_32_bit_index_are_refused)
{
    /* Q would hold 65536·65536·16·128 = 2^43 elements. */
    assert_refused("--batch 65536 --seqlen 65536 --heads 16 --head-dim 128", "8796093022208", NULL);
    /* K/V alone: 1·2^20·16·128 = 2^31, one past INT32_MAX. */
    assert_refused("--batch 1 --seqlen-q 1 --seqlen-k 1048576 --heads 16 --head-dim 128",
                   "2147483648", NULL);
}
END_TEST

/* ---- acceptance --------------------------------------------------------------------- */

START_TEST(no_options_give_the_defaults)
{
    parsed r = parse("");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    const fx_problem *p = &r.o.problem;
    ck_assert_int_eq(p->batch, 4);
    ck_assert_int_eq(p->seqlen_q, 4096);
    ck_assert_int_eq(p->seqlen_k, 4096);
    ck_assert_int_eq(p->heads_q, 16);
    ck_assert_int_eq(p->heads_kv, 16);
    ck_assert_int_eq(p->head_dim, 128);
    ck_assert_int_eq(p->dtype, FX_BF16);
    ck_assert_int_eq(p->dist, FX_DIST_NORMAL);
    ck_assert(!p->causal);
    ck_assert_double_eq_tol(p->softmax_scale, 1.0 / sqrt(128.0), 1e-15);
    ck_assert(!r.o.bench);
    ck_assert(!r.o.backward);
    ck_assert(!r.o.matrix);
    ck_assert(!r.o.cpu);
    ck_assert(!r.o.help);
    ck_assert(!r.o.seed_given);
    ck_assert_int_eq(r.o.warmup, 3);
    ck_assert_int_eq(r.o.iters, 10);
    ck_assert_int_eq(r.o.spin_us, FX_SPIN_US);
    ck_assert_int_eq(r.o.ref_slices, 2);
    ck_assert_double_eq(p->qk_scale, 1.0);
    ck_assert_ptr_null(r.o.csv);
}
END_TEST

START_TEST(a_full_valid_line_sets_every_field)
{
    parsed r = parse("--batch 2 --seqlen-q 100 --seqlen-k 300 --heads-q 8 --heads-kv 2 "
                     "--head-dim 64 --dtype fp16 --causal --scale 0.2 --seed 42 --dist outliers "
                     "--check --bench --bwd --repeat 3 --fuzz 5 --warmup 2 "
                     "--iters 7 --spin-us 0 --ref-slices 9 --qk-scale 3.5 --csv out.csv");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    const fx_problem *p = &r.o.problem;
    ck_assert_int_eq(p->batch, 2);
    ck_assert_int_eq(p->seqlen_q, 100);
    ck_assert_int_eq(p->seqlen_k, 300);
    ck_assert_int_eq(p->heads_q, 8);
    ck_assert_int_eq(p->heads_kv, 2);
    ck_assert_int_eq(p->head_dim, 64);
    ck_assert_int_eq(p->dtype, FX_FP16);
    ck_assert(p->causal);
    ck_assert_double_eq(p->softmax_scale, 0.2);
    ck_assert_uint_eq(p->seed, 42);
    ck_assert(r.o.seed_given);
    ck_assert_int_eq(p->dist, FX_DIST_OUTLIERS);
    ck_assert(r.o.check);
    ck_assert(r.o.bench);
    ck_assert(r.o.backward);
    ck_assert(!r.o.matrix);
    ck_assert(!r.o.cpu);
    ck_assert_int_eq(r.o.repeat, 3);
    ck_assert_int_eq(r.o.fuzz, 5);
    ck_assert_int_eq(r.o.warmup, 2);
    ck_assert_int_eq(r.o.iters, 7);
    ck_assert_int_eq(r.o.spin_us, 0);
    ck_assert_int_eq(r.o.ref_slices, 9);
    ck_assert_double_eq(p->qk_scale, 3.5);
    ck_assert_str_eq(r.o.csv, "out.csv");
}
END_TEST

START_TEST(seqlen_and_heads_set_both_sides)
{
    parsed r = parse("--seqlen 777 --heads 12 --dist large-logits --dtype bf16");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert_int_eq(r.o.problem.seqlen_q, 777);
    ck_assert_int_eq(r.o.problem.seqlen_k, 777);
    ck_assert_int_eq(r.o.problem.heads_q, 12);
    ck_assert_int_eq(r.o.problem.heads_kv, 12);
    ck_assert_int_eq(r.o.problem.dist, FX_DIST_LARGE_LOGITS);

    /* Later options win: --seqlen then --seqlen-k leaves seqlen_q alone. */
    r = parse("--seqlen 64 --seqlen-k 128 --heads 8 --heads-kv 1");
    ck_assert_msg(r.rc == 0, "%s", r.why);
    ck_assert_int_eq(r.o.problem.seqlen_q, 64);
    ck_assert_int_eq(r.o.problem.seqlen_k, 128);
    ck_assert_int_eq(r.o.problem.heads_q, 8);
    ck_assert_int_eq(r.o.problem.heads_kv, 1);
}
END_TEST

START_TEST(help_is_accepted)
{
    parsed r = parse("--help");
    ck_assert_int_eq(r.rc, 0);
    ck_assert(r.o.help);
    r = parse("-h");
    ck_assert_int_eq(r.rc, 0);
    ck_assert(r.o.help);
}
END_TEST

/* ---- the table ---------------------------------------------------------------------- */

START_TEST(every_option_is_named_once_with_its_help)
{
    size_t n = 0;
    const fx_option_spec *t = fx_option_table(&n);
    ck_assert_uint_gt(n, 20);
    for (size_t i = 0; i < n; ++i) {
        ck_assert_msg(!strncmp(t[i].name, "--", 2), "'%s' does not begin with --", t[i].name);
        ck_assert_msg(t[i].help && t[i].help[0], "%s has no help", t[i].name);
        ck_assert_msg((t[i].kind == FX_OPT_FLAG) == (t[i].value == NULL),
                      "%s: a value name exactly when it takes a value", t[i].name);
        ck_assert_ptr_eq(fx_option_find(t[i].name), &t[i]);
        for (size_t j = 0; j < i; ++j) {
            ck_assert_str_ne(t[i].name, t[j].name);
            if (t[j].alias)
                ck_assert_str_ne(t[i].name, t[j].alias);
        }
    }
    ck_assert_ptr_null(fx_option_find("--frobnicate"));
}
END_TEST

/* The parser knows exactly the options --help lists: each table row appears in the help
 * text, and the help text names no option that the parser refuses. */
START_TEST(help_lists_every_option_and_no_other)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    fx_usage_options(FX_OPT_PROBLEM, f);
    fx_usage_options(FX_OPT_MODE, f);
    static char text[16384];
    rewind(f);
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    fclose(f);

    size_t n = 0;
    const fx_option_spec *t = fx_option_table(&n);
    for (size_t i = 0; i < n; ++i) {
        char entry[128];
        snprintf(entry, sizeof entry, "  %s", t[i].name);
        ck_assert_msg(strstr(text, entry), "--help does not list %s:\n%s", t[i].name, text);
    }
    for (const char *at = strstr(text, "--"); at; at = strstr(at + 2, "--")) {
        char name[64];
        size_t k = 0;
        /* Option names are lower-case words and digits joined by '-' (--fp8-scaling). */
        while (k + 1 < sizeof name && (at[k] == '-' || (at[k] >= 'a' && at[k] <= 'z') ||
                                       (k > 2 && at[k] >= '0' && at[k] <= '9')))
            name[k] = at[k], ++k;
        name[k] = '\0';
        ck_assert_msg(fx_option_find(name), "--help names '%s', which the parser refuses", name);
    }
    /* No line of the help passes 100 columns. */
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t width = nl ? (size_t)(nl - line) : strlen(line);
        ck_assert_msg(width <= 100, "a --help line of %zu columns: %.*s", width, (int)width, line);
        line = nl ? nl + 1 : line + width;
    }
}
END_TEST

/* Each integer option takes its table's range: one past either end is refused as out of
 * range naming the option, both ends pass the option's own check. */
START_TEST(every_integer_option_takes_its_range)
{
    size_t n = 0;
    const fx_option_spec *t = fx_option_table(&n);
    for (size_t i = 0; i < n; ++i) {
        if (t[i].kind != FX_OPT_INT)
            continue;
        const long long values[4] = {t[i].lo - 1, t[i].hi + 1, t[i].lo, t[i].hi};
        for (int v = 0; v < 4; ++v) {
            char line[128];
            snprintf(line, sizeof line, "%s %lld", t[i].name, values[v]);
            parsed r = parse(line);
            const bool out = strstr(r.why, "out of range") != NULL;
            if (v < 2) {
                ck_assert_msg(r.rc == 2 && out && strstr(r.why, t[i].name), "'%s': rc %d, '%s'",
                              line, r.rc, r.why);
            } else {
                /* The problem check may still refuse a size (INT_MAX elements): not as
                 * out of the option's range. */
                ck_assert_msg(!out, "'%s' is in range: '%s'", line, r.why);
            }
        }
    }
}
END_TEST

START_TEST(every_option_with_a_value_refuses_to_go_without)
{
    size_t n = 0;
    const fx_option_spec *t = fx_option_table(&n);
    for (size_t i = 0; i < n; ++i) {
        if (t[i].kind == FX_OPT_FLAG)
            continue;
        assert_refused(t[i].name, t[i].name, "missing its value");
    }
}
END_TEST

START_TEST(every_flag_sets_its_field)
{
    size_t n = 0;
    const fx_option_spec *t = fx_option_table(&n);
    for (size_t i = 0; i < n; ++i) {
        if (t[i].kind != FX_OPT_FLAG)
            continue;
        parsed r = parse(t[i].name);
        if (r.rc != 0 && strstr(r.why, "needs --dtype e4m3")) { /* an e4m3 recipe's flag */
            char line[96];
            snprintf(line, sizeof line, "--dtype e4m3 %s", t[i].name);
            r = parse(line);
        }
        ck_assert_msg(r.rc == 0, "%s: %s", t[i].name, r.why);
        ck_assert_msg(*(const bool *)((const char *)&r.o + t[i].field), "%s left its field",
                      t[i].name);
    }
}
END_TEST

static Suite *options_suite(void)
{
    Suite *s = suite_create("options");
    TCase *refuse = tcase_create("refusals");
    tcase_add_test(refuse, zero_or_negative_sizes_are_refused_naming_the_value);
    tcase_add_test(refuse, heads_q_not_a_multiple_of_heads_kv_is_refused);
    tcase_add_test(refuse, head_dims_outside_multiples_of_8_up_to_256_are_refused);
    tcase_add_test(refuse, head_dims_v_outside_multiples_of_8_up_to_256_are_refused);
    tcase_add_test(refuse, an_unknown_dtype_or_distribution_is_refused);
    tcase_add_test(refuse, fp8_options_need_e4m3_and_e4m3_its_limits);
    tcase_add_test(refuse, a_malformed_number_is_refused);
    tcase_add_test(refuse, an_unknown_option_or_a_missing_value_is_refused);
    tcase_add_test(refuse, sizes_past_a_32_bit_index_are_refused);
    tcase_add_test(refuse, a_scale_that_fp32_kernels_cannot_hold_is_refused);
    tcase_add_test(refuse, the_cpu_model_refuses_the_modes_that_need_a_gpu);
    tcase_add_test(refuse, the_timing_options_need_the_benchmark);
    tcase_add_test(refuse, an_empty_csv_file_name_is_refused);
    tcase_add_test(refuse, a_qk_scale_that_is_not_finite_and_positive_is_refused);
    tcase_add_test(refuse, a_qk_scale_that_overflows_the_dtype_is_refused_naming_the_limit);
    tcase_add_test(refuse, logits_past_fp32s_range_are_refused_naming_the_limit);
    tcase_add_test(refuse, the_matrix_refuses_the_options_it_would_ignore);
    suite_add_tcase(s, refuse);

    TCase *accept = tcase_create("acceptance");
    tcase_add_test(accept, no_options_give_the_defaults);
    tcase_add_test(accept, a_full_valid_line_sets_every_field);
    tcase_add_test(accept, seqlen_and_heads_set_both_sides);
    tcase_add_test(accept, head_dim_v_is_set_by_its_option_and_head_dim_by_default);
    tcase_add_test(accept, help_is_accepted);
    tcase_add_test(accept, a_seed_is_decimal_or_0x_hex_never_octal);
    tcase_add_test(accept, the_fp8_recipe_is_set_by_its_options);
    tcase_add_test(accept, self_test_runs_alone);
    suite_add_tcase(s, accept);

    TCase *table = tcase_create("table");
    tcase_add_test(table, every_option_is_named_once_with_its_help);
    tcase_add_test(table, help_lists_every_option_and_no_other);
    tcase_add_test(table, every_integer_option_takes_its_range);
    tcase_add_test(table, every_option_with_a_value_refuses_to_go_without);
    tcase_add_test(table, every_flag_sets_its_field);
    suite_add_tcase(s, table);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(options_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
