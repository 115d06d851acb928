/*
 * fx_load.c — --load DIR (fx_load.h): a case's inputs from files.
 */
#include "fx_load.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_fp8.h"
#include "fx_gpu.h" /* FX_EXIT_USAGE */
#include "fx_host.h"

/* The keys of problem.txt. `option`: the problem option that parses the value (NULL: read
 * here); `required`: a file without it is refused. */
typedef enum key_kind {
    KEY_OPTION,
    KEY_BOOL,
    KEY_OFFSETS,
    KEY_LENGTHS,
    KEY_BLOCK,
    KEY_INFO
} key_kind;
static const struct {
    const char *key, *option;
    key_kind kind;
    bool required;
} keys[] = {
    {"batch", "--batch", KEY_OPTION, true},
    {"seqlen_q", "--seqlen-q", KEY_OPTION, true},
    {"seqlen_k", "--seqlen-k", KEY_OPTION, true},
    {"heads_q", "--heads-q", KEY_OPTION, true},
    {"heads_kv", "--heads-kv", KEY_OPTION, true},
    {"head_dim", "--head-dim", KEY_OPTION, true},
    {"head_dim_v", "--head-dim-v", KEY_OPTION, false},
    {"dtype", "--dtype", KEY_OPTION, true},
    {"causal", NULL, KEY_BOOL, true},
    {"softmax_scale", "--scale", KEY_OPTION, false},
    {"seed", "--seed", KEY_OPTION, false},
    {"dist", "--dist", KEY_OPTION, false},
    {"qk_scale", "--qk-scale", KEY_OPTION, false},
    {"varlen", NULL, KEY_BOOL, false},
    {"backward", NULL, KEY_BOOL, false},
    {"cu_seqlens_q", NULL, KEY_OFFSETS, false},
    {"cu_seqlens_k", NULL, KEY_OFFSETS, false},
    {"seqused_k", "--seqused-k", KEY_LENGTHS, false},
    {"total_q", NULL, KEY_INFO, false},
    {"total_k", NULL, KEY_INFO, false},
    {"stage", NULL, KEY_INFO, false},
    {"fp8_scaling", "--fp8-scaling", KEY_OPTION, false},
    {"hadamard", NULL, KEY_BOOL, false},
    {"fp8_vt", NULL, KEY_BOOL, false},
    {"fp8_block_m", NULL, KEY_BLOCK, false},
    {"fp8_block_n", NULL, KEY_BLOCK, false},
};
enum { N_KEYS = sizeof keys / sizeof keys[0] };

static int key_index(const char *key)
{
    for (int i = 0; i < N_KEYS; ++i)
        if (!strcmp(keys[i].key, key))
            return i;
    return -1;
}

/* cu_seqlens: batch + 1 non-decreasing offsets from 0, as lengths into len[]; *n their
 * count. 0, or FX_EXIT_USAGE with why. */
static int parse_offsets(const char *key, const char *s, int *len, int *n, char *why,
                         size_t why_len)
{
    int count = 0;
    long long prev = 0;
    for (const char *at = s;; ++count) {
        char *end = NULL;
        errno = 0;
        const long long v = strtoll(at, &end, 10);
        const bool digit = at[0] >= '0' && at[0] <= '9';
        if (!digit || errno != 0 || end == at || (*end != ',' && *end != '\0')) {
            snprintf(why, why_len, "%s: '%s' is not a comma list of offsets", key, s);
            return FX_EXIT_USAGE;
        }
        if (count == 0 && v != 0) {
            snprintf(why, why_len, "%s: the first offset is %lld: offsets start at 0", key, v);
            return FX_EXIT_USAGE;
        }
        if (v < prev || v > INT_MAX) {
            snprintf(why, why_len,
                     "%s: offset %d is %lld after %lld: offsets do not decrease and stay "
                     "within 32 bits",
                     key, count, v, prev);
            return FX_EXIT_USAGE;
        }
        if (count > FX_VARLEN_MAX_SEQS) {
            snprintf(why, why_len, "%s: more than %d sequences (FX_VARLEN_MAX_SEQS)", key,
                     FX_VARLEN_MAX_SEQS);
            return FX_EXIT_USAGE;
        }
        if (count > 0)
            len[count - 1] = (int)(v - prev);
        prev = v;
        if (*end == '\0')
            break;
        at = end + 1;
    }
    if (count == 0) {
        snprintf(why, why_len, "%s: one offset: a batch needs at least two (0 and its end)", key);
        return FX_EXIT_USAGE;
    }
    *n = count;
    return 0;
}

/* A decimal integer >= 0 (digits only, within long long). */
static int parse_count(const char *key, const char *s, long long *out, char *why, size_t why_len)
{
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || errno || *end != '\0') {
        snprintf(why, why_len, "%s: '%s' is not an integer", key, s);
        return FX_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

/* The value of a KEY_BOOL: "0" or "1". */
static int parse_bool(const char *key, const char *s, bool *out, char *why, size_t why_len)
{
    if (strcmp(s, "0") && strcmp(s, "1")) {
        snprintf(why, why_len, "%s: '%s' is neither 0 nor 1", key, s);
        return FX_EXIT_USAGE;
    }
    *out = s[0] == '1';
    return 0;
}

/* One key=value line (without its newline) into o; `seen` marks the keys read. */
static int read_line(char *line, fx_options *o, bool *seen, bool *varlen, long long *totals,
                     char *why, size_t why_len)
{
    char *eq = strchr(line, '=');
    if (!eq) {
        snprintf(why, why_len, "'%s' is not key=value", line);
        return FX_EXIT_USAGE;
    }
    *eq = '\0';
    const char *key = line, *val = eq + 1;
    const int k = key_index(key);
    if (k < 0) {
        snprintf(why, why_len, "unknown key '%s'", key);
        return FX_EXIT_USAGE;
    }
    if (seen[k]) {
        snprintf(why, why_len, "%s is given twice", key);
        return FX_EXIT_USAGE;
    }
    seen[k] = true;
    char inner[384];
    int rc = 0;
    switch (keys[k].kind) {
    case KEY_OPTION:
    case KEY_LENGTHS: rc = fx_option_set(keys[k].option, val, o, inner, sizeof inner); break;
    case KEY_BOOL: {
        bool b = false;
        rc = parse_bool(key, val, &b, inner, sizeof inner);
        if (!strcmp(key, "causal"))
            o->problem.causal = b;
        else if (!strcmp(key, "varlen"))
            *varlen = b;
        else if (!strcmp(key, "hadamard"))
            o->problem.fp8_hadamard = b;
        else if (!strcmp(key, "fp8_vt"))
            o->problem.fp8_v_transposed = b;
        break;
    }
    case KEY_BLOCK: {
        long long v = 0;
        rc = parse_count(key, val, &v, inner, sizeof inner);
        if (!rc && (v < 1 || v > INT_MAX)) {
            snprintf(inner, sizeof inner, "%s: %lld rows is not a block (1 or more)", key, v);
            rc = FX_EXIT_USAGE;
        }
        if (!strcmp(key, "fp8_block_m"))
            o->fp8_blocks.block_m = (int)v;
        else
            o->fp8_blocks.block_n = (int)v;
        break;
    }
    case KEY_OFFSETS:
        rc = !strcmp(key, "cu_seqlens_q")
                 ? parse_offsets(key, val, o->seqlens_q, &o->n_seqlens_q, inner, sizeof inner)
                 : parse_offsets(key, val, o->seqlens_k, &o->n_seqlens_k, inner, sizeof inner);
        break;
    case KEY_INFO:
        if (!strcmp(key, "total_q") || !strcmp(key, "total_k")) {
            long long v = -1;
            rc = parse_count(key, val, &v, inner, sizeof inner);
            totals[key[6] == 'q' ? 0 : 1] = v;
        } else if (!val[0]) {
            snprintf(inner, sizeof inner, "%s is empty", key);
            rc = FX_EXIT_USAGE;
        }
        break;
    }
    if (rc)
        snprintf(why, why_len, "%s", inner);
    return rc;
}

int fx_load_problem(const char *dir, fx_options *o, char *why, size_t why_len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/problem.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, why_len, "--load: cannot open %s: %s", path, strerror(errno));
        return FX_EXIT_USAGE;
    }
    bool seen[N_KEYS] = {false}, varlen = false;
    long long totals[2] = {-1, -1};
    char line[65536], inner[512];
    int rc = 0, no = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        ++no;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            snprintf(inner, sizeof inner, "a line longer than %zu characters", sizeof line - 2);
            rc = FX_EXIT_USAGE;
            break;
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!n || line[0] == '#')
            continue;
        rc = read_line(line, o, seen, &varlen, totals, inner, sizeof inner);
    }
    const bool read_error = ferror(f);
    fclose(f);
    if (rc) {
        snprintf(why, why_len, "--load: %s:%d: %s", path, no, inner);
        return rc;
    }
    if (read_error) {
        snprintf(why, why_len, "--load: reading %s failed", path);
        return FX_EXIT_USAGE;
    }
    for (int k = 0; k < N_KEYS; ++k) {
        if (keys[k].required && !seen[k]) {
            snprintf(why, why_len, "--load: %s has no %s= line (it needs %s)", path, keys[k].key,
                     "batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, causal");
            return FX_EXIT_USAGE;
        }
    }
    /* e4m3's descales come in blocks of rows the file names (fx_load_fp8_case holds them to
     * the stage's tiles); no other dtype has descales. */
    const bool block_m = seen[key_index("fp8_block_m")], block_n = seen[key_index("fp8_block_n")];
    if (o->problem.dtype == FX_E4M3 && !(block_m && block_n)) {
        snprintf(why, why_len,
                 "--load: %s: dtype=e4m3 needs fp8_block_m= and fp8_block_n= lines (the rows of "
                 "Q, and of K and V, per descale)",
                 path);
        return FX_EXIT_USAGE;
    }
    if (o->problem.dtype != FX_E4M3 && (block_m || block_n)) {
        snprintf(why, why_len,
                 "--load: %s: fp8_block_m and fp8_block_n are e4m3's descale blocks: dtype is %s",
                 path, fx_dtype_name(o->problem.dtype));
        return FX_EXIT_USAGE;
    }
    const bool offsets = o->n_seqlens_q || o->n_seqlens_k || o->n_seqused_k;
    if (varlen != offsets || (varlen && (!o->n_seqlens_q || !o->n_seqlens_k))) {
        snprintf(why, why_len,
                 "--load: %s: a variable-length batch has varlen=1 with cu_seqlens_q and "
                 "cu_seqlens_k, and only then (seqused_k optional)",
                 path);
        return FX_EXIT_USAGE;
    }
    if (varlen) {
        long long sum[2] = {0, 0};
        for (int b = 0; b < o->n_seqlens_q; ++b)
            sum[0] += o->seqlens_q[b];
        for (int b = 0; b < o->n_seqlens_k; ++b)
            sum[1] += o->seqlens_k[b];
        for (int t = 0; t < 2; ++t) {
            if (totals[t] >= 0 && totals[t] != sum[t]) {
                snprintf(why, why_len, "--load: %s: total_%c=%lld, but cu_seqlens_%c ends at %lld",
                         path, t ? 'k' : 'q', totals[t], t ? 'k' : 'q', sum[t]);
                return FX_EXIT_USAGE;
            }
        }
    }
    return 0;
}

/* The folder being read, and where a refusal's reason goes: what the readers below share. */
typedef struct reader {
    const char *dir;
    char *why;
    size_t why_len;
} reader;

/* One array file of the folder: its name, its elements' type (for the messages), their size
 * in bytes and their count. */
typedef struct array_file {
    const char *name, *type;
    size_t size, n;
} array_file;

/* Reads the file, which must hold exactly f.n elements, into raw. */
static int read_array(const reader *r, array_file f, void *raw)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", r->dir, f.name);
    FILE *file = fopen(path, "rb");
    if (!file) {
        snprintf(r->why, r->why_len, "--load: cannot open %s: %s", path, strerror(errno));
        return FX_EXIT_USAGE;
    }
    const size_t got = f.n ? fread(raw, f.size, f.n, file) : 0;
    /* One byte more than the problem needs is a file of another shape, not extra data. */
    const bool longer = fgetc(file) != EOF;
    long long bytes = -1;
    if (got != f.n || longer) {
        if (fseek(file, 0, SEEK_END) == 0)
            bytes = ftell(file);
    }
    fclose(file);
    if (got != f.n || longer) {
        snprintf(r->why, r->why_len,
                 "--load: %s has %lld bytes; the problem needs %zu (%zu %s elements of %zu "
                 "byte%s): another shape or dtype, or a truncated file",
                 path, bytes, f.size * f.n, f.n, f.type, f.size, f.size == 1 ? "" : "s");
        return FX_EXIT_USAGE;
    }
    return 0;
}

/* Refuses a NaN or an infinity among x, the values of the file's elements raw (a refusal
 * names the element and its bits); records max |x| in *amax (NULL: not wanted). */
static int check_finite(const reader *r, array_file f, const void *raw, const float *x,
                        double *amax)
{
    double m = 0.0;
    for (size_t i = 0; i < f.n; ++i) {
        if (!isfinite(x[i])) {
            unsigned long long bits = 0; /* the host is little-endian, as the files are */
            memcpy(&bits, (const unsigned char *)raw + i * f.size, f.size);
            snprintf(r->why, r->why_len,
                     "--load: %s/%s: element %zu (bits 0x%0*llx) is %s: the stages take finite "
                     "inputs",
                     r->dir, f.name, i, (int)(2 * f.size), bits, isnan(x[i]) ? "NaN" : "infinite");
            return FX_EXIT_USAGE;
        }
        const double a = fabs((double)x[i]);
        m = a > m ? a : m;
    }
    if (amax)
        *amax = m;
    return 0;
}

/* Refuses inputs whose logits can pass fp32's range: |S| ≤ head_dim · max|q| · max|k| (each
 * of the head_dim products at most that), times softmax_scale · log2 e. */
static int check_logits(const reader *r, const fx_problem *p, double amax_q, double amax_k)
{
    const double scale = p->softmax_scale > 0.0 ? p->softmax_scale : 1.0 / sqrt(p->head_dim);
    const double bound = p->head_dim * amax_q * amax_k * scale * 1.4426950408889634;
    if (!(bound < 0x1p127)) {
        snprintf(r->why, r->why_len,
                 "--load: the logits can reach %.3g (head_dim %d · max|Q| %g · max|K| %g · "
                 "softmax_scale · log2 e), past fp32's range (2^127): S and the softmax are fp32",
                 bound, p->head_dim, amax_q, amax_k);
        return FX_EXIT_USAGE;
    }
    return 0;
}

int fx_load_case(const char *dir, const fx_problem *p, bool backward, fx_case_host *h, char *why,
                 size_t why_len)
{
    const reader r = {dir, why, why_len};
    const size_t n[4] = {fx_numel_q(p), fx_numel_kv(p), fx_numel_v(p), fx_numel_o(p)};
    memset(h, 0, sizeof *h);
    float **x[4] = {&h->q, &h->k, &h->v, &h->dout};
    uint16_t **bits[4] = {&h->qb, &h->kb, &h->vb, &h->dob};
    static const char *const names[4] = {"q.bin", "k.bin", "v.bin", "dout.bin"};
    double amax[4] = {0, 0, 0, 0};
    int rc = 0;
    for (int t = 0; t < (backward ? 4 : 3) && !rc; ++t) {
        const array_file f = {names[t], fx_dtype_name(p->dtype), 2, n[t]};
        *x[t] = fx_xmalloc(n[t] * sizeof(float));
        *bits[t] = fx_xmalloc(n[t] * 2);
        rc = read_array(&r, f, *bits[t]);
        if (!rc) {
            fx_from_bits(p->dtype, *bits[t], *x[t], n[t]);
            rc = check_finite(&r, f, *bits[t], *x[t], &amax[t]);
        }
    }
    if (!rc)
        rc = check_logits(&r, p, amax[0], amax[1]);
    if (rc)
        fx_host_free(h);
    return rc;
}

/* ---- e4m3 ---------------------------------------------------------------------------- */

/* One e4m3 tensor, `name` ("q", "k", "v"), into t (allocated as fx_fp8_tensor_alloc's): its
 * descales from name_descale.f32, finite, >= 0 (the running max commutes with the scaling
 * only for scales >= 0: fx_fp8_model.h) and at most what keeps 448 times them finite; then
 * its codes from name.bin, none of them NaN (0x7f, 0xff). *amax gets the largest magnitude
 * of the values they hold, descale·e4m3(code) (NULL: not wanted). */
static int read_fp8_tensor(const reader *r, const char *name, fx_fp8_tensor *t, double *amax)
{
    char codes_name[32], descales_name[32];
    snprintf(codes_name, sizeof codes_name, "%s.bin", name);
    snprintf(descales_name, sizeof descales_name, "%s_descale.f32", name);
    const array_file fd = {descales_name, "fp32", sizeof(float), fx_fp8_tensor_descales(t)};
    int rc = read_array(r, fd, t->descale);
    if (!rc)
        rc = check_finite(r, fd, t->descale, t->descale, NULL);
    for (size_t i = 0; i < fd.n && !rc; ++i) {
        if (!(t->descale[i] >= 0.0f) || !isfinite(t->descale[i] * FX_E4M3_MAX)) {
            snprintf(r->why, r->why_len,
                     "--load: %s/%s: element %zu is %g: a descale is >= 0 (amax/448) and 448 "
                     "times it is finite in fp32",
                     r->dir, descales_name, i, t->descale[i]);
            rc = FX_EXIT_USAGE;
        }
    }
    const array_file fc = {codes_name, "e4m3", 1, fx_fp8_tensor_numel(t)};
    if (!rc)
        rc = read_array(r, fc, t->codes);
    if (!rc) { /* the values, which a NaN code leaves NaN and nothing else makes infinite */
        float *x = fx_xmalloc(fc.n * sizeof(float));
        fx_fp8_dequantize(t, x);
        rc = check_finite(r, fc, t->codes, x, amax);
        free(x);
    }
    return rc;
}

/* The fp32 inputs before quantization, q.f32, k.f32, v.f32: all three into h->q, h->k, h->v,
 * or none (h's stay NULL). A file that cannot be opened for another reason than its absence
 * counts as there, so that reading it names the reason. */
static int read_fp32_inputs(const reader *r, const fx_problem *p, fx_case_host *h)
{
    static const char *const names[3] = {"q.f32", "k.f32", "v.f32"};
    const size_t n[3] = {fx_numel_q(p), fx_numel_kv(p), fx_numel_kv(p)};
    float **x[3] = {&h->q, &h->k, &h->v};
    int present = 0, first_absent = -1;
    for (int t = 0; t < 3; ++t) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", r->dir, names[t]);
        FILE *f = fopen(path, "rb");
        const bool there = f || errno != ENOENT;
        if (f)
            fclose(f);
        present += there;
        if (!there && first_absent < 0)
            first_absent = t;
    }
    if (present == 0)
        return 0;
    if (present < 3) {
        snprintf(r->why, r->why_len,
                 "--load: %s has no %s: the fp32 inputs before quantization are q.f32, k.f32 "
                 "and v.f32, all three or none",
                 r->dir, names[first_absent]);
        return FX_EXIT_USAGE;
    }
    int rc = 0;
    for (int t = 0; t < 3 && !rc; ++t) {
        const array_file f = {names[t], "fp32", sizeof(float), n[t]};
        *x[t] = fx_xmalloc(n[t] * sizeof(float));
        rc = read_array(r, f, *x[t]);
        if (!rc)
            rc = check_finite(r, f, *x[t], *x[t], NULL);
    }
    return rc;
}

int fx_load_fp8_case(const fx_options *o, fx_fp8_tiles tiles, fx_case_host *h, char *why,
                     size_t why_len)
{
    const fx_problem *p = &o->problem;
    const reader r = {o->load, why, why_len};
    memset(h, 0, sizeof *h);
    if (o->fp8_blocks.block_m != tiles.block_m || o->fp8_blocks.block_n != tiles.block_n) {
        snprintf(why, why_len,
                 "--load: %s/problem.txt: fp8_block_m=%d, fp8_block_n=%d: this stage's descales "
                 "are per %d rows of Q and %d of K and V at head_dim %d (its tiles: a block must "
                 "not straddle two)",
                 o->load, o->fp8_blocks.block_m, o->fp8_blocks.block_n, tiles.block_m,
                 tiles.block_n, p->head_dim);
        return FX_EXIT_USAGE;
    }
    fx_fp8_inputs *in = &h->fp8;
    in->q = fx_fp8_tensor_alloc(p->batch, p->seqlen_q, p->heads_q, p->head_dim, tiles.block_m);
    in->k = fx_fp8_tensor_alloc(p->batch, p->seqlen_k, p->heads_kv, p->head_dim, tiles.block_n);
    in->v = fx_fp8_tensor_alloc(p->batch, p->seqlen_k, p->heads_kv, p->head_dim, tiles.block_n);
    double amax_q = 0.0, amax_k = 0.0;
    int rc = read_fp8_tensor(&r, "q", &in->q, &amax_q);
    if (!rc)
        rc = read_fp8_tensor(&r, "k", &in->k, &amax_k);
    if (!rc)
        rc = read_fp8_tensor(&r, "v", &in->v, NULL);
    if (!rc)
        rc = check_logits(&r, p, amax_q, amax_k);
    if (!rc)
        rc = read_fp32_inputs(&r, p, h);
    if (rc)
        fx_host_free(h);
    return rc;
}
