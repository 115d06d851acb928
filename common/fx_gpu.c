/*
 * fx_gpu.c — the device: finding it, exit code 77, the SM clock, event timing.
 *
 * Host C11 over the CUDA runtime API (cudart linked statically). Nothing here links
 * libcuda or libnvidia-ml: a program must start on a machine without a driver and
 * exit 77 there (DESIGN.md, "Driver API without libcuda at link time").
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_gpu.h"
#include "fx_msg.h"
#include "fx_spin.h"

#ifndef FX_PORTABLE_ARCHS_TEXT
#define FX_PORTABLE_ARCHS_TEXT "unknown"
#endif

cudaError_t fx_cuda_report(cudaError_t err, const char *what, const char *file, int line)
{
    if (err != cudaSuccess)
        fx_error("%s:%d: %s: %s (%s)", file, line, what, cudaGetErrorString(err),
                 cudaGetErrorName(err));
    return err;
}

int fx_exit_code_no_gpu(void)
{
    const char *req = getenv("FX_REQUIRE_GPU");
    return (req && strcmp(req, "0") != 0 && req[0] != '\0') ? FX_EXIT_FAIL : FX_EXIT_NO_GPU;
}

/* 0 when there is a device to use, else FX_EXIT_NO_GPU or FX_EXIT_FAIL with the reason. */
static int device_count_check(char *why, size_t why_len)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaErrorInsufficientDriver) {
        /* The same error means "no driver at all" and "a driver too old": tell which. */
        int driver = 0, runtime = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        if (driver == 0)
            snprintf(why, why_len, "no usable GPU: no NVIDIA driver is installed");
        else
            snprintf(why, why_len,
                     "no usable GPU: the driver supports CUDA %d.%d, this build needs %d.%d",
                     driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
        return FX_EXIT_NO_GPU;
    }
    if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
        snprintf(why, why_len, "no usable GPU: no CUDA device");
        return FX_EXIT_NO_GPU;
    }
    if (err != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
        return FX_EXIT_FAIL;
    }
    return 0;
}

/* Checks that stage s can run on device `ordinal`, which is the current device. */
static int device_check(const fx_stage *s, int ordinal, const struct cudaDeviceProp *prop,
                        fx_device_info *info, char *why, size_t why_len)
{
    info->ordinal = ordinal;
    snprintf(info->name, sizeof info->name, "%s", prop->name);
    info->sm_count = prop->multiProcessorCount;
    info->cc_major = prop->major;
    info->cc_minor = prop->minor;
    info->l2_bytes = (size_t)prop->l2CacheSize;
    info->total_mem = prop->totalGlobalMem;

    int cc = 10 * prop->major + prop->minor;
    if (cc < s->caps.min_sm) {
        snprintf(why, why_len, "%s is sm_%d; stage %s needs sm_%d or newer", prop->name, cc, s->id,
                 s->caps.min_sm);
        return FX_EXIT_NO_GPU;
    }
    /* sm_90a code runs on compute capability 9.0 only (PTX ISA, "Target ISA notes"). */
    if (s->caps.sm90a_only && cc != 90) {
        snprintf(why, why_len, "%s is sm_%d; stage %s is built for sm_90a (Hopper) only",
                 prop->name, cc, s->id);
        return FX_EXIT_NO_GPU;
    }
    /* The portable stages and the timing spin are built for FX_CUDA_ARCHS (on a machine
     * without a GPU, sm_90 alone): a GPU outside them gets no kernel image. */
    cudaError_t err = fx_spin_probe();
    if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
        (void)cudaGetLastError(); /* leave no error behind */
        snprintf(why, why_len,
                 "%s is sm_%d, and this build's portable code is for sm %s only (FX_CUDA_ARCHS): "
                 "rebuild on this machine (FX_CUDA_ARCHS=auto) or with FX_CUDA_ARCHS=all",
                 prop->name, cc, FX_PORTABLE_ARCHS_TEXT);
        return FX_EXIT_NO_GPU;
    }
    if (err != cudaSuccess) {
        snprintf(why, why_len, "device %d: %s", ordinal, cudaGetErrorString(err));
        return FX_EXIT_FAIL;
    }
    return 0;
}

int fx_device_open(const fx_stage *s, fx_device_info *info, char *why, size_t why_len)
{
    memset(info, 0, sizeof *info);
    int rc = device_count_check(why, why_len);
    if (rc != 0)
        return rc;
    struct cudaDeviceProp prop;
    cudaError_t err;
    if ((err = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess ||
        (err = cudaSetDevice(0)) != cudaSuccess) {
        snprintf(why, why_len, "device 0: %s", cudaGetErrorString(err));
        return FX_EXIT_FAIL;
    }
    return device_check(s, 0, &prop, info, why, why_len);
}

int fx_device_check_current(const fx_stage *s, fx_device_info *info, char *why, size_t why_len)
{
    memset(info, 0, sizeof *info);
    int rc = device_count_check(why, why_len);
    if (rc != 0)
        return rc;
    int ordinal = 0;
    struct cudaDeviceProp prop;
    cudaError_t err;
    if ((err = cudaGetDevice(&ordinal)) != cudaSuccess ||
        (err = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess) {
        snprintf(why, why_len, "device %d: %s", ordinal, cudaGetErrorString(err));
        return FX_EXIT_FAIL;
    }
    return device_check(s, ordinal, &prop, info, why, why_len);
}

/* NVML, reached through dlopen so that the program does not need libnvidia-ml to
 * start. Only the four entry points used are declared, with NVML's C ABI. */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_shutdown_fn)(void);
typedef int (*nvml_handle_by_pci_fn)(const char *, void **);
typedef int (*nvml_clock_fn)(void *, int, unsigned *);
enum { NVML_SUCCESS = 0, NVML_CLOCK_SM = 1 };

int fx_sm_clock_mhz(int ordinal)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 0;
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_shutdown_fn shutdown = (nvml_shutdown_fn)dlsym(lib, "nvmlShutdown");
    nvml_handle_by_pci_fn by_pci =
        (nvml_handle_by_pci_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_clock_fn clock = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo");
    unsigned mhz = 0;
    char bus[64];
    /* NVML numbers devices by PCI order, CUDA by speed: match them by bus id. */
    if (init && shutdown && by_pci && clock &&
        cudaDeviceGetPCIBusId(bus, (int)sizeof bus, ordinal) == cudaSuccess &&
        init() == NVML_SUCCESS) {
        void *dev = NULL;
        if (by_pci(bus, &dev) != NVML_SUCCESS || clock(dev, NVML_CLOCK_SM, &mhz) != NVML_SUCCESS)
            mhz = 0;
        shutdown();
    }
    dlclose(lib);
    return (int)mhz;
}

/* The L2 size assumed when the device reports none: above the 50 MiB of an H100/H200. */
#define FX_TIME_L2_FALLBACK_BYTES ((size_t)64 << 20)

/* Median of x[0..n), 1 <= n <= FX_TIME_MAX_REPEATS, and its extremes: insertion sort
 * of a copy (n is small). */
static double median(const float *x, int n, double *lo, double *hi)
{
    float tmp[FX_TIME_MAX_REPEATS];
    memcpy(tmp, x, (size_t)n * sizeof *tmp);
    for (int i = 1; i < n; ++i)
        for (int j = i; j > 0 && tmp[j - 1] > tmp[j]; --j) {
            float t = tmp[j];
            tmp[j] = tmp[j - 1];
            tmp[j - 1] = t;
        }
    *lo = tmp[0];
    *hi = tmp[n - 1];
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

cudaError_t fx_time(fx_launch_fn fn, void *ctx, const fx_time_config *cfg, fx_timing *out)
{
    float ms[FX_TIME_MAX_REPEATS];
    const int repeats = cfg->repeats, spin_us = cfg->spin_us;
    const cudaStream_t stream = cfg->stream;
    memset(out, 0, sizeof *out);
    if (repeats < 1 || repeats > FX_TIME_MAX_REPEATS) {
        fx_error("fx_time: %d timed calls is outside [1, %d]", repeats, FX_TIME_MAX_REPEATS);
        return cudaErrorInvalidValue;
    }
    if (spin_us < 0 || spin_us > FX_MAX_SPIN_US) {
        fx_error("fx_time: a spin of %d us is outside [0, %d]", spin_us, FX_MAX_SPIN_US);
        return cudaErrorInvalidValue;
    }

    /* Writing 2× the L2 evicts the previous call's K, V and O from it, so every timed
     * call reads its inputs from HBM as a first call in a real model would. */
    size_t flush_bytes = 2 * (cfg->l2_bytes ? cfg->l2_bytes : FX_TIME_L2_FALLBACK_BYTES);
    void *flush = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    cudaError_t err;
    if ((err = FX_CUDA(cudaMalloc(&flush, flush_bytes))) != cudaSuccess)
        return err;
    if ((err = FX_CUDA(cudaEventCreate(&start))) != cudaSuccess ||
        (err = FX_CUDA(cudaEventCreate(&stop))) != cudaSuccess)
        goto done;
    for (int i = 0; i < cfg->warmup; ++i)
        if ((err = fn(ctx)) != cudaSuccess)
            goto done;
    for (int r = 0; r < repeats; ++r) {
        /* The spin is enqueued right after the flush, so the GPU is busy for the flush and
         * the spin while the host records the start event and enqueues fn. */
        if ((err = cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream)) != cudaSuccess ||
            (spin_us > 0 &&
             (err = fx_spin(1000ull * (unsigned long long)spin_us, stream)) != cudaSuccess) ||
            (err = cudaEventRecord(start, stream)) != cudaSuccess ||
            (err = fn(ctx)) != cudaSuccess ||
            (err = cudaEventRecord(stop, stream)) != cudaSuccess ||
            (err = cudaEventSynchronize(stop)) != cudaSuccess ||
            (err = cudaEventElapsedTime(&ms[r], start, stop)) != cudaSuccess)
            goto done;
    }
    out->repeats = repeats;
    out->flush_bytes = flush_bytes;
    out->spin_us = spin_us;
    out->median_ms = median(ms, repeats, &out->min_ms, &out->max_ms);
done:
    if (start)
        cudaEventDestroy(start);
    if (stop)
        cudaEventDestroy(stop);
    cudaFree(flush);
    return err;
}

void fx_timing_describe(const fx_timing *t, char *buf, size_t len)
{
    char spin[64];
    if (t->spin_us > 0)
        snprintf(spin, sizeof spin, "spin %d us", t->spin_us);
    else
        snprintf(spin, sizeof spin, "no spin (--spin-us 0)");
    snprintf(buf, len,
             "median of %d calls, CUDA events; untimed before each: L2 flush %.0f MiB, %s",
             t->repeats, (double)t->flush_bytes / (1 << 20), spin);
}
