/*
 * test_save.c — --save DIR (fx_save.h): the files hold exactly the bits they were given, in
 * the sizes the problem implies; problem.txt reads back the problem, the softmax scale to the
 * last bit, a varlen batch's offsets and e4m3's recipe and descale blocks; a folder that
 * cannot be made or written is refused before any run with the system's reason.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fx_fp8_model.h" /* fx_fp8_inputs_free */
#include "fx_gpu.h"       /* FX_EXIT_USAGE */
#include "fx_save.h"

static char folder[64];

static void make_folder(void)
{
    strcpy(folder, "/tmp/fx_save_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(folder));
}

/* The bytes of folder/name, their count in *n; the caller frees them. */
static unsigned char *slurp(const char *name, size_t *n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s was not written", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
    ck_assert_int_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void expect_file(const char *name, const void *want, size_t bytes)
{
    size_t n;
    unsigned char *got = slurp(name, &n);
    ck_assert_msg(n == bytes, "%s: %zu bytes, %zu expected", name, n, bytes);
    ck_assert_msg(memcmp(got, want, bytes) == 0, "%s: bytes differ", name);
    free(got);
}

/* The value of `key` in problem.txt, into buf. */
static const char *value_of(const char *key, char *buf, size_t len)
{
    size_t n;
    char *text = (char *)slurp("problem.txt", &n);
    text = realloc(text, n + 1);
    text[n] = '\0';
    buf[0] = '\0';
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        size_t k = strlen(key);
        if (strncmp(line, key, k) == 0 && line[k] == '=')
            snprintf(buf, len, "%s", line + k + 1);
    }
    free(text);
    return buf;
}

/* Arrays of n elements with distinct bit patterns (a NaN and -inf among the floats). */
static uint16_t *bits(size_t n, uint16_t base)
{
    uint16_t *x = malloc(n * sizeof *x + 2);
    for (size_t i = 0; i < n; ++i)
        x[i] = (uint16_t)(base + 7 * i);
    return x;
}

static float *floats(size_t n, float base)
{
    float *x = malloc(n * sizeof *x + 4);
    for (size_t i = 0; i < n; ++i)
        x[i] = base + (float)i / 3.0f;
    if (n > 2) {
        x[0] = -__builtin_inff();
        x[1] = __builtin_nanf("");
    }
    return x;
}

START_TEST(save_fixed_length_with_backward)
{
    make_folder();
    fx_problem p = fx_problem_default();
    p.batch = 2;
    p.seqlen_q = 5;
    p.seqlen_k = 3;
    p.heads_q = 4;
    p.heads_kv = 2;
    p.head_dim = 8;
    p.causal = true;
    p.softmax_scale = 0.1; /* not a binary fraction: problem.txt must give its exact double */
    const size_t nq = fx_numel_q(&p), nkv = fx_numel_kv(&p), nl = fx_numel_lse(&p);
    ck_assert_uint_eq(nq, 2 * 5 * 4 * 8);
    ck_assert_uint_eq(nkv, 2 * 3 * 2 * 8);
    fx_case_host h = {
        .qb = bits(nq, 1), .kb = bits(nkv, 2), .vb = bits(nkv, 3), .dob = bits(nq, 4)};
    fx_outputs o = {.o_h = floats(nq, 1),
                    .lse_h = floats(nl, 2),
                    .dq_h = floats(nq, 3),
                    .dk_h = floats(nkv, 4),
                    .dv_h = floats(nkv, 5)};
    ck_assert_int_eq(fx_save_case(folder, "03_flash2", &p, &h, &o, true), 0);
    expect_file("q.bin", h.qb, nq * 2);
    expect_file("k.bin", h.kb, nkv * 2);
    expect_file("v.bin", h.vb, nkv * 2);
    expect_file("dout.bin", h.dob, nq * 2);
    expect_file("o.f32", o.o_h, nq * 4);
    expect_file("lse.f32", o.lse_h, nl * 4);
    expect_file("dq.f32", o.dq_h, nq * 4);
    expect_file("dk.f32", o.dk_h, nkv * 4);
    expect_file("dv.f32", o.dv_h, nkv * 4);
    char v[256];
    ck_assert_str_eq(value_of("stage", v, sizeof v), "03_flash2");
    ck_assert_str_eq(value_of("heads_kv", v, sizeof v), "2");
    ck_assert_str_eq(value_of("causal", v, sizeof v), "1");
    ck_assert_str_eq(value_of("dtype", v, sizeof v), "bf16");
    ck_assert_str_eq(value_of("backward", v, sizeof v), "1");
    ck_assert_str_eq(value_of("varlen", v, sizeof v), "0");
    ck_assert(strtod(value_of("softmax_scale", v, sizeof v), NULL) == 0.1);
    free(h.qb), free(h.kb), free(h.vb), free(h.dob);
    free(o.o_h), free(o.lse_h), free(o.dq_h), free(o.dk_h), free(o.dv_h);
}
END_TEST

START_TEST(save_varlen_without_backward)
{
    make_folder();
    static const int cu_q[] = {0, 0, 1, 130}, cu_k[] = {0, 5, 6, 206}, used[] = {5, 0, 150};
    fx_problem p = fx_problem_default();
    p.varlen = true;
    p.batch = 3;
    p.seqlen_q = 129;
    p.seqlen_k = 200;
    p.total_q = 130;
    p.total_k = 206;
    p.heads_q = p.heads_kv = 1;
    p.head_dim = 16;
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    p.seqused_k = used;
    const size_t nq = fx_numel_q(&p), nkv = fx_numel_kv(&p), nl = fx_numel_lse(&p);
    ck_assert_uint_eq(nq, 130 * 16);
    ck_assert_uint_eq(nl, 130);
    fx_case_host h = {.qb = bits(nq, 9), .kb = bits(nkv, 8), .vb = bits(nkv, 7)};
    fx_outputs o = {.o_h = floats(nq, 6), .lse_h = floats(nl, 5)};
    ck_assert_int_eq(fx_save_case(folder, "09_persistent", &p, &h, &o, false), 0);
    expect_file("q.bin", h.qb, nq * 2);
    expect_file("o.f32", o.o_h, nq * 4);
    expect_file("lse.f32", o.lse_h, nl * 4);
    char path[128];
    snprintf(path, sizeof path, "%s/dq.f32", folder);
    ck_assert_msg(access(path, F_OK) != 0, "dq.f32 written without a backward");
    char v[256];
    ck_assert_str_eq(value_of("varlen", v, sizeof v), "1");
    ck_assert_str_eq(value_of("total_k", v, sizeof v), "206");
    ck_assert_str_eq(value_of("cu_seqlens_q", v, sizeof v), "0,0,1,130");
    ck_assert_str_eq(value_of("cu_seqlens_k", v, sizeof v), "0,5,6,206");
    ck_assert_str_eq(value_of("seqused_k", v, sizeof v), "5,0,150");
    free(h.qb), free(h.kb), free(h.vb), free(o.o_h), free(o.lse_h);
}
END_TEST

/* head_dim 192 with head_dim_v 128: V, O, dO and dV hold 128 columns, Q and K 192. */
START_TEST(save_head_dim_v)
{
    make_folder();
    fx_problem p = fx_problem_default();
    p.batch = 1;
    p.seqlen_q = 3;
    p.seqlen_k = 2;
    p.heads_q = p.heads_kv = 1;
    p.head_dim = 192;
    p.head_dim_v = 128;
    const size_t nq = fx_numel_q(&p), nv = fx_numel_v(&p), no = fx_numel_o(&p);
    ck_assert_uint_eq(nq, 3 * 192);
    ck_assert_uint_eq(no, 3 * 128);
    ck_assert_uint_eq(nv, 2 * 128);
    fx_case_host h = {.qb = bits(nq, 1), .kb = bits(fx_numel_kv(&p), 2), .vb = bits(nv, 3)};
    fx_outputs o = {.o_h = floats(no, 1), .lse_h = floats(fx_numel_lse(&p), 2)};
    ck_assert_int_eq(fx_save_case(folder, "09_persistent", &p, &h, &o, false), 0);
    expect_file("q.bin", h.qb, nq * 2);
    expect_file("v.bin", h.vb, nv * 2);
    expect_file("o.f32", o.o_h, no * 4);
    char v[256];
    ck_assert_str_eq(value_of("head_dim", v, sizeof v), "192");
    ck_assert_str_eq(value_of("head_dim_v", v, sizeof v), "128");
    free(h.qb), free(h.kb), free(h.vb), free(o.o_h), free(o.lse_h);
}
END_TEST

/* e4m3: the codes (one byte each, V in K's layout whatever fp8_vt), the descales per block,
 * the fp32 inputs where the case has them, and the recipe's keys. */
START_TEST(save_e4m3)
{
    make_folder();
    fx_problem p = fx_problem_default();
    p.dtype = FX_E4M3;
    p.batch = 2;
    p.seqlen_q = 5;
    p.seqlen_k = 7;
    p.heads_q = 2;
    p.heads_kv = 1;
    p.head_dim = 8;
    p.fp8_scaling = FX_FP8_PER_HEAD;
    p.fp8_v_transposed = true;
    fx_case_host h = {0};
    h.fp8.q = fx_fp8_tensor_alloc(2, 5, 2, 8, 4); /* 2 blocks of Q rows */
    h.fp8.k = fx_fp8_tensor_alloc(2, 7, 1, 8, 3); /* 3 of K and V rows */
    h.fp8.v = fx_fp8_tensor_alloc(2, 7, 1, 8, 3);
    fx_fp8_tensor *t[3] = {&h.fp8.q, &h.fp8.k, &h.fp8.v};
    for (int i = 0; i < 3; ++i) {
        for (size_t e = 0; e < fx_fp8_tensor_numel(t[i]); ++e)
            t[i]->codes[e] = (uint8_t)(e * 13 + (size_t)i);
        for (size_t e = 0; e < fx_fp8_tensor_descales(t[i]); ++e)
            t[i]->descale[e] = 0.25f * (float)(e + (size_t)i);
    }
    const size_t nq = fx_numel_q(&p), nkv = fx_numel_kv(&p);
    ck_assert_uint_eq(fx_fp8_tensor_numel(&h.fp8.q), nq);
    ck_assert_uint_eq(fx_fp8_tensor_descales(&h.fp8.q), 2 * 2 * 2);
    ck_assert_uint_eq(fx_fp8_tensor_descales(&h.fp8.k), 2 * 1 * 3);
    fx_outputs o = {.o_h = floats(nq, 1), .lse_h = floats(fx_numel_lse(&p), 2)};
    ck_assert_int_eq(fx_save_case(folder, "10_fp8", &p, &h, &o, false), 0);
    expect_file("q.bin", h.fp8.q.codes, nq);
    expect_file("k.bin", h.fp8.k.codes, nkv);
    expect_file("v.bin", h.fp8.v.codes, nkv);
    expect_file("q_descale.f32", h.fp8.q.descale, 8 * 4);
    expect_file("k_descale.f32", h.fp8.k.descale, 6 * 4);
    expect_file("v_descale.f32", h.fp8.v.descale, 6 * 4);
    expect_file("o.f32", o.o_h, nq * 4);
    char path[128];
    snprintf(path, sizeof path, "%s/q.f32", folder);
    ck_assert_msg(access(path, F_OK) != 0, "q.f32 written without fp32 inputs");
    char v[256];
    ck_assert_str_eq(value_of("dtype", v, sizeof v), "e4m3");
    ck_assert_str_eq(value_of("fp8_scaling", v, sizeof v), "per-head");
    ck_assert_str_eq(value_of("hadamard", v, sizeof v), "0");
    ck_assert_str_eq(value_of("fp8_vt", v, sizeof v), "1");
    ck_assert_str_eq(value_of("fp8_block_m", v, sizeof v), "4");
    ck_assert_str_eq(value_of("fp8_block_n", v, sizeof v), "3");

    /* With the fp32 inputs: q.f32, k.f32, v.f32 beside the codes. */
    h.q = floats(nq, 3);
    h.k = floats(nkv, 4);
    h.v = floats(nkv, 5);
    ck_assert_int_eq(fx_save_case(folder, "10_fp8", &p, &h, &o, false), 0);
    expect_file("q.f32", h.q, nq * 4);
    expect_file("k.f32", h.k, nkv * 4);
    expect_file("v.f32", h.v, nkv * 4);
    free(h.q), free(h.k), free(h.v);
    fx_fp8_inputs_free(&h.fp8);
    free(o.o_h), free(o.lse_h);
}
END_TEST

/* A 16-bit case writes no e4m3 keys. */
START_TEST(save_bf16_has_no_e4m3_keys)
{
    make_folder();
    fx_problem p = fx_problem_default();
    p.batch = p.seqlen_q = p.seqlen_k = p.heads_q = p.heads_kv = 1;
    p.head_dim = 8;
    fx_case_host h = {.qb = bits(8, 1), .kb = bits(8, 2), .vb = bits(8, 3)};
    fx_outputs o = {.o_h = floats(8, 1), .lse_h = floats(1, 2)};
    ck_assert_int_eq(fx_save_case(folder, "03_flash2", &p, &h, &o, false), 0);
    char v[256];
    ck_assert_str_eq(value_of("fp8_block_m", v, sizeof v), "");
    ck_assert_str_eq(value_of("hadamard", v, sizeof v), "");
    free(h.qb), free(h.kb), free(h.vb), free(o.o_h), free(o.lse_h);
}
END_TEST

START_TEST(prepare_refuses_what_cannot_hold_the_files)
{
    make_folder();
    char why[512], path[128];
    snprintf(path, sizeof path, "%s/new", folder);
    ck_assert_int_eq(fx_save_prepare(path, why, sizeof why), 0); /* made */
    ck_assert_int_eq(fx_save_prepare(path, why, sizeof why), 0); /* and taken again */
    struct stat st;
    ck_assert(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    snprintf(path, sizeof path, "%s/no/such", folder);
    ck_assert_int_eq(fx_save_prepare(path, why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "cannot create the folder") && strstr(why, "No such file"), "%s",
                  why);
    snprintf(path, sizeof path, "%s/new/problem.txt", folder); /* a file, not a folder */
    ck_assert_int_eq(fx_save_prepare(path, why, sizeof why), FX_EXIT_USAGE);
    ck_assert_msg(strstr(why, "is not a folder") != NULL, "%s", why);
}
END_TEST

static Suite *save_suite(void)
{
    Suite *s = suite_create("save");
    TCase *t = tcase_create("files");
    tcase_add_test(t, save_fixed_length_with_backward);
    tcase_add_test(t, save_varlen_without_backward);
    tcase_add_test(t, save_head_dim_v);
    tcase_add_test(t, save_e4m3);
    tcase_add_test(t, save_bf16_has_no_e4m3_keys);
    tcase_add_test(t, prepare_refuses_what_cannot_hold_the_files);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(save_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
