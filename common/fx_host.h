/*
 * fx_host.h — host-side numbers: bf16/fp16 conversions, the seeded input generator.
 *
 * Host tensors are plain arrays: `float` holding values already rounded to the
 * problem's dtype (what the reference and CPU models read) and `uint16_t` holding
 * the same values' bits (what is copied to the device).
 */
#ifndef FX_HOST_H
#define FX_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "fx_draw.h" /* fx_tensor_id, and the numbers themselves */
#include "fx_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* IEEE round-to-nearest-even conversions; NaN stays NaN, overflow gives ±inf. */
uint16_t fx_float_to_bf16(float x);
float fx_bf16_to_float(uint16_t h);
uint16_t fx_float_to_fp16(float x);
float fx_fp16_to_float(uint16_t h);

/* The 16-bit dtypes only (FX_FP16, else bf16): e4m3 has its own, fx_fp8.h. */
uint16_t fx_float_to_bits(fx_dtype dt, float x);
float fx_bits_to_float(fx_dtype dt, uint16_t h);
/* Round x to the nearest value representable in dt, returned as float. */
float fx_round(fx_dtype dt, float x);
/* a·b in fp32 rounded toward +inf, as CUDA's __fmul_ru (the kernels' R = m·c rounded up; PTX
 * ISA mul.rp.f32): the product rounded to nearest, moved one float up where that fell below
 * the exact product (a float product is exact in a double). Overflow: +inf above FLT_MAX,
 * −FLT_MAX below −FLT_MAX; −inf·b (b > 0) stays −inf; NaN stays NaN. No error. */
float fx_mul_round_up(float a, float b);
/* Unit roundoff of dt (2^-8 for bf16, 2^-11 for fp16). */
double fx_dtype_epsilon(fx_dtype dt);
/* The largest finite value of dt: 65504 for fp16, (2 - 2^-7)·2^127 ≈ 3.39e38 for bf16. */
double fx_dtype_max(fx_dtype dt);

/* Converts n elements between float and dt's bits. */
void fx_to_bits(fx_dtype dt, const float *x, uint16_t *out, size_t n);
void fx_from_bits(fx_dtype dt, const uint16_t *h, float *out, size_t n);

/* Counter-based generator (splitmix64): the same (seed, stream, index) always gives
 * the same number, whatever order or thread asks. */
uint64_t fx_rng_u64(uint64_t seed, uint64_t stream, uint64_t index);
double fx_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index); /* in (0, 1)   */
double fx_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);  /* N(0, 1)     */
/* (fx_rng_normal: Box–Muller on the uniforms at 2·index and 2·index + 1 of the stream.) */

/* The standard deviation of the widest normal that Q and K elements are drawn from under
 * d, before qk_scale: 1 (normal), sqrt(1 + 10²) (outliers: an outlier element is
 * N(0,1) + N(0,10²)), 8 (large-logits). fx_options bounds --qk-scale by it. */
double fx_dist_qk_sigma(fx_dist d);

/* Fills x[0..n) with p->dist for tensor `id`, from p->seed, times p->qk_scale for Q and K,
 * rounded to p->dtype.
 * Element i depends only on (p->seed, id, i): fills of any length agree on their common
 * prefix, whatever the thread count (the loop runs under OpenMP). */
void fx_fill(const fx_problem *p, fx_tensor_id id, float *x, size_t n);

/* The dtype bits of fx_fill's values, without the float array: bits[i] is
 * fx_float_to_bits(p->dtype, x[i]) of the x[i] that fx_fill writes (rounding an already
 * rounded value changes nothing, so the bits are the same). The host's statement of what
 * a run that only times draws on the device (fx_fill_bits_device, fx_fill.h):
 * tests/unit/test_host.c holds it to fx_fill bit for bit, and every checked GPU run holds
 * the device's fill to fx_fill's bits (fx_inputs_check_device_fill). */
void fx_fill_bits(const fx_problem *p, fx_tensor_id id, uint16_t *bits, size_t n);

/* A fresh seed from the clock and pid, for --fuzz. */
uint64_t fx_fresh_seed(void);

#ifdef __cplusplus
}
#endif
#endif
