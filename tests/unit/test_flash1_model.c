/*
 * test_flash1_model.c — stage 02's CPU model (FlashAttention-1, Algorithms 1 and 4)
 * against the fp64 reference, with FlashAttention's pass rule (fx_check.h): its error
 * is at most 2× that of the dtype emulation plus one ulp (never less than FX_ACCUM_SLACK).
 * The model is fp32 throughout
 * and rounds only its outputs, so it should sit at or below the emulation's error.
 *
 * The shapes are chosen against the model's tiles (the kernels', fx_fwd_tiles_02 and
 * fx_bwd_tiles_02): lengths that are not multiples of B_r or B_c, causal with seqlen_q
 * below and above seqlen_k (rows that see no key), GQA and MQA, head_dim 64, 40 (a bucket
 * part used), 128, 192 and 256, bf16 and fp16.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_check.h"
#include "fx_host.h"
#include "fx_problem.h"
#include "fx_reference.h"
#include "02_flash1/model.h"
#include "fx_model_check.h"

/* ---- helpers (shared with the other model suites: fx_model_check.h) ---------------- */

static void check_against_reference(fx_problem p, bool backward)
{
    fx_model_check_against_reference(&fx_cpu_model_02, p, backward);
}

/* The shapes below are meant to end in partial tiles: say so, so a change of tile
 * sizes that made them whole would fail here rather than quietly test less. */
static void assert_tails(const fx_problem *p)
{
    const fx_tiles_02 fwd = fx_fwd_tiles_02(p->head_dim);
    const fx_tiles_02 bwd = fx_bwd_tiles_02(p->head_dim);
    ck_assert_int_ne(p->seqlen_q % fwd.block_m, 0);
    ck_assert_int_ne(p->seqlen_k % fwd.block_n, 0);
    ck_assert_int_ne(p->seqlen_q % bwd.block_m, 0);
    ck_assert_int_ne(p->seqlen_k % bwd.block_n, 0);
}

/* ---- tiles -------------------------------------------------------------------------- */

/* The paper's B_c = ⌈M/4d⌉, B_r = min(B_c, d) with M = 96 KiB of fp32, rounded down to
 * a multiple of 16; the backward's square tiles are the largest that fit 96 KiB. */
START_TEST(tiles_follow_the_papers_rule_for_each_head_dim_bucket)
{
    const struct {
        int head_dim, m, n, bwd_m, bwd_n, bucket;
    } table[] = {
        {8, 64, 96, 48, 48, 64},    {40, 64, 96, 48, 48, 64},   {64, 64, 96, 48, 48, 64},
        {72, 48, 48, 32, 32, 128},  {128, 48, 48, 32, 32, 128}, {136, 32, 32, 16, 16, 192},
        {192, 32, 32, 16, 16, 192}, {200, 16, 16, 16, 16, 256}, {256, 16, 16, 16, 16, 256},
    };
    for (size_t e = 0; e < sizeof table / sizeof table[0]; ++e) {
        const fx_tiles_02 f = fx_fwd_tiles_02(table[e].head_dim);
        const fx_tiles_02 b = fx_bwd_tiles_02(table[e].head_dim);
        ck_assert_int_eq(f.head_dim_max, table[e].bucket);
        ck_assert_int_eq(f.block_m, table[e].m);
        ck_assert_int_eq(f.block_n, table[e].n);
        ck_assert_int_eq(b.block_m, table[e].bwd_m);
        ck_assert_int_eq(b.block_n, table[e].bwd_n);
    }
}
END_TEST

/* ---- against the reference ---------------------------------------------------------- */

START_TEST(noncausal_with_tails_in_both_lengths_matches_the_reference)
{
    fx_problem p = fx_test_problem(2, 150, 137, 2, 2, 64, false, FX_BF16);
    assert_tails(&p);
    check_against_reference(p, true);
}
END_TEST

START_TEST(causal_with_seqlen_q_below_seqlen_k_matches_the_reference)
{
    fx_problem p = fx_test_problem(1, 70, 203, 2, 2, 64, true, FX_BF16);
    assert_tails(&p);
    check_against_reference(p, true);
}
END_TEST

START_TEST(causal_with_seqlen_q_above_seqlen_k_matches_the_reference)
{
    fx_problem p = fx_test_problem(1, 203, 70, 2, 2, 64, true, FX_FP16);
    assert_tails(&p);
    check_against_reference(p, true);
}
END_TEST

START_TEST(causal_with_equal_lengths_matches_the_reference)
{
    fx_problem p = fx_test_problem(1, 161, 161, 2, 2, 64, true, FX_BF16);
    check_against_reference(p, true);
}
END_TEST

START_TEST(gqa_three_query_heads_per_kv_head_matches_the_reference)
{
    fx_problem p = fx_test_problem(2, 100, 130, 6, 2, 64, true, FX_BF16);
    assert_tails(&p);
    check_against_reference(p, true);
}
END_TEST

START_TEST(mqa_one_kv_head_matches_the_reference)
{
    fx_problem p = fx_test_problem(1, 77, 77, 4, 1, 64, false, FX_FP16);
    assert_tails(&p);
    check_against_reference(p, true);
}
END_TEST

START_TEST(head_dim_40_uses_part_of_its_bucket_and_matches_the_reference)
{
    fx_problem p = fx_test_problem(1, 90, 131, 2, 1, 40, true, FX_FP16);
    assert_tails(&p);
    check_against_reference(p, true);
}
END_TEST

START_TEST(head_dim_128_matches_the_reference)
{
    fx_problem p = fx_test_problem(1, 100, 111, 2, 2, 128, true, FX_BF16);
    assert_tails(&p);
    check_against_reference(p, true);
}
END_TEST

START_TEST(head_dim_192_and_256_match_the_reference)
{
    check_against_reference(fx_test_problem(1, 41, 57, 2, 1, 192, false, FX_BF16), true);
    check_against_reference(fx_test_problem(1, 57, 41, 1, 1, 256, true, FX_FP16), true);
}
END_TEST

START_TEST(seqlen_one_matches_the_reference)
{
    check_against_reference(fx_test_problem(1, 1, 1, 2, 2, 64, true, FX_BF16), true);
    check_against_reference(fx_test_problem(1, 1, 100, 2, 2, 64, true, FX_BF16), true);
}
END_TEST

START_TEST(outlier_inputs_match_the_reference)
{
    fx_problem p = fx_test_problem(1, 130, 130, 2, 2, 64, false, FX_BF16);
    p.dist = FX_DIST_OUTLIERS;
    check_against_reference(p, true);
    p.dist = FX_DIST_LARGE_LOGITS;
    check_against_reference(p, true);
}
END_TEST

/* ---- rows that see no key ----------------------------------------------------------- */

/* Causal with seqlen_q = 203 > seqlen_k = 70: rows i < 133 see no key (i + 70 - 203 < 0).
 * They are O = 0, LSE = -inf, dQ = 0 exactly, and nothing anywhere is NaN. */
START_TEST(a_row_that_sees_no_key_gives_zero_o_minus_inf_lse_and_zero_dq)
{
    fx_model_check_unseen_rows(&fx_cpu_model_02);
}
END_TEST

/* Every key of a K/V block can be masked for a row while other rows of its Q block
 * see some: the block's m̃ = -inf must not poison that row's O, m, ℓ. Row 0 of a
 * causal problem with seqlen_q = seqlen_k sees key 0 only, so the second K/V block is
 * wholly masked for it, yet that block is visited for the rows below. */
START_TEST(a_wholly_masked_block_leaves_a_row_unchanged)
{
    fx_model_check_row0_sees_key0(&fx_cpu_model_02);
}
END_TEST

/* With one key, P = [1] and dS = P·(dP - D) with dP = dO·v and D = dO·O = dO·v: zero in
 * exact arithmetic, so dQ and dK must be exactly 0 (the pass rule's bound is then one
 * subnormal step). D must therefore be summed exactly as dP is, which the kernels do
 * by computing both in one pass over head_dim. */
START_TEST(a_single_key_gives_exactly_zero_dq_and_dk)
{
    fx_model_check_single_key(&fx_cpu_model_02, 40);
}
END_TEST

static Suite *flash1_model_suite(void)
{
    Suite *s = suite_create("flash1_model");

    TCase *tiles = tcase_create("tiles");
    tcase_add_test(tiles, tiles_follow_the_papers_rule_for_each_head_dim_bucket);
    suite_add_tcase(s, tiles);

    TCase *ref = tcase_create("against_reference");
    tcase_set_timeout(ref, 300);
    tcase_add_test(ref, noncausal_with_tails_in_both_lengths_matches_the_reference);
    tcase_add_test(ref, causal_with_seqlen_q_below_seqlen_k_matches_the_reference);
    tcase_add_test(ref, causal_with_seqlen_q_above_seqlen_k_matches_the_reference);
    tcase_add_test(ref, causal_with_equal_lengths_matches_the_reference);
    tcase_add_test(ref, gqa_three_query_heads_per_kv_head_matches_the_reference);
    tcase_add_test(ref, mqa_one_kv_head_matches_the_reference);
    tcase_add_test(ref, head_dim_40_uses_part_of_its_bucket_and_matches_the_reference);
    tcase_add_test(ref, head_dim_128_matches_the_reference);
    tcase_add_test(ref, head_dim_192_and_256_match_the_reference);
    tcase_add_test(ref, seqlen_one_matches_the_reference);
    tcase_add_test(ref, outlier_inputs_match_the_reference);
    suite_add_tcase(s, ref);

    TCase *masked = tcase_create("masked_rows");
    tcase_add_test(masked, a_row_that_sees_no_key_gives_zero_o_minus_inf_lse_and_zero_dq);
    tcase_add_test(masked, a_wholly_masked_block_leaves_a_row_unchanged);
    tcase_add_test(masked, a_single_key_gives_exactly_zero_dq_and_dk);
    suite_add_tcase(s, masked);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(flash1_model_suite());
    srunner_run_all(runner, CK_NORMAL);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
