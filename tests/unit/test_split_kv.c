/*
 * test_split_kv.c — stage 12's CPU model (common/fx_splitkv.h): the split ranges, the combine
 * of one row on inputs with exact answers, split-then-combine against the fp64 reference for
 * every num_splits from 1 to n_blocks + 2, rows that see no key, partials never written and
 * never read (NaN-filled), and the num_splits heuristic's cases.
 *
 * The tolerance of split-then-combine against fp64 (u = 2^-24, fp32's unit roundoff). Each
 * split runs in fp64 and rounds its outputs: O_s within u·|O_s| <= u·Vmax (O_s is a convex
 * combination of V's rows, Vmax the largest |V| of the slice) and LSE_s within u·L, with
 * L = max(1, max_s |LSE_s|). The combine in fp32: LSE_s − m rounds within u·2L; with the
 * errors of LSE_s and m (u·L each) and expf's (within 1 ulp, 2u), each w_s is within
 * (4L + 2)·u relatively; Σ w adds (S − 1)·u, w_s / Σ w twice (4L + 2)·u plus (S − 1)·u plus u;
 * the S products and sums of O another S·u and O_s's rounding u. Since the exact shares sum
 * to 1, |O − O_ref| <= (8L + 2S + 6)·u·Vmax. LSE = m + log Σ w: m within u·L, Σ w relatively
 * within (4L + S + 1)·u (the absolute error of its log), logf within 1 ulp (2u·log S, as
 * Σ w <= S), the final add u·|LSE| <= u·(L + log S): 6L + S + 1 + 3·log S <= 6L + 2S + 2
 * (3·log S <= S + 1 for every S >= 1), so |LSE − LSE_ref| <= (6L + 2S + 2)·u. The fp64
 * reference's own error (~1e-15) is far below. Worst-case sums of bounds: the errors seen are
 * 0.1 to 0.21 of them (the suite prints each case's largest); a wrong split range, a weight
 * taken from the wrong split, or a lost or doubled key is off by orders of magnitude more.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_host.h"
#include "fx_model_check.h"
#include "fx_reference.h"
#include "fx_splitkv.h"

static const double kUnit = 0x1p-24; /* fp32's unit roundoff */

/* ---- the split ranges -------------------------------------------------------------------- */

START_TEST(split_ranges_are_contiguous_and_cover_every_block_once)
{
    for (int n_block_max = 0; n_block_max <= 40; ++n_block_max)
        for (int S = 1; S <= n_block_max + 3; ++S) {
            const int per = (n_block_max + S - 1) / S;
            int next = 0;
            for (int s = 0; s < S; ++s) {
                int begin, end;
                const bool nonempty = fx_splitkv_split_range(n_block_max, S, s, &begin, &end);
                ck_assert_int_eq(nonempty, begin < end);
                if (!nonempty)
                    continue;
                ck_assert_int_eq(begin, next); /* contiguous, in split order */
                ck_assert_int_eq(begin, s * per);
                ck_assert_int_le(end - begin, per);
                next = end;
            }
            ck_assert_int_eq(next, n_block_max); /* every block, once */
        }
}
END_TEST

START_TEST(late_splits_may_be_empty_even_with_fewer_splits_than_blocks)
{
    int begin, end;
    /* 10 blocks in 6 splits: 2 per split, so splits 0..4 take them all and 5 is empty. */
    ck_assert(fx_splitkv_split_range(10, 6, 4, &begin, &end));
    ck_assert_int_eq(begin, 8);
    ck_assert_int_eq(end, 10);
    ck_assert(!fx_splitkv_split_range(10, 6, 5, &begin, &end));
    /* 10 blocks in 4: 3, 3, 3, 1. */
    ck_assert(fx_splitkv_split_range(10, 4, 3, &begin, &end));
    ck_assert_int_eq(begin, 9);
    ck_assert_int_eq(end, 10);
    /* No block at all: every split is empty. */
    ck_assert(!fx_splitkv_split_range(0, 1, 0, &begin, &end));
}
END_TEST

START_TEST(causal_trimming_follows_the_tiles_last_row)
{
    const fx_splitkv_tiles t = {.block_m = 64, .block_n = 128};
    /* Not causal: every block. */
    ck_assert_int_eq(fx_splitkv_n_block_max(1, 1000, false, t, 0), 8);
    /* Decode, causal: the one query sees every key (bottom-right aligned). */
    ck_assert_int_eq(fx_splitkv_n_block_max(1, 1000, true, t, 0), 8);
    /* seqlen 300 both: m_block 0's rows see keys < 64, m_block 2's (128..191) keys < 192. */
    ck_assert_int_eq(fx_splitkv_n_block_max(300, 300, true, t, 0), 1);
    ck_assert_int_eq(fx_splitkv_n_block_max(300, 300, true, t, 2), 2);
    ck_assert_int_eq(fx_splitkv_n_block_max(300, 300, true, t, 4), 3);
    /* seqlen_q 203 > seqlen_k 70: m_blocks 0 and 1 see nothing, 2 one block. */
    ck_assert_int_eq(fx_splitkv_n_block_max(203, 70, true, t, 0), 0);
    ck_assert_int_eq(fx_splitkv_n_block_max(203, 70, true, t, 1), 0);
    ck_assert_int_eq(fx_splitkv_n_block_max(203, 70, true, t, 2), 1);
    ck_assert_int_eq(fx_splitkv_n_block_max(5, 0, false, t, 0), 0);
}
END_TEST

/* ---- the combine of one row ----------------------------------------------------------------- */

enum { kDv = 8, kMaxS = 6 };

START_TEST(one_split_is_returned_unchanged)
{
    float lse_p[1] = {3.25f}, o_p[kDv], o[kDv], lse;
    for (int c = 0; c < kDv; ++c)
        o_p[c] = 0.1f * (float)c - 0.3f;
    fx_splitkv_combine_row(1, kDv, lse_p, 1, o_p, kDv, o, &lse);
    ck_assert(lse == 3.25f); /* m + log 1 */
    ck_assert(memcmp(o, o_p, sizeof o) == 0);
}
END_TEST

START_TEST(equal_lse_averages_and_adds_log_of_the_count)
{
    /* Two splits with LSE 1: shares 1/2 each, LSE = 1 + log 2. */
    float lse_p[2] = {1.0f, 1.0f}, o_p[2 * kDv], o[kDv], lse;
    for (int c = 0; c < kDv; ++c) {
        o_p[c] = (float)c;
        o_p[kDv + c] = 3.0f;
    }
    fx_splitkv_combine_row(2, kDv, lse_p, 1, o_p, kDv, o, &lse);
    ck_assert_float_eq(lse, 1.0f + logf(2.0f));
    for (int c = 0; c < kDv; ++c)
        ck_assert_float_eq(o[c], 0.5f * (float)c + 1.5f);
}
END_TEST

START_TEST(empty_splits_are_never_read_and_change_nothing)
{
    /* Splits 1, 3 and 5 empty (LSE −inf) with NaN partials; the others finite. The result must
     * be bit-equal to the combine of splits 0, 2, 4 alone: w = 0 adds exactly 0 to Σ w. */
    float lse_p[kMaxS] = {0.5f, -INFINITY, 2.0f, -INFINITY, -1.0f, -INFINITY};
    float o_p[kMaxS * kDv], o[kDv], lse;
    float lse_3[3] = {0.5f, 2.0f, -1.0f}, o_3[3 * kDv], o3[kDv], lse3;
    for (int s = 0; s < kMaxS; ++s)
        for (int c = 0; c < kDv; ++c)
            o_p[s * kDv + c] = lse_p[s] == -INFINITY ? NAN : (float)(s + 1) * 0.25f + (float)c;
    for (int s = 0; s < 3; ++s)
        memcpy(o_3 + s * kDv, o_p + 2 * s * kDv, kDv * sizeof(float));
    fx_splitkv_combine_row(kMaxS, kDv, lse_p, 1, o_p, kDv, o, &lse);
    fx_splitkv_combine_row(3, kDv, lse_3, 1, o_3, kDv, o3, &lse3);
    ck_assert(lse == lse3);
    ck_assert(memcmp(o, o3, sizeof o) == 0);
    for (int c = 0; c < kDv; ++c)
        ck_assert(isfinite(o[c]));
}
END_TEST

START_TEST(a_row_whose_splits_are_all_empty_gets_zero_and_minus_inf)
{
    float lse_p[kMaxS], o_p[kMaxS * kDv], o[kDv], lse = 0.0f;
    for (int s = 0; s < kMaxS; ++s)
        lse_p[s] = -INFINITY;
    for (int e = 0; e < kMaxS * kDv; ++e)
        o_p[e] = NAN;
    for (int c = 0; c < kDv; ++c)
        o[c] = NAN;
    fx_splitkv_combine_row(kMaxS, kDv, lse_p, 1, o_p, kDv, o, &lse);
    ck_assert(lse == -INFINITY);
    for (int c = 0; c < kDv; ++c)
        ck_assert(o[c] == 0.0f && !signbit(o[c]));
}
END_TEST

START_TEST(a_share_below_fp32s_range_is_not_read)
{
    /* LSE 0 against −200: w = e^-200 underflows to 0 in fp32; that split's O_s (NaN here) is
     * skipped and the result is the dominant split exactly. */
    float lse_p[2] = {0.0f, -200.0f}, o_p[2 * kDv], o[kDv], lse;
    for (int c = 0; c < kDv; ++c) {
        o_p[c] = 1.0f + (float)c;
        o_p[kDv + c] = NAN;
    }
    fx_splitkv_combine_row(2, kDv, lse_p, 1, o_p, kDv, o, &lse);
    ck_assert(lse == 0.0f);
    ck_assert(memcmp(o, o_p, sizeof o) == 0);
}
END_TEST

START_TEST(large_lse_do_not_overflow)
{
    /* LSE near fp32's top (large logits): only differences are exponentiated. */
    float lse_p[3] = {1.0e30f, 1.0e30f, -INFINITY}, o_p[3 * kDv], o[kDv], lse;
    for (int c = 0; c < kDv; ++c) {
        o_p[c] = 2.0f;
        o_p[kDv + c] = 4.0f;
        o_p[2 * kDv + c] = NAN;
    }
    fx_splitkv_combine_row(3, kDv, lse_p, 1, o_p, kDv, o, &lse);
    ck_assert(lse == 1.0e30f); /* + log 2 is below half an ulp of 1e30 */
    for (int c = 0; c < kDv; ++c)
        ck_assert_float_eq(o[c], 3.0f);
}
END_TEST

/* ---- split-then-combine against fp64 ---------------------------------------------------- */

typedef struct split_case {
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, head_dim_v;
    bool causal;
    fx_splitkv_tiles tiles;
    fx_dist dist;
} split_case;

/* Largest |V| over (b, kv head hk)'s keys: the bound of every |O_s| of its query heads. */
static double v_max(const fx_problem *p, const float *v, int b, int hk)
{
    const fx_layout lv = fx_layout_v(p);
    double m = 0;
    for (int j = 0; j < p->seqlen_k; ++j)
        for (int c = 0; c < fx_head_dim_v(p); ++c)
            m = fmax(m, fabs(v[fx_offset(lv, b, j, hk, c)]));
    return m;
}

static fx_problem case_problem(const split_case *c)
{
    fx_problem p = fx_problem_default();
    p.batch = c->batch;
    p.seqlen_q = c->seqlen_q;
    p.seqlen_k = c->seqlen_k;
    p.heads_q = c->heads_q;
    p.heads_kv = c->heads_kv;
    p.head_dim = c->head_dim;
    p.head_dim_v = c->head_dim_v;
    p.causal = c->causal;
    p.dtype = FX_BF16;
    p.dist = c->dist;
    p.seed = 20230913; /* fixed per suite: a failure is reproducible */
    p.softmax_scale = 1.0 / sqrt((double)c->head_dim);
    if (c->seqlen_k > 0) { /* fx_problem_validate refuses seqlen_k 0; the model does not */
        char why[256];
        ck_assert_msg(fx_problem_validate(&p, why, sizeof why) == 0, "%s", why);
    }
    return p;
}

/* Splits the case in every count 1 .. n_blocks + 2 and checks, per count: the partials of
 * empty tiles are still NaN (never written) with LSE −inf; the combine has no NaN and is
 * within the bounds above of the fp64 reference; a row that sees no key has O = 0 and
 * LSE = −inf exactly. Returns the largest error seen, in units of the bound. */
static double check_split_case(const split_case *c)
{
    fx_problem p = case_problem(c);
    const int dv = fx_head_dim_v(&p), G = p.heads_q / p.heads_kv;
    const size_t nq = fx_numel_q(&p), nk = fx_numel_kv(&p), nv = fx_numel_v(&p);
    const size_t no = fx_numel_o(&p), nl = fx_numel_lse(&p);
    float *q = fx_test_calloc(nq, sizeof(float)), *k = fx_test_calloc(nk, sizeof(float)),
          *v = fx_test_calloc(nv, sizeof(float)), *o = fx_test_calloc(no, sizeof(float)),
          *lse = fx_test_calloc(nl, sizeof(float));
    fx_fill(&p, FX_T_Q, q, nq);
    fx_fill(&p, FX_T_K, k, nk);
    fx_fill(&p, FX_T_V, v, nv);
    double *o_ref = fx_test_calloc((size_t)p.seqlen_q * dv, sizeof(double));
    double *lse_ref = fx_test_calloc(p.seqlen_q, sizeof(double));
    const fx_layout lo = fx_layout_o(&p);
    const int n_blocks = (p.seqlen_k + c->tiles.block_n - 1) / c->tiles.block_n;
    const int m_blocks = (p.seqlen_q + c->tiles.block_m - 1) / c->tiles.block_m;
    char shape[256];
    fx_problem_format(&p, shape, sizeof shape);
    double worst = 0;

    for (int S = 1; S <= n_blocks + 2 && S <= FX_SPLITKV_MAX_SPLITS; ++S) {
        fx_splitkv_partials part = fx_splitkv_partials_alloc(&p, S, NAN);
        fx_splitkv_forward(&p, q, k, v, c->tiles, &part);
        for (size_t e = 0; e < nl; ++e) /* poisoned: an unwritten element must show */
            lse[e] = NAN;
        for (size_t e = 0; e < no; ++e)
            o[e] = NAN;
        fx_splitkv_combine(&p, &part, o, lse);

        for (int b = 0; b < p.batch; ++b)
            for (int h = 0; h < p.heads_q; ++h) {
                /* Empty tiles: LSE −inf, O_partial untouched. */
                for (int mb = 0; mb < m_blocks; ++mb) {
                    const int n_max =
                        fx_splitkv_n_block_max(p.seqlen_q, p.seqlen_k, p.causal, c->tiles, mb);
                    for (int s = 0; s < S; ++s) {
                        int n0, n1;
                        if (fx_splitkv_split_range(n_max, S, s, &n0, &n1))
                            continue;
                        for (int i = mb * c->tiles.block_m;
                             i < (mb + 1) * c->tiles.block_m && i < p.seqlen_q; ++i) {
                            ck_assert(part.lse[fx_splitkv_lse_at(&part, s, b, h, i)] == -INFINITY);
                            for (int d = 0; d < dv; ++d)
                                ck_assert_msg(isnan(part.o[fx_splitkv_o_at(&part, s, b, h, i) + d]),
                                              "%s: S=%d split %d row %d: empty split wrote O",
                                              shape, S, s, i);
                        }
                    }
                }
                fx_ref_forward_rows(&p, q, k, v, b, h, 0, p.seqlen_q, o_ref, lse_ref);
                const double vmax = v_max(&p, v, b, h / G);
                for (int i = 0; i < p.seqlen_q; ++i) {
                    const float got_lse = lse[fx_lse_index(&p, b, h, i)];
                    const float *got_o = o + fx_offset(lo, b, i, h, 0);
                    if (fx_keys_seen(&p, i) == 0) {
                        ck_assert_msg(got_lse == -INFINITY, "%s: S=%d row %d sees no key", shape, S,
                                      i);
                        for (int d = 0; d < dv; ++d)
                            ck_assert_msg(got_o[d] == 0.0f, "%s: S=%d row %d O != 0", shape, S, i);
                        continue;
                    }
                    double L = 1;
                    for (int s = 0; s < S; ++s) {
                        const float ls = part.lse[fx_splitkv_lse_at(&part, s, b, h, i)];
                        if (ls != -INFINITY)
                            L = fmax(L, fabs(ls));
                    }
                    const double tol_lse = (6 * L + 2 * S + 2) * kUnit;
                    const double tol_o = (8 * L + 2 * S + 6) * kUnit * vmax;
                    const double err_lse = fabs(got_lse - lse_ref[i]);
                    ck_assert_msg(err_lse <= tol_lse, "%s: S=%d row %d: LSE %.9g vs %.17g (tol %g)",
                                  shape, S, i, got_lse, lse_ref[i], tol_lse);
                    worst = fmax(worst, err_lse / tol_lse);
                    for (int d = 0; d < dv; ++d) {
                        const double err = fabs(got_o[d] - o_ref[(size_t)i * dv + d]);
                        ck_assert_msg(err <= tol_o,
                                      "%s: S=%d row %d col %d: O %.9g vs %.17g (tol %g)", shape, S,
                                      i, d, got_o[d], o_ref[(size_t)i * dv + d], tol_o);
                        worst = fmax(worst, err / tol_o);
                    }
                }
            }
        fx_splitkv_partials_free(&part);
    }
    free(q), free(k), free(v), free(o), free(lse), free(o_ref), free(lse_ref);
    return worst;
}

static const fx_splitkv_tiles kDecodeTiles = {.block_m = 64, .block_n = 128};
static const fx_splitkv_tiles kSmallTiles = {.block_m = 64, .block_n = 32};

/* Decode: seqlen_q 1..8 queries over a long cache, seqlen_k not a multiple of kBlockN, GQA
 * 4 and MQA, causal and not. */
static const split_case kDecodeCases[] = {
    {2, 1, 1000, 4, 1, 64, 0, false, kDecodeTiles, FX_DIST_NORMAL},
    {2, 1, 1000, 4, 1, 64, 0, true, kDecodeTiles, FX_DIST_NORMAL},
    {1, 4, 515, 8, 2, 64, 0, true, kSmallTiles, FX_DIST_NORMAL},
    {1, 8, 300, 8, 2, 32, 0, false, kSmallTiles, FX_DIST_NORMAL},
    {1, 8, 300, 8, 2, 32, 0, true, kSmallTiles, FX_DIST_NORMAL},
    {1, 3, 129, 2, 2, 64, 0, true, {.block_m = 64, .block_n = 16}, FX_DIST_NORMAL},
};

/* Longer queries (several m_blocks, each trimmed on its own), head_dim_v != head_dim, large
 * logits (LSE in the hundreds, shares below fp32's range). */
static const split_case kPrefillCases[] = {
    {1, 200, 333, 4, 2, 32, 0, true, kSmallTiles, FX_DIST_NORMAL},
    {1, 200, 333, 4, 2, 32, 0, false, kSmallTiles, FX_DIST_NORMAL},
    {2, 77, 77, 2, 1, 64, 32, true, kSmallTiles, FX_DIST_NORMAL},
    {1, 40, 250, 2, 1, 32, 0, true, {.block_m = 16, .block_n = 32}, FX_DIST_LARGE_LOGITS},
};

START_TEST(decode_split_then_combine_matches_fp64)
{
    const double worst = check_split_case(&kDecodeCases[_i]);
    fprintf(stderr, "decode case %d: largest error %.3f of the bound\n", _i, worst);
}
END_TEST

START_TEST(prefill_split_then_combine_matches_fp64)
{
    const double worst = check_split_case(&kPrefillCases[_i]);
    fprintf(stderr, "prefill case %d: largest error %.3f of the bound\n", _i, worst);
}
END_TEST

START_TEST(rows_that_see_no_key_give_zero_and_minus_inf_for_every_split_count)
{
    /* Causal, seqlen_q 203 > seqlen_k 70: rows < 133 see no key; m_blocks 0 and 1 are empty
     * in every split, m_block 2 holds rows of both kinds. */
    const split_case c = {1, 203, 70, 2, 1, 64, 0, true, kSmallTiles, FX_DIST_NORMAL};
    check_split_case(&c);
}
END_TEST

START_TEST(an_empty_cache_gives_zero_and_minus_inf)
{
    /* seqlen_k 0 (a problem built by hand; a varlen sequence may have no key): no block, so
     * every split is empty, every partial stays NaN, and every row is O = 0, LSE = −inf. */
    const split_case c = {2, 3, 0, 4, 2, 32, 0, false, kDecodeTiles, FX_DIST_NORMAL};
    check_split_case(&c);
}
END_TEST

START_TEST(one_split_equals_the_unsplit_forward_rounded_to_fp32)
{
    /* num_splits 1 is the unsplit forward: every row's O and LSE are the fp64 reference's
     * rounded to fp32, within the two roundings of O_s and of the combine's unit share. */
    const split_case c = {1, 5, 700, 4, 1, 64, 0, true, kDecodeTiles, FX_DIST_NORMAL};
    fx_problem p = case_problem(&c);
    const size_t nq = fx_numel_q(&p), nk = fx_numel_kv(&p);
    float *q = fx_test_calloc(nq, sizeof(float)), *k = fx_test_calloc(nk, sizeof(float)),
          *v = fx_test_calloc(nk, sizeof(float)), *o = fx_test_calloc(nq, sizeof(float)),
          *lse = fx_test_calloc(fx_numel_lse(&p), sizeof(float));
    fx_fill(&p, FX_T_Q, q, nq);
    fx_fill(&p, FX_T_K, k, nk);
    fx_fill(&p, FX_T_V, v, nk);
    fx_splitkv_partials part = fx_splitkv_partials_alloc(&p, 1, NAN);
    fx_splitkv_forward(&p, q, k, v, c.tiles, &part);
    fx_splitkv_combine(&p, &part, o, lse);
    double o_ref[64], lse_ref[1];
    for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.seqlen_q; ++i) {
            fx_ref_forward_rows(&p, q, k, v, 0, h, i, i + 1, o_ref, lse_ref);
            /* The split's fp64 sums differ from the reference's in their order alone (~1e-16
             * relatively, or of V's size where O cancels): after rounding to fp32, within
             * u·|x| of it, and a hair more. */
            const double vmax = v_max(&p, v, 0, 0), hair = 1e-12;
            /* LSE: the combine adds log 1 = 0 to the stored fp32 value. */
            const float got_lse = lse[fx_lse_index(&p, 0, h, i)];
            ck_assert(got_lse == part.lse[fx_splitkv_lse_at(&part, 0, 0, h, i)]);
            ck_assert(fabs(got_lse - lse_ref[0]) <= (kUnit + hair) * fabs(lse_ref[0]));
            for (int d = 0; d < p.head_dim; ++d) {
                const float got = o[fx_offset(fx_layout_o(&p), 0, i, h, d)];
                /* O: share 1/1 = 1 exactly, 0 + 1·O_s exact: O_s itself. */
                ck_assert(got == part.o[fx_splitkv_o_at(&part, 0, 0, h, i) + d]);
                ck_assert(fabs(got - o_ref[d]) <= kUnit * fabs(o_ref[d]) + hair * vmax);
            }
        }
    fx_splitkv_partials_free(&part);
    free(q), free(k), free(v), free(o), free(lse);
}
END_TEST

/* ---- the heuristic ------------------------------------------------------------------------ */

/* H100 SXM: 132 SMs. A decode step: batch 1, 8 KV heads, PackGQA 32/8 → 1 m_block per KV head,
 * head_dim 128, bf16, 64k keys in blocks of 128 (512 blocks). */
static fx_splitkv_heuristic_in decode_in(void)
{
    fx_splitkv_heuristic_in in = {.num_sms = 132,
                                  .total_m_blocks = 8,
                                  .num_m_blocks = 1,
                                  .num_n_blocks = 512,
                                  .kv_head_bytes = (int64_t)65536 * 256 * 2,
                                  .causal = false,
                                  .max_splits = FX_SPLITKV_MAX_SPLITS};
    return in;
}

START_TEST(heuristic_fills_the_sms_with_the_fewest_splits_within_85_percent)
{
    fx_splitkv_heuristic_in in = decode_in();
    /* 8·S/132 >= 0.85 (the best is 1.0, at S = 33): S = 15 gives 120/132 = 0.909, S = 14
     * gives 112/132 = 0.848. */
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 15);
    in.causal = true; /* causal changes nothing below 0.8·SMs */
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 15);
    /* FA3's own example: 48 tiles on 108 SMs: 2 splits (0.89), not 3 (0.67). */
    in.num_sms = 108;
    in.total_m_blocks = 48;
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 2);
}
END_TEST

START_TEST(heuristic_does_not_split_a_gpu_already_filled)
{
    fx_splitkv_heuristic_in in = decode_in();
    /* 0.8·132 = 105.6: 106 tiles are enough, 105 are not. */
    in.total_m_blocks = 106;
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 1);
    in.total_m_blocks = 105;
    ck_assert_int_gt(fx_num_splits_heuristic(&in), 1);
}
END_TEST

START_TEST(heuristic_splits_a_filled_gpu_only_for_kv_heads_past_the_l2)
{
    fx_splitkv_heuristic_in in = decode_in();
    in.total_m_blocks = 4096;
    in.num_m_blocks = 2 * in.num_sms; /* the queries pass over the K/V twice */
    in.num_n_blocks = 4096;
    in.kv_head_bytes = (int64_t)FX_SPLITKV_L2_BYTES; /* at the L2's size: no split */
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 1);
    in.kv_head_bytes = (int64_t)FX_SPLITKV_L2_BYTES + 1; /* just past: 2 */
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 2);
    in.kv_head_bytes = (int64_t)5 * FX_SPLITKV_L2_BYTES; /* ceil(5.0) */
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 5);
    in.kv_head_bytes = (int64_t)1000 * FX_SPLITKV_L2_BYTES; /* capped at 128 */
    ck_assert_int_eq(fx_num_splits_heuristic(&in), FX_SPLITKV_MAX_SPLITS);
    in.kv_head_bytes = (int64_t)5 * FX_SPLITKV_L2_BYTES;
    in.causal = true; /* not when causal */
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 1);
    in.causal = false;
    in.num_m_blocks = 2 * in.num_sms - 1; /* not when the K/V is read once or less */
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 1);
}
END_TEST

START_TEST(heuristic_never_splits_four_blocks_or_fewer)
{
    fx_splitkv_heuristic_in in = decode_in();
    for (int n = 0; n <= 4; ++n) {
        in.num_n_blocks = n;
        ck_assert_int_eq(fx_num_splits_heuristic(&in), 1);
    }
    /* 5 blocks, one tile: S/132 grows with S, so the best is S = 5 and 0.85·5 = 4.25 → 5:
     * capped by the blocks. */
    in.num_n_blocks = 5;
    in.total_m_blocks = 1;
    ck_assert_int_eq(fx_num_splits_heuristic(&in), 5);
}
END_TEST

START_TEST(heuristic_stays_within_one_and_its_caps)
{
    /* Every combination of a grid of inputs: 1 <= S <= min(128, max(n_blocks, 1), SMs). */
    const int sms[] = {1, 8, 78, 108, 132, 144, 264};
    const int tiles[] = {1, 2, 3, 7, 8, 48, 100, 131, 1000};
    const int blocks[] = {0, 1, 4, 5, 6, 17, 127, 128, 129, 512, 100000};
    for (size_t a = 0; a < sizeof sms / sizeof *sms; ++a)
        for (size_t t = 0; t < sizeof tiles / sizeof *tiles; ++t)
            for (size_t n = 0; n < sizeof blocks / sizeof *blocks; ++n) {
                fx_splitkv_heuristic_in in = decode_in();
                in.num_sms = sms[a];
                in.total_m_blocks = in.num_m_blocks = tiles[t];
                in.num_n_blocks = blocks[n];
                const int S = fx_num_splits_heuristic(&in);
                ck_assert_int_ge(S, 1);
                ck_assert_int_le(S, FX_SPLITKV_MAX_SPLITS);
                ck_assert_int_le(S, blocks[n] > 1 ? blocks[n] : 1);
                ck_assert_int_le(S, sms[a]);
            }
}
END_TEST

START_TEST(heuristic_inputs_follow_flash_api)
{
    /* batch 1, seqlen_q 1, 32 query heads over 8 KV heads, 64k keys, head_dim 128, bf16;
     * kBlockM 64, kBlockN 128. */
    fx_problem p = fx_test_problem(1, 1, 65536, 32, 8, 128, false, FX_BF16);
    const fx_splitkv_tiles t = {.block_m = 64, .block_n = 128};
    fx_splitkv_heuristic_in packed = fx_splitkv_heuristic_inputs(&p, t, 132, true);
    ck_assert_int_eq(packed.num_m_blocks, 1);   /* ceil(1·4 / 64) */
    ck_assert_int_eq(packed.total_m_blocks, 8); /* batch·heads_kv */
    ck_assert_int_eq(packed.num_n_blocks, 512); /* 65536 / 128 */
    ck_assert(packed.kv_head_bytes == (int64_t)65536 * 256 * 2);
    ck_assert_int_eq(packed.max_splits, FX_SPLITKV_MAX_SPLITS);
    ck_assert_int_eq(fx_num_splits_heuristic(&packed), 15);
    fx_splitkv_heuristic_in unpacked = fx_splitkv_heuristic_inputs(&p, t, 132, false);
    ck_assert_int_eq(unpacked.total_m_blocks, 32); /* batch·heads_q */
    /* 32·S/132 >= 0.85 (best 1.0 at S = 33): S = 4 gives 128/132 = 0.97. */
    ck_assert_int_eq(fx_num_splits_heuristic(&unpacked), 4);
}
END_TEST

START_TEST(heuristic_reproduces_fa3s_split_counts_measured_on_an_h200)
{
    /* shared/anchors/FA3_PAPER.md, "decode (seqlen_q = 1, 32 query heads, 8 KV heads,
     * head_dim 128, bf16)", its "FA3 splits" column, on an H200 (132 SMs), PackGQA on (FA3
     * forces it with splits). kBlockN 128 assumed: with 64 blocks or more the counts do not
     * depend on it. */
    const struct {
        int batch, seqlen_k, splits;
    } measured[] = {{1, 8192, 15}, {1, 65536, 15}, {8, 8192, 2}, {32, 4096, 1}, {64, 16384, 1}};
    const fx_splitkv_tiles t = {.block_m = 64, .block_n = 128};
    for (size_t r = 0; r < sizeof measured / sizeof *measured; ++r) {
        fx_problem p =
            fx_test_problem(measured[r].batch, 1, measured[r].seqlen_k, 32, 8, 128, false, FX_BF16);
        fx_splitkv_heuristic_in in = fx_splitkv_heuristic_inputs(&p, t, 132, true);
        ck_assert_int_eq(fx_num_splits_heuristic(&in), measured[r].splits);
    }
}
END_TEST

START_TEST(a_forced_count_must_be_between_one_and_the_cap)
{
    char why[128] = "";
    ck_assert_int_eq(fx_splitkv_check_num_splits(1, why, sizeof why), 0);
    ck_assert_int_eq(fx_splitkv_check_num_splits(FX_SPLITKV_MAX_SPLITS, why, sizeof why), 0);
    ck_assert_int_eq(fx_splitkv_check_num_splits(0, why, sizeof why), 2);
    ck_assert_str_eq(why, "num_splits (0) is outside [1, 128]");
    ck_assert_int_eq(fx_splitkv_check_num_splits(-3, why, sizeof why), 2);
    ck_assert_ptr_nonnull(strstr(why, "(-3)"));
    ck_assert_int_eq(fx_splitkv_check_num_splits(FX_SPLITKV_MAX_SPLITS + 1, why, sizeof why), 2);
    ck_assert_ptr_nonnull(strstr(why, "(129)"));
}
END_TEST

static Suite *split_kv_suite(void)
{
    Suite *s = suite_create("split_kv");
    TCase *ranges = tcase_create("ranges");
    tcase_add_test(ranges, split_ranges_are_contiguous_and_cover_every_block_once);
    tcase_add_test(ranges, late_splits_may_be_empty_even_with_fewer_splits_than_blocks);
    tcase_add_test(ranges, causal_trimming_follows_the_tiles_last_row);
    suite_add_tcase(s, ranges);

    TCase *combine = tcase_create("combine");
    tcase_add_test(combine, one_split_is_returned_unchanged);
    tcase_add_test(combine, equal_lse_averages_and_adds_log_of_the_count);
    tcase_add_test(combine, empty_splits_are_never_read_and_change_nothing);
    tcase_add_test(combine, a_row_whose_splits_are_all_empty_gets_zero_and_minus_inf);
    tcase_add_test(combine, a_share_below_fp32s_range_is_not_read);
    tcase_add_test(combine, large_lse_do_not_overflow);
    suite_add_tcase(s, combine);

    TCase *model = tcase_create("model");
    tcase_set_timeout(model, 300);
    tcase_add_loop_test(model, decode_split_then_combine_matches_fp64, 0,
                        (int)(sizeof kDecodeCases / sizeof *kDecodeCases));
    tcase_add_loop_test(model, prefill_split_then_combine_matches_fp64, 0,
                        (int)(sizeof kPrefillCases / sizeof *kPrefillCases));
    tcase_add_test(model, rows_that_see_no_key_give_zero_and_minus_inf_for_every_split_count);
    tcase_add_test(model, an_empty_cache_gives_zero_and_minus_inf);
    tcase_add_test(model, one_split_equals_the_unsplit_forward_rounded_to_fp32);
    suite_add_tcase(s, model);

    TCase *heuristic = tcase_create("heuristic");
    tcase_add_test(heuristic, heuristic_fills_the_sms_with_the_fewest_splits_within_85_percent);
    tcase_add_test(heuristic, heuristic_does_not_split_a_gpu_already_filled);
    tcase_add_test(heuristic, heuristic_splits_a_filled_gpu_only_for_kv_heads_past_the_l2);
    tcase_add_test(heuristic, heuristic_never_splits_four_blocks_or_fewer);
    tcase_add_test(heuristic, heuristic_stays_within_one_and_its_caps);
    tcase_add_test(heuristic, heuristic_inputs_follow_flash_api);
    tcase_add_test(heuristic, heuristic_reproduces_fa3s_split_counts_measured_on_an_h200);
    tcase_add_test(heuristic, a_forced_count_must_be_between_one_and_the_cap);
    suite_add_tcase(s, heuristic);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(split_kv_suite());
    srunner_run_all(runner, CK_NORMAL);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
