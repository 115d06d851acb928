#!/usr/bin/env bash
# test.sh — build everything and run every test: unit (Check, CPU), ptx (PTX and ptxas
# reports, CPU), course (the course kit's assignments and grader, CPU: docs/course.md) and
# gpu (each stage's --matrix; exit 77 without a GPU is a skip).
#
#   ./test.sh
#   FX_CUDA_ARCHS=all ./test.sh    build the portable stages for every architecture (the
#                                  default: this machine's GPU, or sm_90 without one)
#   FX_REQUIRE_GPU=1 ./test.sh     a missing GPU fails the gpu tests instead of skipping
#
# Configures with -DFX_REQUIRE_CHECK=ON (no Check, no tests: the configure fails), builds
# with every core, runs `ctest --test-dir build --output-on-failure -j N` (N = the cores; the
# gpu tests take one at a time: RESOURCE_LOCK gpu), then prints the
# build time and the counts per label. Exit status: ctest's (non-zero on any failure).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

# shellcheck source=scripts/setup.sh
source scripts/setup.sh
# shellcheck source=scripts/stage_caps.sh
source scripts/stage_caps.sh

cmake -S . -B build -DFX_REQUIRE_CHECK=ON ${FX_CUDA_ARCHS:+"-DFX_CUDA_ARCHS=$FX_CUDA_ARCHS"}
build_start=$(date +%s)
cmake --build build -j"$(nproc)"
build_seconds=$(($(date +%s) - build_start))

log=build/ctest.log
set +e
ctest --test-dir build --output-on-failure -j"$(nproc)" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

# Per label: passed, failed, skipped, from this run's lines
#   "  3/12 Test  #3: unit_test_check ......   Passed    0.01 sec"
#   "  9/12 Test  #9: gpu_01_naive ........***Skipped   0.02 sec"
# and the label's tests from `ctest -N -L`.
echo
echo "build: ${build_seconds} s (cmake --build build -j$(nproc))"
gpu_skipped=0
for label in unit ptx course gpu; do
    counts=$(ctest --test-dir build -N -L "^${label}\$" | awk -v label="$label" '
        FNR == NR { if ($1 == "Test" && $2 ~ /^#/) want[$3] = 1; next }
        / Test +#[0-9]+: / {
            name = $0; sub(/.* Test +#[0-9]+: /, "", name); sub(/ .*/, "", name)
            if (!(name in want)) next
            n++
            if ($0 ~ /\*\*\*Skipped/) skipped++
            else if ($0 ~ / Passed /) passed++
            else failed++
        }
        END {
            printf "%-5s %d tests: %d passed, %d failed, %d skipped\n", label, n, passed, failed,
                   skipped
        }' - "$log")
    echo "$counts"
    if [[ $label == gpu && $counts =~ ([0-9]+)\ skipped ]]; then gpu_skipped=${BASH_REMATCH[1]}; fi
done
# Why the gpu tests were skipped, in the programs' own words, one line per reason (a GPU
# without sm_90a skips stages 04-10 only): each stage asked once on a tiny problem.
if ((gpu_skipped > 0)); then
    declare -A reason_stages=()
    for bin in build/bin/stage_*; do
        [[ -x $bin ]] || continue
        # In the stage's first dtype (its --help's "  dtype:" line; stage 10 takes e4m3 alone).
        dt=$(fx_stage_dtypes "$bin" || true)
        dt=${dt%%/*}
        out=$("$bin" --check --batch 1 --heads 1 --seqlen 64 --head-dim 64 \
            ${dt:+--dtype "$dt"} 2>&1 || true)
        reason=$(sed -n '/skipped: /{s/.*skipped: //p;q;}' <<<"$out")
        [[ -n $reason ]] || continue
        reason_stages[$reason]+=" ${bin##*/stage_}"
    done
    for reason in "${!reason_stages[@]}"; do
        echo "gpu   skipped:${reason_stages[$reason]}: $reason"
    done
fi
if ((rc != 0)); then
    echo "test.sh: some tests failed (ctest exit $rc); their output is above and in $log"
fi
exit "$rc"
