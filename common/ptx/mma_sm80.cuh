/*
 * mma_sm80.cuh — thin inline-PTX wrappers for the Ampere-style tensor-core path:
 * cp.async, ldmatrix, mma.sync m16n8k16, and the two scalar instructions the
 * FlashAttention-2 softmax needs (ex2.approx, cvt to a packed bf16x2/f16x2 pair).
 *
 * Introduced by stage 03 (stages/03_flash2), which runs on sm_80 and later. Stage 04
 * keeps its ldmatrix and mma.sync (only its loads move to TMA); stages 05-08 use
 * fx_smem_addr, fx_ex2 and the packing (hopper.cuh includes this file). Each wrapper is one
 * instruction; its comment names the section of the PTX ISA
 * (https://docs.nvidia.com/cuda/parallel-thread-execution/) that defines it.
 *
 * Shared-memory operands are 32-bit shared-window addresses (what
 * __cvta_generic_to_shared returns), so address arithmetic stays in 32-bit registers.
 */
#ifndef FX_PTX_MMA_SM80_CUH
#define FX_PTX_MMA_SM80_CUH

#include <stdint.h>

/* ---------------------------------------------------------------------------------
 * Addresses
 * ------------------------------------------------------------------------------ */

/* A generic pointer into shared memory as a .shared-window address (PTX ISA,
 * "Generic Addressing" and "cvta"); the compiler emits cvta.to.shared. */
static __device__ __forceinline__ uint32_t fx_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---------------------------------------------------------------------------------
 * Asynchronous copies: global -> shared without passing through registers
 * PTX ISA §9.7.9.25 "Data Movement and Conversion Instructions: cp.async",
 * "cp.async.commit_group" and "cp.async.wait_group" (sm_80+).
 * ------------------------------------------------------------------------------ */

/* cp.async.cg.shared.global [dst], [src], 16, src_size;
 * Copies 16 bytes, caching in L2 only (.cg: the tile is used once per CTA, L1 would only
 * evict useful lines). When `valid` is false src_size is 0: nothing is read and the 16
 * bytes of dst are zero-filled, which is how a tile row past seqlen becomes zeros (src
 * must still be a valid address; pass the tensor's base). */
static __device__ __forceinline__ void fx_cp_async_cg_16(uint32_t dst, const void *src, bool valid)
{
    const int src_size = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_size)
                 : "memory");
}

/* cp.async.commit_group; — closes the group of this thread's cp.async issued since the
 * last commit, so a later wait_group can wait for it as a unit. */
static __device__ __forceinline__ void fx_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* cp.async.wait_group N; — waits until at most N of this thread's committed groups are
 * still in flight. It covers only this thread's copies: a __syncthreads() after it makes
 * every thread's copies visible to the whole CTA. */
template <int N>
static __device__ __forceinline__ void fx_cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ---------------------------------------------------------------------------------
 * ldmatrix: four 8×8 b16 matrices from shared memory into mma fragments
 * PTX ISA §9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix" (sm_75+).
 *
 * Lanes 8i..8i+7 each give the address of one 16-byte row of matrix i (i = 0..3).
 * Without .trans, lane l receives in r[i] the two elements of matrix i at
 *     row l/4, columns 2·(l%4) and 2·(l%4)+1;
 * with .trans it receives the elements at rows 2·(l%4), 2·(l%4)+1 of column l/4,
 * i.e. the matrix is transposed on the way in.
 * ------------------------------------------------------------------------------ */

static __device__ __forceinline__ void fx_ldmatrix_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

static __device__ __forceinline__ void fx_ldmatrix_x4_trans(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* ---------------------------------------------------------------------------------
 * mma.sync m16n8k16, fp32 accumulate: D(16×8) += A(16×16) · B(16×8)
 * PTX ISA §9.7.14.5.14 "Multiply-and-Accumulate Instruction: mma", fragments in
 * "Matrix Fragments for mma.m16n8k16 with floating point type" (sm_80+).
 *
 * g = lane/4 (the "groupID"), t = lane%4 (the "threadID_in_group"):
 *   A (row-major 16×16), 4 × b32, each a pair of 16-bit values, low half first:
 *       a[0] = A[g  ][2t, 2t+1]      a[2] = A[g  ][2t+8, 2t+9]
 *       a[1] = A[g+8][2t, 2t+1]      a[3] = A[g+8][2t+8, 2t+9]
 *   B ("col": 16×8 with k contiguous), 2 × b32:
 *       b[0] = B[2t, 2t+1][g]        b[1] = B[2t+8, 2t+9][g]
 *   C/D (16×8 fp32), 4 × f32:
 *       d[0], d[1] = D[g][2t, 2t+1]  d[2], d[3] = D[g+8][2t, 2t+1]
 *
 *            k: 0 ........ 7 8 ....... 15                n: 0 ..... 7
 *   rows 0-7  | a[0] (t pairs) | a[2]          |   rows 0-7  | d[0],d[1] |
 *   rows 8-15 | a[1]           | a[3]          |   rows 8-15 | d[2],d[3] |
 * ------------------------------------------------------------------------------ */

static __device__ __forceinline__ void fx_mma_m16n8k16_bf16(float d[4], const uint32_t a[4],
                                                            uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ void fx_mma_m16n8k16_fp16(float d[4], const uint32_t a[4],
                                                            uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ---------------------------------------------------------------------------------
 * Scalars of the softmax
 * ------------------------------------------------------------------------------ */

/* ex2.approx.ftz.f32 d, x;  d = 2^x (PTX ISA §9.7.3 "Floating Point Instructions: ex2").
 * One MUFU.EX2 on the special-function unit; 2^-inf = +0, which is what a masked score
 * must give. Subnormal results flush to zero, harmless next to the row maximum's 1. */
static __device__ __forceinline__ float fx_ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* cvt.rn.bf16x2.f32 d, hi, lo;  two fp32 rounded to nearest-even into one b32, `lo` in the
 * low half (PTX ISA §9.7.9.21 "Data Movement and Conversion Instructions: cvt", sm_80+).
 * The low half is the lower column index of an mma fragment pair. */
static __device__ __forceinline__ uint32_t fx_pack_bf16x2(float lo, float hi)
{
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

/* cvt.rn.f16x2.f32 d, hi, lo;  the same for fp16 (sm_80+). */
static __device__ __forceinline__ uint32_t fx_pack_f16x2(float lo, float hi)
{
    uint32_t d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

/* ---------------------------------------------------------------------------------
 * Atomic reduction in global memory
 * ------------------------------------------------------------------------------ */

/* red.global.add.f32 [addr], x;  *addr += x atomically, performed in L2, no value returned
 * (PTX ISA §9.7.12.7 "Parallel Synchronization and Communication Instructions: red").
 * The stage 03 backward accumulates dQ with it: CTAs that own different K/V blocks add
 * their partial dS·K into one fp32 dQaccum. Unlike atom, red gives nothing back, so the
 * thread does not wait for the L2 round trip. */
static __device__ __forceinline__ void fx_red_add_f32(float *addr, float x)
{
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(addr), "f"(x) : "memory");
}

/* red.global.add.v2.f32 [addr], {x, y};  addr[0] += x and addr[1] += y, each atomic, one
 * instruction (same section; the vector form is sm_90+, PTX ISA 8.1). addr must be 8-byte
 * aligned. Before sm_90 the two elements go as two scalar reds: the same result, twice
 * the instructions and L2 requests. The dQ accumulator of a thread is pairs of adjacent
 * columns, so the stage 03 backward halves its reductions on Hopper with it. */
static __device__ __forceinline__ void fx_red_add_f32x2(float *addr, float x, float y)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(x), "f"(y) : "memory");
#else
    fx_red_add_f32(addr, x);
    fx_red_add_f32(addr + 1, y);
#endif
}

#endif
