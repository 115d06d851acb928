#!/usr/bin/env bash
# gpu_grading.sh BUILD TREES OUT [NAME...] — the course kit's GPU check: grade.sh, on a GPU
# machine, on the reference solution and on the trees that tests/course/build_trees.sh built
# into TREES, each verdict compared with the one expected. Needs only bash, coreutils, awk,
# sed, compute-sanitizer and the binaries (no cmake, no Check: the trees come prebuilt).
#
#   reference_NN   BUILD's stage NN (this repository, built by ./run.sh or cmake): full marks
#   unfilled_NN    the assignment as generated: its "caught-by:" criteria (matrix) must fail
#   a mutant       a deliberate mistake: every criterion of its "caught-by:" line must fail
#                  (not pass; partial counts as caught), and the total must not be full marks
#
# Default NAMEs: reference_NN for every unfilled_NN in TREES, then every tree in TREES.
# The speed criterion of every grade times against BUILD's stage (--reference BUILD).
# OUT gets NAME.txt (the grader's table), NAME.json, NAME-logs/ and summary.txt (one line
# per NAME: PASS or FAIL, the total, why). FX_COURSE_DEADLINE (seconds, default none) stops
# starting new grades once passed; those are listed "not run". Exit 1 if any verdict is not
# the expected one.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
(($# >= 3)) || { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
build=$(cd "$1" && pwd) trees=$(cd "$2" && pwd) out=$3
shift 3
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"

names=("$@")
if ((${#names[@]} == 0)); then
    for d in "$trees"/unfilled_*/; do
        [[ -d $d ]] && names+=("reference_$(basename "$d" | sed 's/^unfilled_//')")
    done
    for d in "$trees"/*/; do [[ -f $d/meta.txt ]] && names+=("$(basename "$d")"); done
fi

state_of() {  # json criterion -> its state
    sed 's/}, {/}\n{/g' "$1" | grep "\"name\": \"$2\"" | sed 's/.*"state": "\([a-z_/]*\)".*/\1/'
}
total_of() { grep -m1 '^  total' "$1" | sed 's/^  total *//'; }

bad=0
t_start=$SECONDS
for name in "${names[@]}"; do
    if [[ -n ${FX_COURSE_DEADLINE:-} ]] && ((SECONDS - t_start > FX_COURSE_DEADLINE)); then
        echo "NOT RUN  $name (FX_COURSE_DEADLINE ${FX_COURSE_DEADLINE} s passed)" |
            tee -a "$summary"
        continue
    fi
    t0=$SECONDS
    txt=$out/$name.txt json=$out/$name.json logs=$out/$name-logs
    case $name in
        reference_*)
            stage=${name#reference_}
            rc=0
            "$root/scripts/grade.sh" "$stage" --prebuilt "$build" --reference "$build" \
                --logs "$logs" --json "$json" > "$txt" 2>&1 || rc=$?
            if ((rc == 0)) && grep -q '"full_marks": true' "$json" &&
                grep -q '"not_graded_max": 0' "$json"; then
                verdict="PASS     $name: $(total_of "$txt") (full marks expected)"
            else
                verdict="FAIL     $name: $(total_of "$txt"), grade.sh exit $rc"
                verdict+=" (full marks expected)"
                bad=1
            fi ;;
        *)
            meta=$trees/$name/meta.txt
            if [[ ! -f $meta ]]; then
                echo "FAIL     $name: no tree $trees/$name (build_trees.sh)" | tee -a "$summary"
                bad=1
                continue
            fi
            stage=$(sed -n 's/^stage: *//p' "$meta")
            caught=$(sed -n 's/^caught-by: *//p' "$meta")
            rc=0
            "$root/scripts/grade.sh" "$stage" --prebuilt "$trees/$name" --reference "$build" \
                --logs "$logs" --json "$json" > "$txt" 2>&1 || rc=$?
            why=""
            for c in $caught; do
                s=$(state_of "$json" "$c")
                [[ $s == fail || $s == partial ]] || why+="${why:+; }$c is '${s:-missing}'"
            done
            ((rc == 1)) || why+="${why:+; }grade.sh exit $rc, expected 1"
            if [[ -z $why ]]; then
                verdict="PASS     $name: $(total_of "$txt"), caught by $caught"
            else
                verdict="FAIL     $name: $(total_of "$txt"), not caught as expected: $why"
                bad=1
            fi ;;
    esac
    echo "$verdict ($((SECONDS - t0)) s)" | tee -a "$summary"
done
exit $bad
