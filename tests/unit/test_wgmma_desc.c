/*
 * test_wgmma_desc.c — the foundations of the Hopper stages that a CPU can check:
 *   - the wgmma shared-memory matrix descriptor (common/ptx/wgmma_desc.h): every field in
 *     its bits (PTX ISA §9.7.15.5.1.2.2), the K-major and MN-major 128B-swizzle helpers,
 *     the step along K;
 *   - the 128-byte swizzle TMA writes (fx_swizzle128_offset) against a table drawn by hand;
 *   - the tensor-map contract (common/fx_tma.h): refusals that name the limit, checked
 *     before any driver call, and the "no driver" answer on a machine without one.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "fx_tma.h"
#include "ptx/wgmma_desc.h"

/* ---------------------------------------------------------------------------------
 * Descriptor bits
 * ------------------------------------------------------------------------------ */

START_TEST(every_field_lands_in_its_bits)
{
    /* Distinct values in every field, each at most its width, none zero. */
    const uint32_t addr = 0x2A3C0; /* 16-byte aligned, below 2^18 */
    const uint32_t lbo = 0x1230;   /* bytes */
    const uint32_t sbo = 0x3FF0;   /* bytes */
    const uint64_t d = fx_wgmma_desc_make(addr, lbo, sbo, 5, FX_WGMMA_SWIZZLE_64B);

    /* By hand, from the ISA table: [0,14) addr>>4, [16,30) lbo>>4, [32,46) sbo>>4,
     * [49,52) base offset, [62,64) layout. */
    const uint64_t expected = (uint64_t)(addr >> 4) | (uint64_t)(lbo >> 4) << 16 |
                              (uint64_t)(sbo >> 4) << 32 | (uint64_t)5 << 49 | (uint64_t)2 << 62;
    ck_assert_uint_eq(d, expected);

    const fx_wgmma_desc_fields f = fx_wgmma_desc_decode(d);
    ck_assert_uint_eq(f.start_address, addr >> 4);
    ck_assert_uint_eq(f.lbo, lbo >> 4);
    ck_assert_uint_eq(f.sbo, sbo >> 4);
    ck_assert_uint_eq(f.base_offset, 5);
    ck_assert_uint_eq(f.layout, FX_WGMMA_SWIZZLE_64B);
}
END_TEST

START_TEST(reserved_bits_stay_zero)
{
    /* All-ones inputs fill exactly the five fields and nothing else. */
    const uint64_t d = fx_wgmma_desc_make(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFu, 0xFFu);
    const uint64_t fields = UINT64_C(0x3FFF) | UINT64_C(0x3FFF) << 16 | UINT64_C(0x3FFF) << 32 |
                            UINT64_C(0x7) << 49 | UINT64_C(0x3) << 62;
    ck_assert_uint_eq(d, fields);
    ck_assert_uint_eq(d & ~fields, 0);
}
END_TEST

START_TEST(address_encoding_keeps_18_bits)
{
    /* matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4: bit 18 and above are dropped. */
    const uint64_t d = fx_wgmma_desc_make(0x40000u + 0x400u, 0, 0, 0, 0);
    ck_assert_uint_eq(fx_wgmma_desc_decode(d).start_address, 0x400u >> 4);
}
END_TEST

START_TEST(layout_values_match_the_isa)
{
    ck_assert_int_eq(FX_WGMMA_LAYOUT_INTERLEAVE, 0);
    ck_assert_int_eq(FX_WGMMA_SWIZZLE_128B, 1);
    ck_assert_int_eq(FX_WGMMA_SWIZZLE_64B, 2);
    ck_assert_int_eq(FX_WGMMA_SWIZZLE_32B, 3);
}
END_TEST

/* ---------------------------------------------------------------------------------
 * The helpers of the stages' tiles
 * ------------------------------------------------------------------------------ */

START_TEST(k_major_sw128_of_a_64x64_bf16_tile)
{
    /* A 64×64 bf16 tile (rows of 128 B) at shared address 0x4400 (1024-aligned). */
    const uint32_t tile = 0x4400;
    const fx_wgmma_desc_fields f = fx_wgmma_desc_decode(fx_wgmma_desc_k_sw128(tile));
    ck_assert_uint_eq(f.start_address, tile >> 4);
    ck_assert_uint_eq(f.sbo, 1024 >> 4); /* 8 rows × 128 B */
    ck_assert_uint_eq(f.lbo, 1);         /* unused, "assumed 1" */
    ck_assert_uint_eq(f.base_offset, 0); /* the atom starts on 1024 B */
    ck_assert_uint_eq(f.layout, 1);      /* 128B swizzle */
}
END_TEST

/* Stage 10's e4m3 tiles: Q and K in 64-byte rows (64B swizzle, atom 8 × 64 B), Vᵀ in 32-byte
 * rows (32B swizzle, atom 8 × 32 B): SBO is one atom, the layout field the ISA's 2 and 3. */
START_TEST(k_major_sw64_and_sw32_of_the_e4m3_tiles)
{
    const uint32_t tile = 0x4400; /* on a 1024-byte boundary, so on both atoms' */
    fx_wgmma_desc_fields f = fx_wgmma_desc_decode(fx_wgmma_desc_k_sw64(tile));
    ck_assert_uint_eq(f.start_address, tile >> 4);
    ck_assert_uint_eq(f.sbo, 512 >> 4); /* 8 rows × 64 B */
    ck_assert_uint_eq(f.lbo, 1);
    ck_assert_uint_eq(f.base_offset, 0);
    ck_assert_uint_eq(f.layout, 2); /* 64B swizzle */
    f = fx_wgmma_desc_decode(fx_wgmma_desc_k_sw32(tile));
    ck_assert_uint_eq(f.sbo, 256 >> 4); /* 8 rows × 32 B */
    ck_assert_uint_eq(f.layout, 3);     /* 32B swizzle */
    ck_assert_uint_eq(FX_SWIZZLE64_ATOM_BYTES, 8 * FX_SWIZZLE64_ROW_BYTES);
    ck_assert_uint_eq(FX_SWIZZLE32_ATOM_BYTES, 8 * FX_SWIZZLE32_ROW_BYTES);
    /* The second k32 slice of a 64-byte row is 32 e4m3 further: +2 in the address field. */
    const uint64_t d1 = fx_wgmma_desc_k_sw64(tile + 32);
    ck_assert_uint_eq(fx_wgmma_desc_decode(d1).start_address, (tile >> 4) + 2);
}
END_TEST

START_TEST(advancing_k_by_16_bf16_adds_2_to_the_address)
{
    const uint64_t d0 = fx_wgmma_desc_k_sw128(0x4400);
    /* 16 elements × 2 bytes = 32 bytes = 2 units of 16 bytes. */
    ck_assert_uint_eq(FX_WGMMA_K16_STEP_K_MAJOR_BYTES, 16 * 2);
    for (uint32_t k = 0; k < 4; ++k) {
        const uint64_t dk = fx_wgmma_desc_advance(d0, k * FX_WGMMA_K16_STEP_K_MAJOR_BYTES);
        ck_assert_uint_eq(fx_wgmma_desc_decode(dk).start_address, (0x4400 >> 4) + 2 * k);
        /* nothing else moves */
        ck_assert_uint_eq(dk >> 14, d0 >> 14);
    }
}
END_TEST

/* Stages 09 and 10 encode a tile's descriptor once and advance it to each slice: the same
 * descriptor, bit for bit, as encoding the slice's address, for every 256-byte-aligned tile and
 * every 16-byte-aligned slice after it in shared memory (below the SM's 228 KiB, so under the
 * 2^18 bytes the encoding keeps). */
START_TEST(advancing_equals_encoding_inside_shared_memory)
{
    const uint32_t smem_bytes = 228u * 1024u;
    uint32_t differ = 0; /* counted, then asserted once: Check marks every assertion */
    for (uint32_t tile = 0; tile < smem_bytes; tile += FX_SWIZZLE32_ATOM_BYTES)
        for (uint32_t offset = 0; tile + offset < smem_bytes; offset += 16) {
            differ += fx_wgmma_desc_advance(fx_wgmma_desc_k_sw64(tile), offset) !=
                      fx_wgmma_desc_k_sw64(tile + offset);
            differ += fx_wgmma_desc_advance(fx_wgmma_desc_k_sw32(tile), offset) !=
                      fx_wgmma_desc_k_sw32(tile + offset);
            differ += fx_wgmma_desc_advance(fx_wgmma_desc_k_sw128(tile), offset) !=
                      fx_wgmma_desc_k_sw128(tile + offset);
        }
    ck_assert_uint_eq(differ, 0);
    /* Why ptxas cannot do this rewrite itself: past 2^18 the encoding wraps to 0 (the mask),
     * while the add carries out of the 14-bit field into bits 14-15. */
    const uint32_t last = 0x40000u - 16u;
    ck_assert_uint_eq(fx_wgmma_desc_decode(fx_wgmma_desc_k_sw64(last + 32)).start_address, 1);
    ck_assert_uint_ne(fx_wgmma_desc_advance(fx_wgmma_desc_k_sw64(last), 32),
                      fx_wgmma_desc_k_sw64(last + 32));
}
END_TEST

START_TEST(mn_major_sw128_of_v)
{
    /* V tile of 128 keys × 128 head_dim columns, bf16: two 64-column slabs of
     * 128 rows × 128 B = 16 KiB each. */
    const uint32_t tile = 0x8000, slab = 128 * 128;
    const uint64_t d = fx_wgmma_desc_mn_sw128(tile, slab);
    const fx_wgmma_desc_fields f = fx_wgmma_desc_decode(d);
    ck_assert_uint_eq(f.start_address, tile >> 4);
    ck_assert_uint_eq(f.sbo, 1024 >> 4); /* K rows 0-7 → 8-15: one atom */
    ck_assert_uint_eq(f.lbo, slab >> 4); /* columns 0-63 → 64-127: one slab */
    ck_assert_uint_eq(f.layout, 1);
    /* The next k16 slice is 16 rows down: 2048 bytes, +128 in the address field. */
    const uint64_t d1 = fx_wgmma_desc_advance(d, FX_WGMMA_K16_STEP_MN_MAJOR_BYTES);
    ck_assert_uint_eq(fx_wgmma_desc_decode(d1).start_address, (tile + 2048) >> 4);
}
END_TEST

/* ---------------------------------------------------------------------------------
 * The 128-byte swizzle, as a specification
 * ------------------------------------------------------------------------------ */

/* Where TMA (CU_TENSOR_MAP_SWIZZLE_128B) stores logical 16-byte chunk c of row r of a
 * 1024-byte-aligned tile with 128-byte rows: physical chunk = STORED[r][c]. Drawn by
 * hand: row r permutes the chunks by XOR with r, and the pattern repeats every 8 rows. */
static const int STORED[8][8] = {
    /*        c: 0  1  2  3  4  5  6  7 */
    /* r 0 */ {0, 1, 2, 3, 4, 5, 6, 7},
    /* r 1 */ {1, 0, 3, 2, 5, 4, 7, 6},
    /* r 2 */ {2, 3, 0, 1, 6, 7, 4, 5},
    /* r 3 */ {3, 2, 1, 0, 7, 6, 5, 4},
    /* r 4 */ {4, 5, 6, 7, 0, 1, 2, 3},
    /* r 5 */ {5, 4, 7, 6, 1, 0, 3, 2},
    /* r 6 */ {6, 7, 4, 5, 2, 3, 0, 1},
    /* r 7 */ {7, 6, 5, 4, 3, 2, 1, 0},
};

START_TEST(swizzle128_matches_the_hand_drawn_table)
{
    for (uint32_t r = 0; r < 16; ++r) /* two atoms: the pattern repeats */
        for (uint32_t c = 0; c < 8; ++c)
            for (uint32_t b = 0; b < 16; b += 5) { /* bytes inside a chunk keep their place */
                const uint32_t want = r * 128 + (uint32_t)STORED[r % 8][c] * 16 + b;
                ck_assert_msg(fx_swizzle128_offset(r, c * 16 + b) == want,
                              "row %u chunk %u byte %u: got %u, want %u", r, c, b,
                              fx_swizzle128_offset(r, c * 16 + b), want);
            }
}
END_TEST

START_TEST(swizzle128_is_a_permutation_of_each_atom)
{
    unsigned char seen[1024];
    memset(seen, 0, sizeof seen);
    for (uint32_t r = 0; r < 8; ++r)
        for (uint32_t col = 0; col < 128; ++col) {
            const uint32_t off = fx_swizzle128_offset(r, col);
            ck_assert_uint_lt(off, 1024);
            ck_assert_uint_eq(off / 128, r); /* a row stays in its 128 bytes */
            ck_assert_int_eq(seen[off], 0);
            seen[off] = 1;
        }
}
END_TEST

/* ---------------------------------------------------------------------------------
 * Tensor maps: the contract, before the driver
 * ------------------------------------------------------------------------------ */

/* 16-byte-aligned stand-in for a device buffer: validation only looks at the address. */
static _Alignas(256) unsigned char fake_tensor[256];

/* K of b=2, seqlen_k=1000, heads_kv=4, head_dim=128, bf16, in 128-row × 64-column boxes. */
static fx_tma_tiled k_map(void)
{
    fx_problem p = fx_problem_default();
    p.batch = 2;
    p.seqlen_q = p.seqlen_k = 1000;
    p.heads_q = p.heads_kv = 4;
    p.head_dim = 128;
    return fx_tma_tiled_qkv(fake_tensor, FX_BF16, fx_layout_kv(&p), p.batch, p.seqlen_k, p.heads_kv,
                            p.head_dim, 128, 64);
}

START_TEST(qkv_map_has_the_documented_shape)
{
    const fx_tma_tiled t = k_map();
    ck_assert_int_eq(t.rank, 4);
    ck_assert_uint_eq(t.global_dim[0], 128);                         /* head_dim */
    ck_assert_uint_eq(t.global_dim[1], 4);                           /* heads    */
    ck_assert_uint_eq(t.global_dim[2], 1000);                        /* seqlen   */
    ck_assert_uint_eq(t.global_dim[3], 2);                           /* batch    */
    ck_assert_uint_eq(t.global_stride_bytes[0], 128 * 2);            /* next head */
    ck_assert_uint_eq(t.global_stride_bytes[1], 4 * 128 * 2);        /* next row  */
    ck_assert_uint_eq(t.global_stride_bytes[2], 1000 * 4 * 128 * 2); /* next batch */
    ck_assert_uint_eq(t.box_dim[0], 64);
    ck_assert_uint_eq(t.box_dim[1], 1);
    ck_assert_uint_eq(t.box_dim[2], 128);
    ck_assert_uint_eq(t.box_dim[3], 1);
    ck_assert_int_eq(t.swizzle, FX_TMA_SWIZZLE_128B);
    char why[256] = "";
    ck_assert_msg(fx_tma_validate(&t, why, sizeof why) == FX_TMA_OK, "%s", why);
}
END_TEST

START_TEST(refuses_a_256_byte_inner_box_with_128b_swizzle)
{
    fx_tma_tiled t = k_map();
    t.box_dim[0] = 128; /* 128 bf16 = 256 bytes: two 128B atoms wide */
    char why[256] = "";
    ck_assert_int_eq(fx_tma_validate(&t, why, sizeof why), FX_TMA_BAD_ARGS);
    ck_assert_msg(strstr(why, "box_dim[0]") && strstr(why, "256 bytes") &&
                      strstr(why, "128-byte swizzle span"),
                  "%s", why);
}
END_TEST

START_TEST(refuses_a_misaligned_base)
{
    fx_tma_tiled t = k_map();
    t.global_address = fake_tensor + 8;
    char why[256] = "";
    ck_assert_int_eq(fx_tma_validate(&t, why, sizeof why), FX_TMA_BAD_ARGS);
    ck_assert_msg(strstr(why, "global_address") && strstr(why, "16-byte aligned"), "%s", why);
}
END_TEST

START_TEST(refuses_a_stride_not_a_multiple_of_16)
{
    fx_tma_tiled t = k_map();
    t.global_stride_bytes[1] = 1000; /* a row of 500 bf16 */
    char why[256] = "";
    ck_assert_int_eq(fx_tma_validate(&t, why, sizeof why), FX_TMA_BAD_ARGS);
    ck_assert_msg(strstr(why, "global_stride_bytes[1] (1000)") &&
                      strstr(why, "multiple of 16 bytes"),
                  "%s", why);
}
END_TEST

START_TEST(refuses_a_box_dimension_above_256)
{
    fx_tma_tiled t = k_map();
    t.box_dim[2] = 257;
    char why[256] = "";
    ck_assert_int_eq(fx_tma_validate(&t, why, sizeof why), FX_TMA_BAD_ARGS);
    ck_assert_msg(strstr(why, "box_dim[2] (257)") && strstr(why, "1..256"), "%s", why);
}
END_TEST

START_TEST(refuses_before_calling_the_driver)
{
    /* A refused request never reaches the driver: the answer is BAD_ARGS on any machine. */
    fx_tma_tiled t = k_map();
    t.box_dim[0] = 128;
    CUtensorMap map;
    char why[256] = "";
    ck_assert_int_eq(fx_tma_encode_tiled(&map, &t, why, sizeof why), FX_TMA_BAD_ARGS);
    ck_assert_msg(strstr(why, "swizzle span") != NULL, "%s", why);
}
END_TEST

START_TEST(encodes_or_says_the_driver_is_missing)
{
    /* The happy path needs a driver. Without one (CI) the answer must say so; with one,
     * the driver encodes the map (a host address is fine: encoding reads no memory). */
    const fx_tma_tiled t = k_map();
    CUtensorMap map;
    char why[512] = "";
    const int rc = fx_tma_encode_tiled(&map, &t, why, sizeof why);
    if (rc == FX_TMA_NO_DRIVER)
        ck_assert_msg(strstr(why, "driver") != NULL, "%s", why);
    else
        ck_assert_msg(rc == FX_TMA_OK, "rc %d: %s", rc, why);
}
END_TEST

static Suite *wgmma_desc_suite(void)
{
    Suite *s = suite_create("wgmma_desc");
    TCase *desc = tcase_create("descriptor");
    tcase_add_test(desc, every_field_lands_in_its_bits);
    tcase_add_test(desc, reserved_bits_stay_zero);
    tcase_add_test(desc, address_encoding_keeps_18_bits);
    tcase_add_test(desc, layout_values_match_the_isa);
    tcase_add_test(desc, k_major_sw128_of_a_64x64_bf16_tile);
    tcase_add_test(desc, k_major_sw64_and_sw32_of_the_e4m3_tiles);
    tcase_add_test(desc, advancing_k_by_16_bf16_adds_2_to_the_address);
    tcase_add_test(desc, advancing_equals_encoding_inside_shared_memory);
    tcase_add_test(desc, mn_major_sw128_of_v);
    suite_add_tcase(s, desc);

    TCase *swz = tcase_create("swizzle128");
    tcase_add_test(swz, swizzle128_matches_the_hand_drawn_table);
    tcase_add_test(swz, swizzle128_is_a_permutation_of_each_atom);
    suite_add_tcase(s, swz);

    TCase *tma = tcase_create("tensor_map");
    tcase_add_test(tma, qkv_map_has_the_documented_shape);
    tcase_add_test(tma, refuses_a_256_byte_inner_box_with_128b_swizzle);
    tcase_add_test(tma, refuses_a_misaligned_base);
    tcase_add_test(tma, refuses_a_stride_not_a_multiple_of_16);
    tcase_add_test(tma, refuses_a_box_dimension_above_256);
    tcase_add_test(tma, refuses_before_calling_the_driver);
    tcase_add_test(tma, encodes_or_says_the_driver_is_missing);
    suite_add_tcase(s, tma);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(wgmma_desc_suite());
    srunner_run_all(runner, CK_NORMAL);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
