#!/usr/bin/env bash
# stage: 07
# caught-by: ptx
# what: the pingpong schedule left out: take_turn and pass_turn do nothing and consumer 0
#   takes no first turn, so the two consumer warpgroups run free; right answers, no
#   bar.arrive in the PTX
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
f=$1/stages/07_pingpong/fwd.cu
replace_once "$f" "    fx_named_barrier_sync(kBarrierTurn + (uint32_t)c.consumer, kTurnThreads);
" ""
pass="    fx_named_barrier_arrive(kBarrierTurn + (uint32_t)((c.consumer + 1) % "
pass+="Cfg::kNumConsumers),
                            kTurnThreads);
"
replace_once "$f" "$pass" ""
replace_once "$f" "    if (c.consumer == 0)
        fx_named_barrier_arrive(kBarrierTurn, kTurnThreads);  // take the first turn
" ""
