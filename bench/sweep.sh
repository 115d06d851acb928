#!/usr/bin/env bash
# sweep.sh — the FlashAttention-3 paper's sweep on this GPU, forward (the default) or
# backward or both: the stage programs and the peers (FlashAttention-3 itself and the
# PyTorch SDPA backends, bench/peers.py) at every point, interleaved, every runner timed
# the same way.
#
#   bench/sweep.sh [options]
#
# The points (FA3 paper, section 4.1): seqlen 512, 1k, 2k, 4k, 8k, 16k with
# batch = 16384/seqlen, heads = 2048/head_dim, head_dim 64, 128, 256, causal and not,
# bf16. At each point every stage runs `build/bin/stage_<id> --bench --csv FILE --iters N
# --warmup W --spin-us S` and, seconds apart, the peers are timed the same way (one
# request to one Python process: fa3, sdpa_flash, sdpa_cudnn, sdpa_efficient); the order
# of the runners, and of the peers inside their request, rotates from one repeat to the
# next. The whole sweep is repeated R times in that interleaved order (DESIGN.md: a claim
# needs three repeats and a difference larger than their spread). Each repeat begins
# with the reference rows: a bf16 torch.matmul 8192³ and a device-to-device copy.
#
# Timing (docs/benchmarks.md, "How the runners are timed"): every runner, stage or peer,
# times each call after an L2 flush and a spin of --spin-us microseconds that keeps the
# GPU busy while the host records the start event and enqueues the call, so that host
# launch latency is not timed as kernel time; the flush and the spin stay outside the
# timed interval. One --spin-us goes to the stage programs and to the peers. A stage
# program built before it had --spin-us (its --help does not list it: an old baseline)
# runs without it, and a note in the .meta says so; the sweep then needs --spin-us 0
# (every runner timed alike, without the spin), and refuses otherwise (exit 2).
#
# The backward (--direction bwd, or both): a stage whose `--help` says `backward: yes`
# runs with `--bench --bwd`, which times the forward and then the backward alone and
# writes a fwd row and a bwd row (both kept; a bwd row's FLOPs are 2.5 times the
# forward's); a stage without a backward is not run at bwd (a line says so; with both it
# runs its forward). The peers time their backward alone (the forward once, then
# torch.autograd.grad timed); FA3's fa3-fwd build has none (one line says so).
#
# Comparing two builds (--baseline DIR[:TAG]): the selected stages also run from another
# build's DIR/bin (an older commit's build, say), interleaved in the same rotation, and
# their rows are marked in the stage column: 08_intra_wg_overlap@base. bench/compare.sh
# CSV base prints, per point, new against baseline; bench/bounds.sh, bench/plot.sh and
# scripts/gen_readme_results.sh leave marked rows out unless given --tagged.
# Checking the spin (--spin-compare LIST): every runner also runs with each of these
# spins at every point, in the same rotation, its rows marked @spin<N> (bench/compare.sh
# CSV spin0: what the spin changes; spin 2·S against S: whether S is enough).
#
# Duration. Where time goes, measured on one H200 (the .meta files of plots/data): a
# stage program costs about 0.35 s per run, little of it its timed calls (13 calls of
# 0.2 to 7 ms), the rest its start, CUDA context, inputs (drawn on the GPU when the run
# only times) and exit; a baseline's (--baseline, usually a build from before the GPU
# fill, which drew its inputs on the host) about 1.3 s; a peers request about
# 0.07 s plus 0.05 s per backend (the forward; about 0.2 s + 0.16 s per backend for the
# backward); a stage run with --bwd about 1.4 s. The sweep prints its estimate before it
# starts (--dry-run prints it and the plan, and runs nothing), and writes into the .meta
# how long the stage programs, the peers and the sweep itself took. Estimates (--dry-run)
# on an H200, all
# four peers, 3 repeats unless --quick:
#   --quick --stages 03_flash2,...,08_intra_wg_overlap (six stages)  about 0:21
#   --stages 03_flash2 (every point)            about 1:16
#   --stages 03_flash2,...,08_intra_wg_overlap  about 4:25 (measured 2026-12-02: 78 and
#                                               91 s for two of its three --part runs)
#   the same with --baseline OLD (a build from before the GPU fill and the spin, so
#     --spin-us 0 --no-peers)                   about 17:49: 3 runs of 5:56 (measured
#                                               353-363 s each)
#   --direction bwd --stages 03_flash2 --head-dims 64,128   about 2:51 (measured 2:32)
#   --stages 08_intra_wg_overlap --seqlens 512,16k --head-dims 128 --spin-compare 0,2000
#                                               about 0:32 (the spin's evidence)
# A sweep split into runs of under 8 minutes each: --part 1/N … --part N/N (the same
# options otherwise) measures every N-th point in each run, all repeats interleaved as in
# one run; bench/join_sweeps.sh OUT.csv PART1.csv … joins their CSVs, and the joined
# .meta says how. --max-minutes M (default 8) sets the run length the sweep suggests a
# split for.
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
#   --heads H         the query heads at every head_dim (default 2048/head_dim, the paper's
#                     hidden size 2048; e.g. --heads 16 --head-dims 96,192, which 2048 does
#                     not divide by)
#   --causal 0|1|both default both
#   --repeats R       default 3
#   --iters N         timed calls per point and runner, median reported (default 10;
#                     1 to 1024, as the stage programs take it)
#   --warmup W        untimed calls before them (default 3; 0 to 100000)
#   --spin-us S       the spin before each timed call, microseconds (default 1000; 0: none,
#                     the old method), for the stage programs and the peers alike
#   --spin-compare LIST  also time every runner with each of these spins (e.g. 0,2000;
#                     each once, not the run's own), rows marked @spin<N>
#   --peers LIST      which peers, of fa3,flash,cudnn,efficient (default all four; none:
#                     as --no-peers). fa3 is skipped with one line where no FA3 imports.
#   --baseline DIR[:TAG]  also run the selected stages from DIR/bin, rows marked @TAG
#                     (default tag: base); may be given more than once (distinct tags)
#   --part K/N        run every N-th point, from the K-th (a sweep split into N runs)
#   --max-minutes M   the run length the estimate suggests a split for (default 8)
#   --dry-run         print the plan and the estimate; run nothing
#   --check           also run the stages' --check (slower: the previous stage and the
#                     fp64 reference run too; not in the estimate)
#   --quick           a smoke test: seqlen 2k, head_dim 64/128/256, causal both, one
#                     repeat, --iters 5 --warmup 2 (options after --quick still apply)
#   --all-points      run stages 01 and 02 at seqlen >= 8192 too
#   --no-peers        stages only
#   --python PY       the Python with PyTorch (default: $PYTHON or python3)
#   --build DIR       the build with bin/stage_* (default: build)
#   --out FILE        the CSV (default: plots/data/fa3_<tag>_<UTC date>_<device>.csv,
#                     tag fwd, bwd or fwdbwd by --direction, _part<K>of<N> added for a
#                     part; a time-stamped name when that exists: one CSV per run)
#   --dtype bf16|fp16|e4m3  default bf16 (the paper's figures are bf16). A stage whose
#                     --help lists its dtypes (the "dtype:" line) and not this one is not
#                     run, with one line saying so (stages 01-09 at e4m3, 10 at bf16). At
#                     e4m3 the peers are FA3 alone (bench/peers.py --dtype e4m3: Q, K, V
#                     converted from bf16 once before the timed calls, descales of 1, V in
#                     K's layout, bf16 O); the SDPA backends have no e4m3 path (one line).
#   --stage-args ARGS extra arguments for every stage run in the sweep's --dtype, one
#                     string split at blanks (no quoting inside), e.g. for stage 10:
#                     --stage-args "--fp8-scaling per-head" (V row-major, transposed in
#                     its kernel) or "--fp8-vt --fp8-scaling per-head" (V given
#                     transposed). Recorded in the .meta (stage_args=); the CSV has no
#                     column for them (its columns are the stage programs',
#                     FX_CSV_HEADER), so one sweep has one set. The options
#                     the sweep sets itself (sizes, --dtype, --causal, the modes, --csv,
#                     --iters, --warmup, --spin-us) are refused here.
#   --beside DTYPE:LIST  also run these stages (and fa3, if named) in DTYPE at every point,
#                     in the same rotation, rows marked ID@DTYPE (09_persistent@bf16,
#                     fa3@bf16), without --stage-args: e.g. stage 09 in bf16 beside stage 10
#                     in e4m3, measured interleaved in one run (DESIGN.md: a claim needs
#                     that), then bench/compare.sh CSV --versus 09_persistent@bf16 gives
#                     the FP8 speed-up per point. DTYPE differs from --dtype; not with
#                     --spin-compare.
#
# What is timed, e4m3 included: the stage's forward call alone (the kernels the stage
# launches for one forward), after the flush and the spin. A stage program draws and
# prepares its inputs once, before its timed calls: at e4m3 that is the host's fp32 draw,
# the quantization to e4m3 with its descales (common/fx_fp8_case.c, fx_fp8_prepare), V's
# transpose with --fp8-vt and the copies to the device, all outside the interval. Without
# --fp8-vt stage 10 transposes a row-major V in its kernel, inside the time, as FA3 does;
# with --fp8-vt it is timed without the V transpose that FA3 does inside its kernel (its
# fp8 forward takes V in K's layout): a note in the .meta says so.
#
# Writes the CSV (FX_CSV_HEADER's columns, common/; the peers' rows in the same columns
# with check = peer), a sidecar <csv minus .csv>.meta (versions, clocks, the command,
# direction=, the spin, FA3's version and build switches, what was skipped and why, and
# where the time went) and a log of every program's output in build/sweep/. Then:
# bench/bounds.sh CSV, bench/plot.sh CSV, scripts/gen_readme_results.sh CSV
# (docs/benchmarks.md); the last two take the direction from the .meta.
# Without a GPU the stages exit 77: the sweep says "no GPU: stages skipped" and still
# runs the peers (which need PyTorch and a GPU, and say so).
# Exit status: 0; 1 when a stage or the peers failed, or when the stages found no GPU
# and FX_REQUIRE_GPU=1; 2 on bad usage (checked before anything runs: the options, the
# stages, --iters 1..1024 and --warmup 0..100000 as the stage programs take them, that
# the CSV can be written), or when every stage run was refused (the CSV keeps the peers'
# rows).
set -euo pipefail
# bench/lib.sh: fx_writable, fx_csv_bad_row, fx_sweep_dirs, fx_csv_header, fx_tree_commit
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
die() {
    echo "sweep.sh: $*" >&2
    exit 2
}
# needs WHAT "$@": the option $1 has its value $2, else a usage error (exit 2).
needs() {
    local what=$1
    shift
    if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs $what"; fi
}

# The default spin, microseconds: bench/peers.py's DEFAULT_SPIN_US (where the reason is).
SPIN_DEFAULT=1000
# Seconds, measured on one H200 (header): a stage run, forward; a baseline's; with --bwd;
# a peers request (fixed part and per backend), forward and backward; the reference rows;
# the peers' start (importing torch and FA3). 2026-12-02, 3a1d307: 0.30-0.36 s a forward
# run, 1.3 s for d8558c5's, 3.7-5.2 s the peers' start (plots/data/*2026-12-02*.meta).
COST_STAGE_FWD=0.35 COST_STAGE_FWD_BASELINE=1.3 COST_STAGE_BWD=1.4
COST_PEERS_FWD=0.07 COST_PEER_FWD=0.05 COST_PEERS_BWD=0.2 COST_PEER_BWD=0.16
COST_REF=1.5 COST_PEERS_START=5
# An e4m3 stage run (stage 10): its inputs are drawn in fp32 on the host, quantized and
# copied (fx_fp8_case.c), where a bf16 run that only times draws them on the GPU. Measured
# 0.57 s a run at seqlen 8k on an H100 (plots/data/fp8_fwd_one_repeat_7908c0a_*.meta,
# time_stage_programs_s); kept at 0.6.
COST_STAGE_FWD_E4M3=0.6

# ---------------------------------------------------------------------------------------
# Options.

stages_opt="" seqlens="512,1k,2k,4k,8k,16k" head_dims="64,128,256" causal_opt=both heads_opt=""
repeats=3 iters=10 warmup=3 check=0 all_points=0 peers=1 direction=fwd
python=${PYTHON:-python3} build=build out="" dtype=bf16
spin=$SPIN_DEFAULT spin_compare="" peers_opt="fa3,flash,cudnn,efficient" part="" max_minutes=8
dry_run=0 stage_args_opt="" beside=""
baselines=()
# The command as given, a value with blanks in quotes (--stage-args "--fp8-vt ..."), so that
# the .meta's command= line can be run again as it stands.
command_line="bench/sweep.sh"
for a in "$@"; do
    if [[ $a == *[[:space:]]* ]]; then command_line+=" \"$a\""; else command_line+=" $a"; fi
done
while (($#)); do
    case $1 in
        --direction) needs "fwd, bwd or both" "$@"; direction=$2; shift ;;
        --stages) needs "a list" "$@"; stages_opt=$2; shift ;;
        --seqlens) needs "a list" "$@"; seqlens=$2; shift ;;
        --head-dims) needs "a list" "$@"; head_dims=$2; shift ;;
        --heads)
            needs "a count" "$@"
            [[ $2 =~ ^[1-9][0-9]{0,3}$ ]] || die "--heads needs a count from 1 to 9999, not '$2'"
            heads_opt=$2
            shift ;;
        --causal) needs "0, 1 or both" "$@"; causal_opt=$2; shift ;;
        --repeats) needs "a number" "$@"; repeats=$2; shift ;;
        --iters) needs "a number" "$@"; iters=$2; shift ;;
        --warmup) needs "a number" "$@"; warmup=$2; shift ;;
        --spin-us) needs "microseconds" "$@"; spin=$2; shift ;;
        --spin-compare) needs "a list of microseconds" "$@"; spin_compare=$2; shift ;;
        --peers) needs "a list" "$@"; peers_opt=$2; shift ;;
        --baseline) needs "DIR or DIR:TAG" "$@"; baselines+=("$2"); shift ;;
        --part) needs "K/N" "$@"; part=$2; shift ;;
        --max-minutes) needs "a number" "$@"; max_minutes=$2; shift ;;
        --dry-run) dry_run=1 ;;
        --check) check=1 ;;
        --quick) seqlens=2k head_dims=64,128,256 causal_opt=both repeats=1 iters=5 warmup=2 ;;
        --all-points) all_points=1 ;;
        --no-peers) peers=0 ;;
        --python) needs "a program" "$@"; python=$2; shift ;;
        --build) needs "a directory" "$@"; build=$2; shift ;;
        --out) needs "a file" "$@"; out=$2; shift ;;
        --dtype) needs "bf16, fp16 or e4m3" "$@"; dtype=$2; shift ;;
        --stage-args) needs "the arguments, as one string" "$@"; stage_args_opt=$2; shift ;;
        --beside)
            needs "DTYPE:LIST" "$@"
            [[ -z $beside ]] || die "--beside is given once (one DTYPE:LIST)"
            beside=$2
            shift ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option '$1' (bench/sweep.sh --help)" ;;
    esac
    shift
done

is_count() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 > 0)); }
is_spin() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 <= 100000)); }  # the harness's FX_MAX_SPIN_US
is_count "$repeats" || die "--repeats must be a positive integer"
# The stage programs' ranges (fx_options.h: FX_MAX_ITERS 1024, FX_MAX_WARMUP 100000), checked
# here so that a run is not refused at every point.
is_count "$iters" && ((10#$iters <= 1024)) ||
    die "--iters must be a whole number from 1 to 1024 (the stage programs' FX_MAX_ITERS)"
iters=$((10#$iters))
[[ $warmup =~ ^[0-9]+$ ]] && ((10#$warmup <= 100000)) ||
    die "--warmup must be a whole number from 0 to 100000 (the stage programs' FX_MAX_WARMUP)"
warmup=$((10#$warmup))
is_spin "$spin" || die "--spin-us must be a whole number of microseconds, 0 to 100000"
spin=$((10#$spin))
is_count "$max_minutes" || die "--max-minutes must be a positive integer"
is_dtype() { [[ $1 == bf16 || $1 == fp16 || $1 == e4m3 ]]; }
is_dtype "$dtype" || die "--dtype must be bf16, fp16 or e4m3"
# --stage-args: split at blanks; what the sweep sets itself would be given twice (and the
# later one would win in the stage program, silently), so it is refused.
stage_args=()
read -r -a stage_args <<<"$stage_args_opt"
for w in ${stage_args[@]+"${stage_args[@]}"}; do
    case ${w%%=*} in
        --batch | --seqlen | --seqlen-q | --seqlen-k | --seqlens-q | --seqlens-k | --seqused-k | \
            --heads | --heads-q | --heads-kv | --head-dim | --dtype | --causal | --bench | --bwd | \
            --check | --csv | --iters | --warmup | --spin-us | --matrix | --cpu | --repeat | \
            --fuzz | --save | --load | --help | -h)
            die "--stage-args: $w is set by the sweep itself (give it as a sweep option, or" \
                "not at all)" ;;
    esac
done
# --beside DTYPE:LIST
beside_dtype="" beside_ids=() beside_fa3=0
if [[ -n $beside ]]; then
    [[ $beside == *:?* ]] || die "--beside needs DTYPE:LIST (e.g. bf16:09_persistent,fa3)"
    beside_dtype=${beside%%:*}
    is_dtype "$beside_dtype" || die "--beside $beside: '$beside_dtype' is not bf16, fp16 or e4m3"
    [[ $beside_dtype != "$dtype" ]] ||
        die "--beside $beside: $beside_dtype is the sweep's own --dtype (give another)"
    IFS=, read -r -a beside_items <<<"${beside#*:}"
    declare -A beside_seen=()
    for id in "${beside_items[@]}"; do
        [[ $id =~ ^[A-Za-z0-9_.-]+$ ]] || die "--beside: '$id' is not a stage id (or fa3)"
        [[ -z ${beside_seen[$id]:-} ]] || die "--beside names '$id' twice"
        beside_seen[$id]=1
        if [[ $id == fa3 ]]; then beside_fa3=1; else beside_ids+=("$id"); fi
    done
    [[ -z $spin_compare ]] ||
        die "--beside and --spin-compare together are not supported (run them apart)"
fi
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

if [[ -n $out ]]; then
    for f in "$out" "${out%.csv}.meta"; do
        fx_writable --mkdir "$f" ||
            die "--out $out: cannot write $f (checked before measuring anything)"
    done
else
    fx_writable --mkdir plots/data/fa3_probe.csv ||
        die "cannot write into plots/data (--out FILE elsewhere)"
fi

# The spins: the run's own first, then --spin-compare's; the run's own or one given twice
# is refused (it would be timed twice, its rows doubled or dropped).
spins=("$spin")
if [[ -n $spin_compare ]]; then
    IFS=, read -r -a extra_spins <<<"$spin_compare"
    for s in "${extra_spins[@]}"; do
        is_spin "$s" ||
            die "--spin-compare: '$s' is not a whole number of microseconds (0 to 100000)"
        s=$((10#$s))
        ((s != spin)) ||
            die "--spin-compare: $s us is the run's own spin (--spin-us $spin): give the" \
                "others"
        for t in "${spins[@]}"; do ((t != s)) || die "--spin-compare names $s twice"; done
        spins+=("$s")
    done
fi
# spin_mark VAR SPIN: the mark of a spin's rows: none for the run's own spin, spin<N> for
# the others (into VAR: no subshell, as in every per-run helper below).
spin_mark() { if (($2 == spin)); then printf -v "$1" ''; else printf -v "$1" 'spin%s' "$2"; fi; }

# The peers: a subset of fa3,flash,cudnn,efficient, in the order given.
peer_list=()
if [[ $peers_opt == none ]]; then
    peers=0
else
    IFS=, read -r -a peer_items <<<"$peers_opt"
    declare -A peer_seen=()
    for p in "${peer_items[@]}"; do
        case $p in
            fa3 | flash | cudnn | efficient) ;;
            *) die "--peers: '$p' is not one of fa3, flash, cudnn, efficient (or none)" ;;
        esac
        [[ -z ${peer_seen[$p]:-} ]] || die "--peers names '$p' twice"
        peer_seen[$p]=1
        peer_list+=("$p")
    done
    ((${#peer_list[@]})) ||
        die "--peers needs at least one of fa3, flash, cudnn, efficient (or none)"
fi
# Notes said before the first point (and in --dry-run's plan), kept in the .meta.
base_notes=()
# e4m3: FA3 is the only peer with an fp8 forward (bench/peers.py); the SDPA backends would
# print a skip at every point, so they are left out here, said once.
if ((peers)) && [[ $dtype == e4m3 ]]; then
    e4m3_peers=() no_e4m3=""
    for p in "${peer_list[@]}"; do
        if [[ $p == fa3 ]]; then e4m3_peers+=("$p"); else no_e4m3+="${no_e4m3:+,}$p"; fi
    done
    [[ -z $no_e4m3 ]] ||
        base_notes+=("peers $no_e4m3 not run at e4m3: SDPA has no e4m3 path (FA3 alone runs fp8)")
    peer_list=(${e4m3_peers[@]+"${e4m3_peers[@]}"})
fi
# The peers' process runs for the main request (peer_list) and for fa3 in --beside's dtype.
main_peers=0 beside_peer=0
((peers && ${#peer_list[@]})) && main_peers=1
if ((beside_fa3)); then
    if ((peers)); then beside_peer=1; else base_notes+=("fa3@$beside_dtype not run: --no-peers"); fi
fi
((main_peers || beside_peer)) || peers=0

# --part K/N
part_k=1 part_n=1
if [[ -n $part ]]; then
    [[ $part =~ ^([0-9]+)/([0-9]+)$ ]] || die "--part must be K/N (e.g. 1/2)"
    part_k=$((10#${BASH_REMATCH[1]})) part_n=$((10#${BASH_REMATCH[2]}))
    ((part_n >= 1 && part_k >= 1 && part_k <= part_n)) || die "--part $part: K must be 1 to N"
fi

# "512,1k,16K" -> sizes=(512 1024 16384)
sizes=()
# A size given twice is refused: its rows would read as more repeats of one point.
parse_sizes() {
    local item n t
    local -a items=()
    sizes=()
    IFS=, read -r -a items <<<"$1"
    for item in "${items[@]}"; do
        case $item in
            *[kK]) n=${item%[kK]}; [[ $n =~ ^[0-9]+$ ]] && n=$((10#$n * 1024)) ;;
            *) n=$item ;;
        esac
        if ! [[ $n =~ ^[0-9]+$ ]] || ((10#$n == 0)); then die "'$item' in '$1' is not a size"; fi
        n=$((10#$n))
        for t in ${sizes[@]+"${sizes[@]}"}; do
            ((t != n)) || die "'$item' in '$1' names $n twice"
        done
        sizes+=("$n")
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
    [[ -n $heads_opt ]] || ((2048 % d == 0)) ||
        die "head_dim $d does not divide 2048 (heads = 2048/head_dim): give --heads"
done
# The query heads at head_dim $1.
heads_of() { echo "${heads_opt:-$((2048 / $1))}"; }

# ---------------------------------------------------------------------------------------
# The runners. A stage runner's key: the stage id (this build) or ID@TAG (a baseline's).

built_list() {  # the stage ids built in DIR/bin, comma-separated
    local bin list=""
    for bin in "$1"/bin/stage_*; do
        [[ -f $bin && -x $bin ]] && list+="${list:+,}${bin##*/stage_}"
    done
    printf '%s' "$list"
}
stage_ids=()
if [[ -n $stages_opt ]]; then
    IFS=, read -r -a stage_ids <<<"$stages_opt"
    declare -A stage_seen=()
    for id in "${stage_ids[@]}"; do
        [[ $id =~ ^[A-Za-z0-9_.-]+$ ]] || die "--stages: '$id' is not a stage id"
        [[ -z ${stage_seen[$id]:-} ]] || die "--stages names '$id' twice"
        stage_seen[$id]=1
        [[ ! -x $build/bin/stage_$id ]] || continue
        b=$(built_list "$build")
        # --dry-run without a build plans the stages of the tree (stages/<id>/), unbuilt.
        if ((dry_run)) && [[ -z $b ]]; then
            if [[ ! -d stages/$id ]]; then
                tree=""
                for d in stages/[0-9]*/; do d=${d%/} && tree+="${tree:+,}${d##*/}"; done
                die "--stages: no stage '$id' (not built, and stages/ has: ${tree:-none})"
            fi
            continue
        fi
        die "no program $build/bin/stage_$id (built: ${b:-none})"
    done
else
    for bin in "$build"/bin/stage_*; do
        [[ -f $bin && -x $bin ]] && stage_ids+=("${bin##*/stage_}")
    done
    ((${#stage_ids[@]})) || echo "sweep.sh: no stage programs in $build/bin: peers only" \
        "(build first: cmake -S . -B build && cmake --build build -j)"
fi

# --baseline DIR[:TAG]: the same stage ids from DIR/bin.
declare -A runner_bin=() runner_id=() runner_mark=() runner_dtype=() runner_base=()
base_keys=()
declare -A tag_seen=()
nb=0
for spec in ${baselines[@]+"${baselines[@]}"}; do
    nb=$((nb + 1))
    bdir=$spec btag=base
    if [[ $spec == *:* ]]; then bdir=${spec%:*} btag=${spec##*:}; fi
    ((nb == 1)) || [[ $spec == *:* ]] || btag=base$nb
    [[ $btag =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] ||
        die "--baseline $spec: the tag '$btag' must be letters, digits, '.', '_', '-'"
    [[ -z ${tag_seen[$btag]:-} ]] || die "--baseline: the tag '$btag' is given twice"
    tag_seen[$btag]=1
    if [[ ! -d $bdir/bin ]]; then
        ((dry_run)) || die "--baseline $spec: no directory $bdir/bin"
        echo "sweep.sh: --baseline $spec: no directory $bdir/bin (planned anyway; a run" \
            "refuses it)" >&2
    fi
    for id in ${stage_ids[@]+"${stage_ids[@]}"}; do
        if [[ -x $bdir/bin/stage_$id ]] || ((dry_run)); then
            key="$id@$btag"
            runner_bin[$key]=$bdir/bin/stage_$id runner_id[$key]=$id runner_mark[$key]=$btag
            runner_base[$key]=1
            base_keys+=("$key")
        else
            base_notes+=("baseline $bdir has no stage_$id: $id@$btag not run")
        fi
    done
done
for key in ${base_keys[@]+"${base_keys[@]}"}; do runner_dtype[$key]=$dtype; done
for id in ${stage_ids[@]+"${stage_ids[@]}"}; do
    runner_bin[$id]=$build/bin/stage_$id runner_id[$id]=$id runner_mark[$id]=""
    runner_dtype[$id]=$dtype
done
# --beside DTYPE:LIST: this build's stages in another dtype, marked ID@DTYPE.
beside_keys=()
if [[ -n $beside_dtype ]]; then
    [[ -z ${tag_seen[$beside_dtype]:-} ]] ||
        die "--beside $beside_dtype and --baseline ...:$beside_dtype would mark rows alike"
    for id in ${beside_ids[@]+"${beside_ids[@]}"}; do
        if [[ ! -x $build/bin/stage_$id ]] && ! { ((dry_run)) && [[ -d stages/$id ]]; }; then
            die "--beside: no program $build/bin/stage_$id (built: $(built_list "$build"))"
        fi
        key="$id@$beside_dtype"
        runner_bin[$key]=$build/bin/stage_$id runner_id[$key]=$id runner_mark[$key]=$beside_dtype
        runner_dtype[$key]=$beside_dtype
        beside_keys+=("$key")
    done
fi

# Each program's --help, read once: whether it has a backward and a --spin-us, and its
# dtypes (the capabilities' "dtype:" line; a build without one is run in any dtype).
declare -A has_bwd=() has_spin=() no_dtype_of=()
run_keys=() no_bwd_keys=() no_spin_keys=() assumed_keys=()
for key in ${stage_ids[@]+"${stage_ids[@]}"} ${base_keys[@]+"${base_keys[@]}"} \
    ${beside_keys[@]+"${beside_keys[@]}"}; do
    bin=${runner_bin[$key]}
    if [[ -x $bin ]]; then
        help_text=$("$bin" --help 2>&1 || true)
    else  # --dry-run without a build: assumed to have a backward and a --spin-us
        help_text=$'  backward: yes\n  --spin-us N'
        assumed_keys+=("$key")
    fi
    dtypes_re='(^|'$'\n'')[[:space:]]*dtype:[[:space:]]*([a-z0-9/]+)'
    if [[ $help_text =~ $dtypes_re ]] &&
        [[ /${BASH_REMATCH[2]}/ != */${runner_dtype[$key]}/* ]]; then
        # One line per dtype for all such stages (at e4m3, stages 01-09 together).
        no_dtype_of[${runner_dtype[$key]}]+="${no_dtype_of[${runner_dtype[$key]}]:+, }$key"
        no_dtype_of[${runner_dtype[$key]}]+=" (${BASH_REMATCH[2]})"
        continue
    fi
    if [[ $help_text =~ (^|$'\n')[[:space:]]*backward:[[:space:]]*yes ]]; then
        has_bwd[$key]=1
    elif [[ $direction != fwd ]]; then
        no_bwd_keys+=("$key")
        [[ $direction == bwd ]] && continue
    fi
    if [[ $help_text == *--spin-us* ]]; then has_spin[$key]=1; else no_spin_keys+=("$key"); fi
    run_keys+=("$key")
done

for dt in "${!no_dtype_of[@]}"; do
    dt_note="not run at $dt, which their --help does not list (its dtype: line in brackets):"
    base_notes+=("$dt_note ${no_dtype_of[$dt]}")
done

# A runner without --spin-us (a baseline built before it) is timed without the spin; so that
# old and new are timed alike, the comparison must then run every runner at --spin-us 0.
if ((${#no_spin_keys[@]})) && [[ $spin != 0 ]]; then
    die "${no_spin_keys[*]}: no --spin-us in its --help (a build from before it): time the" \
        "comparison alike, with --spin-us 0 for every runner (the peers then carry their" \
        "launch latency: compare stages with stages)"
fi

# Stages 01 and 02 are slow at seqlen >= 8192 (header): not run there without --all-points.
slow_from=8192
bwd_more=""
[[ $direction == fwd ]] || bwd_more=", for the forward; its backward adds about 2.8 times that"
slow_reason() {
    case $1 in
        01_naive)
            echo "S (fp32) and P of every (batch, head) live in device memory, 13-52 GB at 16k," \
                "and its causal calls cost as much as the full ones:" \
                "about 2.5 more minutes over 3 repeats, estimated${bwd_more}" ;;
        02_flash1)
            echo "one thread block per (batch, head): 8-64 blocks for 132 SMs at 8k-16k," \
                "up to about 2 s a call: about 5 more minutes over 3 repeats," \
                "estimated from its measured 4k rate${bwd_more}" ;;
        *) echo "" ;;
    esac
}
declare -A is_slow_id=()
for key in ${run_keys[@]+"${run_keys[@]}"}; do
    id=${runner_id[$key]}
    [[ -n $(slow_reason "$id") ]] && is_slow_id[$id]=1
done
is_slow_point() { ((!all_points && $2 >= slow_from)) && [[ -n ${is_slow_id[$1]:-} ]]; }

# ---------------------------------------------------------------------------------------
# The points of this run (every N-th from the K-th with --part K/N).

all_points_list=()
for d in "${hd_list[@]}"; do
    for c in "${causals[@]}"; do
        for s in "${seqlen_list[@]}"; do
            all_points_list+=("$d $c $s")
        done
    done
done
points=()
for ((j = 0; j < ${#all_points_list[@]}; ++j)); do
    ((j % part_n == part_k - 1)) && points+=("${all_points_list[j]}")
done
((${#points[@]})) ||
    die "--part $part: no point falls in this part (${#all_points_list[@]} points in all)"
total=$((${#points[@]} * repeats))
max_seqlen=0
for p in "${points[@]}"; do
    read -r _ _ s <<<"$p"
    ((s > max_seqlen)) && max_seqlen=$s
done

# The runner entries of a point: each stage runner and the peers, at each spin.
entries=()
for sp in "${spins[@]}"; do
    for key in ${run_keys[@]+"${run_keys[@]}"}; do
        entries+=("S $sp $key")
    done
    ((main_peers)) && entries+=("P $sp")
    ((beside_peer)) && entries+=("B $sp")
done

# The estimate, in milliseconds: from the costs above (COST_*).
ms_of() { local x=$1; printf '%d' "$(awk -v x="$x" 'BEGIN { printf "%d", x * 1000 + 0.5 }')"; }
c_sf=$(ms_of $COST_STAGE_FWD) c_sfb=$(ms_of $COST_STAGE_FWD_BASELINE) c_sb=$(ms_of $COST_STAGE_BWD)
c_pf=$(ms_of $COST_PEERS_FWD) c_pf1=$(ms_of $COST_PEER_FWD)
c_pb=$(ms_of $COST_PEERS_BWD) c_pb1=$(ms_of $COST_PEER_BWD)
c_ref=$(ms_of $COST_REF) c_start=$(ms_of $COST_PEERS_START) c_s8=$(ms_of $COST_STAGE_FWD_E4M3)
estimate_ms() {  # estimate_ms N_POINTS_SUBSET...: the run's estimate over these points
    local est=0 e kind sp key id s np=${#peer_list[@]} pt
    for pt in "$@"; do
        read -r _ _ s <<<"$pt"
        for e in "${entries[@]}"; do
            read -r kind sp key <<<"$e"
            if [[ $kind == B ]]; then  # fa3 alone, in --beside's dtype
                est=$((est + c_pf + c_pf1))
            elif [[ $kind == P ]]; then
                case $direction in
                    fwd) est=$((est + c_pf + np * c_pf1)) ;;
                    bwd) est=$((est + c_pb + np * c_pb1)) ;;
                    both) est=$((est + c_pf + np * c_pf1 + c_pb + np * c_pb1)) ;;
                esac
            else
                id=${runner_id[$key]}
                is_slow_point "$id" "$s" && continue
                if [[ $direction != fwd && -n ${has_bwd[$key]:-} ]]; then
                    est=$((est + c_sb))
                elif [[ -n ${runner_base[$key]:-} ]]; then
                    est=$((est + c_sfb))
                elif [[ ${runner_dtype[$key]} == e4m3 ]]; then
                    est=$((est + c_s8))
                else
                    est=$((est + c_sf))
                fi
            fi
        done
    done
    est=$((est * repeats))
    ((peers)) && est=$((est + repeats * c_ref + c_start))  # the reference rows: once a repeat
    printf '%d' "$est"
}
fmt_time() { printf -v "$1" '%d:%02d' $(($2 / 60)) $(($2 % 60)); }  # fmt_time VAR SECONDS
est_text="" el_text="" left_text="" tp=0 t0_us=0  # set through printf -v
est_ms=$(estimate_ms "${points[@]}")
fmt_time est_text $(((est_ms + 500) / 1000))
split_hint=""
if [[ -z $part ]] && ((est_ms > max_minutes * 60000)); then
    whole_ms=$(estimate_ms "${all_points_list[@]}")
    fixed_ms=0  # what each run pays whatever its points: the peers' start, the reference rows
    ((peers)) && fixed_ms=$((repeats * c_ref + c_start))
    n_parts=1
    while (((whole_ms - fixed_ms) / n_parts + fixed_ms > max_minutes * 60000)); do
        n_parts=$((n_parts + 1))
    done
    fmt_time part_text $((((whole_ms - fixed_ms) / n_parts + fixed_ms + 500) / 1000))
    split_hint="more than $max_minutes minutes: split it into $n_parts runs of about $part_text"
    split_hint+=" each: the same command with --part 1/$n_parts, ..., --part $n_parts/$n_parts,"
    split_hint+=" then bench/join_sweeps.sh OUT.csv PART1.csv ..."
fi

case $direction in
    fwd) what="FA3 forward sweep" ;;
    bwd) what="FA3 backward sweep" ;;
    both) what="FA3 forward and backward sweep" ;;
esac
part_text=""
if [[ -n $part ]]; then
    part_text=" (part $part_k of $part_n: points $part_k, $((part_k + part_n)), ..."
    part_text+=" of ${#all_points_list[@]})"
fi
runner_names=""
for key in ${run_keys[@]+"${run_keys[@]}"}; do runner_names+="${runner_names:+ }$key"; done
peer_text="none"
((main_peers)) && peer_text=$(IFS=,; printf '%s' "${peer_list[*]}")
if ((beside_peer)); then
    if ((main_peers)); then peer_text+=",fa3@$beside_dtype"; else peer_text="fa3@$beside_dtype"; fi
fi
args_text=""
((${#stage_args[@]})) && args_text="; stage args (at $dtype): ${stage_args[*]}"
spin_text="--spin-us $spin"
((${#spins[@]} > 1)) && spin_text+=" (and ${spins[*]:1}, rows marked @spin<N>)"

check_text=""
((check)) && check_text=" --check"
stages_text=${runner_names:-none}
if [[ -z $runner_names && $direction == bwd ]] && ((${#no_bwd_keys[@]})); then
    stages_text="none (${no_bwd_keys[*]}: no backward, its --help says backward: no)"
fi
((${#run_keys[@]} || peers)) || die "nothing to run: stages: $stages_text; peers: none"
echo "$what: ${#points[@]} points$part_text x $repeats repeats; stages: $stages_text;" \
    "peers: $peer_text; $dtype$args_text; --iters $iters --warmup $warmup $spin_text$check_text"
echo "estimated duration on an H200: about $est_text${split_hint:+ — $split_hint}"
if ((dry_run)); then
    echo "plan (one repeat; the order rotates by one runner each repeat):"
    for p in "${points[@]}"; do
        read -r d c s <<<"$p"
        line="  hd $d causal $c seqlen $s (batch $((16384 / s)), heads $(heads_of "$d")):"
        for e in "${entries[@]}"; do
            read -r kind sp key <<<"$e"
            spin_mark m "$sp"
            if [[ $kind == P ]]; then
                line+=" peers${m:+@$m}"
            elif [[ $kind == B ]]; then
                line+=" fa3@$beside_dtype"
            elif ! is_slow_point "${runner_id[$key]}" "$s"; then
                if [[ -z $m ]]; then line+=" $key"
                elif [[ $key == *@* ]]; then line+=" $key-$m"
                else line+=" $key@$m"
                fi
            fi
        done
        echo "$line"
    done
    for n in ${base_notes[@]+"${base_notes[@]}"}; do echo "  $n"; done
    for key in ${no_bwd_keys[@]+"${no_bwd_keys[@]}"}; do
        if [[ $direction == bwd ]]; then
            echo "  $key has no backward (its --help: backward: no): not run at bwd"
        else
            echo "  $key has no backward (its --help: backward: no): its forward only"
        fi
    done
    if ((${#assumed_keys[@]})); then
        echo "  not built here, so assumed to have a backward and --spin-us: ${assumed_keys[*]}"
    fi
    for key in ${no_spin_keys[@]+"${no_spin_keys[@]}"}; do
        echo "  $key: its --help has no --spin-us: timed without the spin"
    done
    echo "dry run: nothing measured"
    exit 0
fi

# ---------------------------------------------------------------------------------------
# The run's files: rows go to a run CSV in build/sweep, copied under plots/data at the end.

run_id=$(date -u +%Y%m%dT%H%M%SZ)
run_date=${run_id:0:4}-${run_id:4:2}-${run_id:6:2}
logs=$build/sweep
mkdir -p "$logs"
csv_run=$logs/fa3_${tag}_${run_id}_$$.csv
meta_run=${csv_run%.csv}.meta
log=$logs/fa3_${tag}_${run_id}_$$.log
stage_out=$logs/stage_$$.out
stage_csv=$logs/stage_$$.csv
: >"$log"
exec {logfd}>>"$log"

# The header (FX_CSV_HEADER in common/), so that the stages and the peers append to one.
header=$(fx_csv_header) || die "the CSV header: see above"
echo "$header" >"$csv_run"

# The commit the peers' rows record: the environment's (a copy without .git), git's, or
# at the end the one the stage rows recorded at configure time.
commit=$(fx_tree_commit 12)

{
    echo "command=$command_line"
    echo "direction=$direction"
    echo "started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host=$(uname -n)"
    echo "commit_tree=$commit"
    echo "points=seqlen ${seqlen_list[*]}; head_dim ${hd_list[*]}; causal ${causals[*]};" \
        "$dtype; batch*seqlen 16384; heads ${heads_opt:-2048/head_dim}"
    if [[ -n $part ]]; then
        echo "part=$part_k/$part_n: points $part_k, $((part_k + part_n)), ... of the" \
            "${#all_points_list[@]} (head_dim, causal, seqlen order), ${#points[@]} here"
    fi
    echo "repeats=$repeats"
    echo "iters=$iters"
    echo "warmup=$warmup"
    echo "spin_us=$spin"
    ((${#spins[@]} == 1)) || echo "spin_compare=${spins[*]:1} (rows marked @spin<N>)"
    echo "stages=${stage_ids[*]:-}"
    echo "dtype=$dtype"
    echo "stage_args=${stage_args[*]:-}"
    [[ -z $beside ]] || echo "beside=$beside (rows marked @$beside_dtype, without stage_args)"
    echo "timed=each runner's forward call alone (backward: the backward call), after an L2" \
        "flush and the spin; inputs made before the timed calls (e4m3: the host's fp32 draw," \
        "quantization with descales and V's transpose with --fp8-vt, fx_fp8_case.c; FA3 fp8:" \
        "Q, K, V converted from bf16 once, descales of 1) stay outside"
    if [[ $dtype == e4m3 && " ${stage_args[*]:-} " == *" --fp8-vt "* ]]; then
        echo "note=e4m3 with --fp8-vt: the stages get V already transposed (done on the host," \
            "not timed); FA3's fp8 forward takes V in K's layout and transposes it in its" \
            "kernel, inside its time"
    fi
    for spec in ${baselines[@]+"${baselines[@]}"}; do echo "baseline=$spec"; done
    if ((peers)); then
        echo "runners=$runner_names${runner_names:+ }peers($peer_text)"
    else
        echo "runners=$runner_names"
    fi
    echo "estimate_s=$(((est_ms + 500) / 1000))"
    if command -v nvidia-smi >/dev/null 2>&1; then
        smi=$(nvidia-smi \
            --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,persistence_mode \
            --format=csv,noheader 2>&1 || true)
        # The first four GPUs (a printf of a variable: no reader that exits early)
        echo "nvidia_smi=$(printf '%s\n' "$smi" | sed -n '1,4p' | paste -sd';' -)"
    fi
} >"$meta_run"

# ---------------------------------------------------------------------------------------
# Time accounting (bash's clock, no process per reading): microseconds.

now_us() {  # now_us VAR (a name other than _now_t)
    local _now_t=${EPOCHREALTIME:-}
    if [[ -n $_now_t ]]; then
        _now_t=${_now_t//[!0-9]/}
        printf -v "$1" '%s' "$((10#$_now_t))"
    else
        printf -v "$1" '%s' "$((SECONDS * 1000000))"
    fi
}
declare -A spent_us=() spent_n=()
account() {  # account WHAT START_US
    local t_now
    now_us t_now
    spent_us[$1]=$((${spent_us[$1]:-0} + t_now - $2))
    spent_n[$1]=$((${spent_n[$1]:-0} + 1))
}
seconds_of() { printf '%d.%03d' $(($1 / 1000000)) $((($1 / 1000) % 1000)); }

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
# The peers: one Python process for the whole run (importing torch costs seconds), fed
# one request per point and spin, so that its numbers are taken between the stages'.

peers_on=0 peers_failed=0 peers_pid="" to_peers="" from_peers=""
peers_line=""
PEERS_TIMEOUT=900  # seconds a request may take before the peers are given up
trap '' PIPE       # a peer process that died makes writes fail, not the sweep exit

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

# ask_peers ARGS...: one request; its answer lines go to the log, the TFLOP/s to
# $peer_cells. $peer_point names the point in the notes.
peer_cells="" peer_point=""
ask_peers() {
    peer_cells=""
    ((peers_on)) || return 0
    local line rest
    local -a w=()
    if ! { printf '%s\n' "$*" 1>&"$to_peers"; } 2>/dev/null; then
        echo "  peers: the peer process has gone: peers stop here (see $log)"
        peers_on=0 peers_failed=1
        return 0
    fi
    while true; do
        if ! IFS= read -r -t "$PEERS_TIMEOUT" line <&"$from_peers"; then
            echo "  peers: no answer (process gone or over ${PEERS_TIMEOUT} s):" \
                "peers stop here (see $log)"
            peers_on=0 peers_failed=1
            return 0
        fi
        printf '%s\n' "$line" >&"$logfd"
        rest=${line#"${line%%[! ]*}"}  # without the leading blanks, and runs of blanks as one
        while [[ $rest == *"  "* ]]; do rest=${rest//  / }; done
        case $line in
            "peers: end") return 0 ;;
            "peers: error"* | "peers: bad request"*) echo "  $line"; peers_failed=1 ;;
            *"skipped (every point):"*) note_once "$rest" ;;
            *skipped:*) note_once "${peer_point:+$peer_point: }$rest" ;;
            *TFLOP/s*)
                read -r -a w <<<"$line"
                local i cell=${w[0]}
                [[ ${w[1]:-} == bwd ]] && cell+=" bwd"
                for ((i = 2; i < ${#w[@]}; ++i)); do
                    if [[ ${w[i]} == TFLOP/s ]]; then cell+=" ${w[i - 1]}"; break; fi
                done
                peer_cells+=" $cell"
                local idle_note idle_re='GPU idle at enqueue in ([0-9]+/[0-9]+) calls'
                if [[ $line =~ $idle_re\ \(spin\ too\ short\) ]]; then
                    idle_note="${peer_point:+$peer_point: }${w[0]}: the GPU went idle before the"
                    idle_note+=" host had enqueued the call (${BASH_REMATCH[1]} calls (spin too"
                    idle_note+=" short)): raise --spin-us"
                    note_once "$idle_note"
                fi
                idle_re='GPU idle before the call returned in ([0-9]+/[0-9]+) calls'
                if [[ $line =~ $idle_re ]]; then
                    idle_note="${peer_point:+$peer_point: }${w[0]}: the GPU went idle waiting"
                    idle_note+=" for the host before the call returned (${BASH_REMATCH[1]}"
                    idle_note+=" calls): host time after its last kernel is in its times (a"
                    idle_note+=" spin longer than the call's host time, enqueue <= N us, hides it)"
                    note_once "$idle_note"
                fi
                ;;
            *"TB/s"*)
                read -r -a w <<<"$line"
                local j
                for ((j = 2; j < ${#w[@]}; ++j)); do
                    if [[ ${w[j]} == TB/s ]]; then
                        peer_cells+=" ${w[0]} ${w[j - 1]} TB/s"
                        break
                    fi
                done
                ;;
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
# One stage runner at one point and spin. Sets stage_cell ("02_flash1 9.8" or "").
# The program writes its rows to a file of its own; they are appended to the run's CSV
# in the run's columns, the stage column marked ID@MARK where the runner or spin is
# marked (an older build's header is mapped column by column).

declare -A stage_state=()  # key -> nogpu | failed-nogpu; key,point -> refused
declare -A refusal_said=()
no_gpu_reason="" failed=0 stage_ok=0 stage_refused=0
stage_cell=""
check_flag=()
((check)) && check_flag=(--check)

append_rows() {  # append_rows MARK: $stage_csv's rows onto $csv_run
    local mark=$1 first=1 line
    [[ -s $stage_csv ]] || return 0
    local file_header
    IFS= read -r file_header <"$stage_csv" || true
    if [[ $file_header != "$header" ]]; then
        awk -F, -v OFS=, -v want="$header" -v mark="$mark" '
            NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; n = split(want, w, ","); next }
            { line = ""
              for (i = 1; i <= n; ++i) {
                  v = (w[i] in col) ? $(col[w[i]]) : ""
                  if (w[i] == "stage" && mark != "") v = v "@" mark
                  line = line (i > 1 ? "," : "") v }
              print line }' "$stage_csv" >>"$csv_run"
        return 0
    fi
    {
        while IFS= read -r line; do
            if ((first)); then first=0; continue; fi
            if [[ -n $mark ]]; then
                printf '%s@%s,%s\n' "${line%%,*}" "$mark" "${line#*,}"
            else
                printf '%s\n' "$line"
            fi
        done <"$stage_csv"
    } >>"$csv_run"
}

run_stage() {  # run_stage KEY SPIN POINT ARGS...
    local key=$1 sp=$2 point=$3
    shift 3
    stage_cell=""
    [[ -z ${stage_state[$key]:-} && -z ${stage_state[$key,$point]:-} ]] || return 0
    local mark=${runner_mark[$key]} smark rc line f="" b="" t0
    spin_mark smark "$sp"
    if [[ -n $smark ]]; then
        if [[ -z ${has_spin[$key]:-} ]]; then return 0; fi  # noted once at the start
        mark=${mark:+$mark-}$smark
    fi
    # The runner's dtype, and --stage-args for the runs in the sweep's own dtype.
    local -a flags=(--dtype "${runner_dtype[$key]}")
    if [[ ${runner_dtype[$key]} == "$dtype" ]]; then
        flags+=(${stage_args[@]+"${stage_args[@]}"})
    fi
    flags+=(--bench)
    if [[ $direction != fwd && -n ${has_bwd[$key]:-} ]]; then flags+=(--bwd); fi
    if [[ -n ${has_spin[$key]:-} ]]; then flags+=(--spin-us "$sp"); fi
    : >"$stage_csv"  # empty: the program writes its header, then its rows
    now_us t0
    set +e
    "${runner_bin[$key]}" "$@" "${flags[@]}" --csv "$stage_csv" --iters "$iters" \
        --warmup "$warmup" ${check_flag[@]+"${check_flag[@]}"} >"$stage_out" 2>&1
    rc=$?
    set -e
    account stage "$t0"
    local -a out_lines=()
    mapfile -t out_lines <"$stage_out"
    printf '%s\n' "=== stage $key $* ${flags[*]} (exit $rc)" \
        ${out_lines[@]+"${out_lines[@]}"} >&"$logfd"
    case $rc in
        0)
            stage_ok=$((stage_ok + 1))
            append_rows "$mark"
            # "02_flash1 9.8", at bwd "02_flash1 bwd 8.6", at both "02_flash1 9.8 bwd 8.6"
            for line in ${out_lines[@]+"${out_lines[@]}"}; do
                if [[ $line =~ time\ (fwd|bwd):.*[[:space:]]([0-9.]+)\ TFLOP/s ]]; then
                    if [[ ${BASH_REMATCH[1]} == fwd ]]; then
                        f=${BASH_REMATCH[2]}
                    else
                        b=${BASH_REMATCH[2]}
                    fi
                fi
            done
            stage_cell="${runner_id[$key]}${mark:+@$mark}"
            if [[ $direction != bwd || -z $b ]]; then stage_cell+=" ${f:-?}"; fi
            [[ -z $b ]] || stage_cell+=" bwd $b"
            ;;
        2)
            stage_refused=$((stage_refused + 1))
            stage_state[$key,$point]=refused
            local last=""
            for line in ${out_lines[@]+"${out_lines[@]}"}; do
                [[ $line =~ [^[:space:]] ]] && last=$line
            done
            # Said once per reason: a refusal that holds at every point (a missing
            # --stage-args, say) is one line, with the first point it was seen at.
            if [[ -z ${refusal_said[$key|$last]:-} ]]; then
                refusal_said[$key|$last]=1
                note_once "$key refused $point: $last (not said again for this reason)"
            fi
            ;;
        77)
            stage_state[$key]=nogpu
            no_gpu_reason=""
            for line in ${out_lines[@]+"${out_lines[@]}"}; do
                if [[ $line == *skipped:* ]]; then no_gpu_reason=${line#"${line%%[! ]*}"}; break; fi
            done
            echo "  ${no_gpu_reason:-$key: exit 77}"
            ;;
        *)
            failed=1
            local skip="" err=""
            for line in ${out_lines[@]+"${out_lines[@]}"}; do
                # The programs' "no usable GPU: ...: a failure, not a skip, since
                # FX_REQUIRE_GPU is set" (stderr), kept up to the reason.
                [[ -z $skip && $line == *"since FX_REQUIRE_GPU is set"* ]] &&
                    skip=${line%%: a failure, not a skip*}
                [[ -z $err && ${line,,} =~ fail|error ]] && err=$line
            done
            if [[ -n $skip ]]; then  # FX_REQUIRE_GPU=1: no GPU is a failure
                stage_state[$key]="failed-nogpu"
                no_gpu_reason=${skip#*: }  # without the program's name
                echo "  $key: $no_gpu_reason (FX_REQUIRE_GPU=${FX_REQUIRE_GPU:-}: a failure)"
            else
                if [[ -z $err ]]; then
                    err="no output"
                    ((${#out_lines[@]} == 0)) || err=${out_lines[${#out_lines[@]} - 1]}
                fi
                echo "  $key FAILED at $point (exit $rc): $err"
            fi
            ;;
    esac
}

# ---------------------------------------------------------------------------------------
# The end, also on an interrupt (Ctrl-C, or `timeout` sending TERM): the rows so far go
# to the CSV under plots/data, with a note in the .meta that the run was cut short.

finish() {
    local interrupted=$1 el t_end key
    trap - INT TERM
    if ((interrupted)); then stop_peers kill; else stop_peers; fi
    el=$((SECONDS - sweep_t0))
    ((interrupted)) &&
        echo "note=interrupted after $el s at point $i of $total:" \
            "the CSV holds the rows measured until then" >>"$meta_run"
    now_us t_end
    local all_us=$((t_end - t0_us)) st=${spent_us[stage]:-0} pe=${spent_us[peers]:-0}
    {
        echo "finished_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "elapsed_s=$el"
        echo "time_stage_programs_s=$(seconds_of "$st") (${spent_n[stage]:-0} runs," \
            "$(seconds_of $((st / ${spent_n[stage]:-1}))) s each)"
        echo "time_peers_s=$(seconds_of "$pe") (${spent_n[peers]:-0} requests," \
            "$(seconds_of $((pe / ${spent_n[peers]:-1}))) s each;" \
            "their start: $(seconds_of "${spent_us[peers_start]:-0}") s)"
        echo "time_sweep_itself_s=$(seconds_of $((all_us - st - pe - ${spent_us[peers_start]:-0})))"
    } >>"$meta_run"
    exec {logfd}>&-
    rm -f "$stage_out" "$stage_csv"

    # The CSV under plots/data.
    rows=$(($(wc -l <"$csv_run") - 1))
    if ((rows == 0)); then
        echo
        echo "No rows: no CSV written (log: $log)."
        rm -f "$csv_run"
    else
        # Rows whose field count differs from the header.
        bad=$(awk -F, 'NR == 1 { n = NF; next } NF != n { c++ } END { print c + 0 }' "$csv_run")
        ((bad == 0)) ||
            echo "WARNING: $bad rows do not have the header's columns:" \
                "rebuild ($build) and run again"
        # The commit this build's stage rows recorded (configure time) fills the peers'
        # "unknown"; marked rows (a baseline's) keep theirs.
        built=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
                         $c["check"] != "peer" && $c["stage"] !~ /@/ && !($c["commit"] in s) {
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
        for spec in ${baselines[@]+"${baselines[@]}"}; do
            btag=base
            [[ $spec == *:* ]] && btag=${spec##*:}
            bc=$(awk -F, -v t="@$btag" 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
                  substr($c["stage"], length($c["stage"]) - length(t) + 1) == t &&
                  !($c["commit"] in s) { s[$c["commit"]]; l = l (l ? " " : "") $c["commit"] }
                  END { print l }' "$csv_run")
            [[ -z $bc ]] || echo "baseline_commit=$btag: $bc" >>"$meta_run"
        done
        if [[ -z $out ]]; then
            device=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "device") c = i; next }
                { print $c; exit }' "$csv_run")
            slug=$(printf '%s' "$device" | tr '[:upper:]' '[:lower:]' |
                sed 's/[^a-z0-9][^a-z0-9]*/-/g; s/^-//; s/-$//')
            psuf=""
            [[ -z $part ]] || psuf=_part${part_k}of${part_n}
            out=plots/data/fa3_${tag}_${run_date}_${slug:-unknown}${psuf}.csv
            [[ ! -e $out ]] || out=plots/data/fa3_${tag}_${run_id}_${slug:-unknown}${psuf}.csv
        fi
        mkdir -p "$(dirname "$out")"
        cp "$csv_run" "$out"
        cp "$meta_run" "${out%.csv}.meta"
        local el_text
        fmt_time el_text "$el"
        echo
        echo "$rows rows: $out (sidecar ${out%.csv}.meta; log $log)," \
            "$el_text elapsed (estimated $est_text)"
        if [[ -n $part ]]; then
            echo "next: the other parts," \
                "then bench/join_sweeps.sh JOINED.csv PART1.csv ... PART$part_n.csv"
        else
            echo "next: bench/bounds.sh $out; bench/plot.sh $out;" \
                "scripts/gen_readme_results.sh $out"
            ((${#base_keys[@]} == 0)) || echo "      bench/compare.sh $out TAG (the baseline's tag)"
        fi
        ((${#spins[@]} == 1)) ||
            echo "      bench/compare.sh $out spin<N> (what each other spin changes)"
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
    if ((stage_refused && !stage_ok)); then
        echo "Every stage run was refused (outside the stages' capabilities: the lines above" \
            "say why): exit 2."
        exit 2
    fi
    exit 0
}

# ---------------------------------------------------------------------------------------
# The sweep.

for key in ${no_bwd_keys[@]+"${no_bwd_keys[@]}"}; do
    if [[ $direction == bwd ]]; then
        note_once "$key has no backward (its --help: backward: no): not run at bwd"
    else
        note_once "$key has no backward (its --help: backward: no): its forward only"
    fi
done
for key in ${no_spin_keys[@]+"${no_spin_keys[@]}"}; do
    nospin_note="$key: its --help has no --spin-us (built before it): timed without the spin,"
    nospin_note+=" launch latency may be inside its interval"
    nospin_note+="${spin_compare:+; not run at the other spins}"
    note_once "$nospin_note"
done
for n in ${base_notes[@]+"${base_notes[@]}"}; do note_once "$n"; done
declare -A slow_said=()
for key in ${run_keys[@]+"${run_keys[@]}"}; do
    id=${runner_id[$key]}
    if ((!all_points)) && [[ -n ${is_slow_id[$id]:-} && -z ${slow_said[$id]:-} ]] &&
        ((max_seqlen >= slow_from)); then
        slow_said[$id]=1
        note_once "$id not run at seqlen >= $slow_from ($(slow_reason "$id"); --all-points runs it)"
    fi
done
now_us t0_us
sweep_t0=$SECONDS # not "t0": the trap may run finish inside a function with a local t0
i=0
now_us tp
start_peers
account peers_start "$tp"
echo "peers: $peers_line"
echo "peers=$peers_line" >>"$meta_run"
echo "log: $log"

peer_dir=()
[[ $direction == fwd ]] || peer_dir=(--direction "$direction")
trap 'echo; echo "sweep.sh: interrupted"; finish 1' INT TERM
n_entries=${#entries[@]}
for ((r = 1; r <= repeats; ++r)); do
    if ((peers_on)); then
        meta_arg=()
        ((r == 1)) && meta_arg=(--meta "$meta_run")  # the peers' versions, once
        peer_point=""
        now_us tp
        ask_peers --gemm --iters "$iters" --warmup "$warmup" --spin-us "$spin" --csv "$csv_run" \
            --commit "$commit" ${meta_arg[@]+"${meta_arg[@]}"}
        account peers "$tp"
        fmt_time el_text $((SECONDS - sweep_t0))
        echo "[repeat $r/$repeats, $el_text] reference:${peer_cells:- none}"
    fi
    # The peers in this repeat's order: rotated by one each repeat.
    np=${#peer_list[@]} backends=""
    for ((k = 0; k < np; ++k)); do
        backends+="${backends:+,}${peer_list[((k + r - 1) % np)]}"
    done
    for p in "${points[@]}"; do
        read -r d c s <<<"$p"
        i=$((i + 1))
        b=$((16384 / s)) h=$(heads_of "$d")
        if ((c)); then cname=causal; else cname=non-causal; fi
        point="hd $d causal $c seqlen $s"
        # The dtype and --stage-args are the runner's: run_stage adds them.
        args=(--batch "$b" --seqlen "$s" --heads "$h" --head-dim "$d")
        ((c)) && args+=(--causal)
        cells=""
        # The runner entries of a point, rotated by the repeat so no runner is always first.
        for ((k = 0; k < n_entries; ++k)); do
            read -r kind sp key <<<"${entries[((k + r - 1) % n_entries)]}"
            if [[ $kind == P ]]; then
                peer_point=$point
                spin_mark m "$sp"
                now_us tp
                ask_peers --batch "$b" --seqlen "$s" --heads "$h" --head-dim "$d" --causal "$c" \
                    --dtype "$dtype" --iters "$iters" --warmup "$warmup" --spin-us "$sp" \
                    --backends "$backends" --csv "$csv_run" --commit "$commit" \
                    ${m:+--tag "$m"} ${peer_dir[@]+"${peer_dir[@]}"}
                account peers "$tp"
                cells+=$peer_cells
            elif [[ $kind == B ]]; then  # FA3 in --beside's dtype, rows marked fa3@DTYPE
                peer_point="$point ($beside_dtype)"
                now_us tp
                ask_peers --batch "$b" --seqlen "$s" --heads "$h" --head-dim "$d" --causal "$c" \
                    --dtype "$beside_dtype" --iters "$iters" --warmup "$warmup" --spin-us "$sp" \
                    --backends fa3 --csv "$csv_run" --commit "$commit" --tag "$beside_dtype" \
                    ${peer_dir[@]+"${peer_dir[@]}"}
                account peers "$tp"
                cells+=$peer_cells
            elif is_slow_point "${runner_id[$key]}" "$s"; then
                continue
            else
                run_stage "$key" "$sp" "$point" "${args[@]}"
                [[ -n $stage_cell ]] && cells+=" $stage_cell"
            fi
        done
        # Every stage said "no GPU" at the first point: say it once, plainly.
        if ((i == 1 && ${#run_keys[@]})); then
            all_nogpu=1
            for key in "${run_keys[@]}"; do
                [[ ${stage_state[$key]:-} == *nogpu ]] || all_nogpu=0
            done
            if ((all_nogpu)); then
                echo "no GPU: stages skipped (${no_gpu_reason#*skipped: })"
                echo "note=no GPU: stages skipped (${no_gpu_reason#*skipped: })" >>"$meta_run"
            fi
        fi
        fmt_time el_text $((SECONDS - sweep_t0))
        echo "[point $i/$total, $el_text] repeat $r/$repeats, hd $d $cname seqlen $s" \
            "(batch $b, heads $h):${cells:- nothing measured}"
    done
    if ((r == 1 && repeats > 1)); then
        el=$((SECONDS - sweep_t0))
        fmt_time el_text "$el"
        fmt_time left_text $((el * (repeats - 1)))
        echo "repeat 1 took $el_text; the sweep ends in about $left_text"
    fi
done
finish 0
