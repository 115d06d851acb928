/*
 * test_load.c — --load DIR (fx_load.h): what --save writes reads back as the same problem and
 * the same bits; every malformed problem.txt or input file is refused (exit 2) with a reason
 * that names the file, the line or the element, before anything runs.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fx_gpu.h" /* FX_EXIT_USAGE */
#include "fx_host.h"
#include "fx_load.h"
#include "fx_save.h"

static char folder[64];

static void make_folder(void)
{
    strcpy(folder, "/tmp/fx_load_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(folder));
}

static void write_file(const char *name, const void *bytes, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static void write_text(const char *name, const char *text)
{
    write_file(name, text, strlen(text));
}

/* fx_options_parse of `prog --load folder [extra]`: its code, the message in why. */
static int parse_load(fx_options *o, const char *extra, char *why, size_t why_len)
{
    fx_options_default(o);
    char *argv[] = {"prog", "--load", folder, (char *)extra, NULL};
    return fx_options_parse(extra ? 4 : 3, argv, o, why, why_len);
}

static const char *fixed_problem = "# a comment, then a blank line\n"
                                   "\n"
                                   "batch=2\nseqlen_q=3\nseqlen_k=5\nheads_q=4\nheads_kv=2\n"
                                   "head_dim=8\ndtype=fp16\ncausal=1\nsoftmax_scale=0.1\n";

START_TEST(load_reads_the_problem)
{
    make_folder();
    write_text("problem.txt", fixed_problem);
    fx_options o;
    char why[512];
    ck_assert_int_eq(parse_load(&o, NULL, why, sizeof why), 0);
    const fx_problem *p = &o.problem;
    ck_assert_int_eq(p->batch, 2);
    ck_assert_int_eq(p->seqlen_q, 3);
    ck_assert_int_eq(p->seqlen_k, 5);
    ck_assert_int_eq(p->heads_q, 4);
    ck_assert_int_eq(p->heads_kv, 2);
    ck_assert_int_eq(p->head_dim, 8);
    ck_assert_int_eq(fx_head_dim_v(p), 8);
    ck_assert_int_eq(p->dtype, FX_FP16);
    ck_assert(p->causal);
    ck_assert(p->softmax_scale == 0.1);
    ck_assert(!p->varlen);
}
END_TEST

/* What fx_save_case writes, fx_load_problem and fx_load_case read back: the problem, the
 * offsets of a variable-length batch and every bit of the inputs. */
START_TEST(load_reads_what_save_wrote)
{
    make_folder();
    static const int cu_q[] = {0, 0, 3, 10}, cu_k[] = {0, 5, 6, 26}, used[] = {5, 0, 15};
    fx_problem p = fx_problem_default();
    p.varlen = true;
    p.batch = 3;
    p.seqlen_q = 7;
    p.seqlen_k = 20;
    p.total_q = 10;
    p.total_k = 26;
    p.heads_q = 2;
    p.heads_kv = 1;
    p.head_dim = 16;
    p.softmax_scale = 1.0 / 3.0;
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    p.seqused_k = used;
    const size_t nq = fx_numel_q(&p), nkv = fx_numel_kv(&p), no = fx_numel_o(&p);
    fx_case_host h = {0};
    uint16_t *b[4];
    for (int t = 0; t < 4; ++t) {
        const size_t n = t == 0 || t == 3 ? nq : nkv;
        b[t] = malloc(n * 2);
        for (size_t i = 0; i < n; ++i) /* distinct finite bf16 values, both signs */
            b[t][i] = (uint16_t)(((i * 37 + (size_t)t * 11) % 0x3f00) | ((i & 1) << 15));
    }
    h.qb = b[0], h.kb = b[1], h.vb = b[2], h.dob = b[3];
    fx_outputs out = {.o_h = calloc(no, 4),
                      .lse_h = calloc(fx_numel_lse(&p), 4),
                      .dq_h = calloc(nq, 4),
                      .dk_h = calloc(nkv, 4),
                      .dv_h = calloc(nkv, 4)};
    ck_assert_int_eq(fx_save_case(folder, "09_persistent", &p, &h, &out, true), 0);

    fx_options o;
    char why[512];
    ck_assert_msg(parse_load(&o, NULL, why, sizeof why) == 0, "%s", why);
    const fx_problem *q = &o.problem;
    ck_assert(q->varlen);
    ck_assert_int_eq(q->batch, 3);
    ck_assert_int_eq(q->total_q, 10);
    ck_assert_int_eq(q->total_k, 26);
    ck_assert(q->softmax_scale == 1.0 / 3.0);
    for (int i = 0; i <= 3; ++i) {
        ck_assert_int_eq(q->cu_seqlens_q[i], cu_q[i]);
        ck_assert_int_eq(q->cu_seqlens_k[i], cu_k[i]);
    }
    ck_assert_ptr_nonnull(q->seqused_k);
    for (int i = 0; i < 3; ++i)
        ck_assert_int_eq(q->seqused_k[i], used[i]);

    fx_case_host g;
    ck_assert_msg(fx_load_case(folder, q, true, &g, why, sizeof why) == 0, "%s", why);
    ck_assert(memcmp(g.qb, h.qb, nq * 2) == 0);
    ck_assert(memcmp(g.kb, h.kb, nkv * 2) == 0);
    ck_assert(memcmp(g.vb, h.vb, nkv * 2) == 0);
    ck_assert(memcmp(g.dob, h.dob, nq * 2) == 0);
    ck_assert(g.q[5] == fx_bf16_to_float(h.qb[5])); /* the floats are the bits' values */
    fx_host_free(&g);
    for (int t = 0; t < 4; ++t)
        free(b[t]);
    free(out.o_h), free(out.lse_h), free(out.dq_h), free(out.dk_h), free(out.dv_h);
}
END_TEST

/* Each malformed problem.txt, and the words its refusal must contain. */
START_TEST(load_refuses_bad_problems)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"batch=2\n", "has no seqlen_q= line"},
        {"batch=2\nbatch=3\n", "problem.txt:2: batch is given twice"},
        {"batch=2\nheadz=4\n", "problem.txt:2: unknown key 'headz'"},
        {"batch two\n", "problem.txt:1: 'batch two' is not key=value"},
        {"batch=-1\n", "problem.txt:1: --batch: -1 is out of range"},
        {"batch=1\nseqlen_q=2\nseqlen_k=2\nheads_q=1\nheads_kv=1\nhead_dim=8\ndtype=fp8\n",
         "--dtype: 'fp8' is not one of bf16, fp16"},
        {"batch=1\nseqlen_q=2\nseqlen_k=2\nheads_q=1\nheads_kv=1\nhead_dim=8\ndtype=bf16\n"
         "causal=yes\n",
         "causal: 'yes' is neither 0 nor 1"},
        {"batch=1\nseqlen_q=2\nseqlen_k=2\nheads_q=3\nheads_kv=2\nhead_dim=8\ndtype=bf16\n"
         "causal=0\n",
         "heads_q (3) is not a multiple of heads_kv (2)"},
        {"batch=1\nseqlen_q=2\nseqlen_k=2\nheads_q=1\nheads_kv=1\nhead_dim=8\ndtype=bf16\n"
         "causal=0\ncu_seqlens_q=0,2\n",
         "a variable-length batch has varlen=1"},
        {"batch=1\nseqlen_q=2\nseqlen_k=2\nheads_q=1\nheads_kv=1\nhead_dim=8\ndtype=bf16\n"
         "causal=0\nvarlen=1\ncu_seqlens_q=1,2\ncu_seqlens_k=0,2\n",
         "cu_seqlens_q: the first offset is 1"},
        {"batch=2\nseqlen_q=2\nseqlen_k=2\nheads_q=1\nheads_kv=1\nhead_dim=8\ndtype=bf16\n"
         "causal=0\nvarlen=1\ncu_seqlens_q=0,2,1\ncu_seqlens_k=0,2,4\n",
         "cu_seqlens_q: offset 2 is 1 after 2"},
        {"batch=2\nseqlen_q=2\nseqlen_k=2\nheads_q=1\nheads_kv=1\nhead_dim=8\ndtype=bf16\n"
         "causal=0\nvarlen=1\ncu_seqlens_q=0,2,4\ncu_seqlens_k=0,2,4\ntotal_q=5\n",
         "total_q=5, but cu_seqlens_q ends at 4"},
        {"batch=2\nseqlen_q=2\nseqlen_k=2\nheads_q=1\nheads_kv=1\nhead_dim=8\ndtype=bf16\n"
         "causal=0\nvarlen=1\ncu_seqlens_q=0,2,5\ncu_seqlens_k=0,2,4\n",
         "sequence 1's 3 is above --seqlen-q 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        make_folder();
        write_text("problem.txt", bad[i].text);
        fx_options o;
        char why[512];
        ck_assert_int_eq(parse_load(&o, NULL, why, sizeof why), FX_EXIT_USAGE);
        ck_assert_msg(strstr(why, bad[i].want) != NULL, "case %zu: '%s' does not say '%s'", i, why,
                      bad[i].want);
        ck_assert_msg(strncmp(why, "--load: ", 8) == 0, "case %zu: '%s'", i, why);
    }
}
END_TEST

START_TEST(load_refuses_other_options)
{
    make_folder();
    write_text("problem.txt", fixed_problem);
    fx_options o;
    char why[512];
    ck_assert_int_eq(parse_load(&o, "--causal", why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "leave out --causal"), "%s", why);
    ck_assert_int_eq(parse_load(&o, "--matrix", why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "--load runs the one case in its folder"), "%s", why);
    strcpy(folder, "/nonexistent-fx-load");
    ck_assert_int_eq(parse_load(&o, NULL, why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "cannot open /nonexistent-fx-load/problem.txt: No such file"), "%s",
                  why);
}
END_TEST

/* The inputs of fixed_problem (fp16): Q 2·3·4·8, K and V 2·5·2·8 elements of 2 bytes. */
enum { NQ = 2 * 3 * 4 * 8, NKV = 2 * 5 * 2 * 8 };

static int load_inputs(char *why, size_t why_len)
{
    fx_options o;
    ck_assert_int_eq(parse_load(&o, NULL, why, why_len), 0);
    fx_case_host h;
    const int rc = fx_load_case(folder, &o.problem, false, &h, why, why_len);
    if (rc == 0)
        fx_host_free(&h);
    else
        ck_assert_ptr_null(h.q); /* nothing is left allocated after a refusal */
    return rc;
}

START_TEST(load_refuses_bad_inputs)
{
    make_folder();
    write_text("problem.txt", fixed_problem);
    uint16_t q[NQ], kv[NKV];
    for (int i = 0; i < NQ; ++i)
        q[i] = 0x3c00; /* fp16 1.0 */
    for (int i = 0; i < NKV; ++i)
        kv[i] = 0xbc00; /* -1.0 */
    write_file("q.bin", q, sizeof q);
    write_file("k.bin", kv, sizeof kv);
    write_file("v.bin", kv, sizeof kv);
    char why[512];
    ck_assert_msg(load_inputs(why, sizeof why) == 0, "%s", why);

    write_file("k.bin", kv, sizeof kv - 2); /* truncated */
    ck_assert_int_eq(load_inputs(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "k.bin has 318 bytes; the problem needs 320"), "%s", why);
    uint16_t longer[NKV + 1] = {0};
    write_file("k.bin", longer, sizeof longer); /* one element too many */
    ck_assert_int_eq(load_inputs(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "k.bin has 322 bytes"), "%s", why);
    write_file("k.bin", kv, sizeof kv);

    q[17] = 0x7e00; /* fp16 NaN */
    write_file("q.bin", q, sizeof q);
    ck_assert_int_eq(load_inputs(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "q.bin: element 17 (bits 0x7e00) is NaN"), "%s", why);
    q[17] = 0xfc00; /* -inf */
    write_file("q.bin", q, sizeof q);
    ck_assert_int_eq(load_inputs(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "element 17 (bits 0xfc00) is infinite"), "%s", why);

    char path[128];
    snprintf(path, sizeof path, "%s/v.bin", folder);
    ck_assert_int_eq(unlink(path), 0);
    q[17] = 0x3c00;
    write_file("q.bin", q, sizeof q);
    ck_assert_int_eq(load_inputs(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "cannot open") && strstr(why, "v.bin"), "%s", why);
}
END_TEST

/* Finite inputs whose logits can pass fp32's range are refused; just inside they pass. */
START_TEST(load_refuses_logits_past_fp32)
{
    make_folder();
    /* bf16 Q and K of 2^63 (0x5f00): |S| ≤ 8 · 2^126 = 2^129, times log2 e > 2^127. */
    write_text("problem.txt", "batch=1\nseqlen_q=1\nseqlen_k=1\nheads_q=1\nheads_kv=1\n"
                              "head_dim=8\ndtype=bf16\ncausal=0\nsoftmax_scale=1\n");
    uint16_t x[8];
    for (int i = 0; i < 8; ++i)
        x[i] = 0x5f00;
    write_file("q.bin", x, sizeof x);
    write_file("k.bin", x, sizeof x);
    write_file("v.bin", x, sizeof x);
    char why[512];
    ck_assert_int_eq(load_inputs(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "past fp32's range (2^127)"), "%s", why);
    for (int i = 0; i < 8; ++i)
        x[i] = 0x5e00; /* 2^61: the bound is 2^125 · log2 e, inside */
    write_file("q.bin", x, sizeof x);
    write_file("k.bin", x, sizeof x);
    ck_assert_msg(load_inputs(why, sizeof why) == 0, "%s", why);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("load");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, load_reads_the_problem);
    tcase_add_test(tc, load_reads_what_save_wrote);
    tcase_add_test(tc, load_refuses_bad_problems);
    tcase_add_test(tc, load_refuses_other_options);
    tcase_add_test(tc, load_refuses_bad_inputs);
    tcase_add_test(tc, load_refuses_logits_past_fp32);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    const int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
