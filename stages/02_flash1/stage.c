/*
 * stage.c — the descriptor of stage 02 (FlashAttention-1): what it can do, how to run it.
 *
 * The forward's kernels and launcher are in fwd.cu, the backward's in bwd.cu, the CPU
 * model in model.c.
 */
#include <cuda_runtime_api.h>

#include "model.h"
#include "fx_stage.h"

/* fwd.cu and bwd.cu (extern "C"); each launcher returns the launch error
 * (cudaGetLastError) itself. */
size_t fx_fwd_workspace_bytes_02(const fx_problem *p);
/* Forward: the main kernel (Algorithm 1) and the epilogue (O to the dtype, LSE). */
cudaError_t fx_fwd_02(const fx_fwd_args *a);
size_t fx_bwd_workspace_bytes_02(const fx_problem *p);
/* Backward: the main kernel (Algorithm 4) and the dQ conversion. */
cudaError_t fx_bwd_02(const fx_bwd_args *a);

/* The forward's fp32 O, m and ℓ, or the backward's fp32 dQ. */
static size_t workspace_bytes(const fx_problem *p, bool backward)
{
    return backward ? fx_bwd_workspace_bytes_02(p) : fx_fwd_workspace_bytes_02(p);
}

const fx_stage fx_stage_02_flash1 = {
    .id = "02_flash1",
    .summary = "FlashAttention-1: tiles + online softmax, K/V-block outer loop, "
               "O/m/l round trips through HBM, fp32 CUDA cores; backward by recomputation",
    .caps =
        {
            .n_head_dims = 0, /* any multiple of 8 up to 256 (buckets 64/128/192/256) */
            .head_dim_multiple = 8,
            .head_dim_max = 256,
            .dtypes = FX_DTYPE_BIT(FX_BF16) | FX_DTYPE_BIT(FX_FP16),
            .causal = true,
            .gqa = true,
            .backward = true,
            .deterministic_backward = true, /* no atomics: GQA sums loop over the group */
            .min_sm = 80,
            .sm90a_only = false,
            .limits = "one thread block per (batch, head): batch*heads below the SM count "
                      "leaves SMs idle; 96 KiB shared memory per block; tensors 16-byte aligned "
                      "with strides in multiples of 8 elements; fp16 at logits (softmax_scale·S in "
                      "magnitude) of ~1e4 can miss the pass rule, forward and backward: its "
                      "fp32 sums run in sequence (docs/02_flash1.md, large logits)",
        },
    .workspace_bytes = workspace_bytes,
    .check_problem = NULL,
    .forward = fx_fwd_02,
    .backward = fx_bwd_02,
    .cpu_model = &fx_cpu_model_02,
};
