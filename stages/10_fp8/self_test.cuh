/*
 * self_test.cuh — stage 10's --self-test: the in-kernel V transpose alone, byte for byte.
 *
 * Included at the end of fwd.cu (one translation unit), so that it runs the kernel's own
 * device functions (load_tile, load_vt, transpose_block) on the kernel's own shared-memory
 * plan (SharedStorage) and tensor maps (v_row_major_map, vt_map), and checks the result on
 * the host against addresses computed from the swizzles' address rule, not from the kernel's
 * row formulas. One GPU run tells whether the transpose is right, independently of attention.
 * Sources: PTX ISA §9.7.14.5.15 (ldmatrix), §9.7.14.5.16 (stmatrix), "prmt"; the 64B and 32B
 * swizzles of TMA and wgmma (common/ptx/wgmma_desc.h).
 */
#ifndef FX_STAGE10_SELF_TEST_CUH
#define FX_STAGE10_SELF_TEST_CUH

#include "fx_gpu.h" /* FX_CUDA */

/* ---------------------------------------------------------------------------------
 * Self-test of the V transpose alone (--self-test): the kernel's own code on its own
 * shared-memory plan, checked byte for byte on the host
 * ------------------------------------------------------------------------------ */

/* One CTA of one warpgroup per (K/V block, KV head, batch): raw V of the block lands by TMA
 * (load_kv's map and tile), the warpgroup runs transpose_block as the producer does for a
 * first fill, waits on v_full as a consumer would, and copies the Vᵀ tile and the raw tile,
 * bytes as they lie in shared memory (swizzled), to vt_out and raw_out. The same block of
 * a host-transposed Vᵀ also lands by TMA as --fp8-vt loads it (load_vt; into K's first tile,
 * unused here), copied to tma_vt_out: the transpose must give exactly those bytes, each key's
 * at its slot in P's order (transpose_test_slot). */
template <class Cfg>
static __global__ void __launch_bounds__(kWarpgroupThreads, 1)
    transpose_test_kernel(const __grid_constant__ CUtensorMap tma_v,
                          const __grid_constant__ CUtensorMap tma_vt, uint8_t *vt_out,
                          uint8_t *raw_out, uint8_t *tma_vt_out)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t smem_addr = smem_base_aligned(smem_raw);
    using S = SharedStorage<Cfg>;
    constexpr int kTileBytes = Cfg::kBlockN * Cfg::kHeadDim;
    const int n_block = blockIdx.x, head_kv = blockIdx.y, batch = blockIdx.z;
    const int tid = threadIdx.x;
    const uint32_t raw_full = smem_addr + (uint32_t)offsetof(S, v_raw_full);
    const uint32_t v_full = smem_addr + (uint32_t)offsetof(S, v_full);
    const uint32_t k_full = smem_addr + (uint32_t)offsetof(S, k_full);
    if (tid == 0) {
        fx_mbarrier_init(raw_full, 1);
        fx_mbarrier_init(v_full, 1);
        fx_mbarrier_init(k_full, 1);
        fx_fence_mbarrier_init();
    }
    __syncthreads();
    if (tid / kWarpSize == 0 && fx_elect_one()) {
        load_tile<Cfg>(smem_addr + (uint32_t)offsetof(S, raw), &tma_v, raw_full, Cfg::kBlockN,
                       head_kv, n_block * Cfg::kBlockN, batch);
        load_vt<Cfg>(smem_addr + (uint32_t)offsetof(S, k), &tma_vt, k_full, head_kv,
                     n_block * Cfg::kBlockN, batch);
    }
    __syncwarp();
    transpose_block<Cfg>(smem_addr, PipelineState{0, 0}, false, tid);
    fx_mbarrier_wait(v_full, 0);
    fx_mbarrier_wait(k_full, 0);
    const int64_t tile = ((int64_t)batch * gridDim.y + head_kv) * gridDim.x + n_block;
    const unsigned char *base = smem_raw + (smem_addr - fx_smem_addr(smem_raw));
    for (int i = tid; i < kTileBytes; i += kWarpgroupThreads) {
        vt_out[tile * kTileBytes + i] = base[offsetof(S, vt) + i];
        raw_out[tile * kTileBytes + i] = base[offsetof(S, raw) + i];
        tma_vt_out[tile * kTileBytes + i] = base[offsetof(S, k) + i];
    }
}

/* The byte of V at (batch, key, head, d): within each 16×16 block of (key, d) every byte
 * differs ((key%16)·16 + d%16), XORed with a constant of the block, the head and the batch,
 * so a misplaced byte names where it came from. */
static uint8_t transpose_test_byte(int batch, int key, int head, int d)
{
    const unsigned block =
        (unsigned)((key / 16) * 0x3B + (d / 16) * 0x65 + head * 0x11 + batch * 0x53);
    return (uint8_t)((((key % 16) << 4) | (d % 16)) ^ (block & 0xFF));
}

/* Byte offsets in the swizzled tiles, written from TMA's and wgmma's address rule rather than
 * from the kernel's row formulas: the 64B (32B) swizzle XORs address bits [4, 6) ([4, 5))
 * with bits [7, 9) ([7, 8)) (CUTLASS Swizzle<2,4,3>, Swizzle<1,4,3>; wgmma_desc.h). */
static uint32_t swizzle64_address(uint32_t a)
{
    return a ^ (((a >> 7) & 3u) << 4);
}
static uint32_t swizzle32_address(uint32_t a)
{
    return a ^ (((a >> 7) & 1u) << 4);
}

/* The k-slot of the transposed Vᵀ row at which key (of its tile) lies: the transpose writes
 * the keys of each 16 in P's accumulator order, slot 4t + b holding key 2t + (b & 1) +
 * 8·(b >> 1) (fwd.cu, "Where P must go"), so key k < 8 of the 16 is at 4·(k/2) + k%2 and
 * k >= 8 at 4·((k−8)/2) + 2 + k%2. TMA's Vᵀ (--fp8-vt) keeps the natural order. */
static int transpose_test_slot(int key)
{
    const int k = key % 16;
    return key - k + 4 * ((k % 8) / 2) + 2 * (k / 8) + k % 2;
}

/* Counts a wrong byte and prints the first few of each kind. */
static void transpose_test_report(long *wrong, const char *what, int d, int b, int h, int n,
                                  int key, int col, uint8_t got, uint8_t want)
{
    if (got == want)
        return;
    if (++*wrong <= 8) {
        // Undo the block's constant: a byte from the same 16×16 block names its place.
        const unsigned from = got ^ want ^ (((key % 16) << 4) | (col % 16));
        printf("  head_dim %d, %s: batch %d head %d block %d key %d d %d: 0x%02x, want 0x%02x "
               "(from the same 16×16 block it would be key %% 16 = %u, d %% 16 = %u)\n",
               d, what, b, h, n, key, col, got, want, from >> 4, from & 15u);
    }
}

/* Runs the test at one tile: V [2, seqlen_k, 3, head_dim] with seqlen_k = 2·kBlockN + 9 (a
 * tail of 9 keys, zero-filled by TMA). Checks every byte of the raw tile against the 64B
 * swizzle's address rule, of the transposed tile against the 32B rule with the keys in P's
 * order, and the transposed tile against what TMA loads from a host-transposed Vᵀ (--fp8-vt's
 * map, rows padded to 16 keys, natural order), key by key. Every (key, d) of a tile is one
 * byte of each tile, so every byte of each is checked. Prints the first mismatches and one
 * line per head_dim. Returns the number of mismatches (a wrong byte counts once for each of
 * the checks above it fails, so at most three times), or -1 on a CUDA or encoding error
 * (printed). */
template <class Cfg>
static long transpose_test_run(void)
{
    constexpr int kTileBytes = Cfg::kBlockN * Cfg::kHeadDim;
    const int d = Cfg::kHeadDim, batch = 2, heads_kv = 3;
    const int seqlen_k = 2 * Cfg::kBlockN + 9;       // a tail that is no multiple of 16
    const int row_keys = (seqlen_k + 15) / 16 * 16;  // Vᵀ's rows: TMA's 16-byte stride rule
    const int n_blocks = (seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
    const size_t v_bytes = (size_t)batch * row_keys * heads_kv * d;  // either layout fits
    const size_t out_bytes = (size_t)batch * heads_kv * n_blocks * kTileBytes;
    enum { kV, kVt, kOutVt, kOutRaw, kOutTmaVt, kBuffers };
    const size_t bytes[kBuffers] = {v_bytes, v_bytes, out_bytes, out_bytes, out_bytes};
    uint8_t *host[kBuffers] = {}, *dev[kBuffers] = {};
    long wrong = -1;
    for (int i = 0; i < kBuffers; ++i) {
        host[i] = (uint8_t *)calloc(bytes[i], 1);
        if (!host[i]) {
            fx_error("self-test: out of host memory");
            goto done;
        }
        if (FX_CUDA(cudaMalloc(&dev[i], bytes[i])) || FX_CUDA(cudaMemset(dev[i], 0xA5, bytes[i])))
            goto done;
    }
    for (int b = 0; b < batch; ++b)
        for (int key = 0; key < seqlen_k; ++key)
            for (int h = 0; h < heads_kv; ++h)
                for (int c = 0; c < d; ++c) {
                    const uint8_t x = transpose_test_byte(b, key, h, c);
                    host[kV][(((size_t)b * seqlen_k + key) * heads_kv + h) * d + c] = x;
                    host[kVt][(((size_t)b * heads_kv + h) * d + c) * row_keys + key] = x;
                }
    if (FX_CUDA(cudaMemcpy(dev[kV], host[kV], v_bytes, cudaMemcpyHostToDevice)) ||
        FX_CUDA(cudaMemcpy(dev[kVt], host[kVt], v_bytes, cudaMemcpyHostToDevice)))
        goto done;
    {
        fx_layout l = {};
        l.row_stride = (int64_t)heads_kv * d;
        l.head_stride = d;
        l.batch_stride = (int64_t)seqlen_k * heads_kv * d;
        const fx_tma_tiled tv = v_row_major_map<Cfg>(dev[kV], l, batch, seqlen_k, heads_kv);
        const fx_tma_tiled tvt = vt_map<Cfg>(dev[kVt], batch, seqlen_k, row_keys, heads_kv);
        CUtensorMap map_v, map_vt;
        if (!encode(&map_v, &tv, "V (self-test)") || !encode(&map_vt, &tvt, "Vᵀ (self-test)"))
            goto done;
        auto kernel = transpose_test_kernel<Cfg>;
        const size_t smem_bytes = (size_t)kSmemBytes<Cfg>;
        if (FX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         kSmemBytes<Cfg>)))
            goto done;
        kernel<<<dim3((unsigned)n_blocks, (unsigned)heads_kv, (unsigned)batch), kWarpgroupThreads,
                 smem_bytes>>>(map_v, map_vt, dev[kOutVt], dev[kOutRaw], dev[kOutTmaVt]);
        if (FX_CUDA(cudaGetLastError()) || FX_CUDA(cudaDeviceSynchronize()))
            goto done;
        for (int i = kOutVt; i < kBuffers; ++i)
            if (FX_CUDA(cudaMemcpy(host[i], dev[i], out_bytes, cudaMemcpyDeviceToHost)))
                goto done;
    }
    wrong = 0;
    for (int b = 0; b < batch; ++b)
        for (int h = 0; h < heads_kv; ++h)
            for (int n = 0; n < n_blocks; ++n) {
                const size_t tile = (((size_t)b * heads_kv + h) * n_blocks + n) * kTileBytes;
                for (int key = 0; key < Cfg::kBlockN; ++key)
                    for (int c = 0; c < d; ++c) {
                        const int gkey = n * Cfg::kBlockN + key;
                        // Keys past seqlen_k: TMA's zero fill, transposed.
                        const uint8_t want =
                            gkey < seqlen_k ? transpose_test_byte(b, gkey, h, c) : 0;
                        const size_t raw_at =
                            tile + (c / kSlab8RowBytes) * Cfg::kBlockN * kSlab8RowBytes +
                            swizzle64_address(
                                (uint32_t)(key * kSlab8RowBytes + c % kSlab8RowBytes));
                        const int slot = transpose_test_slot(key);
                        const size_t vt_at = tile + (key / kSlabVtRowBytes) * d * kSlabVtRowBytes +
                                             swizzle32_address((uint32_t)(c * kSlabVtRowBytes +
                                                                          key % kSlabVtRowBytes));
                        const size_t vt_slot_at =
                            tile + (slot / kSlabVtRowBytes) * d * kSlabVtRowBytes +
                            swizzle32_address(
                                (uint32_t)(c * kSlabVtRowBytes + slot % kSlabVtRowBytes));
                        transpose_test_report(&wrong, "raw V (TMA's tile, 64B rule)", d, b, h, n,
                                              key, c, host[kOutRaw][raw_at], want);
                        transpose_test_report(&wrong, "Vᵀ (transposed, 32B rule, P's order)", d, b,
                                              h, n, key, c, host[kOutVt][vt_slot_at], want);
                        if (host[kOutVt][vt_slot_at] != host[kOutTmaVt][vt_at] && ++wrong <= 8)
                            printf("  head_dim %d: batch %d head %d block %d key %d d %d: "
                                   "transposed 0x%02x, TMA's Vᵀ 0x%02x\n",
                                   d, b, h, n, key, c, host[kOutVt][vt_slot_at],
                                   host[kOutTmaVt][vt_at]);
                        transpose_test_report(&wrong, "Vᵀ by TMA (--fp8-vt, 32B rule)", d, b, h, n,
                                              key, c, host[kOutTmaVt][vt_at], want);
                    }
            }
    printf("self-test transpose_v, head_dim %d, kBlockN %d (%d blocks × %d heads × %d batches, "
           "seqlen_k %d): %s, %ld mismatches\n",
           d, Cfg::kBlockN, n_blocks, heads_kv, batch, seqlen_k, wrong ? "FAIL" : "PASS", wrong);
done:
    for (int i = 0; i < kBuffers; ++i) {
        cudaFree(dev[i]);
        free(host[i]);
    }
    return wrong;
}

/* The stage's --self-test (fx_stage.h): the in-kernel V transpose at every head_dim, on the
 * kernel's own device functions and shared-memory plan, every byte of the Vᵀ tile (and of the
 * raw tile TMA wrote, and of the Vᵀ tile TMA loads with --fp8-vt) against the host's
 * expectation (transpose_test_run). 0 when all are right, 1 otherwise. */
extern "C" int FX_ENTRY(self_test)(void)
{
    const long w64 = transpose_test_run<ConfigD64<true>>();
    const long w128 = transpose_test_run<ConfigD128<true>>();
    const long w256 = transpose_test_run<ConfigD256<true>>();
    return (w64 == 0 && w128 == 0 && w256 == 0) ? 0 : 1;
}

#endif
