/*
 * stage.c — the descriptor of stage 05 (wgmma): what it can do, how to run it.
 *
 * The kernel and its launcher are in wgmma_fwd.cu. This file tells the harness the
 * capabilities and refuses, naming the limit, a problem the launch could not run: a grid
 * dimension past the hardware's, or a tile that needs more shared memory per block than
 * this GPU has.
 */

#include <cuda_runtime_api.h>

#include "fx_stage.h"

/* wgmma_fwd.cu (extern "C"). */
cudaError_t fx_wgmma_forward(const fx_fwd_args *a);
size_t fx_wgmma_fwd_smem_bytes(int head_dim);

/* A grid dimension past the hardware's, or a tile past this GPU's shared memory: the
 * launch could not run it, so refuse it here, naming the limit (common/fx_stage.c). */
static int wgmma_check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    (void)backward; /* caps.backward is false: the harness refuses --bwd before this */
    if (fx_check_grid_heads_batch(p, "05_wgmma", why, why_len) ||
        fx_check_ffma_softmax_scale(p, "05_wgmma", why, why_len))
        return 2;
    return fx_check_smem_optin(fx_wgmma_fwd_smem_bytes(p->head_dim), "05_wgmma", p->head_dim,
                               "Q and two stages of K and V", why, why_len);
}

const fx_stage fx_stage_05_wgmma = {
    .id = "05_wgmma",
    .summary = "Hopper tensor cores: S = QK^T as SS wgmma from the TMA-written swizzled tiles, "
               "O += PV as RS wgmma with P in registers; 2-3 consumer warpgroups, thread 0 "
               "issues TMA into a 2-stage full/empty mbarrier ring",
    .caps =
        {
            .head_dims = {64, 128,
                          256}, /* whole 64-column slabs: one TMA box and wgmma atom each */
            .n_head_dims = 3,
            .dtypes = FX_DTYPE_BIT(FX_BF16) | FX_DTYPE_BIT(FX_FP16),
            .causal = true,
            .gqa = true,
            .backward = false, /* the Hopper backward is stage 11; 03 has the FA2 one */
            .deterministic_backward = false,
            .min_sm = 90,
            .sm90a_only = true, /* wgmma exists only on sm_90a */
            .limits = "heads_q and batch at most 65535 (grid); "
                      "softmax_scale at most 1000; Q, K, V with 16-byte aligned base "
                      "and strides (TMA); shared memory per block 89, 161 and 193 KiB at head_dim "
                      "64, 128, 256",
        },
    .workspace_bytes = NULL,
    .check_problem = wgmma_check_problem,
    .forward = fx_wgmma_forward,
    .backward = NULL,
    .cpu_model = NULL,
};
