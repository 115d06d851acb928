/*
 * fx_table3.h — the FA3 paper's accuracy experiment (Shah et al., arXiv:2407.08608, §4.3,
 * Table 3) on the CPU: O's RMSE against fp64 on the outlier distribution, for fp16 attention
 * and for the e4m3 forward's model (common/fx_fp8_model.h) under each way of preparing its
 * inputs. Shared by the unit test tests/unit/test_fp8_table3.c and the program
 * tests/fp8/fp8_table3.c, which prints the table for any shape and seeds.
 *
 * Inputs: Q, K, V drawn by fx_draw.h from FX_DIST_OUTLIERS, N(0,1) + N(0,100)·Bernoulli(0.001)
 * with N(0,100) read as variance 100 (standard deviation 10, as the paper's text says: "for
 * 0.1% of entries, we add an independent term that's normally distributed with standard
 * deviation 10"), kept in fp32. The reference is fp64 attention on those fp32 inputs
 * (softmax_scale 1/√head_dim, non-causal, heads_q = heads_kv). Each method rounds or
 * quantizes the same inputs its own way; its error against the reference therefore includes
 * the rounding of its inputs.
 */
#ifndef FX_TABLE3_H
#define FX_TABLE3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fx_stage.h"

typedef enum fx_table3_method {
    FX_T3_FP16_STANDARD = 0, /* standard attention in fp16 (fx_emu_forward_rows)           */
    FX_T3_FP16_FA2,          /* FlashAttention-2 in fp16: stage 03's CPU model             */
    FX_T3_FP8_PER_TENSOR,    /* (a) e4m3, one descale per tensor: the paper's baseline     */
    FX_T3_FP8_PER_HEAD,      /*     e4m3, one per (batch, KV head): FA3's descales         */
    FX_T3_FP8_BLOCK,         /* (b) e4m3, per block: the paper's "no incoherent processing" */
    FX_T3_FP8_INCOHERENT,    /* (c) e4m3, Hadamard + per tensor: "no block quantization"   */
    FX_T3_FP8_BOTH,          /* (d) e4m3, Hadamard + per block: the paper's FA3 fp8        */
    FX_T3_COUNT
} fx_table3_method;

const char *fx_table3_name(fx_table3_method m);
/* The paper's RMSE for the method (Table 3), NAN where the paper has no column (per head). */
double fx_table3_paper(fx_table3_method m);

typedef struct fx_table3_setup {
    int batch, seqlen, heads, head_dim; /* head_dim 64, 128 or 256 */
    uint64_t seed;                      /* the inputs' and the Hadamard signs' seed */
} fx_table3_setup;

typedef struct fx_table3_result {
    double rmse[FX_T3_COUNT];         /* against fp64 on the fp32 inputs                   */
    double rmse_dequant[FX_T3_COUNT]; /* against fp64 on the method's own rounded inputs
                                       * (the dequantized ones for e4m3), when asked       */
    double o_rms;                     /* the reference O's root mean square, for scale     */
    size_t past_fast_range;           /* rows fx_fp8_forward does not model (expected 0)   */
} fx_table3_result;

/* Runs every method on the setup's inputs. fa2_fp16: the FlashAttention-2 model run in fp16
 * (&fx_cpu_model_03). With dequant_reference, also the error of each method against fp64
 * on its own rounded inputs (one more reference per method: about doubles the time). */
void fx_table3_run(const fx_table3_setup *s, const fx_cpu_model *fa2_fp16, bool dequant_reference,
                   fx_table3_result *out);

#endif
