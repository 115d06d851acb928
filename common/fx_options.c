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
    {SIZE("--heads", heads_q, PROBLEM(heads_kv), "heads_q and heads_kv")},
    {SIZE("--heads-q", heads_q, NONE, "query heads")},
    {SIZE("--heads-kv", heads_kv, NONE, "K and V heads; heads_q must be a multiple (GQA/MQA)")},
    {SIZE("--head-dim", head_dim, NONE, "head dimension: a multiple of 8 up to 256")},
    {VALUE("--dtype", FX_OPT_DTYPE, "bf16|fp16", PROBLEM(dtype), FX_OPT_PROBLEM,
           "the inputs' and outputs' type", NULL)},
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
    {FLAG("--digest", NULL, FIELD(digest), FX_OPT_MODE,
          "print a hash of O and LSE (and of dQ, dK, dV with --bwd): two builds\n"
          "gave the same bits when their digests match")},
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
        snprintf(why, why_len, "%s: '%s' is not one of bf16, fp16", s->name, val);
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
    case FX_OPT_FLAG: break;
    }
    snprintf(why, why_len, "%s: the option table has no parser for its kind", s->name);
    return FX_EXIT_USAGE;
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

/* The problem options a --matrix run would ignore: any that differs from the default. */
static bool same_problem(const fx_problem *a, const fx_problem *b)
{
    return a->batch == b->batch && a->seqlen_q == b->seqlen_q && a->seqlen_k == b->seqlen_k &&
           a->heads_q == b->heads_q && a->heads_kv == b->heads_kv && a->head_dim == b->head_dim &&
           a->dtype == b->dtype && a->causal == b->causal && a->dist == b->dist &&
           a->softmax_scale == b->softmax_scale && a->qk_scale == b->qk_scale;
}

int fx_options_parse(int argc, char **argv, fx_options *o, char *why, size_t why_len)
{
    const fx_problem defaults = o->problem; /* as the caller set it: fx_options_default */
    why[0] = '\0';
    for (int a = 1; a < argc; ++a) {
        const char *opt = argv[a];
        const fx_option_spec *s = fx_option_find(opt);
        if (!s) {
            snprintf(why, why_len, "%s: unknown option (see --help)", opt);
            return FX_EXIT_USAGE;
        }
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
    }
    if (o->help)
        return 0;
    if (o->cpu && (o->bench || o->matrix || o->repeat > 1 || o->csv)) {
        snprintf(why, why_len,
                 "--cpu runs the CPU model and checks it: --bench, --matrix, "
                 "--repeat and --csv need the GPU");
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
                      !same_problem(&o->problem, &defaults))) {
        snprintf(why, why_len,
                 "--matrix runs its own cases, made from the stage's capabilities (with the "
                 "backward where the stage has one): it takes no --bench, --csv, --repeat, "
                 "--fuzz, --bwd or problem options");
        return FX_EXIT_USAGE;
    }
    int rc = check_qk_scale(&o->problem, why, why_len);
    if (rc != 0)
        return rc;
    rc = fx_problem_validate(&o->problem, why, why_len);
    if (rc != 0)
        return rc;
    return check_logit_range(&o->problem, why, why_len);
}
