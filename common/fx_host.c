/*
 * fx_host.c — host-side numbers: bf16/fp16 conversions by bit manipulation, the
 * counter-based generator and the input distributions of DESIGN.md.
 *
 * The conversions are written out rather than taken from a compiler's _Float16 or
 * __bf16 so that they behave the same on every host compiler and a reader sees the
 * rounding: IEEE 754 round-to-nearest, ties to even.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getpid */

#include "fx_host.h"

#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef _OPENMP
/* The omp pragmas only spread independent elements over threads; without OpenMP the
 * loops run serially and give the same numbers. */
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

/* The float-to-bits conversions are fx_draw.h's, which the device's fill shares. */
uint16_t fx_float_to_bf16(float x)
{
    return fx_draw_to_bf16(x);
}

float fx_bf16_to_float(uint16_t h)
{
    return fx_draw_bits_float((uint32_t)h << 16);
}

uint16_t fx_float_to_fp16(float x)
{
    return fx_draw_to_fp16(x);
}

float fx_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: mant·2^-24, exact */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (e == 31) /* inf or NaN, payload kept */
        return fx_draw_bits_float(sign | 0x7f800000u | (mant << 13));
    return fx_draw_bits_float(sign | ((e - 15 + 127) << 23) | (mant << 13));
}

uint16_t fx_float_to_bits(fx_dtype dt, float x)
{
    return dt == FX_FP16 ? fx_float_to_fp16(x) : fx_float_to_bf16(x);
}

float fx_bits_to_float(fx_dtype dt, uint16_t h)
{
    return dt == FX_FP16 ? fx_fp16_to_float(h) : fx_bf16_to_float(h);
}

float fx_mul_round_up(float a, float b)
{
    const float r = a * b;
    return (double)r < (double)a * (double)b ? nextafterf(r, INFINITY) : r;
}

float fx_round(fx_dtype dt, float x)
{
    return fx_bits_to_float(dt, fx_float_to_bits(dt, x));
}

double fx_dtype_epsilon(fx_dtype dt)
{
    /* Half the spacing at 1: 2^-(mantissa bits + 1). */
    return dt == FX_FP16 ? 0x1p-11 : dt == FX_E4M3 ? 0x1p-4 : 0x1p-8;
}

double fx_dtype_max(fx_dtype dt)
{
    /* e4m3 inputs are drawn in fp32 and quantized with descales (fx_fp8_case.c): their
     * limit is fp32's, not 448. */
    return dt == FX_FP16 ? 65504.0 : dt == FX_E4M3 ? 0x1.fffffep127 : 0x1.fep127;
}

/* Element by element, so the loops may run in any order (OpenMP where it is there). */
void fx_to_bits(fx_dtype dt, const float *x, uint16_t *out, size_t n)
{
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++)
        out[i] = fx_float_to_bits(dt, x[i]);
}

void fx_from_bits(fx_dtype dt, const uint16_t *h, float *out, size_t n)
{
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++)
        out[i] = fx_bits_to_float(dt, h[i]);
}

/* ---- generator and distributions: fx_draw.h ----------------------------------------- */

uint64_t fx_rng_u64(uint64_t seed, uint64_t stream, uint64_t index)
{
    return fx_draw_u64(seed, stream, index);
}

double fx_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    return fx_draw_uniform(seed, stream, index);
}

double fx_rng_normal(uint64_t seed, uint64_t stream, uint64_t index)
{
    return fx_draw_normal(seed, stream, index);
}

double fx_dist_qk_sigma(fx_dist d)
{
    switch (d) {
    case FX_DIST_OUTLIERS: return sqrt(1.0 + FX_OUTLIER_STD * FX_OUTLIER_STD);
    case FX_DIST_LARGE_LOGITS: return FX_LARGE_STD;
    default: return 1.0;
    }
}

void fx_fill(const fx_problem *p, fx_tensor_id id, float *x, size_t n)
{
/* Each element depends only on (seed, id, index): the loop may run in any order. */
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++)
        x[i] = fx_round(p->dtype, (float)fx_draw(p, id, (uint64_t)i));
}

void fx_fill_bits(const fx_problem *p, fx_tensor_id id, uint16_t *bits, size_t n)
{
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++)
        bits[i] = fx_float_to_bits(p->dtype, (float)fx_draw(p, id, (uint64_t)i));
}

uint64_t fx_fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    /* Mixed, so that two runs a nanosecond apart still get unrelated seeds; the top bits
     * are cleared so the seed prints short enough to retype. */
    return fx_draw_mix64(t ^ fx_draw_mix64((uint64_t)getpid())) >> 16;
}
