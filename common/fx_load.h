/*
 * fx_load.h — --load DIR: run a stage on given inputs instead of drawn ones. DIR holds
 * what --save writes (fx_save.h), or the same written by any other program:
 *
 *   problem.txt   key=value lines, one per line; blank lines and lines starting with '#'
 *                 are skipped. Required: batch, seqlen_q, seqlen_k, heads_q, heads_kv,
 *                 head_dim, dtype (bf16|fp16|e4m3), causal (0|1). Optional: head_dim_v (default
 *                 head_dim), softmax_scale (default 1/sqrt(head_dim)), and for a
 *                 variable-length batch varlen=1 with cu_seqlens_q, cu_seqlens_k (batch + 1
 *                 comma-separated offsets from 0) and seqused_k. Informational, checked
 *                 only for form: stage, seed, dist, qk_scale, backward, total_q, total_k
 *                 (the last two must match the offsets). Any other key is refused.
 *                 dtype=e4m3 also requires fp8_block_m and fp8_block_n (rows of Q, and of K
 *                 and V, per descale: the stage's tiles, fx_load_fp8_case), which no other
 *                 dtype takes, and takes fp8_scaling (how the descales were made, default
 *                 per-tensor), hadamard (0|1: whether Q and K went through incoherent
 *                 processing before quantizing) and fp8_vt (0|1: V handed to the kernel
 *                 transposed, as --fp8-vt). The seed is then also what samples the checked
 *                 slices; the codes already hold the Hadamard transform, so none is redone.
 *   q.bin, k.bin, v.bin   the inputs' 16-bit patterns (bf16 or fp16 as dtype says),
 *                 little-endian, in the harness's layout (fx_problem.h: [batch, seqlen,
 *                 heads, head_dim] row-major, or [total, heads, head_dim] when varlen);
 *                 e4m3: one-byte codes (fx_fp8.h), V's too in K's layout whatever fp8_vt
 *   dout.bin      dO's bits, read only with --bwd
 *   q_descale.f32, k_descale.f32, v_descale.f32   e4m3: fp32 descales [batch, heads,
 *                 ceil(seqlen / block)] (heads_q and fp8_block_m for Q, heads_kv and
 *                 fp8_block_n for K and V; fx_fp8_tensor): element (b, row, h, d) is
 *                 descale[b, h, row / block]·e4m3(code)
 *   q.f32, k.f32, v.f32   e4m3, optional (all three or none): the fp32 inputs before
 *                 quantization and before incoherent processing, which the report compares
 *                 with ("vs fp64 on fp32 inputs"); without them it says n/a
 *
 * Every value is read as its problem option would be (the option table of fx_options.c:
 * the same ranges and messages). Refused with exit 2 and the reason: a missing, duplicate,
 * unknown or malformed key; a file of another size than the problem needs (its bytes and
 * the expected ones named); a NaN or an infinity in an input (its file and element; e4m3: a
 * NaN code 0x7f or 0xff); a descale that is negative or whose 448-fold is not finite; e4m3
 * descale blocks other than the stage's tiles; one or two of q.f32, k.f32, v.f32; and
 * inputs whose logits can pass fp32's range (head_dim · max|Q| · max|K| · softmax_scale ·
 * log2 e ≥ 2^127, on the dequantized values for e4m3), the data-based form of the bound the
 * options put on drawn inputs.
 * docs/harness.md, "--load".
 */
#ifndef FX_LOAD_H
#define FX_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_options.h"
#include "fx_run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads DIR/problem.txt into o->problem (a variable-length batch's lengths into o's
 * seqlens arrays, for fx_options_parse to finish as it does --seqlens-q). Returns 0, or
 * FX_EXIT_USAGE with `why` naming the file, the line and the key. */
int fx_load_problem(const char *dir, fx_options *o, char *why, size_t why_len);

/* Reads the inputs of problem p (bf16 or fp16) from DIR into h (its arrays allocated as
 * fx_host_make's, freed by fx_host_free): Q, K, V, and dO when `backward`. Returns 0, or
 * FX_EXIT_USAGE with `why` (h then holds nothing). */
int fx_load_case(const char *dir, const fx_problem *p, bool backward, fx_case_host *h, char *why,
                 size_t why_len);

/* Reads the e4m3 inputs of o's problem from o->load into h (freed by fx_host_free): h->fp8's
 * codes and descales in blocks of `tiles` (the stage's fp8_tiles at head_dim), which must be
 * the blocks problem.txt names (o->fp8_blocks), and h->q, h->k, h->v from q.f32, k.f32, v.f32
 * where the folder has them (else NULL); the bits stay NULL. Returns 0, or FX_EXIT_USAGE with
 * `why` (h then holds nothing). */
int fx_load_fp8_case(const fx_options *o, fx_fp8_tiles tiles, fx_case_host *h, char *why,
                     size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
