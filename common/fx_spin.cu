/*
 * fx_spin.cu — a device-side wait of a given time (fx_spin.h).
 *
 * fx_time enqueues it between the L2 flush and the start event, so that the GPU is still
 * busy while the host records the start event and enqueues the timed call: the event then
 * fires when the spin ends, not when the host's enqueue ends. The wait is measured in
 * time because the SM clock moves with load and power: a count of clock64() cycles would
 * last a different time at every clock.
 */
#include "fx_spin.h"

/* PTX ISA, "Special registers: %globaltimer": a 64-bit global timer in nanoseconds.
 * volatile, so that every loop turn reads it anew. */
__device__ static unsigned long long globaltimer_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void fx_spin_kernel(unsigned long long ns)
{
    const unsigned long long start = globaltimer_ns();
    while (globaltimer_ns() - start < ns) {
    }
}

extern "C" cudaError_t fx_spin_probe(void)
{
    cudaFuncAttributes attr;
    return cudaFuncGetAttributes(&attr, fx_spin_kernel);
}

extern "C" cudaError_t fx_spin(unsigned long long ns, cudaStream_t stream)
{
    fx_spin_kernel<<<1, 1, 0, stream>>>(ns);
    return cudaGetLastError();
}
