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

/* Variable-length batches, for stages with caps.varlen. The first runs at every head_dim
 * (it holds the masking edges: lengths 0 and 1, the kBlockM = 128 tile ± 1, causal with
 * seqlen_q != seqlen_k per sequence), the rest at the first and last of each dtype. */
enum { FX_MATRIX_VARLEN_MAX_SEQS = 6 };
typedef struct fx_varlen_shape {
    int n; /* sequences */
    int seqlens_q[FX_MATRIX_VARLEN_MAX_SEQS], seqlens_k[FX_MATRIX_VARLEN_MAX_SEQS];
    int seqused_k[FX_MATRIX_VARLEN_MAX_SEQS]; /* all 0: no seqused_k */
    int heads_q, heads_kv;
    bool causal;
    const char *why;
} fx_varlen_shape;

static const fx_varlen_shape matrix_varlen_shapes[] = {
    {4,
     {0, 1, 127, 129},
     {5, 0, 129, 300},
     {0},
     2,
     2,
     true,
     "varlen, causal: lengths 0 and 1, tiles ± 1, seqlen_q != seqlen_k"},
    {5,
     {128, 127, 129, 1, 200},
     {128, 127, 129, 1, 65},
     {0},
     4,
     2,
     false,
     "varlen, GQA: tile-sized sequences and ± 1"},
    {3,
     {200, 65, 1},
     {65, 200, 300},
     {0},
     2,
     2,
     true,
     "varlen, causal: seqlen_q > seqlen_k (rows that see no key) and <"},
    {3,
     {64, 100, 3},
     {200, 150, 10},
     {130, 0, 7},
     2,
     1,
     false,
     "varlen, seqused_k (a sequence using none of its keys), MQA"},
};

/* The offsets a varlen case's problem points to, alive while it runs. */
typedef struct fx_varlen_storage {
    int cu_q[FX_MATRIX_VARLEN_MAX_SEQS + 1], cu_k[FX_MATRIX_VARLEN_MAX_SEQS + 1];
    int seqused_k[FX_MATRIX_VARLEN_MAX_SEQS];
} fx_varlen_storage;

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
    if (dt == FX_E4M3) {
        /* e4m3 (stage 10): three digits of the case index in mixed radix, so that every 12
         * cases see each combination once: V's layout (row-major, transposed in the kernel,
         * on even cases; handed in transposed on odd ones, whose TMA row stride of seqlen_k
         * bytes must be a multiple of 16: the tails stay, no tile is 16 keys), then the
         * scaling recipe, then incoherent processing (head_dim a power of two). Until
         * 2026-12-06 the recipe was index % 3 and the layout index % 2 with the Hadamard
         * digit index / 3: the row-major cases never met per-tensor or per-block scaling
         * with Hadamard. */
        p.fp8_v_transposed = index % 2 == 1;
        p.fp8_scaling = (fx_fp8_scaling)((index / 2) % FX_FP8_SCALING_COUNT);
        p.fp8_hadamard = (index / (2 * FX_FP8_SCALING_COUNT)) % 2 == 1 && (d & (d - 1)) == 0;
        if (p.fp8_v_transposed)
            p.seqlen_k = (p.seqlen_k + 15) / 16 * 16;
    }
    return p;
}

/* The varlen problem of shape sh, its offsets in st (fx_problem.h's packed layout). */
static fx_problem matrix_varlen_problem(const fx_varlen_shape *sh, int d, fx_dtype dt, int index,
                                        bool fuzz, fx_varlen_storage *st)
{
    const fx_shape base = {sh->n, 1, 1, sh->heads_q, sh->heads_kv, sh->causal, false, sh->why};
    fx_problem p = matrix_problem(&base, d, dt, index, fuzz);
    bool used = false;
    for (int b = 0; b < sh->n; ++b)
        used |= sh->seqused_k[b] != 0;
    st->cu_q[0] = st->cu_k[0] = 0;
    p.seqlen_q = p.seqlen_k = 0;
    for (int b = 0; b < sh->n; ++b) {
        const int keys = used ? sh->seqused_k[b] : sh->seqlens_k[b];
        st->cu_q[b + 1] = st->cu_q[b] + sh->seqlens_q[b];
        st->cu_k[b + 1] = st->cu_k[b] + sh->seqlens_k[b];
        st->seqused_k[b] = sh->seqused_k[b];
        p.seqlen_q = sh->seqlens_q[b] > p.seqlen_q ? sh->seqlens_q[b] : p.seqlen_q;
        p.seqlen_k = keys > p.seqlen_k ? keys : p.seqlen_k;
    }
    p.varlen = true;
    p.total_q = st->cu_q[sh->n];
    p.total_k = st->cu_k[sh->n];
    p.cu_seqlens_q = st->cu_q;
    p.cu_seqlens_k = st->cu_k;
    p.seqused_k = used ? st->seqused_k : NULL;
    return p;
}

/* The matrix's tally. */
typedef struct fx_tally {
    int passed, failed, skipped;
} fx_tally;

/* Runs one case of the matrix (c's modes) and prints its line. */
static void matrix_case(fx_ctx *c, fx_problem *p, const char *why_text, fx_tally *t)
{
    char why[256];
    if (fx_problem_validate(p, why, sizeof why) != 0) {
        printf("  skip: %s\n", why);
        ++t->skipped;
        return;
    }
    fx_case_result res;
    char line[512];
    fx_problem_format(p, line, sizeof line);
    int rc = fx_run_case(c, p, false, &res);
    /* The matrix holds only shapes the capabilities cover: a refusal of one (exit 2, from
     * check_problem) is a regression, not a skip; a shape this GPU lacks the shared memory
     * for (77) is a skip. */
    const char *verdict = rc == 0 ? "PASS" : rc == FX_EXIT_NO_GPU ? "SKIP" : "FAIL";
    printf("  %-4s %s%s  [%s]  O err %.2e", verdict, line, c->opt.backward ? " +bwd" : "", why_text,
           res.err_ref);
    if (res.prev)
        printf(" (vs %s %.2e)", res.prev->id, res.err_prev);
    if (c->opt.backward && res.checked_bwd)
        printf("  grad err %.2e", res.err_ref_bwd);
    printf("\n");
    if (rc == 0)
        ++t->passed;
    else if (rc == FX_EXIT_NO_GPU)
        ++t->skipped;
    else {
        ++t->failed;
        /* Re-run verbosely so the log says which tensor failed and by how much. */
        fx_run_case(c, p, true, &res);
    }
    fflush(stdout);
}

int fx_run_matrix(const fx_ctx *c0)
{
    /* Each case runs under the matrix's own modes: a copy of the program's context. */
    fx_ctx c = *c0;
    const fx_caps *caps = &c.self->caps;
    int dims[FX_MAX_HEAD_DIMS];
    int n_dims = matrix_head_dims(caps, dims);
    fx_tally t = {0, 0, 0};
    int index = 0;
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
                c.opt.backward = caps->backward;
                c.opt.repeat = (si == 0 && di == 0) ? FX_MATRIX_REPEAT : 1;
                matrix_case(&c, &p, sh->why, &t);
            }
        }
    }
    /* The varlen cases after the fixed-length ones, whose seeds (by index) stay as they were. */
    for (int dt = 0; caps->varlen && dt < FX_DTYPE_COUNT; ++dt) {
        if (!(caps->dtypes & FX_DTYPE_BIT(dt)))
            continue;
        for (int di = 0; di < n_dims; ++di) {
            const size_t n_varlen = sizeof matrix_varlen_shapes / sizeof matrix_varlen_shapes[0];
            for (size_t si = 0; si < n_varlen; ++si) {
                const fx_varlen_shape *sh = &matrix_varlen_shapes[si];
                if (si >= 1 && di != 0 && di != n_dims - 1)
                    continue;
                if ((sh->causal && !caps->causal) || (sh->heads_q != sh->heads_kv && !caps->gqa))
                    continue;
                fx_varlen_storage st;
                fx_problem p =
                    matrix_varlen_problem(sh, dims[di], (fx_dtype)dt, index, c0->opt.fuzz, &st);
                ++index;
                /* No stage takes a varlen backward yet: caps.backward says nothing of it. */
                c.opt.backward = false;
                c.opt.repeat = (si == 0 && di == 0) ? FX_MATRIX_REPEAT : 1;
                matrix_case(&c, &p, sh->why, &t);
            }
        }
    }
    /* head_dim_v != head_dim (caps.head_dim_v_pairs): every fixed-length shape and, with
     * caps.varlen, every varlen one at each pair, after the rest (whose seeds stay). */
    for (int dt = 0; dt < FX_DTYPE_COUNT; ++dt) {
        if (!(caps->dtypes & FX_DTYPE_BIT(dt)))
            continue;
        for (int pi = 0; pi < caps->n_head_dim_v_pairs && pi < FX_MAX_HEAD_DIM_V_PAIRS; ++pi) {
            const fx_head_dim_pair pair = caps->head_dim_v_pairs[pi];
            c.opt.backward = false; /* forward only at head_dim_v != head_dim */
            for (size_t si = 0; si < sizeof matrix_shapes / sizeof matrix_shapes[0]; ++si) {
                const fx_shape *sh = &matrix_shapes[si];
                if ((sh->causal && !caps->causal) || (sh->needs_gqa && !caps->gqa))
                    continue;
                fx_problem p = matrix_problem(sh, pair.head_dim, (fx_dtype)dt, index, c0->opt.fuzz);
                p.head_dim_v = pair.head_dim_v;
                ++index;
                c.opt.repeat = si == 0 ? FX_MATRIX_REPEAT : 1;
                matrix_case(&c, &p, sh->why, &t);
            }
            const size_t n_varlen = sizeof matrix_varlen_shapes / sizeof matrix_varlen_shapes[0];
            for (size_t si = 0; caps->varlen && si < n_varlen; ++si) {
                const fx_varlen_shape *sh = &matrix_varlen_shapes[si];
                if ((sh->causal && !caps->causal) || (sh->heads_q != sh->heads_kv && !caps->gqa))
                    continue;
                fx_varlen_storage st;
                fx_problem p = matrix_varlen_problem(sh, pair.head_dim, (fx_dtype)dt, index,
                                                     c0->opt.fuzz, &st);
                p.head_dim_v = pair.head_dim_v;
                ++index;
                c.opt.repeat = 1;
                matrix_case(&c, &p, sh->why, &t);
            }
        }
    }
    printf("%d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped);
    return t.failed ? FX_EXIT_FAIL : FX_EXIT_OK;
}
