/*
 * fp8_acc_probe.cu — how Hopper's tensor cores add the products of one wgmma: the e4m3
 * m64n64k32 instruction of stage 10, and bf16 m64n64k16 as a control. A measurement, not a
 * test of the stages: run it once on an H100/H200 and read what it prints
 * (docs/10_fp8.md, "The tensor core's fp8 accumulation, measured").
 *
 *   build/bin/fp8_acc_probe            (sm_90a only; exit 77 without such a GPU)
 *
 * Every dot product runs on the GPU as one row of A times one row of B (both K-major in
 * shared memory, as stage 10 reads Q and K) plus one fp32 accumulator input C, through the
 * project's own wrappers (fx_wgmma_m64n64k32_ss_e4m3, fx_wgmma_m64n64k16_ss_bf16). A block is
 * one warpgroup and one 64×64 tile: most series put 64 independent cases on the tile's
 * diagonal (case i: A row i, B row i, C[i][i]; the rest of C is 0 and the off-diagonal
 * results are ignored); the layout checks and the random series use every cell.
 *
 * What it prints, in order:
 *   1. layout sanity, per dtype and shared-memory layout (the project's swizzle, and two
 *      no-swizzle variants as fallbacks): all ones; a single nonzero product placed at every
 *      k of every row of A, then of B (a wrong k, row or accumulator mapping gives another
 *      value); random small integers (exact). PASS/FAIL each; the fallbacks run only if the
 *      swizzled layout fails; the series use the first layout that passes, and none are
 *      trusted if none does.
 *   2. per dtype, the series (tables: "kept" = how many units of the small term survived):
 *      S1 one large product 2^E and small ones 2^(E-t): where they stop counting, with which
 *         rounding (values 1 and 1.5 units, both signs, one or k-1 of them, large one
 *         negative: magnitude or two's-complement truncation);
 *      S2 C large, products small;  S3 one large product, C small;
 *      S4 C alone with a long significand (products 0);  S5 C plus a product of 1;
 *      S6 cancellation (+2^E, -2^E, small);  S7 the large product's significand (emax from
 *         the value or from the operands' exponent sum);
 *      S8 grouping: a large product at k=p and one small at k=q, every (p, q): lost (same
 *         alignment group) or kept, as a 0/1 map, and which group size G fits it;
 *      S9 a large product at p and small ones everywhere else: how many survive.
 *   3. a fit: every model of common/fx_fp8_acc.h on a grid (G, B, rounding of terms, how C
 *      joins, rounding to fp32, emax) against every case above bit for bit; the models with
 *      fewest mismatches, and the first mismatches of the best.
 *   4. random inputs like stage 10's S = Q8·K8ᵀ (k = 32, 64, 128, 256 by chained
 *      instructions): the GPU against the exact sum, against the fp32 sum the CPU model does
 *      today, and against the fitted model; max |error| / Σ|a·b| as a power of two (what the
 *      pass rule's accumulation term assumes is 2^-13).
 *   5. the summary in words, and "model: ..." lines to paste into fx_fp8_acc.h.
 * Exit status: 0 when every layout check of some layout passed for both dtypes, 1 otherwise,
 * 77 without an sm_90 GPU.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_fp8.h"
#include "fx_fp8_acc.h"
#include "fx_reference.h" /* fx_dot_f32: the CPU model's fp32 sum */
#include "ptx/hopper.cuh"
#include "ptx/wgmma_desc.h"

enum { DT_E4M3 = 0, DT_BF16 = 1 };
enum { LAYOUT_SWIZZLE = 0, LAYOUT_PLAIN = 1, LAYOUT_PLAIN_SWAPPED = 2, N_LAYOUTS = 3 };
static const char *const dt_name[2] = {"e4m3 m64n64k32", "bf16 m64n64k16"};
static const char *const layout_name[N_LAYOUTS] = {
    "swizzled K-major (e4m3: 64B as stage 10's Q/K, bf16: 128B as stages 05-09)",
    "no swizzle, core matrices 8x16B, LBO=128 (next 16 B of k) SBO=256 (next 8 rows)",
    "no swizzle, same bytes, LBO=256 SBO=128 (the other reading of the two offsets)"};

#define TILE_STRIDE 8192u /* bytes per k-slice tile of 64 rows, any layout */
#define MAX_INSTR 8       /* chained instructions: k up to 256 (e4m3) or 128 (bf16) */
#define MAX_K 256
#define KB 32 /* bytes of one row per instruction: 32 e4m3 or 16 bf16 */

static int k_per_instr(int dt)
{
    return dt == DT_E4M3 ? 32 : 16;
}

/* ---- the kernel --------------------------------------------------------------------- */

/* Byte offset inside one k-slice tile of the byte b (0..31) of row r (0..63). */
static __host__ __device__ uint32_t layout_offset(int layout, int dt, uint32_t r, uint32_t b)
{
    if (layout == LAYOUT_SWIZZLE) {
        if (dt == DT_E4M3) /* rows of 64 B, 16-byte chunk c stored at c ^ ((r/2) % 4) */
            return r * 64u + ((((b >> 4) ^ ((r >> 1) & 3u)) & 3u) << 4) + (b & 15u);
        return fx_swizzle128_offset(r, b); /* rows of 128 B, chunk c at c ^ (r % 8) */
    }
    /* canonical no-swizzle K-major: 8x16-byte core matrices of 128 contiguous bytes */
    return (r / 8u) * 256u + (b / 16u) * 128u + (r % 8u) * 16u + (b % 16u);
}

static __device__ uint64_t make_desc(int layout, int dt, uint32_t addr)
{
    if (layout == LAYOUT_SWIZZLE)
        return dt == DT_E4M3 ? fx_wgmma_desc_k_sw64(addr) : fx_wgmma_desc_k_sw128(addr);
    if (layout == LAYOUT_PLAIN)
        return fx_wgmma_desc_make(addr, 128u, 256u, 0u, FX_WGMMA_LAYOUT_INTERLEAVE);
    return fx_wgmma_desc_make(addr, 256u, 128u, 0u, FX_WGMMA_LAYOUT_INTERLEAVE);
}

/* One block, one warpgroup, one tile: D = Σ_s A_s·B_sᵀ + C over n_instr chained k-slices.
 * A, B: [tiles][64 rows][n_instr·32 bytes] (row-major, k contiguous); C, D: [tiles][64][64]. */
template <int DT, int NI>
__global__ void __launch_bounds__(128, 1)
    probe_kernel(const uint8_t *A, const uint8_t *B, const float *C, float *D, int layout)
{
    const int n_instr = NI; /* a constant: the chain is unrolled, no branch between wgmmas */
#if FX_PTX_HAS_SM90A && defined(__CUDA_ARCH__)
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = fx_smem_addr(smem_raw);
    uint8_t *smem = smem_raw + ((1024u - (raw & 1023u)) & 1023u);
    const uint32_t base = fx_smem_addr(smem);
    const int tid = threadIdx.x;
    const int row_bytes = KB * n_instr;
    const size_t in0 = (size_t)blockIdx.x * 64 * row_bytes;
    for (int idx = tid; idx < 64 * row_bytes; idx += 128) {
        const uint32_t r = idx / row_bytes, kb = idx % row_bytes, s = kb / KB, b = kb % KB;
        const uint32_t off = layout_offset(layout, DT, r, b);
        smem[s * TILE_STRIDE + off] = A[in0 + idx];
        smem[(n_instr + s) * TILE_STRIDE + off] = B[in0 + idx];
    }
    fx_fence_proxy_async_smem(); /* generic stores → the async proxy wgmma reads through */
    __syncthreads();

    const int warp = tid / 32, lane = tid % 32;
    const size_t c0 = (size_t)blockIdx.x * 4096;
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) { /* hopper.cuh: d[v0+2v1+4v2] = D[16w+l/4+8v1][2(l%4)+v0+8v2] */
        const int row = 16 * warp + lane / 4 + 8 * ((i >> 1) & 1);
        const int col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
        d[i] = C[c0 + row * 64 + col];
    }
    const uint64_t da0 = make_desc(layout, DT, base);
    const uint64_t db0 = make_desc(layout, DT, base + n_instr * TILE_STRIDE);
    fx_wgmma_fence();
#pragma unroll
    for (int s = 0; s < NI; ++s) {
        const uint64_t da = fx_wgmma_desc_advance(da0, s * TILE_STRIDE);
        const uint64_t db = fx_wgmma_desc_advance(db0, s * TILE_STRIDE);
        if constexpr (DT == DT_E4M3)
            fx_wgmma_m64n64k32_ss_e4m3(d, da, db, true);
        else
            fx_wgmma_m64n64k16_ss_bf16<0, 0>(d, da, db, true);
    }
    fx_wgmma_commit();
    fx_wgmma_wait<0>();
    fx_wgmma_fence_operand(d);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const int row = 16 * warp + lane / 4 + 8 * ((i >> 1) & 1);
        const int col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
        D[c0 + row * 64 + col] = d[i];
    }
#endif
}

/* ---- host: running tiles -------------------------------------------------------------- */

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "fp8_acc_probe: %s: %s (%s:%d)\n", #call, cudaGetErrorString(e_),      \
                    __FILE__, __LINE__);                                                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "fp8_acc_probe: out of host memory\n");
        exit(1);
    }
    return p;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static int representable(int dt, float v)
{
    if (dt == DT_E4M3)
        return fx_e4m3_to_float(fx_e4m3_from_float(v)) == v;
    return (float_bits(v) & 0xFFFFu) == 0;
}

/* FX_ACC_PROBE_EMULATE="G=.. B=.. term=.. c=.. out=.. emax=..": no GPU; every tile is
 * computed by fx_fp8_dot_model with those parameters instead (both dtypes), so that the
 * analysis can be checked on a CPU: the fit must find the parameters it was given. */
static int emulate = 0;
static fx_fp8_acc_params emulated;

/* Runs `tiles` tiles: A, B values [tiles][64][k], C, D [tiles][64][64], k = n_instr·kper. */
static void run_tiles(int dt, int layout, int n_instr, int tiles, const float *A, const float *B,
                      const float *C, float *D)
{
    const int k = n_instr * k_per_instr(dt), row_bytes = KB * n_instr;
    if (emulate) {
        for (size_t t = 0; t < (size_t)tiles; ++t)
            for (int m = 0; m < 64; ++m)
                for (int n = 0; n < 64;
                     ++n) { /* instruction by instruction: a group never spans two */
                    const int kp = k_per_instr(dt);
                    float acc = C[t * 4096 + m * 64 + n];
                    for (int s = 0; s < n_instr; ++s)
                        acc = fx_fp8_dot_model(A + (t * 64 + m) * k + s * kp,
                                               B + (t * 64 + n) * k + s * kp, kp, acc, &emulated);
                    D[t * 4096 + m * 64 + n] = acc;
                }
        return;
    }
    const size_t nbytes = (size_t)tiles * 64 * row_bytes, nc = (size_t)tiles * 4096;
    uint8_t *ha = (uint8_t *)xcalloc(nbytes, 1), *hb = (uint8_t *)xcalloc(nbytes, 1);
    for (size_t t = 0; t < (size_t)tiles * 64; ++t)
        for (int j = 0; j < k; ++j) {
            const float va = A[t * k + j], vb = B[t * k + j];
            if (!representable(dt, va) || !representable(dt, vb)) {
                fprintf(stderr, "fp8_acc_probe: internal: %a or %a is not %s\n", va, vb,
                        dt == DT_E4M3 ? "e4m3" : "bf16");
                exit(1);
            }
            if (dt == DT_E4M3) {
                ha[t * row_bytes + j] = fx_e4m3_from_float(va);
                hb[t * row_bytes + j] = fx_e4m3_from_float(vb);
            } else {
                const uint32_t ua = float_bits(va) >> 16, ub = float_bits(vb) >> 16;
                ha[t * row_bytes + 2 * j] = (uint8_t)ua;
                ha[t * row_bytes + 2 * j + 1] = (uint8_t)(ua >> 8);
                hb[t * row_bytes + 2 * j] = (uint8_t)ub;
                hb[t * row_bytes + 2 * j + 1] = (uint8_t)(ub >> 8);
            }
        }
    uint8_t *da, *db;
    float *dc, *dd;
    CUDA_OK(cudaMalloc(&da, nbytes));
    CUDA_OK(cudaMalloc(&db, nbytes));
    CUDA_OK(cudaMalloc(&dc, nc * sizeof(float)));
    CUDA_OK(cudaMalloc(&dd, nc * sizeof(float)));
    CUDA_OK(cudaMemcpy(da, ha, nbytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(db, hb, nbytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dc, C, nc * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dd, 0xFF, nc * sizeof(float))); /* NaN where nothing was written */
    const size_t smem = 2u * n_instr * TILE_STRIDE + 1024u;
    void (*kernel)(const uint8_t *, const uint8_t *, const float *, float *, int) = NULL;
    switch (dt * 16 + n_instr) {
    case DT_E4M3 * 16 + 1: kernel = probe_kernel<DT_E4M3, 1>; break;
    case DT_E4M3 * 16 + 2: kernel = probe_kernel<DT_E4M3, 2>; break;
    case DT_E4M3 * 16 + 4: kernel = probe_kernel<DT_E4M3, 4>; break;
    case DT_E4M3 * 16 + 8: kernel = probe_kernel<DT_E4M3, 8>; break;
    case DT_BF16 * 16 + 1: kernel = probe_kernel<DT_BF16, 1>; break;
    case DT_BF16 * 16 + 2: kernel = probe_kernel<DT_BF16, 2>; break;
    case DT_BF16 * 16 + 4: kernel = probe_kernel<DT_BF16, 4>; break;
    case DT_BF16 * 16 + 8: kernel = probe_kernel<DT_BF16, 8>; break;
    default:
        fprintf(stderr, "fp8_acc_probe: internal: %d chained instructions\n", n_instr);
        exit(1);
    }
    CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)(2 * MAX_INSTR * TILE_STRIDE + 1024)));
    kernel<<<tiles, 128, smem>>>(da, db, dc, dd, layout);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(D, dd, nc * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(da));
    CUDA_OK(cudaFree(db));
    CUDA_OK(cudaFree(dc));
    CUDA_OK(cudaFree(dd));
    free(ha);
    free(hb);
}

/* ---- 1. layout sanity ------------------------------------------------------------------ */

/* Distinct values per k (e4m3: codes 0x38.. = 1, 1.125, ..., 30; bf16: 1 + k/16) and per
 * row block (e4m3: ±1 for rows 0-31 / 32-63; bf16: 1, -1, 2, -2 per 16 rows), so that
 * u(row)·v(k) names both. */
static float v_of(int dt, int k)
{
    return dt == DT_E4M3 ? fx_e4m3_to_float((uint8_t)(0x38 + k)) : 1.0f + (float)k / 16.0f;
}

static float u_of(int dt, int row)
{
    static const float u4[4] = {1.0f, -1.0f, 2.0f, -2.0f};
    return dt == DT_E4M3 ? (row < 32 ? 1.0f : -1.0f) : u4[row / 16];
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double rng_uniform(void) /* (0, 1) */
{
    return ((double)(rng_next() >> 11) + 0.5) * 0x1p-53;
}
static double rng_normal(void)
{
    return sqrt(-2.0 * log(rng_uniform())) * cos(6.283185307179586 * rng_uniform());
}

/* Runs the four checks of one dtype and layout; returns 1 when all pass. */
static int layout_sanity(int dt, int layout)
{
    const int K = k_per_instr(dt);
    const int tiles = 1 + K + K + 4;
    float *A = (float *)xcalloc((size_t)tiles * 64 * K, sizeof(float));
    float *B = (float *)xcalloc((size_t)tiles * 64 * K, sizeof(float));
    float *C = (float *)xcalloc((size_t)tiles * 4096, sizeof(float));
    float *D = (float *)xcalloc((size_t)tiles * 4096, sizeof(float));
    float *E = (float *)xcalloc((size_t)tiles * 4096, sizeof(float)); /* expected */
    /* tile 0: all ones, C = 0.5 on the diagonal */
    for (int i = 0; i < 64 * K; ++i)
        A[i] = B[i] = 1.0f;
    for (int m = 0; m < 64; ++m)
        C[m * 64 + m] = 0.5f;
    /* tiles 1..K: A has one nonzero per row, at k = (m + s) % K; tiles K+1..2K: B likewise */
    for (int s = 0; s < K; ++s) {
        float *a = A + (size_t)(1 + s) * 64 * K, *b = B + (size_t)(1 + s) * 64 * K;
        float *a2 = A + (size_t)(1 + K + s) * 64 * K, *b2 = B + (size_t)(1 + K + s) * 64 * K;
        for (int r = 0; r < 64; ++r)
            for (int k = 0; k < K; ++k) {
                a[r * K + k] = k == (r + s) % K ? u_of(dt, r) : 0.0f;
                b[r * K + k] = v_of(dt, k);
                a2[r * K + k] = v_of(dt, k);
                b2[r * K + k] = k == (r + s) % K ? u_of(dt, r) : 0.0f;
            }
    }
    /* 4 tiles of random integers in [-3, 3], C in [-8, 8]: every sum exact */
    for (int t = 1 + 2 * K; t < tiles; ++t) {
        for (int i = 0; i < 64 * K; ++i) {
            A[(size_t)t * 64 * K + i] = (float)((int)(rng_next() % 7) - 3);
            B[(size_t)t * 64 * K + i] = (float)((int)(rng_next() % 7) - 3);
        }
        for (int i = 0; i < 4096; ++i)
            C[(size_t)t * 4096 + i] = (float)((int)(rng_next() % 17) - 8);
    }
    for (int t = 0; t < tiles; ++t)
        for (int m = 0; m < 64; ++m)
            for (int n = 0; n < 64; ++n)
                E[(size_t)t * 4096 + m * 64 + n] = (float)fx_fp8_dot_exact(
                    A + ((size_t)t * 64 + m) * K, B + ((size_t)t * 64 + n) * K, K,
                    C[(size_t)t * 4096 + m * 64 + n]);
    run_tiles(dt, layout, 1, tiles, A, B, C, D);
    static const char *const what[4] = {
        "all ones (32 or 16, +0.5 on the diagonal)", "one product per row of A, at every k",
        "one product per row of B, at every k", "random integers in [-3, 3], C in [-8, 8]"};
    const int first[5] = {0, 1, 1 + K, 1 + 2 * K, tiles};
    int all = 1;
    for (int c = 0; c < 4; ++c) {
        int bad = 0;
        char example[160] = "";
        for (int t = first[c]; t < first[c + 1]; ++t)
            for (int i = 0; i < 4096; ++i) {
                const size_t at = (size_t)t * 4096 + i;
                if (D[at] != E[at] && !(D[at] == 0 && E[at] == 0)) {
                    if (!bad)
                        snprintf(example, sizeof example,
                                 "  (first: tile %d D[%d][%d] = %g, expected %g)", t - first[c],
                                 i / 64, i % 64, D[at], E[at]);
                    ++bad;
                }
            }
        printf("  %-4s %-42s %s  %d of %d cells wrong%s\n", dt == DT_E4M3 ? "e4m3" : "bf16",
               what[c], bad ? "FAIL" : "PASS", bad, (first[c + 1] - first[c]) * 4096, example);
        all &= bad == 0;
    }
    free(A);
    free(B);
    free(C);
    free(D);
    free(E);
    return all;
}

/* ---- 2. the series -------------------------------------------------------------------- */

typedef struct pcase {
    int series, variant, t, p, q;
    int subnormal; /* an e4m3 operand below 2^-6 was needed */
    float a[MAX_K], b[MAX_K];
    float c, d;
} pcase;

typedef struct clist {
    pcase *v;
    int n, cap;
    int dt, n_instr;
} clist;

static pcase *add_case(clist *l, int series, int variant, int t, int p, int q)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->v = (pcase *)realloc(l->v, (size_t)l->cap * sizeof(pcase));
        if (!l->v) {
            fprintf(stderr, "fp8_acc_probe: out of host memory\n");
            exit(1);
        }
    }
    pcase *c = &l->v[l->n++];
    memset(c, 0, sizeof *c);
    c->series = series;
    c->variant = variant;
    c->t = t;
    c->p = p;
    c->q = q;
    return c;
}

/* a[k]·b[k] = sign·f·2^e exactly, both operands representable (f in [1, 2) with few bits).
 * e4m3: the operands as normal as possible (prefers a split with both >= 2^-6). */
static void set_prod(int dt, pcase *c, int k, double sign, double f, int e)
{
    int best_ea = 0, found = 0, best_sub = 1;
    for (int ea = 8; ea >= -9 && !(found && !best_sub); --ea) {
        const float a = (float)(f * ldexp(1.0, ea)), b = (float)ldexp(1.0, e - ea);
        if (!representable(dt, a) || !representable(dt, b) || a == 0 || b == 0)
            continue;
        const int sub = dt == DT_E4M3 && (a < FX_E4M3_MIN_NORMAL || b < FX_E4M3_MIN_NORMAL);
        if (!found || (best_sub && !sub)) {
            best_ea = ea;
            best_sub = sub;
            found = 1;
        }
    }
    if (dt == DT_BF16) { /* no range problem: split the exponent in halves */
        best_ea = e / 2;
        found = 1;
        best_sub = 0;
    }
    if (!found) {
        fprintf(stderr, "fp8_acc_probe: internal: no operands for %g·2^%d\n", f, e);
        exit(1);
    }
    c->a[k] = (float)(sign * f * ldexp(1.0, best_ea));
    c->b[k] = (float)ldexp(1.0, e - best_ea);
    c->subnormal |= best_sub;
}

static void run_cases(clist *l, int layout)
{
    const int k = l->n_instr * k_per_instr(l->dt);
    const int tiles = (l->n + 63) / 64;
    float *A = (float *)xcalloc((size_t)tiles * 64 * k, sizeof(float));
    float *B = (float *)xcalloc((size_t)tiles * 64 * k, sizeof(float));
    float *C = (float *)xcalloc((size_t)tiles * 4096, sizeof(float));
    float *D = (float *)xcalloc((size_t)tiles * 4096, sizeof(float));
    for (int i = 0; i < l->n; ++i) {
        const int t = i / 64, r = i % 64;
        memcpy(A + ((size_t)t * 64 + r) * k, l->v[i].a, (size_t)k * sizeof(float));
        memcpy(B + ((size_t)t * 64 + r) * k, l->v[i].b, (size_t)k * sizeof(float));
        C[(size_t)t * 4096 + r * 65] = l->v[i].c;
    }
    run_tiles(l->dt, layout, l->n_instr, tiles, A, B, C, D);
    for (int i = 0; i < l->n; ++i)
        l->v[i].d = D[(size_t)(i / 64) * 4096 + (i % 64) * 65];
    free(A);
    free(B);
    free(C);
    free(D);
}

/* Series numbers. */
enum {
    S1_SMALL = 1,
    S2_C_BIG,
    S3_C_SMALL,
    S4_C_ALONE,
    S5_C_PLUS_ONE,
    S6_CANCEL,
    S7_SIGNIFICAND,
    S8_PAIRS,
    S9_ALL_SMALL
};

#define E_BIG 16 /* the large product 2^16 = 2^8·2^8 (e4m3's largest power-of-two square) */

static int t_max(int dt)
{
    /* e4m3: 1.5·2^(16-33) = (3·2^-9)·2^-9 is the smallest product of significand 1.5 */
    return dt == DT_E4M3 ? 33 : 48;
}

static const int pair_t_e4m3[] = {10, 12, 13, 14, 16, 20};
static const int pair_t_bf16[] = {20, 22, 24, 25, 26, 28};

static void build_series(clist *l)
{
    const int dt = l->dt, K = k_per_instr(dt), T = t_max(dt);
    /* S1: big 2^E at k=0 (variants 6, 7: -2^E), small ones from k=1 */
    static const double s1_sign[8] = {1, -1, 1, -1, 1, -1, 1, 1};
    static const double s1_f[8] = {1, 1, 1.5, 1.5, 1, 1, 1, 1};
    static const int s1_many[8] = {0, 0, 0, 0, 1, 1, 0, 1};
    for (int t = 1; t <= T; ++t)
        for (int v = 0; v < 8; ++v) {
            pcase *c = add_case(l, S1_SMALL, v, t, 0, 0);
            set_prod(dt, c, 0, v >= 6 ? -1.0 : 1.0, 1.0, E_BIG);
            for (int k = 1; k < (s1_many[v] ? K : 2); ++k)
                set_prod(dt, c, k, s1_sign[v], s1_f[v], E_BIG - t);
        }
    /* S2: C = ±2^E, products small: one at k=0 (±1, ±1.5 units) or all K of them */
    for (int t = 1; t <= T; ++t)
        for (int v = 0; v < 8; ++v) {
            pcase *c = add_case(l, S2_C_BIG, v, t, 0, 0);
            c->c = v >= 6 ? -(float)ldexp(1.0, E_BIG) : (float)ldexp(1.0, E_BIG);
            for (int k = 0; k < (s1_many[v] ? K : 1); ++k)
                set_prod(dt, c, k, s1_sign[v], s1_f[v], E_BIG - t);
        }
    /* S3: big product ±2^E at k=0, C = ±1 or ±1.5 units of 2^(E-t) */
    static const double s3_c[6] = {1, -1, 1.5, -1.5, 1, 1.5};
    for (int t = 1; t <= 40; ++t)
        for (int v = 0; v < 6; ++v) {
            pcase *c = add_case(l, S3_C_SMALL, v, t, 0, 0);
            set_prod(dt, c, 0, v >= 4 ? -1.0 : 1.0, 1.0, E_BIG);
            c->c = (float)(s3_c[v] * ldexp(1.0, E_BIG - t));
        }
    /* S4: products 0, C = ±(1 + 2^-j) and ±(1.5 + 2^-j) */
    for (int j = 1; j <= 23; ++j)
        for (int v = 0; v < 4; ++v) {
            pcase *c = add_case(l, S4_C_ALONE, v, j, 0, 0);
            c->c = (float)((v & 2 ? 1.5 : 1.0) + ldexp(1.0, -j)) * (v & 1 ? -1.0f : 1.0f);
            if (v >= 2 && j == 1)
                c->c = (v & 1) ? -1.75f : 1.75f; /* 1.5 + 2^-1 = 2: keep a long significand */
        }
    /* S5: C = ±(1 + 2^-j), one product of +1 at k=0 */
    for (int j = 1; j <= 23; ++j)
        for (int v = 0; v < 2; ++v) {
            pcase *c = add_case(l, S5_C_PLUS_ONE, v, j, 0, 0);
            c->c = (float)(1.0 + ldexp(1.0, -j)) * (v ? -1.0f : 1.0f);
            set_prod(dt, c, 0, 1.0, 1.0, 0);
        }
    /* S6: +2^E at p, -2^E at q, +1 unit of 2^(E-t) at r */
    const int s6_pos[3][3] = {{0, 1, 2}, {0, K / 2, K / 2 + 1}, {0, K / 2, 1}};
    for (int t = 1; t <= T; ++t)
        for (int v = 0; v < 3; ++v) {
            pcase *c = add_case(l, S6_CANCEL, v, t, s6_pos[v][0], s6_pos[v][1]);
            set_prod(dt, c, s6_pos[v][0], 1.0, 1.0, E_BIG);
            set_prod(dt, c, s6_pos[v][1], -1.0, 1.0, E_BIG);
            set_prod(dt, c, s6_pos[v][2], 1.0, 1.0, E_BIG - t);
        }
    /* S7: the big product's significand: 2^15 (1·1), 1.5·2^15 (1.5·1), 1.875²·2^14 (both
     * operands 1.875·2^7: the exponent sum is 14, the value 3.52·2^14); small at 2^(15-t),
     * one (v 0-2) or K-1 (v 3-5). */
    for (int t = 1; t <= T; ++t)
        for (int v = 0; v < 6; ++v) {
            pcase *c = add_case(l, S7_SIGNIFICAND, v, t, 0, 0);
            const int kind = v % 3;
            if (kind == 0)
                set_prod(dt, c, 0, 1.0, 1.0, 15);
            else if (kind == 1)
                set_prod(dt, c, 0, 1.0, 1.5, 15);
            else {
                c->a[0] = c->b[0] = (float)(1.875 * 128.0);
            }
            for (int k = 1; k < (v >= 3 ? K : 2); ++k)
                set_prod(dt, c, k, 1.0, 1.0, 15 - t);
        }
    /* S8: big at p, one small at q != p */
    const int *pt = dt == DT_E4M3 ? pair_t_e4m3 : pair_t_bf16;
    const int npt = dt == DT_E4M3 ? (int)(sizeof pair_t_e4m3 / sizeof(int))
                                  : (int)(sizeof pair_t_bf16 / sizeof(int));
    for (int it = 0; it < npt; ++it)
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q) {
                if (p == q)
                    continue;
                pcase *c = add_case(l, S8_PAIRS, 0, pt[it], p, q);
                set_prod(dt, c, p, 1.0, 1.0, E_BIG);
                set_prod(dt, c, q, 1.0, 1.0, E_BIG - pt[it]);
            }
    /* S9: big at p, small everywhere else */
    for (int it = 0; it < npt; ++it)
        for (int p = 0; p < K; ++p) {
            pcase *c = add_case(l, S9_ALL_SMALL, 0, pt[it], p, 0);
            for (int k = 0; k < K; ++k)
                set_prod(dt, c, k, 1.0, 1.0, k == p ? E_BIG : E_BIG - pt[it]);
        }
}

static const pcase *find_case(const clist *l, int series, int variant, int t, int p, int q)
{
    for (int i = 0; i < l->n; ++i) {
        const pcase *c = &l->v[i];
        if (c->series == series && c->variant == variant && c->t == t && c->p == p && c->q == q)
            return c;
    }
    return NULL;
}

/* "kept": (d - base) in units of 2^unit_exp, as text ("31", "1.5", "0", "-1"). */
static void kept_text(char *buf, size_t size, double d, double base, int unit_exp)
{
    const double kept = ldexp(d - base, -unit_exp);
    snprintf(buf, size, "%.6g", kept);
}

static void print_table(const clist *l, int series, int nv, const char *const *heads, int t_from,
                        int t_to, double (*base)(const pcase *), int (*unit)(const pcase *))
{
    printf("  %4s", "t");
    for (int v = 0; v < nv; ++v)
        printf(" %11s", heads[v]);
    printf("\n");
    for (int t = t_from; t <= t_to; ++t) {
        printf("  %4d", t);
        int sub = 0;
        for (int v = 0; v < nv; ++v) {
            const pcase *c = NULL;
            for (int i = 0; i < l->n; ++i)
                if (l->v[i].series == series && l->v[i].variant == v && l->v[i].t == t) {
                    c = &l->v[i];
                    break;
                }
            char b[32] = "-";
            if (c) {
                kept_text(b, sizeof b, c->d, base(c), unit(c));
                sub |= c->subnormal;
            }
            printf(" %11s", b);
        }
        printf("%s\n", sub ? "  (e4m3 subnormal operands)" : "");
    }
}

static double base_big(const pcase *c) /* the large product */
{
    return (double)c->a[0] * (double)c->b[0];
}
static double base_c(const pcase *c)
{
    return (double)c->c;
}
static double base_zero(const pcase *c)
{
    (void)c;
    return 0.0;
}
static int unit_e_t(const pcase *c)
{
    return E_BIG - c->t;
}
static int unit_15_t(const pcase *c)
{
    return 15 - c->t;
}

/* The largest t up to which series/variant keeps exactly `expect` units for every t. */
static int kept_until(const clist *l, int series, int variant, double (*base)(const pcase *),
                      int (*unit)(const pcase *), double expect)
{
    int last = 0;
    for (int t = 1; t <= t_max(l->dt); ++t) {
        const pcase *c = find_case(l, series, variant, t, 0, 0);
        if (!c || ldexp(c->d - base(c), -unit(c)) != expect)
            break;
        last = t;
    }
    return last;
}

static void print_series(const clist *l)
{
    const int dt = l->dt, K = k_per_instr(dt), T = t_max(dt);
    char many_p[16], many_m[16];
    snprintf(many_p, sizeof many_p, "+1x%d", K - 1);
    snprintf(many_m, sizeof many_m, "-1x%d", K - 1);
    const char *h1[8] = {"+1", "-1", "+1.5", "-1.5", many_p, many_m, "big-,+1", "big-,+1xN"};
    printf("\nS1 %s: product +2^%d at k=0 (last two columns: -2^%d), small products of "
           "u = 2^(%d-t) from k=1;\n   kept = (D - big)/u, exact: the column head "
           "(xN: %d of them)\n",
           dt_name[dt], E_BIG, E_BIG, E_BIG, K - 1);
    print_table(l, S1_SMALL, 8, h1, 1, T, base_big, unit_e_t);
    printf("   single +1 kept exactly up to t = %d; %d small ones kept exactly up to t = %d\n",
           kept_until(l, S1_SMALL, 0, base_big, unit_e_t, 1.0), K - 1,
           kept_until(l, S1_SMALL, 4, base_big, unit_e_t, (double)(K - 1)));

    char allp[16], allm[16];
    snprintf(allp, sizeof allp, "+1x%d", K);
    snprintf(allm, sizeof allm, "-1x%d", K);
    const char *h2[8] = {"+1", "-1", "+1.5", "-1.5", allp, allm, "C-,+1", "C-,+1xK"};
    printf("\nS2 %s: C = +2^%d (last two: -2^%d), products of u = 2^(%d-t) (one at k=0, or "
           "all %d); kept = (D - C)/u\n",
           dt_name[dt], E_BIG, E_BIG, E_BIG, K);
    print_table(l, S2_C_BIG, 8, h2, 1, T, base_c, unit_e_t);
    printf("   C big: single +1 kept exactly up to t = %d (compare S1: %d)\n",
           kept_until(l, S2_C_BIG, 0, base_c, unit_e_t, 1.0),
           kept_until(l, S1_SMALL, 0, base_big, unit_e_t, 1.0));

    const char *h3[6] = {"C=+1", "C=-1", "C=+1.5", "C=-1.5", "big-,C=+1", "big-,C=+1.5"};
    printf("\nS3 %s: product +2^%d at k=0 (last two: -2^%d), C in units u = 2^(%d-t); "
           "kept = (D - big)/u\n",
           dt_name[dt], E_BIG, E_BIG, E_BIG);
    print_table(l, S3_C_SMALL, 6, h3, 1, 40, base_big, unit_e_t);

    printf("\nS4 %s: products 0, C with a long significand: D's bits against C's\n", dt_name[dt]);
    printf("  %4s %28s %28s %28s %28s\n", "j", "C=1+2^-j", "C=-(1+2^-j)", "C=1.5+2^-j",
           "C=-(1.5+2^-j)");
    for (int j = 1; j <= 23; ++j) {
        printf("  %4d", j);
        for (int v = 0; v < 4; ++v) {
            const pcase *c = find_case(l, S4_C_ALONE, v, j, 0, 0);
            char b[40];
            snprintf(b, sizeof b, "%08x->%08x%s", float_bits(c->c), float_bits(c->d),
                     c->d == c->c ? " =" : " !");
            printf(" %28s", b);
        }
        printf("\n");
    }

    printf("\nS5 %s: C = ±(1+2^-j) plus one product 1: D - (C+1) in units of 2^-j\n", dt_name[dt]);
    for (int j = 1; j <= 23; ++j) {
        const pcase *p = find_case(l, S5_C_PLUS_ONE, 0, j, 0, 0);
        const pcase *m = find_case(l, S5_C_PLUS_ONE, 1, j, 0, 0);
        printf("  %4d  C>0: %-10.6g C<0: %-10.6g\n", j,
               ldexp((double)p->d - ((double)p->c + 1.0), j),
               ldexp((double)m->d - ((double)m->c + 1.0), j));
    }

    char c1[24], c2[24];
    snprintf(c1, sizeof c1, "0,%d|%d", K / 2, K / 2 + 1);
    snprintf(c2, sizeof c2, "0,%d|1", K / 2);
    const char *h6[3] = {"0,1|2", c1, c2};
    printf("\nS6 %s: +2^%d and -2^%d cancel (at k = the two numbers before '|'), one "
           "u = 2^(%d-t) at k after '|'; kept = D/u (exact: 1)\n",
           dt_name[dt], E_BIG, E_BIG, E_BIG);
    print_table(l, S6_CANCEL, 3, h6, 1, T, base_zero, unit_e_t);

    const char *h7[6] = {"2^15", "1.5*2^15", "1.875^2*2^14", "2^15,N", "1.5*2^15,N", "1.875^2,N"};
    printf("\nS7 %s: large product of another significand at k=0, small u = 2^(15-t) "
           "(one, or N = %d); kept = (D - big)/u\n",
           dt_name[dt], K - 1);
    print_table(l, S7_SIGNIFICAND, 6, h7, 1, T, base_big, unit_15_t);
    for (int v = 0; v < 3; ++v)
        printf("   %-13s single +u kept exactly up to t = %d\n", h7[v],
               kept_until(l, S7_SIGNIFICAND, v, base_big, unit_15_t, 1.0));
}

/* S8: the lost/kept map of each t, and which G explains it. Returns the G that fits the
 * most informative t (a map with both lost and kept pairs), 0 when none, -1 when every map
 * was uniform (all lost or all kept). */
static int print_grouping(const clist *l)
{
    const int dt = l->dt, K = k_per_instr(dt);
    const int *pt = dt == DT_E4M3 ? pair_t_e4m3 : pair_t_bf16;
    const int npt = dt == DT_E4M3 ? (int)(sizeof pair_t_e4m3 / sizeof(int))
                                  : (int)(sizeof pair_t_bf16 / sizeof(int));
    int found_g = -1;
    printf("\nS8 %s: +2^%d at k=p, one +2^(%d-t) at k=q; map row p, column q: 1 = kept, "
           "0 = lost, x = other\n",
           dt_name[dt], E_BIG, E_BIG);
    for (int it = 0; it < npt; ++it) {
        const int t = pt[it];
        char map[32][33];
        int lost = 0, kept = 0, other = 0;
        for (int p = 0; p < K; ++p) {
            for (int q = 0; q < K; ++q) {
                if (p == q) {
                    map[p][q] = '.';
                    continue;
                }
                const pcase *c = find_case(l, S8_PAIRS, 0, t, p, q);
                const double k = ldexp((double)c->d - ldexp(1.0, E_BIG), t - E_BIG);
                map[p][q] = k == 1.0 ? '1' : k == 0.0 ? '0' : 'x';
                lost += k == 0.0;
                kept += k == 1.0;
                other += k != 0.0 && k != 1.0;
            }
            map[p][K] = 0;
        }
        /* which G (1..K, powers of two) gives lost <=> same group */
        char fits[64] = "";
        for (int g = 1; g <= K; g *= 2) {
            int ok = 1;
            for (int p = 0; p < K && ok; ++p)
                for (int q = 0; q < K && ok; ++q)
                    if (p != q && (map[p][q] == '0') != (p / g == q / g))
                        ok = 0;
            if (ok) {
                char b[8];
                snprintf(b, sizeof b, " G=%d", g);
                strncat(fits, b, sizeof fits - strlen(fits) - 1);
            }
        }
        printf("  t=%2d: %d pairs kept, %d lost, %d other;", t, kept, lost, other);
        if (kept == 0 && other == 0 && t <= 20) { /* fp32 would have kept 2^-t of the big one */
            printf(" all lost, though fp32 keeps 2^-%d: every k in one group (G=%d)\n", t, K);
            if (found_g < 0)
                found_g = K;
            continue;
        }
        if (kept == 0 || lost == 0) {
            printf(" uniform (%s), says nothing of the groups\n", kept ? "all kept" : "all lost");
            continue;
        }
        printf(" fits:%s\n", fits[0] ? fits : " no G of 1, 2, 4, ... (map below)");
        for (int p = 0; p < K; ++p)
            printf("        p=%2d %s\n", p, map[p]);
        if (fits[0] && found_g <= 0)
            found_g = atoi(strstr(fits, "G=") + 2);
        else if (!fits[0])
            found_g = 0;
    }
    printf("\nS9 %s: +2^%d at k=p, +2^(%d-t) at every other k: how many of the %d survive\n",
           dt_name[dt], E_BIG, E_BIG, K - 1);
    for (int it = 0; it < npt; ++it) {
        printf("  t=%2d:", pt[it]);
        for (int p = 0; p < K; ++p) {
            const pcase *c = find_case(l, S9_ALL_SMALL, 0, pt[it], p, 0);
            printf(" %g", ldexp((double)c->d - ldexp(1.0, E_BIG), pt[it] - E_BIG));
        }
        printf("\n");
    }
    return found_g;
}

/* ---- 3. the fit ----------------------------------------------------------------------- */

typedef struct fit_result {
    fx_fp8_acc_params prm;
    int mismatches;
} fit_result;

#define N_BEST 12
#define FIT_GIVE_UP 400

static int same_float(float x, float y)
{
    return x == y || (isnan(x) && isnan(y));
}

/* Every model of the grid against the cases; the N_BEST best, fewest mismatches first.
 * Returns how many were kept. */
static int fit(const pcase *const *cs, int n, int K, fit_result best[N_BEST])
{
    int nbest = 0;
    for (int g = 1; g <= K; g *= 2)
        for (int bits = 6; bits <= 45; ++bits)
            for (int tr = 0; tr < 3; ++tr)
                for (int cm = 0; cm < 2; ++cm)
                    for (int orr = 0; orr < 3; ++orr)
                        for (int ef = 0; ef < 2; ++ef) {
                            fx_fp8_acc_params prm;
                            prm.group = g;
                            prm.frac_bits = bits;
                            prm.term_round = (fx_acc_round)tr;
                            prm.c_mode = (fx_acc_c_mode)cm;
                            prm.out_round = (fx_acc_round)orr;
                            prm.emax_fields = ef;
                            const int limit =
                                nbest == N_BEST ? best[N_BEST - 1].mismatches : FIT_GIVE_UP;
                            int bad = 0;
                            for (int i = 0; i < n && bad <= limit; ++i) {
                                const int kk = cs[i]->series >= 100 ? cs[i]->t : K;
                                bad += !same_float(
                                    fx_fp8_dot_model(cs[i]->a, cs[i]->b, kk, cs[i]->c, &prm),
                                    cs[i]->d);
                            }
                            if (bad > limit || bad > FIT_GIVE_UP)
                                continue;
                            int at = nbest < N_BEST ? nbest++ : N_BEST - 1;
                            while (at > 0 && best[at - 1].mismatches > bad) {
                                best[at] = best[at - 1];
                                --at;
                            }
                            best[at].prm = prm;
                            best[at].mismatches = bad;
                        }
    return nbest;
}

/* ---- 4. random inputs ----------------------------------------------------------------- */

typedef struct rand_set {
    int dt, n_instr, tiles, k, with_c;
    float *A, *B, *C, *D;
} rand_set;

/* Values like stage 10's codes: normals scaled so that the tile's largest maps near the
 * format's top (e4m3: 448 for |x| = 4.5σ, then rounded to e4m3; bf16: unit normals rounded). */
static float draw(int dt)
{
    const double x = rng_normal();
    if (dt == DT_E4M3)
        return fx_e4m3_round((float)(x * (448.0 / 4.5)));
    return bits_float(float_bits((float)x) & 0xFFFF0000u); /* truncated to bf16: exact */
}

static void make_random(rand_set *r, int dt, int n_instr, int tiles, int with_c)
{
    r->dt = dt;
    r->n_instr = n_instr;
    r->tiles = tiles;
    r->k = n_instr * k_per_instr(dt);
    r->with_c = with_c;
    const size_t nab = (size_t)tiles * 64 * r->k, nc = (size_t)tiles * 4096;
    r->A = (float *)xcalloc(nab, sizeof(float));
    r->B = (float *)xcalloc(nab, sizeof(float));
    r->C = (float *)xcalloc(nc, sizeof(float));
    r->D = (float *)xcalloc(nc, sizeof(float));
    for (size_t i = 0; i < nab; ++i) {
        r->A[i] = draw(dt);
        r->B[i] = draw(dt);
    }
    if (with_c) /* C of the size of a dot product of the same inputs */
        for (size_t i = 0; i < nc; ++i)
            r->C[i] = (float)(rng_normal() *
                              (dt == DT_E4M3 ? 1e5 * sqrt(r->k / 32.0) : sqrt((double)r->k)));
}

static void random_stats(const rand_set *r, const fx_fp8_acc_params *prm, int have_model)
{
    double worst_hw = 0, worst_f32 = 0, worst_model_gap = 0;
    long match = 0, n = 0, hw_exact = 0;
    float *tmp = (float *)xcalloc((size_t)r->k, sizeof(float));
    for (int t = 0; t < r->tiles; ++t)
        for (int m = 0; m < 64; ++m)
            for (int j = 0; j < 64; ++j) {
                const float *a = r->A + ((size_t)t * 64 + m) * r->k;
                const float *b = r->B + ((size_t)t * 64 + j) * r->k;
                const float c = r->C[(size_t)t * 4096 + m * 64 + j];
                const float d = r->D[(size_t)t * 4096 + m * 64 + j];
                const double exact = fx_fp8_dot_exact(a, b, r->k, c);
                double mag = fabs((double)c);
                for (int k = 0; k < r->k; ++k)
                    mag += fabs((double)a[k] * (double)b[k]);
                if (mag == 0)
                    continue;
                const float f32 = fx_dot_f32(a, b, r->k) + c;
                const double e_hw = fabs((double)d - exact) / mag;
                const double e_f32 = fabs((double)f32 - exact) / mag;
                worst_hw = e_hw > worst_hw ? e_hw : worst_hw;
                worst_f32 = e_f32 > worst_f32 ? e_f32 : worst_f32;
                hw_exact += (double)d == exact;
                if (have_model) {
                    const float mo = fx_fp8_dot_model(a, b, r->k, c, prm);
                    match += same_float(mo, d);
                    const double gap = fabs((double)mo - (double)d) / mag;
                    worst_model_gap = gap > worst_model_gap ? gap : worst_model_gap;
                }
                ++n;
            }
    free(tmp);
    printf("  k=%3d%s %6ld dots: max|D-exact|/S|ab| = %.3g (2^%.2f), fp32 sum: %.3g (2^%.2f); "
           "D exact in %ld",
           r->k, r->with_c ? " +C" : "   ", n, worst_hw, worst_hw > 0 ? log2(worst_hw) : -INFINITY,
           worst_f32, worst_f32 > 0 ? log2(worst_f32) : -INFINITY, hw_exact);
    if (have_model)
        printf("; model = D in %ld of %ld (max gap %.3g)", match, n, worst_model_gap);
    printf("\n");
}

/* ---- main ----------------------------------------------------------------------------- */

int main(void)
{
    const char *emu = getenv("FX_ACC_PROBE_EMULATE");
    if (emu && *emu) {
        if (fx_fp8_acc_parse(emu, &emulated)) {
            fprintf(stderr, "fp8_acc_probe: FX_ACC_PROBE_EMULATE: not a model: %s\n", emu);
            return 2;
        }
        emulate = 1;
        printf("fp8_acc_probe: EMULATED on the CPU by the model %s (no GPU: a check of the "
               "analysis, not a measurement)\n",
               emu);
    }
    if (!emulate) {
        int ndev = 0;
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
            printf("fp8_acc_probe: no CUDA device: skipped\n");
            return 77;
        }
        cudaDeviceProp prop;
        CUDA_OK(cudaGetDeviceProperties(&prop, 0));
        int driver = 0, runtime = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        printf("fp8_acc_probe: %s, sm_%d%d, driver API %d, runtime %d\n", prop.name, prop.major,
               prop.minor, driver, runtime);
        if (prop.major != 9) {
            printf("fp8_acc_probe: needs sm_90 (Hopper): skipped\n");
            return 77;
        }
    }
    /* 1. layouts */
    int layout_of[2] = {-1, -1};
    printf("\n== 1. layout sanity (must PASS before anything below means anything) ==\n");
    for (int dt = 0; dt < 2; ++dt)
        for (int lay = 0; lay < N_LAYOUTS && layout_of[dt] < 0; ++lay) {
            /* the fallbacks run only when the project's layout failed */
            printf(" %s, layout %d: %s\n", dt_name[dt], lay, layout_name[lay]);
            if (layout_sanity(dt, lay) && layout_of[dt] < 0)
                layout_of[dt] = lay;
        }
    for (int dt = 0; dt < 2; ++dt)
        printf(" %s: %s\n", dt_name[dt],
               layout_of[dt] >= 0 ? (layout_of[dt] == 0 ? "layout 0 PASS (used below)"
                                                        : "layout 0 FAILED, a fallback passed "
                                                          "(used below)")
                                  : "no layout passed: the series below are NOT trustworthy");

    fit_result best[2][N_BEST];
    int nbest[2] = {0, 0}, groups[2] = {0, 0};
    clist lists[2];
    for (int dt = 0; dt < 2; ++dt) {
        const int lay = layout_of[dt] >= 0 ? layout_of[dt] : 0;
        const int K = k_per_instr(dt);
        clist *l = &lists[dt];
        memset(l, 0, sizeof *l);
        l->dt = dt;
        l->n_instr = 1;
        build_series(l);
        run_cases(l, lay);
        printf("\n== 2. %s: %d cases (layout %d) ==\n", dt_name[dt], l->n, lay);
        print_series(l);
        groups[dt] = print_grouping(l);

        /* 3. the fit: every case of the series, plus 1024 random dots of k = K (with C) and
         * 256 each of the chained k (C = 0); random cases carry their k in t, series >= 100. */
        rand_set fitr[3];
        make_random(&fitr[0], dt, 1, 1, 1);
        make_random(&fitr[1], dt, 2, 1, 0);
        make_random(&fitr[2], dt, 4, 1, 0);
        for (int i = 0; i < 3; ++i)
            run_tiles(dt, lay, fitr[i].n_instr, 1, fitr[i].A, fitr[i].B, fitr[i].C, fitr[i].D);
        clist extra;
        memset(&extra, 0, sizeof extra);
        for (int i = 0; i < 3; ++i)
            for (int cell = 0; cell < (i == 0 ? 1024 : 256); ++cell) {
                const int m = cell / 64 % 64, j = (cell * 7 + cell / 64) % 64;
                pcase *c = add_case(&extra, 100 + i, 0, fitr[i].k, m, j);
                memcpy(c->a, fitr[i].A + (size_t)m * fitr[i].k, (size_t)fitr[i].k * 4);
                memcpy(c->b, fitr[i].B + (size_t)j * fitr[i].k, (size_t)fitr[i].k * 4);
                c->c = fitr[i].C[m * 64 + j];
                c->d = fitr[i].D[m * 64 + j];
            }
        const int ncs = l->n + extra.n;
        const pcase **cs = (const pcase **)xcalloc((size_t)ncs, sizeof(pcase *));
        for (int i = 0; i < l->n; ++i)
            cs[i] = &l->v[i];
        for (int i = 0; i < extra.n; ++i)
            cs[l->n + i] = &extra.v[i];
        nbest[dt] = fit(cs, ncs, K, best[dt]);
        printf("\n== 3. %s: the models of fx_fp8_acc.h against all %d cases (%d series, %d "
               "random) ==\n",
               dt_name[dt], ncs, l->n, extra.n);
        if (nbest[dt] == 0)
            printf("  every model of the grid misses more than %d cases\n", FIT_GIVE_UP);
        for (int i = 0; i < nbest[dt]; ++i) {
            char b[96];
            fx_fp8_acc_format(&best[dt][i].prm, b, sizeof b);
            printf("  %-50s %d mismatches%s\n", b, best[dt][i].mismatches,
                   best[dt][i].mismatches == 0 ? "  (bit for bit on every case)" : "");
        }
        if (nbest[dt] > 0 && best[dt][0].mismatches > 0) {
            printf("  first mismatches of the best:\n");
            int shown = 0;
            for (int i = 0; i < ncs && shown < 12; ++i) {
                const int kk = cs[i]->series >= 100 ? cs[i]->t : K;
                const float mo =
                    fx_fp8_dot_model(cs[i]->a, cs[i]->b, kk, cs[i]->c, &best[dt][0].prm);
                if (same_float(mo, cs[i]->d))
                    continue;
                printf("    series %d variant %d t %d p %d q %d: GPU %a, model %a, exact %a\n",
                       cs[i]->series, cs[i]->variant, cs[i]->t, cs[i]->p, cs[i]->q, cs[i]->d, mo,
                       fx_fp8_dot_exact(cs[i]->a, cs[i]->b, kk, cs[i]->c));
                ++shown;
            }
        }

        /* 4. random inputs like S = Q8·K8ᵀ */
        printf("\n== 4. %s: random inputs (%s), 4 tiles of 64x64 dots each ==\n", dt_name[dt],
               dt == DT_E4M3 ? "normal, scaled so 4.5 sigma = 448, rounded to e4m3"
                             : "unit normal, truncated to bf16");
        const int chains[4] = {1, 2, 4, 8};
        for (int ci = -1; ci < 4; ++ci) {
            rand_set r;
            const int ni = ci < 0 ? 1 : chains[ci];
            make_random(&r, dt, ni, 4, ci < 0);
            run_tiles(dt, lay, ni, 4, r.A, r.B, r.C, r.D);
            random_stats(&r, nbest[dt] ? &best[dt][0].prm : NULL, nbest[dt] > 0);
            free(r.A);
            free(r.B);
            free(r.C);
            free(r.D);
        }
        for (int i = 0; i < 3; ++i) {
            free(fitr[i].A);
            free(fitr[i].B);
            free(fitr[i].C);
            free(fitr[i].D);
        }
        free(extra.v);
        free(cs);
    }

    /* 5. summary */
    printf("\n== 5. summary ==\n");
    for (int dt = 0; dt < 2; ++dt) {
        const clist *l = &lists[dt];
        const int K = k_per_instr(dt);
        printf(" %s (layout %s):\n", dt_name[dt],
               layout_of[dt] >= 0 ? "checked" : "NOT checked: do not trust this");
        printf("   read off the tables: one small product kept up to t = %d below the largest "
               "(%d of them up to t = %d); with C as the large term up to t = %d; "
               "grouping (S8): %s\n",
               kept_until(l, S1_SMALL, 0, base_big, unit_e_t, 1.0), K - 1,
               kept_until(l, S1_SMALL, 4, base_big, unit_e_t, (double)(K - 1)),
               kept_until(l, S2_C_BIG, 0, base_c, unit_e_t, 1.0),
               groups[dt] > 0    ? (groups[dt] == K ? "one group of all k" : "groups (see S8)")
               : groups[dt] == 0 ? "no power-of-two group size fits (see S8)"
                                 : "not resolved (every map uniform)");
        if (groups[dt] > 0 && groups[dt] < K)
            printf("   S8 groups: G = %d\n", groups[dt]);
        if (nbest[dt] > 0) {
            char words[400], text[96];
            fx_fp8_acc_describe(&best[dt][0].prm, K, words, sizeof words);
            fx_fp8_acc_format(&best[dt][0].prm, text, sizeof text);
            printf("   %s k%d: %s%s\n", dt == DT_E4M3 ? "e4m3" : "bf16", K, words,
                   best[dt][0].mismatches == 0 ? "" : "  [BEST FIT ONLY: it misses cases]");
            int ties = 0;
            for (int i = 1; i < nbest[dt]; ++i)
                ties += best[dt][i].mismatches == best[dt][0].mismatches;
            if (ties)
                printf("   %d other model(s) fit as well (listed in 3): the knobs where they "
                       "differ are not determined by these cases\n",
                       ties);
            printf("   model: %s %s  (%d mismatches of the fit's cases)\n",
                   dt == DT_E4M3 ? "e4m3" : "bf16", text, best[dt][0].mismatches);
        } else {
            printf("   no model of the grid fits: read the tables\n");
        }
    }
    free(lists[0].v);
    free(lists[1].v);
    return layout_of[0] >= 0 && layout_of[1] >= 0 ? 0 : 1;
}
