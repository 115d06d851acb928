#!/usr/bin/env bash
# stage: 08
# caught-by: ptx speed
# what: the overlap without its first wait (no wgmma.wait_group 1): the softmax reads S's
#   accumulators with the S wgmma not waited for; ptxas, seeing that, serializes the wgmmas
#   itself, so the answers stay right and the overlap is gone (measured on the H200: matrix
#   passes, 0.688x the reference's speed)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
replace_once "$1/stages/08_intra_wg_overlap/fwd.cu" \
    "        fx_wgmma_wait<1>();  // the S group (committed first) is done; PV may still run
" ""
