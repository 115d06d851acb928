/*
 * fx_save.h — --save DIR: one checked case's inputs and one stage's outputs as files, so
 * that another program (numpy, PyTorch, the C API's tests) can read exactly what the
 * stage program computed, and compare its own result with it bit for bit.
 *
 * DIR holds, each a raw little-endian array in the harness's layout (fx_problem.h):
 *   q.bin, k.bin, v.bin   the inputs' dtype bits, uint16 (bf16 or fp16); e4m3: uint8 codes,
 *                         V's in K's layout [batch, seqlen_k, heads_kv, head_dim] also when
 *                         the kernel is handed Vᵀ (--fp8-vt: the harness transposes them)
 *   q_descale.f32, k_descale.f32, v_descale.f32   e4m3: the fp32 descales, [batch, heads,
 *                         n_blocks] per tensor (fx_fp8.h's fx_fp8_tensor)
 *   q.f32, k.f32, v.f32   e4m3: the fp32 inputs before quantization (and before incoherent
 *                         processing), what the report's "vs fp64 on fp32 inputs" lines
 *                         read; left out where the case has none (a --load without them)
 *   dout.bin              dO's bits, with --bwd
 *   o.f32, lse.f32        the stage's O (as float: every bf16/fp16 value is exact in it)
 *                         and its LSE, fp32, natural log (e4m3 --cpu: the rows of the checked
 *                         slices, which the model ran; NaN elsewhere)
 *   dq.f32, dk.f32, dv.f32  with --bwd
 *   problem.txt           key=value lines: the stage, the sizes (head_dim_v: V's and O's
 *                         columns, head_dim unless the stage takes another), dtype, causal, the
 *                         resolved softmax_scale (%.17g, so that it reads back exactly),
 *                         seed, dist, qk_scale, and for a variable-length batch its
 *                         cu_seqlens_q/k and seqused_k as comma-separated lists; e4m3:
 *                         fp8_scaling, hadamard, fp8_vt and the descale blocks, fp8_block_m
 *                         rows of Q and fp8_block_n of K and V
 * Files of an earlier --save in DIR are overwritten. docs/harness.md, "--save".
 */
#ifndef FX_SAVE_H
#define FX_SAVE_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_problem.h"
#include "fx_run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates DIR if it does not exist (one level: its parent must exist) and checks that a
 * file can be created in it, before any GPU work. Returns 0, or FX_EXIT_USAGE with `why`
 * naming DIR and the system's reason. */
int fx_save_prepare(const char *dir, char *why, size_t why_len);

/* Writes the files above for stage `stage_id` (its folder name) on problem p: h's bits
 * (fx_host_make's; dO's only when `backward`), or for e4m3 h->fp8 and h's fp32 inputs, and
 * o's host copies (fx_run_stage's).
 * Returns 0, or 1 after naming the file that could not be written (fx_error). */
int fx_save_case(const char *dir, const char *stage_id, const fx_problem *p, const fx_case_host *h,
                 const fx_outputs *o, bool backward);

#ifdef __cplusplus
}
#endif
#endif
