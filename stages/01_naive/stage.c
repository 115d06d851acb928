/*
 * stage.c — the descriptor of stage 01 (standard attention, S and P in HBM): what it can
 * do, how to run it.
 *
 * The forward's kernels and launcher are in fwd.cu, the backward's in bwd.cu. This file
 * tells the harness the capabilities, how much device memory the kernels need (the
 * workspace holding S and P), and refuses a problem whose workspace does not fit on the
 * device.
 */
#include <stdio.h>

#include "fx_stage.h"

/* fwd.cu and bwd.cu (extern "C"); each launcher returns the launch error
 * (cudaGetLastError) itself. */
size_t fx_fwd_workspace_bytes_01(const fx_problem *p);
cudaError_t fx_fwd_01(const fx_fwd_args *a);
size_t fx_bwd_workspace_bytes_01(const fx_problem *p);
cudaError_t fx_bwd_01(const fx_bwd_args *a);

/* The forward's S and P, or the backward's S, P (then dS), dP and D (traits.cuh). */
static size_t workspace_bytes(const fx_problem *p, bool backward)
{
    return backward ? fx_bwd_workspace_bytes_01(p) : fx_fwd_workspace_bytes_01(p);
}

/* S and P grow as seqlen_q·seqlen_k: refuse, naming the bytes, rather than fail in
 * cudaMalloc or run out of memory halfway. */
static int check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    const size_t needed = workspace_bytes(p, backward);
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
        /* No device to ask: opening the device reports that (exit 77) on its own. */
        (void)cudaGetLastError();
        return 0;
    }
    if (needed > free_bytes) {
        snprintf(why, why_len,
                 "S (fp32) and P (%s) of every (batch, head) stay in device memory: "
                 "the %s needs %zu bytes of workspace, the device has %zu bytes free",
                 fx_dtype_name(p->dtype), backward ? "backward" : "forward", needed, free_bytes);
        return 2;
    }
    return 0;
}

const fx_stage fx_stage_01_naive = {
    .id = "01_naive",
    .summary = "S = QK^T, softmax, O = PV as three kernels; S and P in HBM",
    .caps =
        {
            .n_head_dims = 0, /* any multiple of 8 up to 256: head_dim is a runtime loop */
            .head_dim_multiple = 8,
            .head_dim_max = 256,
            .dtypes = FX_DTYPE_BIT(FX_BF16) | FX_DTYPE_BIT(FX_FP16),
            .causal = true,
            .gqa = true,
            .backward = true,
            .deterministic_backward = true, /* no atomics: GQA sums loop over the group */
            .min_sm = 80,
            .sm90a_only = false,
            .limits = "S (fp32) and P (dtype) of every (batch, head) live in device memory: "
                      "refuses when they do not fit",
        },
    .workspace_bytes = workspace_bytes,
    .check_problem = check_problem,
    .forward = fx_fwd_01,
    .backward = fx_bwd_01,
    .cpu_model = NULL,
};
