/*
 * fx_options.c — command-line options of every stage program (fx_main.h).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_gpu.h"
#include "fx_main.h"

/* Upper bounds of the mode options (docs/harness.md lists them): far above any useful
 * run, low enough that a typo (an extra digit or two) is refused instead of running
 * for hours. --iters is bounded by FX_MAX_ITERS (fx_main.h). */
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
    o->ref_slices = 2;
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

static int parse_double(const char *opt, const char *s, double *out, char *why, size_t why_len)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v)) {
        snprintf(why, why_len, "%s: '%s' is not a finite number", opt, s);
        return FX_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

int fx_options_parse(int argc, char **argv, fx_options *o, char *why, size_t why_len)
{
    fx_problem *p = &o->problem;
    why[0] = '\0';
    for (int a = 1; a < argc; ++a) {
        const char *opt = argv[a];
        /* Flags without a value. */
        if (!strcmp(opt, "--check")) {
            o->check = true;
            continue;
        }
        if (!strcmp(opt, "--bench")) {
            o->bench = true;
            continue;
        }
        if (!strcmp(opt, "--bwd")) {
            o->backward = true;
            continue;
        }
        if (!strcmp(opt, "--matrix")) {
            o->matrix = true;
            continue;
        }
        if (!strcmp(opt, "--cpu")) {
            o->cpu = true;
            continue;
        }
        if (!strcmp(opt, "--causal")) {
            p->causal = true;
            continue;
        }
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            o->help = true;
            continue;
        }

        /* Options with a value. Sizes are parsed as positive ints: the element-count
         * check in fx_problem_validate catches products that overflow. */
        static const char *const with_value[] = {
            "--batch",    "--seqlen",   "--seqlen-q", "--seqlen-k", "--heads",      "--heads-q",
            "--heads-kv", "--head-dim", "--dtype",    "--dist",     "--scale",      "--seed",
            "--repeat",   "--fuzz",     "--warmup",   "--iters",    "--ref-slices", "--csv"};
        bool known = false;
        for (size_t w = 0; w < sizeof with_value / sizeof with_value[0]; ++w)
            known |= strcmp(opt, with_value[w]) == 0;
        if (!known) {
            snprintf(why, why_len, "%s: unknown option (see --help)", opt);
            return FX_EXIT_USAGE;
        }
        if (a + 1 >= argc) {
            snprintf(why, why_len, "%s: missing its value", opt);
            return FX_EXIT_USAGE;
        }
        const char *val = argv[++a];
        long long n = 0;
        int rc = 0;
        if (!strcmp(opt, "--batch")) {
            if (!(rc = parse_int(opt, val, 1, INT_MAX, &n, why, why_len)))
                p->batch = (int)n;
        } else if (!strcmp(opt, "--seqlen")) {
            if (!(rc = parse_int(opt, val, 1, INT_MAX, &n, why, why_len)))
                p->seqlen_q = p->seqlen_k = (int)n;
        } else if (!strcmp(opt, "--seqlen-q")) {
            if (!(rc = parse_int(opt, val, 1, INT_MAX, &n, why, why_len)))
                p->seqlen_q = (int)n;
        } else if (!strcmp(opt, "--seqlen-k")) {
            if (!(rc = parse_int(opt, val, 1, INT_MAX, &n, why, why_len)))
                p->seqlen_k = (int)n;
        } else if (!strcmp(opt, "--heads")) {
            if (!(rc = parse_int(opt, val, 1, INT_MAX, &n, why, why_len)))
                p->heads_q = p->heads_kv = (int)n;
        } else if (!strcmp(opt, "--heads-q")) {
            if (!(rc = parse_int(opt, val, 1, INT_MAX, &n, why, why_len)))
                p->heads_q = (int)n;
        } else if (!strcmp(opt, "--heads-kv")) {
            if (!(rc = parse_int(opt, val, 1, INT_MAX, &n, why, why_len)))
                p->heads_kv = (int)n;
        } else if (!strcmp(opt, "--head-dim")) {
            if (!(rc = parse_int(opt, val, 1, INT_MAX, &n, why, why_len)))
                p->head_dim = (int)n;
        } else if (!strcmp(opt, "--dtype")) {
            if (fx_dtype_parse(val, &p->dtype) != 0) {
                snprintf(why, why_len, "--dtype: '%s' is not one of bf16, fp16", val);
                rc = FX_EXIT_USAGE;
            }
        } else if (!strcmp(opt, "--dist")) {
            if (fx_dist_parse(val, &p->dist) != 0) {
                snprintf(why, why_len, "--dist: '%s' is not one of normal, outliers, large-logits",
                         val);
                rc = FX_EXIT_USAGE;
            }
        } else if (!strcmp(opt, "--scale")) {
            double s = 0;
            if (!(rc = parse_double(opt, val, &s, why, why_len))) {
                if (s <= 0) {
                    snprintf(why, why_len, "--scale: %g must be positive", s);
                    rc = FX_EXIT_USAGE;
                } else {
                    p->softmax_scale = s;
                }
            }
        } else if (!strcmp(opt, "--seed")) {
            /* Decimal, or hexadecimal after 0x (a leading 0 is not octal). strtoull would
             * also take blanks and a sign, after the 0x too: the digits must start with one. */
            char *end = NULL;
            errno = 0;
            bool hex = val[0] == '0' && (val[1] == 'x' || val[1] == 'X');
            const char *digits = hex ? val + 2 : val;
            unsigned long long s = strtoull(digits, &end, hex ? 16 : 10);
            if (errno != 0 || end == digits || *end != '\0' ||
                !(hex ? isxdigit((unsigned char)digits[0]) : isdigit((unsigned char)digits[0]))) {
                snprintf(why, why_len,
                         "--seed: '%s' is not an unsigned integer (decimal or 0x hex)", val);
                rc = FX_EXIT_USAGE;
            } else {
                p->seed = (uint64_t)s;
                o->seed_given = true;
            }
        } else if (!strcmp(opt, "--repeat")) {
            if (!(rc = parse_int(opt, val, 1, FX_MAX_REPEAT, &n, why, why_len)))
                o->repeat = (int)n;
        } else if (!strcmp(opt, "--fuzz")) {
            if (!(rc = parse_int(opt, val, 1, FX_MAX_FUZZ, &n, why, why_len)))
                o->fuzz = (int)n;
        } else if (!strcmp(opt, "--warmup")) {
            if (!(rc = parse_int(opt, val, 0, FX_MAX_WARMUP, &n, why, why_len)))
                o->warmup = (int)n;
        } else if (!strcmp(opt, "--iters")) {
            if (!(rc = parse_int(opt, val, 1, FX_MAX_ITERS, &n, why, why_len)))
                o->iters = (int)n;
        } else if (!strcmp(opt, "--ref-slices")) {
            if (!(rc = parse_int(opt, val, 1, FX_MAX_REF_SLICES_OPTION, &n, why, why_len)))
                o->ref_slices = (int)n;
        } else if (!strcmp(opt, "--csv")) {
            o->csv = val;
        } else {
            /* Only an option in with_value that this chain forgets reaches here. */
            snprintf(why, why_len, "%s: unknown option (see --help)", opt);
            return FX_EXIT_USAGE;
        }
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
    return fx_problem_validate(p, why, why_len);
}
