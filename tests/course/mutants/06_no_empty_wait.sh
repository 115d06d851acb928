#!/usr/bin/env bash
# stage: 06
# caught-by: matrix repeat
# what: a race: the producer refills a stage of the K/V ring without waiting for the
#   consumers to release it (no wait on the empty barriers), overwriting K and V that the
#   wgmmas are still reading
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
f=$1/stages/06_warp_specialized/fwd.cu
replace_once "$f" "    if (refill)
        fx_mbarrier_wait(fx_smem_addr(Cfg::kReleaseKAfterS ? &smem.k_empty[write.stage]
                                                           : &smem.v_empty[write.stage]),
                         write.phase ^ 1);
" ""
replace_once "$f" "    if (refill && Cfg::kReleaseKAfterS)
        fx_mbarrier_wait(fx_smem_addr(&smem.v_empty[write.stage]), write.phase ^ 1);
" ""
