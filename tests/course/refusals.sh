#!/usr/bin/env bash
# refusals.sh — make_assignment.sh and grade.sh refuse bad requests with exit 2 and a reason,
# before they copy or build anything (label `course`; no GPU, no build).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect2() {  # what pattern command...: exit 2 and the pattern in stderr
    local what=$1 pat=$2 rc=0
    shift 2
    "$@" > "$tmp/out" 2> "$tmp/err" || rc=$?
    if ((rc == 2)) && grep -qE "$pat" "$tmp/err"; then
        echo "ok: $what (exit 2: $(head -n1 "$tmp/err"))"
    else
        echo "FAIL: $what: exit $rc, stderr: $(head -n3 "$tmp/err")"
        fail=1
    fi
}
mk=$root/scripts/make_assignment.sh gr=$root/scripts/grade.sh
expect2 "unknown stage" "no stage '42'" "$mk" 42 "$tmp/a"
expect2 "a stage without regions" "has no ASSIGNMENT regions" "$mk" 03 "$tmp/b"
mkdir -p "$tmp/full" && touch "$tmp/full/x"
expect2 "a DIR that is not empty" "not an empty folder" "$mk" 04 "$tmp/full"
expect2 "a DIR inside the repository" "inside the repository" "$mk" 04 "$root/build-assignment-test"
expect2 "an unknown option" "unknown option" "$mk" --frobnicate 04
expect2 "grade: unknown stage" "no stage '42'" "$gr" 42 "$tmp"
expect2 "grade: not a tree" "not a flash-explorer tree" "$gr" 04 "$tmp"
expect2 "grade: a missing --prebuilt" "no such folder" "$gr" 04 --prebuilt "$tmp/none"
expect2 "grade: --jobs 0" "positive count" "$gr" 04 "$tmp" --jobs 0
# A malformed region (no END) in a copy of the repository's scripts and stage 04.
mkdir -p "$tmp/repo/scripts" "$tmp/repo/stages/04_tma_mbarrier"
cp "$mk" "$tmp/repo/scripts/"
printf '/* ASSIGNMENT(x): spec */\nint a;\n' > "$tmp/repo/stages/04_tma_mbarrier/fwd.cu"
mk2=$tmp/repo/scripts/make_assignment.sh
expect2 "a region without END" "has no END ASSIGNMENT" "$mk2" 04 "$tmp/c"
printf '/* ASSIGNMENT(X y): spec */\nint a;\n/* END ASSIGNMENT */\n' \
    > "$tmp/repo/stages/04_tma_mbarrier/fwd.cu"
expect2 "a region with a bad name" "lowercase name" "$mk2" 04 "$tmp/d"
[[ ! -e $root/build-assignment-test ]] || { echo "FAIL: a refused DIR was created"; fail=1; }
((fail)) && echo FAIL || echo PASS
exit $fail
