/*
 * fx_problem.h — the attention problem every stage solves, and its options.
 *
 * Layout (DESIGN.md, "The harness contract"):
 *   Q, dQ        : [batch, seqlen_q, heads_q,  head_dim],   head_dim contiguous
 *   O, dO        : [batch, seqlen_q, heads_q,  head_dim_v], head_dim_v contiguous
 *   K, dK        : [batch, seqlen_k, heads_kv, head_dim]
 *   V, dV        : [batch, seqlen_k, heads_kv, head_dim_v]
 *   LSE          : fp32 [batch, heads_q, seqlen_q], natural log
 * GQA/MQA: query head h reads kv head h / (heads_q / heads_kv).
 * Causal is bottom-right aligned: query row i sees key j iff
 *   j <= i + seqlen_k - seqlen_q.
 * A row that sees no key has O = 0, LSE = -inf, and zero gradients.
 *
 * head_dim_v (fx_head_dim_v) is V's and O's width: head_dim unless a stage's caps allow
 * another (FA3's 192 with 128, DeepSeek's shape).
 *
 * Variable-length batch (p->varlen; FlashAttention's flash_attn_varlen_func layout): the
 * batch's sequences are packed along the rows, with no padding between them:
 *   Q, O         : [total_q, heads_q,  head_dim(_v)]   sequence b's rows cu_seqlens_q[b] ..
 *   K, V         : [total_k, heads_kv, head_dim(_v)]                  cu_seqlens_q[b+1]-1
 *   LSE          : fp32 [heads_q, total_q]
 * i.e. the fixed-length layout with batch 1 and seqlen total_*; fx_layout_q/kv give
 * batch_stride 0, and row cu_seqlens_q[b] + i is row i of sequence b. Sequence b has
 * seqlen_q(b) = cu_seqlens_q[b+1] - cu_seqlens_q[b] queries and seqlen_k(b) keys:
 * seqused_k[b] when seqused_k is set (the first seqused_k[b] of its cu_seqlens_k rows), else
 * cu_seqlens_k[b+1] - cu_seqlens_k[b]. Either may be 0. Causal is bottom-right aligned per
 * sequence. seqlen_q and seqlen_k are then the largest per-sequence lengths (FA's
 * max_seqlen_q/k) and may be 0 only in a varlen batch.
 */
#ifndef FX_PROBLEM_H
#define FX_PROBLEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fx_fp8.h" /* fx_fp8_scaling */

#ifdef __cplusplus
extern "C" {
#endif

/* e4m3 (stage 10): Q, K, V are drawn in fp32, quantized to e4m3 codes with fp32 descales by
 * the problem's fp8 recipe (fp8_scaling, fp8_hadamard; common/fx_fp8.h), and O is bf16
 * (FA3's fp8 output type). Its cases run through common/fx_fp8_case.c. */
typedef enum fx_dtype { FX_BF16 = 0, FX_FP16 = 1, FX_E4M3 = 2, FX_DTYPE_COUNT } fx_dtype;

#define FX_DTYPE_BIT(dt) (1u << (unsigned)(dt))

/* The most sequences a variable-length batch may hold. */
#define FX_VARLEN_MAX_SEQS 1024

/* Input distributions (DESIGN.md): */
typedef enum fx_dist {
    FX_DIST_NORMAL = 0,   /* Q, K, V, dO ~ N(0, 1)                                   */
    FX_DIST_OUTLIERS,     /* N(0,1) + N(0,100)·Bernoulli(0.001): FA3 paper, Table 3  */
    FX_DIST_LARGE_LOGITS, /* Q, K ~ N(0, 8²): logits ~ 64·N(0,1) after the scale     */
    FX_DIST_COUNT
} fx_dist;

typedef struct fx_problem {
    int batch;
    int seqlen_q, seqlen_k;
    int heads_q, heads_kv;
    int head_dim;
    /* Columns of V and O (and dV, dO): 0 or head_dim means head_dim (the default, and what
     * a problem filled without it gets); else a multiple of 8 up to 256, for stages whose
     * caps list the pair (fx_caps.head_dim_v_pairs). Read it through fx_head_dim_v. */
    int head_dim_v;
    fx_dtype dtype;
    bool causal;
    double softmax_scale; /* <= 0 means 1/sqrt(head_dim), resolved by fx_problem_validate */
    uint64_t seed;
    fx_dist dist;
    /* Q and K are multiplied by this after being drawn from `dist`, before rounding to the
     * dtype (fx_fill): logits qk_scale² times larger for every stage, the reference and the
     * emulation alike. Finite and > 0; 1 by default. */
    double qk_scale;
    /* Variable-length batch (layout above; stages with caps.varlen). When varlen is false
     * the fields below are unused (zero, NULL). When true: batch sequences (1 ..
     * FX_VARLEN_MAX_SEQS); cu_seqlens_q/k point to batch + 1 row offsets in host memory,
     * 0 first, never decreasing, cu_seqlens_q[batch] == total_q, cu_seqlens_k[batch] ==
     * total_k; seqused_k is NULL or batch counts with seqused_k[b] <= cu_seqlens_k[b+1] -
     * cu_seqlens_k[b]. The arrays are not owned: whoever fills the problem keeps them alive
     * (fx_options holds those the command line gives). Pointers, not arrays, so that the
     * struct stays small: stage 01 passes it to its kernels by value. */
    bool varlen;
    int total_q, total_k;
    const int *cu_seqlens_q, *cu_seqlens_k, *seqused_k;
    /* dtype e4m3 only (fx_problem_validate refuses them with another dtype): how the fp32
     * inputs become e4m3 codes and descales (fx_fp8.h), and how V is handed to the kernel.
     *   fp8_scaling:      per-tensor (the default), per-head or per-block descales;
     *   fp8_hadamard:     incoherent processing of Q and K first (FA3 §3.3; head_dim a
     *                     power of two), signs from the problem's seed;
     *   fp8_v_transposed: V given as Vᵀ [batch, heads_kv, head_dim, seqlen_k] (seqlen_k
     *                     contiguous: K-major for O = PV), instead of in K's layout. */
    fx_fp8_scaling fp8_scaling;
    bool fp8_hadamard;
    bool fp8_v_transposed;
} fx_problem;

/* V's and O's columns: p->head_dim_v, or head_dim when it is 0. */
static inline int fx_head_dim_v(const fx_problem *p)
{
    return p->head_dim_v > 0 ? p->head_dim_v : p->head_dim;
}

/* Element strides of one tensor; its last dimension is always contiguous (stride 1). */
typedef struct fx_layout {
    int64_t batch_stride, row_stride, head_stride;
} fx_layout;

/* The default problem of the main job: batch 4, seqlen 4096, heads 16, head_dim 128, bf16,
 * qk_scale 1. */
fx_problem fx_problem_default(void);

/* Checks sizes and derived values; fills softmax_scale with 1/sqrt(head_dim) when it
 * is <= 0. Refuses: a size <= 0; heads_q not a multiple of heads_kv; head_dim, or a
 * head_dim_v that is set (not 0), not a multiple of 8 in [8, 256]; an unknown dtype or
 * dist; a qk_scale that is not finite and > 0 (its overflow limit is fx_options_parse's: it
 * names the option); an fp8 option (fp8_scaling other than per-tensor, fp8_hadamard,
 * fp8_v_transposed) without dtype e4m3, an unknown fp8_scaling, and e4m3 with a
 * variable-length batch, with head_dim_v != head_dim, or with fp8_hadamard at a head_dim
 * that is not a power of two; Q, O, K, V or LSE with more than INT32_MAX elements (kernels index
 * with 32-bit ints); a non-finite softmax_scale, or one outside [2^-100, 2^100] once
 * resolved (FX_SCALE_MIN, FX_SCALE_MAX of fx_problem.c).
 * A variable-length batch (p->varlen) is refused, naming the index and values, where
 * batch is above FX_VARLEN_MAX_SEQS, a cu_seqlens array is NULL, does not start at 0,
 * decreases or does not end at total_q/total_k, a seqused_k[b] is negative or above its
 * sequence's cu_seqlens_k length, or seqlen_q/seqlen_k is below a sequence's length; its
 * sizes may be 0 only there (seqlen_q, seqlen_k, totals), and the element limits count
 * total_q and total_k rows (and count V and O at head_dim_v columns).
 * Returns 0, or 2 with a message naming the bad value in `why` (usage error), e.g.
 * "heads_q (6) is not a multiple of heads_kv (4)". */
int fx_problem_validate(fx_problem *p, char *why, size_t why_len);

/* Contiguous layouts of Q (heads_q) and K (heads_kv) at head_dim columns, of O (heads_q)
 * and V (heads_kv) at head_dim_v; batch_stride 0 when varlen (the sequences are packed
 * along the rows: fx_seq_start_q/k). With head_dim_v == head_dim, O's is Q's and V's K's. */
fx_layout fx_layout_q(const fx_problem *p);
fx_layout fx_layout_kv(const fx_problem *p);
fx_layout fx_layout_o(const fx_problem *p);
fx_layout fx_layout_v(const fx_problem *p);

/* Element offset of (batch b, sequence row, head, column d) in a tensor of layout l:
 * the one place the [batch, seqlen, heads, head_dim] index is written. */
static inline size_t fx_offset(fx_layout l, int b, int row, int head, int d)
{
    return (size_t)(b * l.batch_stride + row * l.row_stride + head * l.head_stride + d);
}

/* Element counts (varlen: total_q or total_k in place of batch·seqlen_q or batch·seqlen_k). */
size_t fx_numel_q(const fx_problem *p);   /* batch·seqlen_q·heads_q·head_dim    (Q, dQ) */
size_t fx_numel_kv(const fx_problem *p);  /* batch·seqlen_k·heads_kv·head_dim   (K, dK) */
size_t fx_numel_o(const fx_problem *p);   /* batch·seqlen_q·heads_q·head_dim_v  (O, dO) */
size_t fx_numel_v(const fx_problem *p);   /* batch·seqlen_k·heads_kv·head_dim_v (V, dV) */
size_t fx_numel_lse(const fx_problem *p); /* batch·heads_q·seqlen_q                     */

/* Sequence b (0 <= b < batch): its query rows and the keys it attends. Fixed-length:
 * seqlen_q and seqlen_k. Varlen: cu_seqlens_q[b+1] - cu_seqlens_q[b], and seqused_k[b] when
 * seqused_k is set, else cu_seqlens_k[b+1] - cu_seqlens_k[b]. */
int fx_seq_len_q(const fx_problem *p, int b);
int fx_seq_len_k(const fx_problem *p, int b);
/* The row of sequence b's first query (key) within batch index b of the layout: 0 for a
 * fixed-length batch (fx_offset's batch_stride separates the sequences), cu_seqlens_q[b]
 * (cu_seqlens_k[b]) when varlen. Row i of sequence b is fx_offset(l, b, start + i, ...). */
int fx_seq_start_q(const fx_problem *p, int b);
int fx_seq_start_k(const fx_problem *p, int b);
/* Sequence b as a fixed-length problem of batch 1: seqlen_q and seqlen_k its lengths (either
 * may be 0: fx_problem_validate refuses that, the reference does not), varlen false, the
 * rest p's. Its tensors are views of p's: rows from fx_seq_start_q/k(p, b), p's row and head
 * strides (the same as the sub-problem's contiguous ones). */
fx_problem fx_seq_problem(const fx_problem *p, int b);
/* Index of LSE row i of (sequence b, query head h): (b·heads_q + h)·seqlen_q + i, or
 * h·total_q + cu_seqlens_q[b] + i when varlen. */
size_t fx_lse_index(const fx_problem *p, int b, int h, int i);

/* Number of keys query row i sees (bottom-right causal), in [0, seqlen_k]; for a
 * fixed-length problem (of a varlen one: fx_seq_problem's). */
int fx_keys_seen(const fx_problem *p, int i);
/* Last key index row i may see (may be negative: row sees nothing). */
static inline int fx_causal_last_key(int seqlen_q, int seqlen_k, int i)
{
    return i + seqlen_k - seqlen_q;
}

/* FLOPs by the FA3 convention: forward 2·batch·heads_q·(head_dim + head_dim_v)·(unmasked
 * (i, j) pairs), i.e. 4·head_dim per pair when head_dim_v == head_dim (S = QKᵀ costs
 * 2·head_dim per pair, O = PV 2·head_dim_v); varlen: the same over the sum over sequences
 * of their unmasked pairs, causal bottom-right in each; backward 2.5× forward. */
double fx_flops_forward(const fx_problem *p);
double fx_flops_backward(const fx_problem *p);

const char *fx_dtype_name(fx_dtype dt);
int fx_dtype_parse(const char *s, fx_dtype *out); /* 0 ok, -1 unknown */
size_t fx_dtype_bytes(fx_dtype dt);
const char *fx_dist_name(fx_dist d);
int fx_dist_parse(const char *s, fx_dist *out); /* 0 ok, -1 unknown */

/* One line "b=4 sq=4096 sk=4096 hq=16 hkv=16 d=128 bf16 causal normal seed=1"
 * (e4m3: "e4m3 per-tensor" and " hadamard", " vt" where set, after the dtype)
 * ("d=192 dv=128" when head_dim_v is not head_dim; "non-causal" when not causal; " scale=F"
 * before the seed only when softmax_scale is set and not the default 1/sqrt(head_dim);
 * " qk-scale=X" after it only when qk_scale is not 1). Varlen: "varlen b=4 sq<=129 sk<=300
 * tq=257 tk=434 hq=... seed=1" (sq, sk the maxima, tq, tk the totals), then
 * " seqlens-q=0,1,127,129 seqlens-k=5,0,129,300" (and " seqused-k=..." when set: the options
 * that reproduce the batch) while len allows; " seqlens=..." is left out when it would not
 * fit. */
void fx_problem_format(const fx_problem *p, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
