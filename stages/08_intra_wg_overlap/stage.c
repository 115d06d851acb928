/*
 * stage.c — the descriptor of stage 08 (intra-warpgroup overlap: the full FA3 forward): what it can do, how to run it.
 *
 * The kernel and its launcher are in overlap_fwd.cu. This file tells the harness the
 * capabilities and refuses, naming the limit, a problem the launch could not run: a grid
 * dimension past the hardware's, or a tile that needs more shared memory per block than
 * this GPU has.
 */

#include <cuda_runtime_api.h>

#include "fx_stage.h"

/* overlap_fwd.cu (extern "C"). */
cudaError_t fx_overlap_forward(const fx_fwd_args *a);
size_t fx_overlap_fwd_smem_bytes(int head_dim);
int fx_overlap_check_ablation(int head_dim, char *why, size_t why_len);

/* A grid dimension past the hardware's, or a tile past this GPU's shared memory: the
 * launch could not run it, so refuse it here, naming the limit (common/fx_stage.c). */
static int overlap_check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    (void)backward; /* caps.backward is false: the harness refuses --bwd before this */
    if (fx_check_grid_heads_batch(p, "08_intra_wg_overlap", why, why_len) ||
        fx_check_ffma_softmax_scale(p, "08_intra_wg_overlap", why, why_len) ||
        fx_overlap_check_ablation(p->head_dim, why, why_len))
        return 2;
    return fx_check_smem_optin(fx_overlap_fwd_smem_bytes(p->head_dim), "08_intra_wg_overlap",
                               p->head_dim, "Q and two stages of K and V", why, why_len);
}

const fx_stage fx_stage_08_intra_wg_overlap = {
    .id = "08_intra_wg_overlap",
    .summary = "intra-warpgroup overlap, the full FA3 forward: the softmax of S_j runs while "
               "the PV GEMM of block j-1 is still on the tensor cores; masked blocks in their "
               "own loop; O stored by TMA",
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
            .limits =
                "heads_q and batch at most 65535 (grid); "
                "softmax_scale at most 1000; Q, K, V, O with 16-byte aligned "
                "base and strides (TMA); shared memory per block 89, 161 and 193 KiB at "
                "head_dim 64, 128, 256; FX_ABLATION=no-pingpong|no-overlap|neither turns parts "
                "of the schedule off (head_dim 128 only)",
        },
    .workspace_bytes = NULL,
    .check_problem = overlap_check_problem,
    .forward = fx_overlap_forward,
    .backward = NULL,
    .cpu_model = NULL,
};
