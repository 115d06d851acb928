/*
 * test_host.c — host-side numbers (fx_host.h) and the problem's arithmetic
 * (fx_problem.h): bf16/fp16 rounding, the seeded generator and its distributions,
 * validation messages, and FLOP counting.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_host.h"
#include "fx_problem.h"
#include "fx_model_check.h" /* fx_test_calloc */

static float from_bits32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- conversions -------------------------------------------------------------------- */

/* bf16 keeps 7 mantissa bits: between 1 and 2 its values are 1 + k·2^-7. */
START_TEST(bf16_rounds_to_nearest_with_ties_to_even)
{
    ck_assert_uint_eq(fx_float_to_bf16(1.0f), 0x3f80);
    /* 1 + 2^-8 is halfway between 1 (even) and 1 + 2^-7 (odd): down to 1. */
    ck_assert_float_eq(fx_round(FX_BF16, 1.0f + 0x1p-8f), 1.0f);
    /* 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2·2^-7 (even): up. */
    ck_assert_float_eq(fx_round(FX_BF16, 1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
    /* Just past a tie rounds away from it, just before stays. */
    ck_assert_float_eq(fx_round(FX_BF16, 1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
    ck_assert_float_eq(fx_round(FX_BF16, 1.0f + 0x1p-8f - 0x1p-20f), 1.0f);
    /* Negative values mirror positive ones. */
    ck_assert_float_eq(fx_round(FX_BF16, -(1.0f + 3 * 0x1p-8f)), -(1.0f + 0x1p-6f));
    /* A carry out of the mantissa moves to the next binade: 2 - 2^-9 rounds to 2. */
    ck_assert_float_eq(fx_round(FX_BF16, 2.0f - 0x1p-9f), 2.0f);
    ck_assert_float_eq(fx_round(FX_BF16, 0.1f), 0.10009765625f);
}
END_TEST

START_TEST(bf16_keeps_nan_and_inf_and_overflows_to_inf)
{
    ck_assert(isnan(fx_bf16_to_float(fx_float_to_bf16(NAN))));
    /* A NaN whose payload sits only in the low 16 bits must not truncate to inf. */
    ck_assert(isnan(fx_bf16_to_float(fx_float_to_bf16(from_bits32(0x7f800001u)))));
    ck_assert(isnan(fx_bf16_to_float(fx_float_to_bf16(from_bits32(0xffc00001u)))));
    ck_assert_uint_eq(fx_float_to_bf16(INFINITY), 0x7f80);
    ck_assert_uint_eq(fx_float_to_bf16(-INFINITY), 0xff80);
    /* FLT_MAX lies past the last bf16 (0x7f7f) by more than half a step: inf. */
    ck_assert_uint_eq(fx_float_to_bf16(from_bits32(0x7f7fffffu)), 0x7f80);
    /* Just below the halfway point it stays finite. */
    ck_assert_uint_eq(fx_float_to_bf16(from_bits32(0x7f7f7fffu)), 0x7f7f);
    /* The sign of zero survives. */
    ck_assert_uint_eq(fx_float_to_bf16(-0.0f), 0x8000);
}
END_TEST

/* fp16: 10 mantissa bits, largest finite 65504, subnormals in steps of 2^-24. */
START_TEST(fp16_rounds_to_nearest_with_ties_to_even)
{
    ck_assert_uint_eq(fx_float_to_fp16(1.0f), 0x3c00);
    ck_assert_float_eq(fx_round(FX_FP16, 1.0f + 0x1p-11f), 1.0f);
    ck_assert_float_eq(fx_round(FX_FP16, 1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
    ck_assert_float_eq(fx_round(FX_FP16, 1.0f + 0x1p-11f + 0x1p-20f), 1.0f + 0x1p-10f);
    ck_assert_float_eq(fx_round(FX_FP16, -(1.0f + 3 * 0x1p-11f)), -(1.0f + 0x1p-9f));
    ck_assert_float_eq(fx_round(FX_FP16, 0.1f), 0.0999755859375f);
    ck_assert_uint_eq(fx_float_to_fp16(-2.0f), 0xc000);
}
END_TEST

START_TEST(fp16_keeps_nan_and_inf_and_overflows_to_inf)
{
    ck_assert(isnan(fx_fp16_to_float(fx_float_to_fp16(NAN))));
    ck_assert(isnan(fx_fp16_to_float(fx_float_to_fp16(from_bits32(0x7f800001u)))));
    ck_assert_uint_eq(fx_float_to_fp16(INFINITY), 0x7c00);
    ck_assert_uint_eq(fx_float_to_fp16(-INFINITY), 0xfc00);
    ck_assert_uint_eq(fx_float_to_fp16(65504.0f), 0x7bff);
    /* 65520 is halfway between 65504 (odd mantissa) and 65536 (= inf): ties to even, inf. */
    ck_assert_uint_eq(fx_float_to_fp16(65519.996f), 0x7bff);
    ck_assert_uint_eq(fx_float_to_fp16(65520.0f), 0x7c00);
    ck_assert_uint_eq(fx_float_to_fp16(-65520.0f), 0xfc00);
    ck_assert_uint_eq(fx_float_to_fp16(1e6f), 0x7c00);
    ck_assert_uint_eq(fx_float_to_fp16(3e38f), 0x7c00);
    ck_assert(isinf(fx_fp16_to_float(0x7c00)));
}
END_TEST

START_TEST(fp16_subnormals_round_to_nearest_even)
{
    ck_assert_uint_eq(fx_float_to_fp16(0x1p-24f), 0x0001);   /* smallest subnormal */
    ck_assert_uint_eq(fx_float_to_fp16(0x1p-25f), 0x0000);   /* tie with 0: even, 0 */
    ck_assert_uint_eq(fx_float_to_fp16(0x1.8p-25f), 0x0001); /* 0.75 of a step: up */
    ck_assert_uint_eq(fx_float_to_fp16(0x1.8p-24f), 0x0002); /* 1.5 steps: tie, even 2 */
    ck_assert_uint_eq(fx_float_to_fp16(0x1.4p-23f), 0x0002); /* 2.5 steps: tie, even 2 */
    ck_assert_uint_eq(fx_float_to_fp16(0x1p-26f), 0x0000);   /* a quarter step: 0 */
    ck_assert_uint_eq(fx_float_to_fp16(-0x1p-24f), 0x8001);
    ck_assert_uint_eq(fx_float_to_fp16(0x3ffp-24f), 0x03ff); /* largest subnormal */
    /* Halfway between the largest subnormal (odd) and the smallest normal: up to 2^-14. */
    ck_assert_uint_eq(fx_float_to_fp16(0x7ffp-25f), 0x0400);
    ck_assert_uint_eq(fx_float_to_fp16(0x1p-14f), 0x0400);
    /* float subnormals are far below half a step: signed zero. */
    ck_assert_uint_eq(fx_float_to_fp16(from_bits32(0x00000001u)), 0x0000);
    ck_assert_uint_eq(fx_float_to_fp16(from_bits32(0x80400000u)), 0x8000);
    /* Back to float: exact. */
    ck_assert_float_eq(fx_fp16_to_float(0x0001), 0x1p-24f);
    ck_assert_float_eq(fx_fp16_to_float(0x03ff), 0x3ffp-24f);
    ck_assert_float_eq(fx_fp16_to_float(0x8200), -0x1p-15f);
}
END_TEST

/* Every finite pattern of both dtypes converts to float and back to itself; NaN to NaN. */
START_TEST(every_bf16_and_fp16_value_round_trips)
{
    for (uint32_t h = 0; h <= 0xffff; h++) {
        for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
            float x = fx_bits_to_float((fx_dtype)dt, (uint16_t)h);
            if (isnan(x))
                ck_assert(isnan(fx_bits_to_float((fx_dtype)dt, fx_float_to_bits((fx_dtype)dt, x))));
            else
                ck_assert_uint_eq(fx_float_to_bits((fx_dtype)dt, x), h);
        }
    }
}
END_TEST

/* The property behind all of the above, on 2^20 floats of every magnitude: no value of the
 * dtype is closer than the rounded one, and on a tie the rounded one has an even mantissa. */
START_TEST(rounding_picks_the_nearest_value_of_the_dtype)
{
    for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
        const fx_dtype t = (fx_dtype)dt;
        const double largest = fx_bits_to_float(t, t == FX_FP16 ? 0x7bff : 0x7f7f);
        for (uint64_t n = 0; n < (1u << 20); n++) {
            /* A random float bit pattern, finite and below the dtype's largest value. */
            float x = from_bits32((uint32_t)fx_rng_u64(5, 99, n));
            if (!isfinite(x) || fabs(x) >= largest)
                continue;
            uint16_t r = fx_float_to_bits(t, x);
            double xr = fx_bits_to_float(t, r);
            double err = fabs(xr - x);
            /* Neighbours of r in magnitude (the sign bit is separate): bits ±1. */
            uint16_t mag = r & 0x7fff;
            for (int step = -1; step <= 1; step += 2) {
                if (mag == 0 && step < 0)
                    continue;
                double other = fx_bits_to_float(t, (uint16_t)((r & 0x8000) | (mag + step)));
                ck_assert_msg(err <= fabs(other - x), "%s: %.9g rounded to %.9g, %.9g is nearer",
                              fx_dtype_name(t), x, xr, other);
                if (err == fabs(other - x))
                    ck_assert_msg((r & 1u) == 0, "%s: tie at %.9g went to odd %.9g",
                                  fx_dtype_name(t), x, xr);
            }
        }
    }
}
END_TEST

START_TEST(unit_roundoff_and_bulk_conversions)
{
    ck_assert_double_eq(fx_dtype_epsilon(FX_BF16), 0x1p-8);
    ck_assert_double_eq(fx_dtype_epsilon(FX_FP16), 0x1p-11);
    const float x[4] = {1.0f, -0.5f, 3.140625f, 65504.0f};
    uint16_t bits[4];
    float back[4];
    fx_to_bits(FX_FP16, x, bits, 4);
    fx_from_bits(FX_FP16, bits, back, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(back[i], x[i]);
    ck_assert_uint_eq(bits[1], 0xb800);
}
END_TEST

/* ---- generator ---------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

START_TEST(the_generator_is_a_pure_function_of_seed_stream_and_index)
{
    ck_assert_uint_eq(fx_rng_u64(1, 2, 3), fx_rng_u64(1, 2, 3));
    ck_assert_uint_ne(fx_rng_u64(1, 2, 3), fx_rng_u64(2, 2, 3));
    ck_assert_uint_ne(fx_rng_u64(1, 2, 3), fx_rng_u64(1, 3, 3));
    ck_assert_uint_ne(fx_rng_u64(1, 2, 3), fx_rng_u64(1, 2, 4));
    ck_assert_double_eq(fx_rng_normal(9, 1, 100), fx_rng_normal(9, 1, 100));

    /* 3·4096 draws over seeds, streams and indices are all distinct. */
    enum { N = 4096 };
    uint64_t *u = fx_test_calloc(3 * N, sizeof(uint64_t));
    for (uint64_t i = 0; i < N; i++) {
        u[i] = fx_rng_u64(1, 1, i);
        u[N + i] = fx_rng_u64(1, 2, i);
        u[2 * N + i] = fx_rng_u64(2, 1, i);
    }
    qsort(u, 3 * N, sizeof(uint64_t), cmp_u64);
    for (size_t i = 1; i < 3 * N; i++)
        ck_assert_uint_ne(u[i], u[i - 1]);
    free(u);
}
END_TEST

START_TEST(uniforms_lie_strictly_inside_zero_one)
{
    double lo = 1.0, hi = 0.0;
    for (uint64_t i = 0; i < 100000; i++) {
        double x = fx_rng_uniform(3, 4, i);
        lo = fmin(lo, x);
        hi = fmax(hi, x);
    }
    ck_assert_double_gt(lo, 0.0);
    ck_assert_double_lt(hi, 1.0);
    ck_assert_double_lt(lo, 1e-3); /* and they do fill the interval */
    ck_assert_double_gt(hi, 1.0 - 1e-3);
}
END_TEST

/* fx_fill is deterministic per (seed, tensor, index): a shorter fill is a prefix of a
 * longer one (whatever thread drew each element), tensors and seeds differ, and the
 * values are already in the dtype. */
START_TEST(fill_is_deterministic_per_seed_tensor_and_index)
{
    fx_problem p = fx_problem_default();
    p.dtype = FX_FP16;
    p.dist = FX_DIST_OUTLIERS;
    enum { LONG = 100000, SHORT = 777 };
    float *a = fx_test_calloc(LONG, sizeof(float)), *b = fx_test_calloc(SHORT, sizeof(float));
    float *c = fx_test_calloc(SHORT, sizeof(float));
    fx_fill(&p, FX_T_K, a, LONG);
    fx_fill(&p, FX_T_K, b, SHORT);
    for (int i = 0; i < SHORT; i++)
        ck_assert_float_eq(a[i], b[i]);
    for (int i = 0; i < LONG; i++)
        ck_assert_float_eq(a[i], fx_round(FX_FP16, a[i]));

    fx_fill(&p, FX_T_V, c, SHORT);
    int same = 0;
    for (int i = 0; i < SHORT; i++)
        same += (b[i] == c[i]);
    ck_assert_int_lt(same, 10); /* independent streams: equal only by rare coincidence */

    p.seed = 2;
    fx_fill(&p, FX_T_K, c, SHORT);
    same = 0;
    for (int i = 0; i < SHORT; i++)
        same += (b[i] == c[i]);
    ck_assert_int_lt(same, 10);
    free(a);
    free(b);
    free(c);

    uint64_t s1 = fx_fresh_seed(), s2 = fx_fresh_seed();
    ck_assert_uint_ne(s1, s2);
}
END_TEST

/* A timing-only run fills the dtype bits straight (fx_fill_bits); they must be the bits of
 * the float fill, for every dtype, distribution, tensor and a qk_scale that rounds. */
START_TEST(bits_fill_equals_the_bits_of_the_float_fill)
{
    enum { N = 50000 };
    const fx_dtype dtypes[] = {FX_BF16, FX_FP16};
    const fx_dist dists[] = {FX_DIST_NORMAL, FX_DIST_OUTLIERS, FX_DIST_LARGE_LOGITS};
    float *x = fx_test_calloc(N, sizeof(float));
    uint16_t *want = fx_test_calloc(N, sizeof(uint16_t)),
             *got = fx_test_calloc(N, sizeof(uint16_t));
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++)
            for (fx_tensor_id id = FX_T_Q; id <= FX_T_DO; id++) {
                fx_problem p = fx_problem_default();
                p.dtype = dtypes[d];
                p.dist = dists[k];
                p.qk_scale = 3.1;
                p.seed = 7;
                fx_fill(&p, id, x, N);
                fx_to_bits(p.dtype, x, want, N);
                fx_fill_bits(&p, id, got, N);
                for (int i = 0; i < N; i++)
                    ck_assert_uint_eq(got[i], want[i]);
            }
    free(x);
    free(want);
    free(got);
}
END_TEST

/* ---- distributions ------------------------------------------------------------------ */

/* Sample moments over N = 2^20 elements. Standard errors: mean σ/sqrt(N); variance
 * sqrt((E x^4 - σ^4) / N); a count of probability q, sqrt(N·q·(1 - q)). Every test allows
 * 5 standard errors (a false failure about once in 1.7 million; the seeds are fixed, so in
 * practice never), while a wrong distribution (a missing factor, a wrong rate) moves the
 * moment by many more. Rounding to the dtype changes a variance by ~1e-5 relative. */
enum { N_SAMPLES = 1 << 20 };

typedef struct moments {
    double mean, var, m4;
    size_t beyond_6; /* |x| > 6: practically never N(0,1), often an outlier */
} moments;

static moments sample(fx_problem p, fx_tensor_id id)
{
    float *x = fx_test_calloc(N_SAMPLES, sizeof(float));
    fx_fill(&p, id, x, N_SAMPLES);
    moments m = {0};
    for (int i = 0; i < N_SAMPLES; i++)
        m.mean += x[i];
    m.mean /= N_SAMPLES;
    for (int i = 0; i < N_SAMPLES; i++) {
        double c = x[i] - m.mean;
        m.var += c * c;
        m.m4 += c * c * c * c;
        m.beyond_6 += fabs(x[i]) > 6.0;
    }
    m.var /= N_SAMPLES;
    m.m4 /= N_SAMPLES;
    free(x);
    return m;
}

static double five_sigma(double variance_of_one)
{
    return 5.0 * sqrt(variance_of_one / N_SAMPLES);
}

START_TEST(normal_inputs_have_mean_0_variance_1_and_kurtosis_3)
{
    fx_problem p = fx_problem_default();
    for (int id = FX_T_Q; id <= FX_T_DO; id++) {
        moments m = sample(p, (fx_tensor_id)id);
        /* N(0,1): Var x = 1, Var x² = E x^4 - 1 = 2, Var x^4 = E x^8 - 9 = 96. */
        ck_assert_double_lt(fabs(m.mean), five_sigma(1.0));
        ck_assert_double_lt(fabs(m.var - 1.0), five_sigma(2.0));
        ck_assert_double_lt(fabs(m.m4 - 3.0), five_sigma(96.0));
        ck_assert_uint_lt(m.beyond_6, 3); /* P(|x| > 6) = 2e-9 */
    }
}
END_TEST

/* x = z + b·w, z ~ N(0,1), b ~ Bernoulli(0.001), w ~ N(0,100), on every tensor:
 * E x² = 1 + 0.001·100 = 1.1; E x^4 = 3 + 6·0.1 + 0.001·3·100² = 33.6. */
START_TEST(outlier_inputs_add_std_10_on_one_in_a_thousand_elements)
{
    fx_problem p = fx_problem_default();
    p.dist = FX_DIST_OUTLIERS;
    /* P(|x| > 6) = 0.001·P(|N(0,101)| > 6) + 0.999·P(|N(0,1)| > 6). */
    double q = 0.001 * erfc(6.0 / sqrt(2.0 * 101.0)) + 0.999 * erfc(6.0 / sqrt(2.0));
    double expected = q * N_SAMPLES, count_sigma = sqrt(N_SAMPLES * q * (1 - q));
    for (int id = FX_T_Q; id <= FX_T_DO; id++) {
        moments m = sample(p, (fx_tensor_id)id);
        ck_assert_double_lt(fabs(m.mean), five_sigma(1.1));
        ck_assert_double_lt(fabs(m.var - 1.1), five_sigma(33.6 - 1.1 * 1.1));
        ck_assert_msg(fabs((double)m.beyond_6 - expected) < 5 * count_sigma,
                      "tensor %d: %zu elements beyond 6, expected %.0f ± %.0f", id, m.beyond_6,
                      expected, 5 * count_sigma);
    }
}
END_TEST

/* Q and K ~ N(0, 8²) so the logits are 64x larger; V and dO stay N(0, 1). */
START_TEST(large_logit_inputs_scale_q_and_k_by_8)
{
    fx_problem p = fx_problem_default();
    p.dist = FX_DIST_LARGE_LOGITS;
    for (int id = FX_T_Q; id <= FX_T_DO; id++) {
        moments m = sample(p, (fx_tensor_id)id);
        double var = (id == FX_T_Q || id == FX_T_K) ? 64.0 : 1.0;
        ck_assert_double_lt(fabs(m.mean), five_sigma(var));
        ck_assert_double_lt(fabs(m.var - var), five_sigma(2.0 * var * var));
    }
}
END_TEST

/* ---- problem -------------------------------------------------------------------------- */

static int validate(fx_problem *p, char *why)
{
    return fx_problem_validate(p, why, 256);
}

START_TEST(validation_names_the_bad_value)
{
    char why[256];
    fx_problem p = fx_problem_default();
    ck_assert_int_eq(validate(&p, why), 0);
    ck_assert_double_eq(p.softmax_scale, 1.0 / sqrt(128.0));

    p = fx_problem_default();
    p.heads_q = 6;
    p.heads_kv = 4;
    ck_assert_int_eq(validate(&p, why), 2);
    ck_assert_str_eq(why, "heads_q (6) is not a multiple of heads_kv (4)");

    const int bad_dims[] = {0, -8, 4, 100, 264, 512};
    for (size_t i = 0; i < sizeof bad_dims / sizeof bad_dims[0]; i++) {
        char value[16];
        snprintf(value, sizeof value, "(%d)", bad_dims[i]);
        p = fx_problem_default();
        p.head_dim = bad_dims[i];
        ck_assert_int_eq(validate(&p, why), 2);
        ck_assert_msg(strstr(why, "head_dim") && strstr(why, value), "%s", why);
    }

    p = fx_problem_default();
    p.seqlen_k = 0;
    ck_assert_int_eq(validate(&p, why), 2);
    ck_assert_str_eq(why, "seqlen_k (0) must be positive");

    p = fx_problem_default();
    p.batch = -3;
    ck_assert_int_eq(validate(&p, why), 2);
    ck_assert_msg(strstr(why, "batch (-3)"), "%s", why);

    p = fx_problem_default();
    p.dtype = (fx_dtype)7;
    ck_assert_int_eq(validate(&p, why), 2);
    ck_assert_msg(strstr(why, "dtype (7)"), "%s", why);

    /* 65536·65536·16·128 = 2^43 elements of Q: past a 32-bit index. */
    p = fx_problem_default();
    p.batch = 65536;
    p.seqlen_q = p.seqlen_k = 65536;
    ck_assert_int_eq(validate(&p, why), 2);
    ck_assert_msg(strstr(why, "8796093022208") && strstr(why, "2147483647"), "%s", why);

    /* K/V alone can overflow too (seqlen_k long, Q short). */
    p = fx_problem_default();
    p.batch = 1;
    p.seqlen_q = 1;
    p.seqlen_k = 1 << 20;
    p.heads_q = p.heads_kv = 16;
    ck_assert_int_eq(validate(&p, why), 2);
    ck_assert_msg(strstr(why, "K/V") && strstr(why, "2147483648"), "%s", why);
    p.seqlen_k = (1 << 20) - 1;
    ck_assert_int_eq(validate(&p, why), 0);

    p = fx_problem_default();
    p.softmax_scale = NAN;
    ck_assert_int_eq(validate(&p, why), 2);
    ck_assert_msg(strstr(why, "softmax_scale (nan)"), "%s", why);
    p.softmax_scale = INFINITY;
    ck_assert_int_eq(validate(&p, why), 2);
    ck_assert_msg(strstr(why, "softmax_scale (inf)"), "%s", why);
    p.softmax_scale = 0.25;
    ck_assert_int_eq(validate(&p, why), 0);
    ck_assert_double_eq(p.softmax_scale, 0.25);
    p.softmax_scale = -1.0; /* <= 0: the default */
    p.head_dim = 64;
    ck_assert_int_eq(validate(&p, why), 0);
    ck_assert_double_eq(p.softmax_scale, 0.125);
}
END_TEST

START_TEST(layouts_counts_and_names)
{
    fx_problem p = fx_problem_default();
    p.batch = 2;
    p.seqlen_q = 3;
    p.seqlen_k = 5;
    p.heads_q = 8;
    p.heads_kv = 2;
    p.head_dim = 64;
    fx_layout lq = fx_layout_q(&p), lkv = fx_layout_kv(&p);
    ck_assert_int_eq(lq.head_stride, 64);
    ck_assert_int_eq(lq.row_stride, 8 * 64);
    ck_assert_int_eq(lq.batch_stride, 3 * 8 * 64);
    ck_assert_int_eq(lkv.row_stride, 2 * 64);
    ck_assert_int_eq(lkv.batch_stride, 5 * 2 * 64);
    ck_assert_uint_eq(fx_numel_q(&p), 2 * 3 * 8 * 64);
    ck_assert_uint_eq(fx_numel_kv(&p), 2 * 5 * 2 * 64);
    ck_assert_uint_eq(fx_numel_lse(&p), 2 * 8 * 3);

    for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
        fx_dtype parsed;
        ck_assert_int_eq(fx_dtype_parse(fx_dtype_name((fx_dtype)dt), &parsed), 0);
        ck_assert_int_eq(parsed, dt);
        ck_assert_uint_eq(fx_dtype_bytes((fx_dtype)dt), dt == FX_E4M3 ? 1 : 2);
    }
    fx_dtype dt_out;
    ck_assert_int_eq(fx_dtype_parse("fp8x", &dt_out), -1);
    for (int d = 0; d < FX_DIST_COUNT; d++) {
        fx_dist parsed;
        ck_assert_int_eq(fx_dist_parse(fx_dist_name((fx_dist)d), &parsed), 0);
        ck_assert_int_eq(parsed, d);
    }
    fx_dist dist_out;
    ck_assert_int_eq(fx_dist_parse("uniform", &dist_out), -1);

    char line[160];
    p = fx_problem_default();
    p.causal = true;
    fx_problem_format(&p, line, sizeof line);
    ck_assert_str_eq(line, "b=4 sq=4096 sk=4096 hq=16 hkv=16 d=128 bf16 causal normal seed=1");
    p.causal = false;
    p.softmax_scale = 0.5;
    p.dist = FX_DIST_LARGE_LOGITS;
    fx_problem_format(&p, line, sizeof line);
    ck_assert_str_eq(
        line,
        "b=4 sq=4096 sk=4096 hq=16 hkv=16 d=128 bf16 non-causal large-logits scale=0.5 seed=1");
}
END_TEST

/* ---- FLOPs ---------------------------------------------------------------------------- */

static fx_problem flop_problem(int seqlen_q, int seqlen_k, bool causal)
{
    fx_problem p = fx_problem_default();
    p.batch = 3;
    p.heads_q = 5;
    p.heads_kv = 5;
    p.head_dim = 64;
    p.seqlen_q = seqlen_q;
    p.seqlen_k = seqlen_k;
    p.causal = causal;
    return p;
}

static double per_pair(const fx_problem *p)
{
    return 4.0 * p->batch * p->heads_q * p->head_dim;
}

START_TEST(non_causal_flops_are_4_b_h_d_sq_sk)
{
    fx_problem p = flop_problem(1000, 3000, false);
    ck_assert_double_eq(fx_flops_forward(&p), 4.0 * 3 * 5 * 64 * 1000 * 3000);
    ck_assert_double_eq(fx_flops_backward(&p), 2.5 * fx_flops_forward(&p));
    /* The FA3 paper's point: b = 2, h = 16, d = 128, sq = sk = 8192. */
    p = fx_problem_default();
    p.batch = 2;
    p.seqlen_q = p.seqlen_k = 8192;
    ck_assert_double_eq(fx_flops_forward(&p), 4.0 * 2 * 16 * 128 * 8192.0 * 8192.0);
}
END_TEST

START_TEST(causal_flops_with_sq_eq_sk_are_about_half)
{
    /* n(n + 1)/2 pairs: half of n², plus the diagonal. */
    for (int n = 1; n <= 16384; n *= 4) {
        fx_problem c = flop_problem(n, n, true), f = flop_problem(n, n, false);
        ck_assert_double_eq(fx_flops_forward(&c), per_pair(&c) * ((double)n * (n + 1) / 2));
        ck_assert_double_eq_tol(fx_flops_forward(&c) / fx_flops_forward(&f), 0.5, 0.5 / n + 1e-15);
    }
}
END_TEST

START_TEST(causal_flops_count_empty_rows_as_zero)
{
    /* sq = 10 > sk = 4: rows 0..5 see nothing, rows 6..9 see 1, 2, 3, 4 keys. */
    fx_problem p = flop_problem(10, 4, true);
    ck_assert_double_eq(fx_flops_forward(&p), per_pair(&p) * 10);
    /* sq = 4 < sk = 10: rows see 7, 8, 9, 10 keys. */
    p = flop_problem(4, 10, true);
    ck_assert_double_eq(fx_flops_forward(&p), per_pair(&p) * 34);
    /* sq = 1: decoding, the row sees every key. */
    p = flop_problem(1, 4096, true);
    ck_assert_double_eq(fx_flops_forward(&p), per_pair(&p) * 4096);
}
END_TEST

/* head_dim_v != head_dim (192 with 128): S = QKᵀ costs 2·head_dim per pair, O = PV
 * 2·head_dim_v, so 2·(head_dim + head_dim_v) per unmasked pair; 0 or head_dim_v ==
 * head_dim is the 4·head_dim of the other tests. */
START_TEST(flops_with_head_dim_v_are_2_d_plus_dv_per_pair)
{
    fx_problem p = flop_problem(1000, 3000, false);
    p.head_dim = 192;
    p.head_dim_v = 128;
    ck_assert_double_eq(fx_flops_forward(&p), 2.0 * (192 + 128) * 3 * 5 * 1000 * 3000);
    ck_assert_double_eq(fx_flops_backward(&p), 2.5 * fx_flops_forward(&p));
    /* Causal, sq = 10 > sk = 4: 10 pairs (causal_flops_count_empty_rows_as_zero). */
    p = flop_problem(10, 4, true);
    p.head_dim = 192;
    p.head_dim_v = 128;
    ck_assert_double_eq(fx_flops_forward(&p), 2.0 * (192 + 128) * 3 * 5 * 10);
    /* head_dim_v set to head_dim counts as unset. */
    fx_problem a = flop_problem(100, 200, true), b = a;
    b.head_dim_v = b.head_dim;
    ck_assert_double_eq(fx_flops_forward(&a), fx_flops_forward(&b));
    ck_assert_double_eq(fx_flops_forward(&a), per_pair(&a) * (double)(100 * 200 - 99 * 100 / 2));
}
END_TEST

/* V and O have head_dim_v columns, Q and K head_dim: their layouts and counts. */
START_TEST(v_and_o_have_head_dim_v_columns)
{
    fx_problem p = fx_problem_default();
    p.batch = 2;
    p.seqlen_q = 3;
    p.seqlen_k = 5;
    p.heads_q = 8;
    p.heads_kv = 2;
    p.head_dim = 192;
    p.head_dim_v = 128;
    char why[256];
    ck_assert_msg(fx_problem_validate(&p, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(fx_head_dim_v(&p), 128);
    const fx_layout lq = fx_layout_q(&p), lk = fx_layout_kv(&p), lo = fx_layout_o(&p),
                    lv = fx_layout_v(&p);
    ck_assert_int_eq(lq.row_stride, 8 * 192);
    ck_assert_int_eq(lk.row_stride, 2 * 192);
    ck_assert_int_eq(lo.head_stride, 128);
    ck_assert_int_eq(lo.row_stride, 8 * 128);
    ck_assert_int_eq(lo.batch_stride, 3 * 8 * 128);
    ck_assert_int_eq(lv.head_stride, 128);
    ck_assert_int_eq(lv.row_stride, 2 * 128);
    ck_assert_int_eq(lv.batch_stride, 5 * 2 * 128);
    ck_assert_uint_eq(fx_numel_q(&p), 2 * 3 * 8 * 192);
    ck_assert_uint_eq(fx_numel_kv(&p), 2 * 5 * 2 * 192);
    ck_assert_uint_eq(fx_numel_o(&p), 2 * 3 * 8 * 128);
    ck_assert_uint_eq(fx_numel_v(&p), 2 * 5 * 2 * 128);
    /* The line names head_dim_v only when it is not head_dim. */
    char line[512];
    fx_problem_format(&p, line, sizeof line);
    ck_assert_msg(strstr(line, " d=192 dv=128 ") != NULL, "%s", line);
    p.head_dim_v = 0;
    fx_problem_format(&p, line, sizeof line);
    ck_assert_msg(strstr(line, "dv=") == NULL, "%s", line);
    ck_assert_uint_eq(fx_numel_o(&p), fx_numel_q(&p));
    ck_assert_int_eq(fx_layout_v(&p).row_stride, fx_layout_kv(&p).row_stride);
}
END_TEST

/* A head_dim_v that is set must be a multiple of 8 up to 256; the message names it. */
START_TEST(a_bad_head_dim_v_is_refused_naming_the_value)
{
    const int bad[] = {100, 264, -8, 4};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        fx_problem p = fx_problem_default();
        p.head_dim = 192;
        p.head_dim_v = bad[i];
        char why[256] = "", want[64];
        ck_assert_int_eq(fx_problem_validate(&p, why, sizeof why), 2);
        snprintf(want, sizeof want, "head_dim_v (%d)", bad[i]);
        ck_assert_msg(strstr(why, want) != NULL, "'%s' does not name '%s'", why, want);
    }
}
END_TEST

START_TEST(flops_equal_the_sum_of_keys_seen_over_rows)
{
    for (int sq = 1; sq <= 40; sq++) {
        for (int sk = 1; sk <= 40; sk++) {
            for (int causal = 0; causal <= 1; causal++) {
                fx_problem p = flop_problem(sq, sk, causal);
                long long pairs = 0;
                for (int i = 0; i < sq; i++)
                    pairs += fx_keys_seen(&p, i);
                ck_assert_double_eq(fx_flops_forward(&p), per_pair(&p) * (double)pairs);
                ck_assert_double_eq(fx_flops_backward(&p), 2.5 * per_pair(&p) * (double)pairs);
            }
        }
    }
    /* keys_seen follows the bottom-right rule at the edges. */
    fx_problem p = flop_problem(10, 4, true);
    ck_assert_int_eq(fx_keys_seen(&p, 0), 0);
    ck_assert_int_eq(fx_keys_seen(&p, 5), 0);
    ck_assert_int_eq(fx_keys_seen(&p, 6), 1);
    ck_assert_int_eq(fx_keys_seen(&p, 9), 4);
    ck_assert_int_eq(fx_causal_last_key(10, 4, 0), -6);
}
END_TEST

static Suite *host_suite(void)
{
    Suite *s = suite_create("host");

    TCase *conv = tcase_create("conversions");
    tcase_set_timeout(conv, 60);
    tcase_add_test(conv, bf16_rounds_to_nearest_with_ties_to_even);
    tcase_add_test(conv, bf16_keeps_nan_and_inf_and_overflows_to_inf);
    tcase_add_test(conv, fp16_rounds_to_nearest_with_ties_to_even);
    tcase_add_test(conv, fp16_keeps_nan_and_inf_and_overflows_to_inf);
    tcase_add_test(conv, fp16_subnormals_round_to_nearest_even);
    tcase_add_test(conv, every_bf16_and_fp16_value_round_trips);
    tcase_add_test(conv, rounding_picks_the_nearest_value_of_the_dtype);
    tcase_add_test(conv, unit_roundoff_and_bulk_conversions);
    suite_add_tcase(s, conv);

    TCase *gen = tcase_create("generator");
    tcase_set_timeout(gen, 60);
    tcase_add_test(gen, the_generator_is_a_pure_function_of_seed_stream_and_index);
    tcase_add_test(gen, uniforms_lie_strictly_inside_zero_one);
    tcase_add_test(gen, fill_is_deterministic_per_seed_tensor_and_index);
    tcase_add_test(gen, bits_fill_equals_the_bits_of_the_float_fill);
    tcase_add_test(gen, normal_inputs_have_mean_0_variance_1_and_kurtosis_3);
    tcase_add_test(gen, outlier_inputs_add_std_10_on_one_in_a_thousand_elements);
    tcase_add_test(gen, large_logit_inputs_scale_q_and_k_by_8);
    suite_add_tcase(s, gen);

    TCase *prob = tcase_create("problem");
    tcase_add_test(prob, validation_names_the_bad_value);
    tcase_add_test(prob, layouts_counts_and_names);
    tcase_add_test(prob, non_causal_flops_are_4_b_h_d_sq_sk);
    tcase_add_test(prob, causal_flops_with_sq_eq_sk_are_about_half);
    tcase_add_test(prob, causal_flops_count_empty_rows_as_zero);
    tcase_add_test(prob, flops_equal_the_sum_of_keys_seen_over_rows);
    tcase_add_test(prob, flops_with_head_dim_v_are_2_d_plus_dv_per_pair);
    tcase_add_test(prob, v_and_o_have_head_dim_v_columns);
    tcase_add_test(prob, a_bad_head_dim_v_is_refused_naming_the_value);
    suite_add_tcase(s, prob);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(host_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
