#!/usr/bin/env bash
# grade.sh [options] NN [DIR] — grade a student's tree (an assignment of stage NN, filled in)
# with this repository's own checks (docs/course.md, "The grader").
#
# DIR (default: the current folder) is a copy of flash-explorer, as make_assignment.sh wrote
# it. What is graded, in order (points of 100):
#
#   build      10  DIR's stage NN and its PTX build (cmake, into DIR/build-grade): DIR's
#                  stages/NN folder, put into a fresh copy of THIS repository (DIR's harness,
#                  reference and other stages are not used)
#   ptx        20  THIS repository's ptx test (tests/ptx/check_ptxas.sh and NN's .expect,
#                  not DIR's) on DIR's PTX and ptxas report: the taught instructions are
#                  there, the forbidden ones are not, nothing spills, wgmma not serialized
#   cpu        --  the stage's CPU model against the fp64 reference, where it has one
#                  (02, 03, and 10's FP8 model at e4m3); the other Hopper stages have none,
#                  and this line says so
#   matrix     30  GPU: DIR's `stage --matrix` (against the previous stage and fp64)
#   repeat     10  GPU: `--repeat 1000` on three small shapes: outputs bitwise equal (races
#                  that compute-sanitizer cannot see: TMA writes, wgmma reads)
#   sanitizers 15  GPU: compute-sanitizer memcheck, racecheck, synccheck (5 each) on small
#                  causal GQA shapes at head_dim 64 and 128
#   speed      15  GPU: DIR's stage against the reference solution's (this repository's
#                  build), timed alternately in the same run on the default problem:
#                  15 · min(1, ratio / 0.95) of the median TFLOP/s; not timed after a failed
#                  matrix
#
# Every run but --matrix (which draws its own cases from the stage's capabilities) is in a
# dtype the stage takes, from the "dtype:" line of its --help: where bf16 (the default) is
# not one of them (stage 10: e4m3 only), the runs name the stage's first dtype, as does a
# shape that names a dtype the stage lacks; V stays row-major (no --fp8-vt), so stage 10's
# in-kernel transpose, the assignment, runs in every one of them.
#
# A criterion that cannot run here is "not graded" with the reason (no GPU, no reference
# build, no compute-sanitizer), and the total is given over what was graded. A GPU criterion
# is not run once the build has failed, nor speed once matrix has.
#
# Options:
#   --prebuilt B   DIR's build already exists in B (B/bin/stage_<id>, B/ptx/<id>.ptx,
#                  B/ptx/<id>.ptxas.txt): nothing is built (for trees built on another
#                  machine; DIR may then be absent)
#   --reference B  the reference solution's build folder for speed (default: this
#                  repository's build/, as ./run.sh makes it)
#   --json FILE    also write the grade as JSON (format: docs/course.md)
#   --logs D       each criterion's full output goes to D/<criterion>.log (default:
#                  DIR/grade-logs, or B/grade-logs with --prebuilt)
#   --no-gpu       grade only what needs no GPU, even where there is one
#   --compile-only build the stage's own sources (its library: host and device code, as the
#                  program compiles them) and its PTX, not the program, and grade build and
#                  ptx (implies --no-gpu; how the course tests check a generated assignment:
#                  linking would only add the earlier stages, which the student did not touch)
#   --ptx-only     build only the stage's PTX and grade build and ptx (implies --no-gpu; the
#                  quickest check of a tree, as the course tests run the mutants)
#   --jobs N       parallel build jobs (default: the CPUs)
# Timeouts (seconds; a criterion that runs past its timeout fails, "timed out": a hang):
# FX_GRADE_TIMEOUT_MATRIX (600), _REPEAT (300 per shape), _SANITIZER (300 per run),
# _BENCH (120 per run).
#
# Exit: 0 when every graded criterion has full marks, 1 otherwise, 2 on a usage error.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "grade.sh: $*" >&2; exit 2; }
usage() {
    sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

prebuilt="" reference="$root/build" json="" logs="" no_gpu=0 ptx_only=0 scope=""
jobs=$(nproc 2> /dev/null || echo 2)
# getopt(1) puts the options first and the operands after "--", wherever they were given.
opts=$(getopt -q -o h -l prebuilt:,reference:,json:,logs:,jobs:,no-gpu,ptx-only,compile-only,help \
    -- "$@") || die "unknown option, or an option without its value, in '$*' (see --help)"
eval set -- "$opts"
while :; do
    case $1 in
        --prebuilt) prebuilt=$2; shift 2 ;;
        --reference) reference=$2; shift 2 ;;
        --json) json=$2; shift 2 ;;
        --logs) logs=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --no-gpu) no_gpu=1; shift ;;
        --ptx-only) ptx_only=1 no_gpu=1 scope=--ptx-only; shift ;;
        --compile-only) ptx_only=1 no_gpu=1 scope=--compile-only; shift ;;
        -h | --help) usage ;;
        --) shift; break ;;
    esac
done
(($# >= 1 && $# <= 2)) || usage
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs $jobs: a positive count"
want=$1
tree=${2:-}

# The stage: its folder name from THIS repository (the grader decides what NN means).
case $want in
    [0-9][0-9]) matches=("$root"/stages/"$want"_*/) ;;
    [0-9][0-9]_*) matches=("$root/stages/$want/") ;;
    *) die "stage '$want': give its number (04) or folder name (04_tma_mbarrier)" ;;
esac
[[ -d ${matches[0]} ]] || die "no stage '$want' in $root/stages"
id=$(basename "${matches[0]}")
expect=$root/tests/ptx/$id.expect
[[ -f $expect ]] || die "no ptx expectations for $id ($expect)"

if [[ -n $prebuilt ]]; then
    [[ -d $prebuilt ]] || die "--prebuilt $prebuilt: no such folder"
    build=$(cd "$prebuilt" && pwd)
    label=$build
    [[ -n $tree && -d $tree ]] && label=$(cd "$tree" && pwd)
else
    tree=${tree:-$PWD}
    [[ -f $tree/CMakeLists.txt && -d $tree/stages/$id ]] ||
        die "$tree is not a flash-explorer tree with stages/$id (give the assignment's folder)"
    tree=$(cd "$tree" && pwd)
    build=$tree/build-grade
    label=$tree
fi
if [[ -z $logs ]]; then
    logs=$build/grade-logs
    [[ -n $prebuilt ]] || logs=$tree/grade-logs
fi
mkdir -p "$logs" || die "cannot write the logs to $logs"
bin=$build/bin/stage_$id

# ---- Bookkeeping: one row per criterion -------------------------------------------------
names=() points=() maxes=() states=() details=()
record() {  # name points max state detail   (state: pass, partial, fail, not_graded, n/a)
    names+=("$1") points+=("$2") maxes+=("$3") states+=("$4") details+=("$5")
    printf '  %-10s %-12s %s\n' "$1" "$(score_of "${#names[@]}")" "$5"
}
score_of() {  # row number (1-based)
    local i=$(($1 - 1))
    case ${states[$i]} in
        not_graded) echo "not graded" ;;
        n/a) echo "n/a" ;;
        *) echo "${points[$i]}/${maxes[$i]}" ;;
    esac
}
run_timed() {  # timeout_s log command... -> the command's exit status (124: timed out)
    local t=$1 log=$2
    shift 2
    timeout --kill-after=10 "$t" "$@" >> "$log" 2>&1
}
first_line() { grep -m1 -E "$2" "$1" | cut -c1-160; }

echo "grade.sh: stage $id, tree $label"
# The tree's commit where it is a git clone of its own (not a folder inside another clone).
commit=none
if [[ -n $tree && -d $tree ]] && top=$(git -C "$tree" rev-parse --show-toplevel 2> /dev/null) &&
    [[ $(cd "$top" && pwd -P) == "$(cd "$tree" && pwd -P)" ]]; then
    commit=$(git -C "$tree" describe --always --dirty 2> /dev/null || echo none)
fi
if [[ -n $json ]]; then
    { : > "$json"; } 2> /dev/null || die "--json $json: cannot write it"
fi

# ---- build --------------------------------------------------------------------------------
built=0
if [[ -n $prebuilt ]]; then
    if [[ ($ptx_only == 1 || -x $bin) && -s $build/ptx/$id.ptx &&
        -s $build/ptx/$id.ptxas.txt ]]; then
        record build 10 10 pass "prebuilt in $build"
        built=1
    else
        record build 0 10 fail "--prebuilt $build lacks bin/stage_$id or ptx/$id.ptx(as.txt)"
    fi
else
    log=$logs/build.log
    : > "$log"
    t0=$SECONDS
    archs=${FX_CUDA_ARCHS:-90}
    # What is built: a fresh copy of THIS repository with DIR's stages/<id> folder put in, so
    # the harness, the reference and the previous stages that check the student's stage are
    # the course's, whatever DIR's copies of them say. Nothing else of DIR is read.
    src=$(mktemp -d)
    trap 'rm -rf "$src"' EXIT
    rm -rf "$build"
    "$root/scripts/make_assignment.sh" --solution "$id" "$src/tree" > "$log" 2>&1 &&
        rm -rf "$src/tree/stages/$id" && cp -R "$tree/stages/$id" "$src/tree/stages/$id" ||
        die "cannot copy this repository with $tree/stages/$id to $src (see $log)"
    targets=("ptxas_$id")
    case $scope in
        --ptx-only) ;;
        --compile-only) targets+=("fx_stage_$id") ;;
        *) targets+=("stage_$id") ;;
    esac
    if run_timed 1800 "$log" cmake -S "$src/tree" -B "$build" -DFX_CUDA_ARCHS="$archs" \
        -DFX_REQUIRE_CHECK=OFF -DCMAKE_BUILD_TYPE=Release &&
        run_timed 3600 "$log" cmake --build "$build" -j "$jobs" --target "${targets[@]}"; then
        case $scope in
            --ptx-only) what="the PTX of $id built (--ptx-only: not the program)" ;;
            --compile-only) what="$id's sources and PTX built (--compile-only: not linked)" ;;
            *) what="stage_$id and its PTX built" ;;
        esac
        record build 10 10 pass "$what ($((SECONDS - t0)) s)"
        built=1
    else
        why=$(first_line "$log" "error|Error")
        record build 0 10 fail "does not build: ${why:-see $log}"
    fi
fi

# ---- ptx ------------------------------------------------------------------------------------
if ((built)); then
    log=$logs/ptx.log
    if sh "$root/tests/ptx/check_ptxas.sh" "$build/ptx/$id.ptxas.txt" "$build/ptx/$id.ptx" \
        "$expect" > "$log" 2>&1; then
        record ptx 20 20 pass "every instruction of tests/ptx/$id.expect; no spill"
    else
        n=$(grep -c '^FAIL:' "$log")
        why=$(grep -m3 '^FAIL:' "$log" | sed 's/^FAIL: //' | paste -sd ';' -)
        record ptx 0 20 fail "$n finding(s): $why"
    fi
else
    record ptx 0 20 fail "not built"
fi

# ---- The stage's dtypes (its --help), for every run but --matrix ----------------------------
stage_dtypes=bf16/fp16
if ((built && !ptx_only)); then
    d=$("$bin" --help 2> /dev/null || true)
    d=$(sed -n 's/^ *dtype: *//p' <<< "$d")
    d=${d%%$'\n'*}  # the first such line
    [[ -n $d ]] && stage_dtypes=$d
fi
takes_dtype() { [[ /$stage_dtypes/ == */"$1"/* ]]; }
first_dtype=${stage_dtypes%%/*}
with_dtype() {  # args... -> stage_args: the args with a --dtype the stage takes
    local have=0 d
    stage_args=()
    while (($#)); do
        if [[ $1 == --dtype && $# -ge 2 ]]; then
            d=$2
            takes_dtype "$d" || d=$first_dtype
            stage_args+=(--dtype "$d") have=1
            shift 2
        else
            stage_args+=("$1")
            shift
        fi
    done
    ((have)) || takes_dtype bf16 || stage_args+=(--dtype "$first_dtype")
}

# ---- cpu --------------------------------------------------------------------------------------
if ((ptx_only)); then
    record cpu 0 0 not_graded "$scope"
elif ((built)); then
    log=$logs/cpu.log
    rc=0
    with_dtype --cpu --batch 1 --seqlen 256 --heads 2 --head-dim 64
    run_timed 600 "$log" "$bin" "${stage_args[@]}" || rc=$?
    if grep -q "this stage has none" "$log"; then
        record cpu 0 0 n/a \
            "the stage has no CPU model (its algorithm is stage 03's, whose model runs)"
    elif grep -q -- "--cpu with e4m3" "$log"; then  # a stage 10 built before its --cpu
        record cpu 0 0 n/a "no CPU run at e4m3 in this build (stage 10 before its --cpu): \
the FP8 model runs only beside the kernel, in the GPU checks"
    elif ((rc == 0)); then
        record cpu 0 0 pass \
            "CPU model against fp64: PASS (not scored: the model is not the assignment)"
    else
        record cpu 0 0 fail "CPU model exit $rc (see $log)"
    fi
else
    record cpu 0 0 not_graded "not built"
fi

# ---- The GPU criteria ---------------------------------------------------------------------
gpu_reason=""
if ((ptx_only)); then
    gpu_reason=$scope
elif ((!built)); then
    gpu_reason="not built"  # a tree that does not build fails what it would have been run on
elif ((no_gpu)); then
    gpu_reason="--no-gpu"
fi
not_graded_gpu() {
    record matrix 0 30 not_graded "$1"
    record repeat 0 10 not_graded "$1"
    record sanitizers 0 15 not_graded "$1"
    record speed 0 15 not_graded "$1"
}
matrix_ok=0
if [[ -z $gpu_reason ]]; then
    log=$logs/matrix.log
    : > "$log"
    rc=0
    run_timed "${FX_GRADE_TIMEOUT_MATRIX:-600}" "$log" "$bin" --matrix || rc=$?
    if ((rc == 77)); then
        why=$(first_line "$log" "skipped" | sed 's/.*skipped: //; s/^no usable GPU: //')
        gpu_reason="no GPU: $why"
    fi
fi
if [[ -n $gpu_reason ]]; then
    if [[ $gpu_reason == "not built" ]]; then
        for c in matrix repeat sanitizers speed; do
            m=30
            case $c in repeat) m=10 ;; sanitizers | speed) m=15 ;; esac
            record "$c" 0 "$m" fail "not built"
        done
    else
        not_graded_gpu "$gpu_reason"
    fi
else
    # matrix
    if ((rc == 0)); then
        cases=$(grep -cE '^ *(PASS|pass)' "$log")
        record matrix 30 30 pass "--matrix: every case PASS$( ((cases)) && echo " ($cases lines)")"
        matrix_ok=1
    elif ((rc == 124 || rc == 137)); then
        record matrix 0 30 fail \
            "--matrix timed out after ${FX_GRADE_TIMEOUT_MATRIX:-600} s (a hang?)"
    else
        why=$(first_line "$log" "FAIL|not written yet|error|Error")
        record matrix 0 30 fail "--matrix exit $rc: ${why:-see $log}"
    fi

    # repeat: the shapes of tests/gpu/cases.txt's repeat cases
    log=$logs/repeat.log
    : > "$log"
    shapes=("--seqlen-q 70 --seqlen-k 200 --heads-q 4 --heads-kv 2 --head-dim 64 --causal"
        "--seqlen 300 --heads 2 --head-dim 128"
        "--seqlen-q 257 --seqlen-k 129 --heads-q 4 --heads-kv 1 --head-dim 256 --dtype fp16
         --causal")
    bad=""
    for s in "${shapes[@]}"; do
        read -r -d "" -a a <<< "$s" || true  # every line: a shape may take two
        with_dtype "${a[@]}"
        a=("${stage_args[@]}")
        echo "=== --repeat 1000 --batch 1 ${a[*]}" >> "$log"
        rc=0
        run_timed "${FX_GRADE_TIMEOUT_REPEAT:-300}" "$log" "$bin" --repeat 1000 --batch 1 \
            "${a[@]}" || rc=$?
        ((rc == 0)) || bad+="${bad:+; }exit $rc at ${a[*]}"
    done
    if [[ -z $bad ]]; then
        record repeat 10 10 pass "3 shapes × 1000 runs bitwise equal"
    else
        record repeat 0 10 fail "$bad"
    fi

    # sanitizers
    log=$logs/sanitizers.log
    : > "$log"
    san=$(command -v compute-sanitizer || true)
    for d in "${CUDA_HOME:-}" /usr/local/cuda; do
        [[ -z $san && -n $d && -x $d/bin/compute-sanitizer ]] && san=$d/bin/compute-sanitizer
    done
    if [[ -z $san ]]; then
        record sanitizers 0 15 not_graded \
            "compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda)"
    else
        got=0 bad=""
        for tool in memcheck racecheck synccheck; do
            ok=1
            for d in 64 128; do
                with_dtype --check --batch 1 --seqlen-q 70 --seqlen-k 90 --heads-q 4 \
                    --heads-kv 2 --causal --head-dim "$d"
                echo "=== $tool ${stage_args[*]}" >> "$log"
                rc=0
                run_timed "${FX_GRADE_TIMEOUT_SANITIZER:-300}" "$log" "$san" --tool "$tool" \
                    --error-exitcode 3 "$bin" "${stage_args[@]}" || rc=$?
                ((rc == 0)) || { ok=0; bad+="${bad:+; }$tool exit $rc at head_dim $d"; }
            done
            ((ok)) && got=$((got + 5))
        done
        state=pass
        ((got == 15)) || state=fail
        ((got > 0 && got < 15)) && state=partial
        record sanitizers "$got" 15 "$state" \
            "${bad:-memcheck, racecheck, synccheck clean at head_dim 64, 128}"
    fi

    # speed: alternate the two programs, three rounds each, on the default problem
    ref_bin=$reference/bin/stage_$id
    if ((!matrix_ok)); then
        record speed 0 15 fail "not timed: the matrix failed (a wrong answer has no speed)"
    elif [[ ! -x $ref_bin ]]; then
        record speed 0 15 not_graded \
            "no reference build: $ref_bin (./run.sh builds it, or --reference B)"
    else
        log=$logs/speed.log
        : > "$log"
        csv_s=$logs/speed_student.csv csv_r=$logs/speed_reference.csv
        rm -f "$csv_s" "$csv_r"
        rc_s=0 rc_r=0
        with_dtype --bench
        for round in 1 2 3; do
            echo "=== round $round: student: ${stage_args[*]}" >> "$log"
            run_timed "${FX_GRADE_TIMEOUT_BENCH:-120}" "$log" "$bin" "${stage_args[@]}" \
                --csv "$csv_s" || rc_s=$?
            echo "=== round $round: reference: ${stage_args[*]}" >> "$log"
            run_timed "${FX_GRADE_TIMEOUT_BENCH:-120}" "$log" "$ref_bin" "${stage_args[@]}" \
                --csv "$csv_r" || rc_r=$?
        done
        median_tflops() {  # csv -> median of the fwd rows' tflops column
            awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
                     $col["direction"] == "fwd" { print $col["tflops"] }' "$1" 2> /dev/null |
                sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
        }
        ts=$(median_tflops "$csv_s") tr=$(median_tflops "$csv_r")
        if ((rc_s != 0)); then
            record speed 0 15 fail "the student's timed run exit $rc_s (see $log)"
        elif ((rc_r != 0)) || [[ -z $tr || -z $ts ]]; then
            record speed 0 15 not_graded \
                "the reference's timed run gave no number (exit $rc_r; see $log)"
        else
            read -r ratio pts <<< "$(awk -v s="$ts" -v r="$tr" 'BEGIN {
                q = s / r; p = 15 * q / 0.95; if (p > 15) p = 15
                printf "%.3f %d\n", q, int(p + 1e-9) }')"
            state=pass
            ((pts == 15)) || state=partial
            ((pts == 0)) && state=fail
            record speed "$pts" 15 "$state" \
                "$ratio× the reference ($ts against $tr TFLOP/s, medians of 3 alternating runs)"
        fi
    fi
fi

# ---- The total ----------------------------------------------------------------------------
got=0 graded=0 ungraded=0 all_full=1
for i in "${!names[@]}"; do
    case ${states[$i]} in
        not_graded) ungraded=$((ungraded + maxes[i])) ;;
        n/a) ;;
        *)
            got=$((got + points[i])) graded=$((graded + maxes[i]))
            ((points[i] == maxes[i])) || all_full=0
            [[ ${states[$i]} == fail ]] && all_full=0 ;;
    esac
done
total_line="$got/$graded"
((ungraded)) && total_line+=" of what could be graded here ($ungraded of 100 not graded: see above)"
printf '  %-10s %s\n' total "$total_line"
echo "grade.sh: logs in $logs"

if [[ -n $json ]]; then
    esc() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\000-\037'; }
    {
        printf '{"stage": "%s", "tree": "%s", "commit": "%s", "points": %d, "graded_max": %d, ' \
            "$id" "$(esc "$label")" "$commit" "$got" "$graded"
        printf '"not_graded_max": %d, "max": 100, "full_marks": %s, "criteria": [' "$ungraded" \
            "$( ((all_full)) && echo true || echo false)"
        for i in "${!names[@]}"; do
            ((i)) && printf ', '
            printf '{"name": "%s", "points": %d, "max": %d, "state": "%s", "detail": "%s"}' \
                "${names[$i]}" "${points[$i]}" "${maxes[$i]}" "${states[$i]}" \
                "$(esc "${details[$i]}")"
        done
        printf ']}\n'
    } > "$json" || die "--json $json: cannot write it"
fi
((all_full)) && exit 0
exit 1
