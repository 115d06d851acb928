#!/usr/bin/env bash
# stage: 09
# caught-by: matrix repeat sanitizers
# cuda-flags:
# what: the order's Q block off by one (num_m_blocks − rank, not num_m_blocks − 1 − rank):
#   every position names the block after the right one, so block 0 of every (batch, head) is
#   never computed and one past the last is, its rows outside the sequence
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
replace_once "$1/stages/09_persistent/fwd.cu" \
    "    t.m_block = s.num_m_blocks - 1 - rank;" \
    "    t.m_block = s.num_m_blocks - rank;"
