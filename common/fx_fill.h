/*
 * fx_fill.h — the inputs drawn on the device (fx_draw.h's numbers), for runs that only
 * time the kernels: a problem of the FA3 paper's sweep has 3 × 33.5 M elements, which the
 * host draws in about 0.5 s on 16 cores (double log and cos per element) and the GPU in
 * well under a millisecond.
 */
#ifndef FX_FILL_H
#define FX_FILL_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "fx_draw.h"
#include "fx_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the dtype bits of tensor `id`'s n elements for problem p (fx_draw, rounded to
 * p->dtype: what fx_fill_bits writes on the host) into the device array dst (n 2-byte
 * elements), on `stream`. Returns the launch error; the kernel's own errors surface at
 * the next synchronisation. */
cudaError_t fx_fill_bits_device(const fx_problem *p, fx_tensor_id id, void *dst, size_t n,
                                cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
