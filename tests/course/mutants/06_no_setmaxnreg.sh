#!/usr/bin/env bash
# stage: 06
# caught-by: ptx
# what: warp specialization without the register handoff: no setmaxnreg, so the consumers
#   keep the launch's even share of the register file
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
f=$1/stages/06_warp_specialized/fwd.cu
replace_once "$f" "        fx_setmaxnreg_dec<Cfg::kProducerRegs>();
" ""
replace_once "$f" "    fx_setmaxnreg_inc<Cfg::kConsumerRegs>();
" ""
