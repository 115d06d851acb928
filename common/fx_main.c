/*
 * fx_main.c — the shared main of every stage program (fx_main.h): the order in which it
 * decides what to do, and its exit code.
 *
 * Usage errors (exit 2) are decided before anything else, and before the device is
 * opened, so they are the same on a machine without a GPU: the options, --help, the
 * --csv file, then the stage's capabilities. Only then is the device opened (77 when
 * there is none), and the cases run: one (or --fuzz N), or the matrix.
 */
#include "fx_main.h"

#include <stdio.h>
#include <string.h>

#include "fx_case.h"
#include "fx_csv.h"
#include "fx_host.h" /* fx_fresh_seed */
#include "fx_load.h"
#include "fx_matrix.h"
#include "fx_msg.h"
#include "fx_save.h"
#include "fx_usage.h"

/* --cpu: the stage's CPU model on the host, case by case. */
static int main_cpu(const fx_ctx *c)
{
    char why[512];
    /* The CPU model keeps the stage's capabilities: outside them it is a usage error.
     * A refusal for this GPU's resources (77) does not concern the CPU model. */
    const int supported =
        fx_stage_supports(c->self, &c->opt.problem, c->opt.backward, why, sizeof why);
    if (supported != 0 && supported != FX_EXIT_NO_GPU) {
        fx_error("%s", why);
        return FX_EXIT_USAGE;
    }
    if (c->opt.backward && c->self->cpu_model && !c->self->cpu_model->backward) {
        fx_error("its CPU model has no backward: leave out --bwd");
        return FX_EXIT_USAGE;
    }
    int runs = c->opt.fuzz ? c->opt.fuzz : 1, worst = 0;
    for (int i = 0; i < runs; ++i) {
        fx_problem p = c->opt.problem;
        if (c->opt.fuzz)
            p.seed = fx_fresh_seed();
        int rc = fx_run_cpu_case(c, &p);
        if (rc > worst)
            worst = rc;
    }
    return worst;
}

/* No GPU that can run this: a skip (exit 77, reported on stdout like the rest of the run),
 * or, with FX_REQUIRE_GPU set, a failure (exit 1, an error on stderr). */
static int no_gpu(const char *why)
{
    const int rc = fx_exit_code_no_gpu();
    if (rc == FX_EXIT_NO_GPU)
        fx_notice("skipped: %s", why);
    else
        fx_error("%s: a failure, not a skip, since FX_REQUIRE_GPU is set", why);
    return rc;
}

/* Opens the GPU for c's stage (fx_device_open): 0, or the exit code to return (77 with the
 * reason when there is no usable GPU, 1 with it for any other failure). */
static int open_device(fx_ctx *c)
{
    char why[512];
    const int rc = fx_device_open(c->self, &c->dev, why, sizeof why);
    if (rc == FX_EXIT_NO_GPU)
        return no_gpu(why);
    if (rc != 0) {
        fx_error("%s", why);
        return FX_EXIT_FAIL;
    }
    return 0;
}

/* --self-test: the stage's own test of a device part, on the device opened as for a case. */
static int main_self_test(fx_ctx *c)
{
    if (!c->self->self_test) {
        fx_error("stage %s has no --self-test", c->self->id);
        return FX_EXIT_USAGE;
    }
    const int rc = open_device(c);
    if (rc != 0)
        return rc;
    return c->self->self_test() == 0 ? FX_EXIT_OK : FX_EXIT_FAIL;
}

/* The GPU's cases: the matrix, or one case (--fuzz N: N, each on a fresh seed). */
static int main_gpu(fx_ctx *c)
{
    int rc = open_device(c);
    if (rc != 0)
        return rc;
    if (c->opt.matrix)
        return fx_run_matrix(c);

    int runs = c->opt.fuzz ? c->opt.fuzz : 1, worst = 0;
    for (int i = 0; i < runs; ++i) {
        fx_problem p = c->opt.problem;
        if (c->opt.fuzz)
            p.seed = fx_fresh_seed();
        fx_case_result res;
        rc = fx_run_case(c, &p, true, &res);
        if (rc == FX_EXIT_USAGE)
            return rc;
        if (rc > worst)
            worst = rc;
    }
    return worst;
}

/* --load: the folder's inputs into c->loaded, read as problem.txt's dtype says (e4m3: in
 * blocks of the stage's tiles). A stage without e4m3 tiles at this head_dim reads nothing:
 * its capability check refuses the problem next. 0, or FX_EXIT_USAGE with why. */
static int load_inputs(fx_ctx *c, char *why, size_t why_len)
{
    const fx_problem *p = &c->opt.problem;
    if (p->dtype != FX_E4M3)
        return fx_load_case(c->opt.load, p, c->opt.backward, &c->loaded, why, why_len);
    const fx_fp8_tiles tiles =
        c->self->fp8_tiles ? c->self->fp8_tiles(p->head_dim) : (fx_fp8_tiles){0, 0};
    if (tiles.block_m <= 0 || tiles.block_n <= 0)
        return 0;
    return fx_load_fp8_case(&c->opt, tiles, &c->loaded, why, why_len);
}

/* The GPU path after the options: the CSV file, the capabilities, then the device. */
static int main_checked(fx_ctx *c)
{
    char why[512];
    /* Rows must not be lost after minutes of timing: the CSV file must open now, and a
     * path that cannot is a usage error whatever the GPU. */
    if (c->opt.csv && fx_csv_check_writable(c->opt.csv, why, sizeof why) != 0) {
        fx_error("%s", why);
        return FX_EXIT_USAGE;
    }
    /* A problem outside the capabilities is a usage error even without a GPU; one this
     * GPU lacks the resources for is a skip, as for no GPU at all. For --matrix the problem
     * is the default one (the options refuse any other): what it checks then is the
     * stage's own settings (FX_ABLATION, say), before any case runs. */
    fx_problem checked = c->opt.problem;
    /* --matrix makes its cases in the stage's own dtypes, so the default problem's bf16
     * need not be one of them (stage 10 takes e4m3 alone): the check then takes the
     * stage's first dtype (e4m3's default layout: V row-major). */
    if (c->opt.matrix && !(c->self->caps.dtypes & FX_DTYPE_BIT(checked.dtype)))
        for (int dt = 0; dt < FX_DTYPE_COUNT; ++dt)
            if (c->self->caps.dtypes & FX_DTYPE_BIT(dt)) {
                checked.dtype = (fx_dtype)dt;
                break;
            }
    const int supported = fx_stage_supports(c->self, &checked, c->opt.backward, why, sizeof why);
    if (supported == FX_EXIT_NO_GPU)
        return no_gpu(why);
    if (supported != 0) {
        fx_error("%s", why);
        return FX_EXIT_USAGE;
    }
    return main_gpu(c);
}

int fx_main(int argc, char **argv, const fx_stage *const *stages, int n_stages)
{
    fx_ctx c;
    memset(&c, 0, sizeof c);
    c.stages = stages;
    c.n_stages = n_stages;
    c.self = stages[n_stages - 1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    char program[96];
    snprintf(program, sizeof program, "stage_%s", c.self->id);
    fx_msg_set_program(program);

    char why[512];
    fx_options_default(&c.opt);
    if (fx_options_parse(argc, argv, &c.opt, why, sizeof why) != 0) {
        fx_error("%s", why);
        return FX_EXIT_USAGE;
    }
    if (c.opt.help) {
        fx_usage(&c, stdout);
        return FX_EXIT_OK;
    }
    if (c.opt.self_test)
        return main_self_test(&c);
    /* --save writes the checked run's host inputs, and --load's inputs are on the host:
     * a run that only times has neither. */
    if ((!c.opt.check && !c.opt.bench && !c.opt.matrix) || c.opt.save || c.opt.load)
        c.opt.check = true;
    if (c.opt.save && fx_save_prepare(c.opt.save, why, sizeof why) != 0) {
        fx_error("%s", why);
        return FX_EXIT_USAGE;
    }
    /* Bad input files are usage errors, decided before the device is opened. */
    if (c.opt.load && load_inputs(&c, why, sizeof why)) {
        fx_error("%s", why);
        return FX_EXIT_USAGE;
    }
    const int rc = c.opt.cpu ? main_cpu(&c) : main_checked(&c);
    fx_host_free(&c.loaded);
    return rc;
}
