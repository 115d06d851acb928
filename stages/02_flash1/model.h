/*
 * model.h — stage 02's CPU model and the tile sizes it shares with the kernels.
 *
 * The model (model.c) runs FlashAttention-1 exactly as the kernels in fwd.cu and bwd.cu
 * do — Algorithm 1 forward, Algorithm 4 backward (Dao et al. 2022), the same loop
 * order (K/V blocks outside, Q blocks inside), the same tile sizes, fp32 arithmetic —
 * on whole host tensors, so every step of the GPU algorithm can be followed in a
 * debugger and checked against the fp64 reference without a GPU.
 */
#ifndef FX_STAGE02_MODEL_H
#define FX_STAGE02_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tiles one launch uses for head_dim: B_r query rows by B_c keys, and the
 * head_dim bucket the kernel was compiled for (head_dim rounded up to it). */
typedef struct fx_tiles_02 {
    int head_dim_max; /* 64, 128, 192 or 256                   */
    int block_m;      /* B_r: query rows of one Q_i block       */
    int block_n;      /* B_c: keys of one K_j, V_j block        */
} fx_tiles_02;

/* Defined in fwd.cu and bwd.cu from the same constants the kernels are instantiated with,
 * so the model can never run other tiles than the kernels. head_dim in [8, 256]. */
fx_tiles_02 fx_fwd_tiles_02(int head_dim);
fx_tiles_02 fx_bwd_tiles_02(int head_dim);

#ifdef __CUDACC__
#define FX_MODEL_HD __host__ __device__
#else
#define FX_MODEL_HD
#endif

/* The causal skip, shared by the kernels (fwd.cu, bwd.cu) and the model: for the K/V
 * block starting at key0, rows below key0 − causal_offset (causal_offset = seqlen_k −
 * seqlen_q; row i sees key j iff j <= i + causal_offset, bottom-right) see none of its
 * keys. Returns the first Q block of block_m rows with a row that does. Key blocks are never
 * skipped: the last row sees every key. */
static inline FX_MODEL_HD int fx_m_block_min_02(int key0, int causal_offset, int block_m)
{
    const int first_row = key0 - causal_offset;
    return first_row <= 0 ? 0 : first_row / block_m;
}

/* The model itself: fx_cpu_model (fx_stage.h) — forward and backward, inputs already
 * rounded to p->dtype, outputs rounded to p->dtype as the kernels store them
 * (LSE stays fp32). */
extern const fx_cpu_model fx_cpu_model_02;

#ifdef __cplusplus
}
#endif
#endif
