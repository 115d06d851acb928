/*
 * fx_fp8_acc.c — the tensor-core accumulation model of fx_fp8_acc.h.
 *
 * Every value is exact until the roundings the model names: a product of two e4m3 (or bf16)
 * values has at most 8 (16) significant bits and is exact in double; a term times 2^(B − emax)
 * is exact (a power of two, far from double's range limits). Rounded to an integer, a product
 * is below 2^(B + 2) in magnitude (its value is below 2^(emax + 2) even when emax is its
 * operands' exponent sum) and C below 2^(B + 1), so a group's sum of at most 32 products and C
 * is below 2^(B + 7.1), exact in double for B <= 45, and one of 64 products for B <= 44: the
 * code keeps B <= 44 when a group holds more than 32 products.
 */
#include "fx_fp8_acc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int exponent_of(double x) /* floor(log2 |x|), x != 0 */
{
    int e;
    frexp(x, &e); /* x = m·2^e, 0.5 <= |m| < 1 */
    return e - 1;
}

/* floor(log2 |x|) of a nonzero float, from its bits where it is normal (every e4m3 and bf16
 * value is a normal float): the CPU model calls this for every operand of every product. */
static int exponent_of_float(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const int biased = (int)((u >> 23) & 0xffu);
    return biased != 0 ? biased - 127 : exponent_of((double)x);
}

/* 2^e as a double, exact for -1022 <= e <= 1023 (the shifts here are far inside). */
static double pow2(int e)
{
    return ldexp(1.0, e);
}

static double round_int(double x, fx_acc_round r)
{
    switch (r) {
    case FX_ACC_RZ: return trunc(x);
    case FX_ACC_RD: return floor(x);
    default: return nearbyint(x); /* the default rounding mode: nearest, ties to even */
    }
}

/* An exact double to fp32 by r. */
static float to_f32(double x, fx_acc_round r)
{
    float f = (float)x; /* round to nearest, ties to even */
    if (r == FX_ACC_RZ && fabs((double)f) > fabs(x))
        f = nextafterf(f, 0.0f);
    else if (r == FX_ACC_RD && (double)f > x)
        f = nextafterf(f, -INFINITY);
    return f;
}

float fx_fp8_dot_model(const float *a, const float *b, int n, float c, const fx_fp8_acc_params *prm)
{
    const int group = prm->group < 1 ? 1 : (prm->group > 64 ? 64 : prm->group);
    int bits = prm->frac_bits < 1 ? 1 : (prm->frac_bits > 45 ? 45 : prm->frac_bits);
    if (group > 32 && bits > 44)
        bits = 44; /* exactness in double (above) */
    float acc = c;
    for (int k0 = 0; k0 < n; k0 += group) {
        const int k1 = k0 + group < n ? k0 + group : n;
        double term[64 + 1];
        int texp[64 + 1];
        int nt = 0;
        for (int k = k0; k < k1 && nt < 64; ++k) {
            const double p = (double)a[k] * (double)b[k];
            if (p == 0.0)
                continue;
            term[nt] = p;
            texp[nt] = prm->emax_fields ? exponent_of_float(a[k]) + exponent_of_float(b[k])
                                        : exponent_of(p);
            ++nt;
        }
        const int join = prm->c_mode == FX_ACC_C_JOIN;
        if (join && acc != 0.0f) {
            term[nt] = acc;
            texp[nt] = exponent_of(acc);
            ++nt;
        }
        if (nt == 0)
            continue; /* nothing to add: acc unchanged (JOIN: acc was 0 or the group empty) */
        int emax = texp[0];
        for (int t = 1; t < nt; ++t)
            emax = texp[t] > emax ? texp[t] : emax;
        const int shift = bits - emax; /* term·2^shift: units of 2^(emax − B) */
        const double up = pow2(shift), down = pow2(-shift); /* exact scalings */
        double sum = 0.0;
        for (int t = 0; t < nt; ++t)
            sum += round_int(term[t] * up, prm->term_round);
        const double exact_sum = sum * down;
        if (join)
            acc = to_f32(exact_sum, prm->out_round);
        else
            acc = acc + to_f32(exact_sum, prm->out_round);
    }
    return acc;
}

double fx_fp8_dot_exact(const float *a, const float *b, int n, float c)
{
    double s = (double)c;
    for (int k = 0; k < n; ++k)
        s += (double)a[k] * (double)b[k];
    return s;
}

static const char *round_name(fx_acc_round r)
{
    return r == FX_ACC_RZ ? "rz" : r == FX_ACC_RD ? "rd" : "rn";
}

static int parse_round(const char *s, fx_acc_round *r)
{
    if (!strcmp(s, "rz"))
        *r = FX_ACC_RZ;
    else if (!strcmp(s, "rd"))
        *r = FX_ACC_RD;
    else if (!strcmp(s, "rn"))
        *r = FX_ACC_RN;
    else
        return -1;
    return 0;
}

int fx_fp8_acc_parse(const char *text, fx_fp8_acc_params *out)
{
    char c_name[8], e_name[8];
    int g, bits;
    char term[8], outr[8];
    if (sscanf(text, " G=%d B=%d term=%7s c=%7s out=%7s emax=%7s", &g, &bits, term, c_name, outr,
               e_name) != 6)
        return -1;
    fx_fp8_acc_params p;
    if (g < 1 || bits < 1 || bits > 45 || parse_round(term, &p.term_round) ||
        parse_round(outr, &p.out_round))
        return -1;
    if (!strcmp(c_name, "join"))
        p.c_mode = FX_ACC_C_JOIN;
    else if (!strcmp(c_name, "fp32"))
        p.c_mode = FX_ACC_C_FP32;
    else
        return -1;
    if (!strcmp(e_name, "value"))
        p.emax_fields = 0;
    else if (!strcmp(e_name, "fields"))
        p.emax_fields = 1;
    else
        return -1;
    p.group = g;
    p.frac_bits = bits;
    *out = p;
    return 0;
}

void fx_fp8_acc_format(const fx_fp8_acc_params *prm, char *buf, size_t size)
{
    snprintf(buf, size, "G=%d B=%d term=%s c=%s out=%s emax=%s", prm->group, prm->frac_bits,
             round_name(prm->term_round), prm->c_mode == FX_ACC_C_JOIN ? "join" : "fp32",
             round_name(prm->out_round), prm->emax_fields ? "fields" : "value");
}

static const char *round_words(fx_acc_round r)
{
    return r == FX_ACC_RZ   ? "truncated toward zero"
           : r == FX_ACC_RD ? "truncated toward -inf (two's complement)"
                            : "rounded to nearest";
}

void fx_fp8_acc_describe(const fx_fp8_acc_params *prm, int k, char *buf, size_t size)
{
    char groups[48];
    if (prm->group >= k)
        snprintf(groups, sizeof groups, "over the whole k=%d", k);
    else
        snprintf(groups, sizeof groups, "over groups of %d consecutive k", prm->group);
    snprintf(buf, size,
             "products aligned to the largest%s exponent %s, %s to %d bits below it; "
             "C: %s; group sum to fp32 %s",
             prm->emax_fields ? " (unnormalised: ea+eb)" : "", groups, round_words(prm->term_round),
             prm->frac_bits,
             prm->c_mode == FX_ACC_C_JOIN
                 ? "one more term of the same alignment (its low bits lost likewise)"
                 : "added after, in fp32 round-to-nearest",
             prm->out_round == FX_ACC_RN ? "to nearest" : round_words(prm->out_round));
}

const fx_fp8_acc_params *fx_fp8_acc_hopper(void)
{
    /* The text form's fields, spelled out (fx_fp8_acc_parse of FX_FP8_ACC_HOPPER_E4M3 gives
     * the same: tests/unit/test_fp8_acc.c checks it). */
    static const fx_fp8_acc_params hopper = {.group = 32,
                                             .frac_bits = 13,
                                             .term_round = FX_ACC_RZ,
                                             .c_mode = FX_ACC_C_JOIN,
                                             .out_round = FX_ACC_RZ,
                                             .emax_fields = 1};
    return &hopper;
}
