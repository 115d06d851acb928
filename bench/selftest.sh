#!/usr/bin/env bash
# selftest.sh — the benchmark tools tested without a GPU: bench/sweep.sh, peers.py (its
# variable-length batch too), varlen.sh, join_sweeps.sh, compare.sh, bounds.sh, plot.sh,
# scripts/gen_readme_results.sh, run.sh (from a tree of its own under the temporary
# folder) and tests/gpu/run.sh's usage errors run against stand-ins (bench/selftest/):
# stage programs that print and write what the harness does (fake_stage.sh: one with a
# backward, one without, an "old build" without --spin-us and with an older CSV header,
# CPU models, refusals, varlen or not), a PyTorch with a
# simulated GPU stream (site/torch: host dispatch costs busy-wait, GPU work runs after
# what was enqueued before it, so a missing spin shows up as on a GPU), the fa3-fwd
# package's interface (fa3/: its signatures, its flash_attn_config quirk, its dist-info,
# host work after its kernel on request) and an nvidia-smi.
# A CTest test (label unit); nothing here measures anything.
#
#   bench/selftest.sh [-v]      (-v: print every command's output)
#
# Ends with "N passed, M failed"; exit status 0 when none failed, 1 otherwise. Without
# python3 the peers' part is skipped (said so); without gnuplot, the figures' part.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

verbose=0
[[ ${1:-} == -v ]] && verbose=1
[[ ${1:-} == -h || ${1:-} == --help ]] &&
    { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0; }

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); ((verbose)) && echo "ok: $1"; return 0; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; return 0; }
# expect NAME CONDITION-COMMAND...: counts a check.
expect() {
    local name=$1
    shift
    if "$@" >/dev/null 2>&1; then ok "$name"; else bad "$name"; fi
}
# run_to FILE COMMAND...: runs it, output to FILE, returns its status (never fails the script).
run_to() {
    local f=$1 rc
    shift
    set +e
    "$@" >"$f" 2>&1
    rc=$?
    set -e
    ((verbose)) && { echo "--- $* (exit $rc)"; cat "$f"; }
    return "$rc"
}
has() { grep -- "$2" "$1" >/dev/null; }        # has FILE PATTERN
hasnt() { ! grep -- "$2" "$1" >/dev/null; }    # hasnt FILE PATTERN
rc_is() { [[ $1 == "$2" ]]; }

# ---------------------------------------------------------------------------------------
# The stand-ins.
S=$root/bench/selftest
mkdir -p "$T/build/bin" "$T/old/bin" "$T/out" "$T/figs"
mk() {  # mk DIR ID ENV...: a stage program stand-in
    local dir=$1 id=$2
    shift 2
    printf '#!/usr/bin/env bash\n%s FAKE_ID=%s exec %s "$@"\n' "$*" "$id" "$S/fake_stage.sh" \
        >"$dir/bin/stage_$id"
    chmod +x "$dir/bin/stage_$id"
}
mk "$T/build" 03_flash2 FAKE_BWD=1 FAKE_RATE=330
mk "$T/build" 08_intra_wg_overlap FAKE_RATE=650
mk "$T/old" 03_flash2 FAKE_BWD=1 FAKE_RATE=320 FAKE_NO_SPIN=1 FAKE_OLD_HEADER=1 FAKE_COMMIT=old1111
mk "$T/old" 08_intra_wg_overlap FAKE_RATE=640 FAKE_COMMIT=old1111
export PATH=$S/bin:$PATH
has_python=0
command -v python3 >/dev/null 2>&1 && has_python=1
[[ -z ${SELFTEST_NO_PYTHON:-} ]] || has_python=0  # to test this script's own path without it
if ((has_python)); then
    export PYTHONPATH=$S/site:$S/fa3
else
    echo "selftest: python3 not found: the peers' part is skipped (the sweeps run --no-peers)"
fi
nopeers=()
((has_python)) || nopeers=(--no-peers)

# ---------------------------------------------------------------------------------------
# peers.py alone.
if ((has_python)); then
    expect "peers.py compiles" python3 -m py_compile bench/peers.py
    if [[ $(sed -n 's/^DEFAULT_SPIN_US = \([0-9]*\).*/\1/p' bench/peers.py) == \
        "$(sed -n 's/^SPIN_DEFAULT=\([0-9]*\).*/\1/p' bench/sweep.sh)" ]]; then
        ok "peers.py and sweep.sh have one default spin"
    else
        bad "peers.py's DEFAULT_SPIN_US differs from sweep.sh's SPIN_DEFAULT"
    fi
    P=(python3 bench/peers.py --batch 8 --seqlen 2048 --heads 16 --head-dim 128 --iters 4
        --warmup 1)
    rm -f "$T/p.csv" "$T/p.meta"
    if run_to "$T/p.out" "${P[@]}" --csv "$T/p.csv" --meta "$T/p.meta"; then
        ok "peers.py: one point"
    else
        bad "peers.py: one point (exit $?)"
    fi
    expect "peers.py: 4 rows (fa3 and the three SDPA backends)" \
        test "$(($(wc -l <"$T/p.csv") - 1))" -eq 4
    expect "peers.py: an fa3 row" has "$T/p.csv" '^fa3,fwd,'
    expect "peers.py --meta: FA3's version" has "$T/p.meta" '^fa3_version=0.0.3$'
    expect "peers.py --meta: what FA3's build lacks" \
        has "$T/p.meta" '^fa3_lacks=backward, paged KV, local attention, fp16, column-major V$'
    expect "peers.py --meta: the spin's clock from nvidia-smi" \
        has "$T/p.meta" '^spin_max_sm_clock_mhz=1980 (nvidia-smi'
    run_to "$T/p0.out" "${P[@]}" --spin-us 0 --backends fa3 --tag spin0 --csv "$T/p.csv" || true
    expect "peers.py --spin-us 0: the launch latency is seen (GPU idle at enqueue)" \
        has "$T/p0.out" 'GPU idle at enqueue in'
    expect "peers.py --tag: a marked row" has "$T/p.csv" '^fa3@spin0,fwd,'
    run_to "$T/p1.out" env PYTHONPATH="$S/site" "${P[@]}" --backends fa3,flash || true
    expect "peers.py without FA3: one skip line" \
        has "$T/p1.out" \
            'fa3 *skipped (every point): flash_attn_interface not installed; fa3-fwd not installed'
    expect "peers.py without FA3: SDPA still runs" has "$T/p1.out" 'sdpa_flash .*TFLOP/s'
    run_to "$T/p2.out" env PYTHONPATH= "${P[@]}" && rc=0 || rc=$?
    expect "peers.py without PyTorch: exit 0" rc_is "$rc" 0
    expect "peers.py without PyTorch: says so" \
        has "$T/p2.out" 'PyTorch not installed: peers (SDPA, FA3) skipped'
    run_to "$T/p3.out" "${P[@]}" --dtype e4m3 --csv "$T/p3.csv" || true
    expect "peers.py --dtype e4m3: an FA3 fp8 row" has "$T/p3.csv" '^fa3,fwd,.*,e4m3,'
    expect "peers.py --dtype e4m3: SDPA skipped, saying why" \
        has "$T/p3.out" 'sdpa_flash *skipped: SDPA has no e4m3 path'
    run_to "$T/p4.out" python3 bench/peers.py --batch 1 --seqlen-q 1 --seqlen-k 8192 --heads 32 \
        --heads-kv 8 --head-dim 128 --kvcache --backends fa3,cudnn --iters 3 --warmup 1 \
        --csv "$T/p4.csv" || true
    expect "peers.py --kvcache: a decode row" \
        has "$T/p4.csv" '^fa3_kvcache,fwd,.*,1,1,8192,32,8,128,'
    expect "peers.py --kvcache: its bandwidth and num_splits" \
        has "$T/p4.out" 'K,V read once: .* TB/s, num_splits 0'
    run_to "$T/p5.out" "${P[@]}" --direction bwd --backends fa3,flash || true
    expect "peers.py bwd: fa3-fwd's missing backward said once" \
        has "$T/p5.out" 'fa3 *bwd skipped (every point): this FA3 build has no backward'
    run_to "$T/p6.out" env PYTHONPATH="$S/site:$S/hopper" "${P[@]}" --direction both \
        --backends fa3 || true
    expect "peers.py with a hopper/ build returning (out, lse): forward and backward" \
        has "$T/p6.out" 'fa3 *bwd .*TFLOP/s'
    run_to "$T/p7.out" "${P[@]}" --heads-kv 3 && rc=0 || rc=$?
    expect "peers.py: heads not a multiple of heads_kv is exit 2" rc_is "$rc" 2
    expect "peers.py: no GPU idle inside the calls where the host keeps ahead" \
        hasnt "$T/p.out" 'before the call returned'
    run_to "$T/p8.out" env FAKE_FA3_HOST_AFTER_US=3000 "${P[@]}" --backends fa3 || true
    expect "peers.py: host work after FA3's kernel seen (GPU idle before the call returned)" \
        has "$T/p8.out" 'fa3 .*GPU idle before the call returned in 4/4 calls (host time timed)'
    # A variable-length batch (--seqlens-q): FA3's flash_attn_varlen_func, SDPA on nested
    # jagged tensors, cuDNN skipped; rows with batch = the count, seqlen = the longest.
    VL=336,176,888,1704,3248,16384,6208,1232,8576,128,4496,248,464,648,2352,11856
    run_to "$T/pv.out" python3 bench/peers.py --seqlens-q "$VL" --heads 16 --head-dim 128 \
        --iters 3 --warmup 1 --csv "$T/pv.csv" && rc=0 || rc=$?
    expect "peers.py --seqlens-q: exit 0" rc_is "$rc" 0
    expect "peers.py --seqlens-q: an fa3 row, batch 16, seqlen_q = seqlen_k = 16384" \
        has "$T/pv.csv" '^fa3,fwd,.*,16,16384,16384,16,16,128,bf16,0,'
    expect "peers.py --seqlens-q: sdpa_flash and sdpa_efficient rows (nested tensors)" \
        test "$(grep -c '^sdpa_\(flash\|efficient\),fwd,.*,16,16384,16384,' "$T/pv.csv")" -eq 2
    expect "peers.py --seqlens-q: sdpa_cudnn skipped, saying why" \
        has "$T/pv.out" 'sdpa_cudnn *skipped (every point): SDPA has no varlen entry; its cuDNN'
    # 4*16*128*(the sum of the squared lengths) = 4615.78 GFLOP, from the row's TFLOP/s * ms.
    # shellcheck disable=SC2016 # an awk program
    expect "peers.py --seqlens-q: FLOPs summed over the sequences" \
        awk -F, '$1 == "fa3" { g = $20 * $17; exit !(g > 4611 && g < 4620) }' "$T/pv.csv"
    run_to "$T/pv2.out" python3 bench/peers.py --seqlens-q 5,0,700 --seqlens-k 5,3,900 \
        --seqused-k 5,0,800 --causal --heads 4 --head-dim 64 --iters 2 --warmup 0 \
        --csv "$T/pv2.csv" || true
    expect "peers.py --seqused-k: seqlen_k is the longest attended" \
        has "$T/pv2.csv" '^fa3,fwd,.*,3,700,800,4,4,64,bf16,1,'
    expect "peers.py --seqused-k: SDPA skipped, saying why" \
        has "$T/pv2.out" 'sdpa_flash *skipped: SDPA has no varlen entry and nested jagged'
    run_to "$T/pv3.out" python3 bench/peers.py --seqlens-q 5,7 --seqlens-k 9,7 --causal \
        --heads 4 --head-dim 64 --iters 2 --warmup 0 --backends flash,fa3 || true
    expect "peers.py --seqlens-q causal, seqlen_q != seqlen_k: SDPA skipped (top-left)" \
        has "$T/pv3.out" 'sdpa_flash *skipped: .*top-left, the harness bottom-right'
    expect "peers.py --seqlens-q causal, seqlen_q != seqlen_k: fa3 timed" \
        has "$T/pv3.out" 'fa3 .*TFLOP/s.*varlen: 2 sequences, total_q 12, total_k 16'
    run_to "$T/pv4.out" env PYTHONPATH="$S/site" python3 bench/peers.py --seqlens-q 64,32 \
        --heads 2 --head-dim 64 --iters 2 --warmup 0 --backends fa3 || true
    expect "peers.py --seqlens-q without FA3: one skip line" \
        has "$T/pv4.out" 'fa3 *skipped (every point): flash_attn_interface not installed'
    printf '%s\n' "--seqlens-q 64,32 --heads 2 --head-dim 64 --iters 2 --warmup 0" \
        "--seqlens-q 64,x --heads 2 --head-dim 64" | python3 bench/peers.py --serve \
        >"$T/pv5.out" 2>&1 || true
    expect "peers.py --serve: a varlen request answered" \
        has "$T/pv5.out" 'fa3 .*varlen: 2 sequences'
    expect "peers.py --serve: a bad varlen request answered, not fatal" \
        has "$T/pv5.out" "peers: bad request: --seqlens-q: '64,x' is not a comma list"
    # The usage errors, said before PyTorch is imported (so without it, or a GPU, too).
    while IFS='|' read -r bad_opt want; do
        # shellcheck disable=SC2086 # the options are split on purpose
        run_to "$T/pv6.out" env PYTHONPATH= python3 bench/peers.py $bad_opt --heads 4 \
            --head-dim 64 && rc=0 || rc=$?
        expect "peers.py $bad_opt: exit 2" rc_is "$rc" 2
        expect "peers.py $bad_opt: says $want" has "$T/pv6.out" "peers.py: error: .*$want"
    done <<'BAD'
--seqlens-q 1,x|is not a comma list of lengths (sequence 1's is 'x')
--seqlens-q 1,-2|is not a comma list of lengths
--seqlens-q 1,2 --seqlens-k 1|gives 1 lengths for the 2 sequences of --seqlens-q
--seqlens-q 1,2 --seqused-k 1,2,3|gives 3 lengths for the 2 sequences
--seqlens-q 3 --seqlens-k 2 --seqused-k 3|attends 3 keys, more than its 2
--seqlens-k 4|--seqlens-k goes with --seqlens-q
--seqused-k 4|--seqused-k goes with --seqlens-q
--seqlens-q 0,0|every sequence has 0 query rows
--seqlens-q 4,4 --seqlens-k 0,0|no sequence attends any key
--seqlens-q 3,4 --batch 3|--batch 3 is not the 2 sequences
--seqlens-q 8 --seqlen-q 4|--seqlen-q 4 is below the longest length, 8
--seqlens-q 8 --direction bwd|times the forward alone
--seqlens-q 8 --kvcache|--kvcache with --seqlens-q
--seqlens-q 8 --dtype e4m3|--seqlens-q with --dtype e4m3
BAD
    run_to "$T/pv7.out" env PYTHONPATH= python3 bench/peers.py --seqlens-q "$(printf '1,%.0s' \
        {1..1025})1" --heads 4 --head-dim 64 && rc=0 || rc=$?
    expect "peers.py --seqlens-q with 1026 lengths: exit 2, the limit said" \
        has "$T/pv7.out" 'at most 1024 sequences'
fi

# ---------------------------------------------------------------------------------------
# sweep.sh: usage errors, the plan, a run with a baseline and another spin.
for bad_opt in "--part 3/2" "--spin-us x" "--peers foo" "--spin-compare 1,y" \
    "--baseline $T/nowhere:t" "--iters 5000" "--iters 0" "--warmup 100001" "--stages" \
    "--out" "--dry-run --stages bogus" "--dry-run --build $T/nobuild --stages bogus" \
    "--dry-run --head-dims 64,64" "--dry-run --seqlens 1k,1024" "--dry-run --spin-compare 1000" \
    "--dry-run --spin-compare 0,400,0" "--dry-run --stages 03_flash2,03_flash2"; do
    # shellcheck disable=SC2086 # the options are split on purpose
    run_to "$T/u.out" bench/sweep.sh --build "$T/build" $bad_opt && rc=0 || rc=$?
    expect "sweep.sh $bad_opt: exit 2" rc_is "$rc" 2
    expect "sweep.sh $bad_opt: its own message" has "$T/u.out" '^sweep.sh: '
done
run_to "$T/u.out" bench/sweep.sh --build "$T/build" --stages && rc=0 || rc=$?
expect "sweep.sh --stages without its list: said as a usage error" \
    has "$T/u.out" '^sweep.sh: --stages needs a list$'
run_to "$T/u.out" bench/sweep.sh --build "$T/build" --iters 5000 && rc=0 || rc=$?
expect "sweep.sh --iters 5000: the stage programs' limit said" has "$T/u.out" '1 to 1024'
run_to "$T/u.out" bench/sweep.sh --build "$T/build" --dry-run --stages bogus || true
expect "sweep.sh --dry-run --stages bogus: the built stages named" \
    has "$T/u.out" 'no program .*stage_bogus (built: 03_flash2,08_intra_wg_overlap)'
run_to "$T/u.out" bench/sweep.sh --build "$T/nobuild" --dry-run --stages 03_flash2 &&
    rc=0 || rc=$?
expect "sweep.sh --dry-run without a build: a stage of the tree is planned" rc_is "$rc" 0
run_to "$T/u.out" bench/sweep.sh --build "$T/build" --dry-run --direction bwd \
    --stages 08_intra_wg_overlap || true
expect "sweep.sh --dry-run --direction bwd: a stage without a backward, said why" \
    has "$T/u.out" 'stages: none (08_intra_wg_overlap: no backward'
expect "sweep.sh --dry-run --direction bwd: not run at bwd, said" \
    has "$T/u.out" '08_intra_wg_overlap has no backward .*: not run at bwd'
run_to "$T/u.out" bench/sweep.sh --build "$T/build" --stages 08_intra_wg_overlap --iters 3 \
    --warmup 1 --out /proc/selftest.csv && rc=0 || rc=$?
expect "sweep.sh --out /proc/...: exit 2" rc_is "$rc" 2
expect "sweep.sh --out /proc/...: said before measuring" \
    has "$T/u.out" '^sweep.sh: --out /proc/selftest.csv: cannot write'
expect "sweep.sh --out /proc/...: nothing measured" hasnt "$T/u.out" '^\[point'
# shellcheck disable=SC2054 # the commas are in the option values
ONE=(--seqlens 512 --head-dims 64 --causal 0 --repeats 1 --iters 3 --warmup 1)
run_to "$T/u.out" bench/sweep.sh --build "$T/build" --stages 08_intra_wg_overlap "${ONE[@]}" \
    --no-peers --out "$T/out/np.csv" && rc=0 || rc=$?
expect "sweep.sh --no-peers: exit 0" rc_is "$rc" 0
expect "sweep.sh --no-peers: said once" has "$T/u.out" '^peers: not run (--no-peers)$'
# Cut short by `timeout` (TERM) while a stage program runs: the .meta says so, with an
# elapsed time of whole seconds since the sweep began (not from a stage run's own clock).
mkdir -p "$T/slow/bin"
mk "$T/slow" 03_flash2 FAKE_RATE=330
mk "$T/slow" 08_intra_wg_overlap FAKE_SLEEP_S=30
run_to "$T/u.out" timeout -s TERM 3 bench/sweep.sh --build "$T/slow" "${ONE[@]}" --no-peers \
    --stages 03_flash2,08_intra_wg_overlap --out "$T/out/cut.csv" || true
expect "sweep.sh cut short by a timeout: noted in the .meta" \
    has "$T/out/cut.meta" '^note=interrupted after [0-9]* s at point'
expect "sweep.sh cut short by a timeout: elapsed_s is the sweep's own, 2 to 9 s" \
    has "$T/out/cut.meta" '^elapsed_s=[2-9]$'
mkdir -p "$T/refuse/bin"
mk "$T/refuse" 03_flash2 FAKE_REFUSE_HD=64
run_to "$T/u.out" bench/sweep.sh --build "$T/refuse" "${ONE[@]}" --no-peers \
    --out "$T/out/refused.csv" && rc=0 || rc=$?
expect "sweep.sh: every stage run refused is exit 2" rc_is "$rc" 2
expect "sweep.sh: every stage run refused, said" has "$T/u.out" '^Every stage run was refused'
if ((has_python)); then
    run_to "$T/u.out" env FAKE_FA3_HOST_AFTER_US=3000 bench/sweep.sh --build "$T/build" \
        --stages 08_intra_wg_overlap "${ONE[@]}" --peers fa3 --out "$T/out/idle.csv" || true
    expect "sweep.sh .meta: the GPU idle inside a peer's call, noted" \
        has "$T/out/idle.meta" '^note=.*fa3: the GPU went idle waiting for the host before'
    expect "sweep.sh .meta: the spin too short for the peer's call, noted" \
        has "$T/out/idle.meta" '^note=.*fa3: .*(3/3 calls (spin too short)): raise --spin-us$'
fi
# A baseline without --spin-us (03_flash2@old) is timed without the spin: the sweep then
# needs --spin-us 0, so that old and new are timed alike.
run_to "$T/ns.out" bench/sweep.sh --build "$T/build" --dry-run \
    --stages 03_flash2,08_intra_wg_overlap --baseline "$T/old:old" && rc=0 || rc=$?
expect "sweep.sh --baseline without --spin-us, not at --spin-us 0: exit 2" rc_is "$rc" 2
expect "sweep.sh --baseline without --spin-us: the refusal names --spin-us 0" \
    has "$T/ns.out" '^sweep.sh: 03_flash2@old: no --spin-us in its --help.*--spin-us 0'
if run_to "$T/plan.out" bench/sweep.sh --build "$T/build" --dry-run --spin-us 0 \
    --stages 03_flash2,08_intra_wg_overlap --baseline "$T/old:old" --max-minutes 5; then
    ok "sweep.sh --dry-run"
else
    bad "sweep.sh --dry-run"
fi
expect "sweep.sh --dry-run: an estimate" has "$T/plan.out" '^estimated duration on an H200: about'
expect "sweep.sh --dry-run: a split suggested past --max-minutes" has "$T/plan.out" 'split it into'
expect "sweep.sh --dry-run: the old build's missing --spin-us said" \
    has "$T/plan.out" '03_flash2@old: its --help has no --spin-us'

# The run with a baseline: every runner at --spin-us 0 (the old build has none), and each
# also at 200 us (--spin-compare), rows marked @spin200, but for the old build without it.
# shellcheck disable=SC2054 # the commas are in the option values
SW=(bench/sweep.sh --build "$T/build" --stages 03_flash2,08_intra_wg_overlap --seqlens 512,16k
    --head-dims 64,256 --repeats 2 --iters 3 --warmup 1 ${nopeers[@]+"${nopeers[@]}"})
run_to "$T/s.out" "${SW[@]}" --baseline "$T/old:old" --spin-us 0 --spin-compare 200 \
    --out "$T/out/s.csv" && rc=0 || rc=$?
expect "sweep.sh with --baseline, --spin-us 0 and --spin-compare: exit 0" rc_is "$rc" 0
count() { awk -F, -v s="$2" 'NR > 1 && $1 == s { n++ } END { print n + 0 }' "$1"; }
for r in 03_flash2 08_intra_wg_overlap 03_flash2@old 08_intra_wg_overlap@old \
    03_flash2@spin200 08_intra_wg_overlap@spin200 08_intra_wg_overlap@old-spin200; do
    expect "sweep.sh: 16 rows of $r (8 points x 2 repeats)" \
        test "$(count "$T/out/s.csv" "$r")" -eq 16
done
expect "sweep.sh: no 03_flash2@old-spin200 (the old build has no --spin-us)" \
    test "$(count "$T/out/s.csv" 03_flash2@old-spin200)" -eq 0
expect "sweep.sh: the old header's rows mapped to the run's columns" \
    test "$(awk -F, '$1 == "03_flash2@old" && $2 != "fwd"' "$T/out/s.csv" | wc -l)" -eq 0
expect "sweep.sh: every row has the header's field count" \
    test "$(awk -F, 'NR == 1 { n = NF } NF != n' "$T/out/s.csv" | wc -l)" -eq 0
expect "sweep.sh .meta: spin_us" has "$T/out/s.meta" '^spin_us=0$'
expect "sweep.sh .meta: the baseline's commit" has "$T/out/s.meta" '^baseline_commit=old: old1111$'
expect "sweep.sh .meta: where the time went" has "$T/out/s.meta" '^time_stage_programs_s='
expect "sweep.sh .meta: the old build timed without the spin, noted" \
    has "$T/out/s.meta" '^note=03_flash2@old: its --help has no --spin-us'
if ((has_python)); then
    for r in fa3 sdpa_flash sdpa_cudnn sdpa_efficient fa3@spin200; do
        expect "sweep.sh: 16 rows of $r" test "$(count "$T/out/s.csv" "$r")" -eq 16
    done
    expect "sweep.sh .meta: FA3's build switches" \
        has "$T/out/s.meta" '^fa3_build_switches_on=FLASHATTENTION_DISABLE_BACKWARD'
fi

# --part and join_sweeps.sh.
for k in 1 2; do
    run_to "$T/part$k.out" "${SW[@]}" --part "$k/2" --out "$T/out/part$k.csv" || true
done
run_to "$T/j.out" bench/join_sweeps.sh "$T/out/joined.csv" "$T/out/part1.csv" "$T/out/part2.csv" &&
    rc=0 || rc=$?
expect "join_sweeps.sh: exit 0" rc_is "$rc" 0
expect "join_sweeps.sh: every row of both parts" test "$(($(wc -l <"$T/out/joined.csv") - 1))" -eq \
    "$(($(wc -l <"$T/out/part1.csv") + $(wc -l <"$T/out/part2.csv") - 2))"
expect "join_sweeps.sh: 2 rows per runner and point" \
    has "$T/out/joined.meta" '^rows_per_runner_and_point=2$'
expect "join_sweeps.sh: the parts in the .meta" \
    has "$T/out/joined.meta" '^part2_command=bench/sweep.sh'
expect "join_sweeps.sh: direction kept for the tables" has "$T/out/joined.meta" '^direction=fwd$'
run_to "$T/j2.out" bench/join_sweeps.sh "$T/out/j2.csv" "$T/out/part1.csv" "$T/out/s.csv" &&
    rc=0 || rc=$?
expect "join_sweeps.sh: parts of different sweeps refused (exit 1)" rc_is "$rc" 1
run_to "$T/j3.out" bench/join_sweeps.sh "$T/out/j3.csv" "$T/out/part1.csv" "$T/out/part1.csv" &&
    rc=0 || rc=$?
expect "join_sweeps.sh: a part given twice refused (exit 1)" rc_is "$rc" 1
expect "join_sweeps.sh: a part given twice, said" has "$T/j3.out" 'part 1/2 given twice'
expect "join_sweeps.sh: the part left out, said" has "$T/j3.out" 'part(s) 2/2 missing'
expect "join_sweeps.sh: nothing written when refused" test ! -e "$T/out/j3.csv"
run_to "$T/j4.out" bench/join_sweeps.sh --force "$T/out/j4.csv" "$T/out/part1.csv" \
    "$T/out/part1.csv" && rc=0 || rc=$?
expect "join_sweeps.sh --force: joined anyway" rc_is "$rc" 0
expect "join_sweeps.sh --force: the duplicate in the .meta" \
    has "$T/out/j4.meta" '^note=joined with --force: part 1/2 given twice'
run_to "$T/j5.out" bench/join_sweeps.sh /proc/selftest.csv "$T/out/part1.csv" \
    "$T/out/part2.csv" && rc=0 || rc=$?
expect "join_sweeps.sh: an OUT that cannot be written is exit 2" rc_is "$rc" 2
expect "join_sweeps.sh: an OUT that cannot be written, said" \
    has "$T/j5.out" '^join_sweeps.sh: cannot write /proc/selftest.csv'

# gen_doc_tables.sh: the spin table from a sweep with --spin-compare.
printf 'x\n<!-- gen:spin-table %s -->\n<!-- gen:end -->\n' "$T/out/s.csv" >"$T/D.md"
if run_to "$T/d.out" scripts/gen_doc_tables.sh "$T/D.md"; then
    ok "gen_doc_tables.sh spin-table"
else
    bad "gen_doc_tables.sh spin-table"
fi
expect "gen_doc_tables.sh spin-table: the run's spin, 0 us, and 200 us" \
    has "$T/D.md" '| 0 µs (the run'"'"'s) | 200 µs |'
expect "gen_doc_tables.sh --check: up to date" scripts/gen_doc_tables.sh --check "$T/D.md"

# compare.sh
run_to "$T/c.out" bench/compare.sh "$T/out/s.csv" old && rc=0 || rc=$?
expect "compare.sh CSV old: exit 0" rc_is "$rc" 0
expect "compare.sh: a summary per stage" has "$T/c.out" '^  08_intra_wg_overlap  8 points:'
run_to "$T/c2.out" bench/compare.sh "$T/out/s.csv" nosuchtag && rc=0 || rc=$?
expect "compare.sh: an absent tag is exit 1" rc_is "$rc" 1
run_to "$T/c3.out" bench/compare.sh "$T/out/s.csv" old --against @old && rc=0 || rc=$?
expect "compare.sh TAG --against TAG: exit 2" rc_is "$rc" 2
expect "compare.sh TAG --against TAG: said" has "$T/c3.out" '^compare.sh: --against old is TAG'
run_to "$T/c4.out" bench/compare.sh "$T/out/s.csv" old --against && rc=0 || rc=$?
expect "compare.sh --against without a tag: exit 2" rc_is "$rc" 2
expect "compare.sh --against without a tag: said" \
    has "$T/c4.out" '^compare.sh: --against needs a tag$'

# e4m3 (issue 13): stage 10 in e4m3 with --stage-args beside stage 09 in bf16 (--beside),
# the FA3 peer in both; a stage that does not take the dtype is said once, not run. The
# stand-in of stage 10 here takes V transposed only (FAKE_NEEDS_VT; the real stage takes
# both layouts), so that a stage refusing a layout is tested: said once, every run refused.
mkdir -p "$T/e8/bin"
mk "$T/e8" 09_persistent FAKE_DTYPES=bf16/fp16 FAKE_RATE=560
mk "$T/e8" 10_fp8 FAKE_DTYPES=e4m3 FAKE_NEEDS_VT=1 FAKE_RATE=900
# shellcheck disable=SC2054 # the commas are in the option values
E8=(bench/sweep.sh --build "$T/e8" --dtype e4m3 --stages 09_persistent,10_fp8 --seqlens 2k,8k
    --head-dims 128,256 --repeats 2 --iters 2 --warmup 0 ${nopeers[@]+"${nopeers[@]}"})
for bad_opt in "--dtype e5m2" "--stage-args --causal" "--stage-args --dtype=bf16" \
    "--beside e4m3:09_persistent" "--beside bf16" "--beside bf16:nosuch" \
    "--beside bf16:09_persistent --spin-compare 0"; do
    # shellcheck disable=SC2086 # the options are split on purpose
    run_to "$T/e8.out" "${E8[@]}" $bad_opt --dry-run && rc=0 || rc=$?
    expect "sweep.sh e4m3 ${bad_opt:0:40}: exit 2" rc_is "$rc" 2
    expect "sweep.sh e4m3 ${bad_opt:0:40}: its own message" has "$T/e8.out" '^sweep.sh: '
done
run_to "$T/e8.out" "${E8[@]}" --out "$T/out/e8novt.csv" && rc=0 || rc=$?
expect "sweep.sh e4m3, a stage refusing a row-major V: every run refused, exit 2" \
    rc_is "$rc" 2
expect "sweep.sh e4m3, a stage refusing a row-major V: said once, naming --fp8-vt" \
    test "$(grep -c '10_fp8 refused .*give --fp8-vt' "$T/e8.out")" -eq 1
run_to "$T/e8.out" "${E8[@]}" --stage-args "--fp8-vt --fp8-scaling per-head" \
    --beside bf16:09_persistent,fa3 --out "$T/out/e8.csv" && rc=0 || rc=$?
expect "sweep.sh --dtype e4m3 --stage-args --beside: exit 0" rc_is "$rc" 0
expect "sweep.sh e4m3: a stage without e4m3 said once, not run" \
    test "$(grep -c 'not run at e4m3, which their --help does not list.*09_persistent (bf16/fp16)' \
        "$T/e8.out")" -eq 1
expect "sweep.sh e4m3: 16 rows of 10_fp8, dtype e4m3" \
    test "$(grep -c '^10_fp8,fwd,.*,e4m3,' "$T/out/e8.csv")" -eq 16
expect "sweep.sh e4m3: no unmarked 09_persistent rows" \
    test "$(count "$T/out/e8.csv" 09_persistent)" -eq 0
expect "sweep.sh --beside: 16 rows of 09_persistent@bf16, dtype bf16" \
    test "$(grep -c '^09_persistent@bf16,fwd,.*,bf16,' "$T/out/e8.csv")" -eq 16
expect "sweep.sh e4m3: every row has the header's field count" \
    test "$(awk -F, 'NR == 1 { n = NF } NF != n' "$T/out/e8.csv" | wc -l)" -eq 0
expect "sweep.sh e4m3 .meta: the stage args" \
    has "$T/out/e8.meta" '^stage_args=--fp8-vt --fp8-scaling per-head$'
expect "sweep.sh e4m3 .meta: the command with --stage-args quoted" \
    has "$T/out/e8.meta" '^command=bench/sweep.sh .*--stage-args "--fp8-vt --fp8-scaling per-head"'
expect "sweep.sh e4m3 .meta: what is timed" has "$T/out/e8.meta" '^timed=.*quantization'
expect "sweep.sh e4m3 .meta: V transposed outside the time, said" \
    has "$T/out/e8.meta" '^note=e4m3 with --fp8-vt: '
expect "sweep.sh e4m3: the stage args reached the program" \
    has "$(ls "$T"/e8/sweep/fa3_fwd_*.log | tail -n 1)" \
        '^=== stage 10_fp8 .*--dtype e4m3 --fp8-vt --fp8-scaling per-head --bench'
expect "sweep.sh --beside: no stage args for the bf16 runs" \
    hasnt "$(ls "$T"/e8/sweep/fa3_fwd_*.log | tail -n 1)" '^=== stage 09_persistent@bf16 .*fp8'
if ((has_python)); then
    expect "sweep.sh e4m3: 16 rows of fa3 in e4m3" \
        test "$(grep -c '^fa3,fwd,.*,e4m3,' "$T/out/e8.csv")" -eq 16
    expect "sweep.sh --beside fa3: 16 rows of fa3@bf16" \
        test "$(grep -c '^fa3@bf16,fwd,.*,bf16,' "$T/out/e8.csv")" -eq 16
    expect "sweep.sh e4m3: no SDPA rows" test "$(grep -c '^sdpa_' "$T/out/e8.csv")" -eq 0
    expect "sweep.sh e4m3: the SDPA peers left out, said once" \
        test "$(grep -c 'not run at e4m3: SDPA has no e4m3 path' "$T/e8.out")" -eq 1
    run_to "$T/c5.out" bench/compare.sh "$T/out/e8.csv" --versus fa3 && rc=0 || rc=$?
    expect "compare.sh --versus fa3: exit 0" rc_is "$rc" 0
    expect "compare.sh --versus fa3: stage 10 per point, over FA3's e4m3" \
        has "$T/c5.out" '^fwd  256 .* 8192  10_fp8 (e4m3) .* 0\.7[0-9]*  '
    expect "compare.sh --versus fa3: a summary per runner" \
        has "$T/c5.out" '^  10_fp8 (e4m3)  *8 points:'
fi
run_to "$T/c6.out" bench/compare.sh "$T/out/e8.csv" --versus 09_persistent@bf16 && rc=0 || rc=$?
expect "compare.sh --versus 09_persistent@bf16: exit 0" rc_is "$rc" 0
expect "compare.sh --versus: e4m3 meets bf16 at the same shape (the FP8 speed-up)" \
    has "$T/c6.out" '^  10_fp8 (e4m3)  *8 points: 8 faster, .* median 1\.6'
run_to "$T/c7.out" bench/compare.sh "$T/out/e8.csv" --versus nosuch && rc=0 || rc=$?
expect "compare.sh --versus an absent runner: exit 1, the runners named" \
    has "$T/c7.out" 'shares a point with nosuch (runners: 10_fp8, 09_persistent@bf16'
run_to "$T/c8.out" bench/compare.sh "$T/out/e8.csv" bf16 --versus fa3 && rc=0 || rc=$?
expect "compare.sh TAG --versus: exit 2" rc_is "$rc" 2
# Stage 10 as it is: V row-major by default (transposed in its kernel), no --fp8-vt; the
# .meta then has no note of a transpose left outside the time.
mkdir -p "$T/e8r/bin"
mk "$T/e8r" 10_fp8 FAKE_DTYPES=e4m3 FAKE_RATE=900
run_to "$T/e8r.out" bench/sweep.sh --build "$T/e8r" --dtype e4m3 --stages 10_fp8 \
    --seqlens 2k --head-dims 128 --repeats 1 --iters 2 --warmup 0 --no-peers \
    --stage-args "--fp8-scaling per-head" --out "$T/out/e8r.csv" && rc=0 || rc=$?
expect "sweep.sh e4m3, V row-major (no --fp8-vt): exit 0" rc_is "$rc" 0
expect "sweep.sh e4m3, V row-major: 2 rows of 10_fp8 (causal and not)" \
    test "$(grep -c '^10_fp8,fwd,.*,e4m3,' "$T/out/e8r.csv")" -eq 2
expect "sweep.sh e4m3, V row-major: no note of V transposed outside the time" \
    hasnt "$T/out/e8r.meta" '^note=e4m3 with --fp8-vt'

# bounds.sh: marked rows left out unless --tagged; columns aligned.
run_to "$T/b.out" bench/bounds.sh "$T/out/s.csv" || true
expect "bounds.sh: no marked rows by default" hasnt "$T/b.out" '@'
run_to "$T/bt.out" bench/bounds.sh "$T/out/s.csv" --tagged || true
expect "bounds.sh --tagged: the marked rows" has "$T/bt.out" '08_intra_wg_overlap@old-spin200'
aligned() {  # the TFLOP/s column ends at the same place in the header and every row
    awk '/^dir / { e = index($0, "TFLOP/s") + 6; next }
        e && /^(fwd|bwd) / { if (substr($0, e, 1) !~ /[0-9]/) bad = 1 }
        END { exit bad }' "$1"
}
expect "bounds.sh --tagged: columns aligned with 31-character names" aligned "$T/bt.out"
for bad_opt in "--copy-tbps abc" "--copy-tbps 0" "--flop-per-sm-clock 0" "--clock-mhz -5" \
    "--copy-tbps 1e999" "--csv /proc/selftest.csv" "--csv $T/out/s.csv" "--copy-tbps"; do
    # shellcheck disable=SC2086 # the options are split on purpose
    run_to "$T/b2.out" bench/bounds.sh "$T/out/s.csv" $bad_opt && rc=0 || rc=$?
    expect "bounds.sh $bad_opt: exit 2" rc_is "$rc" 2
    expect "bounds.sh $bad_opt: its own message" has "$T/b2.out" '^bounds.sh: '
done
run_to "$T/b2.out" bench/bounds.sh "$T/out" && rc=0 || rc=$?
expect "bounds.sh on a folder: exit 2, said" has "$T/b2.out" '^bounds.sh: .* is a directory'
# A CSV with a row cut short and one with text for its tflops: both skipped, said.
head -n 30 "$T/out/s.csv" >"$T/good.csv"
cp "$T/good.csv" "$T/cut.csv"
sed -n 31p "$T/out/s.csv" | cut -c1-40 >>"$T/cut.csv"
sed -n 32p "$T/out/s.csv" | awk -F, -v OFS=, '{ $20 = "abc"; print }' >>"$T/cut.csv"
run_to "$T/b3.out" bench/bounds.sh "$T/cut.csv" && rc=0 || rc=$?
expect "bounds.sh: rows cut short or not numeric: exit 0" rc_is "$rc" 0
expect "bounds.sh: rows cut short or not numeric: skipped, said" \
    has "$T/b3.out" 'warning: 2 row(s) of .*cut.csv skipped, .*(the first: line 31)'
bench/bounds.sh "$T/good.csv" >"$T/b4.out" 2>&1 || true
expect "bounds.sh: the skipped rows drawn as nothing (the table of the whole rows)" \
    test "$(grep -v warning "$T/b3.out")" == "$(cat "$T/b4.out")"

# ---------------------------------------------------------------------------------------
# varlen.sh: usage errors, the plan, a run (stage stand-ins with and without varlen).
mkdir -p "$T/vb/bin" "$T/vnogpu/bin"
mk "$T/vb" 09_persistent FAKE_VARLEN=1 FAKE_RATE=560
mk "$T/vb" 08_intra_wg_overlap FAKE_VARLEN=0
mk "$T/vb" 07_pingpong
mk "$T/vnogpu" 09_persistent FAKE_VARLEN=1 FAKE_NOGPU=1
for bad_opt in "--lengths 1,x" "--lengths 0,0" "--lengths-k 1,2" "--head-dims 100" \
    "--head-dims 64,64" "--peers cudnn" "--peers foo" "--iters 0" "--iters 1025" \
    "--spin-us 100001" "--stages bogus" "--causal 2" "--repeats 0" "--lengths" "--bogus" \
    "--lengths $(printf '1,%.0s' {1..1024})1" "--out /proc/selftest.csv"; do
    # shellcheck disable=SC2086 # the options are split on purpose
    run_to "$T/v.out" bench/varlen.sh --build "$T/vb" $bad_opt --dry-run && rc=0 || rc=$?
    expect "varlen.sh ${bad_opt:0:40}: exit 2" rc_is "$rc" 2
    expect "varlen.sh ${bad_opt:0:40}: its own message" has "$T/v.out" '^varlen.sh: '
done
run_to "$T/v.out" bench/varlen.sh --build "$T/vb" --dry-run \
    --stages 09_persistent,08_intra_wg_overlap,07_pingpong && rc=0 || rc=$?
expect "varlen.sh --dry-run: exit 0" rc_is "$rc" 0
expect "varlen.sh --dry-run: the batch" \
    has "$T/v.out" '^varlen batch: 16 sequences, query lengths 128..16384 (58944 rows); 6 cases'
expect "varlen.sh --dry-run: a stage without varlen skipped, said" \
    has "$T/v.out" '08_intra_wg_overlap has no variable-length batch (its --help: varlen: no)'
expect "varlen.sh --dry-run: an old build skipped, said" \
    has "$T/v.out" '07_pingpong: no varlen line in its --help'
expect "varlen.sh --dry-run: the plan" has "$T/v.out" \
    '^  hd 128 causal 1 (heads 16, batch 16, seqlen_q 16384, seqlen_k 16384): 09_persistent peers'
expect "varlen.sh --dry-run: nothing measured" has "$T/v.out" '^dry run: nothing measured$'
run_to "$T/v.out" bench/varlen.sh --build "$T/nobuild" --dry-run && rc=0 || rc=$?
expect "varlen.sh --dry-run without a build: stage 09 of the tree planned" \
    has "$T/v.out" '09_persistent: not built here'
run_to "$T/v.out" bench/varlen.sh --build "$T/vb" --stages 08_intra_wg_overlap --no-peers \
    && rc=0 || rc=$?
expect "varlen.sh: no stage with varlen and no peers is exit 2" rc_is "$rc" 2
run_to "$T/v.out" bench/varlen.sh --build "$T/nobuild" --stages none --dry-run && rc=0 || rc=$?
expect "varlen.sh --stages none: the peers alone" has "$T/v.out" '): peers(fa3,flash)$'
run_to "$T/v.out" bench/varlen.sh --build "$T/vnogpu" --repeats 1 --iters 2 --warmup 0 \
    ${nopeers[@]+"${nopeers[@]}"} --out "$T/out/vnogpu.csv" && rc=0 || rc=$?
expect "varlen.sh without a GPU: exit 0" rc_is "$rc" 0
expect "varlen.sh without a GPU: said once" \
    test "$(grep -c '^no GPU: stages skipped' "$T/v.out")" -eq 1
# shellcheck disable=SC2054 # the commas are in the option values
VR=(bench/varlen.sh --build "$T/vb" --stages 09_persistent,08_intra_wg_overlap --repeats 2
    --iters 2 --warmup 0 --spin-us 1000 --head-dims 64,128)
if ((has_python)); then
    run_to "$T/v.out" "${VR[@]}" --peers fa3,flash --out "$T/out/v.csv" && rc=0 || rc=$?
    expect "varlen.sh: exit 0" rc_is "$rc" 0
    for r in 09_persistent fa3 sdpa_flash; do
        expect "varlen.sh: 8 rows of $r (4 cases x 2 repeats)" \
            test "$(count "$T/out/v.csv" "$r")" -eq 8
    done
    expect "varlen.sh: no rows of the stage without varlen" \
        test "$(count "$T/out/v.csv" 08_intra_wg_overlap)" -eq 0
    expect "varlen.sh: every row has the header's field count" \
        test "$(awk -F, 'NR == 1 { n = NF } NF != n' "$T/out/v.csv" | wc -l)" -eq 0
    expect "varlen.sh: the order rotates (fa3 before the stage in repeat 2)" has "$T/v.out" \
        '^\[case 5/8, .*repeat 2/2, hd 64 non-causal (heads 32): sdpa_flash .* fa3 .* 09_persistent'
    expect "varlen.sh: the table pairs the stage with fa3 (ratio and its range)" \
        has "$T/v.out" '^128  causal     09_persistent .* 0\.9[0-9]* (0\.9[0-9]*-0\.9[0-9]*)$'
    expect "varlen.sh: the stage's and fa3's FLOPs agree" hasnt "$T/v.out" 'FLOPs differ'
    expect "varlen.sh .meta: the lengths" \
        has "$T/out/v.meta" '^varlen_seqlens_q=336,176,888,1704,3248,16384,6208,1232,8576,'
    expect "varlen.sh .meta: FA3's version" has "$T/out/v.meta" '^fa3_version=0.0.3$'
    expect "varlen.sh .meta: the skipped stage noted" \
        has "$T/out/v.meta" '^note=08_intra_wg_overlap has no variable-length batch'
    expect "varlen.sh .meta: the spin too short for SDPA on nested tensors, noted" \
        has "$T/out/v.meta" '^note=hd .*sdpa_flash: the GPU went idle before the host had'
    expect "varlen.sh .meta: fa3's spin long enough (not noted)" \
        hasnt "$T/out/v.meta" '^note=.*fa3: the GPU went idle'
else
    run_to "$T/v.out" "${VR[@]}" --no-peers --out "$T/out/v.csv" && rc=0 || rc=$?
    expect "varlen.sh --no-peers: exit 0" rc_is "$rc" 0
    expect "varlen.sh --no-peers: 8 rows of the stage" \
        test "$(count "$T/out/v.csv" 09_persistent)" -eq 8
fi
run_to "$T/v.out" "${VR[@]}" --no-peers --lengths 5,0,7 --lengths-k 9,3,7 --causal 1 \
    --out "$T/out/v2.csv" && rc=0 || rc=$?
expect "varlen.sh --lengths-k: the stage row's longest lengths" \
    has "$T/out/v2.csv" '^09_persistent,fwd,.*,3,7,9,32,32,64,bf16,1,'

# ---------------------------------------------------------------------------------------
# tests/gpu/run.sh: a FILTER that cannot select anything is a usage error.
run_to "$T/t.out" env FX_GPU_LOG_DIR="$T/gpu_logs" tests/gpu/run.sh "$T/build/bin" 'gpu_0[3-8' &&
    rc=0 || rc=$?
expect "tests/gpu/run.sh: a FILTER that is no regular expression is exit 2" rc_is "$rc" 2
expect "tests/gpu/run.sh: a FILTER that is no regular expression, said once" \
    test "$(grep -c 'not an extended regular expression' "$T/t.out")" -eq 1
run_to "$T/t.out" env FX_GPU_LOG_DIR="$T/gpu_logs" tests/gpu/run.sh "$T/build/bin" nosuchcase &&
    rc=0 || rc=$?
expect "tests/gpu/run.sh: a FILTER that matches no case is exit 2" rc_is "$rc" 2
expect "tests/gpu/run.sh: a FILTER that matches no case, said" has "$T/t.out" 'matches none of'

# ---------------------------------------------------------------------------------------
# run.sh, from a tree of its own (its logs, CSV and figure stay there), on stand-ins: one
# stage with a backward, one without.
mkdir -p "$T/tree/scripts" "$T/rgpu/bin" "$T/rcpu/bin"
ln -s "$root/run.sh" "$T/tree/run.sh"
ln -s "$root/scripts/stage_caps.sh" "$T/tree/scripts/stage_caps.sh"
mk "$T/rgpu" 03_flash2 FAKE_BWD=1
mk "$T/rgpu" 08_intra_wg_overlap
run_to "$T/r.out" "$T/tree/run.sh" --bin-dir "$T/rgpu/bin" --causal --bwd && rc=0 || rc=$?
expect "run.sh --causal --bwd: exit 0" rc_is "$rc" 0
expect "run.sh --bwd: a stage without a backward runs its forward, said in the table" \
    has "$T/r.out" '^08_intra_wg_overlap  *forward only: no backward'
expect "run.sh --bwd: its forward row" has "$T/r.out" '^08_intra_wg_overlap  *fwd '
expect "run.sh --bwd: the other stage's backward row" has "$T/r.out" '^03_flash2  *bwd '
mk "$T/rcpu" 03_flash2 FAKE_BWD=1 FAKE_NOGPU=1
mk "$T/rcpu" 08_intra_wg_overlap FAKE_NOGPU=1 FAKE_NO_CPU=1
run_to "$T/r2.out" "$T/tree/run.sh" --bin-dir "$T/rcpu/bin" --scale 9 && rc=0 || rc=$?
expect "run.sh without a GPU, --scale 9: exit 0" rc_is "$rc" 0
expect "run.sh without a GPU: a model refused only for the backward runs forward, said" \
    has "$T/r2.out" '^  03_flash2  *CPU model: pass (forward only: refused with the backward: '
expect "run.sh without a GPU: a stage without a CPU model said so" \
    has "$T/r2.out" '^  08_intra_wg_overlap  *built, no CPU model'
run_to "$T/r3.out" "$T/tree/run.sh" --bin-dir "$T/rcpu/bin" --bwd && rc=0 || rc=$?
expect "run.sh without a GPU, --bwd: exit 0" rc_is "$rc" 0
expect "run.sh without a GPU, --bwd: no stage refused for it" \
    hasnt "$T/r3.out" 'there is no backward'

# run.sh and a stage of e4m3 alone (stage 10): the ladder runs it in e4m3 with FP8_ARGS
# (none: V row-major, which stage 10 transposes in its kernel), its row marked and
# explained; --fp8-vt given to run.sh reaches it; a stage that refuses the row-major V
# (a stand-in, FAKE_NEEDS_VT) is refused, said in the table; without a GPU, its CPU model
# runs (--cpu in e4m3), a row of the table.
mkdir -p "$T/r8/bin" "$T/r8vt/bin" "$T/r8cpu/bin"
mk "$T/r8" 09_persistent FAKE_DTYPES=bf16/fp16
mk "$T/r8" 10_fp8 FAKE_DTYPES=e4m3
run_to "$T/r8.out" "$T/tree/run.sh" --bin-dir "$T/r8/bin" --seqlen 1024 && rc=0 || rc=$?
expect "run.sh with stage 10: exit 0" rc_is "$rc" 0
expect "run.sh with stage 10: its row marked e4m3" has "$T/r8.out" '^10_fp8 \[e4m3\]  *fwd '
expect "run.sh with stage 10: why it ran e4m3, V row-major" \
    has "$T/r8.out" \
    '^10_fp8  *ran e4m3, not bf16 (its --help: dtype: e4m3), V row-major (transposed in the'
expect "run.sh with stage 10: no --fp8-vt added" hasnt "$T/r8.out" 'fp8-vt'
expect "run.sh with stage 10: what its previous-stage column compares" \
    has "$T/r8.out" 'max err vs previous compares it with the stage named there, run in bf16'
expect "run.sh with stage 10: not refused for bf16" hasnt "$T/r8.out" 'dtype bf16 is not supported'
run_to "$T/r8b.out" "$T/tree/run.sh" --bin-dir "$T/r8/bin" --dtype e4m3 --seqlen 1024 || true
expect "run.sh --dtype e4m3: stage 10 runs (not refused), its row unmarked" \
    has "$T/r8b.out" '^10_fp8  *fwd '
expect "run.sh --dtype e4m3: a stage without e4m3 refuses, said in the table" \
    has "$T/r8b.out" '^09_persistent  *no row: exit 2 .*dtype e4m3 is not supported'
mk "$T/r8vt" 09_persistent FAKE_DTYPES=bf16/fp16
mk "$T/r8vt" 10_fp8 FAKE_DTYPES=e4m3 FAKE_NEEDS_VT=1
run_to "$T/r8v.out" "$T/tree/run.sh" --bin-dir "$T/r8vt/bin" --seqlen 1024 && rc=0 || rc=$?
expect "run.sh, a stage that refuses a row-major V: exit 0 (another stage ran)" rc_is "$rc" 0
expect "run.sh, a stage that refuses a row-major V: said in the table, naming --fp8-vt" \
    has "$T/r8v.out" '^10_fp8  *no row: exit 2 .*give --fp8-vt'
run_to "$T/r8v.out" "$T/tree/run.sh" --bin-dir "$T/r8vt/bin" --dtype e4m3 --fp8-vt \
    --seqlen 1024 && rc=0 || rc=$?
expect "run.sh --dtype e4m3 --fp8-vt: the option reaches the stage, exit 0" rc_is "$rc" 0
expect "run.sh --dtype e4m3 --fp8-vt: its row" has "$T/r8v.out" '^10_fp8  *fwd '
mk "$T/r8cpu" 03_flash2 FAKE_NOGPU=1 FAKE_DTYPES=bf16/fp16
mk "$T/r8cpu" 10_fp8 FAKE_DTYPES=e4m3 FAKE_NOGPU=1
run_to "$T/r8c.out" "$T/tree/run.sh" --bin-dir "$T/r8cpu/bin" && rc=0 || rc=$?
expect "run.sh without a GPU, stage 10: exit 0" rc_is "$rc" 0
expect "run.sh without a GPU: stage 10's CPU model runs, in e4m3" \
    has "$T/r8c.out" '^10_fp8 cpu model fwd: (stand-in) dtype e4m3$'
expect "run.sh without a GPU: stage 10's CPU model in the table" \
    has "$T/r8c.out" '^  10_fp8  *CPU model: pass'

# ---------------------------------------------------------------------------------------
# gen_readme_results.sh on a README of its own.
printf '# x\n<!-- results:begin -->\n<!-- results:end -->\n%s\n%s\n' \
    '<!-- results-bwd:begin -->' '<!-- results-bwd:end -->' >"$T/R.md"
if run_to "$T/g.out" scripts/gen_readme_results.sh "$T/out/s.csv" "$T/R.md"; then
    ok "gen_readme_results.sh"
else
    bad "gen_readme_results.sh"
fi
expect "gen_readme_results.sh: no marked rows by default" hasnt "$T/R.md" '@old'
expect "gen_readme_results.sh --check: up to date" \
    scripts/gen_readme_results.sh "$T/out/s.csv" "$T/R.md" --check
if ((has_python)); then
    expect "gen_readme_results.sh: an FA3 column" has "$T/R.md" '| FA3 |'
    expect "gen_readme_results.sh: the fastest stage over FA3" has "$T/R.md" 'fastest stage ÷ FA3 |'
    # shellcheck disable=SC2016 # Markdown's backticks
    expect "gen_readme_results.sh: each stage over FA3" \
        has "$T/R.md" '`08_intra_wg_overlap` ÷ FA3 |'
    expect "gen_readme_results.sh: no spin stated (--spin-us 0)" \
        has "$T/R.md" 'Timed without the spin (`--spin-us 0`)'
fi
sed -i 's/^| 64 | no | 512 | [0-9]*/| 64 | no | 512 | 1/' "$T/R.md"
run_to "$T/g2.out" scripts/gen_readme_results.sh "$T/out/s.csv" "$T/R.md" --check && rc=0 || rc=$?
expect "gen_readme_results.sh --check: a changed cell is exit 1" rc_is "$rc" 1
# shellcheck disable=SC2016 # Markdown's backticks
expect "gen_readme_results.sh: the main table's figures are --readme's" \
    has "$T/R.md" 'Figures: `bench/plot.sh --readme '
sum_r=$(cksum <"$T/R.md")
run_to "$T/g3.out" scripts/gen_readme_results.sh "$T/out/s.csv" "$T/R.md" --direction bwd &&
    rc=0 || rc=$?
expect "gen_readme_results.sh --direction bwd without bwd rows: exit 1" rc_is "$rc" 1
expect "gen_readme_results.sh --direction bwd without bwd rows: said" \
    has "$T/g3.out" 'has no backward (bwd) rows.*nothing written'
run_to "$T/g4.out" scripts/gen_readme_results.sh "$T/cut.csv" "$T/R.md" && rc=0 || rc=$?
expect "gen_readme_results.sh: a row cut short refused (exit 2)" rc_is "$rc" 2
expect "gen_readme_results.sh: a row cut short, its line said" \
    has "$T/g4.out" 'cut.csv: line 31 has .* fields'
expect "gen_readme_results.sh: nothing written when refused" test "$(cksum <"$T/R.md")" == "$sum_r"
run_to "$T/g5.out" scripts/gen_readme_results.sh "$T/out/s.csv" "$T/R.md" --section &&
    rc=0 || rc=$?
expect "gen_readme_results.sh --section without a name: exit 2" rc_is "$rc" 2
expect "gen_readme_results.sh --section without a name: said" \
    has "$T/g5.out" '^gen_readme_results.sh: --section needs a name$'
printf '# x\n<!-- extra:begin -->\n<!-- extra:end -->\n' >"$T/R2.md"
run_to "$T/g6.out" scripts/gen_readme_results.sh "$T/out/part1.csv" "$T/R2.md" --section extra ||
    true
# shellcheck disable=SC2016 # Markdown's backticks
expect "gen_readme_results.sh --section: figures named after the CSV, not --readme's" \
    has "$T/R2.md" 'Figures: `bench/plot.sh [^`]*part1.csv` (named after the CSV)'
expect "gen_readme_results.sh --section: no --readme" hasnt "$T/R2.md" 'plot.sh --readme'
expect "gen_readme_results.sh: the spin stated (the sweep's default)" \
    has "$T/R2.md" 'kept busy for 1000 µs'

# plot.sh: bad inputs said plainly; another CSV's figures named after it.
: >"$T/empty.csv"
head -n 1 "$T/out/s.csv" >"$T/header.csv"
echo "not, a, sweep" >"$T/junk.csv"
sed -n 31p "$T/out/s.csv" | awk -F, -v OFS=, '{ $20 = "abc"; print }' >"$T/nonnum.csv"
cat "$T/good.csv" "$T/nonnum.csv" >"$T/text.csv"
for case in "empty.csv 2 is empty" "header.csv 1 has a header and no rows" \
    "junk.csv 2 is not a sweep CSV" "cut.csv 1 line 31 has [0-9]* fields, the header" \
    "text.csv 1 line 31: tflops is \"abc\", not a number"; do
    read -r f want text <<<"$case"
    run_to "$T/pl.out" bench/plot.sh "$T/$f" "$T/figs" && rc=0 || rc=$?
    expect "plot.sh $f: exit $want" rc_is "$rc" "$want"
    expect "plot.sh $f: says it $text" has "$T/pl.out" "$text"
done
if command -v gnuplot >/dev/null 2>&1; then
    sums_before=$(cat plots/fa3_*.svg plots/fa3_*.png | cksum)
    if run_to "$T/pl2.out" bench/plot.sh "$T/out/s.csv" "$T/figs"; then
        ok "plot.sh"
    else
        bad "plot.sh"
    fi
    expect "plot.sh: figures named after the CSV" test -s "$T/figs/s_fwd_hd64_causal.png"
    expect "plot.sh: the README's figures untouched" \
        test "$(cat plots/fa3_*.svg plots/fa3_*.png | cksum)" == "$sums_before"
    expect "plot.sh on a sweep's CSV: --readme suggested, saying what it overwrites" \
        has "$T/pl2.out" 'bench/plot.sh --readme .*s.csv would overwrite'
    # One figure that gnuplot fails to draw: exit 1, said.
    mkdir -p "$T/gp"
    printf '#!/usr/bin/env bash\n%s\n%s\n' \
        '[[ " $* " != *" 256 1 "* ]] || { echo "gnuplot stand-in: fails" >&2; exit 1; }' \
        "exec $(command -v gnuplot) \"\$@\"" >"$T/gp/gnuplot"
    chmod +x "$T/gp/gnuplot"
    run_to "$T/pl5.out" env PATH="$T/gp:$PATH" bench/plot.sh "$T/out/s.csv" "$T/figs/f" &&
        rc=0 || rc=$?
    expect "plot.sh: a figure that fails is exit 1" rc_is "$rc" 1
    expect "plot.sh: a figure that fails, said" has "$T/pl5.out" '1 figure(s) failed, 3 drawn'
    if run_to "$T/pl3.out" bench/plot.sh "$T/out/s.csv" --out "$T/figs/tagged" --tagged; then
        ok "plot.sh --tagged --out"
    else
        bad "plot.sh --tagged --out"
    fi
    expect "plot.sh --out: the prefix" test -s "$T/figs/tagged_fwd_hd256_noncausal.svg"
    run_to "$T/pl4.out" bench/plot.sh plots/data/ablation_08_2026-12-01_nvidia-h200.csv \
        "$T/figs" || true
    expect "plot.sh on the ablation: one bar per variant" \
        has "$T/figs/ablation_08_2026-12-01_nvidia-h200_fwd_hd128_noncausal.svg" 'no-pingpong'
    expect "plot.sh on the ablation: 3 repeats each, not 12" \
        has "$T/figs/ablation_08_2026-12-01_nvidia-h200_fwd_hd128_noncausal.svg" \
            'median of 3 repeats'
    expect "plot.sh on the ablation: no --readme suggested" hasnt "$T/pl4.out" '--readme'
else
    echo "selftest: gnuplot not found: the figures' part is skipped"
fi

echo "selftest: $passed passed, $failed failed"
((failed == 0))
