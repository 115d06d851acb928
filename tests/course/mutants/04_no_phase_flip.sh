#!/usr/bin/env bash
# stage: 04
# caught-by: matrix repeat sanitizers
# cuda-flags: -DFX_DEBUG_HANGS
# what: a wrong phase: the ring wraps but the parity waited on stays the same, so from the
#   second round on the wait returns for a fill that has not landed (stale K/V), or, with
#   the bounded wait of FX_DEBUG_HANGS, reports the wait it is stuck in
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
replace_once "$1/stages/04_tma_mbarrier/fwd.cu" "            phase ^= 1;
" ""
