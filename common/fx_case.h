/*
 * fx_case.h — one case, end to end: the program's stage on one problem, checked against
 * the fp64 reference and the previous stage, repeated, timed, written to the CSV.
 */
#ifndef FX_CASE_H
#define FX_CASE_H

#include <stdbool.h>

#include "fx_gpu.h"
#include "fx_options.h"
#include "fx_problem.h"
#include "fx_run.h" /* fx_case_host */
#include "fx_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The program: the stages it links (its own last, the ones it checks against before it,
 * in reading order), its options and, once opened, its device. */
typedef struct fx_ctx {
    const fx_stage *const *stages;
    int n_stages;
    const fx_stage *self;
    fx_options opt;
    fx_device_info dev;
    fx_case_host loaded; /* --load: the inputs read from its folder (fx_load_case; e4m3:
                          * fx_load_fp8_case) */
} fx_ctx;

/* What a case found, for the matrix's line and the CSV: max-abs errors (-1 where not
 * checked) and the previous stages compared with (NULL where none). */
typedef struct fx_case_result {
    bool pass;
    double err_ref, err_prev;         /* O against fp64 and against the previous stage (fwd) */
    double err_ref_bwd, err_prev_bwd; /* the largest of dQ, dK, dV (bwd) */
    bool checked_bwd;                 /* the backward was compared with fp64 */
    const fx_stage *prev, *prev_bwd;
} fx_case_result;

/* Runs problem p through c->self on the GPU (device open) under c->opt: the check, the
 * previous stage, --repeat, --bench and --csv as asked. Prints the report when `verbose`
 * (the matrix prints one line instead). Returns 0 pass, 1 fail (a check, a CUDA error or
 * a lost CSV row), 2 outside the stage's capabilities or too large for device memory,
 * 77 when this GPU lacks what p needs. */
int fx_run_case(const fx_ctx *c, const fx_problem *p, bool verbose, fx_case_result *res);

/* --bench of one forward run r that fx_run_stage (or fx_fp8_case.c) has set up: times it
 * (fx_time), prints the timing and appends the --csv row with res's errors. Returns a CUDA
 * error; *csv_ok turns false when the row is lost. */
cudaError_t fx_bench_forward(const fx_ctx *c, const fx_problem *p, fx_run *r,
                             const fx_case_result *res, bool *csv_ok);

/* --load: the report's line "inputs: loaded from DIR (FILES)", the files p's dtype reads
 * (dout.bin when `backward`; e4m3: q.f32, k.f32, v.f32 where c->loaded has them). The inputs
 * are the folder's, whatever seed and distribution its problem.txt names: those say how they
 * were drawn, where they were. */
void fx_print_loaded(const fx_ctx *c, const fx_problem *p, bool backward);

/* Runs p through c->self's CPU model (--cpu; no GPU) and checks it against the fp64
 * reference; e4m3 through stage 10's model (fx_run_fp8_cpu_case, fx_fp8_case.h). Returns 0
 * pass, 1 fail, 2 when the stage has no CPU model or an option its model does not take. */
int fx_run_cpu_case(const fx_ctx *c, const fx_problem *p);

#ifdef __cplusplus
}
#endif
#endif
