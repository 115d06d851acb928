#!/usr/bin/env bash
# sweep.sh — the FlashAttention-3 paper's sweep on this GPU, forward (the default) or
# backward or both: the stage programs and the peers (PyTorch SDPA backends,
# bench/peers.py) at every point, interleaved.
#
#   bench/sweep.sh [options]
#
# The points (FA3 paper, section 4.1): seqlen 512, 1k, 2k, 4k, 8k, 16k with
# batch = 16384/seqlen, heads = 2048/head_dim, head_dim 64, 128, 256, causal and not,
# bf16. At each point every stage runs `build/bin/stage_<id> --bench --csv <run csv>
# --iters N --warmup W` and, seconds apart, the peers are timed the same way;
# the order of the runners rotates from one repeat to the next. The whole sweep is
# repeated R times in that interleaved order (DESIGN.md: a claim needs three repeats
# and a difference larger than their spread). Each repeat begins with the reference
# rows: a bf16 torch.matmul 8192³ and a device-to-device copy (bench/peers.py --gemm).
#
# The backward (--direction bwd, or both): a stage whose `--help` says `backward: yes`
# runs with `--bench --bwd`, which times the forward and then the backward entry point
# alone and writes a fwd row and a bwd row (both kept; the bwd row's FLOPs are 2.5 times
# the forward's); a stage without a backward is not run at bwd (a line says so; with
# both it runs its forward). The peers time SDPA's backward alone (bench/peers.py
# --direction bwd: the forward once, then torch.autograd.grad timed).
#
# Expected duration on one H200. Measured: the full forward sweep with --stages
# 02_flash1,03_flash2 (3 repeats, peers) took 3:30 (plots/data/fa3_fwd_2026-12-01_
# nvidia-h200.meta), about 0.75 s per stage program start (CUDA context, inputs) and
# 0.3 s per peers request besides the timed calls. Estimated from that and the measured
# forward rates, with the backward at SDPA flash 200, cuDNN 300, mem-efficient 90
# TFLOP/s, 0.25 s more per stage start with --bwd (dO) and 0.3 s more per peers request
# (the forward with autograd, the graph, cuDNN's per-shape plans); the sweep prints its
# own estimate after the first repeat:
#   --quick                                              about 30 s
#   --quick --direction both --stages 03_flash2          about 30 s, under a minute
#   --direction bwd --stages 03_flash2 --head-dims 64,128 --repeats 3
#                                                        about 3 minutes, under 4: 72
#       stage runs and 72 peers requests; with stage 03's backward at 100 TFLOP/s or
#       more (at 50 TFLOP/s add 15 s, at 25 TFLOP/s 40 s)
#   the full forward sweep, --stages 02_flash1,03_flash2 about 3.5 minutes (measured);
#       stage 01 (in the default, every built stage) adds about 2 more
#   the full forward sweep, --stages 03_flash2,...,08_intra_wg_overlap (six stages):
#       about 10.5 minutes (measured: 565 s for 98 of its 108 points): more than the
#       10 minutes one call to a lent GPU machine may run, so run it as --head-dims 64,128
#       and --head-dims 256 (plots/data/fa3_fwd_hopper_2026-12-01_nvidia-h200.meta says
#       how that CSV was joined from two runs)
#   a backward sweep of every head_dim: 02_flash1 adds about 3.5 minutes (its backward
#       about 2.8 times its forward's time, both timed), 01_naive about 4.
#
# Without --all-points, stages 01_naive and 02_flash1 are not run at seqlen >= 8192,
# whether named in --stages or not (a line says so): 02 runs one thread block per
# (batch, head), so the FA3 setup gives it 8 to 64 blocks for 132 SMs there and a call
# takes up to about 2 s (5 more minutes over 3 repeats); 01 keeps S and P of every
# (batch, head) in device memory (13 to 52 GB at 16k) and its causal calls cost as much
# as the full ones. Their numbers there add nothing their smaller points do not show.
#
# Options:
#   --direction fwd|bwd|both  default fwd (the forward alone)
#   --stages LIST     stage ids, comma-separated (02_flash1,03_flash2); default: every
#                     program in build/bin. A point a stage refuses (exit 2: outside its
#                     capabilities) is skipped with a line saying so.
#   --seqlens LIST    default 512,1k,2k,4k,8k,16k (k = 1024)
#   --head-dims LIST  default 64,128,256
#   --causal 0|1|both default both
#   --repeats R       default 3
#   --iters N         timed calls per point and runner, median reported (default 10)
#   --warmup W        untimed calls before them (default 3)
#   --check           also run the stages' --check (slower: the previous stage and the
#                     fp64 reference run too)
#   --quick           a smoke test: seqlen 2k, head_dim 64/128/256, causal both, one
#                     repeat, --iters 5 --warmup 2 (options after --quick still apply)
#   --all-points      run stages 01 and 02 at seqlen >= 8192 too
#   --no-peers        stages only
#   --python PY       the Python with PyTorch (default: $PYTHON or python3)
#   --build DIR       the build with bin/stage_* (default: build)
#   --out FILE        the CSV (default: plots/data/fa3_<tag>_<UTC date>_<device>.csv,
#                     tag fwd, bwd or fwdbwd by --direction; a time-stamped name when
#                     that exists: one CSV per run); paths are relative to the
#                     repository root
#   --dtype bf16|fp16 default bf16 (the paper's figures are bf16)
#
# Writes the CSV (FX_CSV_HEADER's columns, common/fx_main.h; the peers' rows in the
# same columns with check = peer), a sidecar <csv minus .csv>.meta (versions, clocks,
# the command, direction=, what was skipped and why) and a log of every program's
# output in build/sweep/. Then: bench/bounds.sh CSV, bench/plot.sh CSV,
# scripts/gen_readme_results.sh CSV (docs/benchmarks.md); the last two take the
# direction from the .meta.
# Without a GPU the stages exit 77: the sweep says "no GPU: stages skipped" and still
# runs the peers (which need PyTorch and a GPU, and say so).
# Exit status: 0; 1 when a stage or the peers failed, or when the stages found no GPU
# and FX_REQUIRE_GPU=1; 2 on bad usage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
die() {
    echo "sweep.sh: $*" >&2
    exit 2
}

# ---------------------------------------------------------------------------------------
# Options.

stages_opt="" seqlens="512,1k,2k,4k,8k,16k" head_dims="64,128,256" causal_opt=both
repeats=3 iters=10 warmup=3 check=0 all_points=0 peers=1 direction=fwd
python=${PYTHON:-python3} build=build out="" dtype=bf16
command_line="bench/sweep.sh${*:+ $*}"
while (($#)); do
    case $1 in
        --direction) direction=${2:?--direction needs fwd, bwd or both}; shift ;;
        --stages) stages_opt=${2:?--stages needs a list}; shift ;;
        --seqlens) seqlens=${2:?--seqlens needs a list}; shift ;;
        --head-dims) head_dims=${2:?--head-dims needs a list}; shift ;;
        --causal) causal_opt=${2:?--causal needs 0, 1 or both}; shift ;;
        --repeats) repeats=${2:?--repeats needs a number}; shift ;;
        --iters) iters=${2:?--iters needs a number}; shift ;;
        --warmup) warmup=${2:?--warmup needs a number}; shift ;;
        --check) check=1 ;;
        --quick) seqlens=2k head_dims=64,128,256 causal_opt=both repeats=1 iters=5 warmup=2 ;;
        --all-points) all_points=1 ;;
        --no-peers) peers=0 ;;
        --python) python=${2:?--python needs a program}; shift ;;
        --build) build=${2:?--build needs a directory}; shift ;;
        --out) out=${2:?--out needs a file}; shift ;;
        --dtype) dtype=${2:?--dtype needs bf16 or fp16}; shift ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option '$1' (bench/sweep.sh --help)" ;;
    esac
    shift
done

is_count() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 > 0)); }
is_count "$repeats" || die "--repeats must be a positive integer"
is_count "$iters" || die "--iters must be a positive integer"
[[ $warmup =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer"
[[ $dtype == bf16 || $dtype == fp16 ]] || die "--dtype must be bf16 or fp16"
case $direction in
    fwd) tag=fwd ;;
    bwd) tag=bwd ;;
    both) tag=fwdbwd ;;
    *) die "--direction must be fwd, bwd or both" ;;
esac
case $causal_opt in
    0) causals=(0) ;;
    1) causals=(1) ;;
    both) causals=(0 1) ;;
    *) die "--causal must be 0, 1 or both" ;;
esac

# "512,1k,16K" -> sizes=(512 1024 16384)
sizes=()
parse_sizes() {
    local item n
    local -a items=()
    sizes=()
    IFS=, read -r -a items <<<"$1"
    for item in "${items[@]}"; do
        case $item in
            *[kK]) n=${item%[kK]}; [[ $n =~ ^[0-9]+$ ]] && n=$((10#$n * 1024)) ;;
            *) n=$item ;;
        esac
        if ! [[ $n =~ ^[0-9]+$ ]] || ((10#$n == 0)); then die "'$item' in '$1' is not a size"; fi
        sizes+=("$((10#$n))")
    done
}
parse_sizes "$seqlens"
seqlen_list=("${sizes[@]}")
parse_sizes "$head_dims"
hd_list=("${sizes[@]}")
((${#seqlen_list[@]} && ${#hd_list[@]})) || die "no points"
for s in "${seqlen_list[@]}"; do
    ((16384 % s == 0)) || die "seqlen $s does not divide 16384 (batch = 16384/seqlen)"
done
for d in "${hd_list[@]}"; do
    ((2048 % d == 0)) || die "head_dim $d does not divide 2048 (heads = 2048/head_dim)"
done

# The stage programs.
stage_ids=()
if [[ -n $stages_opt ]]; then
    IFS=, read -r -a stage_ids <<<"$stages_opt"
    built_ids=""
    for bin in "$build"/bin/stage_*; do
        [[ -x $bin ]] && built_ids+="${built_ids:+,}${bin##*/stage_}"
    done
    for id in "${stage_ids[@]}"; do
        [[ -x $build/bin/stage_$id ]] || die "no program $build/bin/stage_$id (built: ${built_ids:-none})"
    done
else
    for bin in "$build"/bin/stage_*; do
        [[ -f $bin && -x $bin ]] && stage_ids+=("${bin##*/stage_}")
    done
    ((${#stage_ids[@]})) || echo "sweep.sh: no stage programs in $build/bin: peers only" \
        "(build first: cmake -S . -B build && cmake --build build -j)"
fi

# The backward: a stage whose --help says "backward: yes" runs with --bwd at bwd and
# both; at bwd the others are not run, at both they run their forward (noted below).
declare -A has_bwd=()
run_ids=() no_bwd_ids=()
for id in "${stage_ids[@]}"; do
    help_text=$("$build/bin/stage_$id" --help 2>&1 || true)
    if grep -Eq '^[[:space:]]*backward:[[:space:]]*yes' <<<"$help_text"; then
        has_bwd[$id]=1
    elif [[ $direction != fwd ]]; then
        no_bwd_ids+=("$id")
        [[ $direction == bwd ]] && continue
    fi
    run_ids+=("$id")
done

# Stages 01 and 02 are slow at seqlen >= 8192 (header): not run there without --all-points.
slow_from=8192
slow_reason() {
    case $1 in
        01_naive) echo "S (fp32) and P of every (batch, head) live in device memory, 13-52 GB at 16k, and its causal calls cost as much as the full ones: about 2.5 more minutes over 3 repeats, estimated${bwd_more}" ;;
        02_flash1) echo "one thread block per (batch, head): 8-64 blocks for 132 SMs at 8k-16k, up to about 2 s a call: about 5 more minutes over 3 repeats, estimated from its measured 4k rate${bwd_more}" ;;
        *) echo "" ;;
    esac
}
bwd_more=""
[[ $direction == fwd ]] || bwd_more=", for the forward; its backward adds about 2.8 times that"
is_slow_point() { ((!all_points && $2 >= slow_from)) && [[ -n $(slow_reason "$1") ]]; }

# ---------------------------------------------------------------------------------------
# The run's files: rows go to a run CSV in build/sweep, copied under plots/data at the end.

run_id=$(date -u +%Y%m%dT%H%M%SZ)
run_date=$(date -u +%Y-%m-%d)
logs=$build/sweep
mkdir -p "$logs"
csv_run=$logs/fa3_${tag}_${run_id}_$$.csv
meta_run=${csv_run%.csv}.meta
log=$logs/fa3_${tag}_${run_id}_$$.log
: >"$log"

# The header from common/fx_main.h, so that the stages and the peers append to one header.
header=$(sed -n '/#define FX_CSV_HEADER/,/[^\\]$/p' common/fx_main.h | grep -o '"[^"]*"' | tr -d '"\n')
[[ $header == stage,direction,* ]] || die "cannot read FX_CSV_HEADER from common/fx_main.h"
echo "$header" >"$csv_run"

# The commit the peers' rows record: the environment's (a copy without .git), git's, or
# at the end the one the stage rows recorded at configure time.
commit=${FX_GIT_COMMIT:-}
if [[ -z $commit ]] && commit=$(git rev-parse --short=12 HEAD 2>/dev/null); then
    [[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+=-dirty
fi
commit=${commit:-unknown}

{
    echo "command=$command_line"
    echo "direction=$direction"
    echo "started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host=$(uname -n)"
    echo "commit_tree=$commit"
    echo "points=seqlen ${seqlen_list[*]}; head_dim ${hd_list[*]}; causal ${causals[*]}; $dtype; batch*seqlen 16384; heads 2048/head_dim"
    echo "repeats=$repeats"
    echo "iters=$iters"
    echo "warmup=$warmup"
    echo "stages=${run_ids[*]}"
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "nvidia_smi=$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,persistence_mode \
            --format=csv,noheader 2>&1 | head -n 4 | paste -sd';' -)"
    fi
} >"$meta_run"

# ---------------------------------------------------------------------------------------
# The peers: one Python process for the whole run (importing torch costs seconds), fed
# one request per point, so that its numbers are taken between the stages' at each point.

peers_on=0 peers_failed=0 peers_pid="" to_peers="" from_peers=""
peers_line=""
PEERS_TIMEOUT=900  # seconds a request may take before the peers are given up
trap '' PIPE       # a peer process that died makes writes fail, not the sweep exit

start_peers() {
    ((peers)) || { peers_line="peers: not run (--no-peers)"; return; }
    if ! command -v "$python" >/dev/null 2>&1; then
        peers_line="$python not found: peers skipped"
        return
    fi
    coproc PEERS { "$python" -u bench/peers.py --serve 2>>"$log"; }
    # shellcheck disable=SC2153 # PEERS_PID is set by coproc
    peers_pid=$PEERS_PID
    from_peers=${PEERS[0]}
    to_peers=${PEERS[1]}
    local first=""
    IFS= read -r -t "$PEERS_TIMEOUT" first <&"$from_peers" || true
    echo "$first" >>"$log"
    if [[ $first == "peers: ready: "* ]]; then
        peers_on=1
        peers_line=${first#peers: ready: }
    else
        peers_line=${first:-"$python bench/peers.py gave no answer: peers skipped (see $log)"}
        wait "$peers_pid" 2>/dev/null || true
    fi
}

# ask_peers ARGS...: one request; its answer lines go to the log, the TFLOP/s to $peer_cells.
# $peer_point names the point in the notes.
peer_cells="" peer_point=""
ask_peers() {
    peer_cells=""
    ((peers_on)) || return 0
    local line
    if ! { printf '%s\n' "$*" 1>&"$to_peers"; } 2>/dev/null; then
        echo "  peers: the peer process has gone: peers stop here (see $log)"
        peers_on=0 peers_failed=1
        return 0
    fi
    while true; do
        if ! IFS= read -r -t "$PEERS_TIMEOUT" line <&"$from_peers"; then
            echo "  peers: no answer (process gone or over ${PEERS_TIMEOUT} s): peers stop here (see $log)"
            peers_on=0 peers_failed=1
            return 0
        fi
        echo "$line" >>"$log"
        case $line in
            "peers: end") return 0 ;;
            "peers: error"* | "peers: bad request"*) echo "  $line"; peers_failed=1 ;;
            *skipped:*) note_once "${peer_point:+$peer_point: }${line#"${line%%[! ]*}"}" ;;
            *TFLOP/s*) peer_cells+=" $(awk '{ for (i = 2; i <= NF; ++i) if ($i == "TFLOP/s") { printf "%s%s %s", $1, $2 == "bwd" ? " bwd" : "", $(i - 1); exit } }' <<<"$line")" ;;
            *"TB/s"*) peer_cells+=" $(awk '{ for (i = 2; i <= NF; ++i) if ($i == "TB/s") { printf "%s %s TB/s", $1, $(i - 1); exit } }' <<<"$line")" ;;
        esac
    done
}

# stop_peers [kill]: end of input ends the peer process; "kill" does not wait for a request.
stop_peers() {
    if [[ -n $peers_pid ]]; then
        if ((peers_on)); then exec {to_peers}>&-; fi
        if [[ ${1:-} == kill ]]; then kill "$peers_pid" 2>/dev/null || true; fi
        wait "$peers_pid" 2>/dev/null || true
        peers_pid=""
    fi
}

# ---------------------------------------------------------------------------------------
# Notes said once (a refusal repeats at every repeat) and kept in the .meta.

declare -A noted=()
note_once() {
    [[ -n ${noted[$1]:-} ]] && return 0
    noted[$1]=1
    echo "  $1"
    echo "note=$1" >>"$meta_run"
}

# ---------------------------------------------------------------------------------------
# One stage at one point. Sets stage_cell ("02_flash1 9.8" or "").

declare -A stage_state=()  # id -> nogpu | failed-nogpu; id,point -> refused
no_gpu_reason="" failed=0
stage_cell=""
run_stage() {
    local id=$1 point=$2
    shift 2
    stage_cell=""
    [[ -z ${stage_state[$id]:-} && -z ${stage_state[$id,$point]:-} ]] || return 0
    local stage_log rc
    local -a bwd_flag=()
    if [[ $direction != fwd && -n ${has_bwd[$id]:-} ]]; then bwd_flag=(--bwd); fi
    stage_log=$logs/stage_$$.out
    set +e
    "$build/bin/stage_$id" "$@" --bench ${bwd_flag[@]+"${bwd_flag[@]}"} --csv "$csv_run" \
        --iters "$iters" --warmup "$warmup" ${check_flag[@]+"${check_flag[@]}"} >"$stage_log" 2>&1
    rc=$?
    set -e
    { echo "=== stage $id $*${bwd_flag[*]:+ ${bwd_flag[*]}} (exit $rc)"; cat "$stage_log"; } >>"$log"
    case $rc in
        0)  # "02_flash1 9.8", at bwd "02_flash1 bwd 8.6", at both "02_flash1 9.8 bwd 8.6"
            stage_cell=$(awk -v id="$id" -v dir="$direction" '
                /time fwd:/ { for (i = 1; i <= NF; ++i) if ($i == "TFLOP/s") f = $(i - 1) }
                /time bwd:/ { for (i = 1; i <= NF; ++i) if ($i == "TFLOP/s") b = $(i - 1) }
                END { printf "%s", id; if (dir != "bwd" || b == "") printf " %s", f
                      if (b != "") printf " bwd %s", b; printf "\n" }' "$stage_log")
            ;;
        2)
            stage_state[$id,$point]=refused
            note_once "$id refused $point: $(grep -v '^[[:space:]]*$' "$stage_log" | tail -n 1)"
            ;;
        77)
            stage_state[$id]=nogpu
            no_gpu_reason=$(grep -m 1 'skipped:' "$stage_log" | sed 's/^[[:space:]]*//' || true)
            echo "  ${no_gpu_reason:-$id: exit 77}"
            ;;
        *)
            failed=1
            if grep -q 'skipped:' "$stage_log"; then  # FX_REQUIRE_GPU=1: no GPU is a failure
                stage_state[$id]="failed-nogpu"
                no_gpu_reason=$(grep -m 1 'skipped:' "$stage_log" | sed 's/^[[:space:]]*//')
                echo "  $id: $no_gpu_reason (FX_REQUIRE_GPU=${FX_REQUIRE_GPU:-}: a failure)"
            else
                echo "  $id FAILED at $point (exit $rc): $(grep -m 1 -iE 'fail|error' "$stage_log" || tail -n 1 "$stage_log")"
            fi
            ;;
    esac
    rm -f "$stage_log"
}

check_flag=()
((check)) && check_flag=(--check)

fmt_time() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

# ---------------------------------------------------------------------------------------
# The end, also on an interrupt (Ctrl-C, or `timeout` sending TERM): the rows so far go
# to the CSV under plots/data, with a note in the .meta that the run was cut short.

finish() {
    local interrupted=$1
    trap - INT TERM
    if ((interrupted)); then stop_peers kill; else stop_peers; fi
    el=$(($(date +%s) - t0))
    ((interrupted)) && echo "note=interrupted after $el s at point $i of $total: the CSV holds the rows measured until then" >>"$meta_run"
    echo "finished_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$meta_run"
    echo "elapsed_s=$el" >>"$meta_run"

    # The CSV under plots/data.
    rows=$(($(wc -l <"$csv_run") - 1))
    if ((rows == 0)); then
        echo
        echo "No rows: no CSV written (log: $log)."
        rm -f "$csv_run"
    else
        # Rows whose field count differs from the header: a build older than common/fx_main.h.
        bad=$(awk -F, 'NR == 1 { n = NF; next } NF != n { c++ } END { print c + 0 }' "$csv_run")
        ((bad == 0)) || echo "WARNING: $bad rows do not have the header's columns: rebuild ($build) and run again"
        # The commit the stage rows recorded (configure time) fills the peers' "unknown".
        built=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
                         $c["check"] != "peer" && !($c["commit"] in s) { s[$c["commit"]]; l = l (l ? " " : "") $c["commit"] }
                         END { print l }' "$csv_run")
        if [[ -n $built && $built != *" "* && $commit == unknown ]]; then
            awk -F, -v OFS=, -v cm="$built" 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; print; next }
                 $c["check"] == "peer" { $c["commit"] = cm } { print }' "$csv_run" >"$csv_run.tmp"
            mv "$csv_run.tmp" "$csv_run"
            commit=$built
        elif [[ -n $built && $built != "$commit" ]]; then
            echo "note: the stage programs were built at commit $built, the tree is at $commit"
            echo "note=stage programs built at commit $built; tree at $commit" >>"$meta_run"
        fi
        if [[ -z $out ]]; then
            device=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "device") c = i; next } { print $c; exit }' "$csv_run")
            slug=$(printf '%s' "$device" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9][^a-z0-9]*/-/g; s/^-//; s/-$//')
            out=plots/data/fa3_${tag}_${run_date}_${slug:-unknown}.csv
            [[ ! -e $out ]] || out=plots/data/fa3_${tag}_${run_id}_${slug:-unknown}.csv
        fi
        mkdir -p "$(dirname "$out")"
        cp "$csv_run" "$out"
        cp "$meta_run" "${out%.csv}.meta"
        echo
        echo "$rows rows: $out (sidecar ${out%.csv}.meta; log $log), $(fmt_time "$el") elapsed"
        echo "next: bench/bounds.sh $out; bench/plot.sh $out; scripts/gen_readme_results.sh $out"
    fi

    if ((peers_failed)); then failed=1; fi
    if ((interrupted)); then
        echo "Interrupted: exit 130."
        exit 130
    fi
    if ((failed)); then
        echo "A stage or the peers failed: exit 1."
        exit 1
    fi
    exit 0
}

# ---------------------------------------------------------------------------------------
# The sweep.

points=()
for d in "${hd_list[@]}"; do
    for c in "${causals[@]}"; do
        for s in "${seqlen_list[@]}"; do
            points+=("$d $c $s")
        done
    done
done
total=$((${#points[@]} * repeats))
max_seqlen=0
for s in "${seqlen_list[@]}"; do ((s > max_seqlen)) && max_seqlen=$s; done

case $direction in
    fwd) what="FA3 forward sweep" ;;
    bwd) what="FA3 backward sweep" ;;
    both) what="FA3 forward and backward sweep" ;;
esac
echo "$what: ${#points[@]} points x $repeats repeats; stages: ${run_ids[*]:-none}; $dtype;" \
    "--iters $iters --warmup $warmup${check_flag[*]:+ --check}"
for id in ${no_bwd_ids[@]+"${no_bwd_ids[@]}"}; do
    if [[ $direction == bwd ]]; then
        note_once "$id has no backward (its --help: backward: no): not run at bwd"
    else
        note_once "$id has no backward (its --help: backward: no): its forward only"
    fi
done
for id in ${run_ids[@]+"${run_ids[@]}"}; do
    if ((!all_points)) && [[ -n $(slow_reason "$id") ]] && ((max_seqlen >= slow_from)); then
        note_once "$id not run at seqlen >= $slow_from ($(slow_reason "$id"); --all-points runs it)"
    fi
done
start_peers
echo "peers: $peers_line"
echo "peers=$peers_line" >>"$meta_run"
echo "log: $log"

peer_dir=()
[[ $direction == fwd ]] || peer_dir=(--direction "$direction")
t0=$(date +%s)
i=0
trap 'echo; echo "sweep.sh: interrupted"; finish 1' INT TERM
for ((r = 1; r <= repeats; ++r)); do
    if ((peers_on)); then
        meta_arg=()
        ((r == 1)) && meta_arg=(--meta "$meta_run")  # the peers' versions, once
        peer_point=""
        ask_peers --gemm --iters "$iters" --warmup "$warmup" --csv "$csv_run" --commit "$commit" \
            ${meta_arg[@]+"${meta_arg[@]}"}
        echo "[repeat $r/$repeats, $(fmt_time $(($(date +%s) - t0)))] reference:${peer_cells:- none}"
    fi
    # The runners of a point, rotated by the repeat so no runner is always first.
    runners=(${run_ids[@]+"${run_ids[@]}"} peers)
    n=${#runners[@]}
    for p in "${points[@]}"; do
        read -r d c s <<<"$p"
        i=$((i + 1))
        b=$((16384 / s)) h=$((2048 / d))
        label="hd $d $( ((c)) && echo causal || echo non-causal) seqlen $s"
        args=(--batch "$b" --seqlen "$s" --heads "$h" --head-dim "$d" --dtype "$dtype")
        ((c)) && args+=(--causal)
        cells=""
        for ((k = 0; k < n; ++k)); do
            who=${runners[((k + r - 1) % n)]}
            if [[ $who == peers ]]; then
                peer_point="hd $d causal $c seqlen $s"
                ask_peers --batch "$b" --seqlen "$s" --heads "$h" --head-dim "$d" --causal "$c" \
                    --dtype "$dtype" --iters "$iters" --warmup "$warmup" --csv "$csv_run" --commit "$commit" \
                    ${peer_dir[@]+"${peer_dir[@]}"}
                cells+=$peer_cells
            elif is_slow_point "$who" "$s"; then
                continue
            else
                run_stage "$who" "hd $d causal $c seqlen $s" "${args[@]}"
                [[ -n $stage_cell ]] && cells+=" $stage_cell"
            fi
        done
        # Every stage said "no GPU" at the first point: say it once, plainly.
        if ((i == 1 && ${#run_ids[@]})); then
            all_nogpu=1
            for id in "${run_ids[@]}"; do
                [[ ${stage_state[$id]:-} == *nogpu ]] || all_nogpu=0
            done
            if ((all_nogpu)); then
                echo "no GPU: stages skipped (${no_gpu_reason#*skipped: })"
                echo "note=no GPU: stages skipped (${no_gpu_reason#*skipped: })" >>"$meta_run"
            fi
        fi
        el=$(($(date +%s) - t0))
        echo "[point $i/$total, $(fmt_time "$el")] repeat $r/$repeats, $label (batch $b, heads $h):${cells:- nothing measured}"
    done
    if ((r == 1 && repeats > 1)); then
        el=$(($(date +%s) - t0))
        echo "repeat 1 took $(fmt_time "$el"); the sweep ends in about $(fmt_time $((el * (repeats - 1))))"
    fi
done
finish 0
