/*
 * fx_main.h — the shared main of every stage program, and its options.
 *
 *   stage_NN [shape and dtype options] [--check] [--bench] [--bwd] [--matrix]
 *            [--repeat N] [--fuzz N] [--cpu] [--csv FILE] [--help]
 *
 * The program's own stage is the last of `stages`; the others are the stages it
 * checks against, in reading order. A case is checked against the nearest earlier
 * stage whose capabilities cover it (DESIGN.md, "The previous-stage rule").
 */
#ifndef FX_MAIN_H
#define FX_MAIN_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_gpu.h"
#include "fx_problem.h"
#include "fx_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most timed calls one benchmark takes (--iters): fx_time keeps each one's time. */
#define FX_MAX_ITERS FX_TIME_MAX_REPEATS

/* The most (batch, head) slices the forward check evaluates: a problem with more (or
 * one over the reference budget) is sampled, and --ref-slices above this counts as this. */
#define FX_MAX_REF_SLICES 64

typedef struct fx_options {
    fx_problem problem;
    bool check;    /* compare with the reference and the previous stage (default) */
    bool bench;    /* time the stage (CUDA events, median) */
    bool backward; /* also run and check the backward */
    bool matrix;   /* run the GPU test matrix generated from the capabilities */
    bool cpu;      /* run the stage's CPU model instead of the GPU (no GPU needed) */
    bool help;
    bool seed_given;
    int repeat;        /* > 1: run the stage this many times, outputs must be bitwise equal */
    int fuzz;          /* > 0: this many checks, each on a fresh seed (printed) */
    int warmup, iters; /* benchmark: untimed and timed calls */
    int ref_slices;    /* (batch, head) slices the reference samples on large problems */
    const char *csv;   /* append result rows to this file */
} fx_options;

/* Defaults: fx_problem_default(), no mode (fx_main then runs --check), warmup 3,
 * iters 10 (DESIGN.md, "Timing"), 2 reference slices. */
void fx_options_default(fx_options *o);

/* Parses argv. Returns 0, or 2 with a message that names the bad option or value in
 * `why`: an unknown option, a missing or malformed number, a number outside its range
 * (sizes >= 1, the mode options' ranges in docs/harness.md), heads_q not a multiple of
 * heads_kv, an unknown dtype or distribution, a head_dim that is not a positive
 * multiple of 8 up to 256, sizes whose element count overflows a 32-bit index, a
 * softmax scale that is not a finite positive number in [2^-100, 2^100], or --cpu
 * with --bench, --matrix, --repeat N > 1 or --csv. With --help only the options'
 * syntax is checked. */
int fx_options_parse(int argc, char **argv, fx_options *o, char *why, size_t why_len);

/* CSV rows (--csv FILE, appended; the header is written when the file is new; a row
 * that cannot be written fails the run, exit 1).
 * One row per benchmarked (stage, direction, problem), the fields of DESIGN.md:
 *   stage,direction,device,sm_count,sm_clock_mhz,commit,date,batch,seqlen_q,seqlen_k,
 *   heads_q,heads_kv,head_dim,dtype,causal,repeats,ms,ms_min,ms_max,tflops,
 *   err_ref_max,err_prev_max,prev_stage,check
 * direction is fwd or bwd; ms is the median of `repeats` timed calls; tflops uses
 * fx_flops_forward/backward; err_* are max-abs errors of O (fwd) or the largest of
 * dQ/dK/dV (bwd), empty when not checked; prev_stage is the stage compared with or
 * empty; check is pass, fail or skipped; date is UTC ISO 8601; sm_clock_mhz is read
 * through NVML right after the timed calls (0 when NVML is absent). */
#define FX_CSV_HEADER                                                                              \
    "stage,direction,device,sm_count,sm_clock_mhz,commit,date,batch,seqlen_q,seqlen_k,"            \
    "heads_q,heads_kv,head_dim,dtype,causal,repeats,ms,ms_min,ms_max,tflops,"                      \
    "err_ref_max,err_prev_max,prev_stage,check"

/* Runs the program; returns its exit code (0, 1, 2, 77). */
int fx_main(int argc, char **argv, const fx_stage *const *stages, int n_stages);

#ifdef __cplusplus
}
#endif
#endif
