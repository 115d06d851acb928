#!/usr/bin/env bash
# stage: 05
# caught-by: ptx speed
# what: mma.sync instead of wgmma: stage 04's kernel (ldmatrix + mma.sync) handed in as
#   stage 05's; numerically right, so the matrix passes, but it is not what 05 teaches
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
t=$1/stages
cp "$t/04_tma_mbarrier/fwd.cu" "$t/04_tma_mbarrier/traits.cuh" "$t/05_wgmma/"
# 05's entry points are named by its own FX_ENTRY (fx_stage.h), so 04's source builds as 05's.
grep -q "fx_mbarrier_wait_named" "$t/05_wgmma/fwd.cu" || { echo "mutant: copy failed" >&2; exit 1; }
