/*
 * fx_fp8.c — e4m3 by bit manipulation, the three scalings and incoherent processing
 * (fx_fp8.h says what each is and where it comes from).
 *
 * The conversion is written out on the float's bits, as fx_draw.h's bf16 and fp16 ones are,
 * so that it behaves the same with every host compiler and a reader sees the rounding.
 */
#include "fx_fp8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_draw.h"

#ifndef _OPENMP
/* The omp pragmas only spread independent rows over threads; without OpenMP the loops run
 * serially and give the same numbers. */
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

/* ---- e4m3 ----------------------------------------------------------------------------- */

uint8_t fx_e4m3_from_float(float x)
{
    const uint32_t u = fx_draw_float_bits(x);
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN: the canonical 0x7F, whatever x's sign (as the H200 does) */
        return FX_E4M3_NAN;
    /* .satfinite: past 448 (inf included) the result is 448. Between 448 and 464, the
     * midpoint to where a next binade's 480 would be, rounding to nearest gives 448 anyway;
     * above it plain rounding would leave the format, which is what saturation replaces. */
    if (abs > 0x43e00000u) /* 448.0f */
        return sign | 0x7eu;

    const int e = (int)(abs >> 23) - 127; /* unbiased exponent of x */
    const uint32_t mant = abs & 0x7fffffu;
    if (e >= -6) {
        /* Normal: keep 3 of the 23 mantissa bits and round on the 20 dropped ones. A carry
         * out of the mantissa increments the exponent field, which is the correct rounding
         * up to the next binade; it cannot reach 0x7F here, since |x| <= 448 = 0x7E. */
        uint32_t h = ((uint32_t)(e + 7) << 3) | (mant >> 20);
        const uint32_t dropped = mant & 0xfffffu;
        if (dropped > 0x80000u || (dropped == 0x80000u && (h & 1u)))
            h++;
        return sign | (uint8_t)h;
    }
    /* Subnormal (or zero): |x| in units of 2^-9 is (2^23 + mant)·2^(e − 14), the 24-bit
     * significand shifted right by 14 − e >= 21. Past 24 the value is below half a unit
     * (2^-10): zero, float subnormals (e = -127) included. The rounding may carry into
     * 0x08, the smallest normal 2^-6, whose bits those are. */
    const int shift = 14 - e;
    if (shift > 24)
        return sign;
    const uint32_t significand = 0x800000u | mant;
    uint32_t h = significand >> shift;
    const uint32_t dropped = significand & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (dropped > half || (dropped == half && (h & 1u)))
        h++;
    return sign | (uint8_t)h;
}

float fx_e4m3_to_float(uint8_t code)
{
    const uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    const uint32_t e = (code >> 3) & 0xfu;
    const uint32_t mant = code & 0x7u;
    if (e == 0xfu && mant == 0x7u) /* S.1111.111: NaN (no infinity in e4m3) */
        return fx_draw_bits_float(sign | 0x7fc00000u);
    if (e == 0) { /* zero or subnormal: mant·2^-9, exact */
        const float v = (float)mant * FX_E4M3_MIN_SUBNORMAL;
        return sign ? -v : v;
    }
    /* (1 + mant/8)·2^(e − 7): the float with exponent e − 7 and mant on top of its mantissa */
    return fx_draw_bits_float(sign | ((e - 7u + 127u) << 23) | (mant << 20));
}

float fx_e4m3_round(float x)
{
    return fx_e4m3_to_float(fx_e4m3_from_float(x));
}

/* ---- tiles ---------------------------------------------------------------------------- */

fx_fp8_tiles fx_fp8_tiles_for(int head_dim)
{
    switch (head_dim) {
    case 64: return (fx_fp8_tiles){192, 160};
    case 128: return (fx_fp8_tiles){128, 224};
    case 256: return (fx_fp8_tiles){128, 128};
    default: return (fx_fp8_tiles){0, 0};
    }
}

/* ---- quantization --------------------------------------------------------------------- */

const char *fx_fp8_scaling_name(fx_fp8_scaling s)
{
    switch (s) {
    case FX_FP8_PER_TENSOR: return "per-tensor";
    case FX_FP8_PER_HEAD: return "per-head";
    case FX_FP8_PER_BLOCK: return "per-block";
    default: return "?";
    }
}

static void *xcalloc(size_t n, size_t size)
{
    void *ptr = calloc(n ? n : 1, size);
    if (!ptr) {
        fprintf(stderr, "fx_fp8: out of host memory (%zu elements of %zu bytes)\n", n, size);
        abort();
    }
    return ptr;
}

fx_fp8_tensor fx_fp8_tensor_alloc(int batch, int seqlen, int heads, int head_dim, int block_rows)
{
    if (batch <= 0 || seqlen <= 0 || heads <= 0 || head_dim <= 0 || block_rows <= 0) {
        fprintf(stderr, "fx_fp8_tensor_alloc: sizes must be > 0 (%d %d %d %d, blocks of %d)\n",
                batch, seqlen, heads, head_dim, block_rows);
        abort();
    }
    fx_fp8_tensor t = {batch, seqlen, heads, head_dim, block_rows, NULL, NULL};
    t.codes = xcalloc(fx_fp8_tensor_numel(&t), 1);
    t.descale = xcalloc(fx_fp8_tensor_descales(&t), sizeof(float));
    return t;
}

void fx_fp8_tensor_free(fx_fp8_tensor *t)
{
    free(t->codes);
    free(t->descale);
    t->codes = NULL;
    t->descale = NULL;
}

size_t fx_fp8_tensor_numel(const fx_fp8_tensor *t)
{
    return (size_t)t->batch * t->seqlen * t->heads * t->head_dim;
}

int fx_fp8_tensor_blocks(const fx_fp8_tensor *t)
{
    return (t->seqlen + t->block_rows - 1) / t->block_rows;
}

size_t fx_fp8_tensor_descales(const fx_fp8_tensor *t)
{
    return (size_t)t->batch * t->heads * fx_fp8_tensor_blocks(t);
}

float fx_fp8_descale(float amax)
{
    /* amax/448 could only underflow to 0 for amax below 448·2^-149, a value no block of
     * finite inputs is scaled from in practice; it then quantizes to 0 like a zero block. */
    return amax / FX_E4M3_MAX;
}

/* Element (b, row, h, 0) of a contiguous [batch, seqlen, heads, head_dim] tensor. */
static size_t row_at(const fx_fp8_tensor *t, int b, int row, int h)
{
    return (((size_t)b * t->seqlen + row) * t->heads + h) * t->head_dim;
}

float fx_fp8_row_descale(const fx_fp8_tensor *t, int b, int row, int h)
{
    return t->descale[((size_t)b * t->heads + h) * fx_fp8_tensor_blocks(t) + row / t->block_rows];
}

/* The largest |x| over rows [r0, r1) of head h of batch b. */
static float block_amax(const fx_fp8_tensor *t, const float *x, int b, int h, int r0, int r1)
{
    float amax = 0.0f;
    for (int row = r0; row < r1; ++row) {
        const float *xr = x + row_at(t, b, row, h);
        for (int d = 0; d < t->head_dim; ++d)
            amax = fmaxf(amax, fabsf(xr[d]));
    }
    return amax;
}

void fx_fp8_quantize(const float *x, fx_fp8_scaling scaling, int heads_per_group, fx_fp8_tensor *t)
{
    const int n_blocks = fx_fp8_tensor_blocks(t);
    const int group = scaling == FX_FP8_PER_HEAD ? heads_per_group : 1;
    if (group <= 0 || t->heads % group != 0) {
        fprintf(stderr, "fx_fp8_quantize: %d heads do not split into groups of %d\n", t->heads,
                group);
        abort();
    }
    /* 1. The amax of each block of rows, per (batch, head). */
    float *amax = xcalloc((size_t)t->batch * t->heads * n_blocks, sizeof(float));
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < t->batch; ++b)
        for (int h = 0; h < t->heads; ++h)
            for (int blk = 0; blk < n_blocks; ++blk) {
                const int r0 = blk * t->block_rows;
                const int r1 = r0 + t->block_rows < t->seqlen ? r0 + t->block_rows : t->seqlen;
                amax[((size_t)b * t->heads + h) * n_blocks + blk] = block_amax(t, x, b, h, r0, r1);
            }
    /* 2. Merged over what shares a descale: everything, or a (batch, head group). */
    const size_t per_bh = (size_t)n_blocks;
    if (scaling == FX_FP8_PER_TENSOR) {
        float all = 0.0f;
        for (size_t e = 0; e < (size_t)t->batch * t->heads * per_bh; ++e)
            all = fmaxf(all, amax[e]);
        for (size_t e = 0; e < (size_t)t->batch * t->heads * per_bh; ++e)
            amax[e] = all;
    } else if (scaling == FX_FP8_PER_HEAD) {
        for (int b = 0; b < t->batch; ++b)
            for (int g = 0; g < t->heads / group; ++g) {
                float *first = amax + ((size_t)b * t->heads + (size_t)g * group) * per_bh;
                float m = 0.0f;
                for (size_t e = 0; e < group * per_bh; ++e)
                    m = fmaxf(m, first[e]);
                for (size_t e = 0; e < group * per_bh; ++e)
                    first[e] = m;
            }
    }
    for (size_t e = 0; e < (size_t)t->batch * t->heads * per_bh; ++e)
        t->descale[e] = fx_fp8_descale(amax[e]);
    free(amax);
    /* 3. The codes: x/δ rounded once to fp32, then to e4m3 (the rounding that matters). */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < t->batch; ++b)
        for (int row = 0; row < t->seqlen; ++row)
            for (int h = 0; h < t->heads; ++h) {
                const float delta = fx_fp8_row_descale(t, b, row, h);
                const size_t at = row_at(t, b, row, h);
                for (int d = 0; d < t->head_dim; ++d)
                    t->codes[at + d] = delta == 0.0f ? 0 : fx_e4m3_from_float(x[at + d] / delta);
            }
}

void fx_fp8_dequantize(const fx_fp8_tensor *t, float *x)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < t->batch; ++b)
        for (int row = 0; row < t->seqlen; ++row)
            for (int h = 0; h < t->heads; ++h) {
                const float delta = fx_fp8_row_descale(t, b, row, h);
                const size_t at = row_at(t, b, row, h);
                for (int d = 0; d < t->head_dim; ++d)
                    x[at + d] = delta * fx_e4m3_to_float(t->codes[at + d]);
            }
}

/* ---- incoherent processing ------------------------------------------------------------ */

void fx_fwht_f64(double *x, int n)
{
    /* Pass `half` combines pairs `half` apart: (a, b) → (a + b, a − b). After the passes
     * for half = 1, 2, .., n/2, x holds H_n·x (each pass is one Kronecker factor H_2 of
     * H_n = H_2 ⊗ .. ⊗ H_2, applied along one bit of the index). */
    for (int half = 1; half < n; half *= 2)
        for (int i = 0; i < n; i += 2 * half)
            for (int j = i; j < i + half; ++j) {
                const double a = x[j], b = x[j + half];
                x[j] = a + b;
                x[j + half] = a - b;
            }
}

/* The signs' stream: apart from the input tensors' (fx_draw.h: (tensor id << 8) | part). */
#define FX_FP8_SIGN_STREAM 0x5300u

void fx_fp8_random_signs(uint64_t seed, int head_dim, float *signs)
{
    for (int i = 0; i < head_dim; ++i)
        signs[i] = (fx_draw_u64(seed, FX_FP8_SIGN_STREAM, (uint64_t)i) >> 63) ? -1.0f : 1.0f;
}

static int is_power_of_two(int n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

void fx_fp8_incoherent(float *x, size_t rows, int head_dim, const float *signs)
{
    if (!is_power_of_two(head_dim)) {
        fprintf(stderr, "fx_fp8_incoherent: head_dim %d is not a power of two\n", head_dim);
        abort();
    }
    const double norm = 1.0 / sqrt((double)head_dim);
#pragma omp parallel
    {
        double *row = xcalloc((size_t)head_dim, sizeof(double));
#pragma omp for schedule(static)
        for (long long r = 0; r < (long long)rows; ++r) {
            float *xr = x + (size_t)r * head_dim;
            for (int d = 0; d < head_dim; ++d)
                row[d] = (double)xr[d] * signs[d]; /* x·D */
            fx_fwht_f64(row, head_dim);            /* ·H (symmetric: a row times H is H·row) */
            for (int d = 0; d < head_dim; ++d)
                xr[d] = (float)(row[d] * norm); /* ·1/√d, rounded once to fp32 */
        }
        free(row);
    }
}
