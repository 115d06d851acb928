/*
 * fx_gpu.h — the device: finding it, exit code 77, timing, the SM clock.
 */
#ifndef FX_GPU_H
#define FX_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "fx_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes of every stage program (DESIGN.md, "Program"). */
enum {
    FX_EXIT_OK = 0,
    FX_EXIT_FAIL = 1,     /* a check failed, or any CUDA error but the ones below */
    FX_EXIT_USAGE = 2,    /* bad usage, or a problem outside the stage's capabilities */
    FX_EXIT_NO_GPU = 77   /* no driver, no device, or an architecture below the stage's */
};

typedef struct fx_device_info {
    int ordinal;
    char name[256];
    int sm_count;
    int cc_major, cc_minor;
    size_t l2_bytes;
    size_t total_mem;
} fx_device_info;

/* Finds device 0 and checks that stage s can run on it. Returns 0, or FX_EXIT_NO_GPU
 * with the reason in `why` (cudaErrorInsufficientDriver, cudaErrorNoDevice, compute
 * capability below s->caps.min_sm, or not 9.0 for an sm90a-only stage), or
 * FX_EXIT_FAIL for any other CUDA error. */
int fx_device_open(const fx_stage *s, fx_device_info *info, char *why, size_t why_len);

/* FX_REQUIRE_GPU=1 in the environment turns 77 into 1 (the H200 runs use it). */
int fx_exit_code_no_gpu(void);

/* Current SM clock in MHz through NVML, loaded with dlopen (no link-time libnvidia-ml),
 * or 0 when NVML is absent. */
int fx_sm_clock_mhz(int ordinal);

/* Timing with CUDA events (DESIGN.md, "Timing"): `warmup` untimed calls, then
 * `repeats` timed calls, each after an L2 flush (a memset of 2× the L2 size) that
 * is outside the timed region. */
typedef cudaError_t (*fx_launch_fn)(void *ctx);
typedef struct fx_timing {
    double median_ms, min_ms, max_ms;
    int repeats;
} fx_timing;
cudaError_t fx_time(fx_launch_fn fn, void *ctx, cudaStream_t stream, size_t l2_bytes,
                    int warmup, int repeats, fx_timing *out);

/* Prints "file:line: what: cudaGetErrorString(err)" to stderr when err != cudaSuccess,
 * and returns err. */
cudaError_t fx_cuda_report(cudaError_t err, const char *what, const char *file, int line);
#define FX_CUDA(call) fx_cuda_report((call), #call, __FILE__, __LINE__)

#ifdef __cplusplus
}
#endif
#endif
