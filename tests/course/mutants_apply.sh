#!/usr/bin/env bash
# mutants_apply.sh [REPO] — every mutant of tests/course/mutants/ still finds its target.
#
# A mutant replaces literal text in a stage's sources (lib.sh's replace_once, which fails when
# the text occurs other than once). When a stage's code moves on, a mutant can lose its
# target; the GPU grading run (tests/course/gpu_grading.sh) would then stop at it. This
# applies each mutant to a copy of the stages and fails (exit 1) on one that does not apply
# or changes nothing. Needs bash, perl, cmp; no GPU, no build. CTest: course_mutants_apply.
set -uo pipefail
repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0
for m in "$repo"/tests/course/mutants/[0-9]*.sh; do
    name=$(basename "$m" .sh)
    rm -rf "$tmp/tree" && mkdir -p "$tmp/tree" && cp -r "$repo/stages" "$tmp/tree/"
    n=$((n + 1))
    if ! bash "$m" "$tmp/tree" >"$tmp/log" 2>&1; then
        echo "FAIL: $name does not apply: $(tail -n 1 "$tmp/log")"
        fail=1
    elif diff -rq "$repo/stages" "$tmp/tree/stages" >/dev/null; then
        echo "FAIL: $name changes nothing"
        fail=1
    else
        echo "ok: $name"
    fi
done
((n > 0)) || { echo "FAIL: no mutants under $repo/tests/course/mutants"; exit 1; }
((fail == 0)) && echo "PASS ($n mutants apply)" || echo FAIL
exit "$fail"
