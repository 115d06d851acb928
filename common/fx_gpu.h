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
/* fx_device_open's checks on the calling thread's current device, which it leaves current
 * (the shared library's callers choose their device: api/fx_api.h). Same returns. */
int fx_device_check_current(const fx_stage *s, fx_device_info *info, char *why, size_t why_len);

/* FX_EXIT_NO_GPU (77), or FX_EXIT_FAIL (1) when FX_REQUIRE_GPU is set in the
 * environment to anything but "" or "0" (the H200 runs set it to 1). */
int fx_exit_code_no_gpu(void);

/* Current SM clock in MHz through NVML, loaded with dlopen (no link-time libnvidia-ml),
 * or 0 when NVML is absent. */
int fx_sm_clock_mhz(int ordinal);

/* The most timed calls fx_time takes: it keeps every call's time on the stack
 * (FX_MAX_ITERS, the --iters limit of fx_options.h, is this). */
#define FX_TIME_MAX_REPEATS 1024

/* The GPU spin before each timed call, in microseconds (--spin-us; docs/harness.md,
 * "Timing"). It must outlast what the host does between enqueuing the spin and enqueuing
 * the timed call: record the start event and launch the stage, a few microseconds from C
 * (the Hopper stages also encode their tensor maps on the host in that time). 50 µs is
 * ten times that, so a host that is descheduled briefly on a busy machine is still
 * covered, and it costs 50 µs of untimed GPU time per timed call. */
#define FX_SPIN_US 50
/* The largest --spin-us: far above any useful spin (0.1 s per timed call). */
#define FX_MAX_SPIN_US 100000

/* Timing with CUDA events (DESIGN.md, "Timing"). Each timed call is enqueued as
 *   L2 flush (a memset of 2× the L2) → spin of spin_us on the GPU → start event →
 *   fn(ctx) → stop event,
 * so the flush and the spin are outside the timed interval, and the start event fires
 * when the spin ends, by which time the host has enqueued the call: its launch latency is
 * not timed. spin_us 0 leaves the spin out: the older method, where only the flush
 * covers the host's enqueue. */
typedef cudaError_t (*fx_launch_fn)(void *ctx);
typedef struct fx_time_config {
    cudaStream_t stream;
    size_t l2_bytes; /* the L2 size; 0 means unknown: 64 MiB is assumed */
    int warmup;      /* untimed calls first, >= 0 */
    int repeats;     /* timed calls, in [1, FX_TIME_MAX_REPEATS] */
    int spin_us;     /* in [0, FX_MAX_SPIN_US] */
} fx_time_config;
typedef struct fx_timing {
    double median_ms, min_ms, max_ms; /* of the timed calls */
    int repeats;
    size_t flush_bytes; /* the method, for fx_timing_describe */
    int spin_us;
} fx_timing;

/* Runs cfg->warmup calls of fn(ctx), then cfg->repeats timed ones (above) on cfg->stream.
 * Returns the first CUDA error (fn's included), or cudaErrorInvalidValue, named on
 * stderr, when repeats or spin_us is outside its range. */
cudaError_t fx_time(fx_launch_fn fn, void *ctx, const fx_time_config *cfg, fx_timing *out);

/* One line naming the method of t, as the program prints it beside its timings:
 * "median of 10 calls, CUDA events; untimed before each: L2 flush 100 MiB, spin 50 us"
 * ("no spin (--spin-us 0)" without the spin). */
void fx_timing_describe(const fx_timing *t, char *buf, size_t len);

/* Prints "<prefix>file:line: what: cudaGetErrorString(err) (name)" to stderr (fx_error)
 * when err != cudaSuccess, and returns err. */
cudaError_t fx_cuda_report(cudaError_t err, const char *what, const char *file, int line);
#define FX_CUDA(call) fx_cuda_report((call), #call, __FILE__, __LINE__)

#ifdef __cplusplus
}
#endif
#endif
