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

/* cudaSuccess when this GPU can run the spin kernel, which is built for the portable
 * stages' architectures (FX_PORTABLE_CUDA_ARCHS, common/CMakeLists.txt): a GPU it cannot
 * run cannot run stages 01-03 either (cudaErrorNoKernelImageForDevice or
 * cudaErrorInvalidDeviceFunction). Launches nothing. */
cudaError_t fx_spin_probe(void);

#ifdef __cplusplus
}
#endif
#endif
