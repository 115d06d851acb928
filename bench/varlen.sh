#!/usr/bin/env bash
# varlen.sh — a variable-length batch: the stages with varlen (stage 09) against
# FlashAttention-3's flash_attn_varlen_func in the same run, every runner timed the same way.
#
#   bench/varlen.sh [options]
#
# The batch (FlashAttention's varlen layout, docs/harness.md "Variable-length batches"):
# 16 sequences packed along the rows without padding, a skewed mix of lengths from 128 to
# 16384 (128·2^(7k/15), k = 0..15, rounded to multiples of 8), in this fixed shuffled order:
#   336,176,888,1704,3248,16384,6208,1232,8576,128,4496,248,464,648,2352,11856
# (58944 rows; the 16384 sequence holds 48 % of the non-causal FLOPs), keys the same
# lengths unless --lengths-k; bf16; heads = 2048/head_dim (16 at head_dim 128), head_dim
# 64, 128 and 256, causal and not: 6 cases. At each case every stage runs
#   build/bin/stage_<id> --seqlens-q L0,L1,... [--seqlens-k ...] --heads H --head-dim D \
#       --dtype bf16 [--causal] --bench --csv FILE --iters N --warmup W --spin-us S
# and, seconds apart, the peers are timed (one request to one bench/peers.py --serve
# process: fa3, FA3's flash_attn_varlen_func; sdpa_flash, SDPA's flash backend on nested
# jagged tensors, since SDPA has no varlen entry; peers.py's docstring says how each is
# called). The order of the runners, and of the peers inside their request, rotates from
# one repeat to the next, and the whole run is repeated R times in that interleaved order
# (DESIGN.md: a claim needs three repeats and a difference larger than their spread).
#
# Timing as every --bench run and peer times (docs/benchmarks.md, "How the runners are
# timed"): the L2 flush, then a spin of --spin-us before the start event, the median of
# --iters calls. The default spin here is 10000 us, not the sweep's 1000: SDPA's dispatch
# of nested tensors takes milliseconds of host time a call (docs/benchmarks.md,
# "Variable-length batches"), and a spin shorter than a call's host time puts that host
# time in the interval. A longer spin costs only wall time (10 ms per timed call). FLOPs by the FA3
# convention summed over the sequences: 4·heads·head_dim·(unmasked pairs of each
# sequence), causal bottom-right in each sequence — what the stage programs count for a
# varlen batch (fx_flops_forward) and peers.py counts.
#
# Options:
#   --stages LIST     stage ids (default 09_persistent; none: the peers alone). A stage
#                     whose --help says "varlen: no" (08_intra_wg_overlap) or has no varlen
#                     line (a build from before the varlen harness) is not run, with a line
#                     saying so.
#   --lengths LIST    the sequences' query lengths (default above; k = 1024 accepted)
#   --lengths-k LIST  their key lengths (default: --lengths)
#   --head-dims LIST  default 64,128,256 (heads = 2048/head_dim)
#   --causal 0|1|both default both
#   --repeats R       default 3
#   --iters N         timed calls per case and runner (default 10; 1 to 1024)
#   --warmup W        untimed calls before them (default 3)
#   --spin-us S       the spin before each timed call (default 10000; 0 to 100000)
#   --peers LIST      of fa3,flash,efficient (default fa3,flash; none: no peers)
#   --no-peers        stages only
#   --dtype bf16|fp16 default bf16 (fa3-fwd has no fp16: it says so)
#   --python PY       the Python with PyTorch (default: $PYTHON or python3)
#   --build DIR       the build with bin/stage_* (default: build)
#   --out FILE        the CSV (default: plots/data/varlen_<commit>_<UTC date>_<device>.csv,
#                     a time-stamped name when that exists)
#   --dry-run         print the plan and a rough estimate; run nothing
#
# Writes the CSV (FX_CSV_HEADER's columns; a varlen row has batch = the number of
# sequences and seqlen_q, seqlen_k = the longest lengths, as the stage programs write it;
# the peers' rows in the same columns with check = peer), a sidecar .meta (the command, the
# lengths, versions, clocks, notes for everything skipped, where the time went) and a log
# of every program's output in build/varlen/; then prints, per case, each runner's median
# ms over the repeats with the spread (max − min over the median), its median TFLOP/s and
# fa3's median ms over its own (with the range of that ratio over the repeats, each repeat
# paired with fa3's in the same repeat). Rows are paired by the problem columns
# (direction, dtype, heads_q, heads_kv, head_dim, causal, batch, seqlen_q, seqlen_k); one
# CSV holds one batch (its lengths are in the .meta).
# Without a GPU the stages exit 77 and the run says "no GPU: stages skipped"; without
# PyTorch peers.py says "PyTorch not installed: peers (SDPA, FA3) skipped": exit 0 then.
# Exit status: 0; 1 when a stage or the peers failed (or no GPU with FX_REQUIRE_GPU=1);
# 2 on bad usage (checked before anything runs).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # fx_writable, fx_csv_header, fx_tree_commit
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() {
    echo "varlen.sh: $*" >&2
    exit 2
}
needs() {
    local what=$1
    shift
    if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs $what"; fi
}

LENGTHS_DEFAULT=336,176,888,1704,3248,16384,6208,1232,8576,128,4496,248,464,648,2352,11856
SPIN_DEFAULT=10000
MAX_SEQS=1024 # FX_VARLEN_MAX_SEQS (common/fx_problem.h)

stages_opt=09_persistent lengths=$LENGTHS_DEFAULT lengths_k="" head_dims=64,128,256
causal_opt=both repeats=3 iters=10 warmup=3 spin=$SPIN_DEFAULT peers_opt=fa3,flash peers=1
dtype=bf16 python=${PYTHON:-python3} build=build out="" dry_run=0
command_line="bench/varlen.sh${*:+ $*}"
while (($#)); do
    case $1 in
        --stages) needs "a list" "$@"; stages_opt=$2; shift ;;
        --lengths) needs "a list" "$@"; lengths=$2; shift ;;
        --lengths-k) needs "a list" "$@"; lengths_k=$2; shift ;;
        --head-dims) needs "a list" "$@"; head_dims=$2; shift ;;
        --causal) needs "0, 1 or both" "$@"; causal_opt=$2; shift ;;
        --repeats) needs "a number" "$@"; repeats=$2; shift ;;
        --iters) needs "a number" "$@"; iters=$2; shift ;;
        --warmup) needs "a number" "$@"; warmup=$2; shift ;;
        --spin-us) needs "microseconds" "$@"; spin=$2; shift ;;
        --peers) needs "a list" "$@"; peers_opt=$2; shift ;;
        --no-peers) peers=0 ;;
        --dtype) needs "bf16 or fp16" "$@"; dtype=$2; shift ;;
        --python) needs "a program" "$@"; python=$2; shift ;;
        --build) needs "a directory" "$@"; build=$2; shift ;;
        --out) needs "a file" "$@"; out=$2; shift ;;
        --dry-run) dry_run=1 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option '$1' (bench/varlen.sh --help)" ;;
    esac
    shift
done

is_count() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 > 0)); }
is_count "$repeats" || die "--repeats must be a positive integer"
repeats=$((10#$repeats))
if ! is_count "$iters" || ((10#$iters > 1024)); then
    die "--iters must be a whole number from 1 to 1024 (the stage programs' FX_MAX_ITERS)"
fi
iters=$((10#$iters))
if ! [[ $warmup =~ ^[0-9]+$ ]] || ((10#$warmup > 100000)); then
    die "--warmup must be a whole number from 0 to 100000 (the stage programs' FX_MAX_WARMUP)"
fi
warmup=$((10#$warmup))
if ! [[ $spin =~ ^[0-9]+$ ]] || ((10#$spin > 100000)); then
    die "--spin-us must be a whole number of microseconds, 0 to 100000"
fi
spin=$((10#$spin))
[[ $dtype == bf16 || $dtype == fp16 ]] || die "--dtype must be bf16 or fp16"
case $causal_opt in
    0) causals=(0) ;;
    1) causals=(1) ;;
    both) causals=(0 1) ;;
    *) die "--causal must be 0, 1 or both" ;;
esac

# parse_lengths OPTION LIST: the lengths (k = 1024) into `parsed`, comma-joined.
parsed=""
parse_lengths() {
    local item n out_list="" count=0
    local -a items=()
    IFS=, read -r -a items <<<"$2,"
    for item in "${items[@]}"; do
        case $item in
            *[kK]) n=${item%[kK]}; [[ $n =~ ^[0-9]+$ ]] && n=$((10#$n * 1024)) ;;
            *) n=$item ;;
        esac
        [[ $n =~ ^[0-9]+$ ]] || die "$1: '$item' in '$2' is not a length"
        out_list+="${out_list:+,}$((10#$n))"
        count=$((count + 1))
    done
    ((count >= 1 && count <= MAX_SEQS)) ||
        die "$1: $count lengths: 1 to $MAX_SEQS sequences (FX_VARLEN_MAX_SEQS)"
    parsed=$out_list
}
parse_lengths --lengths "$lengths"
lengths=$parsed
IFS=, read -r -a lq <<<"$lengths"
if [[ -n $lengths_k ]]; then
    parse_lengths --lengths-k "$lengths_k"
    lengths_k=$parsed
    IFS=, read -r -a lk <<<"$lengths_k"
    ((${#lk[@]} == ${#lq[@]})) ||
        die "--lengths-k gives ${#lk[@]} lengths for the ${#lq[@]} sequences of --lengths"
else
    lk=("${lq[@]}")
fi
n_seqs=${#lq[@]} total_q=0 total_k=0 max_q=0 max_k=0 min_q=${lq[0]}
for ((b = 0; b < n_seqs; ++b)); do
    total_q=$((total_q + lq[b])) total_k=$((total_k + lk[b]))
    ((lq[b] > max_q)) && max_q=${lq[b]}
    ((lk[b] > max_k)) && max_k=${lk[b]}
    ((lq[b] < min_q)) && min_q=${lq[b]}
done
((total_q > 0)) || die "--lengths: every sequence has 0 query rows: nothing to time"
((total_k > 0)) || die "--lengths-k: no sequence has a key: nothing to time"

hd_list=()
IFS=, read -r -a hd_items <<<"$head_dims"
for d in "${hd_items[@]}"; do
    is_count "$d" || die "--head-dims: '$d' is not a head_dim"
    d=$((10#$d))
    ((2048 % d == 0)) || die "--head-dims: $d does not divide 2048 (heads = 2048/head_dim)"
    for t in ${hd_list[@]+"${hd_list[@]}"}; do ((t != d)) || die "--head-dims names $d twice"; done
    hd_list+=("$d")
done
((${#hd_list[@]})) || die "--head-dims: no head_dim"

peer_list=()
if [[ $peers_opt == none ]]; then
    peers=0
elif ((peers)); then
    IFS=, read -r -a peer_items <<<"$peers_opt"
    declare -A peer_seen=()
    for p in "${peer_items[@]}"; do
        case $p in
            fa3 | flash | efficient) ;;
            cudnn) die "--peers: cudnn is not timed on a varlen batch (its nested-tensor path" \
                "waits for the GPU inside the call: bench/peers.py says why)" ;;
            *) die "--peers: '$p' is not one of fa3, flash, efficient (or none)" ;;
        esac
        [[ -z ${peer_seen[$p]:-} ]] || die "--peers names '$p' twice"
        peer_seen[$p]=1
        peer_list+=("$p")
    done
    ((${#peer_list[@]})) || die "--peers needs at least one of fa3, flash, efficient (or none)"
fi

if [[ -n $out ]]; then
    for f in "$out" "${out%.csv}.meta"; do
        fx_writable --mkdir "$f" || die "--out $out: cannot write $f (checked before measuring)"
    done
else
    fx_writable --mkdir plots/data/varlen_probe.csv ||
        die "cannot write into plots/data (--out FILE elsewhere)"
fi

# ---------------------------------------------------------------------------------------
# The stages: those whose --help says "varlen: yes".

stage_ids=() skip_lines=() stage_items=()
[[ $stages_opt == none ]] || IFS=, read -r -a stage_items <<<"$stages_opt"
declare -A stage_seen=()
for id in ${stage_items[@]+"${stage_items[@]}"}; do
    [[ $id =~ ^[A-Za-z0-9_.-]+$ ]] || die "--stages: '$id' is not a stage id"
    [[ -z ${stage_seen[$id]:-} ]] || die "--stages names '$id' twice"
    stage_seen[$id]=1
    bin=$build/bin/stage_$id
    if [[ ! -x $bin ]]; then
        if ((dry_run)) && [[ -d stages/$id ]]; then
            skip_lines+=("$id: not built here ($bin), planned as taking --seqlens-q")
            stage_ids+=("$id")
            continue
        fi
        die "no program $bin (build first: cmake -S . -B $build && cmake --build $build -j)"
    fi
    help_text=$("$bin" --help 2>&1 || true)
    if [[ $help_text =~ (^|$'\n')[[:space:]]*varlen:[[:space:]]*yes ]]; then
        if [[ $help_text != *--spin-us* ]]; then
            skip_lines+=("$id: its --help has no --spin-us (an old build): not run")
            continue
        fi
        stage_ids+=("$id")
    elif [[ $help_text =~ (^|$'\n')[[:space:]]*varlen:[[:space:]]*no ]]; then
        skip_lines+=("$id has no variable-length batch (its --help: varlen: no): not run")
    else
        skip_lines+=("$id: no varlen line in its --help (built before the varlen harness): not run")
    fi
done
((${#stage_ids[@]} || peers)) || {
    for l in ${skip_lines[@]+"${skip_lines[@]}"}; do echo "  $l"; done
    die "nothing to run: no stage takes a variable-length batch and no peers"
}

cases=()
for d in "${hd_list[@]}"; do
    for c in "${causals[@]}"; do cases+=("$d $c"); done
done
entries=()
for id in ${stage_ids[@]+"${stage_ids[@]}"}; do entries+=("S $id"); done
((peers)) && entries+=("P")
total=$((${#cases[@]} * repeats))

# A rough estimate (seconds): a stage run 0.35 s plus its timed calls; a peer request
# 0.1 s plus each peer's warm-up and timed calls; the peers' start 5 s. The calls' own
# time is guessed at 20 ms (the default batch: 2-19 ms a call on an H200).
est_s=$(awk -v ns="${#stage_ids[@]}" -v np="${#peer_list[@]}" -v peers="$peers" \
    -v nc="${#cases[@]}" -v r="$repeats" -v it="$iters" -v w="$warmup" -v sp="$spin" 'BEGIN {
        call = 0.02; flush = 0.0001
        st = 0.35 + (w + it) * call + it * (sp * 1e-6 + flush)
        pe = peers ? 0.1 + np * ((w + it + 1) * call + it * (sp * 1e-6 + flush)) : 0
        printf "%d", r * nc * (ns * st + pe) + (peers ? 5 : 0) + 0.5 }')
lengths_text="$n_seqs sequences, query lengths $min_q..$max_q ($total_q rows)"
[[ -z $lengths_k ]] || lengths_text+=", key lengths ${lengths_k} ($total_k rows)"
peer_text=none
((peers)) && peer_text=$(IFS=,; printf '%s' "${peer_list[*]}")
echo "varlen batch: $lengths_text; ${#cases[@]} cases x $repeats repeats; stages:" \
    "${stage_ids[*]:-none}; peers: $peer_text; $dtype; --iters $iters --warmup $warmup" \
    "--spin-us $spin"
echo "estimated duration on an H200: about $((est_s / 60)):$(printf '%02d' $((est_s % 60)))" \
    "(rough)"
for l in ${skip_lines[@]+"${skip_lines[@]}"}; do echo "  $l"; done
if ((dry_run)); then
    echo "lengths: $lengths${lengths_k:+; keys: $lengths_k}"
    echo "plan (one repeat; the order rotates by one runner each repeat):"
    for cs in "${cases[@]}"; do
        read -r d c <<<"$cs"
        line="  hd $d causal $c (heads $((2048 / d)), batch $n_seqs, seqlen_q $max_q, seqlen_k"
        line+=" $max_k):"
        for e in "${entries[@]}"; do
            read -r kind key <<<"$e"
            if [[ $kind == P ]]; then line+=" peers($peer_text)"; else line+=" $key"; fi
        done
        echo "$line"
    done
    echo "dry run: nothing measured"
    exit 0
fi

# ---------------------------------------------------------------------------------------
# The run's files: rows go to a run CSV in $build/varlen, copied under plots/data at the end.

run_id=$(date -u +%Y%m%dT%H%M%SZ)
run_date=${run_id:0:4}-${run_id:4:2}-${run_id:6:2}
logs=$build/varlen
mkdir -p "$logs"
csv_run=$logs/varlen_${run_id}_$$.csv
meta_run=${csv_run%.csv}.meta
log=$logs/varlen_${run_id}_$$.log
stage_out=$logs/stage_$$.out
stage_csv=$logs/stage_$$.csv
: >"$log"
exec {logfd}>>"$log"

header=$(fx_csv_header) || die "the CSV header: see above"
echo "$header" >"$csv_run"

commit=$(fx_tree_commit 7)

{
    echo "command=$command_line"
    echo "kind=varlen"
    echo "direction=fwd"
    echo "started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host=$(uname -n)"
    echo "commit_tree=$commit"
    echo "varlen_seqlens_q=$lengths"
    echo "varlen_seqlens_k=${lengths_k:-$lengths}"
    echo "varlen_batch=$n_seqs sequences; total_q $total_q; total_k $total_k;" \
        "seqlen_q (longest) $max_q; seqlen_k (longest) $max_k"
    echo "cases=head_dim ${hd_list[*]}; causal ${causals[*]}; $dtype; heads 2048/head_dim"
    echo "flops=FA3 convention summed over the sequences: 4*heads*head_dim*(unmasked pairs" \
        "of each sequence), causal bottom-right per sequence"
    echo "repeats=$repeats"
    echo "iters=$iters"
    echo "warmup=$warmup"
    echo "spin_us=$spin"
    echo "stages=${stage_ids[*]:-}"
    echo "runners=${stage_ids[*]:-}${stage_ids[*]:+ }peers($peer_text)"
    echo "estimate_s=$est_s"
    if command -v nvidia-smi >/dev/null 2>&1; then
        smi=$(nvidia-smi \
            --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,persistence_mode \
            --format=csv,noheader 2>&1 || true)
        echo "nvidia_smi=$(printf '%s\n' "$smi" | sed -n '1,4p' | paste -sd';' -)"
    fi
} >"$meta_run"
for l in ${skip_lines[@]+"${skip_lines[@]}"}; do echo "note=$l" >>"$meta_run"; done

tp=0 t0_us=0 # set through printf -v (now_us)
declare -A noted=()
note_once() {
    [[ -n ${noted[$1]:-} ]] && return 0
    noted[$1]=1
    echo "  $1"
    echo "note=$1" >>"$meta_run"
}
now_us() { # now_us VAR
    local _now_t=${EPOCHREALTIME:-}
    if [[ -n $_now_t ]]; then
        _now_t=${_now_t//[!0-9]/}
        printf -v "$1" '%s' "$((10#$_now_t))"
    else
        printf -v "$1" '%s' "$((SECONDS * 1000000))"
    fi
}
declare -A spent_us=() spent_n=()
account() { # account WHAT START_US
    local t_now
    now_us t_now
    spent_us[$1]=$((${spent_us[$1]:-0} + t_now - $2))
    spent_n[$1]=$((${spent_n[$1]:-0} + 1))
}
seconds_of() { printf '%d.%03d' $(($1 / 1000000)) $((($1 / 1000) % 1000)); }

# ---------------------------------------------------------------------------------------
# The peers: one bench/peers.py --serve process for the run, one request per case.

peers_on=0 peers_failed=0 peers_pid="" to_peers="" from_peers="" peers_line=""
PEERS_TIMEOUT=900
trap '' PIPE
start_peers() {
    ((peers)) || { peers_line="not run (--no-peers)"; return; }
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
    printf '%s\n' "$first" >&"$logfd"
    if [[ $first == "peers: ready: "* ]]; then
        peers_on=1
        peers_line=${first#peers: ready: }
    else
        peers_line=${first:-"$python bench/peers.py gave no answer: peers skipped (see $log)"}
        wait "$peers_pid" 2>/dev/null || true
    fi
}
stop_peers() {
    if [[ -n $peers_pid ]]; then
        if ((peers_on)); then exec {to_peers}>&-; fi
        if [[ ${1:-} == kill ]]; then kill "$peers_pid" 2>/dev/null || true; fi
        wait "$peers_pid" 2>/dev/null || true
        peers_pid=""
    fi
}
# ask_peers ARGS...: one request; its lines to the log, the TFLOP/s to $peer_cells.
peer_cells="" peer_case=""
ask_peers() {
    peer_cells=""
    ((peers_on)) || return 0
    local line rest cell i
    local -a w=()
    if ! { printf '%s\n' "$*" 1>&"$to_peers"; } 2>/dev/null; then
        echo "  peers: the peer process has gone: peers stop here (see $log)"
        peers_on=0 peers_failed=1
        return 0
    fi
    while true; do
        if ! IFS= read -r -t "$PEERS_TIMEOUT" line <&"$from_peers"; then
            echo "  peers: no answer (process gone or over ${PEERS_TIMEOUT} s): peers stop here"
            peers_on=0 peers_failed=1
            return 0
        fi
        printf '%s\n' "$line" >&"$logfd"
        rest=${line#"${line%%[! ]*}"}
        while [[ $rest == *"  "* ]]; do rest=${rest//  / }; done
        case $line in
            "peers: end") return 0 ;;
            "peers: error"* | "peers: bad request"*) echo "  $line"; peers_failed=1 ;;
            *"skipped (every point):"*) note_once "$rest" ;;
            *skipped:*) note_once "$peer_case: $rest" ;;
            *TFLOP/s*)
                read -r -a w <<<"$line"
                cell=${w[0]}
                for ((i = 2; i < ${#w[@]}; ++i)); do
                    if [[ ${w[i]} == TFLOP/s ]]; then cell+=" ${w[i - 1]}"; break; fi
                done
                peer_cells+=" $cell"
                if [[ $line =~ GPU\ idle\ at\ enqueue\ in\ ([0-9]+/[0-9]+)\ calls\ \(spin ]]; then
                    note_once "$peer_case: ${w[0]}: the GPU went idle before the host had" \
                        "enqueued the call (${BASH_REMATCH[1]} calls, spin too short): raise" \
                        "--spin-us"
                fi
                if [[ $line =~ GPU\ idle\ before\ the\ call\ returned\ in\ ([0-9]+/[0-9]+) ]]; then
                    note_once "$peer_case: ${w[0]}: the GPU waited for the host before the call" \
                        "returned (${BASH_REMATCH[1]} calls): host time is in its times"
                fi
                ;;
        esac
    done
}

# ---------------------------------------------------------------------------------------
# One stage at one case: its rows appended to the run's CSV (another header mapped by
# column name), its TFLOP/s into $stage_cell.

declare -A stage_state=()
no_gpu_reason="" failed=0 stage_cell=""
append_rows() {
    [[ -s $stage_csv ]] || return 0
    local file_header
    IFS= read -r file_header <"$stage_csv" || true
    if [[ $file_header == "$header" ]]; then
        tail -n +2 "$stage_csv" >>"$csv_run"
    else
        awk -F, -v OFS=, -v want="$header" '
            NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; n = split(want, w, ","); next }
            { line = ""
              for (i = 1; i <= n; ++i)
                  line = line (i > 1 ? "," : "") ((w[i] in col) ? $(col[w[i]]) : "")
              print line }' "$stage_csv" >>"$csv_run"
    fi
}
run_stage() { # run_stage ID CASE ARGS...
    local id=$1 cs=$2 rc line last="" f="" t0
    shift 2
    stage_cell=""
    [[ -z ${stage_state[$id]:-} && -z ${stage_state[$id,$cs]:-} ]] || return 0
    : >"$stage_csv"
    now_us t0
    set +e
    "$build/bin/stage_$id" "$@" --bench --csv "$stage_csv" --iters "$iters" --warmup "$warmup" \
        --spin-us "$spin" >"$stage_out" 2>&1
    rc=$?
    set -e
    account stage "$t0"
    local -a out_lines=()
    mapfile -t out_lines <"$stage_out"
    printf '%s\n' "=== stage $id $* (exit $rc)" ${out_lines[@]+"${out_lines[@]}"} >&"$logfd"
    for line in ${out_lines[@]+"${out_lines[@]}"}; do
        [[ $line =~ [^[:space:]] ]] && last=$line
        [[ $line =~ time\ fwd:.*[[:space:]]([0-9.]+)\ TFLOP/s ]] && f=${BASH_REMATCH[1]}
    done
    case $rc in
        0)
            append_rows
            stage_cell="$id ${f:-?}"
            ;;
        2)
            stage_state[$id,$cs]=refused
            note_once "$id refused $cs: $last"
            ;;
        77)
            stage_state[$id]=nogpu
            no_gpu_reason=$last
            for line in ${out_lines[@]+"${out_lines[@]}"}; do
                if [[ $line == *skipped:* ]]; then no_gpu_reason=${line#"${line%%[! ]*}"}; break; fi
            done
            ;;
        *)
            failed=1
            stage_state[$id]=failed
            echo "  $id FAILED at $cs (exit $rc): ${last:-no output} (log: $log)"
            ;;
    esac
}

# ---------------------------------------------------------------------------------------
# The table: per case and runner, the median ms over the repeats, its spread, the median
# TFLOP/s, and fa3's ms over the runner's (median; range over the repeats, paired in order).

print_table() {
    local csv=$1
    awk -F, -v repeats="$repeats" "$(<bench/awk_median.awk)"'
    NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
    $c["check"] == "ref" || $c["direction"] != "fwd" { next }
    {
        key = $c["head_dim"] SUBSEP $c["causal"] SUBSEP $c["dtype"] SUBSEP $c["batch"] SUBSEP \
              $c["seqlen_q"] SUBSEP $c["seqlen_k"] SUBSEP $c["heads_q"] SUBSEP $c["heads_kv"]
        if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
        r = $c["stage"]
        if (!((key, r) in n)) runners[key] = runners[key] SUBSEP r
        i = ++n[key, r]
        ms[key, r, i] = $c["ms"]; msl[key, r] = msl[key, r] " " $c["ms"]
        tfl[key, r] = tfl[key, r] " " $c["tflops"]
        gf[key, r] = gf[key, r] " " $c["tflops"] * $c["ms"]
    }
    END {
        if (!nk) { print "  (no rows)"; exit }
        printf "%-4s %-10s %-17s %-20s %8s  %s\n", "hd", "mask", "runner", "ms (spread)", \
            "TFLOP/s", "fa3 ms / its ms (range over repeats)"
        for (q = 1; q <= nk; ++q) {
            key = keys[q]; split(key, k, SUBSEP)
            printf "%s %s: batch %s, seqlen_q %s, seqlen_k %s, heads %s/%s, %s\n", \
                "hd " k[1], (k[2] ? "causal" : "non-causal"), k[4], k[5], k[6], k[7], k[8], k[3]
            nr = split(substr(runners[key], 2), rl, SUBSEP)
            has_fa3 = ((key, "fa3") in n)
            if (has_fa3) { fa3_ms = median(msl[key, "fa3"]); fa3_gf = median(gf[key, "fa3"]) }
            for (j = 1; j <= nr; ++j) {
                r = rl[j]; m = median(msl[key, r]); lo = hi = ms[key, r, 1]
                for (i = 2; i <= n[key, r]; ++i) {
                    if (ms[key, r, i] < lo) lo = ms[key, r, i]
                    if (ms[key, r, i] > hi) hi = ms[key, r, i]
                }
                spread = m > 0 ? 100 * (hi - lo) / m : 0
                ratio = "-"
                if (has_fa3 && r != "fa3") {
                    rlo = 1e30; rhi = 0; np = n[key, r] < n[key, "fa3"] ? n[key, r] : n[key, "fa3"]
                    for (i = 1; i <= np; ++i) {
                        x = ms[key, r, i] > 0 ? ms[key, "fa3", i] / ms[key, r, i] : 0
                        if (x < rlo) rlo = x
                        if (x > rhi) rhi = x
                    }
                    ratio = sprintf("%.3f (%.3f-%.3f)", m > 0 ? fa3_ms / m : 0, rlo, rhi)
                    g = median(gf[key, r])
                    if (fa3_gf > 0 && (g / fa3_gf > 1.01 || g / fa3_gf < 0.99))
                        ratio = ratio sprintf("  FLOPs differ: %.1f against fa3 %.1f GFLOP", \
                                              g, fa3_gf)
                }
                note = n[key, r] < repeats ? sprintf("  %d of %d repeats", n[key, r], repeats) : ""
                printf "%-4s %-10s %-17s %9.3f (%5.2f %%)  %8.1f  %s%s\n", k[1], \
                    (k[2] ? "causal" : "non-causal"), r, m, spread, median(tfl[key, r]), ratio, note
            }
        }
    }' "$csv"
}

# ---------------------------------------------------------------------------------------
# The end, also on an interrupt: the rows so far go under plots/data.

finish() {
    local interrupted=$1 el t_end rows device slug built
    trap - INT TERM
    if ((interrupted)); then stop_peers kill; else stop_peers; fi
    el=$((SECONDS - run_t0))
    ((interrupted)) && echo "note=interrupted after $el s at case $i of $total" >>"$meta_run"
    now_us t_end
    local all_us=$((t_end - t0_us)) st=${spent_us[stage]:-0} pe=${spent_us[peers]:-0}
    {
        echo "finished_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "elapsed_s=$el"
        echo "time_stage_programs_s=$(seconds_of "$st") (${spent_n[stage]:-0} runs)"
        echo "time_peers_s=$(seconds_of "$pe") (${spent_n[peers]:-0} requests; their start:" \
            "$(seconds_of "${spent_us[peers_start]:-0}") s)"
        echo "time_run_itself_s=$(seconds_of $((all_us - st - pe - ${spent_us[peers_start]:-0})))"
    } >>"$meta_run"
    exec {logfd}>&-
    rm -f "$stage_out" "$stage_csv"
    rows=$(($(wc -l <"$csv_run") - 1))
    if ((rows == 0)); then
        echo
        echo "No rows: no CSV written (log: $log)."
        rm -f "$csv_run"
    else
        built=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
                         $c["check"] != "peer" && !($c["commit"] in s) {
                             s[$c["commit"]]; l = l (l ? " " : "") $c["commit"] }
                         END { print l }' "$csv_run")
        if [[ -n $built && $built != *" "* && $commit == unknown ]]; then
            awk -F, -v OFS=, -v cm="$built" '
                 NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; print; next }
                 $c["check"] == "peer" { $c["commit"] = cm } { print }' "$csv_run" >"$csv_run.tmp"
            mv "$csv_run.tmp" "$csv_run"
            commit=$built
        elif [[ -n $built && $built != "$commit" ]]; then
            echo "note: the stage programs were built at commit $built, the tree is at $commit"
            echo "note=stage programs built at commit $built; tree at $commit" >>"$meta_run"
        fi
        if [[ -z $out ]]; then
            device=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "device") c = i; next }
                { print $c; exit }' "$csv_run")
            slug=$(printf '%s' "$device" | tr '[:upper:]' '[:lower:]' |
                sed 's/[^a-z0-9][^a-z0-9]*/-/g; s/^-//; s/-$//')
            out=plots/data/varlen_${commit}_${run_date}_${slug:-unknown}.csv
            [[ ! -e $out ]] || out=plots/data/varlen_${commit}_${run_id}_${slug:-unknown}.csv
        fi
        mkdir -p "$(dirname "$out")"
        cp "$csv_run" "$out"
        cp "$meta_run" "${out%.csv}.meta"
        echo
        echo "$rows rows: $out (sidecar ${out%.csv}.meta; log $log), $el s elapsed" \
            "(estimated $est_s s)"
        echo
        echo "varlen batch: $lengths_text; $dtype; medians over the repeats:"
        print_table "$out"
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
# The run.

now_us t0_us
run_t0=$SECONDS
i=0
now_us tp
start_peers
account peers_start "$tp"
echo "peers: $peers_line"
echo "peers=$peers_line" >>"$meta_run"
echo "log: $log"
trap 'echo; echo "varlen.sh: interrupted"; finish 1' INT TERM
n_entries=${#entries[@]}
np=${#peer_list[@]}
k_args=()
[[ -z $lengths_k ]] || k_args=(--seqlens-k "$lengths_k")
for ((r = 1; r <= repeats; ++r)); do
    backends=""
    for ((k = 0; k < np; ++k)); do backends+="${backends:+,}${peer_list[((k + r - 1) % np)]}"; done
    for cs in "${cases[@]}"; do
        read -r d c <<<"$cs"
        i=$((i + 1))
        h=$((2048 / d))
        if ((c)); then cname=causal; else cname=non-causal; fi
        case_name="hd $d $cname"
        args=(--seqlens-q "$lengths" ${k_args[@]+"${k_args[@]}"} --heads "$h" --head-dim "$d"
            --dtype "$dtype")
        ((c)) && args+=(--causal)
        cells=""
        for ((k = 0; k < n_entries; ++k)); do
            read -r kind key <<<"${entries[((k + r - 1) % n_entries)]}"
            if [[ $kind == P ]]; then
                meta_arg=()
                ((i == 1)) && meta_arg=(--meta "$meta_run")
                peer_case=$case_name
                now_us tp
                ask_peers --seqlens-q "$lengths" ${k_args[@]+"${k_args[@]}"} --heads "$h" \
                    --head-dim "$d" --causal "$c" --dtype "$dtype" --iters "$iters" \
                    --warmup "$warmup" --spin-us "$spin" --backends "$backends" \
                    --csv "$csv_run" --commit "$commit" ${meta_arg[@]+"${meta_arg[@]}"}
                account peers "$tp"
                cells+=$peer_cells
            else
                run_stage "$key" "$case_name" "${args[@]}"
                [[ -n $stage_cell ]] && cells+=" $stage_cell"
            fi
        done
        if ((i == 1 && ${#stage_ids[@]})); then
            all_nogpu=1
            for id in "${stage_ids[@]}"; do
                [[ ${stage_state[$id]:-} == nogpu ]] || all_nogpu=0
            done
            if ((all_nogpu)); then
                echo "no GPU: stages skipped (${no_gpu_reason:-exit 77})"
                echo "note=no GPU: stages skipped (${no_gpu_reason:-exit 77})" >>"$meta_run"
            fi
        fi
        echo "[case $i/$total, $((SECONDS - run_t0)) s] repeat $r/$repeats, $case_name" \
            "(heads $h):${cells:- nothing measured}"
    done
done
finish 0
