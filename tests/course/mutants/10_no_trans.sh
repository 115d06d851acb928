#!/usr/bin/env bash
# stage: 10
# caught-by: ptx matrix
# cuda-flags:
# what: the V transpose loads its 8×8 matrices with ldmatrix without .trans: each lane gets
#   a key's head_dim pairs, not a head_dim pair's keys, and prmt and stmatrix write V's rows
#   where Vᵀ's belong
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
replace_once "$1/stages/10_fp8/fwd.cu" \
    "fx_ldmatrix_x4_trans(r," "fx_ldmatrix_x4(r,"
