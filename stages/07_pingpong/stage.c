/*
 * stage.c — the descriptor of stage 07 (pingpong): what it can do, how to run it.
 *
 * The kernel and its launcher are in fwd.cu. This file tells the harness the capabilities
 * and refuses, naming the limit, a problem the launch could not run (common/fx_stage.c).
 */
#include "fx_stage.h"

/* fwd.cu (extern "C"). */
cudaError_t fx_fwd_07(const fx_fwd_args *a);
size_t fx_fwd_smem_bytes_07(int head_dim);

static int check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    (void)backward; /* caps.backward is false: the harness refuses --bwd before this */
    return fx_check_hopper_fwd(p, fx_fwd_smem_bytes_07(p->head_dim), why, why_len);
}

const fx_stage fx_stage_07_pingpong = {
    .id = "07_pingpong",
    .summary = "pingpong: the consumer warpgroups take turns at the tensor cores (named "
               "barriers), each turn S of block j and PV of block j-1, so one warpgroup's "
               "softmax runs under another's GEMMs",
    .caps = FX_HOPPER_FWD_CAPS(
        "heads_q and batch at most 65535 (grid); Q, K, V, O with 16-byte aligned base and "
        "strides (TMA); shared memory per block 90, 162 and 194 KiB at head_dim 64, "
        "128, 256"),
    .check_problem = check_problem,
    .forward = fx_fwd_07,
};
