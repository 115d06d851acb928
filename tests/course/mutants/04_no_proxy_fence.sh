#!/usr/bin/env bash
# stage: 04
# caught-by: ptx
# what: a missing fence: O is written to shared memory by st.shared (the generic proxy) and
#   read by the TMA store (the async proxy) without fence.proxy.async between them, a race
#   that a GPU run may well not show
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
replace_once "$1/stages/04_tma_mbarrier/fwd.cu" "    fx_fence_proxy_async_smem();
    __syncwarp();" "    __syncwarp();"
