/*
 * model.h — stage 03's CPU model and the tile sizes it shares with the kernels.
 *
 * The model (model.c) runs FlashAttention-2 as the kernels in fwd.cu and bwd.cu do —
 * Algorithm 1 forward (Q block outside, K/V blocks inside from the last to the first,
 * online softmax with deferred normalisation, LSE stored) and Algorithm 2
 * backward (preprocess D and LSE_log2, K/V block outside with the Q blocks and query heads
 * of its group inside, dQ accumulated in fp32, postprocess) — on whole host tensors, in
 * fp32, with the dtype roundings the kernels make (P before PV; P and dS before the
 * backward GEMMs; outputs).
 */
#ifndef FX_STAGE03_MODEL_H
#define FX_STAGE03_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_softmax.h"
#include "fx_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One launch's tile: kBlockM query rows by kBlockN keys. */
typedef struct fx_tiles_03 {
    int block_m; /* kBlockM */
    int block_n; /* kBlockN */
} fx_tiles_03;

/* Defined in fwd.cu and bwd.cu next to the configurations the kernels are instantiated
 * with. head_dim 64, 96, 128 or 256; {0, 0} otherwise. */
fx_tiles_03 fx_fwd_tiles_03(int head_dim);
fx_tiles_03 fx_bwd_tiles_03(int head_dim);

/* fx_cpu_model (fx_stage.h): inputs rounded to p->dtype, outputs rounded as the kernels
 * store them (LSE stays fp32). */
extern const fx_cpu_model fx_cpu_model_03;

#ifdef __cplusplus
}
#endif
#endif
