/*
 * fp8_table3.c — the FA3 paper's Table 3 on the CPU, for any shape and seeds (fx_table3.h
 * says what is measured); the unit test test_fp8_table3 runs one fixed case of it.
 *
 *   build/tests/fp8_table3 [--batch B] [--seqlen N] [--heads H] [--head-dim D]
 *                          [--seeds S1,S2,..] [--dequant]
 *
 * Defaults: batch 1, seqlen 1024, heads 16, head_dim 128 (hidden 2048, the paper's setup),
 * seed 1. Prints one table per seed (RMSE against fp64 on the fp32 inputs; with --dequant
 * also against fp64 on each method's own rounded inputs), then over the seeds each method's
 * mean, its spread ((max − min)/mean) and the range of its ratio to the same seed's
 * per-tensor baseline, beside the paper's ratio. Exit status 0, 2 on bad usage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "03_flash2/model.h"
#include "fx_table3.h"

enum { kMaxSeeds = 64 };

static int usage(const char *why)
{
    fprintf(stderr,
            "fp8_table3: %s\nusage: fp8_table3 [--batch B] [--seqlen N] [--heads H] "
            "[--head-dim 64|128|256] [--seeds S1,S2,..] [--dequant]\n",
            why);
    return 2;
}

static int parse_int(const char *s, int *out)
{
    char *end;
    const long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v <= 0 || v > 1 << 20)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    fx_table3_setup s = {1, 1024, 16, 128, 1};
    uint64_t seeds[kMaxSeeds] = {1};
    int n_seeds = 1;
    bool dequant = false;
    for (int a = 1; a < argc; ++a) {
        const char *opt = argv[a];
        if (strcmp(opt, "--dequant") == 0) {
            dequant = true;
            continue;
        }
        if (a + 1 >= argc)
            return usage("an option is missing its value");
        const char *val = argv[++a];
        int *target = strcmp(opt, "--batch") == 0      ? &s.batch
                      : strcmp(opt, "--seqlen") == 0   ? &s.seqlen
                      : strcmp(opt, "--heads") == 0    ? &s.heads
                      : strcmp(opt, "--head-dim") == 0 ? &s.head_dim
                                                       : NULL;
        if (target) {
            if (parse_int(val, target) != 0)
                return usage("a size must be a positive integer");
        } else if (strcmp(opt, "--seeds") == 0) {
            n_seeds = 0;
            for (const char *c = val; *c && n_seeds < kMaxSeeds;) {
                char *end;
                seeds[n_seeds++] = strtoull(c, &end, 10);
                if (end == c || (*end != ',' && *end != '\0'))
                    return usage("--seeds takes a comma list of numbers");
                c = *end ? end + 1 : end;
            }
        } else {
            return usage("unknown option");
        }
    }
    if (s.head_dim != 64 && s.head_dim != 128 && s.head_dim != 256)
        return usage("--head-dim must be 64, 128 or 256");

    printf("FA3 Table 3 on the CPU: batch %d, seqlen %d, heads %d, head_dim %d, non-causal,\n"
           "inputs N(0,1) + N(0,100)·Bernoulli(0.001) (variance 100: std 10), RMSE of O\n",
           s.batch, s.seqlen, s.heads, s.head_dim);
    /* Per method: the sum, least and largest RMSE over the seeds, and of its ratio to the
     * same seed's per-tensor baseline. */
    double sum[FX_T3_COUNT] = {0}, lo[FX_T3_COUNT], hi[FX_T3_COUNT];
    double ratio_lo[FX_T3_COUNT], ratio_hi[FX_T3_COUNT];
    for (int m = 0; m < FX_T3_COUNT; ++m)
        lo[m] = ratio_lo[m] = INFINITY, hi[m] = ratio_hi[m] = -INFINITY;
    for (int i = 0; i < n_seeds; ++i) {
        s.seed = seeds[i];
        fx_table3_result r;
        const time_t t0 = time(NULL);
        fx_table3_run(&s, &fx_cpu_model_03, dequant, &r);
        printf("\nseed %llu (%lld s): |O| rms %.4g, rows past the fast range %zu\n",
               (unsigned long long)s.seed, (long long)(time(NULL) - t0), r.o_rms,
               r.past_fast_range);
        printf("  %-30s %12s %12s%s\n", "method", "RMSE", "paper",
               dequant ? "   RMSE vs own inputs" : "");
        for (int m = 0; m < FX_T3_COUNT; ++m) {
            printf("  %-30s %12.4e %12.2g", fx_table3_name((fx_table3_method)m), r.rmse[m],
                   fx_table3_paper((fx_table3_method)m));
            if (dequant)
                printf(" %12.4e", r.rmse_dequant[m]);
            printf("\n");
            sum[m] += r.rmse[m];
            lo[m] = fmin(lo[m], r.rmse[m]);
            hi[m] = fmax(hi[m], r.rmse[m]);
            ratio_lo[m] = fmin(ratio_lo[m], r.rmse[m] / r.rmse[FX_T3_FP8_PER_TENSOR]);
            ratio_hi[m] = fmax(ratio_hi[m], r.rmse[m] / r.rmse[FX_T3_FP8_PER_TENSOR]);
        }
    }
    printf("\nover %d seed(s): spread = (max - min)/mean; the ratio to the same seed's "
           "per-tensor RMSE, least..largest\n  %-30s %12s %9s %16s %14s\n",
           n_seeds, "method", "mean RMSE", "spread", "/ per-tensor", "paper's ratio");
    for (int m = 0; m < FX_T3_COUNT; ++m) {
        const double mean = sum[m] / n_seeds;
        printf("  %-30s %12.4e %8.1f%%   %6.3f..%6.3f %14.3f\n",
               fx_table3_name((fx_table3_method)m), mean, 100.0 * (hi[m] - lo[m]) / mean,
               ratio_lo[m], ratio_hi[m],
               fx_table3_paper((fx_table3_method)m) / fx_table3_paper(FX_T3_FP8_PER_TENSOR));
    }
    return 0;
}
