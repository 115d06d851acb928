/*
 * test_fp8_model.c — the e4m3 forward's CPU model (common/fx_fp8_model.h): the descale
 * algebra, the max offset, masking with zero descales, and the error the model adds to
 * exact attention on its own (dequantized) inputs.
 *
 * The algebra is tested where it has an exact answer: a tensor that per-tensor scaling
 * represents exactly is represented again per block, with block descales that differ by up
 * to 2^16 and codes scaled down to match; both describe the same real numbers, and since
 * every descale is a power of two times the per-tensor one, every fp32 operation of the one
 * path is that of the other times a power of two. So the two outputs must be equal bit for
 * bit. A running max kept in raw (unscaled) units, a K descale applied once per row, or a
 * per-block V descale applied at the end would each break that.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fx_check.h"
#include "fx_draw.h"
#include "fx_fp8.h"
#include "fx_fp8_model.h"
#include "fx_host.h"
#include "fx_model_check.h"
#include "fx_reference.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* The codes of the values in [4, 448] (0x48 = 1.0·2^2 .. 0x7E = 1.75·2^8): a value of this
 * range times 2^-8 is still a normal e4m3 value (>= 2^-6), so a block may be scaled down by
 * up to 2^8 without losing a bit. */
enum { kCodeLow = 0x48, kCodeHigh = 0x7e, kMaxShift = 8 };

/* Element e of a tensor of e4m3 codes: zero one time in 16, else a random sign and a code
 * in [kCodeLow, kCodeHigh]. */
static uint8_t random_code(uint64_t seed, uint64_t stream, size_t e)
{
    const uint64_t u = fx_draw_u64(seed, stream, e);
    if ((u & 15u) == 0)
        return 0;
    const uint8_t magnitude = (uint8_t)(kCodeLow + (u >> 8) % (kCodeHigh - kCodeLow + 1));
    return (u & 16u) ? (uint8_t)(0x80 | magnitude) : magnitude;
}

/* t's codes random, every descale `delta` (the per-tensor representation). */
static void fill_per_tensor(fx_fp8_tensor *t, float delta, uint64_t seed, uint64_t stream)
{
    for (size_t e = 0; e < fx_fp8_tensor_numel(t); ++e)
        t->codes[e] = random_code(seed, stream, e);
    for (int i = 0; i < t->batch * t->heads * fx_fp8_tensor_blocks(t); ++i)
        t->descale[i] = delta;
}

/* The same real numbers per block: block (b, h, n) gets descale δ·2^s and codes c·2^-s,
 * s in [0, kMaxShift] drawn per block. Returns how many distinct shifts it used. */
static int rescale_per_block(const fx_fp8_tensor *from, fx_fp8_tensor *to, uint64_t seed)
{
    const int n_blocks = fx_fp8_tensor_blocks(from);
    int used[kMaxShift + 1] = {0}, distinct = 0;
    for (int b = 0; b < from->batch; ++b)
        for (int h = 0; h < from->heads; ++h)
            for (int n = 0; n < n_blocks; ++n) {
                const size_t slot = ((size_t)b * from->heads + h) * n_blocks + n;
                const int s = (int)(fx_draw_u64(seed, 77, slot) % (kMaxShift + 1));
                distinct += used[s]++ == 0;
                to->descale[slot] = ldexpf(from->descale[slot], s);
                for (int row = n * from->block_rows;
                     row < (n + 1) * from->block_rows && row < from->seqlen; ++row) {
                    const size_t at =
                        (((size_t)b * from->seqlen + row) * from->heads + h) * from->head_dim;
                    for (int d = 0; d < from->head_dim; ++d)
                        to->codes[at + d] =
                            fx_e4m3_from_float(ldexpf(fx_e4m3_to_float(from->codes[at + d]), -s));
                }
            }
    return distinct;
}

static fx_fp8_inputs alloc_inputs(const fx_problem *p, fx_fp8_tiles tiles)
{
    fx_fp8_inputs in;
    in.q = fx_fp8_tensor_alloc(p->batch, p->seqlen_q, p->heads_q, p->head_dim, tiles.block_m);
    in.k = fx_fp8_tensor_alloc(p->batch, p->seqlen_k, p->heads_kv, p->head_dim, tiles.block_n);
    in.v = fx_fp8_tensor_alloc(p->batch, p->seqlen_k, p->heads_kv, p->head_dim, tiles.block_n);
    return in;
}

/* The dequantized tensors the inputs stand for, as floats. */
typedef struct dequantized {
    float *q, *k, *v;
} dequantized;

static dequantized dequantize_all(const fx_fp8_inputs *in)
{
    dequantized r = {fx_test_calloc(fx_fp8_tensor_numel(&in->q), sizeof(float)),
                     fx_test_calloc(fx_fp8_tensor_numel(&in->k), sizeof(float)),
                     fx_test_calloc(fx_fp8_tensor_numel(&in->v), sizeof(float))};
    fx_fp8_dequantize(&in->q, r.q);
    fx_fp8_dequantize(&in->k, r.k);
    fx_fp8_dequantize(&in->v, r.v);
    return r;
}

static void dequantized_free(dequantized *r)
{
    free(r->q);
    free(r->k);
    free(r->v);
}

/* ---- the descale algebra ---------------------------------------------------------------- */

/* One problem, both representations, bitwise-equal outputs (the file's comment says why). */
static void assert_per_block_equals_per_tensor(fx_problem p)
{
    const fx_fp8_tiles tiles = fx_fp8_tiles_for(p.head_dim);
    fx_fp8_inputs tensor = alloc_inputs(&p, tiles), block = alloc_inputs(&p, tiles);
    /* Descales of 2^-7 make the typical |value| of ~100 about 1 (logits of order 1). */
    fill_per_tensor(&tensor.q, 0x1p-7f, p.seed, 1);
    fill_per_tensor(&tensor.k, 0x1p-7f, p.seed, 2);
    fill_per_tensor(&tensor.v, 0x1p-6f, p.seed, 3);
    /* Q and K per block move in opposite directions, so a tile's c·δQ·δK spans 2^±8. */
    ck_assert_int_ge(rescale_per_block(&tensor.q, &block.q, p.seed + 1), 2);
    ck_assert_int_ge(rescale_per_block(&tensor.k, &block.k, p.seed + 2), 3);
    ck_assert_int_ge(rescale_per_block(&tensor.v, &block.v, p.seed + 3), 3);

    /* Both stand for the same numbers, and the codes do differ. */
    dequantized a = dequantize_all(&tensor), b = dequantize_all(&block);
    ck_assert_mem_eq(a.q, b.q, fx_fp8_tensor_numel(&tensor.q) * sizeof(float));
    ck_assert_mem_eq(a.k, b.k, fx_fp8_tensor_numel(&tensor.k) * sizeof(float));
    ck_assert_mem_eq(a.v, b.v, fx_fp8_tensor_numel(&tensor.v) * sizeof(float));
    ck_assert(memcmp(tensor.k.codes, block.k.codes, fx_fp8_tensor_numel(&tensor.k)) != 0);

    const size_t nq = fx_numel_q(&p), nl = fx_numel_lse(&p);
    float *o1 = fx_test_calloc(nq, sizeof(float)), *o2 = fx_test_calloc(nq, sizeof(float));
    float *l1 = fx_test_calloc(nl, sizeof(float)), *l2 = fx_test_calloc(nl, sizeof(float));
    ck_assert_uint_eq(fx_fp8_forward(&p, &tensor, FX_FP8_MAX_OFFSET, NULL, o1, l1), 0);
    ck_assert_uint_eq(fx_fp8_forward(&p, &block, FX_FP8_MAX_OFFSET, NULL, o2, l2), 0);
    size_t o_differ = 0, lse_differ = 0, nan = 0;
    for (size_t e = 0; e < nq; ++e) {
        o_differ += memcmp(&o1[e], &o2[e], sizeof(float)) != 0;
        nan += isnan(o1[e]);
    }
    for (size_t e = 0; e < nl; ++e)
        lse_differ += memcmp(&l1[e], &l2[e], sizeof(float)) != 0;
    char shape[160];
    fx_problem_format(&p, shape, sizeof shape);
    ck_assert_msg(o_differ == 0 && lse_differ == 0 && nan == 0,
                  "%s: %zu of %zu O and %zu of %zu LSE differ, %zu NaN", shape, o_differ, nq,
                  lse_differ, nl, nan);
    free(o1), free(o2), free(l1), free(l2);
    dequantized_free(&a);
    dequantized_free(&b);
    fx_fp8_inputs_free(&tensor);
    fx_fp8_inputs_free(&block);
}

/* Q tiles of 192 rows (2 of them, the second partial), K/V tiles of 160 keys (3, the last
 * partial), GQA with 2 query heads per KV head. */
START_TEST(per_block_descales_give_the_per_tensor_output_bit_for_bit)
{
    assert_per_block_equals_per_tensor(fx_test_problem(2, 300, 457, 4, 2, 64, false, FX_BF16));
}
END_TEST

/* The same with causal masking, seqlen_q below and above seqlen_k: partly masked tiles
 * and, above, rows that see no key. */
START_TEST(per_block_descales_give_the_per_tensor_output_bit_for_bit_causal)
{
    assert_per_block_equals_per_tensor(fx_test_problem(1, 300, 457, 2, 1, 64, true, FX_BF16));
    assert_per_block_equals_per_tensor(fx_test_problem(1, 457, 300, 2, 2, 128, true, FX_BF16));
}
END_TEST

/* ---- against fp64 on the dequantized inputs --------------------------------------------- */

/* On its own (dequantized) inputs the model's only large error is P's rounding to e4m3:
 * O = Σ P8·v/ℓ against Σ P·v/ℓ moves by at most Σ|P8 − P|·|v|/ℓ, and |P8 − P| is at most
 * 2^-4·P for P >= 2^-6 (half a step of 3 mantissa bits) and 2^-10 below, while ℓ >= 2^7
 * (the row's largest P is 2^8 rounded down by less than a factor 2): so
 *     |O − O_ref| <= max|v|·(2^-4 + n_keys·2^-17 + e32) + one bf16 rounding of O,
 * where e32 is fp32's part: P = 2^(S·c − R) carries a few roundings of S·c and of R, each
 * 2^-24 of |R| in log2 units; with |R| <= |LSE|·log2(e) + 8 + log2(n_keys), e32 = (|LSE|·
 * log2(e) + 8 + 11)·2^-21 is four of them with room. Per-block scales that differ by 2^16
 * between tiles change nothing in that bound; LSE uses the unrounded P and stays at fp32
 * accuracy. */
static void assert_close_to_exact_attention(const fx_problem *p, const fx_fp8_inputs *in)
{
    const size_t nq = fx_numel_q(p), nl = fx_numel_lse(p);
    float *o = fx_test_calloc(nq, sizeof(float)), *lse = fx_test_calloc(nl, sizeof(float));
    ck_assert_uint_eq(fx_fp8_forward(p, in, FX_FP8_MAX_OFFSET, NULL, o, lse), 0);
    dequantized x = dequantize_all(in);
    float v_max = 0.0f;
    for (size_t e = 0; e < fx_numel_kv(p); ++e)
        v_max = fmaxf(v_max, fabsf(x.v[e]));
    const int d = p->head_dim;
    double *o_ref = fx_test_calloc((size_t)p->seqlen_q * d, sizeof(double));
    double *lse_ref = fx_test_calloc(p->seqlen_q, sizeof(double));
    fx_err_acc o_err, lse_err;
    fx_err_acc_init(&o_err);
    fx_err_acc_init(&lse_err);
    double worst_excess = 0.0;
    for (int b = 0; b < p->batch; ++b)
        for (int h = 0; h < p->heads_q; ++h) {
            fx_ref_forward_rows(p, x.q, x.k, x.v, b, h, 0, p->seqlen_q, o_ref, lse_ref);
            for (int i = 0; i < p->seqlen_q; ++i) {
                const double e32 = (fabs(lse_ref[i]) * 1.4426950408889634 + 19) * 0x1p-21;
                const double bound_p = v_max * (0x1p-4 + fx_keys_seen(p, i) * 0x1p-17 + e32);
                for (int c = 0; c < d; ++c) {
                    const double ref = o_ref[(size_t)i * d + c];
                    const double err = fabs(o[fx_at_q(p, b, i, h, c)] - ref);
                    const double bound = bound_p + fabs(ref) * 0x1p-8;
                    worst_excess = fmax(worst_excess, err / bound);
                    fx_err_acc_add(&o_err, o[fx_at_q(p, b, i, h, c)], ref);
                }
                fx_err_acc_add(&lse_err, lse[fx_at_lse(p, b, h, i)], lse_ref[i]);
            }
        }
    const fx_err eo = fx_err_acc_result(&o_err), el = fx_err_acc_result(&lse_err);
    ck_assert_msg(worst_excess <= 1.0, "O's error reaches %.3g of its bound", worst_excess);
    ck_assert_uint_eq(eo.nan_count, 0);
    ck_assert_uint_eq(el.inf_mismatch, 0);
    ck_assert_msg(el.max_abs <= 1e-5 * fmax(1.0, el.ref_max), "LSE max error %g (|LSE| <= %g)",
                  el.max_abs, el.ref_max);
    free(o), free(lse), free(o_ref), free(lse_ref);
    dequantized_free(&x);
}

START_TEST(per_block_inputs_with_far_apart_scales_stay_within_p_rounding_of_exact_attention)
{
    fx_problem p = fx_test_problem(1, 300, 457, 2, 1, 64, true, FX_BF16);
    const fx_fp8_tiles tiles = fx_fp8_tiles_for(64);
    fx_fp8_inputs tensor = alloc_inputs(&p, tiles), block = alloc_inputs(&p, tiles);
    fill_per_tensor(&tensor.q, 0x1p-7f, 5, 1);
    fill_per_tensor(&tensor.k, 0x1p-7f, 5, 2);
    fill_per_tensor(&tensor.v, 0x1p-6f, 5, 3);
    rescale_per_block(&tensor.q, &block.q, 6);
    rescale_per_block(&tensor.k, &block.k, 7);
    rescale_per_block(&tensor.v, &block.v, 8);
    /* Spread the K and V scales further, by 2^±8 per tile on top: the tensors now hold
     * different numbers than `tensor`, which is fine here: the reference reads these. */
    for (int n = 0; n < fx_fp8_tensor_blocks(&block.k); ++n) {
        block.k.descale[n] = ldexpf(block.k.descale[n], n % 2 ? 8 : -8);
        block.v.descale[n] = ldexpf(block.v.descale[n], n % 2 ? -8 : 8);
    }
    assert_close_to_exact_attention(&p, &block);
    fx_fp8_inputs_free(&tensor);
    fx_fp8_inputs_free(&block);
}
END_TEST

/* Q, K, V of p drawn in fp32 (fx_draw's numbers, before any rounding), newly allocated. */
static void draw_inputs(const fx_problem *p, float **q, float **k, float **v)
{
    const size_t nq = fx_numel_q(p), nkv = fx_numel_kv(p);
    *q = fx_test_calloc(nq, sizeof(float));
    *k = fx_test_calloc(nkv, sizeof(float));
    *v = fx_test_calloc(nkv, sizeof(float));
    for (size_t i = 0; i < nq; ++i)
        (*q)[i] = (float)fx_draw(p, FX_T_Q, i);
    for (size_t i = 0; i < nkv; ++i) {
        (*k)[i] = (float)fx_draw(p, FX_T_K, i);
        (*v)[i] = (float)fx_draw(p, FX_T_V, i);
    }
}

/* Quantized from drawn inputs by each scaling (fx_fp8_prepare), at each head_dim. */
START_TEST(prepared_inputs_stay_within_p_rounding_of_exact_attention)
{
    const int dims[] = {64, 128, 256};
    for (int e = 0; e < 3; ++e)
        for (int s = 0; s < FX_FP8_SCALING_COUNT; ++s) {
            fx_problem p = fx_test_problem(1, 200, 333, 4, 2, dims[e], e == 1, FX_BF16);
            p.dist = FX_DIST_OUTLIERS;
            float *q, *k, *v;
            draw_inputs(&p, &q, &k, &v);
            const fx_fp8_recipe r = {(fx_fp8_scaling)s, s == FX_FP8_PER_BLOCK, 3,
                                     fx_fp8_tiles_for(dims[e])};
            fx_fp8_inputs in;
            fx_fp8_prepare(&p, q, k, v, r, &in);
            assert_close_to_exact_attention(&p, &in);
            fx_fp8_inputs_free(&in);
            free(q), free(k), free(v);
        }
}
END_TEST

/* ---- the tensor cores' accumulation ----------------------------------------------------- */

/* The model's tensor-core path (acc != NULL: S per k32 wgmma, P8·V8 per 32 keys with O as the
 * accumulator, V gathered per tile, keys past seqlen_k zero) against its fp32 path. With a
 * wide accumulation (one product per group, 45 bits, each group's sum added in fp32) the two
 * differ only in the order of fp32 adds: O within 1 % of max|v| and the LSE within 1e-4, where
 * a misplaced key or a tail read of V would move O by max|v|. With Hopper's parameters the
 * truncation shows: some LSE moves. Causal, seqlen_k not a multiple of the tile, GQA. */
START_TEST(the_tensor_core_path_is_the_fp32_path_with_a_wide_accumulator)
{
    fx_problem p = fx_test_problem(1, 200, 333, 4, 2, 64, true, FX_BF16);
    const size_t nq = fx_numel_q(&p), nkv = fx_numel_kv(&p), nl = fx_numel_lse(&p);
    float *q, *k, *v;
    draw_inputs(&p, &q, &k, &v);
    const fx_fp8_recipe r = {FX_FP8_PER_TENSOR, false, 3, fx_fp8_tiles_for(p.head_dim)};
    fx_fp8_inputs in;
    fx_fp8_prepare(&p, q, k, v, r, &in);
    dequantized x = dequantize_all(&in);
    float v_max = 0.0f;
    for (size_t e = 0; e < nkv; ++e)
        v_max = fmaxf(v_max, fabsf(x.v[e]));

    fx_fp8_acc_params wide;
    ck_assert_int_eq(fx_fp8_acc_parse("G=1 B=45 term=rn c=fp32 out=rn emax=value", &wide), 0);
    float *o0 = fx_test_calloc(nq, sizeof(float)), *l0 = fx_test_calloc(nl, sizeof(float));
    float *o1 = fx_test_calloc(nq, sizeof(float)), *l1 = fx_test_calloc(nl, sizeof(float));
    float *o2 = fx_test_calloc(nq, sizeof(float)), *l2 = fx_test_calloc(nl, sizeof(float));
    ck_assert_uint_eq(fx_fp8_forward(&p, &in, FX_FP8_MAX_OFFSET, NULL, o0, l0), 0);
    ck_assert_uint_eq(fx_fp8_forward(&p, &in, FX_FP8_MAX_OFFSET, &wide, o1, l1), 0);
    ck_assert_uint_eq(fx_fp8_forward(&p, &in, FX_FP8_MAX_OFFSET, fx_fp8_acc_hopper(), o2, l2), 0);
    double o_gap = 0, l_gap = 0, l_hopper = 0;
    for (size_t e = 0; e < nq; ++e) {
        ck_assert(!isnan(o1[e]) && !isnan(o2[e]));
        o_gap = fmax(o_gap, fabs((double)o1[e] - o0[e]));
    }
    size_t finite = 0;
    for (size_t e = 0; e < nl; ++e) {
        ck_assert_int_eq(isinf(l0[e]), isinf(l1[e]));
        ck_assert_int_eq(isinf(l0[e]), isinf(l2[e]));
        if (isinf(l0[e]))
            continue;
        ++finite;
        l_gap = fmax(l_gap, fabs((double)l1[e] - l0[e]));
        l_hopper = fmax(l_hopper, fabs((double)l2[e] - l0[e]));
    }
    ck_assert_uint_gt(finite, 0);
    ck_assert_msg(o_gap <= 0.01 * v_max, "wide accumulator: O moved by %.3g (max|v| %.3g)", o_gap,
                  v_max);
    ck_assert_msg(l_gap <= 1e-4, "wide accumulator: LSE moved by %.3g", l_gap);
    ck_assert_msg(l_hopper > 0, "Hopper's truncation left every LSE as the fp32 sum's");
    free(o0), free(o1), free(o2), free(l0), free(l1), free(l2);
    free(q), free(k), free(v);
    dequantized_free(&x);
    fx_fp8_inputs_free(&in);
}
END_TEST

/* ---- the max offset --------------------------------------------------------------------- */

/* One key with score 12 (log2 units) and 1023 with score 0, whose P are 2^-12 of the
 * largest. Without the offset they round to 0 in e4m3 (below half its smallest subnormal,
 * 2^-10) while ℓ still counts them, so O loses their weight, a fifth of the row's mass;
 * with P <= 2^8 they are 2^-4, exact. Exact inputs: softmax_scale = ln 2 makes c = 1;
 * S = q·k with q = (4, 0, ..), the high key's k = (3, 0, ..), the other keys 0; V is 0 at
 * the high key and 1 elsewhere, so O = 1023·2^-12 / (1 + 1023·2^-12) in every column.
 * Tiles of 128 keys, visited from the last: what is lost without the offset depends on
 * where the high key lies. In the last tile it sets R before any other P is made, and all
 * 1023 are flushed: O = 0. In the first tile, the 896 keys of the tiles before it were
 * rounded against R = 0 (P = 1, exact) and only later scaled by α = 2^-12 in fp32: only
 * the 127 keys of its own tile are lost, O = 896·2^-12 / (1 + 1023·2^-12). */
static void run_one_high_key(int high_key, float max_offset, float o[64], float *lse)
{
    fx_problem p = fx_test_problem(1, 1, 1024, 1, 1, 64, false, FX_BF16);
    p.softmax_scale = 0.6931471805599453; /* c = softmax_scale·log2(e) = 1 */
    ck_assert_float_eq((float)(p.softmax_scale * 1.4426950408889634), 1.0f);
    fx_fp8_inputs in = alloc_inputs(&p, (fx_fp8_tiles){128, 128});
    in.q.descale[0] = 1.0f;
    for (int n = 0; n < 8; ++n)
        in.k.descale[n] = in.v.descale[n] = 1.0f;
    in.q.codes[0] = fx_e4m3_from_float(4.0f);
    in.k.codes[(size_t)high_key * 64] = fx_e4m3_from_float(3.0f);
    for (int j = 0; j < 1024; ++j)
        for (int d = 0; d < 64; ++d)
            in.v.codes[(size_t)j * 64 + d] = fx_e4m3_from_float(j == high_key ? 0.0f : 1.0f);
    ck_assert_uint_eq(fx_fp8_forward(&p, &in, max_offset, NULL, o, lse), 0);
    fx_fp8_inputs_free(&in);
}

START_TEST(the_max_offset_keeps_probabilities_e4m3_would_flush_to_zero)
{
    const double l = 1 + 1023 * 0x1p-12; /* ℓ/P_max, whatever the offset */
    const double lse_expected = (12 + log2(l)) * log(2.0);
    float o[64], lse;
    for (int high_key = 0; high_key < 1024; high_key += 1023) {
        run_one_high_key(high_key, FX_FP8_MAX_OFFSET, o, &lse);
        for (int d = 0; d < 64; ++d)
            ck_assert_double_eq_tol(o[d], 1023 * 0x1p-12 / l, 0x1p-9); /* 0.1998 */
        ck_assert_double_eq_tol(lse, lse_expected, 1e-5);
    }
    run_one_high_key(1023, 0.0f, o, &lse);
    for (int d = 0; d < 64; ++d)
        ck_assert_float_eq(o[d], 0.0f);
    ck_assert_double_eq_tol(lse, lse_expected, 1e-5);
    run_one_high_key(0, 0.0f, o, &lse);
    for (int d = 0; d < 64; ++d)
        ck_assert_double_eq_tol(o[d], 896 * 0x1p-12 / l, 0x1p-9); /* 0.1750 */
}
END_TEST

/* ---- masking ---------------------------------------------------------------------------- */

/* Causal with seqlen_q 203 > seqlen_k 70: rows i < 133 see no key and get O = 0 and
 * LSE = -inf; nothing is NaN. */
START_TEST(a_row_that_sees_no_key_gives_zero_o_and_minus_inf_lse)
{
    fx_problem p = fx_test_problem(1, 203, 70, 2, 2, 64, true, FX_BF16);
    fx_fp8_inputs in = alloc_inputs(&p, fx_fp8_tiles_for(64));
    fill_per_tensor(&in.q, 0x1p-7f, 9, 1);
    fill_per_tensor(&in.k, 0x1p-7f, 9, 2);
    fill_per_tensor(&in.v, 0x1p-7f, 9, 3);
    float *o = fx_test_calloc(fx_numel_q(&p), sizeof(float));
    float *lse = fx_test_calloc(fx_numel_lse(&p), sizeof(float));
    fx_fp8_forward(&p, &in, FX_FP8_MAX_OFFSET, NULL, o, lse);
    for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 203; ++i) {
            const float l = lse[fx_at_lse(&p, 0, h, i)];
            ck_assert_msg(i < 133 ? l == -INFINITY : isfinite(l), "row %d: LSE %g", i, l);
            for (int c = 0; c < 64; ++c) {
                const float x = o[fx_at_q(&p, 0, i, h, c)];
                ck_assert(i < 133 ? x == 0.0f : !isnan(x));
            }
        }
    free(o), free(lse);
    fx_fp8_inputs_free(&in);
}
END_TEST

/* An all-zero K tile has descale 0, so its scores times the tile's scale are 0·S = 0 (the
 * keys' logits are 0, right for a zero K) — and a masked score of -inf times 0 would be NaN.
 * The model masks by skipping keys; causal rows that see part of that tile come out finite
 * and within P's rounding of exact attention. */
START_TEST(a_zero_k_tile_under_the_causal_mask_gives_no_nan)
{
    fx_problem p = fx_test_problem(1, 300, 300, 1, 1, 64, true, FX_BF16);
    fx_fp8_inputs in = alloc_inputs(&p, fx_fp8_tiles_for(64));
    fill_per_tensor(&in.q, 0x1p-7f, 10, 1);
    fill_per_tensor(&in.k, 0x1p-7f, 10, 2);
    fill_per_tensor(&in.v, 0x1p-7f, 10, 3);
    /* K tile 1 (keys 160..299, the diagonal's tile for rows 160..299) all zero. */
    memset(in.k.codes + (size_t)160 * 64, 0, (size_t)140 * 64);
    in.k.descale[1] = 0.0f;
    assert_close_to_exact_attention(&p, &in);
    fx_fp8_inputs_free(&in);
}
END_TEST

/* ---- preparing inputs ------------------------------------------------------------------- */

/* fx_fp8_prepare with incoherent processing quantizes Q·M and K·M (M = D·H/√d): their
 * dequantized product is QKᵀ to within e4m3's rounding, not that of Q and K themselves. */
START_TEST(prepared_incoherent_inputs_hold_the_rotated_q_and_k)
{
    fx_problem p = fx_test_problem(1, 64, 64, 1, 1, 128, false, FX_BF16);
    const size_t n = fx_numel_q(&p);
    float *q = fx_test_calloc(n, sizeof(float)), *k = fx_test_calloc(n, sizeof(float));
    float *v = fx_test_calloc(n, sizeof(float)), *signs = fx_test_calloc(128, sizeof(float));
    for (size_t i = 0; i < n; ++i) {
        q[i] = (float)fx_draw(&p, FX_T_Q, i);
        k[i] = (float)fx_draw(&p, FX_T_K, i);
        v[i] = (float)fx_draw(&p, FX_T_V, i);
    }
    fx_fp8_inputs in;
    const fx_fp8_recipe r = {FX_FP8_PER_TENSOR, true, 21, fx_fp8_tiles_for(128)};
    fx_fp8_prepare(&p, q, k, v, r, &in);
    dequantized x = dequantize_all(&in);
    fx_fp8_random_signs(21, 128, signs);
    float *qt = fx_test_calloc(n, sizeof(float));
    memcpy(qt, q, n * sizeof(float));
    fx_fp8_incoherent(qt, 64, 128, signs);
    for (size_t i = 0; i < n; ++i) {
        ck_assert_float_eq(x.v[i], in.v.descale[0] * fx_e4m3_round(v[i] / in.v.descale[0]));
        ck_assert_float_eq(x.q[i], in.q.descale[0] * fx_e4m3_round(qt[i] / in.q.descale[0]));
    }
    dequantized_free(&x);
    fx_fp8_inputs_free(&in);
    free(q), free(k), free(v), free(signs), free(qt);
}
END_TEST

static Suite *fp8_model_suite(void)
{
    Suite *s = suite_create("fp8_model");
    TCase *algebra = tcase_create("descale_algebra");
    tcase_set_timeout(algebra, 300);
    tcase_add_test(algebra, per_block_descales_give_the_per_tensor_output_bit_for_bit);
    tcase_add_test(algebra, per_block_descales_give_the_per_tensor_output_bit_for_bit_causal);
    suite_add_tcase(s, algebra);

    TCase *ref = tcase_create("against_reference");
    tcase_set_timeout(ref, 300);
    tcase_add_test(
        ref, per_block_inputs_with_far_apart_scales_stay_within_p_rounding_of_exact_attention);
    tcase_add_test(ref, prepared_inputs_stay_within_p_rounding_of_exact_attention);
    suite_add_tcase(s, ref);

    TCase *tc_acc = tcase_create("tensor_core_accumulation");
    tcase_set_timeout(tc_acc, 300);
    tcase_add_test(tc_acc, the_tensor_core_path_is_the_fp32_path_with_a_wide_accumulator);
    suite_add_tcase(s, tc_acc);

    TCase *offset = tcase_create("max_offset");
    tcase_add_test(offset, the_max_offset_keeps_probabilities_e4m3_would_flush_to_zero);
    suite_add_tcase(s, offset);

    TCase *masked = tcase_create("masking");
    tcase_add_test(masked, a_row_that_sees_no_key_gives_zero_o_and_minus_inf_lse);
    tcase_add_test(masked, a_zero_k_tile_under_the_causal_mask_gives_no_nan);
    suite_add_tcase(s, masked);

    TCase *prepare = tcase_create("prepare");
    tcase_add_test(prepare, prepared_incoherent_inputs_hold_the_rotated_q_and_k);
    suite_add_tcase(s, prepare);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(fp8_model_suite());
    srunner_run_all(runner, CK_NORMAL);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
