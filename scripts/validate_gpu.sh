#!/usr/bin/env bash
# validate_gpu.sh — everything a kernel change owes before it is called done, in one
# run on a GPU machine (an H200 here; DESIGN.md, "Tests"), with FX_REQUIRE_GPU=1 (a
# missing GPU is a failure, not a skip):
#   1. configure and build there (Check optional), so that CTest's paths are local;
#      with --prebuilt DIR, nothing is built: the programs are DIR/bin/stage_*;
#   2. the GPU tests: ctest -L gpu and -L ptx; with --prebuilt, tests/gpu/run.sh DIR/bin
#      where that runner exists, else each stage's --matrix;
#   3. compute-sanitizer memcheck, racecheck and synccheck on a small shape, every stage,
#      forward and (where the stage has one) backward;
#   4. the main job (./run.sh) on the default problem and on seqlen 16384 (batch 1,
#      heads 16, head_dim 128);
#   5. SASS of each stage (cuobjdump, which exists only there): the instructions that
#      its PTX test expects (tests/ptx/<id>.expect) must be in its SASS (cp.async.bulk
#      .tensor: UTMALDG/UTMASTG, wgmma: HGMMA (QGMMA for e4m3/e5m2), stmatrix: STSM,
#      setmaxnreg: USETMAXREG, mma.sync: HMMA,
#      ldmatrix: LDSM, cp.async: LDGSTS, ex2.approx: MUFU.EX2).
#
#   scripts/validate_gpu.sh [--quick] [--jobs N] [--prebuilt DIR]
#     --quick         skip step 4's seqlen-16384 run
#     --jobs N        run step 3's sanitizer runs N at a time (default 1): processes
#                     that share the one GPU, which changes no finding of a checker
#                     that times nothing; sanitizer.log keeps the serial order
#     --prebuilt DIR  programs built elsewhere (e.g. here: build on a CPU machine, carry
#                     build/bin, run with --prebuilt build): DIR/bin/stage_*, or
#                     DIR/stage_*; no configure, no build, no CTest (the ptx tests are
#                     CPU tests: ./test.sh where it was built)
#
# Logs go to $OUT (the device tool's folder, of which at most 8 files come back) or else
# build/validate, at most 8 files and no subfolder: build.log, tests.log, sanitizer.log,
# sass.txt, ladder_default.log, ladder_16k.log, ladder.csv (this run's ladder rows) and
# summary.txt (the summary table, which is also printed last).
# Exit status: 0 every step passed; 1 a step failed or could not run; 2 bad usage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() { echo "validate_gpu.sh: $*" >&2; exit 2; }

quick=0 prebuilt="" jobs=1
while (($# > 0)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --quick) quick=1 ;;
        --jobs)
            [[ $# -ge 2 && $2 =~ ^[1-9][0-9]?$ ]] || die "--jobs needs a count from 1 to 99"
            jobs=$2
            shift ;;
        --prebuilt)
            (($# >= 2)) || die "--prebuilt needs a folder (DIR/bin/stage_* or DIR/stage_*)"
            prebuilt=${2%/}
            shift ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done

if [[ -n $prebuilt ]]; then
    [[ -d $prebuilt ]] || die "--prebuilt $prebuilt: no such folder"
    if compgen -G "$prebuilt/bin/stage_*" >/dev/null; then
        bin_dir=$prebuilt/bin
    elif compgen -G "$prebuilt/stage_*" >/dev/null; then
        bin_dir=$prebuilt
    else
        die "--prebuilt $prebuilt: no stage programs in $prebuilt/bin or $prebuilt"
    fi
else
    bin_dir=build/bin
fi

out=${OUT:-build/validate}
mkdir -p "$out"
out_files=(build.log tests.log sanitizer.log sass.txt ladder_default.log ladder_16k.log
           ladder.csv summary.txt)
for f in "${out_files[@]}"; do rm -f "${out:?}/$f"; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

export FX_REQUIRE_GPU=1 FX_NO_INSTALL=1
# shellcheck source=scripts/stage_caps.sh
source scripts/stage_caps.sh

failed=0
lines=()                 # the summary's lines above and below the table
note() { lines+=("$1"); }
fail_note() { lines+=("$1"); failed=1; }

# A CUDA tool: PATH, then $CUDA_HOME/bin and /usr/local/cuda/bin.
find_tool() {
    local c
    for c in "$1" ${CUDA_HOME:+"$CUDA_HOME/bin/$1"} "/usr/local/cuda/bin/$1"; do
        if command -v "$c" >/dev/null 2>&1; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

if ! command -v nvidia-smi >/dev/null 2>&1; then
    gpu="nvidia-smi not found"
elif ! gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm \
        --format=csv,noheader 2>&1); then
    gpu="nvidia-smi failed: $gpu"
fi
note "gpu: ${gpu//$'\n'/; }"

# ------------------------------------------------------------------------------- build
if [[ -z $prebuilt ]]; then
    start=$(date +%s)
    rc=0
    {
        # shellcheck source=scripts/setup.sh
        source scripts/setup.sh &&
            cmake -S . -B build -DCMAKE_BUILD_TYPE=Release &&
            cmake --build build -j"$(nproc)"
    } >"$out/build.log" 2>&1 || rc=$?
    if ((rc == 0)); then
        note "build: ok in $(($(date +%s) - start)) s (build.log)"
    else
        fail_note "build: FAILED, exit $rc (build.log)"
        printf '%s\n' "${lines[@]}" | tee "$out/summary.txt"
        exit 1
    fi
else
    note "build: none, programs from $bin_dir (--prebuilt)"
fi

stages=()
for bin in "$bin_dir"/stage_*; do
    [[ -f $bin && -x $bin ]] && stages+=("$bin")
done
((${#stages[@]} > 0)) || {
    fail_note "no stage programs in $bin_dir"
    printf '%s\n' "${lines[@]}" | tee "$out/summary.txt"
    exit 1
}
declare -A matrix=() sanitizer=() sass=()

# --------------------------------------------------------------------------- GPU tests
if [[ -z $prebuilt ]]; then
    for label in gpu ptx; do
        rc=0
        ctest --test-dir build -L "^${label}\$" --output-on-failure >"$tmp/ctest.log" 2>&1 ||
            rc=$?
        cat "$tmp/ctest.log" >>"$out/tests.log"
        result=$(grep -E 'tests passed|tests failed' "$tmp/ctest.log" || true)
        result=${result##*$'\n'}
        if ((rc == 0)); then
            note "ctest -L $label: ${result:-exit 0} (tests.log)"
        else
            fail_note "ctest -L $label: ${result:-exit $rc} (tests.log)"
        fi
        if [[ $label == gpu ]]; then
            # "  3/9 Test  #3: gpu_03_flash2 ......   Passed   4.12 sec"
            for bin in "${stages[@]}"; do
                id=${bin##*/stage_}
                status=$(awk -v t="gpu_$id" '$0 ~ " Test +#[0-9]+: " t " " {
                    if ($0 ~ /\*\*\*Skipped/) s = "skip"; else if ($0 ~ / Passed /) s = "pass"
                    else s = "FAIL" } END { print s }' "$tmp/ctest.log")
                matrix[$id]=${status:--}
            done
        fi
    done
elif [[ -f tests/gpu/run.sh ]]; then
    rc=0
    bash tests/gpu/run.sh "$bin_dir" >"$out/tests.log" 2>&1 || rc=$?
    last=$(grep -v '^[[:space:]]*$' "$out/tests.log" || true)
    last=${last##*$'\n'}
    if ((rc == 0)); then
        note "tests/gpu/run.sh $bin_dir: pass (${last:-no output}) (tests.log)"
    else
        fail_note "tests/gpu/run.sh $bin_dir: exit $rc (${last:-no output}) (tests.log)"
    fi
    # The matrix column: each stage's gpu_<id> line ("PASS  gpu_05_wgmma  (...)").
    for bin in "${stages[@]}"; do
        id=${bin##*/stage_}
        status=$(awk -v t="gpu_$id" '$2 == t {
            s = ($1 == "PASS") ? "pass" : ($1 == "SKIP") ? "skip" : "FAIL" } END { print s }' \
            "$out/tests.log")
        matrix[$id]=${status:--}
    done
else
    for bin in "${stages[@]}"; do
        id=${bin##*/stage_}
        echo "=== $id --matrix ===" >>"$out/tests.log"
        rc=0
        "$bin" --matrix >>"$out/tests.log" 2>&1 || rc=$?
        case $rc in
            0) matrix[$id]=pass ;;
            *) matrix[$id]="FAIL ($rc)"; failed=1 ;;
        esac
    done
    note "matrix: each stage's --matrix (no tests/gpu/run.sh here) (tests.log)"
fi

# -------------------------------------------------------------------------- sanitizers
# Small shapes that reach every kernel configuration: each head_dim a stage builds (the
# Hopper stages run 3 consumer warpgroups at head_dim 64, 2 at 128 and 256, with other
# barrier counts), causal with seqlen_q < seqlen_k and GQA, fp16 at the last.
small=(--check --batch 1 --seqlen-q 70 --seqlen-k 90 --heads-q 4 --heads-kv 2 --causal)
shape_of() {  # head_dim (or an exact-path run) -> the extra arguments of that run
    case $1 in
        64) echo "--head-dim 64" ;;
        128) echo "--head-dim 128 --dtype fp16" ;;
        # logits ~3e7 at --qk-scale 1700: a few rows past 2^24 (a warp or warpgroup each);
        # ~1e10 at 1e5: every row
        exact_mixed) echo "--head-dim 128 --qk-scale 1700" ;;
        exact_all) echo "--head-dim 128 --qk-scale 100000" ;;
        *) echo "--head-dim $1" ;;
    esac
}
head_dims_of() {  # those of 64, 128, 256 a stage lists in its --help (a range: 64 only)
    local line d out=""
    line=$("$1" --help | sed -n 's/^  head_dim: *//p')
    [[ $line =~ ^[0-9/]+$ ]] || { echo 64; return; }
    for d in ${line//\// }; do
        case $d in 64 | 128 | 256) out+="${out:+ }$d" ;; esac
    done
    echo "${out:-64}"
}
if ! sanitizer_bin=$(find_tool compute-sanitizer); then
    fail_note "compute-sanitizer: not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"
fi
# Each run writes its own log and exit status ($tmp/san_<n>.log, .rc); up to --jobs run at
# once; the logs are then joined into sanitizer.log in the order of the runs.
san_runs=()   # "<n> <id> <tool> <head_dim>" per run, in the serial order
san_one() {   # n, then the command
    local n=$1 rc=0
    shift
    "$@" >"$tmp/san_$n.log" 2>&1 || rc=$?
    echo "$rc" >"$tmp/san_$n.rc"
}
n=0
for bin in "${stages[@]}"; do
    id=${bin##*/stage_}
    bwd=()
    if fx_stage_has_backward "$bin"; then bwd=(--bwd); fi
    read -r -a dims <<<"$(head_dims_of "$bin")"
    # A stage of e4m3 alone (stage 10) takes its inputs that way, V row-major (its default:
    # the kernel transposes V in shared memory, the path the sanitizers must see); it has no
    # exact path and no fp16 (the last --dtype given counts).
    fp8=()
    if [[ $("$bin" --help) == *$'\n  dtype:    e4m3\n'* ]]; then
        fp8=(--dtype e4m3)
    fi
    # Stages 03 on have the exact path (common/fx_exact_rows.cuh): its own runs, at logits
    # where some warps take it and others not, and where every row does.
    exact=()
    if [[ $id =~ ^(0[3-9]|[1-9][0-9])_ ]] && [[ " ${dims[*]} " == *" 128 "* ]] &&
        ((${#fp8[@]} == 0)); then
        exact=("exact_mixed" "exact_all")
    fi
    for tool in memcheck racecheck synccheck; do
        if [[ -z ${sanitizer_bin:-} ]]; then
            sanitizer[$id,$tool]="-"
            continue
        fi
        sanitizer[$id,$tool]=clean
        for d in "${dims[@]}" ${exact[@]+"${exact[@]}"}; do
            read -r -a extra <<<"$(shape_of "$d")"
            args=("${small[@]}" "${extra[@]}" ${fp8[@]+"${fp8[@]}"})
            # the backward too, except on the exact path's runs: a forward path alone
            [[ $d == exact_* ]] || args+=(${bwd[@]+"${bwd[@]}"})
            echo "=== $id $tool: ${args[*]} ===" >"$tmp/san_$n.head"
            while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
            san_one "$n" "$sanitizer_bin" --tool "$tool" --error-exitcode 3 "$bin" "${args[@]}" &
            san_runs+=("$n $id $tool $d")
            n=$((n + 1))
        done
    done
done
wait
for run in ${san_runs[@]+"${san_runs[@]}"}; do
    read -r n id tool d <<<"$run"
    cat "$tmp/san_$n.head" "$tmp/san_$n.log" >>"$out/sanitizer.log"
    rc=$(cat "$tmp/san_$n.rc" 2>/dev/null || echo "?")
    if [[ $rc != 0 ]]; then
        [[ ${sanitizer[$id,$tool]} == clean ]] && sanitizer[$id,$tool]="exit $rc (head_dim $d)"
        failed=1
    fi
done

# -------------------------------------------------------------------------------- SASS
# The SASS of each PTX instruction the ptx test expects, for the stage's own kernels:
# cuobjdump names each embedded cubin's source ("identifier = .../stages/<id>/x.cu");
# where it does not, the whole program is read (which holds the stages it checks against).
sass_of() {
    case $1 in
        cp.async.bulk.tensor.*shared::cluster.global*) echo UTMALDG ;;
        cp.async.bulk.tensor.*global.shared*) echo UTMASTG ;;
        # 8-bit operands run on the tensor cores' QGMMA form, 16-bit ones on HGMMA.
        wgmma.mma_async*.e4m3* | wgmma.mma_async*.e5m2*) echo QGMMA ;;
        wgmma.mma_async*) echo HGMMA ;;
        stmatrix*) echo STSM ;;
        setmaxnreg*) echo USETMAXREG ;;
        mma.sync*) echo HMMA ;;
        ldmatrix*) echo LDSM ;;
        cp.async.ca* | cp.async.cg*) echo LDGSTS ;;
        ex2.approx*) echo MUFU.EX2 ;;
    esac
}
families='HMMA|HGMMA|QGMMA|STSM|UTMALDG|UTMASTG|USETMAXREG|BAR\.ARV|BAR\.SYNC|LDSM|LDGSTS'
families+='|FFMA|MUFU\.EX2'
if ! cuobjdump_bin=$(find_tool cuobjdump); then
    fail_note "cuobjdump: not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"
fi
for bin in "${stages[@]}"; do
    id=${bin##*/stage_}
    if [[ -z ${cuobjdump_bin:-} ]]; then
        sass[$id]="-"
        continue
    fi
    rc=0
    "$cuobjdump_bin" -sass "$bin" >"$tmp/sass_all.txt" 2>&1 || rc=$?
    if ((rc != 0)); then
        sass[$id]="cuobjdump exit $rc"
        failed=1
        { echo "=== $id: cuobjdump -sass exit $rc ==="; tail -n 5 "$tmp/sass_all.txt"; } \
            >>"$out/sass.txt"
        continue
    fi
    scope="own kernels"
    awk -v id="/stages/$id/" '
        /^identifier = / { keep = index($0, id) > 0 }
        keep' "$tmp/sass_all.txt" >"$tmp/sass.txt"
    if [[ ! -s $tmp/sass.txt ]]; then
        cp "$tmp/sass_all.txt" "$tmp/sass.txt"
        scope="whole program"
    fi
    # Instruction counts of the families that tell the story, e.g. "HGMMA.64x128x16.F32 96".
    {
        echo "=== $id ($scope) ==="
        grep -oE "\\b($families)[.A-Za-z0-9_]*" "$tmp/sass.txt" | LC_ALL=C sort | uniq -c |
            sort -rn || true
    } >>"$out/sass.txt"
    missing=() present=()
    if [[ -f tests/ptx/$id.expect ]]; then
        declare -A want=()
        while IFS= read -r line || [[ -n $line ]]; do
            line=${line%%#*}
            line=${line#"${line%%[![:space:]]*}"}
            [[ -n $line && $line != !* ]] || continue
            s=$(sass_of "$line")
            [[ -n $s ]] && want[$s]=1
        done <"tests/ptx/$id.expect"
        for s in "${!want[@]}"; do
            n=$(grep -cE "\\b${s//./\\.}\\b" "$tmp/sass.txt" || true)
            if ((n > 0)); then present+=("$s $n"); else missing+=("$s"); fi
        done
        unset want
    fi
    if ((${#missing[@]})); then
        sass[$id]="MISSING ${missing[*]}"
        failed=1
    elif ((${#present[@]})); then
        sass[$id]="ok: $(printf '%s, ' "${present[@]}" | sed 's/, $//')"
    else
        sass[$id]="ok (nothing expected)"
    fi
    [[ $scope == "own kernels" ]] || sass[$id]+=" (whole program)"
done

# ---------------------------------------------------------------------------- main job
ladder=(./run.sh --skip-build)
[[ -z $prebuilt ]] || ladder=(./run.sh --bin-dir "$bin_dir")
rc=0
"${ladder[@]}" >"$out/ladder_default.log" 2>&1 || rc=$?
if ((rc == 0)); then
    note "main job, default problem: exit 0 (ladder_default.log)"
else
    fail_note "main job, default problem: exit $rc (ladder_default.log)"
fi
if ((!quick)); then
    rc=0
    "${ladder[@]}" --batch 1 --seqlen 16384 --heads 16 >"$out/ladder_16k.log" 2>&1 || rc=$?
    if ((rc == 0)); then
        note "main job, batch 1 seqlen 16384 heads 16: exit 0 (ladder_16k.log)"
    else
        fail_note "main job, batch 1 seqlen 16384 heads 16: exit $rc (ladder_16k.log)"
    fi
fi
# This run's rows only (run.sh prints "this run's rows: FILE" for each run), in one file:
# the committed CSVs under plots/data would come back too, past the 8 files.
for log in "$out"/ladder_*.log; do
    [[ -f $log ]] || continue
    csv=$(sed -n "s/^this run's rows: //p" "$log")
    [[ -n $csv && -s $csv ]] || continue
    if [[ -s $out/ladder.csv ]]; then
        tail -n +2 "$csv" >>"$out/ladder.csv"
    else
        cp "$csv" "$out/ladder.csv"
    fi
done

# ----------------------------------------------------------------------------- summary
for log in "$out/ladder_default.log" "$out/ladder_16k.log"; do
    [[ -f $log ]] || continue
    echo
    echo "--- ${log##*/} ---"
    sed -n '/^Ladder/,$p' "$log" | sed -n '1,30p'
done
{
    echo
    echo "--- summary (logs in $out/) ---"
    printf '%s\n' "${lines[@]:0:2}"
    printf '%-22s %-10s %-9s %-9s %-9s %s\n' stage matrix memcheck racecheck synccheck sass
    for bin in "${stages[@]}"; do
        id=${bin##*/stage_}
        printf '%-22s %-10s %-9s %-9s %-9s %s\n' "$id" "${matrix[$id]:--}" \
            "${sanitizer[$id,memcheck]:--}" "${sanitizer[$id,racecheck]:--}" \
            "${sanitizer[$id,synccheck]:--}" "${sass[$id]:--}"
    done
    if ((${#lines[@]} > 2)); then printf '%s\n' "${lines[@]:2}"; fi
    if ((failed)); then echo "result: FAIL"; else echo "result: PASS"; fi
} | tee "$out/summary.txt"
exit "$failed"
