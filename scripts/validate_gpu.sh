#!/usr/bin/env bash
# validate_gpu.sh — everything a kernel change owes before it is called done, in one
# run on a GPU machine (an H200 here; DESIGN.md, "Tests"):
#   1. configure and build there (Check optional), so that CTest's paths are local;
#   2. ctest -L gpu with FX_REQUIRE_GPU=1 (a missing GPU fails), and -L ptx;
#   3. compute-sanitizer memcheck, racecheck and synccheck on a small shape, every stage,
#      forward and backward;
#   4. the main job (./run.sh) on the default problem and on seqlen 16384
#      (batch 1, heads 16, head_dim 128);
#   5. SASS of each stage (cuobjdump, which exists only there), for the ptx story.
# Logs go to $OUT (the device tool's folder) or build/validate; the summary is printed last.
#
#   scripts/validate_gpu.sh [--quick]      --quick: skip step 4's seqlen-16384 run
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
out=${OUT:-build/validate}
mkdir -p "$out"
quick=0
[[ ${1:-} == --quick ]] && quick=1
export FX_REQUIRE_GPU=1 FX_NO_INSTALL=1
summary=()
note() { summary+=("$1"); }
# shellcheck source=scripts/stage_caps.sh
source scripts/stage_caps.sh

# At most 8 files come back from the device tool: keep to build.log, ctest.log,
# sanitizer.log, sass.txt, the two ladder logs and the ladder CSV.
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1)"

start=$(date +%s)
if cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > "$out/build.log" 2>&1 &&
   cmake --build build -j"$(nproc)" >> "$out/build.log" 2>&1; then
    note "build: ok in $(($(date +%s) - start)) s"
else
    note "build: FAILED (build.log)"
    printf '%s\n' "${summary[@]}"
    exit 1
fi

for label in gpu ptx; do
    ctest --test-dir build -L "^${label}\$" --output-on-failure > "$out/ctest_$label.tmp" 2>&1
    note "ctest -L $label: $(grep -E 'tests passed|tests failed' "$out/ctest_$label.tmp" | tail -n 1)"
    cat "$out/ctest_$label.tmp" >> "$out/ctest.log" && rm -f "$out/ctest_$label.tmp"
done

small=(--check --batch 1 --seqlen-q 70 --seqlen-k 90 --heads-q 4 --heads-kv 2 --head-dim 64 --causal)
for bin in build/bin/stage_*; do
    id=${bin##*/stage_}
    args=("${small[@]}")
    if fx_stage_has_backward "$bin"; then args+=(--bwd); fi
    for tool in memcheck racecheck synccheck; do
        log="$out/sanitizer.log"
        echo "=== $id $tool ===" >> "$log"
        compute-sanitizer --tool "$tool" --error-exitcode 3 "$bin" "${args[@]}" >> "$log" 2>&1
        rc=$?
        note "sanitizer $tool $id: $([[ $rc == 0 ]] && echo clean || echo "exit $rc")"
    done
    cuobjdump -sass "$bin" 2>/dev/null | grep -oE '\b(HMMA|HGMMA|UTMALDG|UTMASTG|USETMAXREG|BAR\.ARV|LDSM|LDGSTS|FFMA|MUFU\.EX2)[.A-Za-z0-9]*' |
        sort | uniq -c | sort -rn | sed -n '1,8p' > "$out/sass_$id.tmp"
    note "sass $id: $(awk '{printf "%s %s; ", $2, $1}' "$out/sass_$id.tmp")"
    { echo "=== $id ==="; cat "$out/sass_$id.tmp"; } >> "$out/sass.txt" && rm -f "$out/sass_$id.tmp"
done

./run.sh --skip-build > "$out/ladder_default.log" 2>&1
note "main job, default problem: exit $?"
if ((!quick)); then
    ./run.sh --skip-build --batch 1 --seqlen 16384 --heads 16 > "$out/ladder_16k.log" 2>&1
    note "main job, batch 1 seqlen 16384 heads 16: exit $?"
fi
# Only the CSVs these runs appended to (run.sh names each: "rows appended to FILE"); a
# glob over plots/data would bring back the committed ones too, past the 8 files.
sed -n 's/^rows appended to \(.*\) (logs in .*/\1/p' "$out"/ladder_*.log | sort -u |
    while read -r csv; do cp "$csv" "$out/"; done

echo
echo "--- ladder, default problem ---"
sed -n '/^Ladder/,$p' "$out/ladder_default.log" | sed -n '1,30p'
if ((!quick)); then
    echo "--- ladder, seqlen 16384 ---"
    sed -n '/^Ladder/,$p' "$out/ladder_16k.log" | sed -n '1,30p'
fi
echo "--- summary ---"
printf '%s\n' "${summary[@]}"
