/*
 * stage.c — the descriptor of stage 10 (the FP8 e4m3 forward): what it can do, how to run it.
 *
 * The kernel and its launcher are in fwd.cu. This file tells the harness the capabilities
 * and refuses, naming the limit, a problem the launch could not run (common/fx_stage.c).
 * Its cases run through common/fx_fp8_case.c (quantization, both references, the CPU
 * model, stage 08 on the dequantized inputs).
 */
#include <stdio.h>

#include "fx_stage.h"

/* fwd.cu (extern "C"). FX_ENTRY(name) is fx_<name>_NN, NN this stage's number (fx_stage.h). */
cudaError_t FX_ENTRY(fwd)(const fx_fwd_args *a);
size_t FX_ENTRY(fwd_smem_bytes)(int head_dim, bool v_transposed);
fx_fp8_tiles FX_ENTRY(fwd_tiles)(int head_dim);
int FX_ENTRY(self_test)(void);

/* TMA reads Vᵀ [batch, heads_kv, head_dim, seqlen_k] (--fp8-vt) with a row stride of
 * seqlen_k bytes, which must be a multiple of 16 (a TMA global stride rule). Row-major V, the
 * default, has K's strides: head_dim·heads_kv bytes per key, a multiple of 16 at every
 * head_dim the stage builds, so any seqlen_k goes. */
#define FP8_VT_SEQLEN_K_MULTIPLE 16

static int check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    (void)backward; /* caps.backward is false: the harness refuses --bwd before this */
    if (p->fp8_v_transposed && p->seqlen_k % FP8_VT_SEQLEN_K_MULTIPLE != 0) {
        snprintf(why, why_len,
                 "seqlen_k (%d) must be a multiple of %d with --fp8-vt (the TMA row stride of "
                 "V transposed is seqlen_k bytes)",
                 p->seqlen_k, FP8_VT_SEQLEN_K_MULTIPLE);
        return 2;
    }
    return fx_check_hopper_fwd(p, FX_ENTRY(fwd_smem_bytes)(p->head_dim, p->fp8_v_transposed), why,
                               why_len);
}

const fx_stage FX_STAGE_DESCRIPTOR = {
    .id = FX_STAGE_ID_STRING,
    .summary = "the FP8 (e4m3) forward: k32 wgmmas at twice the 16-bit rate, descales per "
               "tensor, head or block, the max offset, P in e4m3 in the order Vᵀ expects, V "
               "transposed in shared memory (ldmatrix.trans, prmt, stmatrix) or given as Vᵀ",
    .caps =
        {
            .head_dims = {64, 128, 256},
            .n_head_dims = 3,
            .dtypes = FX_DTYPE_BIT(FX_E4M3),
            .causal = true,
            .gqa = true,
            .varlen = false,
            .backward = false,
            .deterministic_backward = false,
            .min_sm = 90,
            .sm90a_only = true,
            .limits = "V row-major (transposed in the kernel) or given transposed "
                      "(--fp8-vt, then seqlen_k a multiple of 16); heads_q and batch at most "
                      "65535 (grid); O bf16; e4m3 inputs are quantized with descale amax/448, "
                      "so none saturates (cvt.rn.satfinite would clamp at 448); logits of "
                      "|S·scale·log2 e| >= 2^24 are outside its range (no exact path)",
        },
    .check_problem = check_problem,
    .forward = FX_ENTRY(fwd),
    .fp8_tiles = FX_ENTRY(fwd_tiles),
    .self_test = FX_ENTRY(self_test),
};
