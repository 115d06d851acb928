/*
 * fx_model_check.h — what the unit suites share (every one links fx_model_check.c): for the
 * CPU-model suites (test_flash*_model.c) a problem, a model run on seeded inputs, index maps,
 * and the check of a model against the fp64 reference under FlashAttention's pass rule
 * (fx_check.h), every row of every slice; for the option suites, a command line parsed.
 */
#ifndef FX_MODEL_CHECK_H
#define FX_MODEL_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_options.h"
#include "fx_problem.h"
#include "fx_stage.h"

/* Parses `line` (words separated by single spaces, at most 63, the whole line under 16 KiB)
 * as a stage program's arguments after argv[0] into *o, from fx_options_default; returns
 * fx_options_parse's exit code (0, or 2 with the message in why). The words live in a static
 * buffer until the next call: o's strings and the problem's length lists point into it or
 * into *o. */
int fx_test_parse_args(const char *line, fx_options *o, char *why, size_t why_len);

/* A validated problem (ck_assert on a refusal), scale 1/sqrt(head_dim), a fixed seed. */
fx_problem fx_test_problem(int batch, int seqlen_q, int seqlen_k, int heads_q, int heads_kv,
                           int head_dim, bool causal, fx_dtype dtype);

/* Inputs and a model's outputs, in the contiguous layouts of fx_problem.h. */
typedef struct fx_model_run {
    fx_problem p;
    float *q, *k, *v, *dout;       /* inputs, rounded to the dtype by fx_fill */
    float *o, *lse, *dq, *dk, *dv; /* the model's outputs (dq.. NULL without backward) */
} fx_model_run;

/* calloc of n (at least 1) elements of `size` bytes, zeroed; fails the running test (Check)
 * when memory runs out. Every unit suite links this file (tests/CMakeLists.txt). */
void *fx_test_calloc(size_t n, size_t size);

fx_model_run fx_run_model(const fx_cpu_model *model, fx_problem p, bool backward);
void fx_model_release(fx_model_run *r);

/* Element offsets in Q/O/dO/dQ, K/V/dK/dV and LSE. */
size_t fx_at_q(const fx_problem *p, int b, int i, int h, int d);
size_t fx_at_kv(const fx_problem *p, int b, int j, int h, int d);
size_t fx_at_lse(const fx_problem *p, int b, int h, int i);

/* The model's O and LSE (and dQ, dK, dV) against fp64 under the pass rule; fails the
 * running Check test with the shape and both errors when they do not pass. */
void fx_model_check_against_reference(const fx_cpu_model *model, fx_problem p, bool backward);

/* The masked-row checks every CPU model must pass (the suites call them by name):
 *   unseen_rows: causal, seqlen_q 203 > seqlen_k 70, 2 heads, head_dim 64, bf16: rows
 *     i < 133 see no key and get O = 0, LSE = -inf, dQ = 0 exactly; nothing is NaN.
 *   row0_sees_key0: causal, seqlen 200, head_dim 64, bf16: row 0 sees key 0 only, so
 *     O is exactly V's row 0 and LSE is S[0][0]·scale, whatever the wholly masked
 *     blocks around it.
 *   single_key: one query, one key, large logits, fp16: P = [1], so O = V, dV = dO and
 *     dQ = dK = 0 exactly (dP − D cancels when D is summed as dP is). */
void fx_model_check_unseen_rows(const fx_cpu_model *model);
void fx_model_check_row0_sees_key0(const fx_cpu_model *model);
void fx_model_check_single_key(const fx_cpu_model *model, int head_dim);

#endif
