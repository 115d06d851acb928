/*
 * test_api.c — the C API of libflash_explorer.so (api/fx_api.h), on the CPU: this program
 * links the shared library alone, as a caller would. The stages are listed with their
 * capabilities; a problem outside them is refused with the line the stage program prints
 * (the same strings tests/CMakeLists.txt's cli_refuses_* tests expect of the programs);
 * and a forward without a GPU returns FX_API_NO_GPU with the program's reason, no crash.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fx_api.h"

#define BF16_FP16 (FX_API_DTYPE_BIT(FX_API_BF16) | FX_API_DTYPE_BIT(FX_API_FP16))

/* What each stage's descriptor declares (stages/NN_name/stage.c; README's stage table). */
typedef struct expected_caps {
    const char *id;
    int head_dims[FX_API_MAX_HEAD_DIMS], n_head_dims, head_dim_multiple, head_dim_max;
    int varlen, backward, sm90a_only, min_sm;
} expected_caps;
static const expected_caps expected[] = {
    {"01_naive", {0}, 0, 8, 256, 0, 1, 0, 80},
    {"02_flash1", {0}, 0, 8, 256, 0, 1, 0, 80},
    {"03_flash2", {64, 96, 128, 256}, 4, 0, 0, 0, 1, 0, 80},
    {"04_tma_mbarrier", {64, 128, 256}, 3, 0, 0, 0, 0, 1, 90},
    {"05_wgmma", {64, 128, 256}, 3, 0, 0, 0, 0, 1, 90},
    {"06_warp_specialized", {64, 128, 256}, 3, 0, 0, 0, 0, 1, 90},
    {"07_pingpong", {64, 128, 256}, 3, 0, 0, 0, 0, 1, 90},
    {"08_intra_wg_overlap", {64, 128, 256}, 3, 0, 0, 0, 0, 1, 90},
    {"09_persistent", {64, 96, 128, 192, 256}, 5, 0, 0, 1, 0, 1, 90},
    {"10_fp8", {64, 128, 256}, 3, 0, 0, 0, 0, 1, 90},
};
#define N_EXPECTED ((int)(sizeof expected / sizeof expected[0]))

/* batch 1, seqlen 128, heads 2, head_dim d, bf16, non-causal, the default scale. */
static fx_api_problem small_problem(int head_dim)
{
    fx_api_problem p = {0};
    p.batch = 1;
    p.seqlen_q = p.seqlen_k = 128;
    p.heads_q = p.heads_kv = 2;
    p.head_dim = head_dim;
    p.dtype = FX_API_BF16;
    return p;
}

/* Contiguous [batch, seqlen, heads, head_dim] strides. */
static fx_api_layout contiguous(const fx_api_problem *p, int seqlen, int heads)
{
    fx_api_layout l = {(int64_t)seqlen * heads * p->head_dim, (int64_t)heads * p->head_dim,
                       p->head_dim};
    return l;
}

/* Forward arguments on made-up, aligned device addresses: every call here is refused
 * before a kernel could touch them (a test of a GPU with real buffers is the gpu label's). */
static fx_api_fwd_args fake_fwd_args(const fx_api_problem *p)
{
    fx_api_fwd_args a = {0};
    a.q = (const void *)(uintptr_t)0x100000;
    a.k = (const void *)(uintptr_t)0x200000;
    a.v = (const void *)(uintptr_t)0x300000;
    a.o = (void *)(uintptr_t)0x400000;
    a.lse = (float *)(uintptr_t)0x500000;
    a.q_layout = a.o_layout = contiguous(p, p->seqlen_q, p->heads_q);
    a.k_layout = a.v_layout = contiguous(p, p->seqlen_k, p->heads_kv);
    return a;
}

static bool have_gpu(void)
{
    int n = 0;
    const bool yes = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    (void)cudaGetLastError();
    return yes;
}

START_TEST(version_is_the_headers)
{
    ck_assert_int_eq(fx_api_version(), FX_API_VERSION);
}
END_TEST

START_TEST(lists_the_ten_stages_in_reading_order)
{
    ck_assert_int_eq(fx_api_stage_count(), N_EXPECTED);
    for (int i = 0; i < N_EXPECTED; ++i)
        ck_assert_str_eq(fx_api_stage_id(i), expected[i].id);
    ck_assert_ptr_null(fx_api_stage_id(-1));
    ck_assert_ptr_null(fx_api_stage_id(N_EXPECTED));
}
END_TEST

START_TEST(caps_are_the_descriptors)
{
    const expected_caps *e = &expected[_i];
    fx_api_caps c;
    char msg[256] = "x";
    ck_assert_int_eq(fx_api_stage_caps(e->id, &c, msg, sizeof msg), FX_API_OK);
    ck_assert_str_eq(msg, "");
    ck_assert_str_eq(c.id, e->id);
    ck_assert_ptr_nonnull(c.summary);
    ck_assert_int_gt((int)strlen(c.summary), 10);
    ck_assert_int_eq(c.n_head_dims, e->n_head_dims);
    for (int i = 0; i < e->n_head_dims; ++i)
        ck_assert_int_eq(c.head_dims[i], e->head_dims[i]);
    if (e->n_head_dims == 0) {
        ck_assert_int_eq(c.head_dim_multiple, e->head_dim_multiple);
        ck_assert_int_eq(c.head_dim_max, e->head_dim_max);
    }
    /* Stage 10 takes e4m3 alone (fx_problem.h's FX_E4M3 = 2; no FX_API_ code yet). */
    ck_assert_uint_eq(c.dtypes, strcmp(e->id, "10_fp8") == 0 ? 1u << 2 : BF16_FP16);
    ck_assert_int_eq(c.causal, 1);
    ck_assert_int_eq(c.gqa, 1);
    ck_assert_int_eq(c.varlen, e->varlen);
    ck_assert_int_eq(c.backward, e->backward);
    ck_assert_int_eq(c.sm90a_only, e->sm90a_only);
    ck_assert_int_eq(c.min_sm, e->min_sm);
    /* head_dim_v != head_dim: stage 09's (192, 128), nobody else's. */
    const bool is09 = strcmp(e->id, "09_persistent") == 0;
    ck_assert_int_eq(c.n_head_dim_v_pairs, is09 ? 1 : 0);
    if (is09) {
        ck_assert_int_eq(c.head_dim_v_pairs[0][0], 192);
        ck_assert_int_eq(c.head_dim_v_pairs[0][1], 128);
    }
}
END_TEST

/* Strides the sizes make impossible: 0 over many rows, and a last element past 2^31 - 1. */
START_TEST(forward_refuses_expanded_and_huge_strides)
{
    fx_api_problem p = small_problem(64);
    fx_api_fwd_args a = fake_fwd_args(&p);
    char msg[512];
    a.k_layout.row_stride = 0;
    ck_assert_int_eq(fx_api_forward("03_flash2", &p, &a, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_03_flash2: K's row_stride is 0 over 128 elements (an "
                          "expanded tensor): the stages take each one in memory of its own");
    a = fake_fwd_args(&p);
    a.q_layout.row_stride = (int64_t)1 << 25; /* 127 rows of it pass 2^31 */
    ck_assert_int_eq(fx_api_forward("03_flash2", &p, &a, msg, sizeof msg), FX_API_USAGE);
    ck_assert_msg(strstr(msg, "Q's last element is at offset") != NULL, "%s", msg);
    p.heads_kv = 1; /* one head: a head stride of 0 is no expansion */
    a = fake_fwd_args(&p);
    a.k_layout.head_stride = a.v_layout.head_stride = 0;
    p.heads_q = 2;
    ck_assert_int_ne(fx_api_forward("03_flash2", &p, &a, msg, sizeof msg), FX_API_USAGE);
}
END_TEST

START_TEST(head_dim_v_is_the_caps_pairs)
{
    fx_api_problem p = small_problem(192);
    p.head_dim_v = 128;
    char msg[256] = "x";
    ck_assert_int_eq(fx_api_check("09_persistent", &p, 0, msg, sizeof msg), FX_API_OK);
    ck_assert_int_eq(fx_api_check("09_persistent", &p, 1, msg, sizeof msg), FX_API_USAGE);
    p = small_problem(128);
    p.head_dim_v = 64;
    ck_assert_int_eq(fx_api_check("08_intra_wg_overlap", &p, 0, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_08_intra_wg_overlap: head_dim_v 64 with head_dim 128 is not "
                          "supported (head_dim_v: head_dim only)");
    p.head_dim_v = 128; /* equal: the same as 0 */
    ck_assert_int_eq(fx_api_check("08_intra_wg_overlap", &p, 0, msg, sizeof msg), FX_API_OK);
}
END_TEST

START_TEST(unknown_stage_is_refused_with_the_list)
{
    fx_api_caps c;
    char msg[512];
    ck_assert_int_eq(fx_api_stage_caps("08_intra", &c, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "flash-explorer: no stage '08_intra' (stages: 01_naive, 02_flash1, "
                          "03_flash2, 04_tma_mbarrier, 05_wgmma, 06_warp_specialized, "
                          "07_pingpong, 08_intra_wg_overlap, 09_persistent, 10_fp8)");
}
END_TEST

START_TEST(a_problem_inside_the_caps_passes)
{
    fx_api_problem p = small_problem(128);
    char msg[256] = "x";
    ck_assert_int_eq(fx_api_check("08_intra_wg_overlap", &p, 0, msg, sizeof msg), FX_API_OK);
    ck_assert_str_eq(msg, "");
    p.causal = 1;
    p.heads_q = 8; /* GQA: 8 query heads over 2 kv heads */
    ck_assert_int_eq(fx_api_check("03_flash2", &p, 1, msg, sizeof msg), FX_API_OK);
}
END_TEST

/* cli_refuses_unsupported_head_dim expects this line of the program. */
START_TEST(bad_head_dim_is_the_programs_message)
{
    fx_api_problem p = small_problem(80);
    char msg[256];
    ck_assert_int_eq(fx_api_check("08_intra_wg_overlap", &p, 0, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(
        msg, "stage_08_intra_wg_overlap: head_dim 80 is not supported (head_dim: 64/128/256)");
}
END_TEST

/* cli_refuses_varlen_without_caps expects this line of the program. */
START_TEST(varlen_without_the_cap_is_the_programs_message)
{
    static const int cu_q[] = {0, 1, 3}, cu_k[] = {0, 1, 3};
    fx_api_problem p = small_problem(128);
    p.batch = 2;
    p.seqlen_q = p.seqlen_k = 2;
    p.varlen = 1;
    p.total_q = p.total_k = 3;
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    char msg[256];
    ck_assert_int_eq(fx_api_check("08_intra_wg_overlap", &p, 0, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_08_intra_wg_overlap: a variable-length batch (--seqlens-q) is not "
                          "supported");
    /* Stage 09 takes it. */
    ck_assert_int_eq(fx_api_check("09_persistent", &p, 0, msg, sizeof msg), FX_API_OK);
}
END_TEST

/* A dtype code that is none of bf16, fp16, e4m3: fx_problem_validate's line (the program's
 * --dtype parser refuses such a name before, with "--dtype: 'fp8' is not one of ..."). */
START_TEST(bad_dtype_is_the_harness_message)
{
    fx_api_problem p = small_problem(64);
    p.dtype = 7;
    char msg[256];
    ck_assert_int_eq(fx_api_check("03_flash2", &p, 0, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_03_flash2: dtype (7) is not bf16, fp16 or e4m3");
}
END_TEST

START_TEST(heads_not_a_multiple_is_the_programs_message)
{
    fx_api_problem p = small_problem(64);
    p.heads_q = 6;
    p.heads_kv = 4;
    char msg[256];
    ck_assert_int_eq(fx_api_check("02_flash1", &p, 0, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_02_flash1: heads_q (6) is not a multiple of heads_kv (4)");
}
END_TEST

START_TEST(backward_of_a_forward_only_stage_is_refused)
{
    fx_api_problem p = small_problem(128);
    char msg[256];
    ck_assert_int_eq(fx_api_check("08_intra_wg_overlap", &p, 1, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_08_intra_wg_overlap: there is no backward");
    fx_api_bwd_args b = {0};
    ck_assert_int_eq(fx_api_backward("08_intra_wg_overlap", &p, &b, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_08_intra_wg_overlap: there is no backward");
}
END_TEST

START_TEST(a_short_message_buffer_is_truncated_not_overrun)
{
    fx_api_problem p = small_problem(80);
    char msg[16];
    memset(msg, '#', sizeof msg);
    ck_assert_int_eq(fx_api_check("08_intra_wg_overlap", &p, 0, msg, 8), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_0");
    ck_assert_int_eq(msg[8], '#');
    ck_assert_int_eq(fx_api_check("08_intra_wg_overlap", &p, 0, NULL, 0), FX_API_USAGE);
}
END_TEST

START_TEST(workspace_bytes_are_the_stages)
{
    fx_api_problem p = small_problem(64);
    size_t bytes = 1;
    char msg[256];
    ck_assert_int_eq(fx_api_workspace_bytes("01_naive", &p, 0, &bytes, msg, sizeof msg), FX_API_OK);
    /* Stage 01 keeps S and P in HBM: at least batch·heads·seqlen_q·seqlen_k floats. */
    ck_assert_uint_ge(bytes, (size_t)1 * 2 * 128 * 128 * 4);
    ck_assert_int_eq(fx_api_workspace_bytes("08_intra_wg_overlap", &p, 0, &bytes, msg, sizeof msg),
                     FX_API_OK);
    ck_assert_uint_eq(bytes, 0);
}
END_TEST

START_TEST(a_stride_off_16_bytes_is_refused)
{
    fx_api_problem p = small_problem(64);
    fx_api_fwd_args a = fake_fwd_args(&p);
    a.k_layout.row_stride = 100; /* 200 bytes */
    char msg[512];
    ck_assert_int_eq(fx_api_forward("05_wgmma", &p, &a, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_05_wgmma: K's row_stride (100 elements) is not a non-negative "
                          "multiple of 16 bytes (8 elements): every stage reads rows as 16-byte "
                          "vectors");
    a = fake_fwd_args(&p);
    a.v = (const void *)(uintptr_t)0x300002;
    ck_assert_int_eq(fx_api_forward("05_wgmma", &p, &a, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_05_wgmma: V at 0x300002 is not 16-byte aligned");
    a = fake_fwd_args(&p);
    a.lse = NULL;
    ck_assert_int_eq(fx_api_forward("05_wgmma", &p, &a, msg, sizeof msg), FX_API_USAGE);
    ck_assert_str_eq(msg, "stage_05_wgmma: LSE is NULL");
}
END_TEST

/* Without a GPU every stage's forward (and backward) returns 77 with the program's reason
 * ("stage_NN: no usable GPU: ..."), and nothing crashes. On a GPU machine: nothing to test
 * here (the made-up buffers would reach a kernel). */
START_TEST(forward_without_a_gpu_is_no_gpu_with_a_message)
{
    if (have_gpu())
        return;
    const char *id = expected[_i].id;
    fx_api_problem p = small_problem(64);
    fx_api_fwd_args a = fake_fwd_args(&p);
    char msg[512] = "";
    if (strcmp(id, "10_fp8") == 0) {
        /* bf16 is outside stage 10's caps, and this interface cannot pass e4m3's descales:
         * a usage error, before the device. */
        ck_assert_int_eq(fx_api_forward(id, &p, &a, msg, sizeof msg), FX_API_USAGE);
        ck_assert_str_eq(msg, "stage_10_fp8: dtype bf16 is not supported");
        return;
    }
    ck_assert_int_eq(fx_api_forward(id, &p, &a, msg, sizeof msg), FX_API_NO_GPU);
    char want[128];
    snprintf(want, sizeof want, "stage_%s: no usable GPU: ", id);
    ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "%s: got '%s'", id, msg);
    if (expected[_i].backward) {
        fx_api_bwd_args b = {0};
        b.q = a.q, b.k = a.k, b.v = a.v, b.o = a.o, b.dout = a.o, b.lse = a.lse;
        b.dq = a.o, b.dk = a.o, b.dv = a.o;
        b.q_layout = b.o_layout = a.q_layout;
        b.k_layout = b.v_layout = a.k_layout;
        msg[0] = '\0';
        ck_assert_int_eq(fx_api_backward(id, &p, &b, msg, sizeof msg), FX_API_NO_GPU);
        ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "%s: got '%s'", id, msg);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("C API (libflash_explorer.so)");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, version_is_the_headers);
    tcase_add_test(tc, lists_the_ten_stages_in_reading_order);
    tcase_add_loop_test(tc, caps_are_the_descriptors, 0, N_EXPECTED);
    tcase_add_test(tc, head_dim_v_is_the_caps_pairs);
    tcase_add_test(tc, forward_refuses_expanded_and_huge_strides);
    tcase_add_test(tc, unknown_stage_is_refused_with_the_list);
    tcase_add_test(tc, a_problem_inside_the_caps_passes);
    tcase_add_test(tc, bad_head_dim_is_the_programs_message);
    tcase_add_test(tc, varlen_without_the_cap_is_the_programs_message);
    tcase_add_test(tc, bad_dtype_is_the_harness_message);
    tcase_add_test(tc, heads_not_a_multiple_is_the_programs_message);
    tcase_add_test(tc, backward_of_a_forward_only_stage_is_refused);
    tcase_add_test(tc, a_short_message_buffer_is_truncated_not_overrun);
    tcase_add_test(tc, workspace_bytes_are_the_stages);
    tcase_add_test(tc, a_stride_off_16_bytes_is_refused);
    tcase_add_loop_test(tc, forward_without_a_gpu_is_no_gpu_with_a_message, 0, N_EXPECTED);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
