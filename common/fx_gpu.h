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
    FX_EXIT_FAIL = 1,   /* a check failed, or any CUDA error but the ones below */
    FX_EXIT_USAGE = 2,  /* bad usage, or a problem outside the stage's capabilities */
    FX_EXIT_NO_GPU = 77 /* no driver, no device, or an architecture below the stage's */
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

/* FX_EXIT_NO_GPU (77), or FX_EXIT_FAIL (1) when FX_REQUIRE_GPU is set in the
 * environment to anything but "" or "0" (the H200 runs set it to 1). */
int fx_exit_code_no_gpu(void);

/* Current SM clock in MHz through NVML, loaded with dlopen (no link-time libnvidia-ml),
 * or 0 when NVML is absent. */
int fx_sm_clock_mhz(int ordinal);

/* The most timed calls fx_time takes: it keeps every call's time on the stack
 * (FX_MAX_ITERS, the --iters limit of fx_main.h, is this). */
#define FX_TIME_MAX_REPEATS 1024

/* Timing with CUDA events (DESIGN.md, "Timing"): `warmup` (>= 0) untimed calls of
 * fn(ctx), then `repeats` timed calls on `stream`, each after an L2 flush outside the
 * timed region (a memset of 2× l2_bytes, the L2 size; 0 means unknown: 2× 64 MiB).
 * out: median, min and max in milliseconds. Returns the first CUDA error (fn's
 * included), or cudaErrorInvalidValue, named on stderr, when repeats is outside
 * [1, FX_TIME_MAX_REPEATS]. */
typedef cudaError_t (*fx_launch_fn)(void *ctx);
typedef struct fx_timing {
    double median_ms, min_ms, max_ms;
    int repeats;
} fx_timing;
cudaError_t fx_time(fx_launch_fn fn, void *ctx, cudaStream_t stream, size_t l2_bytes, int warmup,
                    int repeats, fx_timing *out);

/* Prints "file:line: what: cudaGetErrorString(err)" to stderr when err != cudaSuccess,
 * and returns err. */
cudaError_t fx_cuda_report(cudaError_t err, const char *what, const char *file, int line);
#define FX_CUDA(call) fx_cuda_report((call), #call, __FILE__, __LINE__)

#ifdef __cplusplus
}
#endif
#endif
