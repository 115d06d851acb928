/*
 * fx_tma.c — tensor maps encoded through the driver entry point (fx_tma.h).
 *
 * The checks follow the requirements listed for cuTensorMapEncodeTiled in the CUDA driver
 * API reference (cuda.h, "Tensor Map Object Management"), restricted to what the stages
 * use: 2-byte elements, tiled mode, no interleave, zero fill.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "fx_tma.h"

/* The signature of cuTensorMapEncodeTiled as introduced in CUDA 12.0 (cudaTypedefs.h:
 * PFN_cuTensorMapEncodeTiled_v12000); asking for that version keeps any 12.x+ driver. */
typedef CUresult (*fx_encode_tiled_fn)(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                       cuuint32_t tensorRank, void *globalAddress,
                                       const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                       const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                       CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                       CUtensorMapL2promotion l2Promotion,
                                       CUtensorMapFloatOOBfill oobFill);
#define FX_TMA_ENCODE_VERSION 12000

/* Writes the message into `why` and returns `status`. */
static int fail(char *why, size_t len, int status, const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return status;
}

fx_tma_tiled fx_tma_tiled_qkv(const void *base, fx_dtype dtype, fx_layout l, int batch, int seqlen,
                              int heads, int head_dim, uint32_t box_rows, uint32_t box_cols)
{
    const uint64_t esize = fx_dtype_bytes(dtype);
    fx_tma_tiled t = {0};
    t.dtype = dtype;
    t.rank = 4;
    t.global_address = base;
    t.global_dim[0] = (uint64_t)head_dim;
    t.global_dim[1] = (uint64_t)heads;
    t.global_dim[2] = (uint64_t)seqlen;
    t.global_dim[3] = (uint64_t)batch;
    t.global_stride_bytes[0] = (uint64_t)l.head_stride * esize;
    t.global_stride_bytes[1] = (uint64_t)l.row_stride * esize;
    t.global_stride_bytes[2] = (uint64_t)l.batch_stride * esize;
    t.box_dim[0] = box_cols;
    t.box_dim[1] = 1;
    t.box_dim[2] = box_rows;
    t.box_dim[3] = 1;
    t.swizzle = FX_TMA_SWIZZLE_128B;
    t.l2_promotion = FX_TMA_L2_256B;
    return t;
}

int fx_tma_validate(const fx_tma_tiled *t, char *why, size_t why_len)
{
    if (t->dtype != FX_BF16 && t->dtype != FX_FP16 && t->dtype != FX_E4M3)
        return fail(why, why_len, FX_TMA_BAD_ARGS,
                    "dtype %d: tensor maps here take bf16, fp16 or e4m3 only", (int)t->dtype);
    const uint64_t esize = fx_dtype_bytes(t->dtype);
    if (t->rank < 2 || t->rank > FX_TMA_MAX_RANK)
        return fail(why, why_len, FX_TMA_BAD_ARGS, "rank %d is outside 2..%d", t->rank,
                    FX_TMA_MAX_RANK);
    if (t->global_address == NULL)
        return fail(why, why_len, FX_TMA_BAD_ARGS, "global_address is NULL");
    if ((uintptr_t)t->global_address % FX_TMA_ALIGN_BYTES != 0)
        return fail(why, why_len, FX_TMA_BAD_ARGS, "global_address %p is not %d-byte aligned",
                    t->global_address, FX_TMA_ALIGN_BYTES);

    for (int i = 0; i < t->rank; ++i) {
        if (t->global_dim[i] == 0 || t->global_dim[i] > (UINT64_C(1) << 32))
            return fail(why, why_len, FX_TMA_BAD_ARGS,
                        "global_dim[%d] (%" PRIu64 ") is outside 1..2^32 elements", i,
                        t->global_dim[i]);
        if (t->box_dim[i] == 0 || t->box_dim[i] > FX_TMA_MAX_BOX)
            return fail(why, why_len, FX_TMA_BAD_ARGS,
                        "box_dim[%d] (%" PRIu32 ") is outside 1..%d elements", i, t->box_dim[i],
                        FX_TMA_MAX_BOX);
    }
    for (int i = 0; i + 1 < t->rank; ++i) {
        const uint64_t s = t->global_stride_bytes[i];
        if (s % FX_TMA_ALIGN_BYTES != 0)
            return fail(why, why_len, FX_TMA_BAD_ARGS,
                        "global_stride_bytes[%d] (%" PRIu64 ") is not a multiple of %d bytes", i, s,
                        FX_TMA_ALIGN_BYTES);
        if (s == 0 || s >= (UINT64_C(1) << 40))
            return fail(why, why_len, FX_TMA_BAD_ARGS,
                        "global_stride_bytes[%d] (%" PRIu64 ") is outside 16 .. 2^40 - 16 bytes", i,
                        s);
    }
    if (t->global_stride_bytes[0] < t->global_dim[0] * esize)
        return fail(why, why_len, FX_TMA_BAD_ARGS,
                    "global_stride_bytes[0] (%" PRIu64 ") is smaller than a row of dimension 0 "
                    "(%" PRIu64 " elements = %" PRIu64 " bytes)",
                    t->global_stride_bytes[0], t->global_dim[0], t->global_dim[0] * esize);

    const uint64_t inner_bytes = (uint64_t)t->box_dim[0] * esize;
    if (inner_bytes % FX_TMA_ALIGN_BYTES != 0)
        return fail(why, why_len, FX_TMA_BAD_ARGS,
                    "box_dim[0] (%" PRIu32 " elements = %" PRIu64 " bytes) is not a multiple of "
                    "%d bytes",
                    t->box_dim[0], inner_bytes, FX_TMA_ALIGN_BYTES);
    switch (t->swizzle) {
    case FX_TMA_SWIZZLE_NONE: break;
    case FX_TMA_SWIZZLE_32B:
    case FX_TMA_SWIZZLE_64B:
    case FX_TMA_SWIZZLE_128B:
        if (inner_bytes > (uint64_t)t->swizzle)
            return fail(why, why_len, FX_TMA_BAD_ARGS,
                        "box_dim[0] (%" PRIu32 " elements = %" PRIu64 " bytes) exceeds the "
                        "%d-byte swizzle span (%dB swizzle): split the row into boxes of at most "
                        "%" PRIu64 " elements",
                        t->box_dim[0], inner_bytes, (int)t->swizzle, (int)t->swizzle,
                        (uint64_t)t->swizzle / esize);
        break;
    default:
        return fail(why, why_len, FX_TMA_BAD_ARGS, "swizzle %d is not one of 0, 32, 64, 128 bytes",
                    (int)t->swizzle);
    }
    switch (t->l2_promotion) {
    case FX_TMA_L2_NONE:
    case FX_TMA_L2_64B:
    case FX_TMA_L2_128B:
    case FX_TMA_L2_256B: break;
    default:
        return fail(why, why_len, FX_TMA_BAD_ARGS,
                    "l2_promotion %d is not one of 0, 64, 128, 256 bytes", (int)t->l2_promotion);
    }
    return FX_TMA_OK;
}

/* The driver's cuTensorMapEncodeTiled, or NULL with the reason in `why`. */
static fx_encode_tiled_fn encode_tiled_entry(char *why, size_t why_len)
{
    /* The entry point is written through a void ** that points at a function pointer
     * (the dlsym idiom), so no object pointer is converted to a function pointer. */
    fx_encode_tiled_fn fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t err = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", (void **)&fn, FX_TMA_ENCODE_VERSION, cudaEnableDefault, &found);
#else
    cudaError_t err =
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", (void **)&fn, cudaEnableDefault, &found);
#endif
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: leave no error behind for the caller */
        fail(why, why_len, FX_TMA_NO_DRIVER,
             "no CUDA driver to encode the tensor map (cuTensorMapEncodeTiled through "
             "cudaGetDriverEntryPointByVersion: %s)",
             cudaGetErrorName(err));
        return NULL;
    }
    if (fn == NULL || found != cudaDriverEntryPointSuccess) {
        fail(why, why_len, FX_TMA_NO_DRIVER,
             "the CUDA driver has no cuTensorMapEncodeTiled for CUDA %d.%d (query result %d): "
             "a driver for CUDA 12.0 or later is needed",
             FX_TMA_ENCODE_VERSION / 1000, FX_TMA_ENCODE_VERSION % 1000 / 10, (int)found);
        return NULL;
    }
    return fn;
}

int fx_tma_encode_tiled(CUtensorMap *map, const fx_tma_tiled *t, char *why, size_t why_len)
{
    int rc = fx_tma_validate(t, why, why_len);
    if (rc != FX_TMA_OK)
        return rc;
    if (map == NULL)
        return fail(why, why_len, FX_TMA_BAD_ARGS, "the CUtensorMap pointer is NULL");
    if ((uintptr_t)map % FX_TMA_MAP_ALIGN_BYTES != 0)
        return fail(why, why_len, FX_TMA_BAD_ARGS, "the CUtensorMap at %p is not %d-byte aligned",
                    (void *)map, FX_TMA_MAP_ALIGN_BYTES);

    fx_encode_tiled_fn encode = encode_tiled_entry(why, why_len);
    if (encode == NULL)
        return FX_TMA_NO_DRIVER;

    cuuint64_t dims[FX_TMA_MAX_RANK], strides[FX_TMA_MAX_RANK - 1];
    cuuint32_t box[FX_TMA_MAX_RANK], element_strides[FX_TMA_MAX_RANK];
    for (int i = 0; i < t->rank; ++i) {
        dims[i] = t->global_dim[i];
        box[i] = t->box_dim[i];
        element_strides[i] = 1; /* every element of the box, no striding */
        if (i + 1 < t->rank)
            strides[i] = t->global_stride_bytes[i];
    }
    /* e4m3 moves as bytes: TMA copies, it does not convert (CUTLASS maps 8-bit floats to
     * UINT8 too). */
    const CUtensorMapDataType type = t->dtype == FX_BF16   ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                     : t->dtype == FX_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_UINT8;
    CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
    switch (t->swizzle) {
    case FX_TMA_SWIZZLE_32B: swizzle = CU_TENSOR_MAP_SWIZZLE_32B; break;
    case FX_TMA_SWIZZLE_64B: swizzle = CU_TENSOR_MAP_SWIZZLE_64B; break;
    case FX_TMA_SWIZZLE_128B: swizzle = CU_TENSOR_MAP_SWIZZLE_128B; break;
    default: break;
    }
    CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_NONE;
    switch (t->l2_promotion) {
    case FX_TMA_L2_64B: l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_64B; break;
    case FX_TMA_L2_128B: l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B; break;
    case FX_TMA_L2_256B: l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B; break;
    default: break;
    }
    /* OOB_FILL_NONE fills out-of-bounds elements with zeros (NAN_REQUEST_ZERO_FMA would
     * fill NaN). */
    const CUresult res = encode(map, type, (cuuint32_t)t->rank, (void *)t->global_address, dims,
                                strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                swizzle, l2, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (res != CUDA_SUCCESS)
        return fail(why, why_len, FX_TMA_DRIVER_ERROR,
                    "cuTensorMapEncodeTiled refused the map: CUresult %d", (int)res);
    return FX_TMA_OK;
}
