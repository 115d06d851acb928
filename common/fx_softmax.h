/*
 * fx_softmax.h — the one constant the fast softmax of the stages (03–09) and the CPU model
 * of stage 03 share: where the fast path's range ends.
 *
 * The fast path takes P relative to R = m·c rounded up, c = softmax_scale·log2(e), in one FFMA
 * per score (common/fx_exact_rows.cuh draws why). A row whose last |R| is at or above
 * FX_SOFTMAX_FAST_BELOW, or whose ℓ is not finite, is computed again on the exact path: from
 * 2^24 on fp32's ulp is 2, so the row's largest P may fall to 1/4 and, far past it, to 0.
 */
#ifndef FX_SOFTMAX_H
#define FX_SOFTMAX_H

#define FX_SOFTMAX_FAST_BELOW 0x1p24f

/* ln 2: the LSE in natural-log units from the reference R, in log2 units (LSE = R·ln 2 + ln ℓ). */
#define FX_LN2 0.693147180559945309f

#endif
