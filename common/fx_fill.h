/*
 * fx_fill.h — the inputs drawn on the device (fx_draw.h's numbers), for runs that only
 * time the kernels: a problem of the FA3 paper's sweep has 3 × 33.5 M elements, a double
 * log and cos each, which the host drew in 2.5 s on 2 cores (docs/harness.md, "Inputs")
 * and a GPU, whose fp64 units do that work in parallel, draws in far less.
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
