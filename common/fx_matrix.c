/*
 * fx_matrix.c — the GPU test matrix, generated from the capabilities (fx_matrix.h).
 */
#include "fx_matrix.h"

#include <stdio.h>
#include <string.h>

#include "fx_host.h" /* fx_fresh_seed */

typedef struct fx_shape {
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv;
    bool causal;
    bool needs_gqa;
    const char *why;
} fx_shape;

/* The first FX_MATRIX_MASK_SHAPES shapes vary only the masking (tails, causal with
 * seqlen_q = seqlen_k and both ways unequal) and run at every head_dim; the rest run
 * at the first and last head_dim of each dtype, to keep the matrix seconds. */
enum { FX_MATRIX_MASK_SHAPES = 4 };
/* Runs of the first case of each dtype under --repeat (bitwise equal, DESIGN.md "Tests"). */
enum { FX_MATRIX_REPEAT = 3 };

static const fx_shape matrix_shapes[] = {
    {2, 113, 113, 2, 2, false, false, "tails: seqlen not a multiple of any tile"},
    {2, 113, 113, 2, 2, true, false, "causal, tails"},
    {1, 65, 200, 4, 2, true, true, "causal, seqlen_q < seqlen_k, GQA"},
    {1, 200, 65, 2, 2, true, false, "causal, seqlen_q > seqlen_k: rows that see no key"},
    {1, 200, 65, 2, 2, false, false, "seqlen_q > seqlen_k"},
    {1, 128, 128, 4, 1, false, true, "MQA"},
    {1, 1, 1, 1, 1, false, false, "length 1, batch·heads = 1"},
    {1, 1, 300, 1, 1, true, false, "one query row (decode), causal"},
};

/* Representatives of "multiples of m up to max": a non-power of two, the common sizes,
 * FA3's largest, and the smallest. */
static const int matrix_head_dim_candidates[] = {40, 64, 96, 128, 256, 8};
_Static_assert(sizeof matrix_head_dim_candidates / sizeof(int) <= FX_MAX_HEAD_DIMS,
               "the matrix's head_dims fit the array of a caps' explicit list");

/* The head_dims the matrix runs, into out[FX_MAX_HEAD_DIMS]: the caps' list, or the
 * candidates that are multiples of head_dim_multiple up to head_dim_max. */
static int matrix_head_dims(const fx_caps *c, int *out)
{
    if (c->n_head_dims > 0) {
        memcpy(out, c->head_dims, (size_t)c->n_head_dims * sizeof(int));
        return c->n_head_dims;
    }
    int n = 0;
    for (size_t i = 0; i < sizeof matrix_head_dim_candidates / sizeof(int); ++i) {
        const int d = matrix_head_dim_candidates[i];
        if (c->head_dim_multiple > 0 && d % c->head_dim_multiple == 0 && d <= c->head_dim_max)
            out[n++] = d;
    }
    return n;
}

/* The problem of shape sh at head_dim d and dtype dt, the index-th case of the matrix. */
static fx_problem matrix_problem(const fx_shape *sh, int d, fx_dtype dt, int index, bool fuzz)
{
    fx_problem p = fx_problem_default();
    p.batch = sh->batch;
    p.seqlen_q = sh->seqlen_q;
    p.seqlen_k = sh->seqlen_k;
    p.heads_q = sh->heads_q;
    p.heads_kv = sh->heads_kv;
    p.causal = sh->causal;
    p.head_dim = d;
    p.dtype = dt;
    p.softmax_scale = 0;
    p.seed = fuzz ? fx_fresh_seed() : 1000u + (uint64_t)index;
    p.dist = (fx_dist)(index % FX_DIST_COUNT);
    return p;
}

int fx_run_matrix(const fx_ctx *c0)
{
    /* Each case runs under the matrix's own modes: a copy of the program's context. */
    fx_ctx c = *c0;
    const fx_caps *caps = &c.self->caps;
    int dims[FX_MAX_HEAD_DIMS];
    int n_dims = matrix_head_dims(caps, dims);
    int passed = 0, failed = 0, skipped = 0, index = 0;
    c.opt.check = true;
    c.opt.bench = false;
    c.opt.csv = NULL;
    printf("GPU matrix of stage %s on %s (sm_%d%d, %d SMs)\n", c.self->id, c.dev.name,
           c.dev.cc_major, c.dev.cc_minor, c.dev.sm_count);
    for (int dt = 0; dt < FX_DTYPE_COUNT; ++dt) {
        if (!(caps->dtypes & FX_DTYPE_BIT(dt)))
            continue;
        for (int di = 0; di < n_dims; ++di) {
            for (size_t si = 0; si < sizeof matrix_shapes / sizeof matrix_shapes[0]; ++si) {
                const fx_shape *sh = &matrix_shapes[si];
                if (si >= FX_MATRIX_MASK_SHAPES && di != 0 && di != n_dims - 1)
                    continue;
                if ((sh->causal && !caps->causal) || (sh->needs_gqa && !caps->gqa))
                    continue;
                fx_problem p = matrix_problem(sh, dims[di], (fx_dtype)dt, index, c0->opt.fuzz);
                ++index;
                char why[256];
                if (fx_problem_validate(&p, why, sizeof why) != 0) {
                    printf("  skip: %s\n", why);
                    ++skipped;
                    continue;
                }
                c.opt.backward = caps->backward;
                c.opt.repeat = (si == 0 && di == 0) ? FX_MATRIX_REPEAT : 1;
                fx_case_result res;
                char line[256];
                fx_problem_format(&p, line, sizeof line);
                int rc = fx_run_case(&c, &p, false, &res);
                /* The matrix holds only shapes the capabilities cover: a refusal of one
                 * (exit 2, from check_problem) is a regression, not a skip; a shape this GPU
                 * lacks the shared memory for (77) is a skip. */
                const char *verdict = rc == 0 ? "PASS" : rc == FX_EXIT_NO_GPU ? "SKIP" : "FAIL";
                printf("  %-4s %s%s  [%s]  O err %.2e", verdict, line,
                       c.opt.backward ? " +bwd" : "", sh->why, res.err_ref);
                if (res.prev)
                    printf(" (vs %s %.2e)", res.prev->id, res.err_prev);
                if (c.opt.backward && res.checked_bwd)
                    printf("  grad err %.2e", res.err_ref_bwd);
                printf("\n");
                if (rc == 0)
                    ++passed;
                else if (rc == FX_EXIT_NO_GPU)
                    ++skipped;
                else {
                    ++failed;
                    /* Re-run verbosely so the log says which tensor failed and by how much. */
                    fx_run_case(&c, &p, true, &res);
                }
                fflush(stdout);
            }
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? FX_EXIT_FAIL : FX_EXIT_OK;
}
