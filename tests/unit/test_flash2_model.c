/*
 * test_flash2_model.c — stage 03's CPU model (FlashAttention-2, Algorithms 1 and 2)
 * against the fp64 reference, with FlashAttention's pass rule (fx_check.h): its error is at
 * most 2× that of the dtype emulation plus one ulp (never less than FX_ACCUM_SLACK). The
 * model rounds P to the dtype before
 * P·V (forward) and P and dS before the backward GEMMs, as the kernels do.
 *
 * The shapes are chosen against the kernels' tiles (fx_fwd_tiles_03, fx_bwd_tiles_03):
 * lengths that are not multiples of kBlockM or kBlockN in either pass, causal with
 * seqlen_q below and above seqlen_k (rows that see no key), GQA and MQA (dK, dV summed
 * over a group's query heads), head_dim 64, 96, 128 and 256, bf16 and fp16.
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
#include "03_flash2/model.h"
#include "fx_model_check.h"

/* ---- helpers (shared with the other model suites: fx_model_check.h) ---------------- */

static void check_against_reference(fx_problem p, bool backward)
{
    fx_model_check_against_reference(&fx_cpu_model_03, p, backward);
}

/* The shapes below are meant to end in partial tiles: say so, so a change of tile
 * sizes that made them whole would fail here rather than quietly test less. */
static void assert_tails(const fx_problem *p)
{
    const fx_tiles_03 fwd = fx_fwd_tiles_03(p->head_dim);
    const fx_tiles_03 bwd = fx_bwd_tiles_03(p->head_dim);
    ck_assert_int_ne(p->seqlen_q % fwd.block_m, 0);
    ck_assert_int_ne(p->seqlen_k % fwd.block_n, 0);
    ck_assert_int_ne(p->seqlen_q % bwd.block_m, 0);
    ck_assert_int_ne(p->seqlen_k % bwd.block_n, 0);
}

/* ---- tiles -------------------------------------------------------------------------- */

/* The kernels' tiles (fwd.cu, bwd.cu): the forward's kBlockM × kBlockN and the backward's:
 * FA2's own at head_dim 64 and 128 (128 × 128, 64 × 128), 64 × 64 at 96 and 32 × 64 at
 * 256, where dK + dV take most registers (bwd.cu says why). */
START_TEST(tiles_are_the_kernels_tiles_for_each_head_dim)
{
    const struct {
        int head_dim, m, n, bwd_m, bwd_n;
    } table[] = {
        {64, 128, 64, 128, 128},
        {96, 128, 64, 64, 64},
        {128, 128, 32, 64, 128},
        {256, 128, 64, 32, 64},
    };
    for (size_t e = 0; e < sizeof table / sizeof table[0]; ++e) {
        const fx_tiles_03 f = fx_fwd_tiles_03(table[e].head_dim);
        const fx_tiles_03 b = fx_bwd_tiles_03(table[e].head_dim);
        ck_assert_int_eq(f.block_m, table[e].m);
        ck_assert_int_eq(f.block_n, table[e].n);
        ck_assert_int_eq(b.block_m, table[e].bwd_m);
        ck_assert_int_eq(b.block_n, table[e].bwd_n);
    }
    const fx_tiles_03 none = fx_bwd_tiles_03(40);
    ck_assert_int_eq(none.block_m, 0);
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

START_TEST(head_dim_128_matches_the_reference)
{
    fx_problem p = fx_test_problem(1, 100, 131, 2, 1, 128, true, FX_BF16);
    assert_tails(&p);
    check_against_reference(p, true);
    check_against_reference(fx_test_problem(1, 150, 90, 2, 2, 128, false, FX_FP16), true);
}
END_TEST

START_TEST(head_dim_96_and_256_match_the_reference)
{
    check_against_reference(fx_test_problem(1, 90, 141, 2, 1, 96, true, FX_FP16), true);
    check_against_reference(fx_test_problem(1, 57, 41, 1, 1, 256, true, FX_BF16), true);
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
 * They are O = 0, LSE = -inf, dQ = 0 exactly, and nothing anywhere is NaN: their LSE_log2
 * is 0 in the backward, and only the explicit mask keeps P = 2^(S·scale_log2) out. */
START_TEST(a_row_that_sees_no_key_gives_zero_o_minus_inf_lse_and_zero_dq)
{
    fx_model_check_unseen_rows(&fx_cpu_model_03);
}
END_TEST

/* Row 0 of a causal problem with seqlen_q = seqlen_k sees key 0 only; the forward visits
 * the K/V blocks from the last, so for row 0 every block but the first is wholly masked and
 * comes before it: m stays -inf through them, and nothing may be NaN when key 0 arrives. */
START_TEST(wholly_masked_blocks_before_the_first_visible_key_leave_a_row_exact)
{
    fx_model_check_row0_sees_key0(&fx_cpu_model_03);
}
END_TEST

/* With one key, P = [1] and dS = P·(dP - D) with dP = dO·v and D = dO·O = dO·v: zero in
 * exact arithmetic, and in the model too, which sums D and dP in the same order. */
START_TEST(a_single_key_gives_exactly_zero_dq_and_dk)
{
    fx_model_check_single_key(&fx_cpu_model_03, 64);
}
END_TEST

static Suite *flash2_model_suite(void)
{
    Suite *s = suite_create("flash2_model");

    TCase *tiles = tcase_create("tiles");
    tcase_add_test(tiles, tiles_are_the_kernels_tiles_for_each_head_dim);
    suite_add_tcase(s, tiles);

    TCase *ref = tcase_create("against_reference");
    tcase_set_timeout(ref, 300);
    tcase_add_test(ref, noncausal_with_tails_in_both_lengths_matches_the_reference);
    tcase_add_test(ref, causal_with_seqlen_q_below_seqlen_k_matches_the_reference);
    tcase_add_test(ref, causal_with_seqlen_q_above_seqlen_k_matches_the_reference);
    tcase_add_test(ref, causal_with_equal_lengths_matches_the_reference);
    tcase_add_test(ref, gqa_three_query_heads_per_kv_head_matches_the_reference);
    tcase_add_test(ref, mqa_one_kv_head_matches_the_reference);
    tcase_add_test(ref, head_dim_128_matches_the_reference);
    tcase_add_test(ref, head_dim_96_and_256_match_the_reference);
    tcase_add_test(ref, seqlen_one_matches_the_reference);
    tcase_add_test(ref, outlier_inputs_match_the_reference);
    suite_add_tcase(s, ref);

    TCase *masked = tcase_create("masked_rows");
    tcase_add_test(masked, a_row_that_sees_no_key_gives_zero_o_minus_inf_lse_and_zero_dq);
    tcase_add_test(masked, wholly_masked_blocks_before_the_first_visible_key_leave_a_row_exact);
    tcase_add_test(masked, a_single_key_gives_exactly_zero_dq_and_dk);
    suite_add_tcase(s, masked);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(flash2_model_suite());
    srunner_run_all(runner, CK_NORMAL);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
