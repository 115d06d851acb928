/*
 * stage.c — the descriptor of stage 07 (pingpong): what it can do, how to run it.
 *
 * The kernel and its launcher are in fwd.cu. This file tells the harness the capabilities
 * and refuses, naming the limit, a problem the launch could not run (common/fx_stage.c).
 */
#include "fx_stage.h"

/* fwd.cu (extern "C"). FX_ENTRY(name) is fx_<name>_NN, NN this stage's number (fx_stage.h). */
cudaError_t FX_ENTRY(fwd)(const fx_fwd_args *a);
size_t FX_ENTRY(fwd_smem_bytes)(int head_dim);

static int check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    (void)backward; /* caps.backward is false: the harness refuses --bwd before this */
    return fx_check_hopper_fwd(p, FX_ENTRY(fwd_smem_bytes)(p->head_dim), why, why_len);
}

const fx_stage FX_STAGE_DESCRIPTOR = {
    .id = FX_STAGE_ID_STRING,
    .summary = "pingpong: consumer warpgroups take turns at the tensor cores (named barriers), "
               "each turn S_j with PV_j-1, so one's softmax runs under another's GEMMs",
    .caps = FX_HOPPER_FWD_CAPS(
        "heads_q and batch at most 65535 (grid); Q, K, V, O with 16-byte aligned base and "
        "strides (TMA); shared memory per block 90, 162 and 194 KiB at head_dim 64, "
        "128, 256"),
    .check_problem = check_problem,
    .forward = FX_ENTRY(fwd),
};
