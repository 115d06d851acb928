/*
 * stage.c — the descriptor of stage 06 (warp specialization): what it can do, how to run it.
 *
 * The kernel and its launcher are in fwd.cu. This file tells the harness the capabilities
 * and refuses, naming the limit, a problem the launch could not run (common/fx_stage.c).
 */
#include "fx_stage.h"

/* fwd.cu (extern "C"). */
cudaError_t fx_fwd_06(const fx_fwd_args *a);
size_t fx_fwd_smem_bytes_06(int head_dim);

static int check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    (void)backward; /* caps.backward is false: the harness refuses --bwd before this */
    return fx_check_hopper_fwd(p, fx_fwd_smem_bytes_06(p->head_dim), why, why_len);
}

const fx_stage fx_stage_06_warp_specialized = {
    .id = "06_warp_specialized",
    .summary = "warp specialization: a producer warpgroup (one elected lane issues TMA) and "
               "2-3 consumer warpgroups on full/empty mbarrier rings (K and V apart); "
               "setmaxnreg moves registers from the producer (24/32) to the consumers (240/160)",
    .caps = FX_HOPPER_FWD_CAPS(
        "heads_q and batch at most 65535 (grid); Q, K, V, O with 16-byte aligned base and "
        "strides (TMA); shared memory per block 90, 162 and 194 KiB at head_dim 64, "
        "128, 256"),
    .check_problem = check_problem,
    .forward = fx_fwd_06,
};
