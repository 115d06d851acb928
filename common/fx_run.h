/*
 * fx_run.h — the buffers of one case, and one stage's run on the device.
 *
 * A case's inputs are made once on the host (fx_case_host: drawn from the seed, rounded
 * to the dtype) and copied once to the device (fx_inputs); every stage that runs the case
 * (this program's and its previous stage) reads those same device inputs. Each stage's run
 * (fx_run) has its own outputs, poisoned with NaN before every launch so that an element
 * a kernel never writes fails the check, and copied back to the host as float.
 */
#ifndef FX_RUN_H
#define FX_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "fx_fp8_model.h" /* fx_fp8_inputs */
#include "fx_problem.h"
#include "fx_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* malloc that never returns NULL: on failure it prints "out of host memory (N bytes)"
 * and exits 1. n = 0 allocates 1 byte. */
void *fx_xmalloc(size_t n);

/* The inputs on the host: float (rounded to the dtype, what the reference and the CPU
 * models read) and the same values' 16-bit patterns (what is copied to the device). dO
 * and its bits are NULL without a backward. Shapes: fx_problem.h.
 * e4m3 (common/fx_fp8_case.c): the bits are NULL and fp8 holds the e4m3 codes and fp32
 * descales the kernel and the model read; q, k, v are then the fp32 inputs before
 * quantization (and before incoherent processing), which only the report's "on fp32
 * inputs" lines read: NULL where a loaded folder has none (fx_load.h). */
typedef struct fx_case_host {
    float *q, *k, *v, *dout;
    uint16_t *qb, *kb, *vb, *dob;
    fx_fp8_inputs fp8; /* e4m3 only; zeroed otherwise */
} fx_case_host;

/* Draws Q, K, V (and dO when `backward`) for p into h, for a checked run: each as float
 * (q, k, v, dout; fx_fill: rounded to the dtype, what the fp64 reference, the emulation
 * and the CPU models read) and as the same values' dtype bits (qb, kb, vb, dob: what is
 * copied to the device). A run that only times makes no host inputs at all
 * (fx_inputs_make draws them on the device, fx_fill_bits_device: the bits fx_fill_bits
 * would write). */
void fx_host_make(const fx_problem *p, bool backward, fx_case_host *h);
/* Frees h's arrays (fp8's too) and zeroes it. */
void fx_host_free(fx_case_host *h);

/* The inputs on the device, for problem p (which must outlive them); dout NULL without
 * a backward. A variable-length batch also has its offsets there: cu_seqlens_q/k (batch + 1
 * ints each) and seqused_k (batch ints, NULL when p->seqused_k is), copies of p's; all
 * three NULL for a fixed-length batch. */
typedef struct fx_inputs {
    const fx_problem *p;
    void *q, *k, *v, *dout;
    int *cu_seqlens_q, *cu_seqlens_k, *seqused_k;
} fx_inputs;

/* Allocates the inputs on the device: copies h's bits there, or, where h holds none (a
 * run that only times: h zeroed), draws them there (fx_fill_bits_device: the same
 * numbers). dO only when `backward`; a varlen batch's offsets copied from p's. Returns a
 * CUDA error, or cudaErrorMemoryAllocation after naming the bytes (fx_error) when one does
 * not fit. On an error the caller still frees `in`. */
cudaError_t fx_inputs_make(const fx_problem *p, const fx_case_host *h, bool backward,
                           fx_inputs *in);
/* Draws each input on the device again and compares its bits with h's (which a checked
 * run copied there): a timing-only run draws its inputs on the device, and this is what
 * holds those to the inputs that the checks saw. Returns the number of elements that
 * differ over Q, K, V (and dO where h has it), after naming the first (fx_error), or -1
 * on a CUDA error. */
long long fx_inputs_check_device_fill(const fx_problem *p, const fx_case_host *h);
/* Frees in's device buffers (those allocated) and zeroes it. */
void fx_inputs_free(fx_inputs *in);

/* One stage's outputs: device buffers in the dtype (LSE fp32), and their host copies as
 * float. dq, dk, dv and their copies stay NULL without a backward. */
typedef struct fx_outputs {
    void *o;
    float *lse;
    void *dq, *dk, *dv;
    float *o_h, *lse_h;
    float *dq_h, *dk_h, *dv_h;
} fx_outputs;

/* One stage's run: its outputs, its workspace and the arguments of its last launches,
 * which fx_launch_forward/backward launch again (timing). Zero-initialise it; free it with
 * fx_run_free. */
typedef struct fx_run {
    const fx_stage *s;
    fx_outputs out;
    fx_fwd_args fwd;
    fx_bwd_args bwd;
    void *workspace;
    size_t workspace_bytes;
} fx_run;

/* Runs stage s on `in` once: the forward, and the backward when `backward`, each after
 * poisoning its outputs, then copies the outputs to the host. The arguments get in's
 * layouts and, for a variable-length batch, in's device offsets (fx_fwd_args). The
 * outputs and workspace are allocated on the first call and reused by later ones on the
 * same problem (the first call decides whether the gradients exist). Returns a CUDA error, or
 * cudaErrorMemoryAllocation after naming the bytes when a buffer does not fit. */
cudaError_t fx_run_stage(fx_run *r, const fx_stage *s, const fx_inputs *in, bool backward);
/* Frees r's outputs (device and host) and workspace, and zeroes it. */
void fx_run_free(fx_run *r);

/* fx_launch_fn's (fx_gpu.h) for fx_time: ctx is an fx_run that fx_run_stage has run
 * (with `backward` for the second); they enqueue the same launch again. */
cudaError_t fx_launch_forward(void *ctx);
cudaError_t fx_launch_backward(void *ctx);

/* Prints "  digest: O <hex> LSE <hex>" (and " dQ <hex> dK <hex> dV <hex>" when `backward`):
 * 64-bit FNV-1a hashes of the fp32 host copies' bytes (o->o_h and dq_h: fx_numel_q(p)
 * floats, dk_h and dv_h: fx_numel_kv(p), lse_h: fx_numel_lse(p); in the layouts the run
 * copied back), so that the outputs of two builds (an old and a new kernel, say) can be
 * compared bit for bit from their logs. No errors: the copies must exist (fx_run_stage). */
void fx_print_digest(const fx_problem *p, const fx_outputs *o, bool backward);

/* --repeat N: runs first->s N − 1 more times on `in` and compares the outputs bitwise with
 * first's: the forward always, the backward too when `backward` and the stage declares it
 * deterministic. Races that tools miss show up here (DESIGN.md, "Tests"). Returns 0 when
 * all are equal, 1 when one differs (printed when `verbose`), -1 on a CUDA error. */
int fx_repeat_check(const fx_run *first, const fx_inputs *in, bool backward, int repeat,
                    bool verbose);

#ifdef __cplusplus
}
#endif
#endif
