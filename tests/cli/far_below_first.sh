#!/usr/bin/env bash
# far_below_first.sh — the case of tests/cli/far_below_first.py (a first K/V block whose
# one key lies ~6·10^8 below the rest, in log2 units; fp16) through each PROGRAM's
# --check: O and the LSE within the pass rule against fp64, no NaN. It failed with NaN in
# O while the fast softmax rounded its reference R to nearest (docs/05_wgmma.md, the
# softmax state).
#
#   tests/cli/far_below_first.sh [--cpu] PROGRAM...
#
# --cpu: the stages' CPU models (stage 03 has one; CI runs it there). Without it the GPU: a
# program that exits 77 (no suitable GPU) is skipped, and when every one is, the script
# exits 77. Exit 0 all passed, 1 one failed (its output printed), 2 bad usage.
set -euo pipefail

cpu=()
if [[ ${1:-} == --cpu ]]; then
    cpu=(--cpu)
    shift
fi
(($# >= 1)) || { echo "usage: $0 [--cpu] PROGRAM..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$(dirname "${BASH_SOURCE[0]}")/far_below_first.py" "$work/case" >/dev/null
failed=0 ran=0
for prog in "$@"; do
    rc=0
    "$prog" ${cpu[@]+"${cpu[@]}"} --load "$work/case" --check >"$work/out.log" 2>&1 || rc=$?
    if ((rc == 77)); then
        echo "  SKIP ${prog##*/}: $(tail -n 1 "$work/out.log")"
        continue
    fi
    ran=$((ran + 1))
    if ((rc != 0)); then
        echo "  FAIL ${prog##*/} (exit $rc):"
        cat "$work/out.log"
        failed=1
    else
        echo "  PASS ${prog##*/}: $(grep -m 1 '^  O ' "$work/out.log")"
    fi
done
((failed == 0)) || exit 1
((ran > 0)) || exit 77
