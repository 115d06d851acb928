/*
 * fx_draw.h — the inputs' numbers, as functions of (seed, tensor, index) alone, written
 * once for the host (fx_host.c: fx_fill, fx_fill_bits) and the device (fx_fill.cu:
 * fx_fill_bits_device), so that a run that only times can draw its inputs on the GPU and
 * get the numbers a checked run draws on the host.
 *
 * Host and device run the same source; the two can still part in the last bit where the
 * device's double log or cos differs from the host's libm (the CUDA C Programming Guide,
 * "Mathematical Functions", allows log 1 ulp and cos 2 ulp of error) and the difference
 * survives the rounding to float and then to the dtype: a double's last bit decides a
 * float's rounding about once in 2^29 elements, and a float's last bit a bf16's once in
 * 2^16. fx_fill.cu is compiled without FMA contraction (-fmad=false) so that the device
 * rounds each product and sum as the host does. Every checked run compares the two fills
 * (fx_inputs_check_device_fill, from fx_run_case), so a difference would be seen, not
 * assumed away.
 */
#ifndef FX_DRAW_H
#define FX_DRAW_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fx_problem.h"

#ifdef __CUDACC__
#define FX_DRAW_FN static __host__ __device__ inline
#else
#define FX_DRAW_FN static inline
#endif

/* Which tensor a fill is for: each has its own stream of numbers. */
typedef enum fx_tensor_id { FX_T_Q = 1, FX_T_K, FX_T_V, FX_T_DO } fx_tensor_id;

/* ---- float to bf16/fp16 bits, round to nearest, ties to even ------------------------ */

FX_DRAW_FN uint32_t fx_draw_float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* The float whose bit pattern is u (the inverse of fx_draw_float_bits). */
FX_DRAW_FN float fx_draw_bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* bf16 is the top half of a float: same sign and 8-bit exponent, 7 mantissa bits.
 * Rounding adds just under half of the dropped 16 bits, plus 1 when the kept part is
 * odd, so an exact tie (low half 0x8000) rounds to the even neighbour. A carry out of
 * the mantissa increments the exponent, which is exactly the rounding up to the next
 * binade, and from the largest finite float it gives inf. */
FX_DRAW_FN uint16_t fx_draw_to_bf16(float x)
{
    uint32_t u = fx_draw_float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)        /* NaN: keep the sign, force a quiet */
        return (uint16_t)((u >> 16) | 0x0040u); /* mantissa bit so it stays NaN       */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return (uint16_t)(u >> 16);
}

/* fp16: 1 sign, 5 exponent bits (bias 15), 10 mantissa bits; normals from 2^-14,
 * subnormals in steps of 2^-24, largest finite 65504. */
FX_DRAW_FN uint16_t fx_draw_to_fp16(float x)
{
    uint32_t u = fx_draw_float_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN -> quiet NaN */
        return sign | 0x7e00u;
    if (abs == 0x7f800000u) /* ±inf */
        return sign | 0x7c00u;

    int e = (int)(abs >> 23) - 127; /* unbiased exponent of x */
    uint32_t mant = abs & 0x7fffffu;
    if (e > 15) /* |x| >= 2^16: past 65504, inf */
        return sign | 0x7c00u;

    if (e >= -14) {
        /* Normal: keep 10 of the 23 mantissa bits, round on the 13 dropped ones. The
         * sum below may carry into the exponent (correct rounding up), and to 0x7c00
         * (inf) from 65520 upwards, which is exactly IEEE's overflow threshold. */
        uint32_t h = ((uint32_t)(e + 15) << 10) | (mant >> 13);
        uint32_t dropped = mant & 0x1fffu;
        if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u)))
            h++;
        return sign | (uint16_t)h;
    }

    /* Subnormal (or zero): the value in units of 2^-24 is (2^23 + mant)·2^(e + 1),
     * i.e. the 24-bit significand shifted right by -(e + 1) >= 14. Shifts past 24
     * leave less than half a unit: zero. Float subnormals (e = -127) land there. */
    int shift = -(e + 1);
    if (shift > 24)
        return sign;
    uint32_t significand = 0x800000u | mant;
    uint32_t h = significand >> shift;
    uint32_t dropped = significand & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (dropped > half || (dropped == half && (h & 1u)))
        h++; /* may become 0x400, the smallest normal: the right bits too */
    return sign | (uint16_t)h;
}

FX_DRAW_FN uint16_t fx_draw_to_bits(fx_dtype dt, float x)
{
    return dt == FX_FP16 ? fx_draw_to_fp16(x) : fx_draw_to_bf16(x);
}

/* ---- generator ---------------------------------------------------------------------- */

#define FX_GOLDEN_GAMMA 0x9e3779b97f4a7c15ull /* splitmix64's increment: 2^64 / golden ratio */

/* splitmix64's output function (Steele, Lea, Flood, "Fast splittable pseudorandom
 * number generators", OOPSLA 2014; constants of Vigna's splitmix64.c). */
FX_DRAW_FN uint64_t fx_draw_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* splitmix64's n-th output from state `key` is mix64(key + (n + 1)·gamma): the state
 * is a counter, so any element can be drawn directly. Each (seed, stream) gets its own
 * key by mixing both, so streams do not overlap in any useful sense. */
FX_DRAW_FN uint64_t fx_draw_u64(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t key = fx_draw_mix64(seed ^ fx_draw_mix64(stream + FX_GOLDEN_GAMMA));
    return fx_draw_mix64(key + (index + 1) * FX_GOLDEN_GAMMA);
}

FX_DRAW_FN double fx_draw_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    /* The top 52 bits k, centred in their interval: (k + 0.5)/2^52 lies in
     * [2^-53, 1 - 2^-53], never 0 or 1, so log() below is always finite. 52 and not 53
     * bits because k + 0.5 must be exact: below 2^52 doubles have room for the half. */
    return ((double)(fx_draw_u64(seed, stream, index) >> 12) + 0.5) * 0x1p-52;
}

#define FX_TWO_PI 6.283185307179586476925286766559

/* Box–Muller from the uniforms at 2·index and 2·index + 1 of the stream. Only the
 * cosine half is used, so that the normal at `index` depends on nothing else. */
FX_DRAW_FN double fx_draw_normal(uint64_t seed, uint64_t stream, uint64_t index)
{
    double u1 = fx_draw_uniform(seed, stream, 2 * index);
    double u2 = fx_draw_uniform(seed, stream, 2 * index + 1);
    return sqrt(-2.0 * log(u1)) * cos(FX_TWO_PI * u2);
}

/* ---- input distributions ------------------------------------------------------------ */

/* Each tensor draws from its own streams: (id << 8) | part, where part is one of these. */
enum { FX_PART_BASE = 0, FX_PART_OUTLIER_PICK = 1, FX_PART_OUTLIER_VALUE = 2 };

#define FX_OUTLIER_RATE 0.001 /* FA3 paper, Table 3: Bernoulli(0.001)                  */
#define FX_OUTLIER_STD 10.0   /* N(0, 100): standard deviation 10                       */
#define FX_LARGE_STD 8.0      /* Q, K ~ N(0, 8²): logits 64x those of N(0, 1) inputs   */

FX_DRAW_FN uint64_t fx_draw_stream(fx_tensor_id id, int part)
{
    return ((uint64_t)id << 8) | (uint64_t)part;
}

/* Element i of tensor id drawn from p->dist, before qk_scale and rounding. */
FX_DRAW_FN double fx_draw_dist(const fx_problem *p, fx_tensor_id id, uint64_t i)
{
    double x = fx_draw_normal(p->seed, fx_draw_stream(id, FX_PART_BASE), i);
    switch (p->dist) {
    case FX_DIST_OUTLIERS:
        if (fx_draw_uniform(p->seed, fx_draw_stream(id, FX_PART_OUTLIER_PICK), i) < FX_OUTLIER_RATE)
            x += FX_OUTLIER_STD *
                 fx_draw_normal(p->seed, fx_draw_stream(id, FX_PART_OUTLIER_VALUE), i);
        return x;
    case FX_DIST_LARGE_LOGITS: return (id == FX_T_Q || id == FX_T_K) ? FX_LARGE_STD * x : x;
    default: return x;
    }
}

/* Element i of tensor id, before rounding to the dtype: Q and K times qk_scale, in double
 * (exact at qk_scale 1, so the default inputs are those of a build without the option). */
FX_DRAW_FN double fx_draw(const fx_problem *p, fx_tensor_id id, uint64_t i)
{
    const double x = fx_draw_dist(p, id, i);
    return (id == FX_T_Q || id == FX_T_K) ? p->qk_scale * x : x;
}

#endif /* FX_DRAW_H */
