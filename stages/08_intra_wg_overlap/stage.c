/*
 * stage.c — the descriptor of stage 08 (intra-warpgroup overlap: the full FA3 forward): what it can do, how to run it.
 *
 * The kernel and its launcher are in overlap_fwd.cu. This file tells the harness the
 * capabilities and refuses, naming the limit, a problem the launch could not run: a grid
 * dimension past the hardware's, or a tile that needs more shared memory per block than
 * this GPU has.
 */
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "fx_stage.h"

/* overlap_fwd.cu (extern "C"). */
cudaError_t fx_overlap_forward(const fx_fwd_args *a);
size_t fx_overlap_fwd_smem_bytes(int head_dim);

/* The grid is (query blocks, heads_q, batch); gridDim.y and gridDim.z stop at 65535. */
#define OVERLAP_MAX_GRID_YZ 65535

static int overlap_check_problem(const fx_problem *p, bool backward, char *why, size_t why_len)
{
    (void)backward; /* the caps say there is no backward: the harness refuses it first */
    if (p->heads_q > OVERLAP_MAX_GRID_YZ || p->batch > OVERLAP_MAX_GRID_YZ) {
        snprintf(why, why_len,
                 "08_intra_wg_overlap runs one CTA per (query block, head, batch): heads_q (%d) and batch "
                 "(%d) must each be at most %d (gridDim.y/z)",
                 p->heads_q, p->batch, OVERLAP_MAX_GRID_YZ);
        return 2;
    }
    int device = 0, smem_optin = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess) {
        (void)cudaGetLastError(); /* no device: fx_device_open reports it (exit 77) */
        return 0;
    }
    const size_t needed = fx_overlap_fwd_smem_bytes(p->head_dim);
    if (needed > (size_t)smem_optin) {
        snprintf(why, why_len,
                 "08_intra_wg_overlap at head_dim %d keeps Q and two stages of K and V in shared memory: "
                 "%zu bytes per block, this GPU allows %d",
                 p->head_dim, needed, smem_optin);
        return 2;
    }
    return 0;
}

const fx_stage fx_stage_08_intra_wg_overlap = {
    .id = "08_intra_wg_overlap",
    .summary = "intra-warpgroup overlap, the full FA3 forward: the softmax of S_j runs while "
               "the PV GEMM of block j-1 is still on the tensor cores; masked blocks in their "
               "own loop; O stored by TMA",
    .caps = {
        .head_dims = {64, 128, 256}, /* whole 64-column slabs: one TMA box and wgmma atom each */
        .n_head_dims = 3,
        .dtypes = FX_DTYPE_BIT(FX_BF16) | FX_DTYPE_BIT(FX_FP16),
        .causal = true,
        .gqa = true,
        .backward = false, /* the Hopper backward is stage 11; 03 has the FA2 one */
        .deterministic_backward = false,
        .min_sm = 90,
        .sm90a_only = true, /* wgmma exists only on sm_90a */
        .limits = "heads_q and batch at most 65535 (grid); Q, K, V with 16-byte aligned base "
                  "and strides (TMA); FX_ABLATION=no-pingpong|no-overlap|neither (head_dim 128) turns parts of the schedule off; shared memory per block 89, 161 and 193 KiB at head_dim "
                  "64, 128, 256",
    },
    .workspace_bytes = NULL,
    .check_problem = overlap_check_problem,
    .forward = fx_overlap_forward,
    .backward = NULL,
    .cpu_model = NULL,
};
