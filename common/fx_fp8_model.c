/*
 * fx_fp8_model.c — stage 10's e4m3 forward on the CPU (fx_fp8_model.h says what and why).
 *
 * Host tensors are contiguous (fx_problem.h):
 *   Q8, O : [batch, seqlen_q, heads_q,  head_dim]
 *   K8, V8: [batch, seqlen_k, heads_kv, head_dim]
 *   LSE   : [batch, heads_q, seqlen_q], natural log
 */
#include "fx_fp8_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_fp8_acc.h"
#include "fx_host.h"
#include "fx_reference.h"
#include "fx_softmax.h"

#ifndef _OPENMP
/* The omp pragmas only spread independent (batch, head) slices over threads; without
 * OpenMP the loops run serially and give the same numbers. */
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

static void *xcalloc(size_t n, size_t size)
{
    void *ptr = calloc(n ? n : 1, size);
    if (!ptr) {
        fprintf(stderr, "fx_fp8_model: out of host memory (%zu elements of %zu bytes)\n", n, size);
        abort();
    }
    return ptr;
}

static int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

static bool key_visible(const fx_problem *p, int row, int key)
{
    return row < p->seqlen_q && key < p->seqlen_k &&
           (!p->causal || key <= row + p->seqlen_k - p->seqlen_q);
}

/* The e4m3 values of t's codes as floats, unscaled: what the tensor cores multiply. */
static float *decode(const fx_fp8_tensor *t)
{
    const size_t n = fx_fp8_tensor_numel(t);
    float *x = xcalloc(n, sizeof(float));
    float table[256];
    for (int c = 0; c < 256; ++c)
        table[c] = fx_e4m3_to_float((uint8_t)c);
    for (size_t e = 0; e < n; ++e)
        x[e] = table[t->codes[e]];
    return x;
}

/* The descale of block `block` (a tile index, not a row) of head h of batch b in t. */
static float block_descale(const fx_fp8_tensor *t, int b, int h, int block)
{
    return t->descale[((size_t)b * t->heads + h) * fx_fp8_tensor_blocks(t) + block];
}

static void require_shape(const fx_fp8_tensor *t, const char *name, int batch, int seqlen,
                          int heads, int head_dim)
{
    if (t->batch != batch || t->seqlen != seqlen || t->heads != heads || t->head_dim != head_dim) {
        fprintf(stderr,
                "fx_fp8_forward: %s is [%d, %d, %d, %d], the problem needs [%d, %d, %d, %d]\n",
                name, t->batch, t->seqlen, t->heads, t->head_dim, batch, seqlen, heads, head_dim);
        abort();
    }
}

/* One (batch, query head) slice's working memory. */
typedef struct row_state {
    float *S;   /* [kBlockN] the tile's scores Q8·K8ᵀ            */
    float *acc; /* [head_dim] O_unnormalised / v_unit            */
    float *P8;  /* [kBlockN] the tile's P in e4m3 (acc != NULL)  */
    float *Vt;  /* [head_dim][kBlockN] the tile's V8, transposed */
} row_state;

/* The tensor core's sum c + Σ_k a[k]·b[k] over n products: in fp32 (acc NULL: an ideal
 * accumulation, as fx_dot_f32 sums), or as the fx_fp8_acc.h model with parameters acc. */
static float tc_dot(const float *a, const float *b, int n, float c, const fx_fp8_acc_params *acc)
{
    return acc ? fx_fp8_dot_model(a, b, n, c, acc) : c + fx_dot_f32(a, b, n);
}

/* The Q tile loop of one (b, h) slice, each row on its own (as the kernel's rows are). */
static size_t forward_slice(const fx_problem *p, const fx_fp8_inputs *in, const float *qf,
                            const float *kf, const float *vf, float max_offset,
                            const fx_fp8_acc_params *acc, int b, int h, row_state *st, float *o,
                            float *lse)
{
    const int seqlen_q = p->seqlen_q, seqlen_k = p->seqlen_k, head_dim = p->head_dim;
    const int h_kv = h / (p->heads_q / p->heads_kv);
    const int kBlockM = in->q.block_rows, kBlockN = in->k.block_rows;
    const float c = (float)(p->softmax_scale * 1.4426950408889634); /* log2 units */
    const fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p);
    size_t past_fast_range = 0;

    for (int m_block = 0; m_block < ceil_div(seqlen_q, kBlockM); ++m_block) {
        /* K/V tiles [0, n_block_max) hold a key some row of the tile sees (stage 03's). */
        int n_block_max = ceil_div(seqlen_k, kBlockN);
        if (p->causal) {
            const int last_row =
                (m_block + 1) * kBlockM - 1 < seqlen_q ? (m_block + 1) * kBlockM - 1 : seqlen_q - 1;
            const int keys_seen = last_row + 1 + seqlen_k - seqlen_q;
            n_block_max =
                keys_seen <= 0 ? 0 : ceil_div(keys_seen < seqlen_k ? keys_seen : seqlen_k, kBlockN);
        }
        /* c·δQ once per Q tile; each K/V tile multiplies in its own δK. */
        const float c_q = c * block_descale(&in->q, b, h, m_block);
        for (int row = m_block * kBlockM; row < (m_block + 1) * kBlockM && row < seqlen_q; ++row) {
            const float *q_row = qf + fx_offset(lq, b, row, h, 0);
            float R = -INFINITY; /* running max of S·c_n, log2 units, rounded up */
            float l = 0.0f;      /* Σ P in fp32, before P's rounding           */
            float v_unit = 0.0f; /* the δV acc is expressed in; 0 until one is */
            memset(st->acc, 0, (size_t)head_dim * sizeof(float));
            for (int n_block = n_block_max - 1; n_block >= 0; --n_block) {
                const int key0 = n_block * kBlockN;
                const float c_n = c_q * block_descale(&in->k, b, h_kv, n_block);
                const float delta_v = block_descale(&in->v, b, h_kv, n_block);
                /* S = Q8·K8ᵀ over the keys the row sees; the mask is applied by skipping,
                 * not by S = -inf: a zero descale (an all-zero K tile) would make -inf·0 a
                 * NaN (the kernel must mask after scaling, or keep δ > 0 where it masks). */
                float s_max = -INFINITY;
                int n_visible = 0;
                for (int j = 0; j < kBlockN; ++j) {
                    if (!key_visible(p, row, key0 + j))
                        continue;
                    st->S[j] = tc_dot(q_row, kf + fx_offset(lkv, b, key0 + j, h_kv, 0), head_dim,
                                      0.0f, acc);
                    s_max = fmaxf(s_max, st->S[j]);
                    ++n_visible;
                }
                /* A tile this row sees none of. The tiles run from the last down, and such a
                 * tile (causal: keys past the row's diagonal) comes before the row's first
                 * visible one, where its O is still 0: the kernel's all-zero P leaves it 0
                 * (and truncating 0 is 0), α = 1. Skipping it is therefore exact, and keeps
                 * R - R from being -inf - -inf. */
                if (n_visible == 0)
                    continue;
                /* The running max in scaled units: the tiles' scales differ per block. */
                const float R_new = fmaxf(R, fx_mul_round_up(s_max, c_n));
                const float alpha = exp2f(R - R_new); /* 0 for the first tile: R = -inf */
                /* acc moves to this tile's V units, folded into the same rescale. */
                const float units = (v_unit != 0.0f && delta_v != 0.0f) ? v_unit / delta_v : 1.0f;
                const float alpha_o = alpha * units;
                if (delta_v != 0.0f)
                    v_unit = delta_v;
                R = R_new;
                l *= alpha;
                for (int d = 0; d < head_dim; ++d)
                    st->acc[d] *= alpha_o;
                /* P = 2^(S·c_n − (R − offset)) <= 2^offset, as one FFMA and one ex2. */
                const float r_ref = R - max_offset;
                for (int j = 0; j < kBlockN; ++j) {
                    float P8 = 0.0f; /* a key the row does not see: P = 0 */
                    if (key_visible(p, row, key0 + j)) {
                        const float P = exp2f(fmaf(st->S[j], c_n, -r_ref));
                        l += P;
                        P8 = fx_e4m3_round(P); /* cvt.rn.satfinite.e4m3x2.f32 */
                    }
                    if (!acc) { /* fp32: key by key (exact products: e4m3 × e4m3) */
                        if (P8 == 0.0f)
                            continue;
                        const float *v_row = vf + fx_offset(lkv, b, key0 + j, h_kv, 0);
                        for (int d = 0; d < head_dim; ++d)
                            st->acc[d] += P8 * v_row[d];
                        continue;
                    }
                    /* The tensor core's way: O[d] += P8·V8[:, d] as wgmma chains of k = 32
                     * keys, the accumulator the C of each (keys past seqlen_k are TMA's
                     * zeros: P8 = 0 there, and V is not read). */
                    st->P8[j] = P8;
                    const bool in_range = key0 + j < seqlen_k;
                    const float *v_row =
                        in_range ? vf + fx_offset(lkv, b, key0 + j, h_kv, 0) : NULL;
                    for (int d = 0; d < head_dim; ++d)
                        st->Vt[(size_t)d * kBlockN + j] = in_range ? v_row[d] : 0.0f;
                }
                if (acc)
                    for (int d = 0; d < head_dim; ++d)
                        st->acc[d] =
                            tc_dot(st->P8, st->Vt + (size_t)d * kBlockN, kBlockN, st->acc[d], acc);
            }
            float *o_row = o + fx_offset(lq, b, row, h, 0);
            float *lse_row = lse + ((size_t)b * p->heads_q + h) * seqlen_q + row;
            if (R == -INFINITY) { /* the row sees no key */
                memset(o_row, 0, (size_t)head_dim * sizeof(float));
                *lse_row = -INFINITY;
                continue;
            }
            if (!(fabsf(R) < FX_SOFTMAX_FAST_BELOW && l < INFINITY))
                ++past_fast_range;
            /* Epilogue: FA3's final scale 1/ℓ times v_descale (here the last tile's). */
            const float scale_o = (1.0f / l) * v_unit;
            for (int d = 0; d < head_dim; ++d)
                o_row[d] = fx_round(FX_BF16, st->acc[d] * scale_o);
            *lse_row = (R - max_offset) * FX_LN2 + logf(l);
        }
    }
    return past_fast_range;
}

size_t fx_fp8_forward_slices(const fx_problem *p, const fx_fp8_inputs *in, float max_offset,
                             const fx_fp8_acc_params *acc, int n_slices, const int *batch,
                             const int *head, float *o, float *lse)
{
    if (p->varlen || fx_head_dim_v(p) != p->head_dim) {
        fprintf(stderr, "fx_fp8_forward: fixed-length problems with head_dim_v == head_dim only\n");
        abort();
    }
    require_shape(&in->q, "Q", p->batch, p->seqlen_q, p->heads_q, p->head_dim);
    require_shape(&in->k, "K", p->batch, p->seqlen_k, p->heads_kv, p->head_dim);
    require_shape(&in->v, "V", p->batch, p->seqlen_k, p->heads_kv, p->head_dim);
    if (in->v.block_rows != in->k.block_rows) {
        fprintf(stderr, "fx_fp8_forward: V's blocks (%d rows) must be K's (%d): one tile each\n",
                in->v.block_rows, in->k.block_rows);
        abort();
    }
    float *qf = decode(&in->q), *kf = decode(&in->k), *vf = decode(&in->v);
    size_t past_fast_range = 0;
#pragma omp parallel reduction(+ : past_fast_range)
    {
        const size_t kn = (size_t)in->k.block_rows, d = (size_t)p->head_dim;
        row_state st = {xcalloc(kn, sizeof(float)), xcalloc(d, sizeof(float)),
                        xcalloc(kn, sizeof(float)), xcalloc(kn * d, sizeof(float))};
#pragma omp for schedule(dynamic)
        for (int i = 0; i < n_slices; ++i)
            past_fast_range +=
                forward_slice(p, in, qf, kf, vf, max_offset, acc, batch[i], head[i], &st, o, lse);
        free(st.S);
        free(st.acc);
        free(st.P8);
        free(st.Vt);
    }
    free(qf);
    free(kf);
    free(vf);
    return past_fast_range;
}

size_t fx_fp8_forward(const fx_problem *p, const fx_fp8_inputs *in, float max_offset,
                      const fx_fp8_acc_params *acc, float *o, float *lse)
{
    const int n = p->batch * p->heads_q;
    int *batch = xcalloc((size_t)n, sizeof(int)), *head = xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; ++i) {
        batch[i] = i / p->heads_q;
        head[i] = i % p->heads_q;
    }
    const size_t past = fx_fp8_forward_slices(p, in, max_offset, acc, n, batch, head, o, lse);
    free(batch);
    free(head);
    return past;
}

void fx_fp8_prepare(const fx_problem *p, const float *q, const float *k, const float *v,
                    fx_fp8_recipe r, fx_fp8_inputs *out)
{
    const size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p);
    const float *q_in = q, *k_in = k;
    float *q_t = NULL, *k_t = NULL;
    if (r.incoherent) {
        float *signs = xcalloc((size_t)p->head_dim, sizeof(float));
        fx_fp8_random_signs(r.sign_seed, p->head_dim, signs);
        q_t = xcalloc(nq, sizeof(float));
        k_t = xcalloc(nkv, sizeof(float));
        memcpy(q_t, q, nq * sizeof(float));
        memcpy(k_t, k, nkv * sizeof(float));
        fx_fp8_incoherent(q_t, nq / p->head_dim, p->head_dim, signs);
        fx_fp8_incoherent(k_t, nkv / p->head_dim, p->head_dim, signs);
        q_in = q_t;
        k_in = k_t;
        free(signs);
    }
    out->q = fx_fp8_tensor_alloc(p->batch, p->seqlen_q, p->heads_q, p->head_dim, r.tiles.block_m);
    out->k = fx_fp8_tensor_alloc(p->batch, p->seqlen_k, p->heads_kv, p->head_dim, r.tiles.block_n);
    out->v = fx_fp8_tensor_alloc(p->batch, p->seqlen_k, p->heads_kv, p->head_dim, r.tiles.block_n);
    fx_fp8_quantize(q_in, r.scaling, p->heads_q / p->heads_kv, &out->q);
    fx_fp8_quantize(k_in, r.scaling, 1, &out->k);
    fx_fp8_quantize(v, r.scaling, 1, &out->v);
    free(q_t);
    free(k_t);
}

void fx_fp8_inputs_free(fx_fp8_inputs *in)
{
    fx_fp8_tensor_free(&in->q);
    fx_fp8_tensor_free(&in->k);
    fx_fp8_tensor_free(&in->v);
}
