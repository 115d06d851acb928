/*
 * test_fp8_acc.c — the arithmetic of the tensor-core accumulation model (common/fx_fp8_acc.h)
 * that tests/gpu/fp8_acc_probe fits to the GPU: alignment to the largest term, the three
 * roundings of a term, groups, how C joins, the exponent of an unnormalised product, and the
 * text form the probe prints. Hand-computed cases, no GPU.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fx_fp8_acc.h"

static fx_fp8_acc_params params(int g, int bits, fx_acc_round term, fx_acc_c_mode c,
                                fx_acc_round out, int fields)
{
    fx_fp8_acc_params p;
    p.group = g;
    p.frac_bits = bits;
    p.term_round = term;
    p.c_mode = c;
    p.out_round = out;
    p.emax_fields = fields;
    return p;
}

/* a[0]·b[0] = 2^16 (256·256) and a[1]·b[1] = s·2^(16-t) */
static float big_small(double s, int t, const fx_fp8_acc_params *p)
{
    float a[32] = {256.0f, (float)(s * ldexp(1.0, 8 - t / 2))};
    float b[32] = {256.0f, (float)ldexp(1.0, 8 - (t - t / 2))};
    return fx_fp8_dot_model(a, b, 32, 0.0f, p);
}

START_TEST(small_terms_stop_counting_at_b_bits)
{
    const fx_fp8_acc_params p = params(32, 13, FX_ACC_RZ, FX_ACC_C_JOIN, FX_ACC_RZ, 0);
    for (int t = 1; t <= 13; ++t)
        ck_assert_float_eq(big_small(1.0, t, &p), (float)(65536.0 + ldexp(1.0, 16 - t)));
    for (int t = 14; t <= 24; ++t)
        ck_assert_float_eq(big_small(1.0, t, &p), 65536.0f);
}
END_TEST

START_TEST(term_roundings)
{
    const fx_fp8_acc_params rz = params(32, 13, FX_ACC_RZ, FX_ACC_C_JOIN, FX_ACC_RN, 0);
    const fx_fp8_acc_params rd = params(32, 13, FX_ACC_RD, FX_ACC_C_JOIN, FX_ACC_RN, 0);
    const fx_fp8_acc_params rn = params(32, 13, FX_ACC_RN, FX_ACC_C_JOIN, FX_ACC_RN, 0);
    /* -2^2 is below the unit 2^3: RZ drops it, RD (floor) takes a whole unit off */
    ck_assert_float_eq(big_small(-1.0, 14, &rz), 65536.0f);
    ck_assert_float_eq(big_small(-1.0, 14, &rd), 65536.0f - 8.0f);
    /* 1.5 units: RZ and RD keep 1, RN 2; -1.5 units: RZ -1, RD and RN -2 */
    ck_assert_float_eq(big_small(1.5, 13, &rz), 65536.0f + 8.0f);
    ck_assert_float_eq(big_small(1.5, 13, &rd), 65536.0f + 8.0f);
    ck_assert_float_eq(big_small(1.5, 13, &rn), 65536.0f + 16.0f);
    ck_assert_float_eq(big_small(-1.5, 13, &rz), 65536.0f - 8.0f);
    ck_assert_float_eq(big_small(-1.5, 13, &rd), 65536.0f - 16.0f);
    ck_assert_float_eq(big_small(-1.5, 13, &rn), 65536.0f - 16.0f);
}
END_TEST

/* The loss is relative to the largest product, not to the sum: +2^16 - 2^16 + 2^0 */
START_TEST(cancellation_loses_what_the_largest_hides)
{
    const fx_fp8_acc_params p = params(32, 13, FX_ACC_RZ, FX_ACC_C_JOIN, FX_ACC_RZ, 0);
    float a[32] = {256.0f, -256.0f, 1.0f}, b[32] = {256.0f, 256.0f, 1.0f};
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, 0.0f, &p), 0.0f);
    a[2] = 8.0f; /* 2^3 = 2^(16-13): kept */
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, 0.0f, &p), 8.0f);
}
END_TEST

/* Groups: a small product in another group than the large one survives when groups meet in
 * fp32, not when the accumulator joins the next group's alignment. */
START_TEST(groups_and_c_modes)
{
    float a[32] = {0}, b[32] = {0};
    a[0] = b[0] = 256.0f;  /* 2^16 at k = 0 */
    a[16] = b[16] = 0.25f; /* 2^-4 = 2^(16-20) at k = 16 */
    const fx_fp8_acc_params fp32 = params(16, 13, FX_ACC_RZ, FX_ACC_C_FP32, FX_ACC_RN, 0);
    const fx_fp8_acc_params join = params(16, 13, FX_ACC_RZ, FX_ACC_C_JOIN, FX_ACC_RN, 0);
    const fx_fp8_acc_params one = params(32, 13, FX_ACC_RZ, FX_ACC_C_FP32, FX_ACC_RN, 0);
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, 0.0f, &fp32), 65536.0f + 0.0625f);
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, 0.0f, &join), 65536.0f);
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, 0.0f, &one), 65536.0f);
}
END_TEST

/* C joining the alignment loses its own low bits even with every product 0 (what
 * SageAttention2 reports for Hopper's fp8 mma); added in fp32 it passes through. */
START_TEST(c_alone)
{
    float a[32] = {0}, b[32] = {0};
    const float c = 1.0f + 0x1p-20f;
    const fx_fp8_acc_params join = params(32, 13, FX_ACC_RZ, FX_ACC_C_JOIN, FX_ACC_RZ, 0);
    const fx_fp8_acc_params fp32 = params(32, 13, FX_ACC_RZ, FX_ACC_C_FP32, FX_ACC_RZ, 0);
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, c, &join), 1.0f);
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, -c, &join), -1.0f);
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, c, &fp32), c);
    /* RD: the two's-complement truncation of -c goes down a unit */
    const fx_fp8_acc_params rd = params(32, 13, FX_ACC_RD, FX_ACC_C_JOIN, FX_ACC_RZ, 0);
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, -c, &rd), -(1.0f + 0x1p-13f));
}
END_TEST

/* 240·240 = 1.875²·2^14 = 3.52·2^14: the value's exponent is 15, the operands' sum 14. */
START_TEST(unnormalised_product_exponent)
{
    float a[32] = {240.0f, 2.0f}, b[32] = {240.0f, 1.0f}; /* + 2^1 */
    const fx_fp8_acc_params value = params(32, 13, FX_ACC_RZ, FX_ACC_C_JOIN, FX_ACC_RN, 0);
    const fx_fp8_acc_params fields = params(32, 13, FX_ACC_RZ, FX_ACC_C_JOIN, FX_ACC_RN, 1);
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, 0.0f, &value), 57600.0f);         /* unit 4 */
    ck_assert_float_eq(fx_fp8_dot_model(a, b, 32, 0.0f, &fields), 57600.0f + 2.0f); /* unit 2 */
}
END_TEST

/* Many bits kept, one group per product, C in fp32: an fp32 sum in k order. */
START_TEST(wide_model_is_an_fp32_sum)
{
    float a[64], b[64];
    srand(7);
    for (int rep = 0; rep < 200; ++rep) {
        for (int k = 0; k < 64; ++k) {
            a[k] = (float)(rand() % 33 - 16) * 0.125f;
            b[k] = (float)(rand() % 33 - 16) * 4.0f;
        }
        const fx_fp8_acc_params p = params(1, 45, FX_ACC_RN, FX_ACC_C_FP32, FX_ACC_RN, 0);
        float s = 0.5f;
        for (int k = 0; k < 64; ++k)
            s += a[k] * b[k];
        ck_assert_float_eq(fx_fp8_dot_model(a, b, 64, 0.5f, &p), s);
        ck_assert(fx_fp8_dot_exact(a, b, 64, 0.5f) == (double)s); /* small integers: exact */
    }
}
END_TEST

START_TEST(text_round_trip)
{
    const char *text = "G=16 B=14 term=rd c=fp32 out=rn emax=fields";
    fx_fp8_acc_params p;
    ck_assert_int_eq(fx_fp8_acc_parse(text, &p), 0);
    ck_assert_int_eq(p.group, 16);
    ck_assert_int_eq(p.frac_bits, 14);
    ck_assert_int_eq(p.term_round, FX_ACC_RD);
    ck_assert_int_eq(p.c_mode, FX_ACC_C_FP32);
    ck_assert_int_eq(p.out_round, FX_ACC_RN);
    ck_assert_int_eq(p.emax_fields, 1);
    char back[96];
    fx_fp8_acc_format(&p, back, sizeof back);
    ck_assert_str_eq(back, text);
    ck_assert_int_eq(fx_fp8_acc_parse("G=16 B=14 term=up c=fp32 out=rn emax=fields", &p), -1);
    ck_assert_int_eq(fx_fp8_acc_parse("G=16 B=99 term=rz c=fp32 out=rn emax=fields", &p), -1);
    ck_assert_int_eq(fx_fp8_acc_parse("G=? B=? term=? c=? out=? emax=?", &p), -1);
}
END_TEST

/* The measured Hopper parameters: the text form and the struct the model uses agree, and they
 * reproduce two rows of the probe's table S1 (a product 2^16 and one of 2^(16-t): kept while
 * t <= 13, lost at 14; 1.5 units at t = 13 truncated to 1). */
START_TEST(hopper_parameters)
{
    fx_fp8_acc_params p;
    ck_assert_int_eq(fx_fp8_acc_parse(FX_FP8_ACC_HOPPER_E4M3, &p), 0);
    const fx_fp8_acc_params *h = fx_fp8_acc_hopper();
    ck_assert_int_eq(p.group, h->group);
    ck_assert_int_eq(p.frac_bits, h->frac_bits);
    ck_assert_int_eq(p.term_round, h->term_round);
    ck_assert_int_eq(p.c_mode, h->c_mode);
    ck_assert_int_eq(p.out_round, h->out_round);
    ck_assert_int_eq(p.emax_fields, h->emax_fields);
    const float a[2] = {256.0f, 2.0f}, b13[2] = {256.0f, 4.0f}, b14[2] = {256.0f, 2.0f};
    ck_assert_float_eq(fx_fp8_dot_model(a, b13, 2, 0.0f, h), 65536.0f + 8.0f); /* t = 13 */
    ck_assert_float_eq(fx_fp8_dot_model(a, b14, 2, 0.0f, h), 65536.0f);        /* t = 14 */
    const float a15[2] = {256.0f, 3.0f}; /* 1.5 units of 2^3 at t = 13: one is kept */
    ck_assert_float_eq(fx_fp8_dot_model(a15, b13, 2, 0.0f, h), 65536.0f + 8.0f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fp8_acc");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, small_terms_stop_counting_at_b_bits);
    tcase_add_test(tc, term_roundings);
    tcase_add_test(tc, cancellation_loses_what_the_largest_hides);
    tcase_add_test(tc, groups_and_c_modes);
    tcase_add_test(tc, c_alone);
    tcase_add_test(tc, unnormalised_product_exponent);
    tcase_add_test(tc, wide_model_is_an_fp32_sum);
    tcase_add_test(tc, text_round_trip);
    tcase_add_test(tc, hopper_parameters);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
