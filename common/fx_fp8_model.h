/*
 * fx_fp8_model.h — the e4m3 forward of stage 10 on the CPU: FlashAttention-3's FP8 algorithm
 * (Shah et al., arXiv:2407.08608, §3.3; the public hopper/ code's scaling, FA3_HOPPER_FACTS_2.md
 * part (b)) emulated step for step, so that the kernel has a verified model to match.
 *
 * Here, in common/, until stage 10 exists: stages/CMakeLists.txt lists the stages by hand, but
 * run.sh, bench/sweep.sh, scripts/gen_readme_stages.sh and tests/shape/check_units.sh take
 * every stages/NN_* folder for a stage with a program, so a folder holding only a model would
 * break them. Stage 10's session moves this file to stages/10_fp8/model.c.
 *
 * What it computes, per (batch, query head h, KV head h / (heads_q/heads_kv)), per Q tile of
 * kBlockM rows and, inside it, the K/V tiles of kBlockN keys from the last one a row sees down
 * to the first (the stages' order), each row on its own:
 *   S  = Q8·K8ᵀ from the e4m3 codes (the products are exact: 4 significant bits times 4),
 *        summed as the tensor core sums them (fx_fp8_acc.h: Hopper keeps 13 bits below the
 *        largest of each k32 wgmma's terms, measured by tests/gpu/fp8_acc_probe.cu), or in
 *        fp32 as fx_dot_f32 sums (an ideal accumulation: the caller's choice, below);
 *   the online softmax in log2 units with the descales and the max offset (below);
 *   P  rounded to e4m3 (cvt.rn.satfinite) before O += P8·V8, summed as S is (the tensor
 *        core's way: chains of 32 keys with O as their accumulator); ℓ sums the fp32 P;
 *   O  = acc·(δV/ℓ) rounded to bf16 (FA3's fp8 output type); LSE fp32, natural log.
 * A row that sees no key gets O = 0 and LSE = -inf.
 *
 * The descale algebra (docs/10_fp8.md derives it). With Q = δQ·Q8, K = δK·K8, V = δV·V8 and
 * c = softmax_scale·log2(e), the score of row i and key j in log2 units is
 *     S_ij·c = (Q8·K8ᵀ)_ij · (c·δQ(i)·δK(j)).
 * Per tensor or per head δQ and δK are constants: c' = c·δQ·δK is the softmax scale, the
 * running max may be kept on the raw Q8·K8ᵀ, and δV multiplies the final 1/ℓ (FA3's
 * q_descale·k_descale into scale_log2 and v_descale into the final scaling). Per block, δK
 * changes with every K/V tile n, so tile n's scale is c_n = (c·δQ)·δK(n) and the running
 * max must be kept in one unit for all tiles: here the scaled one, R = max over tiles of
 * max_j(S8_j)·c_n, rounded up (as the stages' R = m·c; the max commutes with the scaling
 * because c_n >= 0). A per-block δV(n) cannot go into 1/ℓ at the end; it is folded into the
 * rescale the online softmax already does: the accumulator holds O_unnormalised/δV(n) for
 * the latest tile n, so before tile n's P8·V8 it is multiplied by α·δV(prev)/δV(n) instead
 * of α, and O = acc·δV(last)/ℓ. The per-tensor path is the same code with equal descales
 * (the ratio is then exactly 1).
 *
 * The max offset (FA3's Max_offset = 8): P = 2^(S·c_n − (R − 8)), so the row's largest P is
 * 2^8 instead of 1. P8 then uses e4m3's upper range: with P <= 1 every P below 2^-10
 * rounds to 0 and those below 2^-6 lose bits as subnormals; with P <= 2^8 only those below
 * 2^-18 of the row's max are lost. 2^8 is the largest power of two under 448; 2^9 = 512
 * would saturate. The offset cancels in O = acc/ℓ, and LSE = (R − 8)·ln 2 + ln ℓ.
 *
 * Not modelled: rows whose final |R| reaches FX_SOFTMAX_FAST_BELOW (2^24), where the
 * stages switch to an exact path (common/fx_exact_rows.cuh); the model counts them.
 */
#ifndef FX_FP8_MODEL_H
#define FX_FP8_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fx_fp8.h"
#include "fx_fp8_acc.h"
#include "fx_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FX_FP8_MAX_OFFSET 8.0f /* log2 units: P <= 2^8 = 256 <= 448 (FA3's Max_offset)     */

/* Stage 10's inputs: Q, K, V in e4m3 with their descales (fx_fp8.h), in the layouts of
 * fx_problem.h. The tiles are the descale blocks: kBlockM = q.block_rows and kBlockN =
 * k.block_rows = v.block_rows, so that no tile straddles two descales. */
typedef struct fx_fp8_inputs {
    fx_fp8_tensor q; /* [batch, seqlen_q, heads_q, head_dim], blocks of kBlockM rows  */
    fx_fp8_tensor k; /* [batch, seqlen_k, heads_kv, head_dim], blocks of kBlockN rows */
    fx_fp8_tensor v; /* [batch, seqlen_k, heads_kv, head_dim], blocks of kBlockN rows */
} fx_fp8_inputs;

/* The e4m3 forward (above) of problem p (fixed length, head_dim_v == head_dim; p->dtype is not
 * read: O is bf16) on `in`, whose shapes must match p (aborts with a message otherwise). acc: how
 * the tensor cores add the products of both GEMMs, fx_fp8_acc_hopper() for the H100/H200 (what
 * stage 10's check compares the kernel with), NULL for fp32 sums (Table 3's CPU reproduction, the
 * algebra's unit tests). max_offset: FX_FP8_MAX_OFFSET as FA3, or 0 to see what the offset buys
 * (any value in [0, 8]). Writes o [batch, seqlen_q, heads_q, head_dim] (bf16 values as float) and
 * lse [batch, heads_q, seqlen_q]. Returns the number of rows past the fast range (not modelled,
 * above): 0 for inputs of any sensible scale. Rows run in parallel (OpenMP); the results do not
 * depend on the thread count. */
size_t fx_fp8_forward(const fx_problem *p, const fx_fp8_inputs *in, float max_offset,
                      const fx_fp8_acc_params *acc, float *o, float *lse);

/* The same on the (batch[i], head[i]) slices i < n_slices alone (distinct pairs): each
 * slice's rows of o and lse (full-size arrays, as above) are written, the rest untouched.
 * What a check that samples slices runs (common/fx_fp8_case.c). */
size_t fx_fp8_forward_slices(const fx_problem *p, const fx_fp8_inputs *in, float max_offset,
                             const fx_fp8_acc_params *acc, int n_slices, const int *batch,
                             const int *head, float *o, float *lse);

/* How Table 3's modes prepare the inputs: the scaling, whether incoherent processing runs
 * first (and its signs' seed), and the tiles the descale blocks follow. */
typedef struct fx_fp8_recipe {
    fx_fp8_scaling scaling;
    bool incoherent;    /* Q and K times D·H/√d (fx_fp8_incoherent) before quantizing */
    uint64_t sign_seed; /* D = diag(fx_fp8_random_signs(sign_seed))                   */
    fx_fp8_tiles tiles; /* kBlockM rows of Q, kBlockN of K and V per descale block    */
} fx_fp8_recipe;

/* Quantizes fp32 Q, K, V (fx_problem.h's layouts) for p by recipe r: with r.incoherent, Q
 * and K first go through fx_fp8_incoherent (on copies: q and k are left unchanged); then
 * each tensor is quantized with r.scaling in blocks of the tiles. PER_HEAD groups Q's heads
 * by KV head. Allocates *out (free with fx_fp8_inputs_free). Aborts with a message on tiles
 * of 0 rows (fx_fp8_tiles_for of an unlisted head_dim) or, with r.incoherent, a head_dim
 * that is not a power of two. */
void fx_fp8_prepare(const fx_problem *p, const float *q, const float *k, const float *v,
                    fx_fp8_recipe r, fx_fp8_inputs *out);
void fx_fp8_inputs_free(fx_fp8_inputs *in);

#ifdef __cplusplus
}
#endif
#endif
