/*
 * stage.c — the descriptor of stage 09 (stage 08 persistent, with a tile scheduler): what it
 * can do, how to run it.
 *
 * The kernel and its launcher are in fwd.cu. This file tells the harness the capabilities
 * and refuses, naming the limit, a problem the launch could not run (common/fx_stage.c).
 */
#include "fx_stage.h"

/* fwd.cu (extern "C"). FX_ENTRY(name) is fx_<name>_NN, NN this stage's number (fx_stage.h). */
cudaError_t FX_ENTRY(fwd)(const fx_fwd_args *a);
size_t FX_ENTRY(fwd_smem_bytes)(int head_dim, int head_dim_v);
size_t FX_ENTRY(fwd_workspace_bytes)(const fx_problem *p, bool backward);
int FX_ENTRY(fwd_check_ablation)(const fx_problem *p, char *why, size_t why_len);
int FX_ENTRY(fwd_check_scheduler)(const fx_problem *p, char *why, size_t why_len);

static int check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    (void)backward; /* caps.backward is false: the harness refuses --bwd before this */
    if (FX_ENTRY(fwd_check_ablation)(p, why, why_len) ||
        FX_ENTRY(fwd_check_scheduler)(p, why, why_len))
        return 2;
    /* One CTA per SM loops over the tiles: no grid dimension limits heads_q or batch. */
    return fx_check_smem_optin(FX_ENTRY(fwd_smem_bytes)(p->head_dim, fx_head_dim_v(p)), p->head_dim,
                               "Q and the K/V ring", why, why_len);
}

const fx_stage FX_STAGE_DESCRIPTOR = {
    .id = FX_STAGE_ID_STRING,
    .summary = "stage 08 persistent: one CTA per SM loops over the tiles in a tile "
               "scheduler's order (Q blocks last to first: with the causal mask the longest "
               "first, in sections of heads sized to the L2; without it one (batch, head) at a "
               "time), the next tile's loads overlapping this tile's epilogue; variable-length "
               "batches; head_dim 96 and 192 too, and 192 with head_dim_v 128",
    /* Stage 08's capabilities (FX_HOPPER_FWD_CAPS) with head_dim 96 (on the 128-column tile)
     * and 192, 192 with head_dim_v 128 (FA3's one head_dim_v != head_dim, DeepSeek's shape),
     * and variable-length batches. */
    .caps =
        {
            .head_dims = {64, 96, 128, 192, 256},
            .n_head_dims = 5,
            .head_dim_v_pairs = {{192, 128}},
            .n_head_dim_v_pairs = 1,
            .dtypes = FX_DTYPE_BIT(FX_BF16) | FX_DTYPE_BIT(FX_FP16),
            .causal = true,
            .gqa = true,
            .varlen = true,
            .backward = false,
            .deterministic_backward = false,
            .min_sm = 90,
            .sm90a_only = true,
            .limits = "Q, K, V, O with 16-byte aligned base and strides (TMA); shared memory "
                      "per block 114, 194, 194, 195 and 227 KiB at head_dim 64, 96, 128, 192, "
                      "256, 211 KiB at 192 with head_dim_v 128 (forward only, as every shape "
                      "here); FX_ABLATION=no-pingpong|no-overlap|neither turns parts of the "
                      "schedule off (head_dim 128, fixed-length batches only); "
                      "FX_SCHEDULER=dynamic|static and FX_SCHED_ORDER=l2|lpt|m-fastest choose "
                      "the tile scheduler (default: dynamic, L2 sections when causal, m-fastest "
                      "when not and for a varlen batch, which takes no other order; every order "
                      "takes a (batch, head)'s Q blocks last to first; docs/09)",
        },
    .check_problem = check_problem,
    .workspace_bytes = FX_ENTRY(fwd_workspace_bytes),
    .forward = FX_ENTRY(fwd),
};
