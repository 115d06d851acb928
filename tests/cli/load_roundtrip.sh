#!/usr/bin/env bash
# load_roundtrip.sh — --load runs a stage on the files --save wrote, and gives the same bits:
# for each PROGRAM, a drawn case is saved (--save A), loaded and saved again (--load A --save
# B), and every file of B must equal A's byte for byte (inputs, O, LSE, and dO, dQ, dK, dV
# where the stage has a backward; e4m3: the codes, the descales and the fp32 inputs). Then
# one bit of A's Q is flipped (C) and the outputs loaded from C must differ from A's: a
# --load that drew its inputs from the seed instead of reading them would pass the first
# half and fail here.
#
#   tests/cli/load_roundtrip.sh [--cpu] PROGRAM...
#
# --cpu: the stages' CPU models (stages 02 and 03 have one, and stage 10 at e4m3; CI runs
# them there). Without it the GPU: a program that exits 77 (no suitable GPU) is skipped, and
# when every one is, the script exits 77. The case: batch 1, seqlen_q 70, seqlen_k 90, heads
# 4 over 2 (GQA), head_dim 64, causal, in bf16 or, for a stage that does not take it, the
# first dtype its --help lists (stage 10: e4m3, per-tensor descales, V row-major); stage 09
# also a variable-length batch, an e4m3 stage also per-block descales with Hadamard and V
# given transposed (head_dim 128, seqlen_k 96). Exit 0 all passed, 1 one failed (its files
# and output named), 2 bad usage.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/stage_caps.sh
source "$here/../../scripts/stage_caps.sh"

cpu=()
if [[ ${1:-} == --cpu ]]; then
    cpu=(--cpu)
    shift
fi
(($# >= 1)) || { echo "usage: $0 [--cpu] PROGRAM..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0 ran=0

# same DIR1 DIR2 WHAT: every file of DIR1 is in DIR2 with the same bytes.
same() {
    local f ok=1
    for f in "$1"/*; do
        if ! cmp -s "$f" "$2/${f##*/}"; then
            echo "  FAIL $3: ${f##*/} differs (or is missing) after --load"
            ok=0
        fi
    done
    ((ok))
}

# one NAME PROGRAM ARGS...: the round trip of one case.
one() {
    local name=$1 prog=$2 rc=0 d=$work/$1
    shift 2
    local bwd=()
    if fx_stage_has_backward "$prog"; then bwd=(--bwd); fi
    "$prog" "${cpu[@]}" "$@" "${bwd[@]}" --save "$d.A" >"$d.A.log" 2>&1 || rc=$?
    if ((rc == 77)); then
        echo "  SKIP $name: $(tail -1 "$d.A.log")"
        return 0
    fi
    ran=$((ran + 1))
    if ((rc != 0)); then
        echo "  FAIL $name: the first run (--save) exited $rc:"
        tail -3 "$d.A.log"
        failed=1
        return 0
    fi
    rc=0
    "$prog" "${cpu[@]}" --load "$d.A" "${bwd[@]}" --save "$d.B" >"$d.B.log" 2>&1 || rc=$?
    if ((rc != 0)); then
        echo "  FAIL $name: --load exited $rc:"
        tail -3 "$d.B.log"
        failed=1
        return 0
    fi
    same "$d.A" "$d.B" "$name" || { failed=1; return 0; }
    # One bit of Q's first element flipped (its lowest mantissa bit: still finite).
    cp -r "$d.A" "$d.C"
    printf '%b' "\\x$(printf '%02x' $(($(od -An -tu1 -N1 "$d.A/q.bin") ^ 1)))" |
        dd of="$d.C/q.bin" bs=1 count=1 conv=notrunc status=none
    rc=0
    "$prog" "${cpu[@]}" --load "$d.C" "${bwd[@]}" --save "$d.D" >"$d.D.log" 2>&1 || rc=$?
    if ((rc != 0)) || cmp -s "$d.A/o.f32" "$d.D/o.f32"; then
        echo "  FAIL $name: a changed q.bin left O as it was (or the run exited $rc): --load" \
            "did not read the file"
        failed=1
        return 0
    fi
    echo "  PASS $name: --save, --load, --save: $(ls "$d.A" | wc -l) files equal; a changed" \
        "q.bin changes O"
}

for prog in "$@"; do
    [[ -x $prog ]] || { echo "load_roundtrip.sh: $prog is not a program" >&2; exit 2; }
    name=${prog##*/}
    # The stage's first dtype where it does not take the default bf16 (stage 10: e4m3).
    dtypes=$(fx_stage_dtypes "$prog" || true)
    dtype=()
    [[ -z $dtypes || /$dtypes/ == */bf16/* ]] || dtype=(--dtype "${dtypes%%/*}")
    one "$name" "$prog" --batch 1 --seqlen-q 70 --seqlen-k 90 --heads-q 4 --heads-kv 2 \
        --head-dim 64 --causal "${dtype[@]}"
    if [[ ${dtype[*]} == "--dtype e4m3" ]]; then
        one "$name.per-block" "$prog" --batch 1 --seqlen-q 70 --seqlen-k 96 --heads-q 4 \
            --heads-kv 2 --head-dim 128 --causal --dtype e4m3 --fp8-scaling per-block \
            --hadamard --fp8-vt
    fi
    if [[ $name == stage_09* && ${#cpu[@]} -eq 0 ]]; then
        one "$name.varlen" "$prog" --seqlens-q 0,70,129 --seqlens-k 5,90,200 \
            --seqused-k 5,60,200 --heads-q 4 --heads-kv 2 --head-dim 64
    fi
done
if ((failed)); then
    echo "load_roundtrip.sh: FAIL"
    exit 1
fi
if ((ran == 0)); then
    echo "load_roundtrip.sh: every program skipped (no suitable GPU)"
    exit 77
fi
echo "load_roundtrip.sh: PASS ($ran round trips)"
