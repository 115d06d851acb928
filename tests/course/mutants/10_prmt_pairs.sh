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
    "const uint32_t sel_even = lane < 16 ? 0x6420u : 0x7531u;
    const uint32_t sel_odd = lane < 16 ? 0x7531u : 0x6420u;" \
    "const uint32_t sel_even = lane < 16 ? 0x5410u : 0x7632u;
    const uint32_t sel_odd = lane < 16 ? 0x7632u : 0x5410u;"
