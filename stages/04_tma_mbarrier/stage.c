/*
 * stage.c — the descriptor of stage 04 (stage 03's forward with TMA and mbarriers): what
 * it can do, how to run it.
 *
 * The kernel and its launcher are in tma_fwd.cu. This file tells the harness the
 * capabilities and refuses, naming the limit, a problem the launch itself could not run:
 * a grid dimension past the hardware's, a scale past the FFMA softmax's limit, or a tile
 * that needs more shared memory per block than this GPU has (exit 77). There is no
 * backward (stage 03's checks it) and no CPU model (the algorithm is stage 03's, whose
 * model is flash2_model.c).
 */
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "fx_stage.h"

/* tma_fwd.cu (extern "C"). */
cudaError_t fx_stage04_forward(const fx_fwd_args *a);
size_t fx_stage04_fwd_smem_bytes(int head_dim);

static int tma_check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    (void)backward; /* caps.backward is false: the harness refuses --bwd before this */
    if (fx_check_grid_heads_batch(p, "04_tma_mbarrier", why, why_len) ||
        fx_check_ffma_softmax_scale(p, "04_tma_mbarrier", why, why_len))
        return 2;
    return fx_check_smem_optin(fx_stage04_fwd_smem_bytes(p->head_dim), "04_tma_mbarrier",
                               p->head_dim, "Q and its K/V ring", why, why_len);
}

const fx_stage fx_stage_04_tma_mbarrier = {
    .id = "04_tma_mbarrier",
    .summary = "stage 03's forward with its data movement on TMA: Q, K, V loaded by "
               "cp.async.bulk.tensor into 128B-swizzled smem, completing on mbarriers "
               "(expect_tx, parity waits) in a two-stage ring; O stored by TMA",
    .caps =
        {
            .head_dims = {64, 128, 256}, /* one tile configuration per head_dim */
            .n_head_dims = 3,
            .dtypes = FX_DTYPE_BIT(FX_BF16) | FX_DTYPE_BIT(FX_FP16),
            .causal = true,
            .gqa = true,
            .backward = false,
            .deterministic_backward = false,
            .min_sm = 90,
            .sm90a_only = true,
            .limits =
                "heads_q and batch at most 65535 (grid); "
                "softmax_scale at most 1000; head_dim 64, 128, 256 only: with the "
                "128-byte swizzle a TMA box row is at most 64 elements, and a row of 96 is not "
                "whole 64-column boxes (docs/04_tma_mbarrier.md, exercises); shared memory "
                "per block 50, 66 and 194 KiB at head_dim 64, 128, 256 (Hopper); strides "
                "multiples of 16 bytes (tensor maps); no backward (stage 03's)",
        },
    .workspace_bytes = NULL,
    .check_problem = tma_check_problem,
    .forward = fx_stage04_forward,
    .backward = NULL,
    .cpu_model = NULL,
};
