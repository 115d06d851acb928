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

static uint32_t float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
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
uint16_t fx_float_to_bf16(float x)
{
    uint32_t u = float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)        /* NaN: keep the sign, force a quiet */
        return (uint16_t)((u >> 16) | 0x0040u); /* mantissa bit so it stays NaN       */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return (uint16_t)(u >> 16);
}

float fx_bf16_to_float(uint16_t h)
{
    return bits_float((uint32_t)h << 16);
}

/* fp16: 1 sign, 5 exponent bits (bias 15), 10 mantissa bits; normals from 2^-14,
 * subnormals in steps of 2^-24, largest finite 65504. */
uint16_t fx_float_to_fp16(float x)
{
    uint32_t u = float_bits(x);
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
        return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((e - 15 + 127) << 23) | (mant << 13));
}

uint16_t fx_float_to_bits(fx_dtype dt, float x)
{
    return dt == FX_FP16 ? fx_float_to_fp16(x) : fx_float_to_bf16(x);
}

float fx_bits_to_float(fx_dtype dt, uint16_t h)
{
    return dt == FX_FP16 ? fx_fp16_to_float(h) : fx_bf16_to_float(h);
}

float fx_round(fx_dtype dt, float x)
{
    return fx_bits_to_float(dt, fx_float_to_bits(dt, x));
}

double fx_dtype_epsilon(fx_dtype dt)
{
    /* Half the spacing at 1: 2^-(mantissa bits + 1). */
    return dt == FX_FP16 ? 0x1p-11 : 0x1p-8;
}

double fx_dtype_max(fx_dtype dt)
{
    return dt == FX_FP16 ? 65504.0 : 0x1.fep127;
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

/* ---- generator --------------------------------------------------------------------- */

#define FX_GOLDEN_GAMMA 0x9e3779b97f4a7c15ull /* splitmix64's increment: 2^64 / golden ratio */

/* splitmix64's output function (Steele, Lea, Flood, "Fast splittable pseudorandom
 * number generators", OOPSLA 2014; constants of Vigna's splitmix64.c). */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* splitmix64's n-th output from state `key` is mix64(key + (n + 1)·gamma): the state
 * is a counter, so any element can be drawn directly. Each (seed, stream) gets its own
 * key by mixing both, so streams do not overlap in any useful sense. */
uint64_t fx_rng_u64(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t key = mix64(seed ^ mix64(stream + FX_GOLDEN_GAMMA));
    return mix64(key + (index + 1) * FX_GOLDEN_GAMMA);
}

double fx_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    /* The top 52 bits k, centred in their interval: (k + 0.5)/2^52 lies in
     * [2^-53, 1 - 2^-53], never 0 or 1, so log() below is always finite. 52 and not 53
     * bits because k + 0.5 must be exact: below 2^52 doubles have room for the half. */
    return ((double)(fx_rng_u64(seed, stream, index) >> 12) + 0.5) * 0x1p-52;
}

#define FX_TWO_PI 6.283185307179586476925286766559

/* Box–Muller from the uniforms at 2·index and 2·index + 1 of the stream. Only the
 * cosine half is used, so that the normal at `index` depends on nothing else. */
double fx_rng_normal(uint64_t seed, uint64_t stream, uint64_t index)
{
    double u1 = fx_rng_uniform(seed, stream, 2 * index);
    double u2 = fx_rng_uniform(seed, stream, 2 * index + 1);
    return sqrt(-2.0 * log(u1)) * cos(FX_TWO_PI * u2);
}

/* ---- input distributions ----------------------------------------------------------- */

/* Each tensor draws from its own streams: (id << 8) | part, where part is one of these. */
enum { FX_PART_BASE = 0, FX_PART_OUTLIER_PICK = 1, FX_PART_OUTLIER_VALUE = 2 };

#define FX_OUTLIER_RATE 0.001 /* FA3 paper, Table 3: Bernoulli(0.001)                  */
#define FX_OUTLIER_STD 10.0   /* N(0, 100): standard deviation 10                       */
#define FX_LARGE_STD 8.0      /* Q, K ~ N(0, 8²): logits 64x those of N(0, 1) inputs   */

static uint64_t stream_of(fx_tensor_id id, int part)
{
    return ((uint64_t)id << 8) | (uint64_t)part;
}

double fx_dist_qk_sigma(fx_dist d)
{
    switch (d) {
    case FX_DIST_OUTLIERS: return sqrt(1.0 + FX_OUTLIER_STD * FX_OUTLIER_STD);
    case FX_DIST_LARGE_LOGITS: return FX_LARGE_STD;
    default: return 1.0;
    }
}

/* Element i of tensor id drawn from p->dist, before qk_scale and rounding. */
static double draw_dist(const fx_problem *p, fx_tensor_id id, uint64_t i)
{
    double x = fx_rng_normal(p->seed, stream_of(id, FX_PART_BASE), i);
    switch (p->dist) {
    case FX_DIST_OUTLIERS:
        if (fx_rng_uniform(p->seed, stream_of(id, FX_PART_OUTLIER_PICK), i) < FX_OUTLIER_RATE)
            x += FX_OUTLIER_STD * fx_rng_normal(p->seed, stream_of(id, FX_PART_OUTLIER_VALUE), i);
        return x;
    case FX_DIST_LARGE_LOGITS: return (id == FX_T_Q || id == FX_T_K) ? FX_LARGE_STD * x : x;
    default: return x;
    }
}

/* Element i of tensor id, before rounding to the dtype: Q and K times qk_scale, in double
 * (exact at qk_scale 1, so the default inputs are those of a build without the option). */
static double draw(const fx_problem *p, fx_tensor_id id, uint64_t i)
{
    const double x = draw_dist(p, id, i);
    return (id == FX_T_Q || id == FX_T_K) ? p->qk_scale * x : x;
}

void fx_fill(const fx_problem *p, fx_tensor_id id, float *x, size_t n)
{
/* Each element depends only on (seed, id, index): the loop may run in any order. */
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++)
        x[i] = fx_round(p->dtype, (float)draw(p, id, (uint64_t)i));
}

void fx_fill_bits(const fx_problem *p, fx_tensor_id id, uint16_t *bits, size_t n)
{
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < (long long)n; i++)
        bits[i] = fx_float_to_bits(p->dtype, (float)draw(p, id, (uint64_t)i));
}

uint64_t fx_fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    /* Mixed, so that two runs a nanosecond apart still get unrelated seeds; the top bits
     * are cleared so the seed prints short enough to retype. */
    return mix64(t ^ mix64((uint64_t)getpid())) >> 16;
}
