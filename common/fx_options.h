/*
 * fx_options.h — the command line of every stage program, defined by one table.
 *
 *   stage_NN [problem options] [--check] [--bench] [--bwd] [--matrix] [--repeat N]
 *            [--fuzz N] [--cpu] [--csv FILE] [--save DIR] [--load DIR] [--help]
 *
 * Each option is one row of fx_option_table (fx_options.c): its name, the kind of value
 * it takes, the range, the fields it sets and its help text. The parser and --help
 * (fx_usage.c) both read that table, so an option cannot be parsed and undocumented, or
 * documented and unknown.
 */
#ifndef FX_OPTIONS_H
#define FX_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "fx_gpu.h"
#include "fx_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most timed calls one benchmark takes (--iters): fx_time keeps each one's time. */
#define FX_MAX_ITERS FX_TIME_MAX_REPEATS

/* The most (batch, head) slices the forward check evaluates: a problem with more (or
 * one over the reference budget) is sampled, and --ref-slices above this counts as this. */
#define FX_MAX_REF_SLICES 64

/* --qk-scale X is refused where X times this many standard deviations of the Q/K
 * distribution (fx_dist_qk_sigma) passes the dtype's largest finite value: beyond it
 * inputs become inf. A normal draw passes 8 sigma with probability about 1.2e-15, so
 * even a tensor of 2^31 elements (the kernels' index limit) overflows with probability
 * about 3e-6. */
#define FX_QK_SCALE_SIGMAS 8.0

typedef struct fx_options {
    fx_problem problem;
    bool check;     /* compare with the reference and the previous stage (default) */
    bool bench;     /* time the stage (CUDA events, median) */
    bool backward;  /* also run and check the backward */
    bool matrix;    /* run the GPU test matrix generated from the capabilities */
    bool cpu;       /* run the stage's CPU model instead of the GPU (no GPU needed) */
    bool digest;    /* print a hash of the outputs' bytes (fx_print_digest) */
    bool self_test; /* run the stage's own GPU self-test (fx_stage.self_test) and nothing else */
    bool help;
    bool seed_given;
    int repeat;        /* > 1: run the stage this many times, outputs must be bitwise equal */
    int fuzz;          /* > 0: this many checks, each on a fresh seed (printed) */
    int warmup, iters; /* benchmark: untimed and timed calls */
    int spin_us;       /* benchmark: GPU spin before each timed call, µs (0: none; fx_gpu.h) */
    int ref_slices;    /* (batch, head) slices the reference samples on large problems */
    const char *csv;   /* append result rows to this file */
    const char *save;  /* --save DIR: write the case's inputs and outputs there (fx_save.h) */
    const char *load;  /* --load DIR: the problem and inputs from there (fx_load.h) */
    /* --load of e4m3: the rows per descale block that DIR/problem.txt names (fp8_block_m of
     * Q, fp8_block_n of K and V); 0 0 otherwise. fx_load_fp8_case holds them to the stage's. */
    fx_fp8_tiles fp8_blocks;
    /* --seqlens-q, --seqlens-k, --seqused-k: per-sequence lengths, n_* of each (0: not
     * given). fx_options_parse makes the problem a variable-length batch from them; its
     * cu_seqlens_q/k and seqused_k then point into cu_seqlens_q/k and seqused_k here, so
     * this struct must outlive every use of the problem (and a copy of it still points
     * into the original). */
    int seqlens_q[FX_VARLEN_MAX_SEQS], seqlens_k[FX_VARLEN_MAX_SEQS];
    int seqused_k[FX_VARLEN_MAX_SEQS];
    int n_seqlens_q, n_seqlens_k, n_seqused_k;
    int cu_seqlens_q[FX_VARLEN_MAX_SEQS + 1], cu_seqlens_k[FX_VARLEN_MAX_SEQS + 1];
} fx_options;

/* Defaults: fx_problem_default(), no mode (fx_main then runs --check), warmup 3,
 * iters 10 (DESIGN.md, "Timing"), spin FX_SPIN_US, 2 reference slices. */
void fx_options_default(fx_options *o);

/* Parses argv. Returns 0, or 2 with a message that names the bad option or value in
 * `why`: an unknown option, a missing or malformed value, a number outside its table
 * range, an unknown dtype or distribution, an empty --csv file name, a --qk-scale that
 * would overflow the dtype (FX_QK_SCALE_SIGMAS), --cpu with --bench, --matrix,
 * --repeat N > 1 or --csv, and what fx_problem_validate refuses (heads_q not a multiple
 * of heads_kv, a head_dim that is not a multiple of 8 up to 256, sizes whose element
 * count overflows a 32-bit index, a softmax scale outside [2^-100, 2^100]).
 * A variable-length batch (--seqlens-q; docs/harness.md, "Variable-length batches") is
 * refused, naming the option and value, for: a length that is negative or not a number,
 * more than FX_VARLEN_MAX_SEQS lengths, --seqlens-k or --seqused-k without --seqlens-q or
 * with another count, a --seqused-k above its sequence's --seqlens-k, a length above an
 * explicit --seqlen-q or --seqlen-k (FA's max_seqlen), a --batch that is not the count,
 * lengths that sum past the 32-bit index limit, a batch without any query row or any
 * key attended, and --matrix. --load DIR reads the problem from DIR/problem.txt
 * (fx_load_problem: its refusals there) and refuses problem options, --matrix, --fuzz and
 * --csv beside it. With --help only each option's own value is checked. */
int fx_options_parse(int argc, char **argv, fx_options *o, char *why, size_t why_len);

/* ---- the table ------------------------------------------------------------------- */

typedef enum fx_opt_kind {
    FX_OPT_FLAG,    /* no value: sets a bool to true */
    FX_OPT_INT,     /* a decimal integer in [lo, hi], stored as int */
    FX_OPT_REAL,    /* a finite number > 0, stored as double */
    FX_OPT_SEED,    /* decimal, or hexadecimal after 0x, stored as uint64_t; sets seed_given */
    FX_OPT_DTYPE,   /* a dtype name (fx_dtype_parse) */
    FX_OPT_DIST,    /* a distribution name (fx_dist_parse) */
    FX_OPT_SCALING, /* an fp8 scaling name (fx_fp8_scaling_name) */
    FX_OPT_FILE,    /* a non-empty file name, stored as const char * (argv's own string) */
    FX_OPT_LENGTHS  /* a comma list of integers >= 0, at most FX_VARLEN_MAX_SEQS: stored in
                    * the int array at field, their count in the int at field2 */
} fx_opt_kind;

/* The section of --help an option is listed in. */
typedef enum fx_opt_group { FX_OPT_PROBLEM, FX_OPT_MODE } fx_opt_group;

/* fx_option_spec.field2 of an option that sets one field. */
#define FX_OPT_NO_FIELD ((size_t)-1)

typedef struct fx_option_spec {
    const char *name;  /* "--batch" */
    const char *alias; /* another spelling ("-h"), or NULL */
    fx_opt_kind kind;
    const char *value;        /* the value's name in --help ("N", "bf16|fp16"); NULL for a flag */
    long long lo, hi;         /* FX_OPT_INT: the accepted range, inclusive */
    size_t field, field2;     /* offsetof(fx_options, ...) of the field(s) set; field2 may be
                            * FX_OPT_NO_FIELD (--seqlen sets seqlen_q and seqlen_k) */
    fx_opt_group group;       /* its section of --help */
    const char *help;         /* one line, or lines separated by '\n' */
    const char *default_text; /* NULL: --help prints the default from fx_options_default;
                               * "": prints none; else this text */
} fx_option_spec;

/* The table, in --help order; *count gets its length. */
const fx_option_spec *fx_option_table(size_t *count);

/* Sets option `name` (one that takes a value) from `val` as the command line would: the
 * same range checks and messages. fx_load reads problem.txt through it. 0, or 2 with why. */
int fx_option_set(const char *name, const char *val, fx_options *o, char *why, size_t why_len);

/* The table's row for `name` (its name or alias), or NULL. */
const fx_option_spec *fx_option_find(const char *name);

/* Writes the default of option s as --help prints it ("4", "bf16", "1/sqrt(head_dim)")
 * into buf; "" when it has none (a flag, an unset file). */
void fx_option_default_text(const fx_option_spec *s, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
