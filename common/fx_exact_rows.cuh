/*
 * fx_exact_rows.cuh — the forward's exact path: rows of O and LSE computed again, slowly and
 * exactly, where the fast softmax of stages 03–09 could not represent them.
 *
 * The fast softmax (stage 05's softmax state draws it in full) takes P relative to R = m·c
 * rounded up to fp32, c = softmax_scale·log2(e), in one FFMA per score, P = 2^(fma(S, c, −R)).
 * Since R >= m·c no P exceeds 1, so no P, ℓ or O overflows whatever the logits. Each block's
 * P are exact relative to that block's R (one rounding each), the online rescale 2^(R_old −
 * R_new) carries them exactly to the next R, and the LSE is R·ln 2 + ln ℓ: the fast path is
 * exact up to its ordinary rounding as long as the row's largest P, 2^(m·c − R) for the last
 * R, keeps the row's P above fp32's smallest normal — and 2^(m·c − R) > 2^−ulp(R), which is
 * above 1/2 while |R| < 2^24 (FX_SOFTMAX_FAST_BELOW). An earlier block whose |R| was larger
 * lies below the last R (R only grows), and its P weigh 2^(R_j − R_last) or less there: what
 * it lost to its own small factor is lost in the last reference anyway, as in exact
 * arithmetic. So one test per row after the mainloop decides — the last |R| below 2^24, and ℓ
 * finite (a NaN input makes it NaN) — and it costs nothing inside the loop. The rows that
 * fail it (in practice only logits of magnitude ~1e7 and more, which no trained model
 * produces) come here.
 *
 * One warp computes one row at a time, from Q, K and V in global memory: lane l holds the
 * columns l, l + 32, …; S = q·k in fp32 (a butterfly sum: every lane gets the same value);
 * two passes over the keys, the first for m, the second for P = 2^((S − m)·c) — the
 * subtraction first, so that the maximum's P is exactly 1 and none is larger — ℓ and O = P·V
 * in fp32. O = 0 and LSE = −inf for a row that sees no key, as everywhere; a NaN ℓ (NaN
 * inputs) keeps a NaN O and gets LSE = −inf, as softmax_finalize does. It is the slowest code
 * in the repository (every score computed twice, one warp per row, K and V read from L2 for
 * every row) and stays out of the mainloop's registers: a __noinline__ function, called in
 * a branch after the mainloop where the fast path's accumulators are no longer needed.
 *
 * Layouts (fx_problem.h): rows of Q, K, V and O are head_dim (V, O: head_dim_v) contiguous
 * elements, row_stride elements apart; LSE rows are consecutive floats (natural log).
 * Causal is bottom-right aligned: row i sees key j iff j <= i + seqlen_k − seqlen_q.
 *
 * Sources: FA2 Algorithm 1 (the softmax it recomputes); docs/05_wgmma.md, the softmax state
 * (the argument, drawn); docs/stage_shape.md, "The check after the loop" (what it measured).
 */
#ifndef FX_EXACT_ROWS_CUH
#define FX_EXACT_ROWS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "fx_softmax.h"

/* The widest row a warp holds: head_dim 256 over 32 lanes. */
#define FX_EXACT_MAX_COLS_PER_LANE 8

/* One (batch, head) slice — or one sequence of a varlen batch — for fx_exact_rows. The
 * pointers are its row 0 (Q, O, LSE) and key 0 (K, V, of the query head's kv head). */
struct fx_exact_rows_args {
    const void *q, *k, *v;  // the stage's Element (bf16 or fp16)
    void *o;
    float *lse;
    int64_t q_row_stride, k_row_stride, v_row_stride, o_row_stride;  // elements
    int seqlen_q, seqlen_k;  // of this slice or sequence (the causal diagonal's alignment)
    int head_dim, head_dim_v;
    int causal;
    float softmax_scale;  // natural-log units, for the LSE
    float scale_log2;     // softmax_scale · log2(e)
};

namespace {

__device__ __forceinline__ float fx_exact_load(const __nv_bfloat16 *x)
{
    return __bfloat162float(*x);
}
__device__ __forceinline__ float fx_exact_load(const __half *x)
{
    return __half2float(*x);
}
__device__ __forceinline__ void fx_exact_store(__nv_bfloat16 *x, float v)
{
    *x = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void fx_exact_store(__half *x, float v)
{
    *x = __float2half_rn(v);
}

/* The exact path's view of query head `head` of batch `batch` in a stage's kernel parameters
 * p (every forward's FwdParams names these fields alike: q, k, v, o, lse, their batch, head
 * and row strides in elements, seqlen_q, seqlen_k, heads_q, q_per_kv, softmax_scale,
 * scale_log2): its rows of Q, O and LSE from row 0, the keys of its kv head from key 0, the
 * whole sequences. */
template <class Params>
__device__ __forceinline__ fx_exact_rows_args fx_exact_rows_view(const Params &p, int batch,
                                                                 int head, int head_dim,
                                                                 int head_dim_v, bool causal)
{
    constexpr int kElemBytes = 2;  // bf16 and fp16
    const int head_kv = head / p.q_per_kv;
    fx_exact_rows_args a;
    a.q = static_cast<const char *>(p.q) +
          (batch * p.q_batch_stride + head * p.q_head_stride) * kElemBytes;
    a.k = static_cast<const char *>(p.k) +
          (batch * p.k_batch_stride + head_kv * p.k_head_stride) * kElemBytes;
    a.v = static_cast<const char *>(p.v) +
          (batch * p.v_batch_stride + head_kv * p.v_head_stride) * kElemBytes;
    a.o =
        static_cast<char *>(p.o) + (batch * p.o_batch_stride + head * p.o_head_stride) * kElemBytes;
    a.lse = p.lse + ((int64_t)batch * p.heads_q + head) * p.seqlen_q;
    a.q_row_stride = p.q_row_stride;
    a.k_row_stride = p.k_row_stride;
    a.v_row_stride = p.v_row_stride;
    a.o_row_stride = p.o_row_stride;
    a.seqlen_q = p.seqlen_q;
    a.seqlen_k = p.seqlen_k;
    a.head_dim = head_dim;
    a.head_dim_v = head_dim_v;
    a.causal = causal;
    a.softmax_scale = p.softmax_scale;
    a.scale_log2 = p.scale_log2;
    return a;
}

/* S = q·k of key `key` over the warp: this lane's columns, then a butterfly over the 32
 * lanes (the same sum, in the same order, in every lane and in both passes). */
template <class Element>
__device__ __forceinline__ float fx_exact_score(const fx_exact_rows_args &a,
                                                const float (&q)[FX_EXACT_MAX_COLS_PER_LANE],
                                                int key, int lane)
{
    const Element *k_row = static_cast<const Element *>(a.k) + key * a.k_row_stride;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < FX_EXACT_MAX_COLS_PER_LANE; ++i) {
        const int col = lane + 32 * i;
        if (col < a.head_dim)
            s = fmaf(q[i], fx_exact_load(k_row + col), s);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, offset);
    return s;
}

/*
 * Rows [row_begin, row_end) of the slice `a`, computed by the calling warp (all 32 lanes, in
 * step), written to O (rounded to Element once) and LSE. The caller has voted that some row
 * of its group left the fast path's range (FX_SOFTMAX_FAST_BELOW) and must not also store the
 * fast path's values for these rows.
 */
template <class Element>
__device__ __noinline__ void fx_exact_rows(const fx_exact_rows_args a, int row_begin, int row_end)
{
    const int lane = (int)(threadIdx.x % 32);
    for (int row = row_begin; row < row_end; ++row) {
        const Element *q_row = static_cast<const Element *>(a.q) + row * a.q_row_stride;
        float q[FX_EXACT_MAX_COLS_PER_LANE], o[FX_EXACT_MAX_COLS_PER_LANE];
#pragma unroll
        for (int i = 0; i < FX_EXACT_MAX_COLS_PER_LANE; ++i) {
            const int col = lane + 32 * i;
            q[i] = col < a.head_dim ? fx_exact_load(q_row + col) : 0.f;
            o[i] = 0.f;
        }
        int key_end = a.seqlen_k;  // keys [0, key_end) are visible to this row
        if (a.causal)
            key_end = min(key_end, row + 1 + a.seqlen_k - a.seqlen_q);

        float m = -INFINITY;
        for (int key = 0; key < key_end; ++key)
            m = fmaxf(m, fx_exact_score<Element>(a, q, key, lane));

        float l = 0.f;
        for (int key = 0; key < key_end; ++key) {
            const float p = exp2f((fx_exact_score<Element>(a, q, key, lane) - m) * a.scale_log2);
            l += p;
            const Element *v_row = static_cast<const Element *>(a.v) + key * a.v_row_stride;
#pragma unroll
            for (int i = 0; i < FX_EXACT_MAX_COLS_PER_LANE; ++i) {
                const int col = lane + 32 * i;
                if (col < a.head_dim_v)
                    o[i] = fmaf(p, fx_exact_load(v_row + col), o[i]);
            }
        }

        // As softmax_finalize: ℓ = 0 (no key) gives O = 0 and LSE = -inf; a NaN ℓ keeps O NaN.
        const bool empty = (l == 0.f || l != l);
        const float inv_l = empty ? 0.f : 1.f / l;
        Element *o_row = static_cast<Element *>(a.o) + row * a.o_row_stride;
#pragma unroll
        for (int i = 0; i < FX_EXACT_MAX_COLS_PER_LANE; ++i) {
            const int col = lane + 32 * i;
            if (col < a.head_dim_v)
                fx_exact_store(o_row + col, o[i] * inv_l);
        }
        if (lane == 0)
            a.lse[row] = empty ? -INFINITY : m * a.softmax_scale + logf(l);
    }
}

}  // namespace

#endif
