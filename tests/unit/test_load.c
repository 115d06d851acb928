/*
 * test_load.c — --load DIR (fx_load.h): what --save writes reads back as the same problem and
 * the same bits, e4m3's codes, descales and fp32 inputs too; every malformed problem.txt or
 * input file is refused (exit 2) with a reason that names the file, the line or the element,
 * before anything runs.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fx_fp8.h"
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

/* A fresh folder whose problem.txt is text: --load must refuse it (exit 2), with a message
 * that starts "--load: " and contains want. i numbers the case in the failure message. */
static void expect_problem_refused(size_t i, const char *text, const char *want)
{
    make_folder();
    write_text("problem.txt", text);
    fx_options o;
    char why[512];
    ck_assert_int_eq(parse_load(&o, NULL, why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, want) != NULL, "case %zu: '%s' does not say '%s'", i, why, want);
    ck_assert_msg(strncmp(why, "--load: ", 8) == 0, "case %zu: '%s'", i, why);
}

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
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
        expect_problem_refused(i, bad[i].text, bad[i].want);
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

/* ---- e4m3 ------------------------------------------------------------------------------ */

/* An e4m3 problem with descale blocks of 2 rows of Q and 4 of K and V (the tiles the tests
 * hand fx_load_fp8_case): Q 1·3·2·8 codes and 1·2·2 descales, K and V 1·5·1·8 codes and
 * 1·1·2 descales. */
static const char *fp8_problem = "batch=1\nseqlen_q=3\nseqlen_k=5\nheads_q=2\nheads_kv=1\n"
                                 "head_dim=8\ndtype=e4m3\ncausal=0\nfp8_scaling=per-block\n"
                                 "hadamard=1\nfp8_vt=1\nfp8_block_m=2\nfp8_block_n=4\n";
static const fx_fp8_tiles fp8_tiles = {2, 4};
enum { FP8_NQ = 3 * 2 * 8, FP8_NKV = 5 * 8, FP8_DQ = 2 * 2, FP8_DKV = 2 };

/* fx_load_fp8_case of the folder with fp8_tiles: its code; h freed. */
static int load_fp8(char *why, size_t why_len)
{
    fx_options o;
    const int parsed = parse_load(&o, NULL, why, why_len);
    ck_assert_msg(parsed == 0, "%s", why);
    fx_case_host h;
    const int rc = fx_load_fp8_case(&o, fp8_tiles, &h, why, why_len);
    if (rc != 0)
        ck_assert_ptr_null(h.fp8.q.codes); /* nothing is left allocated after a refusal */
    fx_host_free(&h);
    return rc;
}

/* Writes a valid e4m3 folder: codes 0x38 (1.0) and 0xb8 (-1.0), descales 0.5, no fp32
 * inputs. */
static void write_fp8_folder(void)
{
    make_folder();
    write_text("problem.txt", fp8_problem);
    uint8_t q[FP8_NQ], kv[FP8_NKV];
    memset(q, 0x38, sizeof q);
    memset(kv, 0xb8, sizeof kv);
    const float dq[FP8_DQ] = {0.5f, 0.5f, 0.5f, 0.5f}, dkv[FP8_DKV] = {0.5f, 0.5f};
    write_file("q.bin", q, sizeof q);
    write_file("k.bin", kv, sizeof kv);
    write_file("v.bin", kv, sizeof kv);
    write_file("q_descale.f32", dq, sizeof dq);
    write_file("k_descale.f32", dkv, sizeof dkv);
    write_file("v_descale.f32", dkv, sizeof dkv);
}

/* fx_save_case of an e4m3 case, then --load: the recipe's keys, the blocks, and every bit of
 * the codes, the descales and the fp32 inputs. */
START_TEST(load_reads_what_save_wrote_e4m3)
{
    make_folder();
    fx_problem p = fx_problem_default();
    p.dtype = FX_E4M3;
    p.batch = 1;
    p.seqlen_q = 3;
    p.seqlen_k = 5;
    p.heads_q = 2;
    p.heads_kv = 1;
    p.head_dim = 8;
    p.softmax_scale = 0.3;
    p.fp8_scaling = FX_FP8_PER_BLOCK;
    p.fp8_hadamard = true;
    p.fp8_v_transposed = true;
    fx_case_host h = {0};
    h.q = malloc(FP8_NQ * sizeof(float));
    h.k = malloc(FP8_NKV * sizeof(float));
    h.v = malloc(FP8_NKV * sizeof(float));
    for (int i = 0; i < FP8_NQ; ++i)
        h.q[i] = (float)(i % 7) - 3.25f;
    for (int i = 0; i < FP8_NKV; ++i) {
        h.k[i] = (float)(i % 5) * 0.75f - 1.0f;
        h.v[i] = (float)(i % 3) + 0.125f;
    }
    const fx_fp8_recipe recipe = {FX_FP8_PER_BLOCK, true, 7, fp8_tiles};
    fx_fp8_prepare(&p, h.q, h.k, h.v, recipe, &h.fp8);
    fx_outputs out = {.o_h = calloc(FP8_NQ, 4), .lse_h = calloc(fx_numel_lse(&p), 4)};
    ck_assert_int_eq(fx_save_case(folder, "10_fp8", &p, &h, &out, false), 0);

    fx_options o;
    char why[512];
    ck_assert_msg(parse_load(&o, NULL, why, sizeof why) == 0, "%s", why);
    const fx_problem *q = &o.problem;
    ck_assert_int_eq(q->dtype, FX_E4M3);
    ck_assert_int_eq(q->fp8_scaling, FX_FP8_PER_BLOCK);
    ck_assert(q->fp8_hadamard && q->fp8_v_transposed);
    ck_assert(q->softmax_scale == 0.3);
    ck_assert_int_eq(o.fp8_blocks.block_m, 2);
    ck_assert_int_eq(o.fp8_blocks.block_n, 4);
    fx_case_host g;
    ck_assert_msg(fx_load_fp8_case(&o, fp8_tiles, &g, why, sizeof why) == 0, "%s", why);
    const fx_fp8_tensor *want[3] = {&h.fp8.q, &h.fp8.k, &h.fp8.v};
    const fx_fp8_tensor *got[3] = {&g.fp8.q, &g.fp8.k, &g.fp8.v};
    for (int t = 0; t < 3; ++t) {
        ck_assert_int_eq(got[t]->block_rows, want[t]->block_rows);
        ck_assert(memcmp(got[t]->codes, want[t]->codes, fx_fp8_tensor_numel(want[t])) == 0);
        ck_assert(memcmp(got[t]->descale, want[t]->descale, fx_fp8_tensor_descales(want[t]) * 4) ==
                  0);
    }
    ck_assert(memcmp(g.q, h.q, FP8_NQ * 4) == 0);
    ck_assert(memcmp(g.k, h.k, FP8_NKV * 4) == 0);
    ck_assert(memcmp(g.v, h.v, FP8_NKV * 4) == 0);
    ck_assert_ptr_null(g.qb); /* e4m3 has no 16-bit patterns */
    fx_host_free(&g);
    fx_host_free(&h);
    free(out.o_h), free(out.lse_h);
}
END_TEST

/* Without q.f32, k.f32, v.f32 the inputs load, and h's fp32 inputs stay NULL. */
START_TEST(load_e4m3_without_fp32_inputs)
{
    write_fp8_folder();
    fx_options o;
    char why[512];
    ck_assert_msg(parse_load(&o, NULL, why, sizeof why) == 0, "%s", why);
    fx_case_host h;
    ck_assert_msg(fx_load_fp8_case(&o, fp8_tiles, &h, why, sizeof why) == 0, "%s", why);
    ck_assert_ptr_null(h.q);
    ck_assert_ptr_null(h.k);
    ck_assert_ptr_null(h.v);
    ck_assert_uint_eq(h.fp8.q.codes[5], 0x38);
    ck_assert(h.fp8.k.descale[1] == 0.5f);
    fx_host_free(&h);
}
END_TEST

/* problem.txt's e4m3 keys: the blocks are e4m3's and e4m3 needs them. */
START_TEST(load_refuses_bad_e4m3_problems)
{
    static const char *const head = "batch=1\nseqlen_q=3\nseqlen_k=5\nheads_q=2\nheads_kv=1\n"
                                    "head_dim=8\ncausal=0\n";
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"dtype=e4m3\nfp8_block_m=2\n", "dtype=e4m3 needs fp8_block_m= and fp8_block_n= lines"},
        {"dtype=bf16\nfp8_block_m=2\nfp8_block_n=4\n",
         "fp8_block_m and fp8_block_n are e4m3's descale blocks: dtype is bf16"},
        {"dtype=e4m3\nfp8_block_m=0\nfp8_block_n=4\n", "fp8_block_m: 0 rows is not a block"},
        {"dtype=e4m3\nfp8_block_m=2\nfp8_block_n=four\n", "fp8_block_n: 'four' is not an integer"},
        {"dtype=e4m3\nfp8_block_m=2\nfp8_block_n=4\nhadamard=2\n",
         "hadamard: '2' is neither 0 nor 1"},
        {"dtype=e4m3\nfp8_block_m=2\nfp8_block_n=4\nfp8_scaling=per-row\n", "--fp8-scaling"},
        {"dtype=fp16\nfp8_vt=1\n", "--fp8-vt needs --dtype e4m3 (got fp16)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        char text[512];
        snprintf(text, sizeof text, "%s%s", head, bad[i].text);
        expect_problem_refused(i, text, bad[i].want);
    }
}
END_TEST

/* Each malformed e4m3 file, and the words its refusal must contain. */
START_TEST(load_refuses_bad_e4m3_inputs)
{
    char why[512];
    write_fp8_folder();
    ck_assert_msg(load_fp8(why, sizeof why) == 0, "%s", why);

    /* Blocks other than the stage's tiles. */
    fx_options o;
    ck_assert_int_eq(parse_load(&o, NULL, why, sizeof why), 0);
    fx_case_host h;
    const fx_fp8_tiles other = {2, 8};
    ck_assert_int_eq(fx_load_fp8_case(&o, other, &h, why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "fp8_block_m=2, fp8_block_n=4: this stage's descales are per 2 "
                              "rows of Q and 8 of K and V at head_dim 8"),
                  "%s", why);

    uint8_t q[FP8_NQ];
    memset(q, 0x38, sizeof q);
    write_file("q.bin", q, sizeof q - 1); /* truncated */
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "q.bin has 47 bytes; the problem needs 48 (48 e4m3 elements of 1 "
                              "byte)"),
                  "%s", why);
    q[9] = 0xff; /* e4m3's NaN (0x7f too) */
    write_file("q.bin", q, sizeof q);
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "q.bin: element 9 (bits 0xff) is NaN"), "%s", why);
    q[9] = 0x38;
    write_file("q.bin", q, sizeof q);

    float dkv[FP8_DKV] = {0.5f, -0.25f}; /* a negative descale */
    write_file("v_descale.f32", dkv, sizeof dkv);
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "v_descale.f32: element 1 is -0.25: a descale is >= 0"), "%s", why);
    dkv[1] = 0x1p125f; /* finite, but 448 times it is not */
    write_file("v_descale.f32", dkv, sizeof dkv);
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "v_descale.f32: element 1 is") && strstr(why, "448"), "%s", why);
    dkv[1] = __builtin_nanf("");
    write_file("v_descale.f32", dkv, sizeof dkv);
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "v_descale.f32: element 1 (bits 0x7fc00000) is NaN"), "%s", why);
    write_file("v_descale.f32", dkv, sizeof dkv - 4); /* one descale short */
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "v_descale.f32 has 4 bytes; the problem needs 8"), "%s", why);
    dkv[1] = 0.5f;
    write_file("v_descale.f32", dkv, sizeof dkv);

    /* Logits past fp32: |Q|, |K| up to 448·2^100, head_dim 8. */
    const float big[FP8_DKV] = {0x1p100f, 0x1p100f};
    write_file("k_descale.f32", big, sizeof big);
    const float big_q[FP8_DQ] = {0x1p100f, 0x1p100f, 0x1p100f, 0x1p100f};
    write_file("q_descale.f32", big_q, sizeof big_q);
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "past fp32's range (2^127)"), "%s", why);
    const float half[FP8_DQ] = {0.5f, 0.5f, 0.5f, 0.5f};
    write_file("q_descale.f32", half, sizeof half);
    write_file("k_descale.f32", half, FP8_DKV * sizeof(float));
    ck_assert_msg(load_fp8(why, sizeof why) == 0, "%s", why);

    /* The fp32 inputs: all three or none, each finite and of its size. */
    float x[FP8_NQ] = {0};
    write_file("q.f32", x, sizeof x);
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "has no k.f32: the fp32 inputs before quantization are q.f32, "
                              "k.f32 and v.f32, all three or none"),
                  "%s", why);
    write_file("k.f32", x, FP8_NKV * sizeof(float));
    write_file("v.f32", x, FP8_NKV * sizeof(float) + 4); /* one element too many */
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "v.f32 has 164 bytes; the problem needs 160 (40 fp32 elements"), "%s",
                  why);
    write_file("v.f32", x, FP8_NKV * sizeof(float));
    ck_assert_msg(load_fp8(why, sizeof why) == 0, "%s", why);
    x[3] = -__builtin_inff();
    write_file("q.f32", x, sizeof x);
    ck_assert_int_eq(load_fp8(why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "q.f32: element 3 (bits 0xff800000) is infinite"), "%s", why);
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
    tcase_add_test(tc, load_reads_what_save_wrote_e4m3);
    tcase_add_test(tc, load_e4m3_without_fp32_inputs);
    tcase_add_test(tc, load_refuses_bad_e4m3_problems);
    tcase_add_test(tc, load_refuses_bad_e4m3_inputs);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    const int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
