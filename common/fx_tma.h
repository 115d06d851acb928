/*
 * fx_tma.h — TMA tensor maps for the Hopper stages (stage 04 onwards), encoded on the host.
 *
 * A tensor map (CUtensorMap, 128 bytes, opaque) describes a tensor in global memory and
 * the box that one cp.async.bulk.tensor copies (PTX ISA §5.5 "Tensors", §5.5.8
 * "Tensor-map"; CUDA driver API cuTensorMapEncodeTiled). It is passed to the kernel as a
 * `const __grid_constant__ CUtensorMap` parameter (common/ptx/hopper.cuh).
 *
 * Driver API without libcuda at link time (DESIGN.md): cuTensorMapEncodeTiled is reached
 * through cudaGetDriverEntryPointByVersion (the CUDA runtime, linked statically, opens
 * the driver at run time). <cuda.h> is included only for the types and enums. With no
 * driver, encoding fails with FX_TMA_NO_DRIVER and a message that says so (exit 77 for a
 * stage program).
 *
 * Shapes and units (the fx_tma_tiled fields), innermost dimension first, as the driver
 * and the PTX coordinates {c0, c1, ...} count them:
 *   global_dim[i]          elements along dimension i            (1 .. 2^32)
 *   global_stride_bytes[i] bytes between consecutive indices of dimension i+1, for
 *                          i = 0 .. rank-2 (dimension 0 is contiguous: the element size)
 *                          (multiples of 16, < 2^40)
 *   box_dim[i]             elements of one copy along dimension i (1 .. 256); the box's
 *                          inner row, box_dim[0] × element size, is a multiple of 16 bytes
 *                          and at most the swizzle span (128 bytes for 128B swizzle)
 * For Q, K, V, O as [batch, seqlen, heads, head_dim] (fx_layout), fx_tma_tiled_qkv builds
 * the 4D map {head_dim, heads, seqlen, batch} whose box {cols, 1, rows, 1} is one rows × cols
 * tile of one head: the coordinates of a tile are {col0, head, row0, batch}.
 */
#ifndef FX_TMA_H
#define FX_TMA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h> /* CUtensorMap and its enums: types only, nothing is linked */

#include "fx_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FX_TMA_MAX_RANK 5
#define FX_TMA_MAX_BOX 256         /* elements per box dimension (driver limit)           */
#define FX_TMA_ALIGN_BYTES 16      /* global address and strides (driver limit)           */
#define FX_TMA_SWIZZLE128_SPAN 128 /* bytes: the inner box row limit with 128B swizzle    */
#define FX_TMA_MAP_ALIGN_BYTES 64  /* the CUtensorMap itself (driver limit)               */

typedef enum fx_tma_status {
    FX_TMA_OK = 0,
    FX_TMA_BAD_ARGS = 1,    /* the request breaks a limit; `why` names it               */
    FX_TMA_NO_DRIVER = 2,   /* no CUDA driver, or one without cuTensorMapEncodeTiled    */
    FX_TMA_DRIVER_ERROR = 3 /* cuTensorMapEncodeTiled refused; `why` has its CUresult   */
} fx_tma_status;

typedef enum fx_tma_swizzle {
    FX_TMA_SWIZZLE_NONE = 0,
    FX_TMA_SWIZZLE_32B = 32,
    FX_TMA_SWIZZLE_64B = 64,
    FX_TMA_SWIZZLE_128B = 128 /* what wgmma's 128B-swizzle descriptors read (wgmma_desc.h) */
} fx_tma_swizzle;

typedef enum fx_tma_l2_promotion {
    FX_TMA_L2_NONE = 0,
    FX_TMA_L2_64B = 64,
    FX_TMA_L2_128B = 128,
    FX_TMA_L2_256B = 256
} fx_tma_l2_promotion;

/* A tiled tensor map request. Interleave is always none and out-of-bounds elements are
 * filled with zeros (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE): a box past seqlen loads zeros. */
typedef struct fx_tma_tiled {
    fx_dtype dtype;                       /* FX_BF16, FX_FP16 (2 bytes) or FX_E4M3 (1) */
    int rank;                             /* 2 .. 5                                   */
    const void *global_address;           /* device pointer, 16-byte aligned          */
    uint64_t global_dim[FX_TMA_MAX_RANK]; /* elements                                 */
    uint64_t global_stride_bytes[FX_TMA_MAX_RANK - 1]; /* bytes, of dimensions 1..rank-1 */
    uint32_t box_dim[FX_TMA_MAX_RANK]; /* elements                                 */
    fx_tma_swizzle swizzle;
    fx_tma_l2_promotion l2_promotion;
} fx_tma_tiled;

/* The 4D map of a [batch, seqlen, heads, head_dim] tensor with element strides `l`
 * (fx_layout_q / fx_layout_kv): dims {head_dim, heads, seqlen, batch}, strides in bytes
 * {head_stride, row_stride, batch_stride} × element size, box {box_cols, 1, box_rows, 1},
 * 128B swizzle, L2 promotion 256B. No checks here: fx_tma_validate does them. */
fx_tma_tiled fx_tma_tiled_qkv(const void *base, fx_dtype dtype, fx_layout l, int batch, int seqlen,
                              int heads, int head_dim, uint32_t box_rows, uint32_t box_cols);

/* Checks the request against the driver's contract without calling it. Returns FX_TMA_OK,
 * or FX_TMA_BAD_ARGS with a message naming the limit in `why`, e.g.
 *   "box_dim[0] (128 elements = 256 bytes) exceeds the 128-byte swizzle span (128B swizzle)"
 *   "global_address 0x...08 is not 16-byte aligned"
 *   "global_stride_bytes[1] (200) is not a multiple of 16 bytes" */
int fx_tma_validate(const fx_tma_tiled *t, char *why, size_t why_len);

/* Validates, then encodes `map` (FX_TMA_MAP_ALIGN_BYTES-aligned, as the driver requires;
 * the CUtensorMap type itself is declared 128-byte aligned) through the driver's
 * cuTensorMapEncodeTiled. Returns an fx_tma_status, with the reason in `why` for
 * anything but FX_TMA_OK. */
int fx_tma_encode_tiled(CUtensorMap *map, const fx_tma_tiled *t, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
