/*
 * fx_stage.c — capability checks shared by every stage program (fx_stage.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_gpu.h" /* FX_EXIT_NO_GPU */
#include "fx_stage.h"

static bool head_dim_supported(const fx_caps *c, int d)
{
    if (c->n_head_dims > 0) {
        for (int i = 0; i < c->n_head_dims; ++i)
            if (c->head_dims[i] == d)
                return true;
        return false;
    }
    return c->head_dim_multiple > 0 && d % c->head_dim_multiple == 0 && d <= c->head_dim_max;
}

static void head_dims_text(const fx_caps *c, char *buf, size_t len)
{
    if (c->n_head_dims > 0) {
        size_t off = 0;
        for (int i = 0; i < c->n_head_dims && off < len; ++i)
            off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "/" : "", c->head_dims[i]);
    } else {
        snprintf(buf, len, "multiples of %d up to %d", c->head_dim_multiple, c->head_dim_max);
    }
}

/* Whether the caps take p's head_dim_v: head_dim itself always, another one when listed. */
static bool head_dim_v_supported(const fx_caps *c, const fx_problem *p)
{
    const int dv = fx_head_dim_v(p);
    if (dv == p->head_dim)
        return true;
    for (int i = 0; i < c->n_head_dim_v_pairs && i < FX_MAX_HEAD_DIM_V_PAIRS; ++i)
        if (c->head_dim_v_pairs[i].head_dim == p->head_dim &&
            c->head_dim_v_pairs[i].head_dim_v == dv)
            return true;
    return false;
}

/* "head_dim only", or "head_dim, or 128 with head_dim 192" for the caps' pairs. */
static void head_dim_v_text(const fx_caps *c, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "head_dim%s", c->n_head_dim_v_pairs ? ", or" : " only");
    for (int i = 0; i < c->n_head_dim_v_pairs && i < FX_MAX_HEAD_DIM_V_PAIRS && off < len; ++i)
        off += (size_t)snprintf(buf + off, len - off, "%s %d with head_dim %d", i ? "," : "",
                                c->head_dim_v_pairs[i].head_dim_v, c->head_dim_v_pairs[i].head_dim);
}

int fx_stage_supports(const fx_stage *s, const fx_problem *p, bool backward, char *why,
                      size_t why_len)
{
    const fx_caps *c = &s->caps;
    char dims[128];
    if (!head_dim_supported(c, p->head_dim)) {
        head_dims_text(c, dims, sizeof dims);
        snprintf(why, why_len, "head_dim %d is not supported (head_dim: %s)", p->head_dim, dims);
        return 2;
    }
    if (!head_dim_v_supported(c, p)) {
        head_dim_v_text(c, dims, sizeof dims);
        snprintf(why, why_len, "head_dim_v %d with head_dim %d is not supported (head_dim_v: %s)",
                 fx_head_dim_v(p), p->head_dim, dims);
        return 2;
    }
    if (!(c->dtypes & FX_DTYPE_BIT(p->dtype))) {
        snprintf(why, why_len, "dtype %s is not supported", fx_dtype_name(p->dtype));
        return 2;
    }
    if (p->causal && !c->causal) {
        snprintf(why, why_len, "causal masking is not supported");
        return 2;
    }
    if (p->heads_q != p->heads_kv && !c->gqa) {
        snprintf(why, why_len, "heads_q (%d) != heads_kv (%d) needs GQA, not supported", p->heads_q,
                 p->heads_kv);
        return 2;
    }
    if (p->varlen && !c->varlen) {
        snprintf(why, why_len, "a variable-length batch (--seqlens-q) is not supported");
        return 2;
    }
    if (backward && (!c->backward || !s->backward)) {
        snprintf(why, why_len, "there is no backward");
        return 2;
    }
    if (backward && fx_head_dim_v(p) != p->head_dim) {
        snprintf(why, why_len, "head_dim_v %d != head_dim %d has no backward (forward only)",
                 fx_head_dim_v(p), p->head_dim);
        return 2;
    }
    if (s->check_problem)
        return s->check_problem(p, backward, why, why_len);
    return 0;
}

void fx_caps_describe(const fx_stage *s, char *buf, size_t len)
{
    const fx_caps *c = &s->caps;
    char dims[256];
    head_dims_text(c, dims, sizeof dims);
    if (c->n_head_dim_v_pairs > 0) { /* the pairs after the list: "...; head_dim_v: ..." */
        const size_t used = strlen(dims);
        snprintf(dims + used, sizeof dims - used, "; head_dim_v: ");
        head_dim_v_text(c, dims + strlen(dims), sizeof dims - strlen(dims));
    }
    char dtypes[32] = "";
    for (int dt = 0; dt < FX_DTYPE_COUNT; ++dt)
        if (c->dtypes & FX_DTYPE_BIT(dt)) {
            if (dtypes[0])
                strncat(dtypes, "/", sizeof dtypes - strlen(dtypes) - 1);
            strncat(dtypes, fx_dtype_name((fx_dtype)dt), sizeof dtypes - strlen(dtypes) - 1);
        }
    /* An e4m3 stage's model is not a cpu_model (its inputs are codes and descales): --cpu
     * runs it through fx_fp8_case.c. */
    const char *cpu = s->fp8_tiles             ? "yes (--cpu; forward, e4m3)"
                      : !s->cpu_model          ? "none (--cpu is refused)"
                      : s->cpu_model->backward ? "yes (--cpu; forward and backward)"
                                               : "yes (--cpu; forward)";
    snprintf(buf, len,
             "  head_dim: %s\n  dtype:    %s\n  causal:   %s\n  GQA/MQA:  %s\n"
             "  varlen:   %s\n  backward: %s\n  CPU model: %s\n  GPU:      sm_%d%s\n%s%s%s",
             dims, dtypes, c->causal ? "yes (bottom-right)" : "no", c->gqa ? "yes" : "no",
             c->varlen ? "yes (--seqlens-q, --seqlens-k, --seqused-k)" : "no",
             c->backward ? (c->deterministic_backward ? "yes (deterministic)" : "yes") : "no", cpu,
             c->sm90a_only ? 90 : c->min_sm, c->sm90a_only ? "a (Hopper) only" : " or newer",
             c->limits ? "  limits:   " : "", c->limits ? c->limits : "", c->limits ? "\n" : "");
}

int fx_check_grid_heads_batch(const fx_problem *p, char *why, size_t why_len)
{
    if (p->heads_q <= FX_MAX_GRID_YZ && p->batch <= FX_MAX_GRID_YZ)
        return 0;
    snprintf(why, why_len,
             "heads_q (%d) and batch (%d) must each be at most %d: the grid is one CTA per "
             "(query block, head, batch) (gridDim.y/z)",
             p->heads_q, p->batch, FX_MAX_GRID_YZ);
    return 2;
}

int fx_check_smem_optin(size_t needed, int head_dim, const char *what, char *why, size_t why_len)
{
    int device = 0, smem_optin = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: leave no error behind */
        return 0;
    }
    if (needed <= (size_t)smem_optin)
        return 0;
    snprintf(why, why_len,
             "at head_dim %d, %s in shared memory need %zu bytes per block; this GPU allows %d",
             head_dim, what, needed, smem_optin);
    return FX_EXIT_NO_GPU;
}

int fx_check_hopper_fwd(const fx_problem *p, size_t smem_bytes, char *why, size_t why_len)
{
    if (fx_check_grid_heads_batch(p, why, why_len))
        return 2;
    return fx_check_smem_optin(smem_bytes, p->head_dim, "Q and two stages of K and V", why,
                               why_len);
}

void fx_quote_value(const char *v, char *buf, size_t len)
{
    if (len == 0)
        return;
    char q[FX_QUOTE_MAX + 1];
    size_t n = strlen(v), cut = n;
    if (n > FX_QUOTE_MAX) {
        cut = FX_QUOTE_MAX;
        while (cut > 0 && ((unsigned char)v[cut] & 0xC0) == 0x80)  // not inside a character
            --cut;
    }
    for (size_t i = 0; i < cut; ++i) {
        const unsigned char ch = (unsigned char)v[i];
        q[i] = ch < 0x20 || ch == 0x7F || ch == '"' ? '?' : (char)ch;
    }
    q[cut] = '\0';
    snprintf(buf, len, "\"%s%s\"", q, cut < n ? "…" : "");
}

int fx_env_choice(const char *name, const char *const *values, int n, int unset, char *why,
                  size_t why_len)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        return unset;
    for (int i = 0; i < n; ++i)
        if (strcmp(v, values[i]) == 0)
            return i;
    char quoted[FX_QUOTE_MAX + 8], list[256];
    fx_quote_value(v, quoted, sizeof quoted);
    size_t off = 0;
    list[0] = '\0';
    for (int i = 0; i < n && off < sizeof list; ++i) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", sep, values[i]);
    }
    snprintf(why, why_len, "%s=%s is not %s", name, quoted, list);
    return -1;
}
