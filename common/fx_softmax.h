/*
 * fx_softmax.h — the one constant the fast softmax of the stages (03–09) and the CPU model
 * of stage 03 share: where the fast path's range ends.
 *
 * The fast path takes P relative to R = round(m·c), c = softmax_scale·log2(e), in one FFMA
 * per score (common/fx_exact_rows.cuh draws why). A row whose last |R| is at or above
 * FX_SOFTMAX_FAST_BELOW, or whose ℓ is not finite, is computed again on the exact path: from
 * 2^24 on fp32's ulp is 2, so R may be off from m·c by 1 and each P by a factor 2, and past
 * 2^31 by more than fp32 can hold.
 */
#ifndef FX_SOFTMAX_H
#define FX_SOFTMAX_H

#define FX_SOFTMAX_FAST_BELOW 0x1p24f

#endif
