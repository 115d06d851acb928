/*
 * fx_fill.cu — the inputs drawn on the device (fx_fill.h).
 *
 * Compiled with -fmad=false (common/CMakeLists.txt): nvcc would otherwise contract the
 * outlier distribution's x + 10·y into one FMA, rounded once where the host rounds twice.
 */
#include "fx_fill.h"

namespace {

/* One element per thread, grid-stride: any grid covers any n. */
__global__ void fill_bits_kernel(const fx_problem p, fx_tensor_id id, uint16_t *dst, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = fx_draw_to_bits(p.dtype, (float)fx_draw(&p, id, (uint64_t)i));
}

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65535; /* enough to fill every SM many times over */

}  // namespace

extern "C" cudaError_t fx_fill_bits_device(const fx_problem *p, fx_tensor_id id, void *dst,
                                           size_t n, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    size_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks > kMaxBlocks)
        blocks = kMaxBlocks;
    fill_bits_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(*p, id, (uint16_t *)dst, n);
    return cudaGetLastError();
}
