#!/usr/bin/env bash
# stage: 10
# caught-by: matrix
# cuda-flags:
# what: the V transpose's prmt keeps the 16-bit pairs together (selectors 0x5410, 0x7632,
#   the halves of two registers, as pack_p's are) instead of splitting each pair's bytes into
#   two Vᵀ rows (0x6420, 0x7531): a transpose at 16-bit granularity, wrong for 8-bit V. The
#   PTX is the reference's but for immediates, so only the answers show it: the matrix's
#   row-major cases (every other case; those with V given transposed bypass the transpose)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
replace_once "$1/stages/10_fp8/fwd.cu" \
    "fx_prmt(r[0], r[1], 0x6420u);  // Vᵀ row d0 + 2c: even bytes
        const uint32_t row1 = fx_prmt(r[0], r[1], 0x7531u);  // row d0 + 2c + 1: odd bytes
        const uint32_t row16 = fx_prmt(r[2], r[3], 0x6420u);
        const uint32_t row17 = fx_prmt(r[2], r[3], 0x7531u);" \
    "fx_prmt(r[0], r[1], 0x5410u);  // Vᵀ row d0 + 2c: even bytes
        const uint32_t row1 = fx_prmt(r[0], r[1], 0x7632u);  // row d0 + 2c + 1: odd bytes
        const uint32_t row16 = fx_prmt(r[2], r[3], 0x5410u);
        const uint32_t row17 = fx_prmt(r[2], r[3], 0x7632u);"
