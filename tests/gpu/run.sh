#!/usr/bin/env bash
# run.sh — runs the GPU test cases of tests/gpu/cases.txt straight from the stage programs,
# without CMake or CTest (on a GPU machine whose copy of the tree has other paths than the
# build's CTest files).
#
#   tests/gpu/run.sh BIN_DIR [FILTER]     run every case whose name matches FILTER
#   tests/gpu/run.sh --list BIN_DIR       print the cases, one "name<TAB>stage<TAB>timeout_s
#                                         <TAB>arguments" line each, and run nothing
#
# BIN_DIR holds the programs (build/bin/stage_*). FILTER is an extended regular expression
# (grep -E) over the case names, e.g. 'gpu_0[3-8]' or 'lse'. Each case prints one line
# (PASS, FAIL or SKIP, its name, its time) and writes its output to
# $FX_GPU_LOG_DIR/<name>.log (default: BIN_DIR/../gpu_logs); a failing case also prints
# the end of its log. Exit 77 of a program (no suitable GPU) is a SKIP, and a FAIL when
# FX_REQUIRE_GPU is set to anything but "" or "0" (the programs then exit 1 themselves).
# The stages' own settings (FX_SCHEDULER, FX_SCHED_ORDER, FX_ABLATION) are unset for every
# case that does not set them itself (env -u), so that a value exported in the caller's
# shell cannot change what a case tests; tests/CMakeLists.txt does the same.
# Exit status: 0 when no case failed, 1 when one did (or one's program is missing), 2 on
# bad usage (a FILTER that is not a regular expression, or that matches no case) or a
# malformed cases.txt.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cases_file=$here/cases.txt
# The settings a case's environment words may set, unset when it does not (keep in step with
# gpu_settings in tests/CMakeLists.txt).
settings=(FX_SCHEDULER FX_SCHED_ORDER FX_ABLATION)
env_word_re='^[A-Z_][A-Z0-9_]*='

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
die() {
    echo "run.sh: $*" >&2
    exit 2
}

list_only=0
if [[ ${1:-} == --list ]]; then
    list_only=1
    shift
fi
case ${1:-} in
    -h | --help) usage; exit 0 ;;
    '') usage >&2; exit 2 ;;
esac
bin_dir=$1
filter=${2:-}
(($# <= 2)) || die "one BIN_DIR and one FILTER (tests/gpu/run.sh --help)"
[[ -d $bin_dir ]] || die "$bin_dir is not a directory (give the build's bin folder)"
[[ -f $cases_file ]] || die "no $cases_file"
# The filter is checked once: grep -E exits 2 on a regular expression it cannot read.
if [[ -n $filter ]]; then
    set +e
    grep_err=$(grep -E -- "$filter" </dev/null 2>&1 >/dev/null)
    grep_rc=$?
    set -e
    ((grep_rc < 2)) ||
        die "FILTER '$filter' is not an extended regular expression (grep -E: ${grep_err#grep: })"
fi

require_gpu=0
[[ -n ${FX_REQUIRE_GPU:-} && ${FX_REQUIRE_GPU} != 0 ]] && require_gpu=1

# The stage ids of the programs in BIN_DIR, in name order (the reading order).
ids=()
for bin in "$bin_dir"/stage_*; do
    [[ -f $bin && -x $bin ]] && ids+=("${bin##*/stage_}")
done

# The expanded cases: one "name<TAB>stage<TAB>timeout<TAB>args" line each in $expanded,
# and a stage "-" for a line whose stages match no program (reported as a failure).
trim() {
    local s=$1
    s=${s#"${s%%[![:space:]]*}"}
    printf '%s' "${s%"${s##*[![:space:]]}"}"
}
expanded=()
skip_re='^[[:space:]]*(#|$)'
lineno=0 joined="" start=0
while IFS= read -r raw || [[ -n $raw ]]; do
    lineno=$((lineno + 1))
    ((start)) || start=$lineno
    if [[ $raw == *\\ ]]; then
        joined+="${raw%\\} "
        continue
    fi
    line="$joined$raw"
    joined="" at=$start start=0
    [[ $line =~ $skip_re ]] && continue
    IFS='|' read -r name pattern timeout args extra <<<"$line"
    name=$(trim "$name") pattern=$(trim "$pattern") timeout=$(trim "${timeout:-}")
    [[ -z ${extra:-} && -n $name && -n $pattern && $timeout =~ ^[0-9]+$ ]] ||
        die "$cases_file:$at: not 'name | stages | timeout_s | arguments': $line"
    # The arguments are split at blanks, nothing else: a quote or a backslash would be read
    # as a quote by CMake (separate_arguments) and as a character here.
    [[ $line != *[\"\'\\]* ]] ||
        die "$cases_file:$at: no quotes or backslashes in a case (split at blanks only): $line"
    read -ra words <<<"${args:-}"
    args="${words[*]}"
    n_env=0
    while ((n_env < ${#words[@]})) && [[ ${words[n_env]} =~ $env_word_re ]]; do
        n_env=$((n_env + 1))
    done
    ((n_env == 0 || n_env < ${#words[@]})) ||
        die "$cases_file:$at: '$name' has environment words and no arguments for the program"
    matched=0
    for id in "${ids[@]}"; do
        # shellcheck disable=SC2053 # the stages field is a pattern
        [[ $id == $pattern ]] || continue
        matched=$((matched + 1))
        expanded+=("${name//\{id\}/$id}"$'\t'"$id"$'\t'"$timeout"$'\t'"$args")
    done
    if ((matched > 1)) && [[ $name != *'{id}'* ]]; then
        die "$cases_file:$at: '$name' matches $matched stages: put {id} in its name"
    fi
    ((matched > 0)) || expanded+=("$name"$'\t'"-"$'\t'"$timeout"$'\t'"$args ($pattern)")
done <"$cases_file"
[[ -z $joined ]] || die "$cases_file ends in a continued line"

if ((list_only)); then
    for c in "${expanded[@]}"; do
        printf '%s\n' "$c"
    done
    exit 0
fi

# The cases FILTER selects (one grep over the names); none is a usage error.
selected=()
if [[ -n $filter ]]; then
    declare -A wanted=()
    while IFS= read -r name; do wanted[$name]=1; done < <(
        for c in ${expanded[@]+"${expanded[@]}"}; do printf '%s\n' "${c%%$'\t'*}"; done |
            grep -E -- "$filter" || true)
    for c in ${expanded[@]+"${expanded[@]}"}; do
        [[ -z ${wanted[${c%%$'\t'*}]:-} ]] || selected+=("$c")
    done
    ((${#selected[@]})) ||
        die "FILTER '$filter' matches none of the ${#expanded[@]} cases (--list prints them)"
else
    selected=(${expanded[@]+"${expanded[@]}"})
fi

logs=${FX_GPU_LOG_DIR:-$bin_dir/../gpu_logs}
mkdir -p "$logs"
passed=0 failed=0 skipped=0
failures=()
for c in ${selected[@]+"${selected[@]}"}; do
    IFS=$'\t' read -r name id timeout args <<<"$c"
    log=$logs/$name.log
    if [[ $id == - ]]; then
        printf 'FAIL  %s  (no program in %s matches its stages: %s)\n' "$name" "$bin_dir" "$args"
        failed=$((failed + 1)) failures+=("$name")
        continue
    fi
    # Leading NAME=value words go to the program's environment (cases.txt), through env(1),
    # and the settings the case does not set are unset there.
    read -ra words <<<"$args"
    envs=()
    while ((${#words[@]})) && [[ ${words[0]} =~ $env_word_re ]]; do
        envs+=("${words[0]}")
        words=("${words[@]:1}")
    done
    unsets=()
    for v in "${settings[@]}"; do
        [[ " ${envs[*]+${envs[*]}}" == *" $v="* ]] || unsets+=(-u "$v")
    done
    run=(env ${unsets[@]+"${unsets[@]}"} ${envs[@]+"${envs[@]}"} "$bin_dir/stage_$id"
        ${words[@]+"${words[@]}"})
    start_ns=$(date +%s%N)
    set +e
    timeout --kill-after=10 "$timeout" "${run[@]}" >"$log" 2>&1
    rc=$?
    set -e
    secs=$(awk -v a="$start_ns" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    if ((rc == 0)); then
        verdict=PASS passed=$((passed + 1))
    elif ((rc == 77 && !require_gpu)); then
        verdict=SKIP skipped=$((skipped + 1))
    else
        verdict=FAIL failed=$((failed + 1)) failures+=("$name")
    fi
    why=""
    case $rc in
        0) ;;
        77)
            reason=$(grep -m 1 'skipped:' "$log" | sed 's/^[[:space:]]*//' || true)
            why=", ${reason:-exit 77}"
            ;;
        124 | 137) why=", over its ${timeout} s" ;;
        *) why=", exit $rc" ;;
    esac
    printf '%s  %s  (%s s%s)\n' "$verdict" "$name" "$secs" "$why"
    if [[ $verdict == FAIL ]]; then
        # The command that reruns it: the environment first, then the program.
        echo "  ${run[*]}; the end of $log:"
        tail -n 20 "$log" | sed 's/^/  | /'
    fi
done
echo "$passed passed, $failed failed, $skipped skipped${failures[*]+ (failed: ${failures[*]})}"
((failed == 0))
