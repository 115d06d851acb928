/*
 * fx_fp8_acc.h — a parametrized model of how a tensor core adds the products of one MMA
 * (and its fp32 accumulator input C), for stage 10's e4m3 wgmma and, as a control, bf16.
 *
 * Why: the CPU model of stage 10 (fx_fp8_model.c) sums S = Q8·K8ᵀ in fp32, while Hopper's
 * e4m3 tensor cores are reported (by others; docs/10_fp8.md, "The tensor core's fp8
 * accumulation, measured") to align the products to the largest one's exponent and keep only
 * about 13-14 bits below it. tests/gpu/fp8_acc_probe.cu measures it on the GPU and fits the
 * parameters below to what it measured; this file is the emulation those parameters drive,
 * so that the CPU model (and the pass rule) can use the hardware's arithmetic instead of a
 * bound widened after a failure.
 *
 * The model (the shape of Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA
 * tensor cores", PeerJ CS 2021, for V100/A100, and of the H100 FP8 description in
 * DeepSeek-V3's report; each knob is a question the probe answers):
 *
 *   acc = C
 *   for each group of `group` consecutive k (k = 0..group-1, then group..2·group-1, ...):
 *       terms = the exact products a_k·b_k of the group (zeros left out),
 *               plus acc itself when c_mode == FX_ACC_C_JOIN;
 *       emax  = the exponent of the largest term (floor(log2 |term|), or for a product the
 *               sum of its operands' exponents when emax_fields is set: the exponent before
 *               a significand product in [2, 4) is normalised);
 *       each term is rounded to a multiple of 2^(emax − frac_bits) by term_round
 *               (RZ: magnitude truncation; RD: floor, a two's-complement truncation after a
 *               sign-filled right shift; RN: nearest, ties to even);
 *       sum   = the exact sum of the rounded terms;
 *       JOIN: acc = fp32(sum) rounded by out_round;
 *       FP32: acc = acc + fp32(sum) (out_round for the group's sum, then an fp32 add, RN).
 *   result = acc.
 *
 * A chain of instructions on one accumulator (S over head_dim = 32·n in stage 10) is the
 * same loop over more groups: the next instruction's C is the previous one's fp32 output.
 * frac_bits at most 45, or 44 with groups of more than 32 (sums stay exact in double); a
 * large frac_bits with group = 1 and c_mode FP32 is an ordinary fp32 sum in k order.
 */
#ifndef FX_FP8_ACC_H
#define FX_FP8_ACC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fx_acc_round {
    FX_ACC_RZ = 0, /* toward zero (magnitude truncation)                         */
    FX_ACC_RD = 1, /* toward -inf (floor: two's-complement truncation)           */
    FX_ACC_RN = 2  /* to nearest, ties to even                                   */
} fx_acc_round;

typedef enum fx_acc_c_mode {
    FX_ACC_C_JOIN = 0, /* acc is one more term of each group's alignment            */
    FX_ACC_C_FP32 = 1  /* each group's sum goes to fp32, then acc += it in fp32 (RN) */
} fx_acc_c_mode;

typedef struct fx_fp8_acc_params {
    int group;               /* k per alignment group (1..64; the last may be short) */
    int frac_bits;           /* B: bits kept below 2^emax (1..45)                      */
    fx_acc_round term_round; /* each aligned term's lost bits                           */
    fx_acc_c_mode c_mode;    /* how C (and each group's result) joins                   */
    fx_acc_round out_round;  /* the exact group sum to fp32                             */
    int emax_fields;         /* 1: a product's exponent is ea + eb (unnormalised)       */
} fx_fp8_acc_params;

/* The parameters of e4m3 m64nNk32 fitted to what tests/gpu/fp8_acc_probe measured on an
 * NVIDIA H100 80GB HBM3 (driver 580.159.04, 2026-12-06; the probe's "model:" line): each
 * wgmma aligns its 32 products and C to the largest exponent (of a product, the sum of its
 * operands' exponents), truncates each toward zero to 13 bits below it, and adds. It
 * reproduces 8551 of the probe's 8883 cases bit for bit; the rest differ by one unit of
 * 2^(emax-13) (docs/10_fp8.md, "The tensor core's fp8 accumulation, measured"). */
#define FX_FP8_ACC_HOPPER_E4M3 "G=32 B=13 term=rz c=join out=rz emax=fields"

/* FX_FP8_ACC_HOPPER_E4M3 parsed: what the CPU model of stage 10 sums with. */
const fx_fp8_acc_params *fx_fp8_acc_hopper(void);

/* The model above: a[k]·b[k] for k < n (each product exact in double: e4m3 and bf16 values
 * are), plus c. Returns the fp32 result. */
float fx_fp8_dot_model(const float *a, const float *b, int n, float c,
                       const fx_fp8_acc_params *prm);

/* The exact sum c + Σ a[k]·b[k] in double (exact while the terms span under 53 bits: the
 * probe's cases do). */
double fx_fp8_dot_exact(const float *a, const float *b, int n, float c);

/* Text form, the one the probe prints and this parser reads:
 *   "G=32 B=13 term=rz c=join out=rz emax=value"   (term/out: rz rd rn; c: join fp32;
 *   emax: value fields). Returns 0 on success, -1 (and leaves *out alone) otherwise. */
int fx_fp8_acc_parse(const char *text, fx_fp8_acc_params *out);
void fx_fp8_acc_format(const fx_fp8_acc_params *prm, char *buf, size_t size);

/* One plain-words sentence for the summary ("products aligned to ..."). */
void fx_fp8_acc_describe(const fx_fp8_acc_params *prm, int k, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
