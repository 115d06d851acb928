/*
 * fx_options.c — the command line of every stage program (fx_options.h): the table of
 * options, and the parser that reads it.
 */
#include "fx_options.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_host.h" /* fx_dtype_max, fx_dist_qk_sigma */
#include "fx_load.h"

/* Upper bounds of the mode options (docs/harness.md lists them): far above any useful
 * run, low enough that a typo (an extra digit or two) is refused instead of running
 * for hours. --iters is bounded by FX_MAX_ITERS, --spin-us by FX_MAX_SPIN_US. */
enum {
    FX_MAX_REPEAT = 1000000,
    FX_MAX_FUZZ = 1000000,
    FX_MAX_WARMUP = 100000,
    FX_MAX_REF_SLICES_OPTION = 1 << 20, /* the forward uses at most FX_MAX_REF_SLICES */
};

void fx_options_default(fx_options *o)
{
    memset(o, 0, sizeof *o);
    o->problem = fx_problem_default();
    o->check = false; /* fx_main turns check on when no mode is asked for */
    o->repeat = 1;
    o->warmup = 3;
    o->iters = 10;
    o->spin_us = FX_SPIN_US;
    o->ref_slices = 2;
}

/* Rows of the table, each {name, alias, kind, value, lo, hi, field, field2, group, help,
 * default_text}. Sizes are positive ints: fx_problem_validate's element-count check
 * catches products that overflow. */
#define FIELD(f) offsetof(fx_options, f)
#define PROBLEM(f) offsetof(fx_options, problem.f)
#define NONE FX_OPT_NO_FIELD
#define SIZE(name, f1, f2, help)                                                                   \
    name, NULL, FX_OPT_INT, "N", 1, INT_MAX, PROBLEM(f1), f2, FX_OPT_PROBLEM, help, NULL
#define FLAG(name, alias, f, group, help)                                                          \
    name, alias, FX_OPT_FLAG, NULL, 0, 0, f, NONE, group, help, ""
#define COUNT(name, lo, hi, f, help, dflt)                                                         \
    name, NULL, FX_OPT_INT, "N", lo, hi, FIELD(f), NONE, FX_OPT_MODE, help, dflt
#define VALUE(name, kind, value, f, group, help, dflt)                                             \
    name, NULL, kind, value, 0, 0, f, NONE, group, help, dflt

static const fx_option_spec table[] = {
    {SIZE("--batch", batch, NONE, "batch size")},
    {SIZE("--seqlen", seqlen_q, PROBLEM(seqlen_k), "seqlen_q and seqlen_k")},
    {SIZE("--seqlen-q", seqlen_q, NONE, "query rows")},
    {SIZE("--seqlen-k", seqlen_k, NONE, "keys")},
    {"--seqlens-q", NULL, FX_OPT_LENGTHS, "L0,L1,...", 0, 0, FIELD(seqlens_q), FIELD(n_seqlens_q),
     FX_OPT_PROBLEM,
     "a variable-length batch: each sequence's query rows (>= 0), packed\n"
     "without padding; sets batch, and seqlen_q to the largest unless given",
     ""},
    {"--seqlens-k", NULL, FX_OPT_LENGTHS, "L0,L1,...", 0, 0, FIELD(seqlens_k), FIELD(n_seqlens_k),
     FX_OPT_PROBLEM, "each sequence's keys (>= 0), as many as --seqlens-q", "--seqlens-q"},
    {"--seqused-k", NULL, FX_OPT_LENGTHS, "L0,L1,...", 0, 0, FIELD(seqused_k), FIELD(n_seqused_k),
     FX_OPT_PROBLEM, "the keys each sequence attends: the first L of its --seqlens-k", "all"},
    {SIZE("--heads", heads_q, PROBLEM(heads_kv), "heads_q and heads_kv")},
    {SIZE("--heads-q", heads_q, NONE, "query heads")},
    {SIZE("--heads-kv", heads_kv, NONE, "K and V heads; heads_q must be a multiple (GQA/MQA)")},
    {SIZE("--head-dim", head_dim, NONE, "head dimension: a multiple of 8 up to 256")},
    {"--head-dim-v", NULL, FX_OPT_INT, "N", 1, INT_MAX, PROBLEM(head_dim_v), NONE, FX_OPT_PROBLEM,
     "V's and O's head dimension where the stage has it (stage 09: 128\n"
     "with head_dim 192): a multiple of 8 up to 256",
     "head_dim"},
    {VALUE("--dtype", FX_OPT_DTYPE, "bf16|fp16|e4m3", PROBLEM(dtype), FX_OPT_PROBLEM,
           "the inputs' and outputs' type; e4m3 (stage 10): Q, K, V drawn in fp32\n"
           "and quantized with descales (amax/448: nothing saturates unless a\n"
           "descale is forced), O in bf16",
           NULL)},
    {VALUE("--fp8-scaling", FX_OPT_SCALING, "per-tensor|per-head|per-block", PROBLEM(fp8_scaling),
           FX_OPT_PROBLEM,
           "e4m3: one descale per tensor, per (batch, KV head), or per tile of\n"
           "kBlockM rows of Q and kBlockN rows of K and V (docs/10_fp8.md)",
           NULL)},
    {FLAG("--hadamard", NULL, PROBLEM(fp8_hadamard), FX_OPT_PROBLEM,
          "e4m3: incoherent processing of Q and K (random signs times the\n"
          "Hadamard matrix over head_dim, a power of two) before quantizing")},
    {FLAG("--fp8-vt", NULL, PROBLEM(fp8_v_transposed), FX_OPT_PROBLEM,
          "e4m3: V given transposed, [batch, heads_kv, head_dim, seqlen_k]\n"
          "(seqlen_k a multiple of 16: TMA's 16-byte row stride); without it\n"
          "V is row-major like K and the kernel transposes it (stage 10)")},
    {FLAG("--causal", NULL, PROBLEM(causal), FX_OPT_PROBLEM, "causal mask, bottom-right aligned")},
    {VALUE("--scale", FX_OPT_REAL, "F", PROBLEM(softmax_scale), FX_OPT_PROBLEM, "softmax scale",
           "1/sqrt(head_dim)")},
    {VALUE("--qk-scale", FX_OPT_REAL, "X", PROBLEM(qk_scale), FX_OPT_PROBLEM,
           "multiply Q and K by X after drawing them, before rounding to the\n"
           "dtype: large logits (at most what keeps 8 sigma finite)",
           NULL)},
    {VALUE("--seed", FX_OPT_SEED, "N", PROBLEM(seed), FX_OPT_PROBLEM,
           "inputs' seed: decimal or 0x hex", NULL)},
    {VALUE("--dist", FX_OPT_DIST, "normal|outliers|large-logits", PROBLEM(dist), FX_OPT_PROBLEM,
           "inputs' distribution (docs/harness.md, \"Inputs\")", NULL)},

    {FLAG("--check", NULL, FIELD(check), FX_OPT_MODE,
          "compare with the fp64 reference (pass rule of common/fx_check.h)\n"
          "and with the previous stage")},
    {FLAG("--bwd", NULL, FIELD(backward), FX_OPT_MODE, "also run and check the backward")},
    {FLAG("--bench", NULL, FIELD(bench), FX_OPT_MODE, "time with CUDA events: the median")},
    {COUNT("--warmup", 0, FX_MAX_WARMUP, warmup, "untimed calls before the timed ones", NULL)},
    {COUNT("--iters", 1, FX_MAX_ITERS, iters, "timed calls", NULL)},
    {COUNT("--spin-us", 0, FX_MAX_SPIN_US, spin_us,
           "GPU spin before each timed call, in microseconds, so that the\n"
           "host's enqueue is not timed (0: none)",
           NULL)},
    {VALUE("--csv", FX_OPT_FILE, "FILE", FIELD(csv), FX_OPT_MODE, "append benchmark rows to FILE",
           "")},
    {COUNT("--repeat", 1, FX_MAX_REPEAT, repeat, "run N times; outputs must be bitwise equal",
           NULL)},
    {COUNT("--fuzz", 1, FX_MAX_FUZZ, fuzz, "N checks, each on a fresh seed (printed)", "off")},
    {FLAG("--self-test", NULL, FIELD(self_test), FX_OPT_MODE,
          "run the stage's GPU self-test of one device part alone, and nothing\n"
          "else (stage 10: the in-kernel V transpose, every byte checked)")},
    {FLAG("--digest", NULL, FIELD(digest), FX_OPT_MODE,
          "print a hash of O and LSE (and of dQ, dK, dV with --bwd): two builds\n"
          "gave the same bits when their digests match")},
    {VALUE("--save", FX_OPT_FILE, "DIR", FIELD(save), FX_OPT_MODE,
           "write the case's inputs (dtype bits; e4m3: the codes, the descales and\n"
           "the fp32 inputs before quantization) and the stage's outputs (fp32) to\n"
           "the folder DIR, made if missing, with problem.txt: another program can\n"
           "then compare its results with the stage's bit for bit (implies --check)",
           "")},
    {VALUE("--load", FX_OPT_FILE, "DIR", FIELD(load), FX_OPT_MODE,
           "run on the inputs in the folder DIR instead of drawn ones: the problem\n"
           "from DIR/problem.txt, Q, K, V (and dO with --bwd) from its .bin files\n"
           "(e4m3: and their descales), as --save writes them (docs/harness.md,\n"
           "\"--load\"; implies --check)",
           "")},
    {FLAG("--matrix", NULL, FIELD(matrix), FX_OPT_MODE,
          "the GPU test matrix generated from the capabilities")},
    {FLAG("--cpu", NULL, FIELD(cpu), FX_OPT_MODE,
          "run the stage's CPU model instead of the GPU (slow: give a small\n"
          "problem, e.g. --batch 1 --seqlen 256 --heads 2)")},
    {COUNT("--ref-slices", 1, FX_MAX_REF_SLICES_OPTION, ref_slices,
           "(batch, head) slices the reference samples on large problems", NULL)},
    {FLAG("--help", "-h", FIELD(help), FX_OPT_MODE, "this text")},
};

#undef FIELD
#undef PROBLEM
#undef NONE
#undef SIZE
#undef FLAG
#undef COUNT
#undef VALUE

const fx_option_spec *fx_option_table(size_t *count)
{
    *count = sizeof table / sizeof table[0];
    return table;
}

const fx_option_spec *fx_option_find(const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
        if (!strcmp(name, table[i].name) || (table[i].alias && !strcmp(name, table[i].alias)))
            return &table[i];
    return NULL;
}

/* The field at `offset` of o, as type T. */
#define AT(T, o, offset) ((T *)((char *)(o) + (offset)))

void fx_option_default_text(const fx_option_spec *s, char *buf, size_t len)
{
    if (s->default_text) {
        snprintf(buf, len, "%s", s->default_text);
        return;
    }
    fx_options d;
    fx_options_default(&d);
    switch (s->kind) {
    case FX_OPT_INT: snprintf(buf, len, "%d", *AT(int, &d, s->field)); break;
    case FX_OPT_REAL: snprintf(buf, len, "%g", *AT(double, &d, s->field)); break;
    case FX_OPT_SEED:
        snprintf(buf, len, "%llu", (unsigned long long)*AT(uint64_t, &d, s->field));
        break;
    case FX_OPT_DTYPE: snprintf(buf, len, "%s", fx_dtype_name(*AT(fx_dtype, &d, s->field))); break;
    case FX_OPT_DIST: snprintf(buf, len, "%s", fx_dist_name(*AT(fx_dist, &d, s->field))); break;
    case FX_OPT_SCALING:
        snprintf(buf, len, "%s", fx_fp8_scaling_name(*AT(fx_fp8_scaling, &d, s->field)));
        break;
    default: snprintf(buf, len, "%s", ""); break;
    }
}

/* Strict integer parse: the whole string, base 10, within [lo, hi]. */
static int parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out,
                     char *why, size_t why_len)
{
    /* strtoll would skip blanks and take a '+': a size is digits, with a '-' only so
     * that the message can name a negative value. */
    if (!((s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] >= '0' && s[1] <= '9'))) {
        snprintf(why, why_len, "%s: '%s' is not an integer", opt, s);
        return FX_EXIT_USAGE;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        snprintf(why, why_len, "%s: '%s' is not an integer", opt, s);
        return FX_EXIT_USAGE;
    }
    if (v < lo || v > hi) {
        snprintf(why, why_len, "%s: %lld is out of range [%lld, %lld]", opt, v, lo, hi);
        return FX_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

/* A finite number > 0. */
static int parse_positive(const char *opt, const char *s, double *out, char *why, size_t why_len)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v)) {
        snprintf(why, why_len, "%s: '%s' is not a finite number", opt, s);
        return FX_EXIT_USAGE;
    }
    if (v <= 0) {
        snprintf(why, why_len, "%s: %g must be positive", opt, v);
        return FX_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

/* Decimal, or hexadecimal after 0x (a leading 0 is not octal). strtoull would also take
 * blanks and a sign, after the 0x too: the digits must start with one. */
static int parse_seed(const char *opt, const char *s, uint64_t *out, char *why, size_t why_len)
{
    char *end = NULL;
    errno = 0;
    bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const char *digits = hex ? s + 2 : s;
    unsigned long long v = strtoull(digits, &end, hex ? 16 : 10);
    if (errno != 0 || end == digits || *end != '\0' ||
        !(hex ? isxdigit((unsigned char)digits[0]) : isdigit((unsigned char)digits[0]))) {
        snprintf(why, why_len, "%s: '%s' is not an unsigned integer (decimal or 0x hex)", opt, s);
        return FX_EXIT_USAGE;
    }
    *out = (uint64_t)v;
    return 0;
}

/* A comma list of lengths >= 0 into out[FX_VARLEN_MAX_SEQS]; *n gets the count. */
static int parse_lengths(const char *opt, const char *s, int *out, int *n, char *why,
                         size_t why_len)
{
    int count = 0;
    for (const char *at = s;; ++count) {
        const char *comma = strchr(at, ',');
        size_t len = comma ? (size_t)(comma - at) : strlen(at);
        char item[32];
        if (count == FX_VARLEN_MAX_SEQS) {
            snprintf(why, why_len, "%s: more than %d sequences (FX_VARLEN_MAX_SEQS)", opt,
                     FX_VARLEN_MAX_SEQS);
            return FX_EXIT_USAGE;
        }
        /* A plain decimal number: leading zeros do not make it long, and more than 10
         * significant digits is a length too large, not a malformed list. */
        size_t n_digits = 0;
        while (n_digits < len && isdigit((unsigned char)at[n_digits]))
            ++n_digits;
        if (len > 0 && n_digits == len) {
            while (len > 1 && at[0] == '0') {
                ++at;
                --len;
            }
            if (len > 10) {
                snprintf(why, why_len, "%s: sequence %d's length %.*s%s is above %d (32-bit rows)",
                         opt, count, (int)(len > 20 ? 20 : len), at, len > 20 ? "..." : "",
                         INT_MAX);
                return FX_EXIT_USAGE;
            }
        }
        if (len == 0 || len >= sizeof item) {
            snprintf(why, why_len,
                     "%s: '%s' is not a comma list of lengths (sequence %d's is '%.*s')", opt, s,
                     count, (int)(len < sizeof item ? len : sizeof item - 1), at);
            return FX_EXIT_USAGE;
        }
        memcpy(item, at, len);
        item[len] = '\0';
        long long v = 0;
        char one[96];
        if (parse_int(opt, item, LLONG_MIN, LLONG_MAX, &v, one, sizeof one)) {
            snprintf(why, why_len,
                     "%s: '%s' is not a comma list of lengths (sequence %d's is '%s')", opt, s,
                     count, item);
            return FX_EXIT_USAGE;
        }
        if (v < 0) {
            snprintf(why, why_len, "%s: sequence %d's length %lld is negative", opt, count, v);
            return FX_EXIT_USAGE;
        }
        if (v > INT_MAX) {
            snprintf(why, why_len, "%s: sequence %d's length %lld is above %d (32-bit rows)", opt,
                     count, v, INT_MAX);
            return FX_EXIT_USAGE;
        }
        out[count] = (int)v;
        if (!comma)
            break;
        at = comma + 1;
    }
    *n = count + 1;
    return 0;
}

/* Parses `val` by s->kind and stores it in s's field(s) of o. */
static int set_value(const fx_option_spec *s, const char *val, fx_options *o, char *why,
                     size_t why_len)
{
    int rc = 0;
    switch (s->kind) {
    case FX_OPT_INT: {
        long long n = 0;
        if ((rc = parse_int(s->name, val, s->lo, s->hi, &n, why, why_len)))
            return rc;
        *AT(int, o, s->field) = (int)n;
        if (s->field2 != FX_OPT_NO_FIELD)
            *AT(int, o, s->field2) = (int)n;
        return 0;
    }
    case FX_OPT_REAL: return parse_positive(s->name, val, AT(double, o, s->field), why, why_len);
    case FX_OPT_SEED:
        if ((rc = parse_seed(s->name, val, AT(uint64_t, o, s->field), why, why_len)))
            return rc;
        o->seed_given = true;
        return 0;
    case FX_OPT_DTYPE:
        if (fx_dtype_parse(val, AT(fx_dtype, o, s->field)) == 0)
            return 0;
        snprintf(why, why_len, "%s: '%s' is not one of bf16, fp16, e4m3", s->name, val);
        return FX_EXIT_USAGE;
    case FX_OPT_SCALING:
        for (int m = 0; m < FX_FP8_SCALING_COUNT; ++m)
            if (strcmp(val, fx_fp8_scaling_name((fx_fp8_scaling)m)) == 0) {
                *AT(fx_fp8_scaling, o, s->field) = (fx_fp8_scaling)m;
                return 0;
            }
        snprintf(why, why_len, "%s: '%s' is not one of per-tensor, per-head, per-block", s->name,
                 val);
        return FX_EXIT_USAGE;
    case FX_OPT_DIST:
        if (fx_dist_parse(val, AT(fx_dist, o, s->field)) == 0)
            return 0;
        snprintf(why, why_len, "%s: '%s' is not one of normal, outliers, large-logits", s->name,
                 val);
        return FX_EXIT_USAGE;
    case FX_OPT_FILE:
        if (!val[0]) {
            snprintf(why, why_len, "%s needs a file name", s->name);
            return FX_EXIT_USAGE;
        }
        *AT(const char *, o, s->field) = val;
        return 0;
    case FX_OPT_LENGTHS:
        return parse_lengths(s->name, val, AT(int, o, s->field), AT(int, o, s->field2), why,
                             why_len);
    case FX_OPT_FLAG: break;
    }
    snprintf(why, why_len, "%s: the option table has no parser for its kind", s->name);
    return FX_EXIT_USAGE;
}

int fx_option_set(const char *name, const char *val, fx_options *o, char *why, size_t why_len)
{
    const fx_option_spec *s = fx_option_find(name);
    if (!s || s->kind == FX_OPT_FLAG) {
        snprintf(why, why_len, "%s: not an option that takes a value", name);
        return FX_EXIT_USAGE;
    }
    return set_value(s, val, o, why, why_len);
}

/* X·FX_QK_SCALE_SIGMAS·sigma must stay below the dtype's largest finite value. */
static int check_qk_scale(const fx_problem *p, char *why, size_t why_len)
{
    const double sigma = fx_dist_qk_sigma(p->dist), max = fx_dtype_max(p->dtype);
    const double limit = max / (FX_QK_SCALE_SIGMAS * sigma);
    if (p->qk_scale <= limit)
        return 0;
    snprintf(why, why_len,
             "--qk-scale: %g overflows %s: Q and K of the %s distribution (sigma %.4g) times %g "
             "pass %s's largest finite value %g at %g standard deviations; at most %.6g",
             p->qk_scale, fx_dtype_name(p->dtype), fx_dist_name(p->dist), sigma, p->qk_scale,
             fx_dtype_name(p->dtype), max, FX_QK_SCALE_SIGMAS, limit);
    return FX_EXIT_USAGE;
}

/* The kernels accumulate S = Q·Kᵀ in fp32 and run the softmax in fp32 log2 units: the logits
 * S·scale·log2(e) must be finite there. Bounded with Q and K at FX_QK_SCALE_SIGMAS standard
 * deviations in every element (|S| <= head_dim · (8σX)²): a problem whose bound reaches
 * 2^127 is refused, naming it. Below it every finite input gives a finite O and LSE. */
static int check_logit_range(const fx_problem *p, char *why, size_t why_len)
{
    const double sigma = fx_dist_qk_sigma(p->dist);
    const double scale = p->softmax_scale > 0.0 ? p->softmax_scale : 1.0 / sqrt(p->head_dim);
    const double x = FX_QK_SCALE_SIGMAS * sigma * p->qk_scale;
    const double bound = p->head_dim * x * x * scale * 1.4426950408889634; /* log2(e) */
    if (bound < 0x1p127)
        return 0;
    snprintf(why, why_len,
             "the logits can reach %.3g (head_dim · (%g·sigma·qk_scale)² · scale · log2 e), "
             "past fp32's range (2^127): S and the softmax are fp32; lower --qk-scale or "
             "--scale",
             bound, FX_QK_SCALE_SIGMAS);
    return FX_EXIT_USAGE;
}

/* Which sizes the command line gave (a variable-length batch derives the rest). */
typedef struct sizes_given {
    bool batch, seqlen_q, seqlen_k;
} sizes_given;

/* Sum of n lengths into cu[0 .. n] (prefix sums from 0); false when it passes INT32_MAX. */
static bool prefix_sums(const int *len, int n, int *cu, long long *total)
{
    long long sum = 0;
    cu[0] = 0;
    for (int b = 0; b < n; b++) {
        sum += len[b];
        if (sum > INT_MAX) {
            *total = sum;
            return false;
        }
        cu[b + 1] = (int)sum;
    }
    *total = sum;
    return true;
}

/* --seqlens-q/-k and --seqused-k into o->problem: a variable-length batch whose arrays
 * live in o (fx_options.h lists the refusals). */
static int make_varlen(fx_options *o, sizes_given given, char *why, size_t why_len)
{
    fx_problem *p = &o->problem;
    const int n = o->n_seqlens_q;
    if (!n) {
        if (o->n_seqlens_k || o->n_seqused_k) {
            snprintf(why, why_len,
                     "%s needs --seqlens-q: it gives a variable-length batch's "
                     "lengths",
                     o->n_seqlens_k ? "--seqlens-k" : "--seqused-k");
            return FX_EXIT_USAGE;
        }
        return 0;
    }
    if (!o->n_seqlens_k) { /* the keys default to the queries */
        memcpy(o->seqlens_k, o->seqlens_q, (size_t)n * sizeof(int));
        o->n_seqlens_k = n;
    }
    const struct {
        const char *name;
        int count;
    } lists[] = {{"--seqlens-k", o->n_seqlens_k}, {"--seqused-k", o->n_seqused_k}};
    for (int l = 0; l < 2; l++) {
        if (lists[l].count && lists[l].count != n) {
            snprintf(why, why_len,
                     "%s gives %d lengths for the %d sequences of --seqlens-q: one per sequence",
                     lists[l].name, lists[l].count, n);
            return FX_EXIT_USAGE;
        }
    }
    if (given.batch && p->batch != n) {
        snprintf(why, why_len,
                 "--batch %d and --seqlens-q's %d sequences disagree (--seqlens-q "
                 "sets the batch: leave out --batch)",
                 p->batch, n);
        return FX_EXIT_USAGE;
    }
    long long total_q = 0, total_k = 0;
    if (!prefix_sums(o->seqlens_q, n, o->cu_seqlens_q, &total_q) ||
        !prefix_sums(o->seqlens_k, n, o->cu_seqlens_k, &total_k)) {
        const bool q = total_q > INT_MAX;
        snprintf(why, why_len, "%s: the lengths sum to %lld rows, past the 32-bit index limit %d",
                 q ? "--seqlens-q" : "--seqlens-k", q ? total_q : total_k, INT_MAX);
        return FX_EXIT_USAGE;
    }
    int max_q = 0, max_k = 0;
    long long attended = 0; /* keys attended over the batch */
    for (int b = 0; b < n; b++) {
        if (o->n_seqused_k && o->seqused_k[b] > o->seqlens_k[b]) {
            snprintf(why, why_len,
                     "--seqused-k: sequence %d's %d is above its %d keys (--seqlens-k)", b,
                     o->seqused_k[b], o->seqlens_k[b]);
            return FX_EXIT_USAGE;
        }
        const int keys = o->n_seqused_k ? o->seqused_k[b] : o->seqlens_k[b];
        max_q = o->seqlens_q[b] > max_q ? o->seqlens_q[b] : max_q;
        max_k = keys > max_k ? keys : max_k;
        attended += keys;
        const struct {
            bool on;
            const char *list, *limit;
            int len, max;
        } caps[] = {{given.seqlen_q, "--seqlens-q", "--seqlen-q", o->seqlens_q[b], p->seqlen_q},
                    {given.seqlen_k, o->n_seqused_k ? "--seqused-k" : "--seqlens-k", "--seqlen-k",
                     keys, p->seqlen_k}};
        for (int c = 0; c < 2; c++) {
            if (caps[c].on && caps[c].len > caps[c].max) {
                snprintf(why, why_len,
                         "%s: sequence %d's %d is above %s %d (the largest length, FA's "
                         "max_seqlen)",
                         caps[c].list, b, caps[c].len, caps[c].limit, caps[c].max);
                return FX_EXIT_USAGE;
            }
        }
    }
    if (total_q == 0) {
        snprintf(why, why_len,
                 "--seqlens-q: every sequence has 0 query rows: the batch has "
                 "nothing to compute (give one a length > 0)");
        return FX_EXIT_USAGE;
    }
    if (attended == 0) {
        snprintf(why, why_len,
                 "%s: every sequence has 0 keys: no row of the batch sees a key "
                 "(give one a length > 0)",
                 o->n_seqused_k ? "--seqused-k" : "--seqlens-k");
        return FX_EXIT_USAGE;
    }
    p->varlen = true;
    p->batch = n;
    p->total_q = (int)total_q;
    p->total_k = (int)total_k;
    p->cu_seqlens_q = o->cu_seqlens_q;
    p->cu_seqlens_k = o->cu_seqlens_k;
    p->seqused_k = o->n_seqused_k ? o->seqused_k : NULL;
    if (!given.seqlen_q)
        p->seqlen_q = max_q;
    if (!given.seqlen_k)
        p->seqlen_k = max_k;
    return 0;
}

/* The problem options a --matrix run would ignore: any that differs from the default. */
static bool same_problem(const fx_problem *a, const fx_problem *b)
{
    return a->batch == b->batch && a->seqlen_q == b->seqlen_q && a->seqlen_k == b->seqlen_k &&
           a->heads_q == b->heads_q && a->heads_kv == b->heads_kv && a->head_dim == b->head_dim &&
           a->head_dim_v == b->head_dim_v && a->dtype == b->dtype && a->causal == b->causal &&
           a->dist == b->dist && a->softmax_scale == b->softmax_scale &&
           a->qk_scale == b->qk_scale && a->varlen == b->varlen;
}

int fx_options_parse(int argc, char **argv, fx_options *o, char *why, size_t why_len)
{
    const fx_problem defaults = o->problem; /* as the caller set it: fx_options_default */
    sizes_given given = {false, false, false};
    const char *problem_option = NULL; /* the first problem option given, for --load */
    why[0] = '\0';
    for (int a = 1; a < argc; ++a) {
        const char *opt = argv[a];
        const fx_option_spec *s = fx_option_find(opt);
        if (!s) {
            snprintf(why, why_len, "%s: unknown option (see --help)", opt);
            return FX_EXIT_USAGE;
        }
        if (s->group == FX_OPT_PROBLEM && !problem_option)
            problem_option = s->name;
        if (s->kind == FX_OPT_FLAG) {
            *AT(bool, o, s->field) = true;
            continue;
        }
        if (a + 1 >= argc) {
            snprintf(why, why_len, "%s: missing its value", opt);
            return FX_EXIT_USAGE;
        }
        int rc = set_value(s, argv[++a], o, why, why_len);
        if (rc != 0)
            return rc;
        given.batch |= s->field == offsetof(fx_options, problem.batch);
        given.seqlen_q |= s->field == offsetof(fx_options, problem.seqlen_q);
        given.seqlen_k |= s->field == offsetof(fx_options, problem.seqlen_k) ||
                          s->field2 == offsetof(fx_options, problem.seqlen_k);
    }
    if (o->help)
        return 0;
    if (o->cpu && (o->bench || o->matrix || o->repeat > 1 || o->csv)) {
        snprintf(why, why_len,
                 "--cpu runs the CPU model and checks it: --bench, --matrix, "
                 "--repeat and --csv need the GPU");
        return FX_EXIT_USAGE;
    }
    if (o->self_test &&
        (o->check || o->bench || o->backward || o->matrix || o->cpu || o->repeat > 1 ||
         o->fuzz > 0 || o->csv || o->save || o->load || o->digest)) {
        snprintf(why, why_len,
                 "--self-test runs the stage's self-test alone: no --check, --bench, --bwd, "
                 "--matrix, --cpu, --repeat, --fuzz, --csv, --save, --load or --digest");
        return FX_EXIT_USAGE;
    }
    if (o->save && (o->matrix || o->fuzz > 0)) {
        snprintf(why, why_len, "--save writes one case: --matrix and --fuzz run other cases");
        return FX_EXIT_USAGE;
    }
    if (o->load && problem_option) {
        snprintf(why, why_len,
                 "--load takes the problem from its folder's problem.txt: leave out %s",
                 problem_option);
        return FX_EXIT_USAGE;
    }
    if (o->load && (o->matrix || o->fuzz > 0 || o->csv)) {
        snprintf(why, why_len,
                 "--load runs the one case in its folder: --matrix and --fuzz run other "
                 "cases, and --csv rows name a drawn problem's seed and distribution, which "
                 "loaded inputs do not have");
        return FX_EXIT_USAGE;
    }
    /* The timing options shape only what --bench times: elsewhere they would do nothing. */
    fx_options d;
    fx_options_default(&d);
    if (!o->bench && (o->warmup != d.warmup || o->iters != d.iters || o->spin_us != d.spin_us)) {
        snprintf(why, why_len,
                 "--warmup, --iters and --spin-us set how --bench times the kernels: without "
                 "--bench they would do nothing");
        return FX_EXIT_USAGE;
    }
    if (o->matrix && (o->bench || o->csv || o->repeat > 1 || o->fuzz > 0 || o->backward ||
                      !same_problem(&o->problem, &defaults) || o->n_seqlens_q || o->n_seqlens_k ||
                      o->n_seqused_k)) {
        snprintf(why, why_len,
                 "--matrix runs its own cases, made from the stage's capabilities (with the "
                 "backward where the stage has one): it takes no --bench, --csv, --repeat, "
                 "--fuzz, --bwd or problem options");
        return FX_EXIT_USAGE;
    }
    if (o->load) {
        /* The file gives every size: the varlen lengths are checked against them. */
        int rc = fx_load_problem(o->load, o, why, why_len);
        if (rc != 0)
            return rc;
        given = (sizes_given){true, true, true};
        rc = make_varlen(o, given, why, why_len);
        /* The logit bound is the loaded data's (fx_load_case), not a distribution's. */
        if (rc == 0)
            rc = fx_problem_validate(&o->problem, why, why_len);
        if (rc != 0) { /* the messages name the options the file's keys stand for */
            char inner[512];
            snprintf(inner, sizeof inner, "%s", why);
            snprintf(why, why_len, "--load: %s/problem.txt: %s", o->load, inner);
        }
        return rc;
    }
    int rc = make_varlen(o, given, why, why_len);
    if (rc != 0)
        return rc;
    rc = check_qk_scale(&o->problem, why, why_len);
    if (rc != 0)
        return rc;
    rc = fx_problem_validate(&o->problem, why, why_len);
    if (rc != 0)
        return rc;
    return check_logit_range(&o->problem, why, why_len);
}
