#!/usr/bin/env bash
# run.sh — the main job: build every stage, run the ladder, print the table, draw the figure.
#
#   ./run.sh                              the default problem: batch 4, seqlen 4096,
#                                         heads 16, head_dim 128, bf16
#   ./run.sh --batch 1 --seqlen 16384     any stage option, passed to every stage
#   ./run.sh --skip-build --causal        re-run without configuring and building
#   ./run.sh --bin-dir DIR                run the programs DIR/stage_* built elsewhere
#                                         (implies --skip-build)
#
# The build is for the GPU it finds (nvidia-smi), or without one for sm_90 and sm_90a;
# FX_CUDA_ARCHS=all ./run.sh builds every architecture (CMakeLists.txt, FX_CUDA_ARCHS).
#
# Each program build/bin/stage_* runs, in order, with `--check --bench --csv FILE`
# and the options given; FILE is plots/data/ladder_<UTC date>_<device>.csv (rows are
# appended; the table shows this run's). With --bwd, a stage without a backward (its
# --help says "backward: no") runs its forward alone, and the table says so. The figure
# is plots/ladder.png and .svg (plots/ladder.gp), where gnuplot is installed.
# Without a GPU (the stages exit 77) it runs each stage's CPU model instead, on a
# small problem (batch 1, seqlen 256, heads 2, head_dim 64), against the fp64
# reference, with the backward where the stage has one. Refused with the backward, a
# model runs forward only, and the table says so: a CPU model without a backward, and,
# where run.sh added --bwd itself, options only the backward refuses (--scale 9).
# Without --dtype, a stage that does not take the default bf16 (its --help's "dtype:" line
# lists what it takes) runs in the first dtype it lists instead, and the table says so;
# an explicit --dtype goes to every stage as given (those without it refuse, said in the
# table), with FP8_ARGS added at e4m3. Stage 10 takes e4m3 alone, so the default ladder
# runs it as --dtype e4m3 plus FP8_ARGS (set in run.sh: none, so V is row-major and the
# stage transposes it in its kernel; ./run.sh --dtype e4m3 --fp8-vt gives it V
# transposed); its row is marked [e4m3] and its note says V's layout, its speed-up is
# over the stage above in bf16, and its "max err vs previous" is against stage 08 in bf16
# on the dequantized inputs. Without a GPU, stage 10's --cpu runs its CPU model in e4m3
# (the same small problem, its inputs quantized as on the GPU).
# Exit status: 0; 1 when a stage fails its check or its CPU model's, or when there
# is no GPU and FX_REQUIRE_GPU=1; 2 when every stage refused the options.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    echo "Stage options: build/bin/stage_02_flash1 --help"
}

skip_build=0
bin_dir=build/bin
args=()
while (($# > 0)); do
    case $1 in
        --skip-build) skip_build=1 ;;
        --bin-dir)
            (($# >= 2)) || { echo "run.sh: --bin-dir needs a folder" >&2; exit 2; }
            [[ -d $2 ]] || { echo "run.sh: --bin-dir $2: no such folder" >&2; exit 2; }
            bin_dir=${2%/}
            skip_build=1
            shift ;;
        -h | --help) usage; exit 0 ;;
        *) args+=("$1") ;;
    esac
    shift
done

# shellcheck source=scripts/stage_caps.sh
source scripts/stage_caps.sh

# What an e4m3 run of the ladder adds to the options: a layout or scaling the e4m3 stages
# need. None today: stage 10 takes V row-major and transposes it in its kernel, its
# default (--fp8-vt, V given transposed, is optional: given to run.sh, it goes to the
# stages as given). A stage that refuses a layout says so (exit 2, naming the option),
# and the table shows it.
FP8_ARGS=()

# The dtype asked for: the last --dtype given, else the stage programs' default, bf16.
asked_dtype=bf16 dtype_given=0
for ((i = 0; i < ${#args[@]}; ++i)); do
    if [[ ${args[i]} == --dtype ]]; then asked_dtype=${args[i + 1]:-bf16} dtype_given=1; fi
done
# stage_dtype BIN ARGS...: into stage_args, ARGS as this stage runs them: unchanged when it
# takes the dtype asked for, when --dtype was given, or when its --help has no dtype line
# (an older build); else with --dtype set to the first dtype it lists (dtype_note then
# says so). FP8_ARGS added at e4m3 where not given. dtype_note is empty when the dtype is
# the one asked for.
stage_args=() dtype_note=""
stage_dtype() {
    local bin=$1 list run_dtype=$asked_dtype a
    shift
    stage_args=() dtype_note=""
    list=$(fx_stage_dtypes "$bin" || true)
    if ((!dtype_given)) && [[ -n $list && /$list/ != */$asked_dtype/* ]]; then
        run_dtype=${list%%/*}
        dtype_note="ran $run_dtype, not $asked_dtype (its --help: dtype: $list)"
    fi
    local skip=0
    for a in "$@"; do
        if ((skip)); then skip=0; continue; fi
        if [[ -n $dtype_note && $a == --dtype ]]; then skip=1; continue; fi
        stage_args+=("$a")
    done
    [[ -z $dtype_note ]] || stage_args+=(--dtype "$run_dtype")
    if [[ $run_dtype == e4m3 ]]; then
        for a in ${FP8_ARGS[@]+"${FP8_ARGS[@]}"}; do
            [[ " ${stage_args[*]} " == *" $a "* ]] || stage_args+=("$a")
        done
        if [[ -n $dtype_note ]]; then
            # V's layout as given: stage 10 transposes a row-major V in its kernel.
            if [[ " ${stage_args[*]} " == *" --fp8-vt "* ]]; then
                dtype_note+=", V given transposed (--fp8-vt)"
            else
                dtype_note+=", V row-major (transposed in the kernel)"
            fi
        fi
    fi
}

if ((skip_build)); then
    [[ -d $bin_dir ]] || {
        echo "run.sh: no $bin_dir yet: run ./run.sh without --skip-build" >&2
        exit 2
    }
else
    # shellcheck source=scripts/setup.sh
    source scripts/setup.sh
    cmake -S . -B build ${FX_CUDA_ARCHS:+"-DFX_CUDA_ARCHS=$FX_CUDA_ARCHS"}
    # The main job needs the stage programs only: not the ptxas reports, the unit tests or
    # the wrappers' test compiles, which ./test.sh builds (about half of a full build).
    targets=()
    for d in stages/[0-9][0-9]*/; do
        d=${d%/}
        targets+=("stage_${d##*/}")
    done
    build_start=$(date +%s)
    cmake --build build -j"$(nproc)" --target "${targets[@]}"
    echo "run.sh: built ${#targets[@]} stage programs in $(($(date +%s) - build_start)) s"
fi

stages=()
for bin in "$bin_dir"/stage_*; do
    [[ -f $bin && -x $bin ]] && stages+=("$bin")
done
((${#stages[@]} > 0)) || { echo "run.sh: no stage programs in $bin_dir" >&2; exit 2; }

logs=build/ladder
mkdir -p "$logs" plots/data
csv_run="$logs/run_$(date -u +%Y%m%dT%H%M%SZ)_$$.csv"  # this run's rows only
rm -f "$csv_run"

# One stage program; its output goes to the terminal and to $logs/<stage>.log.
# Sets rc and log.
run_stage() {
    local bin=$1
    shift
    log="$logs/$(basename "$bin").log"
    set +e
    "$bin" "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
}

# The first line of a log that matches a pattern, and the last line, for the notes.
first_line() { grep -m 1 -E "$1" "$2" | sed 's/^[[:space:]]*//' || true; }
last_line() { grep -v '^[[:space:]]*$' "$1" | tail -n 1 | sed 's/^[[:space:]]*//' || true; }

# -------------------------------------------------------------------------------------
# The GPU ladder.

# --bwd given: a stage without a backward (its --help says "backward: no") would refuse it
# and write no row, so it runs its forward alone, as bench/sweep.sh does (said in the table).
user_bwd=0 args_fwd=()
for a in ${args[@]+"${args[@]}"}; do
    if [[ $a == --bwd ]]; then user_bwd=1; else args_fwd+=("$a"); fi
done
no_bwd_note="forward only: no backward (its --help says backward: no), --bwd left out"

declare -a ids=() rcs=() notes=() fwd_notes=() dtype_notes=()
failed=0 ran=0 no_gpu=0 refused=0 no_gpu_reason=""
for bin in "${stages[@]}"; do
    id=${bin##*/stage_}
    echo
    echo "=== stage $id ==="
    fwd_note=""
    if ((user_bwd)) && ! fx_stage_has_backward "$bin"; then
        stage_dtype "$bin" ${args_fwd[@]+"${args_fwd[@]}"}
        fwd_note=$no_bwd_note
        echo "run.sh: $id: $fwd_note"
    else
        stage_dtype "$bin" ${args[@]+"${args[@]}"}
    fi
    [[ -z $dtype_note ]] || echo "run.sh: $id: $dtype_note"
    dtype_notes+=("$dtype_note")
    run_stage "$bin" ${stage_args[@]+"${stage_args[@]}"} --check --bench --csv "$csv_run"
    note=""
    case $rc in
        0) ran=$((ran + 1)) ;;
        77)
            no_gpu=$((no_gpu + 1))
            note=$(first_line 'skipped:' "$log")
            [[ -n $no_gpu_reason ]] || no_gpu_reason=${note#*skipped: }
            ;;
        2)
            refused=$((refused + 1))
            note="refused: $(last_line "$log")"
            ;;
        *)
            failed=1
            if grep -q 'since FX_REQUIRE_GPU is set' "$log"; then
                # FX_REQUIRE_GPU=1 turns "no suitable GPU" into exit 1 (so 77 above
                # never comes with it): "stage_NN: no usable GPU: ...: a failure, ...".
                no_gpu=$((no_gpu + 1))
                reason=$(first_line 'since FX_REQUIRE_GPU is set' "$log")
                reason=${reason%%: a failure, not a skip*}
                reason=${reason#stage_"$id": }
                note="$reason (FX_REQUIRE_GPU=1: a failure)"
                [[ -n $no_gpu_reason ]] || no_gpu_reason=$reason
            else
                ran=$((ran + 1))
                note=$(first_line 'FAIL|error|Error' "$log")
            fi
            ;;
    esac
    ids+=("$id")
    rcs+=("$rc")
    notes+=("$note")
    fwd_notes+=("$fwd_note")
done

# -------------------------------------------------------------------------------------
# No GPU: the CPU models on a small problem, and the fp64 reference.

if ((ran == 0 && no_gpu > 0 && !failed)); then
    small=(--batch 1 --seqlen 256 --heads 2 --head-dim 64)
    # The sizes given were for the GPU; the options that are not sizes still apply.
    cpu_args=() dropped=()
    for ((i = 0; i < ${#args[@]}; ++i)); do
        case ${args[i]} in
            --batch | --seqlen | --seqlen-q | --seqlen-k | --heads | --heads-q | --heads-kv | \
            --head-dim | --csv | --warmup | --iters | --repeat)
                dropped+=("${args[i]}" "${args[i + 1]:-}")
                i=$((i + 1)) ;;
            --bench | --matrix | --bwd) ;;  # --bwd: added below where the stage has one
            *) cpu_args+=("${args[i]}") ;;
        esac
    done
    no_gpu_line="No GPU: the GPU stages were built but not run; ran the CPU models and the fp64"
    no_gpu_line+=" reference instead."
    echo
    echo "$no_gpu_line"
    echo "($no_gpu_reason)"
    if ((${#dropped[@]})); then
        echo "The CPU models run the small problem (${small[*]}): left out for them:" \
            "${dropped[*]}."
    fi
    declare -a cpu_result=()
    cpu_failed=0
    for bin in "${stages[@]}"; do
        id=${bin##*/stage_}
        echo
        echo "=== stage $id: CPU model ==="
        # The backward too where the stage has one (its --help says so). Refused with it,
        # the model runs forward only, said so: a CPU model without a backward, or, where
        # run.sh added --bwd by itself, options the backward alone refuses (./run.sh
        # --scale 9: the backward takes softmax_scale up to 8). --bwd given and refused for
        # the backward stays a refusal.
        bwd=() fwd_note=""
        if fx_stage_has_backward "$bin"; then
            bwd=(--bwd)
        elif ((user_bwd)); then
            fwd_note=$no_bwd_note
        fi
        stage_dtype "$bin" ${cpu_args[@]+"${cpu_args[@]}"}
        cpu_stage_args=(${stage_args[@]+"${stage_args[@]}"})
        run_stage "$bin" --cpu --check ${bwd[@]+"${bwd[@]}"} "${small[@]}" \
            ${cpu_stage_args[@]+"${cpu_stage_args[@]}"}
        if ((rc == 2)) && ((${#bwd[@]})); then
            why=$(last_line "$log")
            # Not when the stage has no CPU model at all: that refusal is not the backward's.
            if ! grep -Eq 'no CPU model|CPU model, and this stage has none' "$log" &&
                { grep -q 'CPU model has no backward' "$log" || ((!user_bwd)); }; then
                echo "run.sh: $id: refused with the backward ($why): forward only"
                run_stage "$bin" --cpu --check "${small[@]}" \
                    ${cpu_stage_args[@]+"${cpu_stage_args[@]}"}
                # Refused again: the forward's refusal, reported as such.
                ((rc == 2)) ||
                    fwd_note="forward only: refused with the backward: ${why#stage_"$id": }"
            fi
        fi
        case $rc in
            0) cpu_result+=("CPU model: pass${fwd_note:+ ($fwd_note)}") ;;
            1) cpu_result+=("CPU model: FAIL${fwd_note:+ ($fwd_note)}"); cpu_failed=1 ;;
            2)
                if grep -Eq 'no CPU model|CPU model, and this stage has none' "$log"; then
                    cpu_result+=("built, no CPU model")
                elif grep -q -- '--cpu with e4m3' "$log"; then
                    # A stage 10 built before its --cpu (it refused e4m3 then).
                    cpu_result+=("built, no --cpu at e4m3 (an older build: rebuild it)")
                else
                    cpu_result+=("refused: $(last_line "$log")")
                fi
                ;;
            *) cpu_result+=("CPU model: exit $rc"); cpu_failed=1 ;;
        esac
    done
    echo
    echo "Ladder without a GPU (problem: ${small[*]}${cpu_args[*]+ ${cpu_args[*]}}):"
    for ((i = 0; i < ${#ids[@]}; ++i)); do
        printf '  %-24s %s\n' "${ids[i]}" "${cpu_result[i]}"
    done
    echo "No figure: the figure needs GPU timings."
    echo
    echo "$no_gpu_line"
    exit "$cpu_failed"
fi

# -------------------------------------------------------------------------------------
# The table, from this run's CSV rows (columns named by FX_CSV_HEADER, common/fx_main.h).

if [[ ! -s $csv_run ]]; then
    echo
    echo "No stage wrote a CSV row: no table, no figure."
    if ((no_gpu)) && [[ -n ${FX_REQUIRE_GPU:-} && ${FX_REQUIRE_GPU} != 0 ]]; then
        echo "No GPU, and FX_REQUIRE_GPU=$FX_REQUIRE_GPU makes that a failure."
    fi
    for ((i = 0; i < ${#ids[@]}; ++i)); do
        printf '  %-24s exit %s  %s%s\n' "${ids[i]}" "${rcs[i]}" "${notes[i]}" \
            "${fwd_notes[i]:+ (${fwd_notes[i]})}"
    done
    if ((failed)); then exit 1; fi
    if ((refused == ${#ids[@]})); then exit 2; fi
    exit 0
fi

# plots/data/ladder_<UTC date>_<device slug>.csv; a file of another format gets a new name.
device=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "device") c = i; next }
                  { print $c; exit }' "$csv_run")
slug=$(printf '%s' "$device" | tr '[:upper:]' '[:lower:]' |
    sed 's/[^a-z0-9][^a-z0-9]*/-/g; s/^-//; s/-$//')
csv="plots/data/ladder_$(date -u +%Y-%m-%d)_${slug:-unknown}.csv"
if [[ -s $csv && $(head -n 1 "$csv") != "$(head -n 1 "$csv_run")" ]]; then
    csv="plots/data/ladder_$(date -u +%Y-%m-%dT%H%M%SZ)_${slug:-unknown}.csv"
fi
if [[ -s $csv ]]; then
    tail -n +2 "$csv_run" >>"$csv"
else
    cp "$csv_run" "$csv"
fi

echo
awk -F, '
NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
function f(name) { return $(col[name]) }
NR == 2 {
    first_dtype = f("dtype")
    printf "Ladder on %s (%s SMs), commit %s, %s\n", f("device"), f("sm_count"), f("commit"),
           f("date")
    problem = "problem: batch %s, seqlen_q %s, seqlen_k %s, heads_q %s, heads_kv %s, head_dim %s, "
    printf problem "%s%s\n\n",
           f("batch"), f("seqlen_q"), f("seqlen_k"), f("heads_q"), f("heads_kv"), f("head_dim"),
           f("dtype"), f("causal") == 1 ? ", causal" : ""
    printf "%-20s %-4s %10s %9s %9s %8s  %-22s %-11s %s\n", "stage", "dir", "ms", "TFLOP/s",
           "speed-up", "SM MHz", "max err vs previous", "vs fp64", "check"
}
{
    # Forward rows first, then backward; speed-up over the row above in the same direction.
    dir = f("direction")
    up = "-"
    if (dir in last_ms && f("ms") > 0) up = sprintf("%.2fx", last_ms[dir] / f("ms"))
    last_ms[dir] = f("ms")
    if (f("prev_stage") == "") prev = "n/a"
    else prev = (f("err_prev_max") == "" ? "-" : f("err_prev_max")) " (" f("prev_stage") ")"
    eref = f("err_ref_max") == "" ? "-" : f("err_ref_max")
    # A stage run in another dtype than the problem line says (stage 10: e4m3) is marked.
    name = f("stage") (f("dtype") != first_dtype ? " [" f("dtype") "]" : "")
    line = sprintf("%-20s %-4s %10.3f %9.1f %9s %8s  %-22s %-11s %s", name, dir, f("ms"),
                   f("tflops"), up, f("sm_clock_mhz"), prev, eref, f("check"))
    if (dir == "fwd") fwd[++nf] = line; else other[++no] = line
}
END {
    for (i = 1; i <= nf; ++i) print fwd[i]
    for (i = 1; i <= no; ++i) print other[i]
}' "$csv_run"

# Stages that wrote no row, and why; stages run without --bwd or in another dtype.
for ((i = 0; i < ${#ids[@]}; ++i)); do
    [[ -z ${fwd_notes[i]} ]] || printf '%-20s %s\n' "${ids[i]}" "${fwd_notes[i]}"
    if [[ -n ${dtype_notes[i]} ]]; then
        printf '%-20s %s\n' "${ids[i]}" "${dtype_notes[i]}"
        if [[ ${dtype_notes[i]} == "ran e4m3"* ]]; then
            e4m3_line="its speed-up is over the row above in $asked_dtype (the FP8 speed-up);"
            e4m3_line+=" its max err vs previous compares it with the stage named there, run"
            e4m3_line+=" in bf16 on the dequantized e4m3 inputs rounded to bf16"
            e4m3_line+=" (common/fx_fp8_case.c)"
            printf '%-20s %s\n' "" "$e4m3_line"
        fi
    fi
    if ! awk -F, -v id="${ids[i]}" 'NR > 1 && $1 == id { found = 1 } END { exit !found }' \
            "$csv_run"; then
        printf '%-20s no row: exit %s  %s\n' "${ids[i]}" "${rcs[i]}" "${notes[i]}"
    elif [[ ${rcs[i]} != 0 ]]; then
        printf '%-20s exit %s  %s\n' "${ids[i]}" "${rcs[i]}" "${notes[i]}"
    fi
done
echo
echo "rows appended to $csv (logs in $logs/)"
echo "this run's rows: $csv_run"

if command -v gnuplot >/dev/null 2>&1; then
    if gnuplot -c plots/ladder.gp "$csv"; then
        echo "figure: plots/ladder.png, plots/ladder.svg (gnuplot -c plots/ladder.gp $csv)"
    else
        echo "gnuplot failed: no figure"
    fi
else
    echo "gnuplot is not installed: no figure. Elsewhere: gnuplot -c plots/ladder.gp $csv"
fi

if ((failed)); then
    echo "A stage failed: exit 1."
    exit 1
fi
exit 0
