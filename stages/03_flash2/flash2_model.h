/*
 * flash2_model.h — stage 03's CPU model and the tile sizes it shares with the kernels.
 *
 * The model (flash2_model.c) runs FlashAttention-2 as the kernels in flash2_fwd.cu and
 * flash2_bwd.cu do — Algorithm 1 forward (Q block outside, K/V blocks inside from the last
 * to the first, online softmax with deferred normalisation, LSE stored) and Algorithm 2
 * backward (preprocess D and LSE_log2, K/V block outside with the Q blocks and query heads
 * of its group inside, dQ accumulated in fp32, postprocess) — on whole host tensors, in
 * fp32, with the dtype roundings the kernels make (P before PV; P and dS before the
 * backward GEMMs; outputs).
 */
#ifndef FX_FLASH2_MODEL_H
#define FX_FLASH2_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One launch's tile: kBlockM query rows by kBlockN keys. */
typedef struct fx_flash2_tiles {
    int block_m; /* kBlockM */
    int block_n; /* kBlockN */
} fx_flash2_tiles;

/* Defined in flash2_bwd.cu next to the backward configurations; the forward's tiles come
 * from fx_flash2_fwd_tiles, next to the forward's in flash2_fwd.cu. head_dim 64, 96, 128
 * or 256; {0, 0} otherwise. */
fx_flash2_tiles fx_flash2_tiles_for(int head_dim, bool backward);

/* fx_cpu_model (fx_stage.h): inputs rounded to p->dtype, outputs rounded as the kernels
 * store them (LSE stays fp32). */
extern const fx_cpu_model fx_flash2_cpu_model;

#ifdef __cplusplus
}
#endif
#endif
