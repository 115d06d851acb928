/*
 * test_varlen.c — variable-length batches in the harness (fx_problem.h's packed layout):
 * the options that make one and their refusals, fx_problem_validate's checks of the
 * offsets, the layout, element counts, FLOPs and problem line, the forward check on a
 * packed batch against each sequence run on its own, and the previous-stage rule (a
 * fixed-length stage checks a varlen one sequence by sequence).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_compare.h"
#include "fx_main.h"
#include "fx_model_check.h"
#include "fx_reference.h"
#include "fx_run.h"
#include "fx_stage.h"

extern const fx_stage fx_stage_08_intra_wg_overlap, fx_stage_09_persistent;

/* The options of the last parse: static, since the problem points into them. */
static fx_options opts;
static char why[512];

/* Parses `line` (words separated by single spaces) into opts; returns the exit code. */
static int parse(const char *line)
{
    return fx_test_parse_args(line, &opts, why, sizeof why);
}

/* `line` is refused with 2 and a message that contains `text`. */
static void assert_refused(const char *line, const char *text)
{
    const int rc = parse(line);
    ck_assert_msg(rc == 2, "'%s' returned %d, expected 2 (message '%s')", line, rc, why);
    ck_assert_msg(strstr(why, text) != NULL, "'%s': message '%s' does not contain '%s'", line, why,
                  text);
}

/* ---- the options ----------------------------------------------------------------------- */

START_TEST(seqlens_make_a_packed_batch_with_prefix_sums_and_maxima)
{
    ck_assert_int_eq(parse("--seqlens-q 0,1,127,129 --seqlens-k 5,0,129,300 --causal"), 0);
    const fx_problem *p = &opts.problem;
    ck_assert(p->varlen);
    ck_assert_int_eq(p->batch, 4);
    ck_assert_int_eq(p->total_q, 257);
    ck_assert_int_eq(p->total_k, 434);
    ck_assert_int_eq(p->seqlen_q, 129);
    ck_assert_int_eq(p->seqlen_k, 300);
    const int cu_q[5] = {0, 0, 1, 128, 257}, cu_k[5] = {0, 5, 5, 134, 434};
    for (int b = 0; b <= 4; ++b) {
        ck_assert_int_eq(p->cu_seqlens_q[b], cu_q[b]);
        ck_assert_int_eq(p->cu_seqlens_k[b], cu_k[b]);
    }
    ck_assert_ptr_null(p->seqused_k);
    ck_assert_int_eq(fx_seq_len_q(p, 3), 129);
    ck_assert_int_eq(fx_seq_len_k(p, 1), 0);
    ck_assert_int_eq(fx_seq_start_q(p, 3), 128);
    ck_assert_int_eq(fx_seq_start_k(p, 3), 134);
}
END_TEST

START_TEST(seqlens_k_defaults_to_seqlens_q_and_seqused_k_sets_the_keys_attended)
{
    ck_assert_int_eq(parse("--seqlens-q 3,7"), 0);
    ck_assert_int_eq(opts.problem.total_k, 10);
    ck_assert_int_eq(opts.problem.seqlen_k, 7);

    ck_assert_int_eq(parse("--seqlens-q 3,7 --seqlens-k 10,20 --seqused-k 9,4"), 0);
    const fx_problem *p = &opts.problem;
    ck_assert_ptr_nonnull(p->seqused_k);
    ck_assert_int_eq(p->total_k, 30);
    ck_assert_int_eq(fx_seq_len_k(p, 0), 9);
    ck_assert_int_eq(fx_seq_len_k(p, 1), 4);
    ck_assert_int_eq(p->seqlen_k, 9); /* the largest attended, not the largest stored */
}
END_TEST

START_TEST(an_explicit_seqlen_is_the_max_seqlen)
{
    ck_assert_int_eq(parse("--seqlens-q 3,7 --seqlen-q 128 --seqlen-k 256"), 0);
    ck_assert_int_eq(opts.problem.seqlen_q, 128);
    ck_assert_int_eq(opts.problem.seqlen_k, 256);
    ck_assert_int_eq(parse("--seqlens-q 3,7 --batch 2"), 0); /* --batch equal to the count */
}
END_TEST

START_TEST(bad_lengths_are_refused_naming_the_value)
{
    assert_refused("--seqlens-q 1,-3", "--seqlens-q: sequence 1's length -3 is negative");
    assert_refused("--seqlens-q 1,x", "--seqlens-q: '1,x' is not a comma list of lengths "
                                      "(sequence 1's is 'x')");
    assert_refused("--seqlens-q 1,,2", "(sequence 1's is '')");
    assert_refused("--seqlens-q 4,+5", "(sequence 1's is '+5')");
    /* A number too large for a length is said to be so, leading zeros are not length. */
    assert_refused("--seqlens-q 99999999999999999999,4",
                   "--seqlens-q: sequence 0's length 99999999999999999999 is above 2147483647");
    assert_refused("--seqlens-q 1,000000000000000000000000000000000000003 --seqlen-q 2",
                   "--seqlens-q: sequence 1's 3 is above --seqlen-q 2");
    assert_refused("--seqlens-q 1 --seqlens-k 1,2",
                   "--seqlens-k gives 2 lengths for the 1 sequences of --seqlens-q");
    assert_refused("--seqlens-q 1,2 --seqused-k 1",
                   "--seqused-k gives 1 lengths for the 2 sequences of --seqlens-q");
    assert_refused("--seqlens-k 4", "--seqlens-k needs --seqlens-q");
    assert_refused("--seqused-k 4", "--seqused-k needs --seqlens-q");
    assert_refused("--seqlens-q 1,2 --seqlens-k 2,2 --seqused-k 1,3",
                   "--seqused-k: sequence 1's 3 is above its 2 keys (--seqlens-k)");
    assert_refused("--seqlens-q 4,200 --seqlen-q 128",
                   "--seqlens-q: sequence 1's 200 is above --seqlen-q 128");
    assert_refused("--seqlens-q 4,200 --seqlen-k 100",
                   "--seqlens-k: sequence 1's 200 is above --seqlen-k 100");
    assert_refused("--seqlens-q 4,2 --batch 3", "--batch 3 and --seqlens-q's 2 sequences disagree");
    assert_refused("--seqlens-q 0,0 --seqlens-k 1,1",
                   "--seqlens-q: every sequence has 0 query rows");
    assert_refused("--seqlens-q 1,2 --seqlens-k 0,0", "--seqlens-k: every sequence has 0 keys");
    assert_refused("--seqlens-q 1,2 --seqused-k 0,0", "--seqused-k: every sequence has 0 keys");
    assert_refused("--seqlens-q 2000000000,2000000000",
                   "--seqlens-q: the lengths sum to 4000000000 rows, past the 32-bit index limit");
    assert_refused("--seqlens-q 3000000000", "sequence 0's length 3000000000 is above");
    assert_refused("--seqlens-q 100000000,100000000", "Q/O (total_q*heads_q*head_dim) has");
    assert_refused("--matrix --seqlens-q 4", "--matrix runs its own cases");
}
END_TEST

START_TEST(more_than_the_most_sequences_are_refused)
{
    static char line[8192];
    int off = snprintf(line, sizeof line, "--seqlens-q ");
    for (int b = 0; b <= FX_VARLEN_MAX_SEQS; ++b)
        off += snprintf(line + off, sizeof line - (size_t)off, "%s1", b ? "," : "");
    assert_refused(line, "--seqlens-q: more than 1024 sequences (FX_VARLEN_MAX_SEQS)");
    line[off - 2] = '\0'; /* exactly FX_VARLEN_MAX_SEQS */
    ck_assert_int_eq(parse(line), 0);
    ck_assert_int_eq(opts.problem.batch, FX_VARLEN_MAX_SEQS);
}
END_TEST

/* ---- fx_problem_validate ---------------------------------------------------------------- */

/* A varlen problem over the offsets given (batch + 1 each). */
static fx_problem varlen_problem(int batch, const int *cu_q, const int *cu_k, const int *used)
{
    fx_problem p = fx_problem_default();
    p.varlen = true;
    p.batch = batch;
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    p.seqused_k = used;
    p.total_q = cu_q[batch];
    p.total_k = cu_k[batch];
    p.seqlen_q = p.seqlen_k = 0;
    for (int b = 0; b < batch; ++b) {
        p.seqlen_q = fx_seq_len_q(&p, b) > p.seqlen_q ? fx_seq_len_q(&p, b) : p.seqlen_q;
        p.seqlen_k = fx_seq_len_k(&p, b) > p.seqlen_k ? fx_seq_len_k(&p, b) : p.seqlen_k;
    }
    return p;
}

static void assert_invalid(fx_problem p, const char *text)
{
    char msg[256];
    ck_assert_int_eq(fx_problem_validate(&p, msg, sizeof msg), 2);
    ck_assert_msg(strstr(msg, text), "message '%s' does not contain '%s'", msg, text);
}

START_TEST(validate_refuses_bad_offsets_naming_index_and_values)
{
    const int good[4] = {0, 3, 3, 10}, used[3] = {2, 0, 8};
    fx_problem p = varlen_problem(3, good, good, NULL);
    char msg[256];
    ck_assert_int_eq(fx_problem_validate(&p, msg, sizeof msg), 0);

    const int first[4] = {1, 3, 3, 10};
    assert_invalid(varlen_problem(3, first, good, NULL), "cu_seqlens_q[0] (1) must be 0");
    const int down[4] = {0, 5, 3, 10};
    p = varlen_problem(3, good, down, NULL);
    assert_invalid(p,
                   "cu_seqlens_k decreases at index 2: cu_seqlens_k[2] (3) < cu_seqlens_k[1] (5)");
    p = varlen_problem(3, good, good, NULL);
    p.total_q = 11;
    assert_invalid(p, "cu_seqlens_q[3] (10) is not total_q (11)");
    p = varlen_problem(3, good, good, used);
    assert_invalid(p, "seqused_k[2] (8) is outside [0, 7], sequence 2's keys");
    p = varlen_problem(3, good, good, NULL);
    p.seqlen_q = 6;
    assert_invalid(p, "seqlen_q (6) is below sequence 2's 7 query rows");
    p = varlen_problem(3, good, good, NULL);
    p.cu_seqlens_k = NULL;
    assert_invalid(p, "needs cu_seqlens_k");
    p = varlen_problem(3, good, good, NULL);
    p.batch = FX_VARLEN_MAX_SEQS + 1;
    assert_invalid(p, "at most 1024 sequences, not 1025");
}
END_TEST

START_TEST(a_zero_seqlen_is_allowed_only_in_a_varlen_batch)
{
    const int cu_q[3] = {0, 0, 0}, cu_k[3] = {0, 4, 6};
    fx_problem p = varlen_problem(2, cu_q, cu_k, NULL);
    char msg[256];
    ck_assert_int_eq(fx_problem_validate(&p, msg, sizeof msg), 0);
    p = fx_problem_default();
    p.seqlen_q = 0;
    assert_invalid(p, "seqlen_q (0) must be positive");
}
END_TEST

/* ---- layout, counts, FLOPs, the line --------------------------------------------------- */

START_TEST(the_packed_layout_has_no_batch_stride_and_counts_the_totals)
{
    ck_assert_int_eq(parse("--seqlens-q 0,1,127,129 --seqlens-k 5,0,129,300 --heads-q 4 "
                           "--heads-kv 2 --head-dim 64"),
                     0);
    const fx_problem *p = &opts.problem;
    const fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p);
    ck_assert_int_eq(lq.batch_stride, 0);
    ck_assert_int_eq(lkv.batch_stride, 0);
    ck_assert_int_eq(lq.row_stride, 4 * 64);
    ck_assert_int_eq(lkv.row_stride, 2 * 64);
    ck_assert_uint_eq(fx_numel_q(p), 257u * 4 * 64);
    ck_assert_uint_eq(fx_numel_kv(p), 434u * 2 * 64);
    ck_assert_uint_eq(fx_numel_lse(p), 4u * 257);
    /* LSE [heads_q, total_q]: head 2 of sequence 3, row 5. */
    ck_assert_uint_eq(fx_lse_index(p, 3, 2, 5), 2u * 257 + 128 + 5);
    /* Row 5 of sequence 3 is packed row 128 + 5. */
    ck_assert_uint_eq(fx_offset(lq, 3, fx_seq_start_q(p, 3) + 5, 1, 0), (128u + 5) * 256 + 64);
    const fx_problem s = fx_seq_problem(p, 3);
    ck_assert(!s.varlen);
    ck_assert_int_eq(s.batch, 1);
    ck_assert_int_eq(s.seqlen_q, 129);
    ck_assert_int_eq(s.seqlen_k, 300);
    ck_assert_int_eq(fx_layout_q(&s).row_stride, lq.row_stride);
}
END_TEST

START_TEST(flops_sum_each_sequences_unmasked_pairs)
{
    ck_assert_int_eq(parse("--seqlens-q 0,1,127,129 --seqlens-k 5,0,129,300 --causal "
                           "--heads 2 --head-dim 64"),
                     0);
    /* Causal, bottom-right per sequence: (0, 5) and (1, 0) none; (127, 129): row i sees i + 3,
     * 8382 pairs; (129, 300): row i sees i + 172, 30444 pairs. */
    ck_assert_double_eq(fx_flops_forward(&opts.problem), 4.0 * 2 * 64 * (8382 + 30444));
    ck_assert_int_eq(parse("--seqlens-q 0,1,127,129 --seqlens-k 5,0,129,300 --heads 2 "
                           "--head-dim 64"),
                     0);
    ck_assert_double_eq(fx_flops_forward(&opts.problem),
                        4.0 * 2 * 64 * (0 * 5 + 1 * 0 + 127 * 129 + 129 * 300));
    ck_assert_double_eq(fx_flops_backward(&opts.problem), 2.5 * fx_flops_forward(&opts.problem));
}
END_TEST

START_TEST(the_problem_line_reproduces_a_short_batch_and_sums_up_a_long_one)
{
    char line[512];
    ck_assert_int_eq(parse("--seqlens-q 0,1,127,129 --seqlens-k 5,0,129,300 --causal"), 0);
    fx_problem_format(&opts.problem, line, sizeof line);
    ck_assert_str_eq(line, "varlen b=4 sq<=129 sk<=300 tq=257 tk=434 hq=16 hkv=16 d=128 bf16 "
                           "causal normal seed=1 seqlens-q=0,1,127,129 seqlens-k=5,0,129,300");
    ck_assert_int_eq(parse("--seqlens-q 3,7 --seqlens-k 10,20 --seqused-k 9,4 --seed 7"), 0);
    fx_problem_format(&opts.problem, line, sizeof line);
    ck_assert_str_eq(line, "varlen b=2 sq<=7 sk<=9 tq=10 tk=30 hq=16 hkv=16 d=128 bf16 "
                           "non-causal normal seed=7 seqlens-q=3,7 seqlens-k=10,20 seqused-k=9,4");
    /* A buffer too short for the lengths keeps the totals only. */
    char small[96];
    fx_problem_format(&opts.problem, small, sizeof small);
    ck_assert_str_eq(small, "varlen b=2 sq<=7 sk<=9 tq=10 tk=30 hq=16 hkv=16 d=128 bf16 "
                            "non-causal normal seed=7");
    /* Too many lengths for the line: the totals stand for them. */
    static char many[4096];
    int off = snprintf(many, sizeof many, "--seqlens-q ");
    for (int b = 0; b < 40; ++b)
        off += snprintf(many + off, sizeof many - (size_t)off, "%s100", b ? "," : "");
    ck_assert_int_eq(parse(many), 0);
    fx_problem_format(&opts.problem, line, sizeof line);
    ck_assert_str_eq(line, "varlen b=40 sq<=100 sk<=100 tq=4000 tk=4000 hq=16 hkv=16 d=128 bf16 "
                           "non-causal normal seed=1");
    /* A fixed-length problem's line is unchanged. */
    fx_problem p = fx_problem_default();
    fx_problem_format(&p, line, sizeof line);
    ck_assert_str_eq(line, "b=4 sq=4096 sk=4096 hq=16 hkv=16 d=128 bf16 non-causal normal seed=1");
}
END_TEST

/* ---- the forward check ----------------------------------------------------------------- */

/* Copies rows [r0, r0 + n) of a packed tensor with `row` floats per row into a new array. */
static float *copy_rows(const float *x, int r0, int n, int row)
{
    float *y = malloc(((size_t)n * row + 1) * sizeof(float));
    memcpy(y, x + (size_t)r0 * row, (size_t)n * row * sizeof(float));
    return y;
}

/* The emulation run on each sequence alone, as a fixed-length batch of 1 on its own copies of
 * the rows, placed at the packed positions: what a correct varlen stage would give. The
 * varlen check must then find exactly the emulation's own error, and -inf where a row sees
 * no key. */
START_TEST(the_check_of_a_packed_batch_equals_each_sequence_run_alone)
{
    ck_assert_int_eq(parse("--seqlens-q 0,1,20,33,9 --seqlens-k 5,0,17,40,30 --seqused-k "
                           "5,0,17,40,12 --causal --heads-q 4 --heads-kv 2 --head-dim 32 "
                           "--seed 11"),
                     0);
    const fx_problem *p = &opts.problem;
    fx_case_host h;
    fx_host_make(p, false, &h);
    const int hq = p->heads_q, d = p->head_dim, rq = hq * d, rk = p->heads_kv * d;
    fx_outputs st = {0};
    st.o_h = malloc(fx_numel_q(p) * sizeof(float));
    st.lse_h = malloc(fx_numel_lse(p) * sizeof(float));
    for (size_t i = 0; i < fx_numel_q(p); ++i)
        st.o_h[i] = NAN;
    for (size_t i = 0; i < fx_numel_lse(p); ++i)
        st.lse_h[i] = NAN;
    int no_key_rows = 0;
    for (int b = 0; b < p->batch; ++b) {
        const fx_problem s = fx_seq_problem(p, b);
        float *q = copy_rows(h.q, fx_seq_start_q(p, b), s.seqlen_q, rq);
        float *k = copy_rows(h.k, fx_seq_start_k(p, b), s.seqlen_k, rk);
        float *v = copy_rows(h.v, fx_seq_start_k(p, b), s.seqlen_k, rk);
        float *o = malloc(((size_t)s.seqlen_q * d + 1) * sizeof(float));
        float *lse = malloc(((size_t)s.seqlen_q + 1) * sizeof(float));
        for (int hh = 0; hh < hq; ++hh) {
            fx_emu_forward_rows(&s, q, k, v, 0, hh, 0, s.seqlen_q, o, lse);
            for (int i = 0; i < s.seqlen_q; ++i) {
                memcpy(st.o_h + fx_offset(fx_layout_q(p), b, fx_seq_start_q(p, b) + i, hh, 0),
                       o + (size_t)i * d, (size_t)d * sizeof(float));
                st.lse_h[fx_lse_index(p, b, hh, i)] = lse[i];
                no_key_rows += isinf(lse[i]) ? 1 : 0;
            }
        }
        free(q);
        free(k);
        free(v);
        free(o);
        free(lse);
    }
    /* Sequence 1 has a row and no key; sequence 4 (9 rows, 12 keys used) sees keys on every
     * row; sequence 2 (20 rows, 17 keys, causal) has 3 rows that see none. Each per head. */
    ck_assert_int_eq(no_key_rows, (1 + 3) * hq);

    fx_fwd_check fc;
    fx_check_forward(p, 2, &h, &st, &fc);
    ck_assert_uint_eq(fc.rows, (size_t)p->total_q * hq); /* every row: within the budget */
    ck_assert(fc.pass);
    ck_assert_double_eq(fc.o.max_abs, fc.o_emu.max_abs);
    ck_assert_double_eq(fc.lse.max_abs, fc.lse_emu.max_abs);
    ck_assert_uint_eq(fc.o.inf_mismatch + fc.lse.inf_mismatch + fc.o.nan_count, 0);

    /* The fp64 reference of sequence 3 alone, row 32 of head 3, is what the check compares
     * the packed row with: moving that row's O breaks the check. */
    st.o_h[fx_offset(fx_layout_q(p), 3, fx_seq_start_q(p, 3) + 32, 3, 0)] += 0.5f;
    fx_check_forward(p, 2, &h, &st, &fc);
    ck_assert(!fc.o_pass);
    free(st.o_h);
    free(st.lse_h);
    fx_host_free(&h);
}
END_TEST

/* Sampling on a batch over the reference budget still evaluates rows of sequences that have
 * some, and only rows that exist. */
START_TEST(sampling_a_large_packed_batch_picks_sequences_with_rows)
{
    ck_assert_int_eq(parse("--seqlens-q 0,3000,0,2500 --seqlens-k 4000,3000,10,2500 --heads 8 "
                           "--head-dim 128"),
                     0);
    const fx_problem *p = &opts.problem;
    fx_case_host h;
    fx_host_make(p, false, &h);
    fx_outputs st = {0};
    st.o_h = calloc(fx_numel_q(p), sizeof(float));
    st.lse_h = calloc(fx_numel_lse(p), sizeof(float));
    fx_fwd_check fc;
    fx_check_forward(p, 4, &h, &st, &fc);
    ck_assert_uint_gt(fc.rows, 0);
    ck_assert_uint_lt(fc.rows, (size_t)p->total_q * p->heads_q);
    ck_assert(!fc.pass); /* zeros are not attention */
    free(st.o_h);
    free(st.lse_h);
    fx_host_free(&h);
}
END_TEST

/* ---- stages and the previous-stage rule ------------------------------------------------ */

/* A fixed-length stage's outputs of each sequence (batch 1: O [len, heads, d], LSE [heads,
 * len]) land at the packed rows, and a sequence without keys gets O = 0, LSE = -inf: every
 * element of the packed outputs is then written, none twice. */
START_TEST(a_sequences_outputs_land_at_its_packed_rows)
{
    ck_assert_int_eq(parse("--seqlens-q 2,0,3,1 --seqlens-k 4,4,0,2 --heads 2 --head-dim 8"), 0);
    const fx_problem *p = &opts.problem;
    const int hq = p->heads_q, d = p->head_dim, tq = p->total_q;
    float *o = malloc(fx_numel_q(p) * sizeof(float)),
          *lse = malloc(fx_numel_lse(p) * sizeof(float));
    for (size_t x = 0; x < fx_numel_q(p); ++x)
        o[x] = NAN;
    for (size_t x = 0; x < fx_numel_lse(p); ++x)
        lse[x] = NAN;
    float o_seq[3 * 2 * 8], lse_seq[2 * 3];
    for (int b = 0; b < p->batch; ++b) {
        const int len = fx_seq_len_q(p, b);
        /* Sequence b's values: 1000·b + their index in the batch-1 arrays. */
        for (int x = 0; x < len * hq * d; ++x)
            o_seq[x] = 1000.0f * b + (float)x;
        for (int x = 0; x < hq * len; ++x)
            lse_seq[x] = 1000.0f * b + (float)x;
        const bool keys = fx_seq_len_k(p, b) > 0;
        fx_place_seq_forward(p, b, keys ? o_seq : NULL, keys ? lse_seq : NULL, o, lse);
    }
    /* Packed rows: sequence 0 rows 0-1, sequence 2 (no keys) rows 2-4, sequence 3 row 5. */
    ck_assert_int_eq(tq, 6);
    for (int x = 0; x < 2 * hq * d; ++x)
        ck_assert_float_eq(o[x], (float)x);
    for (int x = 2 * hq * d; x < 5 * hq * d; ++x)
        ck_assert_float_eq(o[x], 0.0f);
    for (int x = 0; x < hq * d; ++x)
        ck_assert_float_eq(o[5 * hq * d + x], 3000.0f + (float)x);
    for (int h = 0; h < hq; ++h) {
        for (int i = 0; i < 2; ++i)
            ck_assert_float_eq(lse[h * tq + i], (float)(h * 2 + i));
        for (int i = 2; i < 5; ++i)
            ck_assert(isinf(lse[h * tq + i]) && lse[h * tq + i] < 0);
        ck_assert_float_eq(lse[h * tq + 5], 3000.0f + (float)h);
    }
    free(o);
    free(lse);
}
END_TEST

START_TEST(a_stage_without_varlen_refuses_it_and_stage_09_takes_it)
{
    ck_assert_int_eq(parse("--seqlens-q 1,2 --head-dim 128"), 0);
    char msg[256];
    ck_assert_int_eq(
        fx_stage_supports(&fx_stage_08_intra_wg_overlap, &opts.problem, false, msg, sizeof msg), 2);
    ck_assert_str_eq(msg, "a variable-length batch (--seqlens-q) is not supported");
    ck_assert_int_eq(
        fx_stage_supports(&fx_stage_09_persistent, &opts.problem, false, msg, sizeof msg), 0);
    char caps[2048];
    fx_caps_describe(&fx_stage_09_persistent, caps, sizeof caps);
    ck_assert_ptr_nonnull(strstr(caps, "\n  varlen:   yes (--seqlens-q"));
    fx_caps_describe(&fx_stage_08_intra_wg_overlap, caps, sizeof caps);
    ck_assert_ptr_nonnull(strstr(caps, "\n  varlen:   no\n"));
}
END_TEST

START_TEST(stage_08_checks_stage_09s_varlen_forward_sequence_by_sequence)
{
    const fx_stage *stages[2] = {&fx_stage_08_intra_wg_overlap, &fx_stage_09_persistent};
    fx_ctx c;
    memset(&c, 0, sizeof c);
    c.stages = stages;
    c.n_stages = 2;
    c.self = stages[1];
    c.dev.cc_major = 9;
    c.dev.cc_minor = 0;
    ck_assert_int_eq(parse("--seqlens-q 0,1,127,129 --seqlens-k 5,0,129,300 --causal"), 0);
    const fx_stage *prev = fx_find_prev(&c, &opts.problem, false, why, sizeof why);
    ck_assert_ptr_eq(prev, &fx_stage_08_intra_wg_overlap);
    ck_assert(fx_prev_per_seq(prev, &opts.problem));
    /* A fixed-length problem: the stage itself, not sequence by sequence. */
    fx_problem fixed = fx_problem_default();
    prev = fx_find_prev(&c, &fixed, false, why, sizeof why);
    ck_assert_ptr_eq(prev, &fx_stage_08_intra_wg_overlap);
    ck_assert(!fx_prev_per_seq(prev, &fixed));
    /* No backward for a varlen batch on a fixed-length stage. */
    ck_assert_ptr_null(fx_find_prev(&c, &opts.problem, true, why, sizeof why));
}
END_TEST

static Suite *varlen_suite(void)
{
    Suite *s = suite_create("varlen");
    TCase *options = tcase_create("options");
    tcase_add_test(options, seqlens_make_a_packed_batch_with_prefix_sums_and_maxima);
    tcase_add_test(options, seqlens_k_defaults_to_seqlens_q_and_seqused_k_sets_the_keys_attended);
    tcase_add_test(options, an_explicit_seqlen_is_the_max_seqlen);
    tcase_add_test(options, bad_lengths_are_refused_naming_the_value);
    tcase_add_test(options, more_than_the_most_sequences_are_refused);
    suite_add_tcase(s, options);
    TCase *problem = tcase_create("problem");
    tcase_add_test(problem, validate_refuses_bad_offsets_naming_index_and_values);
    tcase_add_test(problem, a_zero_seqlen_is_allowed_only_in_a_varlen_batch);
    tcase_add_test(problem, the_packed_layout_has_no_batch_stride_and_counts_the_totals);
    tcase_add_test(problem, flops_sum_each_sequences_unmasked_pairs);
    tcase_add_test(problem, the_problem_line_reproduces_a_short_batch_and_sums_up_a_long_one);
    suite_add_tcase(s, problem);
    TCase *check = tcase_create("check");
    tcase_add_test(check, the_check_of_a_packed_batch_equals_each_sequence_run_alone);
    tcase_add_test(check, sampling_a_large_packed_batch_picks_sequences_with_rows);
    tcase_add_test(check, a_sequences_outputs_land_at_its_packed_rows);
    tcase_add_test(check, a_stage_without_varlen_refuses_it_and_stage_09_takes_it);
    tcase_add_test(check, stage_08_checks_stage_09s_varlen_forward_sequence_by_sequence);
    suite_add_tcase(s, check);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(varlen_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
