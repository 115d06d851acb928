/*
 * hopper_wrappers.cu — every wrapper of common/ptx/hopper.cuh, used once with plausible
 * operands, so that ptxas assembles them all for sm_90a (the ptx test
 * ptx_hopper_wrappers, tests/CMakeLists.txt; expected instructions in
 * hopper_wrappers.expect). Nothing here is launched: these kernels are compile-time
 * checks of the wrappers' PTX, not examples of a correct pipeline.
 */
#include <cuda.h>

#include "ptx/hopper.cuh"
#include "ptx/wgmma_desc.h"

/* A 64×64 bf16 tile: 64 rows of 128 bytes, one 128B-swizzle slab. */
#define TILE_ROWS 64
#define TILE_COLS 64
#define TILE_BYTES (TILE_ROWS * TILE_COLS * 2)

/* Stage 04: mbarrier + TMA loads (2D, 3D, 4D, and 4D multicast in a cluster). */
__global__ void __launch_bounds__(128, 1)
    tma_load_kernel(const __grid_constant__ CUtensorMap map2d,
                    const __grid_constant__ CUtensorMap map3d,
                    const __grid_constant__ CUtensorMap map4d, int multicast, float *out)
{
    __shared__ alignas(1024) unsigned char tile[4][TILE_BYTES];
    __shared__ alignas(8) uint64_t full;

    const uint32_t bar = fx_smem_addr(&full);
    if (threadIdx.x == 0) {
        fx_mbarrier_init(bar, 1);
        fx_fence_mbarrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        fx_mbarrier_arrive_expect_tx(bar, 4 * TILE_BYTES);
        fx_tma_load_2d(fx_smem_addr(tile[0]), &map2d, bar, 0, (int)blockIdx.x * TILE_ROWS);
        fx_tma_load_3d(fx_smem_addr(tile[1]), &map3d, bar, 0, (int)blockIdx.x * TILE_ROWS, 1);
        fx_tma_load_4d(fx_smem_addr(tile[2]), &map4d, bar, 0, 0, (int)blockIdx.x * TILE_ROWS, 0);
        if (multicast)
            fx_tma_load_4d_multicast(fx_smem_addr(tile[3]), &map4d, bar, (uint16_t)0x3, 64, 0,
                                     (int)blockIdx.x * TILE_ROWS, 0);
        else
            fx_tma_load_4d(fx_smem_addr(tile[3]), &map4d, bar, 64, 0, (int)blockIdx.x * TILE_ROWS,
                           0);
    }
    fx_mbarrier_wait(bar, 0);
    /* A consumer's release of the buffer, then the producer's wait for the next phase. */
    fx_mbarrier_arrive(bar);
    const uint32_t row = threadIdx.x % TILE_ROWS, col = (threadIdx.x / TILE_ROWS) * 16;
    out[blockIdx.x * blockDim.x + threadIdx.x] =
        (float)tile[threadIdx.x % 4][fx_swizzle128_offset(row, col)];
}

/* Stage 04: the epilogue — generic smem writes, proxy fence, TMA stores, bulk groups. */
__global__ void __launch_bounds__(128, 1)
    tma_store_kernel(const __grid_constant__ CUtensorMap map2d,
                     const __grid_constant__ CUtensorMap map3d,
                     const __grid_constant__ CUtensorMap map4d, float value)
{
    __shared__ alignas(1024) float tile[TILE_BYTES / 4];
    for (int i = threadIdx.x; i < TILE_BYTES / 4; i += blockDim.x)
        tile[i] = value * (float)i;
    fx_fence_proxy_async_smem();
    __syncthreads();
    if (threadIdx.x == 0) {
        const uint32_t src = fx_smem_addr(tile);
        fx_tma_store_2d(&map2d, src, 0, (int)blockIdx.x * TILE_ROWS);
        fx_tma_store_3d(&map3d, src, 0, (int)blockIdx.x * TILE_ROWS, 0);
        fx_tma_store_4d(&map4d, src, 0, 0, (int)blockIdx.x * TILE_ROWS, 0);
        fx_tma_store_commit();
        fx_tma_store_wait_read<0>();
        fx_tma_store_wait<0>();
    }
}

/* Stage 05: one warpgroup, SS and RS wgmma in bf16 and fp16, K-major A, K- and MN-major B. */
__global__ void __launch_bounds__(128, 1) wgmma_kernel(const uint32_t *p_fragments, float *out)
{
    __shared__ alignas(1024) unsigned char a_tile[TILE_BYTES];
    __shared__ alignas(1024) unsigned char b_tile[TILE_BYTES];
    for (int i = threadIdx.x; i < TILE_BYTES / 4; i += blockDim.x) {
        reinterpret_cast<uint32_t *>(a_tile)[i] = p_fragments[i];
        reinterpret_cast<uint32_t *>(b_tile)[i] = p_fragments[i] ^ 0x3c003c00u;
    }
    fx_fence_proxy_async_smem();
    __syncthreads();

    const uint64_t desc_a = fx_wgmma_desc_k_sw128(fx_smem_addr(a_tile));
    const uint64_t desc_b = fx_wgmma_desc_k_sw128(fx_smem_addr(b_tile));
    const uint64_t desc_v = fx_wgmma_desc_mn_sw128(fx_smem_addr(b_tile), TILE_BYTES);
    uint32_t a_regs[4];
    for (int i = 0; i < 4; ++i)
        a_regs[i] = p_fragments[threadIdx.x * 4 + i];

    float s[32], o[32];
    for (int i = 0; i < 32; ++i)
        o[i] = 0.0f;
    fx_wgmma_fence_operand(o);
    fx_wgmma_fence();
    /* S = Q·Kᵀ over four k16 slices of a 64-wide K-major tile: +32 bytes per slice. */
    for (int k = 0; k < TILE_COLS / 16; ++k) {
        const uint32_t step = k * FX_WGMMA_K16_STEP_K_MAJOR_BYTES;
        fx_wgmma_m64n64k16_ss_bf16<0, 0>(s, fx_wgmma_desc_advance(desc_a, step),
                                         fx_wgmma_desc_advance(desc_b, step), k > 0);
    }
    fx_wgmma_m64n64k16_ss_fp16<0, 0>(s, desc_a, desc_b, true);
    /* O += P·V with P in registers and V MN-major (trans-b = 1). */
    fx_wgmma_m64n64k16_rs_bf16<1>(o, a_regs, desc_v, true);
    fx_wgmma_m64n64k16_rs_fp16<1>(
        o, a_regs, fx_wgmma_desc_advance(desc_v, FX_WGMMA_K16_STEP_MN_MAJOR_BYTES), true);
    fx_wgmma_commit();
    fx_wgmma_fence_operand(s);
    fx_wgmma_fence_operand(o);
    fx_wgmma_wait<0>();
    fx_wgmma_fence_operand(s);
    fx_wgmma_fence_operand(o);
    float sum = 0.0f;
    for (int i = 0; i < 32; ++i)
        sum += s[i] + o[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

/* Stage 06: a producer warpgroup and two consumer warpgroups trade registers, meet on
 * named barriers; one elected lane of the producer warp does the producer's work. */
#define PRODUCER_THREADS 128
#define CONSUMER_THREADS 256
__global__ void __launch_bounds__(PRODUCER_THREADS + CONSUMER_THREADS, 1)
    warp_specialized_kernel(float *out)
{
    __shared__ float handoff[CONSUMER_THREADS];
    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
        fx_setmaxnreg_dec<24>();
        if (threadIdx.x < 32 && fx_elect_one())
            handoff[0] = 1.0f;
        /* The producer signals "ready" without waiting (id 1: 32 producer + 256 consumers). */
        if (threadIdx.x < 32)
            fx_named_barrier_arrive(1, 32 + CONSUMER_THREADS);
    } else {
        fx_setmaxnreg_inc<240>();
        fx_named_barrier_sync(1, 32 + CONSUMER_THREADS);
        const int t = threadIdx.x - PRODUCER_THREADS;
        handoff[t] += (float)t;
        /* The two consumer warpgroups alone (id 2), voting as they meet (the epilogue's vote
         * for the exact path, stage 05). */
        const bool any_large = fx_named_barrier_sync_or(2, CONSUMER_THREADS, handoff[t] > 100.0f);
        out[blockIdx.x * CONSUMER_THREADS + t] =
            any_large ? 0.0f : handoff[(t + 1) % CONSUMER_THREADS];
    }
}
