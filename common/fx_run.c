/*
 * fx_run.c — the buffers of one case, and one stage's run on the device (fx_run.h).
 */
#include "fx_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_fill.h"
#include "fx_gpu.h"
#include "fx_host.h"
#include "fx_msg.h"

void *fx_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fx_error("out of host memory (%zu bytes)", n);
        exit(FX_EXIT_FAIL);
    }
    return p;
}

/* ---- host inputs --------------------------------------------------------------------- */

void fx_host_free(fx_case_host *h)
{
    free(h->q);
    free(h->k);
    free(h->v);
    free(h->dout);
    free(h->qb);
    free(h->kb);
    free(h->vb);
    free(h->dob);
    fx_fp8_inputs_free(&h->fp8);
    memset(h, 0, sizeof *h);
}

/* One tensor: its float values, and their dtype bits. */
static void make_tensor(const fx_problem *p, fx_tensor_id id, size_t n, float **x, uint16_t **bits)
{
    *x = fx_xmalloc(n * sizeof(float));
    *bits = fx_xmalloc(n * 2);
    fx_fill(p, id, *x, n);
    fx_to_bits(p->dtype, *x, *bits, n);
}

void fx_host_make(const fx_problem *p, bool backward, fx_case_host *h)
{
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nv = fx_numel_v(p), no = fx_numel_o(p);
    memset(h, 0, sizeof *h);
    make_tensor(p, FX_T_Q, nq, &h->q, &h->qb);
    make_tensor(p, FX_T_K, nkv, &h->k, &h->kb);
    make_tensor(p, FX_T_V, nv, &h->v, &h->vb);
    if (backward)
        make_tensor(p, FX_T_DO, no, &h->dout, &h->dob);
}

/* ---- device inputs ------------------------------------------------------------------- */

/* Allocation failures name the bytes (the harness contract: refuse, don't crash). */
static cudaError_t dev_alloc(void **ptr, size_t bytes, const char *what)
{
    cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        fx_error("cannot allocate %s: %zu bytes needed, %zu free of %zu", what, bytes, free_b,
                 total_b);
    }
    return err;
}

void fx_inputs_free(fx_inputs *in)
{
    cudaFree(in->q);
    cudaFree(in->k);
    cudaFree(in->v);
    cudaFree(in->dout);
    cudaFree(in->cu_seqlens_q);
    cudaFree(in->cu_seqlens_k);
    cudaFree(in->seqused_k);
    memset(in, 0, sizeof *in);
}

/* One input on the device: h's bits copied, or drawn there when h has none. */
static cudaError_t input_make(const fx_problem *p, fx_tensor_id id, const uint16_t *bits, size_t n,
                              void **dst, const char *what)
{
    cudaError_t err = dev_alloc(dst, n * 2, what);
    if (err != cudaSuccess)
        return err;
    if (bits)
        return FX_CUDA(cudaMemcpy(*dst, bits, n * 2, cudaMemcpyHostToDevice));
    return FX_CUDA(fx_fill_bits_device(p, id, *dst, n, 0));
}

cudaError_t fx_inputs_make(const fx_problem *p, const fx_case_host *h, bool backward, fx_inputs *in)
{
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nv = fx_numel_v(p), no = fx_numel_o(p);
    cudaError_t err;
    memset(in, 0, sizeof *in);
    in->p = p;
    if ((err = input_make(p, FX_T_Q, h->qb, nq, &in->q, "Q")) ||
        (err = input_make(p, FX_T_K, h->kb, nkv, &in->k, "K")) ||
        (err = input_make(p, FX_T_V, h->vb, nv, &in->v, "V")))
        return err;
    if (backward && (err = input_make(p, FX_T_DO, h->dob, no, &in->dout, "dO")))
        return err;
    if (p->varlen) {
        const struct {
            const int *host;
            int **dev;
            int n;
            const char *what;
        } offsets[] = {{p->cu_seqlens_q, &in->cu_seqlens_q, p->batch + 1, "cu_seqlens_q"},
                       {p->cu_seqlens_k, &in->cu_seqlens_k, p->batch + 1, "cu_seqlens_k"},
                       {p->seqused_k, &in->seqused_k, p->batch, "seqused_k"}};
        for (int t = 0; t < 3; t++) {
            const size_t bytes = (size_t)offsets[t].n * sizeof(int);
            if (!offsets[t].host)
                continue;
            if ((err = dev_alloc((void **)offsets[t].dev, bytes, offsets[t].what)) ||
                (err = FX_CUDA(
                     cudaMemcpy(*offsets[t].dev, offsets[t].host, bytes, cudaMemcpyHostToDevice))))
                return err;
        }
    }
    /* A kernel error of the fill surfaces here, not inside the stage's first launch. */
    return FX_CUDA(cudaDeviceSynchronize());
}

/* The elements of one tensor whose device-drawn bits differ from `want`, the first named. */
static long long fill_differences(const fx_problem *p, fx_tensor_id id, const char *what,
                                  const uint16_t *want, size_t n)
{
    void *d = NULL;
    uint16_t *got = fx_xmalloc(n * 2);
    long long differ = -1;
    if (dev_alloc(&d, n * 2, "the fill check's buffer") == cudaSuccess &&
        FX_CUDA(fx_fill_bits_device(p, id, d, n, 0)) == cudaSuccess &&
        FX_CUDA(cudaMemcpy(got, d, n * 2, cudaMemcpyDeviceToHost)) == cudaSuccess) {
        differ = 0;
        for (size_t i = 0; i < n; i++) {
            if (got[i] == want[i])
                continue;
            if (differ++ == 0)
                fx_error("the device's fill of %s differs from the host's at element %zu "
                         "(0x%04x against 0x%04x)",
                         what, i, got[i], want[i]);
        }
    }
    cudaFree(d);
    free(got);
    return differ;
}

long long fx_inputs_check_device_fill(const fx_problem *p, const fx_case_host *h)
{
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nv = fx_numel_v(p), no = fx_numel_o(p);
    const struct {
        fx_tensor_id id;
        const char *what;
        const uint16_t *bits;
        size_t n;
    } t[] = {{FX_T_Q, "Q", h->qb, nq},
             {FX_T_K, "K", h->kb, nkv},
             {FX_T_V, "V", h->vb, nv},
             {FX_T_DO, "dO", h->dob, no}};
    long long total = 0;
    for (int i = 0; i < 4; i++) {
        if (!t[i].bits)
            continue;
        long long d = fill_differences(p, t[i].id, t[i].what, t[i].bits, t[i].n);
        if (d < 0)
            return -1;
        total += d;
    }
    return total;
}

/* ---- one stage's run ----------------------------------------------------------------- */

static void outputs_free(fx_outputs *o)
{
    cudaFree(o->o);
    cudaFree(o->lse);
    cudaFree(o->dq);
    cudaFree(o->dk);
    cudaFree(o->dv);
    free(o->o_h);
    free(o->lse_h);
    free(o->dq_h);
    free(o->dk_h);
    free(o->dv_h);
    memset(o, 0, sizeof *o);
}

void fx_run_free(fx_run *r)
{
    cudaFree(r->workspace);
    outputs_free(&r->out);
    memset(r, 0, sizeof *r);
}

cudaError_t fx_launch_forward(void *ctx)
{
    fx_run *r = ctx;
    return r->s->forward(&r->fwd);
}

cudaError_t fx_launch_backward(void *ctx)
{
    fx_run *r = ctx;
    return r->s->backward(&r->bwd);
}

/* Every byte 0xff: NaN in bf16, fp16 and fp32 alike. */
static cudaError_t poison(void *ptr, size_t bytes)
{
    return cudaMemset(ptr, 0xff, bytes);
}

static void bits_to_host(fx_dtype dt, const uint16_t *bits, float **out, size_t n)
{
    if (!*out)
        *out = fx_xmalloc(n * sizeof(float));
    fx_from_bits(dt, bits, *out, n);
}

/* The workspace the stage needs for the forward and, when asked, the backward: one buffer
 * of the larger size serves both. Reused while the size stays the same. */
static cudaError_t workspace_make(fx_run *r, const fx_problem *p, bool backward)
{
    const fx_stage *s = r->s;
    size_t need = 0;
    if (s->workspace_bytes) {
        size_t wf = s->workspace_bytes(p, false);
        size_t wb = backward ? s->workspace_bytes(p, true) : 0;
        need = wf > wb ? wf : wb;
    }
    if (r->workspace && need == r->workspace_bytes)
        return cudaSuccess;
    cudaFree(r->workspace);
    r->workspace = NULL;
    r->workspace_bytes = need;
    if (!need)
        return cudaSuccess;
    char what[96];
    snprintf(what, sizeof what, "the workspace of stage %s", s->id);
    return dev_alloc(&r->workspace, need, what);
}

/* Copies the device outputs back through a 16-bit staging buffer. */
static cudaError_t outputs_to_host(const fx_problem *p, bool backward, fx_outputs *out)
{
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nv = fx_numel_v(p), no = fx_numel_o(p),
           nl = fx_numel_lse(p);
    cudaError_t err;
    size_t most = nq > nkv ? nq : nkv;
    most = most > nv ? most : nv;
    most = most > no ? most : no;
    uint16_t *stage = fx_xmalloc(most * 2);
    if ((err = FX_CUDA(cudaMemcpy(stage, out->o, no * 2, cudaMemcpyDeviceToHost))))
        goto done;
    bits_to_host(p->dtype, stage, &out->o_h, no);
    if (!out->lse_h)
        out->lse_h = fx_xmalloc(nl * sizeof(float));
    if ((err =
             FX_CUDA(cudaMemcpy(out->lse_h, out->lse, nl * sizeof(float), cudaMemcpyDeviceToHost))))
        goto done;
    if (backward) {
        if ((err = FX_CUDA(cudaMemcpy(stage, out->dq, nq * 2, cudaMemcpyDeviceToHost))))
            goto done;
        bits_to_host(p->dtype, stage, &out->dq_h, nq);
        if ((err = FX_CUDA(cudaMemcpy(stage, out->dk, nkv * 2, cudaMemcpyDeviceToHost))))
            goto done;
        bits_to_host(p->dtype, stage, &out->dk_h, nkv);
        if ((err = FX_CUDA(cudaMemcpy(stage, out->dv, nv * 2, cudaMemcpyDeviceToHost))))
            goto done;
        bits_to_host(p->dtype, stage, &out->dv_h, nv);
    }
done:
    free(stage);
    return err;
}

cudaError_t fx_run_stage(fx_run *r, const fx_stage *s, const fx_inputs *in, bool backward)
{
    const fx_problem *p = in->p;
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nv = fx_numel_v(p), no = fx_numel_o(p),
           nl = fx_numel_lse(p);
    fx_outputs *out = &r->out;
    cudaError_t err;
    r->s = s;
    if ((err = workspace_make(r, p, backward)))
        return err;
    if (!out->o) {
        if ((err = dev_alloc(&out->o, no * 2, "O")) ||
            (err = dev_alloc((void **)&out->lse, nl * sizeof(float), "LSE")))
            return err;
        if (backward && ((err = dev_alloc(&out->dq, nq * 2, "dQ")) ||
                         (err = dev_alloc(&out->dk, nkv * 2, "dK")) ||
                         (err = dev_alloc(&out->dv, nv * 2, "dV"))))
            return err;
    }
    fx_layout lq = fx_layout_q(p), lkv = fx_layout_kv(p), lv = fx_layout_v(p), lo = fx_layout_o(p);
    r->fwd = (fx_fwd_args){.p = p,
                           .q = in->q,
                           .k = in->k,
                           .v = in->v,
                           .o = out->o,
                           .lse = out->lse,
                           .q_layout = lq,
                           .k_layout = lkv,
                           .v_layout = lv,
                           .o_layout = lo,
                           .cu_seqlens_q = in->cu_seqlens_q,
                           .cu_seqlens_k = in->cu_seqlens_k,
                           .seqused_k = in->seqused_k,
                           .workspace = r->workspace,
                           .workspace_bytes = r->workspace_bytes,
                           .stream = 0};
    if ((err = FX_CUDA(poison(out->o, no * 2))) ||
        (err = FX_CUDA(poison(out->lse, nl * sizeof(float)))))
        return err;
    if ((err = FX_CUDA(s->forward(&r->fwd))) || (err = FX_CUDA(cudaDeviceSynchronize())))
        return err;
    if (backward) {
        r->bwd = (fx_bwd_args){.p = p,
                               .q = in->q,
                               .k = in->k,
                               .v = in->v,
                               .o = out->o,
                               .dout = in->dout,
                               .lse = out->lse,
                               .dq = out->dq,
                               .dk = out->dk,
                               .dv = out->dv,
                               .q_layout = lq,
                               .k_layout = lkv,
                               .v_layout = lv,
                               .o_layout = lo,
                               .workspace = r->workspace,
                               .workspace_bytes = r->workspace_bytes,
                               .stream = 0};
        if ((err = FX_CUDA(poison(out->dq, nq * 2))) || (err = FX_CUDA(poison(out->dk, nkv * 2))) ||
            (err = FX_CUDA(poison(out->dv, nv * 2))))
            return err;
        if ((err = FX_CUDA(s->backward(&r->bwd))) || (err = FX_CUDA(cudaDeviceSynchronize())))
            return err;
    }
    return outputs_to_host(p, backward, out);
}

/* ---- --digest -------------------------------------------------------------------------- */

/* FNV-1a, 64 bits (offset basis 14695981039346656037, prime 1099511628211). */
static unsigned long long fnv1a64(const float *x, size_t n)
{
    const unsigned char *b = (const unsigned char *)x;
    unsigned long long h = 14695981039346656037ULL;
    for (size_t i = 0; i < n * sizeof(float); ++i)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

void fx_print_digest(const fx_problem *p, const fx_outputs *o, bool backward)
{
    const size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nl = fx_numel_lse(p);
    printf("  digest: O %016llx LSE %016llx", fnv1a64(o->o_h, fx_numel_o(p)),
           fnv1a64(o->lse_h, nl));
    if (backward)
        printf(" dQ %016llx dK %016llx dV %016llx", fnv1a64(o->dq_h, nq), fnv1a64(o->dk_h, nkv),
               fnv1a64(o->dv_h, fx_numel_v(p)));
    printf("\n");
}

/* ---- --repeat -------------------------------------------------------------------------- */

static bool bitwise_equal(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

int fx_repeat_check(const fx_run *first, const fx_inputs *in, bool backward, int repeat,
                    bool verbose)
{
    const fx_problem *p = in->p;
    const fx_outputs *f = &first->out;
    size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nl = fx_numel_lse(p);
    bool bwd = backward && first->s->caps.deterministic_backward;
    fx_run again = {0};
    int bad = 0;
    for (int it = 0; it < repeat - 1 && !bad; ++it) {
        if (fx_run_stage(&again, first->s, in, bwd) != cudaSuccess) {
            fx_run_free(&again);
            return -1;
        }
        const fx_outputs *a = &again.out;
        bad |= !bitwise_equal(a->o_h, f->o_h, fx_numel_o(p));
        bad |= !bitwise_equal(a->lse_h, f->lse_h, nl);
        if (bwd) {
            bad |= !bitwise_equal(a->dq_h, f->dq_h, nq);
            bad |= !bitwise_equal(a->dk_h, f->dk_h, nkv);
            bad |= !bitwise_equal(a->dv_h, f->dv_h, fx_numel_v(p));
        }
        if (bad && verbose)
            printf("  repeat %d of %d differs bitwise from the first run: FAIL\n", it + 2, repeat);
    }
    if (!bad && verbose)
        printf("  repeat: %d runs bitwise equal (%s)  PASS\n", repeat,
               bwd ? "forward and backward" : "forward");
    fx_run_free(&again);
    return bad;
}
