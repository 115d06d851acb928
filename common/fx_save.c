/*
 * fx_save.c — --save DIR (fx_save.h): a case's inputs and a stage's outputs as files.
 */
#define _POSIX_C_SOURCE 200809L /* mkdir */
#include "fx_save.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fx_gpu.h" /* FX_EXIT_USAGE */
#include "fx_msg.h"

int fx_save_prepare(const char *dir, char *why, size_t why_len)
{
    struct stat st;
    if (stat(dir, &st) != 0 && mkdir(dir, 0777) != 0) {
        snprintf(why, why_len, "--save: cannot create the folder %s: %s", dir, strerror(errno));
        return FX_EXIT_USAGE;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, why_len, "--save: %s is not a folder", dir);
        return FX_EXIT_USAGE;
    }
    /* A folder one cannot write to must be refused now, not after the run. */
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/problem.txt", dir);
    FILE *f = fopen(probe, "a");
    if (!f) {
        snprintf(why, why_len, "--save: cannot write in %s: %s", dir, strerror(errno));
        return FX_EXIT_USAGE;
    }
    fclose(f);
    return 0;
}

/* Writes n elements of `size` bytes to DIR/name; 0, or 1 after naming the file. The
 * host is little-endian (x86-64, aarch64), so the bytes are the files' format as they are. */
static int write_array(const char *dir, const char *name, const void *x, size_t size, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fx_error("--save: cannot open %s: %s", path, strerror(errno));
        return 1;
    }
    const size_t wrote = n ? fwrite(x, size, n, f) : 0;
    const int closed = fclose(f);
    if (wrote != n || closed != 0) {
        fx_error("--save: writing %s failed (%zu of %zu elements)", path, wrote, n);
        return 1;
    }
    return 0;
}

static void write_list(FILE *f, const char *key, const int *x, int n)
{
    fprintf(f, "%s=", key);
    for (int i = 0; i < n; ++i)
        fprintf(f, "%s%d", i ? "," : "", x[i]);
    fprintf(f, "\n");
}

static int write_problem(const char *dir, const char *stage_id, const fx_problem *p,
                         const fx_case_host *h, bool backward)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/problem.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fx_error("--save: cannot open %s: %s", path, strerror(errno));
        return 1;
    }
    fprintf(f, "stage=%s\nbatch=%d\nseqlen_q=%d\nseqlen_k=%d\nheads_q=%d\nheads_kv=%d\n", stage_id,
            p->batch, p->seqlen_q, p->seqlen_k, p->heads_q, p->heads_kv);
    fprintf(f, "head_dim=%d\nhead_dim_v=%d\ndtype=%s\ncausal=%d\nsoftmax_scale=%.17g\n",
            p->head_dim, fx_head_dim_v(p), fx_dtype_name(p->dtype), p->causal ? 1 : 0,
            p->softmax_scale);
    fprintf(f, "seed=0x%016llx\ndist=%s\nqk_scale=%.17g\nbackward=%d\nvarlen=%d\n",
            (unsigned long long)p->seed, fx_dist_name(p->dist), p->qk_scale, backward ? 1 : 0,
            p->varlen ? 1 : 0);
    if (p->varlen) {
        fprintf(f, "total_q=%d\ntotal_k=%d\n", p->total_q, p->total_k);
        write_list(f, "cu_seqlens_q", p->cu_seqlens_q, p->batch + 1);
        write_list(f, "cu_seqlens_k", p->cu_seqlens_k, p->batch + 1);
        if (p->seqused_k)
            write_list(f, "seqused_k", p->seqused_k, p->batch);
    }
    if (p->dtype == FX_E4M3)
        fprintf(f, "fp8_scaling=%s\nhadamard=%d\nfp8_vt=%d\nfp8_block_m=%d\nfp8_block_n=%d\n",
                fx_fp8_scaling_name(p->fp8_scaling), p->fp8_hadamard ? 1 : 0,
                p->fp8_v_transposed ? 1 : 0, h->fp8.q.block_rows, h->fp8.k.block_rows);
    if (fclose(f) != 0) {
        fx_error("--save: writing %s failed", path);
        return 1;
    }
    return 0;
}

/* e4m3: each tensor's codes (name.bin) and descales (name_descale.f32), and its fp32 values
 * before quantization (name.f32) where h has them. */
static int write_fp8_inputs(const char *dir, const fx_case_host *h)
{
    const fx_fp8_tensor *t[3] = {&h->fp8.q, &h->fp8.k, &h->fp8.v};
    const float *x[3] = {h->q, h->k, h->v};
    static const char *const names[3] = {"q", "k", "v"};
    int bad = 0;
    for (int i = 0; i < 3 && !bad; ++i) {
        char file[32];
        snprintf(file, sizeof file, "%s.bin", names[i]);
        bad = write_array(dir, file, t[i]->codes, 1, fx_fp8_tensor_numel(t[i]));
        snprintf(file, sizeof file, "%s_descale.f32", names[i]);
        bad = bad ||
              write_array(dir, file, t[i]->descale, sizeof(float), fx_fp8_tensor_descales(t[i]));
        snprintf(file, sizeof file, "%s.f32", names[i]);
        bad =
            bad || (x[i] && write_array(dir, file, x[i], sizeof(float), fx_fp8_tensor_numel(t[i])));
    }
    return bad;
}

int fx_save_case(const char *dir, const char *stage_id, const fx_problem *p, const fx_case_host *h,
                 const fx_outputs *o, bool backward)
{
    /* Q, dQ, K, dK: head_dim columns; V, dV, O, dO: head_dim_v (fx_problem.h). */
    const size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p), nv = fx_numel_v(p);
    const size_t no = fx_numel_o(p), nl = fx_numel_lse(p);
    int bad = write_problem(dir, stage_id, p, h, backward);
    if (p->dtype == FX_E4M3) {
        bad = bad || write_fp8_inputs(dir, h);
    } else {
        bad = bad || write_array(dir, "q.bin", h->qb, sizeof(uint16_t), nq);
        bad = bad || write_array(dir, "k.bin", h->kb, sizeof(uint16_t), nkv);
        bad = bad || write_array(dir, "v.bin", h->vb, sizeof(uint16_t), nv);
    }
    bad = bad || write_array(dir, "o.f32", o->o_h, sizeof(float), no);
    bad = bad || write_array(dir, "lse.f32", o->lse_h, sizeof(float), nl);
    if (backward) {
        bad = bad || write_array(dir, "dout.bin", h->dob, sizeof(uint16_t), no);
        bad = bad || write_array(dir, "dq.f32", o->dq_h, sizeof(float), nq);
        bad = bad || write_array(dir, "dk.f32", o->dk_h, sizeof(float), nkv);
        bad = bad || write_array(dir, "dv.f32", o->dv_h, sizeof(float), nv);
    }
    return bad;
}
