/*
 * fx_splitkv.c — the split-KV forward, the combine and the num_splits heuristic on the CPU
 * (fx_splitkv.h says what each computes and where it comes from).
 */
#include "fx_splitkv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef _OPENMP
/* The omp pragma only spreads independent rows over threads; without OpenMP the loop runs
 * serially and gives the same numbers. */
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

static void die(const char *what)
{
    fprintf(stderr, "fx_splitkv: %s\n", what);
    abort();
}

static void *xmalloc(size_t bytes)
{
    void *ptr = malloc(bytes ? bytes : 1);
    if (!ptr)
        die("out of host memory");
    return ptr;
}

static int ceil_div(int64_t a, int64_t b)
{
    return (int)((a + b - 1) / b);
}

fx_splitkv_partials fx_splitkv_partials_alloc(const fx_problem *p, int num_splits, float fill)
{
    if (num_splits < 1 || num_splits > FX_SPLITKV_MAX_SPLITS)
        die("num_splits outside [1, FX_SPLITKV_MAX_SPLITS]");
    fx_splitkv_partials t = {.num_splits = num_splits,
                             .batch = p->batch,
                             .heads_q = p->heads_q,
                             .seqlen_q = p->seqlen_q,
                             .head_dim_v = fx_head_dim_v(p)};
    const size_t n_lse = (size_t)num_splits * t.batch * t.heads_q * t.seqlen_q;
    const size_t n_o = n_lse * t.head_dim_v;
    t.lse = xmalloc(n_lse * sizeof(float));
    t.o = xmalloc(n_o * sizeof(float));
    for (size_t e = 0; e < n_lse; ++e)
        t.lse[e] = fill;
    for (size_t e = 0; e < n_o; ++e)
        t.o[e] = fill;
    return t;
}

void fx_splitkv_partials_free(fx_splitkv_partials *t)
{
    free(t->o);
    free(t->lse);
    t->o = t->lse = NULL;
}

int fx_splitkv_n_block_max(int seqlen_q, int seqlen_k, bool causal, fx_splitkv_tiles tiles,
                           int m_block)
{
    int n_block_max = ceil_div(seqlen_k, tiles.block_n);
    if (causal) {
        /* The key the tile's last row (m_block + 1)·kBlockM − 1 sees last, plus one. */
        const int64_t keys = (int64_t)(m_block + 1) * tiles.block_m + seqlen_k - seqlen_q;
        const int causal_max = keys <= 0 ? 0 : ceil_div(keys, tiles.block_n);
        if (causal_max < n_block_max)
            n_block_max = causal_max;
    }
    return n_block_max;
}

bool fx_splitkv_split_range(int n_block_max, int num_splits, int split, int *n_begin, int *n_end)
{
    const int per = ceil_div(n_block_max, num_splits);
    const int64_t begin = (int64_t)split * per;
    const int64_t end = begin + per < n_block_max ? begin + per : n_block_max;
    *n_begin = (int)(begin < n_block_max ? begin : n_block_max);
    *n_end = (int)end;
    return begin < end;
}

/* ---- the split forward ------------------------------------------------------------------- */

static double dot_f64(const float *a, const float *b, int n)
{
    double s = 0;
    for (int d = 0; d < n; ++d)
        s += (double)a[d] * b[d];
    return s;
}

/* Split s's outputs for query row i of (b, h): the online softmax over blocks [n_begin, n_end)
 * from the last down, in fp64 (acc: head_dim_v doubles of scratch). */
static void split_row(const fx_problem *p, const float *q, const float *k, const float *v,
                      fx_splitkv_tiles tiles, int b, int h, int i, int n_begin, int n_end,
                      double *acc, float *o_s, float *lse_s)
{
    const int d = p->head_dim, dv = fx_head_dim_v(p), hk = h / (p->heads_q / p->heads_kv);
    const fx_layout lq = fx_layout_q(p), lk = fx_layout_kv(p), lv = fx_layout_v(p);
    const int seen = fx_keys_seen(p, i);
    const float *q_i = q + fx_offset(lq, b, i, h, 0);
    double m = -INFINITY, l = 0;
    for (int c = 0; c < dv; ++c)
        acc[c] = 0;
    for (int n = n_end - 1; n >= n_begin; --n) {
        const int j0 = n * tiles.block_n;
        int j1 = j0 + tiles.block_n;
        if (j1 > seen) /* the mask: keys past the row's last (and past seqlen_k) */
            j1 = seen;
        if (j1 <= j0)
            continue; /* the whole block is masked for this row */
        double m_new = m;
        for (int j = j0; j < j1; ++j) {
            const double s = p->softmax_scale * dot_f64(q_i, k + fx_offset(lk, b, j, hk, 0), d);
            if (s > m_new)
                m_new = s;
        }
        /* m_new is finite here (the block holds a key); exp(−inf) = 0 on the first block. */
        const double alpha = exp(m - m_new);
        l *= alpha;
        for (int c = 0; c < dv; ++c)
            acc[c] *= alpha;
        for (int j = j0; j < j1; ++j) {
            const double s = p->softmax_scale * dot_f64(q_i, k + fx_offset(lk, b, j, hk, 0), d);
            const double pj = exp(s - m_new);
            const float *v_j = v + fx_offset(lv, b, j, hk, 0);
            l += pj;
            for (int c = 0; c < dv; ++c)
                acc[c] += pj * v_j[c];
        }
        m = m_new;
    }
    if (l == 0) { /* no key of this split is visible to the row */
        for (int c = 0; c < dv; ++c)
            o_s[c] = 0.0f;
        *lse_s = -INFINITY;
        return;
    }
    for (int c = 0; c < dv; ++c)
        o_s[c] = (float)(acc[c] / l);
    *lse_s = (float)(m + log(l));
}

void fx_splitkv_forward(const fx_problem *p, const float *q, const float *k, const float *v,
                        fx_splitkv_tiles tiles, fx_splitkv_partials *part)
{
    if (p->varlen)
        die("a variable-length batch is not modelled");
    if (tiles.block_m < 1 || tiles.block_n < 1)
        die("kBlockM and kBlockN must be >= 1");
    if (part->batch != p->batch || part->heads_q != p->heads_q || part->seqlen_q != p->seqlen_q ||
        part->head_dim_v != fx_head_dim_v(p))
        die("partials of another shape than the problem");
    const int S = part->num_splits, dv = fx_head_dim_v(p);
    const int rows = p->batch * p->heads_q * p->seqlen_q;
#pragma omp parallel
    {
        double *acc = xmalloc((size_t)dv * sizeof(double));
#pragma omp for schedule(dynamic, 16)
        for (int r = 0; r < rows; ++r) {
            const int i = r % p->seqlen_q, h = r / p->seqlen_q % p->heads_q,
                      b = r / p->seqlen_q / p->heads_q;
            const int n_block_max = fx_splitkv_n_block_max(p->seqlen_q, p->seqlen_k, p->causal,
                                                           tiles, i / tiles.block_m);
            for (int s = 0; s < S; ++s) {
                int n_begin, n_end;
                float *lse_s = part->lse + fx_splitkv_lse_at(part, s, b, h, i);
                if (!fx_splitkv_split_range(n_block_max, S, s, &n_begin, &n_end)) {
                    *lse_s = -INFINITY; /* empty split: O_partial is not written */
                    continue;
                }
                split_row(p, q, k, v, tiles, b, h, i, n_begin, n_end, acc,
                          part->o + fx_splitkv_o_at(part, s, b, h, i), lse_s);
            }
        }
        free(acc);
    }
}

/* ---- the combine ------------------------------------------------------------------------- */

void fx_splitkv_combine_row(int num_splits, int head_dim_v, const float *lse_partial,
                            size_t lse_stride, const float *o_partial, size_t o_stride, float *o,
                            float *lse)
{
    float m = -INFINITY;
    for (int s = 0; s < num_splits; ++s)
        if (lse_partial[s * lse_stride] > m)
            m = lse_partial[s * lse_stride];
    for (int c = 0; c < head_dim_v; ++c)
        o[c] = 0.0f;
    if (m == -INFINITY) { /* every split empty for this row: it sees no key */
        *lse = -INFINITY;
        return;
    }
    float sum = 0.0f; /* Σ w_s, >= 1: the largest split's w is exp(0) = 1 */
    for (int s = 0; s < num_splits; ++s)
        sum += expf(lse_partial[s * lse_stride] - m);
    *lse = m + logf(sum);
    for (int s = 0; s < num_splits; ++s) {
        const float w = expf(lse_partial[s * lse_stride] - m);
        if (w == 0.0f)
            continue; /* empty split (or a share below fp32's range): O_s is not read */
        const float scale = w / sum;
        const float *o_s = o_partial + s * o_stride;
        for (int c = 0; c < head_dim_v; ++c)
            o[c] += scale * o_s[c];
    }
}

void fx_splitkv_combine(const fx_problem *p, const fx_splitkv_partials *part, float *o, float *lse)
{
    if (p->varlen)
        die("a variable-length batch is not modelled");
    const fx_layout lo = fx_layout_o(p);
    const size_t lse_stride = (size_t)part->batch * part->heads_q * part->seqlen_q;
    const size_t o_stride = lse_stride * part->head_dim_v;
    const int rows = p->batch * p->heads_q * p->seqlen_q;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
        const int i = r % p->seqlen_q, h = r / p->seqlen_q % p->heads_q,
                  b = r / p->seqlen_q / p->heads_q;
        fx_splitkv_combine_row(part->num_splits, part->head_dim_v,
                               part->lse + fx_splitkv_lse_at(part, 0, b, h, i), lse_stride,
                               part->o + fx_splitkv_o_at(part, 0, b, h, i), o_stride,
                               o + fx_offset(lo, b, i, h, 0), lse + fx_lse_index(p, b, h, i));
    }
}

/* ---- the heuristic ----------------------------------------------------------------------- */

int fx_num_splits_heuristic(const fx_splitkv_heuristic_in *in)
{
    if ((float)in->total_m_blocks >= 0.8f * (float)in->num_sms) {
        if (in->kv_head_bytes > FX_SPLITKV_L2_BYTES && in->num_m_blocks >= 2 * in->num_sms &&
            !in->causal) {
            int64_t splits = (in->kv_head_bytes + FX_SPLITKV_L2_BYTES - 1) / FX_SPLITKV_L2_BYTES;
            if (splits > in->max_splits)
                splits = in->max_splits;
            if (splits > in->num_n_blocks)
                splits = in->num_n_blocks;
            return splits < 1 ? 1 : (int)splits;
        }
        return 1;
    }
    if (in->num_n_blocks <= 4)
        return 1;
    int most = in->max_splits;
    if (in->num_sms < most)
        most = in->num_sms;
    if (in->num_n_blocks < most)
        most = in->num_n_blocks;
    /* Two passes: the best efficiency, then the fewest splits within 85 % of it. */
    float best = 0.0f;
    for (int S = 1; S <= most; ++S) {
        const float waves = (float)in->total_m_blocks * (float)S / (float)in->num_sms;
        const float efficiency = waves / ceilf(waves);
        if (efficiency > best)
            best = efficiency;
    }
    for (int S = 1; S <= most; ++S) {
        const float waves = (float)in->total_m_blocks * (float)S / (float)in->num_sms;
        if (waves / ceilf(waves) >= 0.85 * best)
            return S;
    }
    return 1;
}

fx_splitkv_heuristic_in fx_splitkv_heuristic_inputs(const fx_problem *p, fx_splitkv_tiles tiles,
                                                    int num_sms, bool pack_gqa)
{
    const int G = p->heads_q / p->heads_kv;
    fx_splitkv_heuristic_in in = {.num_sms = num_sms, .causal = p->causal};
    in.max_splits = FX_SPLITKV_MAX_SPLITS;
    if (pack_gqa) {
        in.num_m_blocks = ceil_div((int64_t)p->seqlen_q * G, tiles.block_m);
        in.total_m_blocks = p->batch * p->heads_kv * in.num_m_blocks;
    } else {
        in.num_m_blocks = ceil_div(p->seqlen_q, tiles.block_m);
        in.total_m_blocks = p->batch * p->heads_q * in.num_m_blocks;
    }
    in.num_n_blocks = ceil_div(p->seqlen_k, tiles.block_n);
    in.kv_head_bytes =
        (int64_t)p->seqlen_k * (p->head_dim + fx_head_dim_v(p)) * (int64_t)fx_dtype_bytes(p->dtype);
    return in;
}

int fx_splitkv_check_num_splits(int num_splits, char *why, size_t why_len)
{
    if (num_splits >= 1 && num_splits <= FX_SPLITKV_MAX_SPLITS)
        return 0;
    snprintf(why, why_len, "num_splits (%d) is outside [1, %d]", num_splits, FX_SPLITKV_MAX_SPLITS);
    return 2;
}
