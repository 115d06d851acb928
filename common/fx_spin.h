/*
 * fx_spin.h — a device-side wait of a given time, for fx_time (fx_gpu.h).
 */
#ifndef FX_SPIN_H
#define FX_SPIN_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues on `stream` one kernel of one thread that returns after `ns` nanoseconds,
 * measured on the GPU's %globaltimer (not in SM cycles, so the wait does not depend on
 * the SM clock). Returns the launch error. */
cudaError_t fx_spin(unsigned long long ns, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
