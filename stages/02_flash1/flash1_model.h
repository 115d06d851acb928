/*
 * flash1_model.h — stage 02's CPU model and the tile sizes it shares with the kernels.
 *
 * The model (flash1_model.c) runs FlashAttention-1 exactly as the kernels in flash1.cu
 * do — Algorithm 1 forward, Algorithm 4 backward (Dao et al. 2022), the same loop
 * order (K/V blocks outside, Q blocks inside), the same tile sizes, fp32 arithmetic —
 * on whole host tensors, so every step of the GPU algorithm can be followed in a
 * debugger and checked against the fp64 reference without a GPU.
 */
#ifndef FX_FLASH1_MODEL_H
#define FX_FLASH1_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tiles one launch uses for head_dim: B_r query rows by B_c keys, and the
 * head_dim bucket the kernel was compiled for (head_dim rounded up to it). */
typedef struct fx_flash1_tiles {
    int head_dim_max; /* 64, 128, 192 or 256                   */
    int block_m;      /* B_r: query rows of one Q_i block       */
    int block_n;      /* B_c: keys of one K_j, V_j block        */
} fx_flash1_tiles;

/* Defined in flash1.cu from the same constants the kernels are instantiated with,
 * so the model can never run other tiles than the kernels. head_dim in [8, 256]. */
fx_flash1_tiles fx_flash1_tiles_for(int head_dim, bool backward);

#ifdef __CUDACC__
#define FX_FLASH1_HD __host__ __device__
#else
#define FX_FLASH1_HD
#endif

/* The backward's causal skip, shared by the kernel (flash1.cu) and the model: for the K/V
 * block starting at key0, rows below key0 − causal_offset (causal_offset = seqlen_k −
 * seqlen_q; row i sees key j iff j <= i + causal_offset, bottom-right) see none of its
 * keys. Returns the first Q block of block_m rows with a row that does. Key blocks are never
 * skipped: the last row sees every key. */
static inline FX_FLASH1_HD int fx_flash1_first_visible_q_block(int key0, int causal_offset,
                                                               int block_m)
{
    const int first_row = key0 - causal_offset;
    return first_row <= 0 ? 0 : first_row / block_m;
}

/* The model itself: fx_cpu_model (fx_stage.h) — forward and backward, inputs already
 * rounded to p->dtype, outputs rounded to p->dtype as the kernels store them
 * (LSE stays fp32). */
extern const fx_cpu_model fx_flash1_cpu_model;

#ifdef __cplusplus
}
#endif
#endif
