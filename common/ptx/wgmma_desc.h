/*
 * wgmma_desc.h — the 64-bit shared-memory matrix descriptor that wgmma.mma_async reads its
 * shared-memory operands through (stage 05), and the 128-byte swizzle that TMA writes
 * (stage 04). Plain C11, usable from the host (unit tests: tests/unit/test_wgmma_desc.c)
 * and from CUDA device code (__host__ __device__ under nvcc).
 *
 * Source: PTX ISA §9.7.15.5.1.2 "Shared Memory Matrix Layout" — §9.7.15.5.1.2.2 "Matrix
 * Descriptor Format" for the bits, §9.7.15.5.1.2.1 "Major-ness supported by Strides" and
 * "Canonical Layouts" for what the two byte offsets mean. Cross-checked against CUTLASS's
 * GmmaDescriptor (include/cute/arch/mma_sm90_desc.hpp), whose bit-fields agree.
 *
 *   bits    field                         encoding
 *   [0,14)  start address                 (smem address & 0x3FFFF) >> 4
 *   [16,30) leading dimension byte offset (LBO & 0x3FFFF) >> 4
 *   [32,46) stride dimension byte offset  (SBO & 0x3FFFF) >> 4
 *   [49,52) base offset                   0 when the swizzle pattern starts on its
 *                                         boundary (1024 B for 128B swizzle), else
 *                                         (pattern start address >> 7) & 7
 *   [62,64) layout (swizzle) type         0 none/interleave, 1 = 128B, 2 = 64B, 3 = 32B
 *   other bits are 0.
 *
 * The 18-bit mask in the encoding is the ISA's "matrix-descriptor-encode(x) =
 * (x & 0x3FFFF) >> 4": addresses and offsets are in bytes, must be multiples of 16, and
 * are stored in 16-byte units.
 *
 * The tiles of this project (what TMA with CU_TENSOR_MAP_SWIZZLE_128B writes): rows of
 * 128 bytes (64 bf16/fp16 elements), 8 rows = one 1024-byte swizzle atom, atoms stacked
 * row after row, tile start aligned to 1024 bytes (so the base offset is 0). A wider
 * row (head_dim 128, 256) is 2 or 4 such tiles ("slabs") one after the other.
 */
#ifndef FX_PTX_WGMMA_DESC_H
#define FX_PTX_WGMMA_DESC_H

#include <stdint.h>

#ifdef __CUDACC__
#define FX_WGMMA_HD __host__ __device__
#else
#define FX_WGMMA_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Layout type, bits [62,64) (§9.7.15.5.1.2.2; CUTLASS GMMA::LayoutType agrees). */
enum {
    FX_WGMMA_LAYOUT_INTERLEAVE = 0, /* no swizzle */
    FX_WGMMA_SWIZZLE_128B = 1,
    FX_WGMMA_SWIZZLE_64B = 2,
    FX_WGMMA_SWIZZLE_32B = 3
};

/* Bytes of one 128B-swizzle atom: 8 rows of 128 bytes. The 128B layout's SBO (K-major) and
 * the step between 8-row groups of K (MN-major) when atoms are packed. */
#define FX_SWIZZLE128_ATOM_BYTES 1024u
#define FX_SWIZZLE128_ROW_BYTES 128u

/* The 18-bit, 16-byte-unit encoding of an address or byte offset. */
static inline FX_WGMMA_HD uint64_t fx_wgmma_desc_encode14(uint32_t bytes)
{
    return (uint64_t)((bytes & 0x3FFFFu) >> 4);
}

/* Builds a descriptor from its fields. smem_addr: the shared-window address of the first
 * element (fx_smem_addr); lbo_bytes, sbo_bytes: byte offsets (multiples of 16);
 * base_offset: 0..7; layout: FX_WGMMA_*. */
static inline FX_WGMMA_HD uint64_t fx_wgmma_desc_make(uint32_t smem_addr, uint32_t lbo_bytes,
                                                      uint32_t sbo_bytes, uint32_t base_offset,
                                                      uint32_t layout)
{
    return fx_wgmma_desc_encode14(smem_addr) | fx_wgmma_desc_encode14(lbo_bytes) << 16 |
           fx_wgmma_desc_encode14(sbo_bytes) << 32 | (uint64_t)(base_offset & 0x7u) << 49 |
           (uint64_t)(layout & 0x3u) << 62;
}

/* The fields of a descriptor as stored (addresses and offsets in 16-byte units). */
typedef struct fx_wgmma_desc_fields {
    uint32_t start_address; /* bits [0,14)  */
    uint32_t lbo;           /* bits [16,30) */
    uint32_t sbo;           /* bits [32,46) */
    uint32_t base_offset;   /* bits [49,52) */
    uint32_t layout;        /* bits [62,64) */
} fx_wgmma_desc_fields;

static inline FX_WGMMA_HD fx_wgmma_desc_fields fx_wgmma_desc_decode(uint64_t desc)
{
    fx_wgmma_desc_fields f;
    f.start_address = (uint32_t)(desc & 0x3FFFu);
    f.lbo = (uint32_t)((desc >> 16) & 0x3FFFu);
    f.sbo = (uint32_t)((desc >> 32) & 0x3FFFu);
    f.base_offset = (uint32_t)((desc >> 49) & 0x7u);
    f.layout = (uint32_t)((desc >> 62) & 0x3u);
    return f;
}

/* K-major operand, 128B swizzle: Q and K for S = QKᵀ (trans 0), head_dim contiguous.
 * The tile is rows (M or N) × 64 elements of 2 bytes, 1024-byte aligned.
 *   SBO = 1024 B: "the offset from the first 8 rows to the next 8 rows" (K-major row of
 *         §9.7.15.5.1.2.1.2) — one packed atom.
 *   LBO: "not used, assumed to be 1" for swizzled K-major layouts (§9.7.15.5.1.2.1.1); we
 *         store 1 (16 bytes), as CUTLASS does.
 * One descriptor covers a k16 slice (32 bytes of each row) of 64 (A) or N (B) rows. */
static inline FX_WGMMA_HD uint64_t fx_wgmma_desc_k_sw128(uint32_t smem_addr)
{
    return fx_wgmma_desc_make(smem_addr, 16u, FX_SWIZZLE128_ATOM_BYTES, 0u, FX_WGMMA_SWIZZLE_128B);
}

/* K-major operands of 8-bit types (stage 10), whose rows are shorter in bytes than a 128B
 * swizzle span at the tiles' widths. The rule is the 128B one with a narrower atom: TMA
 * with CU_TENSOR_MAP_SWIZZLE_64B (32B) writes rows of 64 (32) bytes, 8 rows per atom of
 * 512 (256) bytes, and the 16-byte chunk index of row r is XORed with (r / 2) % 4
 * ((r / 4) % 2): CUTLASS's Swizzle<2,4,3> (Swizzle<1,4,3>). SBO is one atom, LBO unused
 * (stored as 16 bytes), tile start aligned to the atom.
 *   64B: Q and K of stage 10, 64 e4m3 of head_dim per row: a k32 slice is 32 bytes, so a
 *        row holds two, the second at +32 bytes (the hardware swizzles the full address).
 *   32B: Vᵀ of stage 10 (keys contiguous), 32 keys per row: one k32 slice per tile. */
#define FX_SWIZZLE64_ATOM_BYTES 512u
#define FX_SWIZZLE64_ROW_BYTES 64u
#define FX_SWIZZLE32_ATOM_BYTES 256u
#define FX_SWIZZLE32_ROW_BYTES 32u

static inline FX_WGMMA_HD uint64_t fx_wgmma_desc_k_sw64(uint32_t smem_addr)
{
    return fx_wgmma_desc_make(smem_addr, 16u, FX_SWIZZLE64_ATOM_BYTES, 0u, FX_WGMMA_SWIZZLE_64B);
}

static inline FX_WGMMA_HD uint64_t fx_wgmma_desc_k_sw32(uint32_t smem_addr)
{
    return fx_wgmma_desc_make(smem_addr, 16u, FX_SWIZZLE32_ATOM_BYTES, 0u, FX_WGMMA_SWIZZLE_32B);
}

/* MN-major operand, 128B swizzle: V as the B operand of O = PV (trans-b 1): the tile is
 * K rows (the keys) × N columns (head_dim) with N contiguous, as TMA loads V. Each 64-column
 * slab is rows × 128 bytes, 8 K-rows per 1024-byte atom; slabs follow each other.
 *   SBO = 1024 B: "offset from the first 8 columns to the next 8 columns" in the ISA's
 *         MN-major picture (§9.7.15.5.1.2.1.2), i.e. from K-rows 0-7 to K-rows 8-15.
 *   LBO = mn_slab_bytes: "offset from the first (swizzle-byte-size/16) rows to the next"
 *         (§9.7.15.5.1.2.1.1) = from MN-columns 0-63 to 64-127: the slab size, rows × 128 B.
 *         Only read when the instruction's N (or M) exceeds 64.
 * Canonical layout in 16-byte units: ((8,n),(8,k)):((1,LBO),(8,SBO)) (ISA "Canonical
 * Layouts"; CUTLASS make_gmma_desc<Major::MN> sets the same two strides). */
static inline FX_WGMMA_HD uint64_t fx_wgmma_desc_mn_sw128(uint32_t smem_addr,
                                                          uint32_t mn_slab_bytes)
{
    return fx_wgmma_desc_make(smem_addr, mn_slab_bytes, FX_SWIZZLE128_ATOM_BYTES, 0u,
                              FX_WGMMA_SWIZZLE_128B);
}

/* Moves a descriptor's start address by `bytes` (a multiple of 16) without touching the
 * other fields; the address field is the low 14 bits, so adding bytes >> 4 to the 64-bit
 * value is enough while the address stays below 256 KiB (shared memory is 228 KiB).
 *   K-major 128B: the next k16 slice inside the atom is +32 bytes (16 elements × 2 B) →
 *                 +2 in the field (FX_WGMMA_K16_STEP_K_MAJOR_BYTES); the swizzle is applied
 *                 by the hardware to the full address, which is why the tile must be
 *                 1024-aligned. After 4 slices (64 elements) the next slab starts at
 *                 +rows × 128 bytes.
 *   MN-major 128B: the next k16 slice is 16 rows further: +16 × 128 = 2048 bytes. */
#define FX_WGMMA_K16_STEP_K_MAJOR_BYTES 32u
#define FX_WGMMA_K16_STEP_MN_MAJOR_BYTES (16u * FX_SWIZZLE128_ROW_BYTES)

static inline FX_WGMMA_HD uint64_t fx_wgmma_desc_advance(uint64_t desc, uint32_t bytes)
{
    /* A 32-bit add to the low word, which holds the address field: the same value as the
     * 64-bit add (no field reaches bits 30 and 31, so nothing carries into the high word), but
     * one add, where the 64-bit one also adds the carry to the high word (CUTLASS's
     * DescriptorIterator adds to the low word likewise). */
    const uint32_t lo = (uint32_t)desc + (bytes >> 4);
    return (desc & 0xFFFFFFFF00000000ull) | (uint64_t)lo;
}

/* Byte offset, inside a 1024-byte-aligned tile of 128-byte rows written by TMA with
 * CU_TENSOR_MAP_SWIZZLE_128B, of the byte at (row, col_bytes), col_bytes in [0, 128):
 * the 16-byte chunk index is XORed with row % 8 (CUTLASS's Swizzle<3,4,3> on byte
 * addresses: bits [4,7) ^= bits [7,10)); the byte's place inside its chunk is kept.
 *
 *   logical chunk:  0 1 2 3 4 5 6 7
 *   row 0  stored:  0 1 2 3 4 5 6 7
 *   row 1  stored:  1 0 3 2 5 4 7 6
 *   ...            (row r: chunk c is stored at chunk c ^ (r % 8))
 */
static inline FX_WGMMA_HD uint32_t fx_swizzle128_offset(uint32_t row, uint32_t col_bytes)
{
    const uint32_t chunk = (col_bytes >> 4) & 7u;
    return row * FX_SWIZZLE128_ROW_BYTES + ((chunk ^ (row & 7u)) << 4) + (col_bytes & 15u);
}

#ifdef __cplusplus
}
#endif
#endif
