#!/usr/bin/env bash
# check_tree.sh MODE ARG [BUILD] — one course test (label `course`, tests/CMakeLists.txt): the
# grader run, without a GPU, on a tree made from this repository, and its verdict checked.
#
#   unfilled NN        make_assignment.sh NN, graded --compile-only: the tree must build
#                      (the stage's own sources, host and device code, and its PTX: what
#                      the student writes; the program's link adds only stages the
#                      assignment leaves whole, and would double CI's time) and fail the
#                      ptx criterion
#   mutant NAME        the reference solution with tests/course/mutants/NAME.sh applied,
#                      graded --ptx-only: every criterion of its "caught-by:" line that needs
#                      no GPU must fail (a mutant caught only on the GPU is for gpu_grading.sh)
#   reference NN BUILD the repository's own build of stage NN, graded --prebuilt BUILD
#                      --no-gpu: full marks on all that was graded
#
# Exit 0 when the verdict is the expected one, 1 otherwise (the grader's table is printed).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=${1:?mode} arg=${2:?argument}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jobs=${FX_COURSE_JOBS:-2}

state_of() {  # json criterion -> its state
    sed 's/}, {/}\n{/g' "$1" | grep "\"name\": \"$2\"" | sed 's/.*"state": "\([a-z_/]*\)".*/\1/'
}
expect_state() {  # json criterion want
    local got
    got=$(state_of "$1" "$2")
    if [[ $got == "$3" ]]; then
        echo "ok: $2 is $3"
    else
        echo "FAIL: $2 is '${got:-missing}', expected $3"
        bad=1
    fi
}
bad=0
rc=0
case $mode in
    unfilled)
        "$root/scripts/make_assignment.sh" "$arg" "$tmp/tree" > /dev/null
        "$root/scripts/grade.sh" "$arg" "$tmp/tree" --compile-only --jobs "$jobs" \
            --json "$tmp/g.json" || rc=$?
        expect_state "$tmp/g.json" build pass
        expect_state "$tmp/g.json" ptx fail
        ((rc == 1)) || { echo "FAIL: grade.sh exit $rc, expected 1"; bad=1; }
        ;;
    mutant)
        m=$here/mutants/$arg.sh
        [[ -f $m ]] || { echo "FAIL: no mutant $m"; exit 1; }
        stage=$(sed -n 's/^# stage: *//p' "$m")
        caught=$(sed -n 's/^# caught-by: *//p' "$m")
        "$root/scripts/make_assignment.sh" --solution "$stage" "$tmp/tree" > /dev/null
        bash "$m" "$tmp/tree"
        "$root/scripts/grade.sh" "$stage" "$tmp/tree" --ptx-only --jobs "$jobs" \
            --json "$tmp/g.json" || rc=$?
        expect_state "$tmp/g.json" build pass
        n=0
        for c in $caught; do
            case $c in
                ptx) expect_state "$tmp/g.json" ptx fail; n=$((n + 1)) ;;
                *) echo "skip: $c needs the GPU (tests/course/gpu_grading.sh)" ;;
            esac
        done
        if ((n == 0)); then
            echo "FAIL: $arg is caught by no criterion without a GPU: not a course test"
            bad=1
        fi
        ((rc == 1)) || { echo "FAIL: grade.sh exit $rc, expected 1"; bad=1; }
        ;;
    reference)
        build=${3:?the build folder}
        "$root/scripts/grade.sh" "$arg" --prebuilt "$build" --no-gpu --logs "$tmp/logs" \
            --json "$tmp/g.json" || rc=$?
        expect_state "$tmp/g.json" build pass
        expect_state "$tmp/g.json" ptx pass
        ((rc == 0)) || { echo "FAIL: grade.sh exit $rc, expected 0"; bad=1; }
        ;;
    *) echo "check_tree.sh: unknown mode $mode" >&2; exit 2 ;;
esac
((bad == 0)) && echo PASS || echo FAIL
exit $bad
