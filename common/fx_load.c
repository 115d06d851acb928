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

#include "fx_gpu.h" /* FX_EXIT_USAGE */
#include "fx_host.h"

/* The keys of problem.txt. `option`: the problem option that parses the value (NULL: read
 * here); `required`: a file without it is refused. */
typedef enum key_kind { KEY_OPTION, KEY_BOOL, KEY_OFFSETS, KEY_LENGTHS, KEY_INFO } key_kind;
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
        break;
    }
    case KEY_OFFSETS:
        rc = !strcmp(key, "cu_seqlens_q")
                 ? parse_offsets(key, val, o->seqlens_q, &o->n_seqlens_q, inner, sizeof inner)
                 : parse_offsets(key, val, o->seqlens_k, &o->n_seqlens_k, inner, sizeof inner);
        break;
    case KEY_INFO:
        if (!strcmp(key, "total_q") || !strcmp(key, "total_k")) {
            char *end = NULL;
            errno = 0;
            const long long v = strtoll(val, &end, 10);
            if (val[0] < '0' || val[0] > '9' || errno || *end != '\0') {
                snprintf(inner, sizeof inner, "%s: '%s' is not an integer", key, val);
                rc = FX_EXIT_USAGE;
            }
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

/* Reads DIR/name, which must hold exactly n 16-bit elements, into bits, and their values
 * into x; refuses a NaN or an infinity. Records max |x| in *amax. */
static int read_tensor(const char *dir, const char *name, const fx_problem *p, size_t n,
                       uint16_t *bits, float *x, double *amax, char *why, size_t why_len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_len, "--load: cannot open %s: %s", path, strerror(errno));
        return FX_EXIT_USAGE;
    }
    const size_t got = n ? fread(bits, 2, n, f) : 0;
    /* One byte more than the problem needs is a file of another shape, not extra data. */
    const bool longer = fgetc(f) != EOF;
    long long bytes = -1;
    if (got != n || longer) {
        if (fseek(f, 0, SEEK_END) == 0)
            bytes = ftell(f);
    }
    fclose(f);
    if (got != n || longer) {
        snprintf(why, why_len,
                 "--load: %s has %lld bytes; the problem needs %zu (%zu %s elements of 2 "
                 "bytes): another shape or dtype, or a truncated file",
                 path, bytes, 2 * n, n, fx_dtype_name(p->dtype));
        return FX_EXIT_USAGE;
    }
    fx_from_bits(p->dtype, bits, x, n);
    double m = 0.0;
    for (size_t i = 0; i < n; ++i) {
        if (!isfinite(x[i])) {
            snprintf(why, why_len,
                     "--load: %s: element %zu (bits 0x%04x) is %s: the stages take finite "
                     "inputs",
                     path, i, bits[i], isnan(x[i]) ? "NaN" : "infinite");
            return FX_EXIT_USAGE;
        }
        const double a = fabs((double)x[i]);
        m = a > m ? a : m;
    }
    *amax = m;
    return 0;
}

int fx_load_case(const char *dir, const fx_problem *p, bool backward, fx_case_host *h, char *why,
                 size_t why_len)
{
    const size_t n[4] = {fx_numel_q(p), fx_numel_kv(p), fx_numel_v(p), fx_numel_o(p)};
    memset(h, 0, sizeof *h);
    float **x[4] = {&h->q, &h->k, &h->v, &h->dout};
    uint16_t **bits[4] = {&h->qb, &h->kb, &h->vb, &h->dob};
    static const char *const names[4] = {"q.bin", "k.bin", "v.bin", "dout.bin"};
    double amax[4] = {0, 0, 0, 0};
    for (int t = 0; t < (backward ? 4 : 3); ++t) {
        *x[t] = fx_xmalloc(n[t] * sizeof(float));
        *bits[t] = fx_xmalloc(n[t] * 2);
        const int rc = read_tensor(dir, names[t], p, n[t], *bits[t], *x[t], &amax[t], why, why_len);
        if (rc) {
            fx_host_free(h);
            return rc;
        }
    }
    /* |S| ≤ head_dim · max|q| · max|k| (each of the head_dim products at most that). */
    const double scale = p->softmax_scale > 0.0 ? p->softmax_scale : 1.0 / sqrt(p->head_dim);
    const double bound = p->head_dim * amax[0] * amax[1] * scale * 1.4426950408889634;
    if (!(bound < 0x1p127)) {
        snprintf(why, why_len,
                 "--load: the logits can reach %.3g (head_dim %d · max|Q| %g · max|K| %g · "
                 "softmax_scale · log2 e), past fp32's range (2^127): S and the softmax are fp32",
                 bound, p->head_dim, amax[0], amax[1]);
        fx_host_free(h);
        return FX_EXIT_USAGE;
    }
    return 0;
}
