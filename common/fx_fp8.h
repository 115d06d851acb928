/*
 * fx_fp8.h — FP8 (e4m3) numbers on the host, and the three ways stage 10 prepares its inputs:
 * per-tensor or per-head scaling, per-block scaling, and incoherent processing (a random
 * ±1 diagonal times a Hadamard matrix over head_dim).
 *
 * e4m3 (OCP 8-bit Floating Point Specification (OFP8), rev. 1.0, 2023, "E4M3"; Micikevicius
 * et al., "FP8 Formats for Deep Learning", arXiv:2209.05433, Table 1): 1 sign bit, 4 exponent
 * bits with bias 7, 3 mantissa bits. Exponent field 0 holds zero and the subnormals m·2^-9
 * (m = 1..7, below the smallest normal 2^-6); fields 1..15 hold (1 + m/8)·2^(e − 7). There is
 * no infinity: S.1111.111 (0x7F, 0xFF) is the only NaN, so S.1111.110 = ±448 is the largest
 * finite value. 254 finite values, ±0 among them.
 *
 * The conversion from float is the one the kernels use, PTX's cvt.rn.satfinite.e4m3x2.f32
 * (PTX ISA, "Data Movement and Conversion Instructions: cvt"): round to nearest, ties to
 * even; with .satfinite a result that would exceed 448 in magnitude (±inf included) becomes
 * ±448, and NaN stays NaN. The packed form puts its first operand in the high byte; this
 * header converts one value at a time. fx_e4m3_from_float gave the instruction's code for
 * every one of the 2^32 float inputs on an H200 (CUDA 13.0, 2026-12-05; docs/10_fp8.md
 * says how), which also settled what the ISA leaves open: a NaN of either sign becomes
 * 0x7F.
 *
 * Scales (FA3: q_descale, k_descale, v_descale): a tensor x is stored as e4m3 codes c and
 * float descales δ with x ≈ δ·c, one δ per block of rows. δ = amax/448 over the block, so
 * the block's largest |x| maps to 448; an all-zero block (amax 0) gets δ = 0 and codes 0 —
 * zero is a legal descale, and 0·c = 0 rebuilds the block exactly.
 */
#ifndef FX_FP8_H
#define FX_FP8_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- e4m3 ----------------------------------------------------------------------------- */

#define FX_E4M3_MAX 448.0f            /* S.1111.110: (1 + 6/8)·2^8                 */
#define FX_E4M3_MIN_NORMAL 0x1p-6f    /* S.0001.000                                 */
#define FX_E4M3_MIN_SUBNORMAL 0x1p-9f /* S.0000.001, the subnormals' step           */
#define FX_E4M3_NAN 0x7Fu             /* the NaN cvt gives; 0xFF decodes to NaN too */

/* float → e4m3 code, as cvt.rn.satfinite.e4m3x2.f32 converts one of its two operands:
 * round to nearest, ties to even; |x| above 448 (±inf too) saturates to ±448 (0x7E, 0xFE);
 * every NaN gives 0x7F, the sign dropped; -0 gives 0x80. Up to half of the smallest
 * subnormal (2^-10, a tie that goes to the even 0) the result is ±0. */
uint8_t fx_e4m3_from_float(float x);

/* e4m3 code → float: exact for every finite code; NaN for 0x7F and 0xFF. */
float fx_e4m3_to_float(uint8_t code);

/* x rounded to the nearest e4m3 value (with saturation), returned as float. */
float fx_e4m3_round(float x);

/* ---- the tiles the descale blocks follow ---------------------------------------------- */

/* FA3's e4m3 forward tiles (hopper/tile_size.h, FA3_HOPPER_FACTS_2.md part (b)), kBlockM
 * query rows by kBlockN keys: 192×160 at head_dim 64, 128×224 at 128 (row-major V,
 * transposed in the kernel), 128×128 at 256; {0, 0} for other head_dims. Per-block scaling
 * gives one Q descale per kBlockM rows and one K and V descale per kBlockN rows: a tile must
 * never straddle two descales, so the blocks must be the kernel's tiles: stage 10 uses smaller
 * ones where FA3's spill in its kernel (stages/10_fp8/fwd.cu), and the harness quantizes by
 * the stage descriptor's fp8_tiles. This table is FA3's, for the CPU model's Table 3. */
typedef struct fx_fp8_tiles {
    int block_m; /* kBlockM */
    int block_n; /* kBlockN */
} fx_fp8_tiles;

fx_fp8_tiles fx_fp8_tiles_for(int head_dim);

/* ---- quantization --------------------------------------------------------------------- */

/* Which values share one descale. Every mode stores its descales per block of rows
 * (fx_fp8_tensor), so that one forward reads them alike; the coarser modes repeat a value.
 *   PER_TENSOR: the whole tensor (all batches, heads, rows): the FA3 paper's baseline, Table 3.
 *   PER_HEAD:   one per (batch, KV head), the granularity of FA3's q/k/v_descale arguments
 *               (indexed by KV head even for Q: the query heads of a GQA group share one).
 *   PER_BLOCK:  one per (batch, head, block of block_rows rows): the FA3 paper's block
 *               quantization, §3.3, with blocks equal to the kernel's tiles. */
typedef enum fx_fp8_scaling {
    FX_FP8_PER_TENSOR = 0,
    FX_FP8_PER_HEAD,
    FX_FP8_PER_BLOCK,
    FX_FP8_SCALING_COUNT
} fx_fp8_scaling;

const char *fx_fp8_scaling_name(fx_fp8_scaling s); /* "per-tensor", "per-head", "per-block" */

/* One tensor in e4m3 with its descales.
 *   codes:   [batch, seqlen, heads, head_dim], head_dim contiguous (fx_problem.h's layouts)
 *   descale: [batch, heads, n_blocks], n_blocks = ceil(seqlen / block_rows); element
 *            (b, row, h, d) is descale[b, h, row / block_rows]·e4m3(codes[b, row, h, d]). */
typedef struct fx_fp8_tensor {
    int batch, seqlen, heads, head_dim;
    int block_rows;
    uint8_t *codes;
    float *descale;
} fx_fp8_tensor;

/* Allocates codes and descales (zeroed); aborts with a message when memory runs out. All
 * sizes > 0. */
fx_fp8_tensor fx_fp8_tensor_alloc(int batch, int seqlen, int heads, int head_dim, int block_rows);
void fx_fp8_tensor_free(fx_fp8_tensor *t);
size_t fx_fp8_tensor_numel(const fx_fp8_tensor *t);
int fx_fp8_tensor_blocks(const fx_fp8_tensor *t);      /* n_blocks per (batch, head) */
size_t fx_fp8_tensor_descales(const fx_fp8_tensor *t); /* batch·heads·n_blocks */

/* The descale of a set whose largest magnitude is amax (finite, >= 0): amax/448 in fp32,
 * and 0 for amax 0. Dividing a member by it gives at most 448 in magnitude up to one fp32
 * rounding (which the conversion's rounding to e4m3 absorbs: 448 is the nearest e4m3). */
float fx_fp8_descale(float amax);

/* The descale δ of row `row` (a position along seqlen) of head h of batch b in t: the entry
 * of t->descale ([batch, heads, n_blocks]) for the block row / t->block_rows. */
float fx_fp8_row_descale(const fx_fp8_tensor *t, int b, int row, int h);

/* Quantizes x (t's layout, finite values) into t: the descale of each group of elements
 * that `scaling` names, then codes = e4m3(x / descale), the quotient rounded once to fp32
 * (a zero descale gives codes 0). heads_per_group: for PER_HEAD, how many consecutive heads
 * share a descale (heads_q / heads_kv for Q, 1 for K and V); ignored otherwise. Aborts with a
 * message when t's heads are not a multiple of it. Rows run in parallel (OpenMP). */
void fx_fp8_quantize(const float *x, fx_fp8_scaling scaling, int heads_per_group, fx_fp8_tensor *t);

/* The values t holds, descale·e4m3(code), as floats in t's layout (the "dequantized"
 * tensor; the product is exact whenever descale·code is a float: it is rounded once). */
void fx_fp8_dequantize(const fx_fp8_tensor *t, float *x);

/* ---- incoherent processing (FA3 paper §3.3) ------------------------------------------- */

/* In place, the unnormalised Walsh–Hadamard transform of one vector of n = 2^k doubles:
 * x ← H_n·x with H_1 = [1], H_2n = [[H_n, H_n], [H_n, −H_n]] (Sylvester's construction;
 * H_n is symmetric and H_n·H_nᵀ = n·I). k butterfly passes of n/2 additions and n/2
 * subtractions each: O(n log n), exact for small integers. */
void fx_fwht_f64(double *x, int n);

/* head_dim random signs ±1.0f (the diagonal of D), from (seed, i) alone (fx_draw.h's
 * counter-based generator, a stream of its own). */
void fx_fp8_random_signs(uint64_t seed, int head_dim, float *signs);

/* Incoherent processing of `rows` rows of head_dim floats (any [.., head_dim] tensor with
 * head_dim contiguous), in place: x ← x·D·H/√head_dim, each row computed in fp64 and
 * rounded once to fp32. head_dim a power of two (64, 128, 256; aborts otherwise). M = D·H/√d
 * is orthogonal (M·Mᵀ = I), so the same M applied to Q and K leaves QKᵀ unchanged in exact
 * arithmetic: (QM)(KM)ᵀ = Q·M·Mᵀ·Kᵀ = QKᵀ. V is left alone (P·V needs no transform). */
void fx_fp8_incoherent(float *x, size_t rows, int head_dim, const float *signs);

#ifdef __cplusplus
}
#endif
#endif
