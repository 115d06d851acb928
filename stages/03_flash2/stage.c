/*
 * stage.c — the descriptor of stage 03 (FlashAttention-2): what it can do, how to run it.
 *
 * The forward's kernels and launcher are in fwd.cu, the backward's in bwd.cu, the CPU
 * model in model.c. This file tells the harness the capabilities and refuses, naming the
 * limit, a problem the launch itself could not run (a grid dimension past the hardware's,
 * or a tile that needs more shared memory per block than this GPU has) and a backward
 * whose softmax_scale is past BWD_MAX_SCALE.
 */
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "model.h"
#include "fx_stage.h"

/* fwd.cu and bwd.cu (extern "C"); each launcher returns the launch error
 * (cudaGetLastError) itself. */
size_t fx_fwd_smem_bytes_03(int head_dim);
cudaError_t fx_fwd_03(const fx_fwd_args *a);
size_t fx_bwd_workspace_bytes_03(const fx_problem *p);
size_t fx_bwd_smem_bytes_03(int head_dim);
cudaError_t fx_bwd_03(const fx_bwd_args *a);

/* The forward needs no workspace; the backward an fp32 dQaccum and the padded fp32
 * LSE_log2 and D (bwd.cu). */
static size_t workspace_bytes(const fx_problem *p, bool backward)
{
    return backward ? fx_bwd_workspace_bytes_03(p) : 0;
}

/* The largest softmax_scale the backward takes. In a near-one-hot row (large scores times
 * the scale) dS = P∘(dP − D) nearly cancels, and the forward's rounding in O, which D =
 * rowsum(dO∘O) carries, and the fp32 LSE from which P is recomputed leave dQ and dK far from
 * their near-zero exact values. 8 lies below the scale at which the stage fails and below
 * the one past which the check can no longer tell its error from the standard-attention
 * baseline's (the measurements and their commands: docs/03_flash2.md, "Why the backward's
 * limit is 8"). It is not a promise for every input (fp16 large logits still miss the bound
 * at 8: "A known limit remains" there; the help's limits say so); the default scale is
 * 1/sqrt(head_dim). Exercises 4 and 5 of docs/03_flash2.md try two ways past it. */
#define BWD_MAX_SCALE 8.0

/* Refuses, naming the limit: a scale past the backward's limit, a grid past 65535 heads or
 * batches, a tile past this GPU's shared memory. */
static int check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    if (backward && p->softmax_scale > BWD_MAX_SCALE) {
        snprintf(
            why, why_len,
            "the backward takes softmax_scale up to %g (got %g): it folds the scale "
            "into one fp32 FFMA, and at larger |S|·scale the rounding of P breaks dS = P(dP - D)",
            BWD_MAX_SCALE, p->softmax_scale);
        return 2;
    }
    if (fx_check_grid_heads_batch(p, why, why_len))
        return 2;
    int rc = fx_check_smem_optin(fx_fwd_smem_bytes_03(p->head_dim), p->head_dim,
                                 "Q and two stages of K and V", why, why_len);
    if (rc != 0)
        return rc;
    if (backward)
        return fx_check_smem_optin(fx_bwd_smem_bytes_03(p->head_dim), p->head_dim,
                                   "the backward's K, V, two stages of Q and dO, P and dS", why,
                                   why_len);
    return 0;
}

const fx_stage fx_stage_03_flash2 = {
    .id = "03_flash2",
    .summary = "FlashAttention-2: one CTA per Q block with the K/V loop inside, split-Q warps, "
               "deferred 1/l, LSE; mma.sync + ldmatrix + cp.async; causal early exit; KV-parallel "
               "backward with dQ by fp32 atomics",
    .caps =
        {
            .head_dims = {64, 96, 128, 256}, /* one tile configuration per head_dim */
            .n_head_dims = 4,
            .dtypes = FX_DTYPE_BIT(FX_BF16) | FX_DTYPE_BIT(FX_FP16),
            .causal = true,
            .gqa = true,
            .backward = true,
            .deterministic_backward = false, /* dQ accumulates by fp32 atomics across CTAs */
            .min_sm = 80,
            .sm90a_only = false,
            .limits =
                "heads_q and batch at most 65535 (grid); "
                "softmax_scale at most 8 for the backward; head_dim 256 needs 192 KiB of "
                "shared memory per block (Hopper), head_dim 96 and 128 need 96 and 64 KiB; the "
                "backward needs 162, 113, 161 and 139 KiB at head_dim 64, 96, 128, 256 "
                "(A100 and Hopper); the backward misses the pass rule from logits "
                "(softmax_scale·S in magnitude) of ~1e4 in fp16 and ~1e5 in bf16 and gives "
                "inf and NaN gradients from ~1e9: it recomputes P's exponent from LSE·log2e, "
                "rounded apart from the forward's (docs/03_flash2.md, large logits)",
        },
    .workspace_bytes = workspace_bytes,
    .check_problem = check_problem,
    .forward = fx_fwd_03,
    .backward = fx_bwd_03,
    .cpu_model = &fx_cpu_model_03,
};
