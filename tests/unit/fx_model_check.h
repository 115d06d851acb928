/*
 * fx_model_check.h — what the CPU-model suites (test_flash*_model.c) share: a problem,
 * a model run on seeded inputs, index maps, and the check of a model against the fp64
 * reference under FlashAttention's pass rule (fx_check.h), every row of every slice.
 */
#ifndef FX_MODEL_CHECK_H
#define FX_MODEL_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_problem.h"
#include "fx_stage.h"

/* A validated problem (ck_assert on a refusal), scale 1/sqrt(head_dim), a fixed seed. */
fx_problem fx_test_problem(int batch, int seqlen_q, int seqlen_k, int heads_q, int heads_kv,
                           int head_dim, bool causal, fx_dtype dtype);

/* Inputs and a model's outputs, in the contiguous layouts of fx_problem.h. */
typedef struct fx_model_run {
    fx_problem p;
    float *q, *k, *v, *dout;       /* inputs, rounded to the dtype by fx_fill */
    float *o, *lse, *dq, *dk, *dv; /* the model's outputs (dq.. NULL without backward) */
} fx_model_run;

fx_model_run fx_run_model(const fx_cpu_model *model, fx_problem p, bool backward);
void fx_model_release(fx_model_run *r);

/* Element offsets in Q/O/dO/dQ, K/V/dK/dV and LSE. */
size_t fx_at_q(const fx_problem *p, int b, int i, int h, int d);
size_t fx_at_kv(const fx_problem *p, int b, int j, int h, int d);
size_t fx_at_lse(const fx_problem *p, int b, int h, int i);

/* The model's O and LSE (and dQ, dK, dV) against fp64 under the pass rule; fails the
 * running Check test with the shape and both errors when they do not pass. */
void fx_model_check_against_reference(const fx_cpu_model *model, fx_problem p, bool backward);

#endif
