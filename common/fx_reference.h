/*
 * fx_reference.h — the fp64 CPU reference and the CPU emulation in the stage's dtype.
 *
 * The pass rule (fx_check.h) compares a stage's error against fp64 with the error
 * of the emulation against fp64. Both work on host float tensors in the contiguous
 * layouts of fx_problem.h whose values are already rounded to p->dtype.
 *
 * Forward rows are independent, so large problems check a sample of query rows.
 * The functions take a fixed-length problem; a variable-length batch is evaluated one
 * sequence at a time as fx_seq_problem's batch-1 problem on views of its packed tensors
 * (fx_compare.c).
 * A key's gradient needs every query row of its (batch, kv head) slice and all
 * query heads of its group, so the backward evaluates whole groups.
 *
 * All four spread their rows (or keys) over OpenMP threads; the results do not depend
 * on the thread count. Working memory is O(seqlen_k + head_dim) per row and O(G·seqlen_q)
 * per group (the emulation also keeps the group's O, G·seqlen_q·head_dim floats): the
 * backward recomputes P per key instead of storing seqlen_q × seqlen_k.
 * Running out of host memory aborts with a message (there is no error to return).
 */
#ifndef FX_REFERENCE_H
#define FX_REFERENCE_H

#include "fx_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp64 forward of query rows [i0, i1) of (batch b, query head h).
 * o: [(i1 - i0), head_dim_v] row-major (fx_head_dim_v: V's and O's columns); lse: [i1 - i0],
 * natural log, -inf for a row that sees no key (its O row is 0). */
void fx_ref_forward_rows(const fx_problem *p, const float *q, const float *k, const float *v, int b,
                         int h, int i0, int i1, double *o, double *lse);

/* The same rows as standard attention in p->dtype computes them (the baseline of
 * FlashAttention's tests): fp32 accumulation of S, fp32 softmax, the normalized P
 * rounded to p->dtype before PV, fp32 accumulation of O, O rounded to p->dtype.
 * LSE stays fp32. */
void fx_emu_forward_rows(const fx_problem *p, const float *q, const float *k, const float *v, int b,
                         int h, int i0, int i1, float *o, float *lse);

/* fp64 backward of one GQA group: batch b, kv head hk, and its G = heads_q/heads_kv
 * query heads hk·G .. hk·G + G-1.
 *   dq: [G, seqlen_q, head_dim]   (query head g of the group, row, column)
 *   dk, dv: [seqlen_k, head_dim]  (summed over the group's query heads)
 * O and LSE are recomputed in fp64 internally; D = rowsum(dO∘O). The backward (this and
 * fx_emu_backward_group) takes head_dim_v == head_dim only: no stage has a backward at
 * another (fx_stage_supports refuses it). */
void fx_ref_backward_group(const fx_problem *p, const float *q, const float *k, const float *v,
                           const float *dout, int b, int hk, double *dq, double *dk, double *dv);

/* The same group emulated in p->dtype: O and LSE from fx_emu_forward_rows, fp32
 * accumulation everywhere, P and dS rounded to p->dtype before the GEMMs that read
 * them, D = rowsum(dO∘O) in fp32, outputs rounded to p->dtype. Same shapes. */
void fx_emu_backward_group(const fx_problem *p, const float *q, const float *k, const float *v,
                           const float *dout, int b, int hk, float *dq, float *dk, float *dv);

/* a·b over n floats accumulated in fp32 in four interleaved partial sums, added as a tree at
 * the end, as a tensor-core GEMM adds its products (in a tree, not one by one): the error
 * is that of ~√n roundings, not the ~n of a sequential sum, which at logits ~1e4 would be
 * the emulation's or a CPU model's own error rather than the kernel's. Used by the
 * emulation here and by stage 03's CPU model (stages/03_flash2/model.c). */
float fx_dot_f32(const float *a, const float *b, int n);

#ifdef __cplusplus
}
#endif
#endif
