/*
 * hopper.cuh — thin inline-PTX wrappers for the Hopper stages: mbarriers and TMA (stage 04),
 * wgmma (stage 05), setmaxnreg and elect (stage 06), named barriers (stage 07), the e4m3
 * conversion and the byte permute (stage 10). A wrapper
 * tagged "no stage yet" is compiled only by tests/ptx/hopper_wrappers.cu.
 *
 * Each wrapper is one PTX instruction (a predicate operand may need one setp/selp beside
 * it); its comment names the PTX ISA section that defines it
 * (https://docs.nvidia.com/cuda/parallel-thread-execution/, section numbers of PTX ISA 9.0),
 * the stage that introduces it and the units of its operands. Shared-memory operands are
 * 32-bit shared-window addresses (fx_smem_addr, from mma_sm80.cuh), as in mma_sm80.cuh.
 *
 * Architectures:
 *   - Everything here needs sm_90 or later: a device pass for an older architecture stops
 *     with #error below (the portable stages 01-03 never include this file).
 *   - wgmma and setmaxnreg exist only on the "architecture-specific" target sm_90a
 *     (nvcc -gencode=arch=compute_90a,code=sm_90a, which defines __CUDA_ARCH_FEAT_SM90_ALL).
 *     In a device pass for plain sm_90 those wrappers are declared deleted, so a call to one
 *     fails to compile at the call with a pointer to the reason written beside them, instead
 *     of failing later in ptxas ("not supported on .target sm_90").
 *   - The host pass (no __CUDA_ARCH__) sees every declaration, so kernels parse there.
 *
 * Debug builds (FX_DEBUG_HANGS defined; CMAKE_BUILD_TYPE=Debug defines it for fx_common and
 * every target that links it): every fx_mbarrier_wait is bounded by FX_HANG_BUDGET_CYCLES
 * and then prints the barrier, the phase it waited for and the block, and traps (DESIGN.md,
 * "Hangs": a phase bug must cost seconds, not a lease).
 */
#ifndef FX_PTX_HOPPER_CUH
#define FX_PTX_HOPPER_CUH

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "hopper.cuh needs sm_90 or later: build with -gencode=arch=compute_90a,code=sm_90a"
#endif

#include <stdint.h>
#include <stdio.h>

#include <cuda.h> /* CUtensorMap (a type only: nothing here calls the driver) */

#include "mma_sm80.cuh" /* fx_smem_addr */

/* True in every pass where the sm_90a-only instructions (wgmma, setmaxnreg) may be used:
 * the host pass, and a device pass for sm_90a. */
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FX_PTX_HAS_SM90A 1
#else
#define FX_PTX_HAS_SM90A 0
#endif

/* =================================================================================
 * Stage 04 — mbarrier: a shared-memory barrier with a phase and a transaction count
 * PTX ISA §9.7.13.15 "Parallel Synchronization and Communication Instructions: mbarrier".
 *
 * An mbarrier is a 64-bit object in shared memory (8-byte aligned). Its current phase
 * completes when the pending arrival count reaches 0 AND the pending transaction count
 * (tx-count, bytes announced by expect_tx minus bytes delivered by TMA's complete_tx) is 0;
 * the phase then flips and the counts reload. Waiters name the phase by its parity (0, 1):
 * a loop that reuses a barrier flips its expected parity once per use.
 * ============================================================================== */

/* mbarrier.init.shared::cta.b64 [bar], count;   (§9.7.13.15.9; stage 04)
 * count: number of arrivals that complete a phase, in [1, 2^20 - 1]. Phase 0, tx-count 0.
 * One thread initialises; publish it with fx_fence_mbarrier_init() and a CTA (or cluster)
 * barrier before any other thread or a TMA uses it. */
static __device__ __forceinline__ void fx_mbarrier_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* fence.mbarrier_init.release.cluster;   (§9.7.13.4 "membar / fence"; stage 04)
 * Orders this thread's earlier mbarrier.init before its later release operations at
 * cluster scope, so a TMA completing bytes on the barrier, or another CTA of the cluster
 * arriving on it, sees it initialised. The ISA defines this fence only with .release.cluster
 * (".op_restrict = { .mbarrier_init }"); there is no .cta form. A launch without clusters
 * is a cluster of one CTA, so the same fence serves; the bar.sync (__syncthreads) after it
 * is what publishes the initialised barrier to the other threads of the CTA. */
static __device__ __forceinline__ void fx_fence_mbarrier_init(void)
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes;   (§9.7.13.15.13; stage 04)
 * expect-tx(bytes) then one arrival: the producer announces how many bytes its TMA loads
 * will deliver to this phase (the sum of the boxes' sizes), then arrives. bytes < 2^20. */
static __device__ __forceinline__ void fx_mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}

/* mbarrier.arrive.shared::cta.b64 _, [bar];   (§9.7.13.15.13; stage 04)
 * One arrival with release semantics (the default .release.cta): a consumer tells the
 * producer that it is done reading a buffer (the "empty" barrier of a pipeline stage). */
static __device__ __forceinline__ void fx_mbarrier_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity;   (§9.7.13.15.16; stage 04)
 * True when the phase with this parity (0 or 1) has completed. It may suspend the thread
 * for a system-dependent time before answering false, so a loop around it does not spin
 * hot. With its default .acquire semantics a true answer makes the completed phase's
 * data visible: the TMA bytes (complete_tx) and the arrivals' earlier writes. */
static __device__ __forceinline__ bool fx_mbarrier_try_wait_parity(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    asm volatile("{\n"
                 "  .reg .pred p;\n"
                 "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "  selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return done != 0;
}

/* The debug budget of one wait, in SM clock cycles (clock64): 2^32 is about 2.2 s at
 * the H200's 1.98 GHz boost clock. A correct pipeline waits microseconds. */
#ifndef FX_HANG_BUDGET_CYCLES
#define FX_HANG_BUDGET_CYCLES (1ll << 32)
#endif

/* Waits until the phase with this parity (0 or 1) of the barrier at `bar` (a shared
 * address) has completed. Release builds: a plain try_wait loop; `name` and `index` are
 * unused. Debug builds (FX_DEBUG_HANGS): after FX_HANG_BUDGET_CYCLES the thread prints
 * the barrier — by `name`[`index`] when a name is given (e.g. "kv_full", stage 1), always
 * by its shared address —, the parity it waited for, its block and thread, and traps; the
 * launch then fails with cudaErrorLaunchFailure instead of hanging (the message reaches
 * the host the way a device-side assert's does). */
static __device__ __forceinline__ void fx_mbarrier_wait_named(uint32_t bar, uint32_t parity,
                                                              const char *name, int index)
{
#ifdef FX_DEBUG_HANGS
    const long long start = clock64();
    while (!fx_mbarrier_try_wait_parity(bar, parity)) {
        if (clock64() - start > FX_HANG_BUDGET_CYCLES) {
            printf("fx_mbarrier_wait: hang: mbarrier %s[%d] at smem 0x%x never completed the "
                   "phase with parity %u; block (%d,%d,%d) thread %d\n",
                   name ? name : "(unnamed)", index, bar, parity, (int)blockIdx.x, (int)blockIdx.y,
                   (int)blockIdx.z, (int)threadIdx.x);
            __trap();
        }
    }
#else
    (void)name;
    (void)index;
    while (!fx_mbarrier_try_wait_parity(bar, parity)) {
    }
#endif
}

/* The same without a name: the debug message gives the barrier's shared address only. */
static __device__ __forceinline__ void fx_mbarrier_wait(uint32_t bar, uint32_t parity)
{
    fx_mbarrier_wait_named(bar, parity, NULL, 0);
}

/* =================================================================================
 * Stage 04 — proxy fence: generic writes before async-proxy reads
 * PTX ISA §9.7.13.4 "membar / fence" (fence.proxy), §9.7.9.25.2 and §9.7.15.4 "Async Proxy".
 * ============================================================================== */

/* fence.proxy.async.shared::cta;   (stages 04 and 08: the O epilogue)
 * TMA (cp.async.bulk) and wgmma read shared memory through the async proxy. Ordinary
 * st.shared writes (the generic proxy) are not ordered with those reads unless this
 * fence sits between them: after writing an smem tile that a TMA store or a wgmma will
 * read (here: O, staged in smem for the TMA store), each writing thread fences, then the
 * threads synchronise, then one thread issues the async operation. */
static __device__ __forceinline__ void fx_fence_proxy_async_smem(void)
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* =================================================================================
 * Stage 04 — TMA: tiled tensor copies between global and shared memory
 * PTX ISA §9.7.9.25.5.2 "Data Movement and Conversion Instructions: cp.async.bulk.tensor";
 * the tensor map: §5.5.8 "Tensor-map" (encoded on the host by common/fx_tma.c).
 *
 * `map` is the generic address of the CUtensorMap, which must live in the kernel's
 * parameter space: pass it as `const __grid_constant__ CUtensorMap map` and hand &map
 * here (a copy in registers or local memory is not a valid tensor map). Coordinates are
 * element indices (s32), innermost dimension first: {c0 = column, c1 = row, ...} in the
 * order of the map's global dimensions; a box that reaches past the tensor's edge is
 * filled with zeros (the map's OOB fill), and still delivers its full size in bytes.
 * dst is a shared address aligned to 128 bytes (1024 for a 128B-swizzled box that wgmma
 * reads, so the swizzle pattern starts at an atom: fx_wgmma_desc_* assume it).
 * ============================================================================== */

/* cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
 *     [dst], [map, {c0, c1}], [bar];   (no stage yet: the stages use the 4D form)
 * One box from global to this CTA's shared memory; on arrival the bytes are counted
 * against bar's tx-count (complete_tx), which the producer announced with expect_tx. */
static __device__ __forceinline__ void fx_tma_load_2d(uint32_t dst, const CUtensorMap *map,
                                                      uint32_t bar, int32_t c0, int32_t c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
}

/* The same, 3D: {c0, c1, c2}.   (no stage yet) */
static __device__ __forceinline__ void fx_tma_load_3d(uint32_t dst, const CUtensorMap *map,
                                                      uint32_t bar, int32_t c0, int32_t c1,
                                                      int32_t c2)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

/* The same, 4D: {c0, c1, c2, c3}. Q, K, V as [batch, seqlen, heads, head_dim] are 4D maps
 * with c0 = head_dim column, c1 = head, c2 = sequence row, c3 = batch (fx_tma.h). (stage 04) */
static __device__ __forceinline__ void fx_tma_load_4d(uint32_t dst, const CUtensorMap *map,
                                                      uint32_t bar, int32_t c0, int32_t c1,
                                                      int32_t c2, int32_t c3)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

/* cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster
 *     [dst], [map, {c0, c1, c2, c3}], [bar], cta_mask;   (no stage yet: stage 04's cluster
 *     exercise)
 * One global read, delivered to the same smem offset `dst` in every CTA of the cluster
 * whose bit (%cluster_ctarank) is set in the 16-bit cta_mask, and complete_tx signalled on
 * the barrier at the same offset `bar` in each of them. The kernel must be launched with a
 * cluster; each receiving CTA's barrier must expect the bytes. Other ranks: same form. */
static __device__ __forceinline__ void fx_tma_load_4d_multicast(uint32_t dst,
                                                                const CUtensorMap *map,
                                                                uint32_t bar, uint16_t cta_mask,
                                                                int32_t c0, int32_t c1, int32_t c2,
                                                                int32_t c3)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(bar), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

/* cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [map, {c0, c1}], [src];
 *     (no stage yet: the stages use the 4D form)
 * One box from this CTA's shared memory to global (the O epilogue). The smem tile was
 * written by ordinary stores: fx_fence_proxy_async_smem() by every writer and a barrier
 * must come first. Elements of the box outside the tensor are not written. Completion is
 * tracked by bulk async-groups: fx_tma_store_commit(), then fx_tma_store_wait_read<N>()
 * before the smem is overwritten, in the issuing thread. */
static __device__ __forceinline__ void fx_tma_store_2d(const CUtensorMap *map, uint32_t src,
                                                       int32_t c0, int32_t c1)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
            (uint64_t)map),
        "r"(src), "r"(c0), "r"(c1)
        : "memory");
}

/* The same, 3D.   (no stage yet) */
static __device__ __forceinline__ void fx_tma_store_3d(const CUtensorMap *map, uint32_t src,
                                                       int32_t c0, int32_t c1, int32_t c2)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group"
                 " [%0, {%2, %3, %4}], [%1];\n" ::"l"((uint64_t)map),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

/* The same, 4D (O as [batch, seqlen_q, heads_q, head_dim]).   (stages 04 and 08) */
static __device__ __forceinline__ void fx_tma_store_4d(const CUtensorMap *map, uint32_t src,
                                                       int32_t c0, int32_t c1, int32_t c2,
                                                       int32_t c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"
                 " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"((uint64_t)map),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

/* cp.async.bulk.commit_group;   (§9.7.9.25.6.1; stage 04)
 * Closes this thread's bulk async-group: the TMA stores issued since the last commit. */
static __device__ __forceinline__ void fx_tma_store_commit(void)
{
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

/* cp.async.bulk.wait_group.read N;   (§9.7.9.25.6.2; stage 04)
 * Waits until at most N of this thread's bulk groups still READ their source: after it the
 * smem they came from may be overwritten (the writes to global may still be in flight). */
template <int N>
static __device__ __forceinline__ void fx_tma_store_wait_read(void)
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

/* cp.async.bulk.wait_group N;   (§9.7.9.25.6.2; no stage yet)
 * Waits until at most N of this thread's bulk groups are pending at all, writes to global
 * included and visible to this thread. */
template <int N>
static __device__ __forceinline__ void fx_tma_store_wait(void)
{
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

/* =================================================================================
 * Stages 06 and 07 — leader election (06) and named barriers (07)
 * PTX ISA §9.7.13.1 "bar, barrier" and §9.7.13.14 "elect.sync".
 *
 * A CTA has 16 hardware barriers, ids 0..15. Id 0 is the one __syncthreads() uses
 * (bar.sync 0 over all threads): never pass 0 with a partial thread count. The stages
 * number their named barriers from 1. num_threads counts threads (not warps) and must be a
 * multiple of 32; every participating warp must use the same id and count.
 * ============================================================================== */

/* bar.sync id, num_threads;   (§9.7.13.1; stage 07)
 * Arrive and wait until num_threads threads have arrived at barrier `id`. Memory writes
 * before it are visible to the participants after it. */
static __device__ __forceinline__ void fx_named_barrier_sync(uint32_t id, uint32_t num_threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(num_threads) : "memory");
}

/* bar.red.or.pred any, id, num_threads, pred;   (§9.7.13.1; the epilogue of stage 05)
 * fx_named_barrier_sync that also returns, in every thread that meets there, whether `pred`
 * was true in any of them: a vote of the whole group at the cost of the barrier it meets at
 * anyway (the epilogue's, for the exact path: common/fx_exact_rows.cuh). */
static __device__ __forceinline__ bool fx_named_barrier_sync_or(uint32_t id, uint32_t num_threads,
                                                                bool pred)
{
    uint32_t any;
    asm volatile("{\n"
                 "  .reg .pred p, q;\n"
                 "  setp.ne.u32 p, %1, 0;\n"
                 "  bar.red.or.pred q, %2, %3, p;\n"
                 "  selp.u32 %0, 1, 0, q;\n"
                 "}\n"
                 : "=r"(any)
                 : "r"((uint32_t)pred), "r"(id), "r"(num_threads)
                 : "memory");
    return any != 0;
}

/* bar.arrive id, num_threads;   (§9.7.13.1; the pingpong of stage 07)
 * Arrive without waiting: the signalling side of a producer/consumer handshake whose other
 * side calls fx_named_barrier_sync with the same id and count (the count includes both). */
static __device__ __forceinline__ void fx_named_barrier_arrive(uint32_t id, uint32_t num_threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(num_threads) : "memory");
}

/* elect.sync _|p, 0xffffffff;   (§9.7.13.14; stage 06)
 * True in exactly one lane of the (converged, full) warp, the same lane every time: the
 * lane that issues TMA for the producer warp, without assuming which lane it is. All 32
 * lanes must execute it. */
static __device__ __forceinline__ bool fx_elect_one(void)
{
    uint32_t elected;
    asm volatile("{\n"
                 "  .reg .pred p;\n"
                 "  elect.sync _|p, 0xffffffff;\n"
                 "  selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(elected));
    return elected != 0;
}

/* =================================================================================
 * Stage 05 — wgmma: warpgroup matrix multiply-accumulate, operands from shared memory
 * PTX ISA §9.7.15 "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions":
 * §9.7.15.5.2 wgmma.mma_async; §9.7.15.7 wgmma.fence / commit_group / wait_group;
 * fragments in §9.7.15.5.1.1; descriptors in §9.7.15.5.1.2 (common/ptx/wgmma_desc.h).
 *
 * A warpgroup is 4 consecutive warps (128 threads, the first warp's index a multiple of 4).
 * Every wgmma instruction here must be executed by all 128 threads with the same
 * descriptors. The pattern is:
 *     fx_wgmma_fence();                  registers/smem written before are ready
 *     fx_wgmma_m64n64k16_ss_bf16(...);   one or more, asynchronous
 *     fx_wgmma_commit();                 they form one group
 *     fx_wgmma_wait<0>();                the group is done; the accumulators may be read
 * sm_90a only (see the top of this file).
 * ============================================================================== */
#if FX_PTX_HAS_SM90A

/* wgmma.fence.sync.aligned;   (§9.7.15.7.1; stage 05)
 * Orders this warpgroup's earlier accesses to the accumulator and A-fragment registers
 * before the wgmma.mma_async that follows. Required before the first wgmma, and after
 * other instructions touched those registers (the softmax rescaling O, P written into
 * the A fragments); back-to-back wgmma of the same shape on one accumulator need none.
 * It does not order shared memory: operands written by ordinary stores need
 * fx_fence_proxy_async_smem() (the async proxy fence the ISA asks for) as well. */
static __device__ __forceinline__ void fx_wgmma_fence(void)
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

/* wgmma.commit_group.sync.aligned;   (§9.7.15.7.2; stage 05)
 * Closes the group of this warpgroup's wgmma.mma_async issued since the last commit. */
static __device__ __forceinline__ void fx_wgmma_commit(void)
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* wgmma.wait_group.sync.aligned N;   (§9.7.15.7.3; stage 05)
 * Waits until at most N committed groups are pending: N = 0 waits for all, N = 1 lets the
 * last group (the next S = QKᵀ, say) run on while the previous one's results are used. */
template <int N>
static __device__ __forceinline__ void fx_wgmma_wait(void)
{
    static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes an immediate N in 0..7");
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Not an instruction: tells the compiler that the accumulator registers may change behind
 * its back, so it neither reads them before fx_wgmma_wait() nor moves their writes past
 * fx_wgmma_fence(). Call it on the accumulators right after waiting (every stage does), and
 * right after issuing where other code runs between the issue and the wait (stage 08's
 * softmax under the PV GEMM). */
template <int N>
static __device__ __forceinline__ void fx_wgmma_fence_operand(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* The wgmma.mma_async wrappers themselves are generated (common/ptx/wgmma_ops.cuh, by
 * scripts/gen_wgmma_ops.sh: N/2 accumulator operands are too many to type by hand), one per
 * N of the script's list, form and dtype:
 *
 * fx_wgmma_m64n<N>k16_ss_<bf16|fp16><TransA, TransB>(d, desc_a, desc_b, accumulate)
 *     wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 d, a-desc, b-desc, scale-d, 1, 1,
 *     trans-a, trans-b;   (§9.7.15.5.2; stage 05)
 *   "SS": D(64×N, fp32) = A(64×16) · B(16×N) + (accumulate ? D : 0), A and B in shared
 *   memory described by 64-bit matrix descriptors (wgmma_desc.h).
 *   d:          the N/2 fp32 accumulators of this thread; thread t of the warpgroup,
 *               warp w = t/32, lane l, index i = v0 + 2·v1 + 4·v2 holds
 *               D[16w + l/4 + 8·v1][2·(l%4) + v0 + 8·v2] (§9.7.15.5.1.1, "Accumulator D"):
 *               per warp, the n8 blocks of an mma.sync m16n8k16 accumulator side by side.
 *   accumulate: the scale-d predicate; false overwrites D (the first k-slice of S = QKᵀ).
 *   TransA/B:   0 = K-major (K contiguous: Q, K for S = QKᵀ), 1 = M-/N-major (V for O = PV).
 *   The scale-a/scale-b immediates are fixed at 1 (no negation).
 *
 * fx_wgmma_m64n<N>k16_rs_<bf16|fp16><TransB>(d, a, desc_b, accumulate)
 *     the same with d, {a0, a1, a2, a3}, b-desc, scale-d, 1, 1, trans-b;   (stage 05)
 *   "RS": A comes from registers — P for O = PV, never written to shared memory. Each
 *   thread holds four b32 registers of two elements each (low half = lower column), laid
 *   out like mma.sync m16n8k16's A fragment per warp: warp w owns rows 16w..16w+15; with
 *   g = lane/4, t = lane%4: a0 = A[16w+g][2t, 2t+1], a1 = A[16w+g+8][2t, 2t+1],
 *   a2 = A[16w+g][2t+8, 2t+9], a3 = A[16w+g+8][2t+8, 2t+9] (§9.7.15.5.1.1, Figure
 *   "WGMMA .m64nNk16 register fragment layout for matrix A"). There is no trans-a.
 *
 * The accumulator count is what the register budget pays: N = 256 is 128 registers. */

#endif /* FX_PTX_HAS_SM90A (fence, commit, wait) */

#include "wgmma_ops.cuh"

#if FX_PTX_HAS_SM90A

/* =================================================================================
 * Stage 06 — setmaxnreg: move registers between the warpgroups of a CTA
 * PTX ISA §9.7.19.5 "Miscellaneous Instructions: setmaxnreg" (sm_90a).
 *
 * The producer warpgroup, which only issues TMA, gives registers back (dec to 24 or 32);
 * the consumer warpgroups, which hold the accumulators, take them (inc to 240 or 160).
 * All 4 warps of a warpgroup execute the same instruction. ptxas honours it only when the
 * kernel has a register cap at entry (__launch_bounds__(threads, 1) or -maxrregcount);
 * otherwise it ignores it with warning C7508, which tests/ptx/check_ptxas.sh fails on.
 * ============================================================================== */

/* setmaxnreg.inc.sync.aligned.u32 N;   (stage 06)
 * Raise this warp's per-thread register maximum to N (blocks until the CTA's pool has them;
 * the new registers start undefined). N: multiple of 8 in 24..256, >= the current maximum. */
template <int N>
static __device__ __forceinline__ void fx_setmaxnreg_inc(void)
{
    static_assert(N % 8 == 0 && N >= 24 && N <= 256,
                  "setmaxnreg takes a register count that is a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

/* setmaxnreg.dec.sync.aligned.u32 N;   (stage 06)
 * Lower this warp's per-thread register maximum to N, returning the rest to the CTA's
 * pool. N: multiple of 8 in 24..256, <= the current maximum. */
template <int N>
static __device__ __forceinline__ void fx_setmaxnreg_dec(void)
{
    static_assert(N % 8 == 0 && N >= 24 && N <= 256,
                  "setmaxnreg takes a register count that is a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

#else /* a device pass for sm_90 without the 'a' features */

/* wgmma and setmaxnreg exist only on sm_90a: compile this translation unit with
 * -gencode=arch=compute_90a,code=sm_90a (which defines __CUDA_ARCH_FEAT_SM90_ALL).
 * A call to any of these names lands here, on a deleted declaration. */
static __device__ void fx_wgmma_fence(void) = delete;
static __device__ void fx_wgmma_commit(void) = delete;
template <int N>
static __device__ void fx_wgmma_wait(void) = delete;
template <int N>
static __device__ void fx_wgmma_fence_operand(float (&d)[N]) = delete;
template <int N>
static __device__ void fx_setmaxnreg_inc(void) = delete;
template <int N>
static __device__ void fx_setmaxnreg_dec(void) = delete;

#endif /* FX_PTX_HAS_SM90A */

/* =================================================================================
 * Stage 10 — FP8: P to e4m3 in registers, and bytes moved between registers
 * PTX ISA §9.7.9.21 "cvt" (the .e4m3x2 form, sm_89+) and "prmt" (any sm).
 * ============================================================================== */

/* cvt.rn.satfinite.e4m3x2.f32 d, hi, lo;   (§9.7.9.21; stage 10)
 * Two fp32 rounded to nearest-even e4m3 codes in the low 16 bits of d: `lo` in bits 0-7,
 * `hi` in bits 8-15 (the instruction's first source goes to the upper byte). .satfinite:
 * a magnitude past 448 (infinity too) becomes ±448; NaN becomes 0x7F. common/fx_fp8.h's
 * fx_e4m3_from_float is the same conversion on the host (checked for every fp32 input). */
static __device__ __forceinline__ uint32_t fx_cvt_e4m3x2(float lo, float hi)
{
    uint16_t d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
}

/* Four fp32 as four e4m3 codes in one b32, x0 in the lowest byte: the 8-bit wgmma A
 * fragment holds four consecutive k of one row per register (stage 10). */
static __device__ __forceinline__ uint32_t fx_pack_e4m3x4(float x0, float x1, float x2, float x3)
{
    // The two halves straight into one b32 (mov.b32 d, {lo, hi}): no zero-extension, shift
    // and OR for ptxas to schedule and keep registers for.
    uint32_t d;
    asm("{\n\t.reg .b16 lo, hi;\n\t"
        "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
        "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
        "mov.b32 %0, {lo, hi};\n\t}\n"
        : "=r"(d)
        : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
    return d;
}

/* prmt.b32 d, a, b, selector;   (PTX ISA "Data Movement and Conversion Instructions: prmt";
 * stage 10)
 * Byte permute: the 8 bytes {b, a} are numbered 0-3 (a, low first) and 4-7 (b); nibble i of
 * the selector (its low 3 bits) picks the byte that goes to byte i of d. E.g. 0x5410 is
 * {a.b0, a.b1, b.b0, b.b1}, 0x7632 {a.b2, a.b3, b.b2, b.b3}. */
static __device__ __forceinline__ uint32_t fx_prmt(uint32_t a, uint32_t b, uint32_t selector)
{
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
    return d;
}

/* stmatrix.sync.aligned.m8n8.x4.shared.b16 [addr], {r0, r1, r2, r3};   (PTX ISA §9.7.14.5.16
 * "Warp-level matrix store instruction: stmatrix", sm_90+; stage 10)
 * The inverse of ldmatrix without .trans (mma_sm80.cuh): four 8×8 matrices of b16 to
 * shared memory. Lanes 8i..8i+7 give the addresses of the 8 rows (16 bytes each, 16-byte
 * aligned) of matrix i; lane l's r_i holds matrix i's elements at row l/4, columns 2·(l%4)
 * and 2·(l%4)+1 (the low half first). Stage 10 stores Vᵀ with it after ldmatrix.trans and
 * prmt (fwd.cu, transpose_v). */
static __device__ __forceinline__ void fx_stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1,
                                                      uint32_t r2, uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

#endif
