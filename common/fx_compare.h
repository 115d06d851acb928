/*
 * fx_compare.h — the checks of one case: the stage against the fp64 reference (sampled
 * rows of the forward, whole GQA groups of the backward, under the pass rule of
 * fx_check.h) and against the previous stage (every element).
 */
#ifndef FX_COMPARE_H
#define FX_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_case.h"
#include "fx_check.h"
#include "fx_run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The reference costs about this many fp64 multiply-adds per check before it starts
 * sampling: a second or two on one core (DESIGN.md: "For large problems it evaluates
 * a sample"). */
#define FX_REF_BUDGET_FWD 1.0e9
#define FX_REF_BUDGET_BWD 4.0e9

typedef struct fx_fwd_check {
    fx_err o, lse, o_emu, lse_emu;
    double o_bound, lse_bound;
    bool o_pass, lse_pass, pass; /* fx_pass of O, fx_pass_lse of LSE, both */
    size_t rows;                 /* rows evaluated, over every sampled slice */
} fx_fwd_check;

typedef struct fx_bwd_check {
    fx_err g[3], g_emu[3]; /* dQ, dK, dV */
    double bound[3];
    bool g_pass[3]; /* fx_pass of each */
    bool pass, ran; /* ran: false when one group costs more than FX_REF_BUDGET_BWD */
    int groups;
} fx_bwd_check;

/* "dQ", "dK", "dV": the names of fx_bwd_check's g[0..3). */
extern const char *const fx_grad_names[3];

/* The stage's forward outputs `st` against the fp64 reference and the emulation on h's
 * inputs, over sampled rows: every (batch, head) slice when the problem is within
 * FX_REF_BUDGET_FWD and FX_MAX_REF_SLICES slices, else `ref_slices` of them (the first,
 * the last, others by seed), with the first and last rows and evenly spaced ones between.
 * A variable-length batch's slices are (sequence, head) over the sequences with query rows,
 * each with rows of its own length; the reference runs each sequence as fx_seq_problem's
 * batch-1 problem on views of h's packed inputs, and reads st at the packed positions. */
void fx_check_forward(const fx_problem *p, int ref_slices, const fx_case_host *h,
                      const fx_outputs *st, fx_fwd_check *out);

/* The stage's gradients against the fp64 reference and the emulation over whole (batch,
 * kv head) groups (of a variable-length batch: (sequence, kv head), as the forward): all
 * of them within FX_REF_BUDGET_BWD, else at most `ref_slices`; out->ran is false (and pass
 * true) when even one group is over the budget. */
void fx_check_backward(const fx_problem *p, int ref_slices, const fx_case_host *h,
                       const fx_outputs *st, fx_bwd_check *out);

/* The stage against the previous stage: e = fx_compare_f32(stage, previous) over every
 * element. Passes when e has no NaN and no inf mismatch and e.max_abs <= bound; prints
 * "  <what> vs <prev_id> (all n): metrics  bound  PASS|FAIL" when `verbose`. */
bool fx_compare_prev(fx_err e, double bound, const char *what, const char *prev_id, bool verbose);

/* The nearest earlier stage of c whose capabilities cover p (and the backward when
 * `backward`) and whose architecture c's device meets (DESIGN.md, "The previous-stage
 * rule"), or NULL with the reason in `why`. For the forward of a variable-length batch a
 * stage without caps.varlen covers p when it covers each of its sequences that has query
 * rows and keys as a fixed-length problem of batch 1 (fx_seq_problem): fx_prev_per_seq. */
const fx_stage *fx_find_prev(const fx_ctx *c, const fx_problem *p, bool backward, char *why,
                             size_t why_len);

/* Places sequence b's forward outputs, computed as the fixed-length problem of batch 1
 * fx_seq_problem(p, b) makes, at their rows of the variable-length batch p's outputs:
 * o_seq [seqlen_q(b), heads_q, head_dim_v] into o [fx_numel_o(p)] from row cu_seqlens_q[b],
 * lse_seq [heads_q, seqlen_q(b)] into lse [fx_numel_lse(p)] at h·total_q + cu_seqlens_q[b].
 * o_seq and lse_seq NULL: the sequence has no key to run on (a fixed-length stage needs
 * seqlen_k >= 1), and its rows get what the contract says, O = 0 and LSE = -inf. */
void fx_place_seq_forward(const fx_problem *p, int b, const float *o_seq, const float *lse_seq,
                          float *o, float *lse);

/* Whether previous stage `prev` runs p sequence by sequence: p is a variable-length batch
 * and prev has no caps.varlen (fx_case.c then runs each sequence as a batch-1 problem on
 * views of the packed inputs). */
bool fx_prev_per_seq(const fx_stage *prev, const fx_problem *p);

#ifdef __cplusplus
}
#endif
#endif
