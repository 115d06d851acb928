/*
 * test_running_max.c — the online softmax's running maximum kept as R = m·c rounded up
 * (stages 03-09 since 5b3870b, `row_max_scaled`) against the form it replaced, which kept m
 * and rounded m_old·c and m_new·c anew at every K/V block (docs/stage_shape.md, "The
 * residuals in SASS, and the running max kept as R").
 *
 * Per block the kernels compute, for one row, from the block's maximum b (over the row's four
 * lanes; −inf when the block shows the row no key; a NaN is dropped by fmaxf, max.f32 below):
 *   old:  m_new = max(m_old, b);  R = ru((m_new == −inf ? 0 : m_new)·c);  A = ru(m_old·c) − R
 *   new:  r = max(R_old, ru(b·c));  R = (r == −inf ? 0 : r);  A = R_old − R;  R_old = r
 * where ru is the fp32 product rounded up (__fmul_ru), R is the reference every P of the block
 * is taken against (P = 2^(S·c − R)) and α = 2^A rescales ℓ and O. The claim: for c > 0 the two
 * give the same R and A, bit for bit, at every block, and the same last R, from which the LSE
 * is made. Why: x ↦ ru(x·c) is non-decreasing for c > 0, so ru(max(m_old, b)·c) =
 * max(ru(m_old·c), ru(b·c)). The harness keeps softmax_scale in [2^-100, 2^100]
 * (fx_problem_validate), so c = softmax_scale·log2(e) is never 0 or negative.
 *
 * ru is fx_mul_round_up (common/fx_host.h), exact: a product of two floats is exact in a
 * double, and rounding it up is the nearest float moved one step up when that lies below; the
 * models of stages 03 and 10 use the same function, and mul_round_up_by_hand checks it. No fp32
 * FMA or x87 excess precision is involved: every other operation here is a max, a compare or
 * one fp32 subtraction.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "fx_host.h"

/* fmaxf as the kernels get it: PTX max.f32 (PTX ISA §9.7.3.12), which drops a NaN operand and
 * orders −0 below +0. The host's fmaxf need not order zeros, and with it the two forms below
 * would differ in the sign of a zero R; with max.f32's order they do not (x ↦ ru(x·c) is
 * non-decreasing in that order too: −tiny and −0 go to −0, +0 to +0). */
static float max_ptx(float x, float y)
{
    if (isnan(x))
        return y;
    if (isnan(y))
        return x;
    if (x == y) /* equal, or zeros of either sign: +0 wins */
        return signbit(x) ? y : x;
    return x > y ? x : y;
}

typedef struct {
    float m;
} old_state; /* the running max m, −inf before any key */
typedef struct {
    float r;
} new_state; /* R = ru(m·c), −inf before any key */

/* One block of the old form: returns R, writes A (the exponent of α). */
static float old_block(old_state *st, float b, float c, float *a)
{
    const float m_new = max_ptx(st->m, b);
    const float r = fx_mul_round_up(m_new == -INFINITY ? 0.f : m_new, c);
    *a = fx_mul_round_up(st->m, c) - r;
    st->m = m_new;
    return r;
}

static float new_block(new_state *st, float b, float c, float *a)
{
    const float r_raw = max_ptx(st->r, fx_mul_round_up(b, c));
    const float r = r_raw == -INFINITY ? 0.f : r_raw;
    *a = st->r - r;
    st->r = r_raw;
    return r;
}

/* The last R, as finalize takes it (0 for a row that saw no key). */
static float old_last(const old_state *st, float c)
{
    return fx_mul_round_up(st->m == -INFINITY ? 0.f : st->m, c);
}

static float new_last(const new_state *st)
{
    return st->r == -INFINITY ? 0.f : st->r;
}

static uint32_t bits(float x)
{
    union {
        float f;
        uint32_t u;
    } v = {x};
    return v.u;
}

/* Equal as the kernels would use them: the same bits, or both NaN (A is NaN only where both
 * forms subtract +inf from +inf, an overflowed row; its P are NaN alike). */
static int same(float x, float y)
{
    return (isnan(x) && isnan(y)) || bits(x) == bits(y);
}

/* xorshift64*: a fixed, portable sequence, so that a failure can be replayed. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* A block maximum: mostly ordinary logits, with the values the kernels meet at the edges. */
static float draw_block_max(void)
{
    const uint64_t u = next_u64();
    const uint32_t kind = (uint32_t)(u >> 59);                     /* 0..31 */
    const float unit = (float)((u >> 8) & 0xFFFFFF) / 16777216.0f; /* [0, 1) */
    switch (kind) {
    case 0: return -INFINITY; /* a fully masked block */
    case 1: return INFINITY;  /* an overflowed S */
    case 2: return NAN;       /* fmaxf drops it, as the lanes' reduction does */
    case 3: return FLT_MAX * (2 * unit - 1);
    case 4: return ldexpf(2 * unit - 1, -140); /* subnormal */
    case 5: return 0.f;
    case 6: return -0.f;
    case 7: return ldexpf(2 * unit - 1, (int)(next_u64() % 200) - 100);
    default: return 64.f * (2 * unit - 1); /* ordinary logits */
    }
}

/* c = softmax_scale·log2(e) over the whole range the harness accepts, and common values. */
static float draw_scale(void)
{
    const uint64_t u = next_u64();
    switch (u % 4) {
    case 0: return 0.125f * 1.44269504f; /* 1/sqrt(64) */
    case 1: return 0.08838835f * 1.44269504f;
    case 2: return 1.44269504f * 1000.f;
    default: return ldexpf(1.f + (float)(u >> 40) / 16777216.0f, (int)(u % 200) - 100);
    }
}

START_TEST(kept_as_r_equals_rounded_anew)
{
    int mismatches = 0, blocks = 0;
    for (int seq = 0; seq < 100000; ++seq) {
        const float c = draw_scale();
        old_state o = {-INFINITY};
        new_state n = {-INFINITY};
        const int len = 1 + (int)(next_u64() % 8);
        for (int j = 0; j < len; ++j, ++blocks) {
            const float b = draw_block_max();
            float a_old, a_new;
            const float r_old = old_block(&o, b, c, &a_old);
            const float r_new = new_block(&n, b, c, &a_new);
            if (!same(r_old, r_new) || !same(a_old, a_new)) {
                if (mismatches++ < 5)
                    fprintf(stderr, "block %d of sequence %d: b %a c %a: R %a vs %a, A %a vs %a\n",
                            j, seq, (double)b, (double)c, (double)r_old, (double)r_new,
                            (double)a_old, (double)a_new);
            }
        }
        mismatches += !same(old_last(&o, c), new_last(&n));
    }
    ck_assert_int_gt(blocks, 400000);
    ck_assert_int_eq(mismatches, 0);
}
END_TEST

/* fx_mul_round_up itself, on cases worked by hand (overflow, subnormals, signed zeros). */
START_TEST(max_ptx_by_hand)
{
    ck_assert(!signbit(max_ptx(0.f, -0.f)) && !signbit(max_ptx(-0.f, 0.f)));
    ck_assert(signbit(max_ptx(-0.f, -0.f)));
    ck_assert(max_ptx(NAN, -INFINITY) == -INFINITY && max_ptx(2.f, NAN) == 2.f);
    ck_assert(max_ptx(-1.f, -2.f) == -1.f);
}
END_TEST

START_TEST(mul_round_up_by_hand)
{
    /* 1/3 is not a float: (float)(1/3) = 0x1.555556p-2 is above it, and 3 times it is
     * 1 + 2^-25, which rounds up to the next float, 1 + 2^-23. */
    const float third = 1.f / 3.f;
    ck_assert(fx_mul_round_up(third, 3.f) == 1.f + FLT_EPSILON);
    ck_assert(fx_mul_round_up(-third, 3.f) == -1.f); /* −1 − 2^-25 rounds up to −1 */
    ck_assert(fx_mul_round_up(2.f, 3.f) == 6.f);     /* exact */
    ck_assert(fx_mul_round_up(FLT_MAX, 2.f) == INFINITY);
    ck_assert(fx_mul_round_up(-FLT_MAX, 2.f) == -FLT_MAX);
    ck_assert(fx_mul_round_up(-INFINITY, 0.5f) == -INFINITY);
    ck_assert(isnan(fx_mul_round_up(INFINITY, 0.f)));
    ck_assert(fx_mul_round_up(FLT_TRUE_MIN, 0.5f) == FLT_TRUE_MIN); /* 2^-150 rounds up */
}
END_TEST

static Suite *running_max_suite(void)
{
    Suite *s = suite_create("running_max");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, max_ptx_by_hand);
    tcase_add_test(tc, mul_round_up_by_hand);
    tcase_add_test(tc, kept_as_r_equals_rounded_anew);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(running_max_suite());
    srunner_run_all(runner, CK_NORMAL);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
