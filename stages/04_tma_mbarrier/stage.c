/*
 * stage.c — the descriptor of stage 04 (stage 03's forward with TMA and mbarriers): what it
 * can do, how to run it.
 *
 * The kernel and its launcher are in fwd.cu. This file tells the harness the capabilities
 * and refuses, naming the limit, a problem the launch could not run (common/fx_stage.c).
 * There is no backward (stage 03's checks it) and no CPU model (the algorithm is stage 03's,
 * whose model is stages/03_flash2/model.c).
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
    .summary = "stage 03's forward with its data movement on TMA: Q, K, V loaded by "
               "cp.async.bulk.tensor into 128B-swizzled smem, completing on mbarriers "
               "(expect_tx, parity waits) in a two-stage ring; O stored by TMA",
    .caps = FX_HOPPER_FWD_CAPS(
        "heads_q and batch at most 65535 (grid); head_dim 64, 128, 256 only: with the "
        "128-byte swizzle a TMA box row is at most 64 elements, and a row of 96 is not whole "
        "64-column boxes (docs/04_tma_mbarrier.md, exercises); shared memory per block 50, 66 "
        "and 194 KiB at head_dim 64, 128, 256 (Hopper); strides multiples of 16 bytes (tensor "
        "maps); no backward (stage 03's)"),
    .check_problem = check_problem,
    .forward = FX_ENTRY(fwd),
};
