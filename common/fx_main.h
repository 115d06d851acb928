/*
 * fx_main.h — the shared main of every stage program.
 *
 *   stage_NN [shape and dtype options] [--check] [--bench] [--bwd] [--matrix]
 *            [--repeat N] [--fuzz N] [--cpu] [--csv FILE] [--help]
 *
 * The program's own stage is the last of `stages`; the others are the stages it
 * checks against, in reading order. A case is checked against the nearest earlier
 * stage whose capabilities cover it (DESIGN.md, "The previous-stage rule"). The jobs
 * are in their own files: the options (fx_options.h), --help (fx_usage.h), one case
 * (fx_case.h: running it, fx_run.h; checking it, fx_compare.h), the matrix
 * (fx_matrix.h) and the CSV (fx_csv.h).
 */
#ifndef FX_MAIN_H
#define FX_MAIN_H

#include "fx_gpu.h"
#include "fx_options.h"
#include "fx_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CSV header (--csv FILE; fx_csv.h): bench/sweep.sh reads it from this file, and
 * tests/unit/test_csv.c checks that it is the header fx_csv.c's column table writes.
 * One row per benchmarked (stage, direction, problem), the fields of DESIGN.md;
 * docs/harness.md, "The CSV", says what each column holds. */
#define FX_CSV_HEADER                                                                              \
    "stage,direction,device,sm_count,sm_clock_mhz,commit,date,batch,seqlen_q,seqlen_k,"            \
    "heads_q,heads_kv,head_dim,dtype,causal,repeats,ms,ms_min,ms_max,tflops,"                      \
    "err_ref_max,err_prev_max,prev_stage,check,head_dim_v"

/* Runs the program; returns its exit code: 0 ok, 1 a check failed or a CUDA error, 2 bad
 * usage or outside the stage's capabilities, 77 no suitable GPU (FX_REQUIRE_GPU=1: 1).
 * Every message begins "stage_<id>: " (fx_msg.h). */
int fx_main(int argc, char **argv, const fx_stage *const *stages, int n_stages);

#ifdef __cplusplus
}
#endif
#endif
