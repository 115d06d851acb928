/*
 * fx_problem.c — the attention problem: defaults, validation, layouts, FLOPs, names.
 *
 * Everything here is plain arithmetic on the sizes of fx_problem.h; the contract
 * (layouts, GQA head map, bottom-right causal mask) is stated there.
 */
#include "fx_problem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The fp8 recipe's fields against the dtype (fx_problem.h): 0, or -1 with the reason. */
static int validate_fp8(const fx_problem *p, char *msg, size_t len)
{
    if ((int)p->fp8_scaling < 0 || p->fp8_scaling >= FX_FP8_SCALING_COUNT) {
        snprintf(msg, len, "fp8_scaling (%d) is not per-tensor, per-head or per-block",
                 (int)p->fp8_scaling);
        return -1;
    }
    if (p->dtype != FX_E4M3) {
        const char *opt = p->fp8_scaling != FX_FP8_PER_TENSOR ? "--fp8-scaling"
                          : p->fp8_hadamard                   ? "--hadamard"
                          : p->fp8_v_transposed               ? "--fp8-vt"
                                                              : NULL;
        if (opt) {
            snprintf(msg, len, "%s needs --dtype e4m3 (got %s)", opt, fx_dtype_name(p->dtype));
            return -1;
        }
        return 0;
    }
    if (p->varlen) {
        snprintf(msg, len, "e4m3 takes fixed-length batches only (no --seqlens-q)");
        return -1;
    }
    if (fx_head_dim_v(p) != p->head_dim) {
        snprintf(msg, len, "e4m3 takes head_dim_v = head_dim only (got %d with %d)",
                 fx_head_dim_v(p), p->head_dim);
        return -1;
    }
    if (p->fp8_hadamard && (p->head_dim & (p->head_dim - 1)) != 0) {
        snprintf(msg, len, "--hadamard needs a head_dim that is a power of two (got %d)",
                 p->head_dim);
        return -1;
    }
    return 0;
}

fx_problem fx_problem_default(void)
{
    fx_problem p;
    memset(&p, 0, sizeof p);
    p.batch = 4;
    p.seqlen_q = 4096;
    p.seqlen_k = 4096;
    p.heads_q = 16;
    p.heads_kv = 16;
    p.head_dim = 128;
    p.dtype = FX_BF16;
    p.causal = false;
    p.softmax_scale = 0.0; /* resolved to 1/sqrt(head_dim) by fx_problem_validate */
    p.seed = 1;
    p.dist = FX_DIST_NORMAL;
    p.qk_scale = 1.0;
    return p;
}

/* Head dims every stage may be asked for: multiples of 8 (16-byte rows of a 2-byte
 * dtype, the unit of every vector load and TMA box) up to 256 (FA3's largest). */
enum { FX_HEAD_DIM_MULTIPLE = 8, FX_HEAD_DIM_MAX = 256 };

/* Kernels index a tensor with 32-bit ints, so no tensor may have more elements. */
#define FX_INDEX_LIMIT 2147483647.0 /* INT32_MAX */

/* The softmax scale's range (see fx_problem_validate). */
#define FX_SCALE_MAX 0x1p100
#define FX_SCALE_MIN 0x1p-100

/* Product of sizes in double: exact below 2^53, and it cannot overflow the way an
 * integer product of four ints can, so the message shows the real count. */
static double count3(int a, int b, int c)
{
    return (double)a * (double)b * (double)c;
}

static int refuse(char *why, size_t why_len, const char *msg)
{
    if (why && why_len)
        snprintf(why, why_len, "%s", msg);
    return 2;
}

/* One cu_seqlens array: batch + 1 offsets from 0, never decreasing, ending at total. */
static int validate_cu(const char *name, const int *cu, int batch, int total,
                       const char *total_name, char *msg, size_t len)
{
    if (!cu) {
        snprintf(msg, len, "a variable-length batch needs %s (batch + 1 row offsets)", name);
        return 2;
    }
    if (cu[0] != 0) {
        snprintf(msg, len, "%s[0] (%d) must be 0", name, cu[0]);
        return 2;
    }
    for (int b = 0; b < batch; b++) {
        if (cu[b + 1] < cu[b]) {
            snprintf(msg, len, "%s decreases at index %d: %s[%d] (%d) < %s[%d] (%d)", name, b + 1,
                     name, b + 1, cu[b + 1], name, b, cu[b]);
            return 2;
        }
    }
    if (cu[batch] != total) {
        snprintf(msg, len, "%s[%d] (%d) is not %s (%d)", name, batch, cu[batch], total_name, total);
        return 2;
    }
    return 0;
}

/* The varlen fields of p (fx_problem.h): the offsets, seqused_k, and seqlen_q/seqlen_k as
 * the largest lengths. */
static int validate_varlen(const fx_problem *p, char *msg, size_t len)
{
    if (p->batch > FX_VARLEN_MAX_SEQS) {
        snprintf(msg, len, "a variable-length batch holds at most %d sequences, not %d",
                 FX_VARLEN_MAX_SEQS, p->batch);
        return 2;
    }
    if (validate_cu("cu_seqlens_q", p->cu_seqlens_q, p->batch, p->total_q, "total_q", msg, len) ||
        validate_cu("cu_seqlens_k", p->cu_seqlens_k, p->batch, p->total_k, "total_k", msg, len))
        return 2;
    for (int b = 0; b < p->batch; b++) {
        const int rows_k = p->cu_seqlens_k[b + 1] - p->cu_seqlens_k[b];
        if (p->seqused_k && (p->seqused_k[b] < 0 || p->seqused_k[b] > rows_k)) {
            snprintf(msg, len, "seqused_k[%d] (%d) is outside [0, %d], sequence %d's keys", b,
                     p->seqused_k[b], rows_k, b);
            return 2;
        }
        if (fx_seq_len_q(p, b) > p->seqlen_q) {
            snprintf(msg, len, "seqlen_q (%d) is below sequence %d's %d query rows", p->seqlen_q, b,
                     fx_seq_len_q(p, b));
            return 2;
        }
        if (fx_seq_len_k(p, b) > p->seqlen_k) {
            snprintf(msg, len, "seqlen_k (%d) is below sequence %d's %d keys", p->seqlen_k, b,
                     fx_seq_len_k(p, b));
            return 2;
        }
    }
    return 0;
}

int fx_problem_validate(fx_problem *p, char *why, size_t why_len)
{
    char msg[256];
    const struct {
        const char *name;
        int value;
    } sizes[] = {
        {"batch", p->batch},     {"seqlen_q", p->seqlen_q}, {"seqlen_k", p->seqlen_k},
        {"heads_q", p->heads_q}, {"heads_kv", p->heads_kv}, {"head_dim", p->head_dim},
    };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        /* A variable-length batch may hold sequences of 0 rows only: its largest may be 0. */
        const bool may_be_zero =
            p->varlen && (!strcmp(sizes[s].name, "seqlen_q") || !strcmp(sizes[s].name, "seqlen_k"));
        if (may_be_zero && sizes[s].value == 0)
            continue;
        if (sizes[s].value <= 0) {
            snprintf(msg, sizeof msg, "%s (%d) must be positive", sizes[s].name, sizes[s].value);
            return refuse(why, why_len, msg);
        }
    }
    if (p->heads_q % p->heads_kv != 0) {
        snprintf(msg, sizeof msg, "heads_q (%d) is not a multiple of heads_kv (%d)", p->heads_q,
                 p->heads_kv);
        return refuse(why, why_len, msg);
    }
    if (p->head_dim % FX_HEAD_DIM_MULTIPLE != 0 || p->head_dim > FX_HEAD_DIM_MAX) {
        snprintf(msg, sizeof msg, "head_dim (%d) is not a multiple of %d in [%d, %d]", p->head_dim,
                 FX_HEAD_DIM_MULTIPLE, FX_HEAD_DIM_MULTIPLE, FX_HEAD_DIM_MAX);
        return refuse(why, why_len, msg);
    }
    /* 0 is "as head_dim" (fx_head_dim_v); a negative one is refused here with the rest. */
    if (p->head_dim_v != 0 && (p->head_dim_v < 0 || p->head_dim_v % FX_HEAD_DIM_MULTIPLE != 0 ||
                               p->head_dim_v > FX_HEAD_DIM_MAX)) {
        snprintf(msg, sizeof msg, "head_dim_v (%d) is not a multiple of %d in [%d, %d]",
                 p->head_dim_v, FX_HEAD_DIM_MULTIPLE, FX_HEAD_DIM_MULTIPLE, FX_HEAD_DIM_MAX);
        return refuse(why, why_len, msg);
    }
    if ((int)p->dtype < 0 || p->dtype >= FX_DTYPE_COUNT) {
        snprintf(msg, sizeof msg, "dtype (%d) is not bf16, fp16 or e4m3", (int)p->dtype);
        return refuse(why, why_len, msg);
    }
    if (validate_fp8(p, msg, sizeof msg))
        return refuse(why, why_len, msg);
    if ((int)p->dist < 0 || p->dist >= FX_DIST_COUNT) {
        snprintf(msg, sizeof msg, "dist (%d) is not normal, outliers or large-logits",
                 (int)p->dist);
        return refuse(why, why_len, msg);
    }
    /* NaN > 0 is false: a NaN is refused here too. */
    if (!(p->qk_scale > 0.0) || !isfinite(p->qk_scale)) {
        snprintf(msg, sizeof msg, "qk_scale (%g) is not a finite positive number", p->qk_scale);
        return refuse(why, why_len, msg);
    }

    if (p->varlen && validate_varlen(p, msg, sizeof msg))
        return refuse(why, why_len, msg);

    struct element_count {
        const char *what;
        double count;
    };
    /* The wider of head_dim and head_dim_v: O and V are counted at head_dim_v columns. */
    const int dv = fx_head_dim_v(p), cols = dv > p->head_dim ? dv : p->head_dim;
    const struct element_count fixed_counts[] = {
        {"Q/O (batch*seqlen_q*heads_q*head_dim)", count3(p->batch, p->seqlen_q, p->heads_q) * cols},
        {"K/V (batch*seqlen_k*heads_kv*head_dim)",
         count3(p->batch, p->seqlen_k, p->heads_kv) * cols},
        {"LSE (batch*heads_q*seqlen_q)", count3(p->batch, p->heads_q, p->seqlen_q)},
    };
    const struct element_count varlen_counts[] = {
        {"Q/O (total_q*heads_q*head_dim)", count3(p->total_q, p->heads_q, cols)},
        {"K/V (total_k*heads_kv*head_dim)", count3(p->total_k, p->heads_kv, cols)},
        {"LSE (heads_q*total_q)", count3(1, p->heads_q, p->total_q)},
    };
    const struct element_count *counts = p->varlen ? varlen_counts : fixed_counts;
    for (size_t c = 0; c < sizeof fixed_counts / sizeof fixed_counts[0]; c++) {
        if (counts[c].count > FX_INDEX_LIMIT) {
            snprintf(msg, sizeof msg, "%s has %.0f elements, more than the 32-bit index limit %.0f",
                     counts[c].what, counts[c].count, FX_INDEX_LIMIT);
            return refuse(why, why_len, msg);
        }
    }

    /* NaN <= 0 is false, so the finiteness test comes first. */
    if (!isfinite(p->softmax_scale)) {
        snprintf(msg, sizeof msg, "softmax_scale (%g) is not finite", p->softmax_scale);
        return refuse(why, why_len, msg);
    }
    if (p->softmax_scale <= 0.0)
        p->softmax_scale = 1.0 / sqrt((double)p->head_dim);
    /* Kernels hold scale·log2(e) in fp32 and multiply it by raw scores q·k, which reach
     * about 2^20 for head_dim 256 and the outlier distribution: a scale beyond 2^100
     * would overflow S to inf, and one below 2^-100 would flush to zero in fp32 math. */
    if (p->softmax_scale > FX_SCALE_MAX || p->softmax_scale < FX_SCALE_MIN) {
        snprintf(msg, sizeof msg, "softmax_scale (%g) is outside [2^-100, 2^100] (%g, %g)",
                 p->softmax_scale, FX_SCALE_MIN, FX_SCALE_MAX);
        return refuse(why, why_len, msg);
    }
    return 0;
}

fx_layout fx_layout_q(const fx_problem *p)
{
    fx_layout l;
    l.head_stride = p->head_dim;
    l.row_stride = (int64_t)p->heads_q * p->head_dim;
    l.batch_stride = p->varlen ? 0 : (int64_t)p->seqlen_q * l.row_stride;
    return l;
}

fx_layout fx_layout_kv(const fx_problem *p)
{
    fx_layout l;
    l.head_stride = p->head_dim;
    l.row_stride = (int64_t)p->heads_kv * p->head_dim;
    l.batch_stride = p->varlen ? 0 : (int64_t)p->seqlen_k * l.row_stride;
    return l;
}

fx_layout fx_layout_o(const fx_problem *p)
{
    fx_problem wide = *p;
    wide.head_dim = fx_head_dim_v(p);
    return fx_layout_q(&wide);
}

fx_layout fx_layout_v(const fx_problem *p)
{
    fx_problem wide = *p;
    wide.head_dim = fx_head_dim_v(p);
    return fx_layout_kv(&wide);
}

/* Query and key rows of the whole batch: packed totals, or batch·seqlen. */
static size_t rows_q(const fx_problem *p)
{
    return p->varlen ? (size_t)p->total_q : (size_t)p->batch * (size_t)p->seqlen_q;
}
static size_t rows_k(const fx_problem *p)
{
    return p->varlen ? (size_t)p->total_k : (size_t)p->batch * (size_t)p->seqlen_k;
}

size_t fx_numel_q(const fx_problem *p)
{
    return rows_q(p) * (size_t)p->heads_q * (size_t)p->head_dim;
}

size_t fx_numel_kv(const fx_problem *p)
{
    return rows_k(p) * (size_t)p->heads_kv * (size_t)p->head_dim;
}

size_t fx_numel_o(const fx_problem *p)
{
    return rows_q(p) * (size_t)p->heads_q * (size_t)fx_head_dim_v(p);
}

size_t fx_numel_v(const fx_problem *p)
{
    return rows_k(p) * (size_t)p->heads_kv * (size_t)fx_head_dim_v(p);
}

size_t fx_numel_lse(const fx_problem *p)
{
    return (size_t)p->heads_q * rows_q(p);
}

int fx_seq_len_q(const fx_problem *p, int b)
{
    return p->varlen ? p->cu_seqlens_q[b + 1] - p->cu_seqlens_q[b] : p->seqlen_q;
}

int fx_seq_len_k(const fx_problem *p, int b)
{
    if (!p->varlen)
        return p->seqlen_k;
    return p->seqused_k ? p->seqused_k[b] : p->cu_seqlens_k[b + 1] - p->cu_seqlens_k[b];
}

int fx_seq_start_q(const fx_problem *p, int b)
{
    return p->varlen ? p->cu_seqlens_q[b] : 0;
}

int fx_seq_start_k(const fx_problem *p, int b)
{
    return p->varlen ? p->cu_seqlens_k[b] : 0;
}

fx_problem fx_seq_problem(const fx_problem *p, int b)
{
    fx_problem s = *p;
    s.batch = 1;
    s.seqlen_q = fx_seq_len_q(p, b);
    s.seqlen_k = fx_seq_len_k(p, b);
    s.varlen = false;
    s.total_q = s.total_k = 0;
    s.cu_seqlens_q = s.cu_seqlens_k = s.seqused_k = NULL;
    return s;
}

size_t fx_lse_index(const fx_problem *p, int b, int h, int i)
{
    if (p->varlen)
        return (size_t)h * (size_t)p->total_q + (size_t)p->cu_seqlens_q[b] + (size_t)i;
    return ((size_t)b * (size_t)p->heads_q + (size_t)h) * (size_t)p->seqlen_q + (size_t)i;
}

int fx_keys_seen(const fx_problem *p, int i)
{
    if (!p->causal)
        return p->seqlen_k;
    /* Keys 0 .. last are visible; int64 because i + seqlen_k may pass INT_MAX. */
    int64_t seen = (int64_t)i + p->seqlen_k - p->seqlen_q + 1;
    if (seen < 0)
        return 0;
    if (seen > p->seqlen_k)
        return p->seqlen_k;
    return (int)seen;
}

/* Unmasked (i, j) pairs, exactly. Causal: row i sees c_i = max(0, i + sk - sq + 1)
 * keys (never more than sk, as i <= sq - 1). The rows that see something,
 * i = i0 .. sq-1 with i0 = max(0, sq - sk), form an arithmetic series from
 * c_i0 up to c_{sq-1} = sk, whose sum is rows·(first + last)/2. The product
 * rows·(first + last) < 2^31·2^32 fits in uint64 and is always even. */
static uint64_t unmasked_pairs(const fx_problem *p)
{
    uint64_t sq = (uint64_t)p->seqlen_q, sk = (uint64_t)p->seqlen_k;
    if (!p->causal)
        return sq * sk;
    uint64_t i0 = sq > sk ? sq - sk : 0;
    uint64_t rows = sq - i0;
    uint64_t first = i0 + sk + 1 - sq; /* c_i0 = i0 + sk - sq + 1 >= 1 */
    return rows * (first + sk) / 2;
}

double fx_flops_forward(const fx_problem *p)
{
    /* Two GEMMs, 2 FLOPs per multiply-add each, per pair and column: S = QKᵀ over head_dim
     * columns, O = PV over head_dim_v (4·head_dim per pair when they are equal). */
    const double per_pair = 2.0 * (p->head_dim + fx_head_dim_v(p));
    if (!p->varlen)
        return per_pair * p->batch * p->heads_q * (double)unmasked_pairs(p);
    /* Each sequence its own mask; the sum is below 1024·2^62, exact enough in double. */
    double pairs = 0.0;
    for (int b = 0; b < p->batch; b++) {
        const fx_problem s = fx_seq_problem(p, b);
        pairs += (double)unmasked_pairs(&s);
    }
    return per_pair * p->heads_q * pairs;
}

double fx_flops_backward(const fx_problem *p)
{
    /* Five GEMMs instead of two (FA3 convention): 2.5× the forward. */
    return 2.5 * fx_flops_forward(p);
}

const char *fx_dtype_name(fx_dtype dt)
{
    switch (dt) {
    case FX_BF16: return "bf16";
    case FX_FP16: return "fp16";
    case FX_E4M3: return "e4m3";
    default: return "unknown-dtype";
    }
}

int fx_dtype_parse(const char *s, fx_dtype *out)
{
    for (int dt = 0; dt < FX_DTYPE_COUNT; dt++) {
        if (s && strcmp(s, fx_dtype_name((fx_dtype)dt)) == 0) {
            *out = (fx_dtype)dt;
            return 0;
        }
    }
    return -1;
}

size_t fx_dtype_bytes(fx_dtype dt)
{
    return dt == FX_E4M3 ? 1 : 2; /* bf16 and fp16 are 2 bytes */
}

const char *fx_dist_name(fx_dist d)
{
    switch (d) {
    case FX_DIST_NORMAL: return "normal";
    case FX_DIST_OUTLIERS: return "outliers";
    case FX_DIST_LARGE_LOGITS: return "large-logits";
    default: return "unknown-dist";
    }
}

int fx_dist_parse(const char *s, fx_dist *out)
{
    for (int d = 0; d < FX_DIST_COUNT; d++) {
        if (s && strcmp(s, fx_dist_name((fx_dist)d)) == 0) {
            *out = (fx_dist)d;
            return 0;
        }
    }
    return -1;
}

void fx_problem_format(const fx_problem *p, char *buf, size_t len)
{
    /* The scale is printed only when it is not the default, so the usual line stays short
     * and a custom scale is still reproducible from it. */
    char scale[48] = "";
    double default_scale = 1.0 / sqrt((double)(p->head_dim > 0 ? p->head_dim : 1));
    if (p->softmax_scale > 0.0 && fabs(p->softmax_scale - default_scale) > 1e-12 * default_scale)
        snprintf(scale, sizeof scale, " scale=%.9g", p->softmax_scale);
    char qk_scale[48] = "";
    if (p->qk_scale != 1.0)
        snprintf(qk_scale, sizeof qk_scale, " qk-scale=%.9g", p->qk_scale);
    char sizes[96];
    if (p->varlen)
        snprintf(sizes, sizeof sizes, "varlen b=%d sq<=%d sk<=%d tq=%d tk=%d", p->batch,
                 p->seqlen_q, p->seqlen_k, p->total_q, p->total_k);
    else
        snprintf(sizes, sizeof sizes, "b=%d sq=%d sk=%d", p->batch, p->seqlen_q, p->seqlen_k);
    char dv[24] = ""; /* only when it is not head_dim, so the usual line stays as it was */
    if (fx_head_dim_v(p) != p->head_dim)
        snprintf(dv, sizeof dv, " dv=%d", fx_head_dim_v(p));
    char dtype[64]; /* e4m3: its recipe, as the options that give it */
    if (p->dtype == FX_E4M3)
        snprintf(dtype, sizeof dtype, "e4m3 %s%s%s", fx_fp8_scaling_name(p->fp8_scaling),
                 p->fp8_hadamard ? " hadamard" : "", p->fp8_v_transposed ? " vt" : "");
    else
        snprintf(dtype, sizeof dtype, "%s", fx_dtype_name(p->dtype));
    int used =
        snprintf(buf, len, "%s hq=%d hkv=%d d=%d%s %s %s %s%s%s seed=%llu", sizes, p->heads_q,
                 p->heads_kv, p->head_dim, dv, dtype, p->causal ? "causal" : "non-causal",
                 fx_dist_name(p->dist), scale, qk_scale, (unsigned long long)p->seed);
    if (!p->varlen || used < 0 || (size_t)used >= len)
        return;
    /* The lengths, as the options that give them, where they fit whole: the line then
     * reproduces the batch. */
    char lists[3][64];
    const char *names[3] = {"seqlens-q", "seqlens-k", "seqused-k"};
    size_t extra = 0;
    for (int t = 0; t < 3; t++) {
        lists[t][0] = '\0';
        if (t == 2 && !p->seqused_k)
            continue;
        size_t off = (size_t)snprintf(lists[t], sizeof lists[t], " %s=", names[t]);
        for (int b = 0; b < p->batch && off < sizeof lists[t]; b++) {
            const int n = t == 0   ? p->cu_seqlens_q[b + 1] - p->cu_seqlens_q[b]
                          : t == 1 ? p->cu_seqlens_k[b + 1] - p->cu_seqlens_k[b]
                                   : p->seqused_k[b];
            off += (size_t)snprintf(lists[t] + off, sizeof lists[t] - off, "%s%d", b ? "," : "", n);
        }
        if (off >= sizeof lists[t])
            return; /* too long for the line: the totals stand for it */
        extra += off;
    }
    if ((size_t)used + extra >= len)
        return;
    for (int t = 0; t < 3; t++)
        strcat(buf, lists[t]);
}
