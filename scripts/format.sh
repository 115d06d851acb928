#!/usr/bin/env bash
# format.sh — one formatter, one column limit (docs/STYLE.md): the repository's C, C++
# and CUDA sources under the committed .clang-format, and no source line over 100 columns.
#
#   scripts/format.sh                 format the sources in place (clang-format 14), then
#                                     list the lines over 100 columns
#   scripts/format.sh --check         list the sources clang-format 14 would change
#                                     (--diff: and show how); the tree is unchanged
#   scripts/format.sh --columns       list the source lines over 100 columns
#   scripts/format.sh ... FILE...     only these files
#
# Sources formatted: *.c *.h *.cu *.cuh *.cpp *.hpp tracked by git (every such file under
# the repository, build folders aside, where there is no git). Lines measured: those and
# *.sh *.py *.cmake CMakeLists.txt *.gp .ci/run, in characters (UTF-8), tabs to 8.
# Generated files are neither formatted nor measured: common/ptx/wgmma_ops.cuh
# (scripts/gen_wgmma_ops.sh; the test ptx_wgmma_ops_generated checks it).
#
# clang-format: $CLANG_FORMAT, else clang-format-14, else clang-format. Other major
# versions format differently: --check then says so and exits 77 (a skip for CTest), and
# formatting refuses (exit 2) unless --force.
# --baseline FILE (with --columns): FILE lists known long lines as "COUNT PATH" per line
# ('#' comments); a listed file fails only when it has more than COUNT, and one with
# fewer is reported so that the list can shrink.
# Exit status: 0 clean; 1 files to format or lines too long; 2 bad usage or no
# clang-format to format with; 77 (--check) no clang-format 14.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() { echo "format.sh: $*" >&2; exit 2; }

max_columns=100
want_major=14
generated=(common/ptx/wgmma_ops.cuh)

mode=format show_diff=0 force=0 baseline=""
files=()
while (($# > 0)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --check) mode=check ;;
        --columns) mode=columns ;;
        --diff) show_diff=1 ;;
        --force) force=1 ;;
        --baseline)
            (($# >= 2)) || die "--baseline needs a FILE"
            [[ -r $2 ]] || die "cannot read the baseline $2"
            baseline=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
            shift ;;
        --) shift; files+=("$@"); break ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) files+=("$1") ;;
    esac
    shift
done
[[ -z $baseline || $mode == columns ]] || die "--baseline goes with --columns"
((!show_diff)) || [[ $mode == check ]] || die "--diff goes with --check"

# Files given on the command line are taken relative to the caller, then made relative
# to the repository.
given=()
for f in "${files[@]+"${files[@]}"}"; do
    [[ -f $f ]] || die "no such file: $f"
    given+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
done
cd "$root"
for ((i = 0; i < ${#given[@]}; ++i)); do
    case ${given[i]} in
        "$root"/*) given[i]=${given[i]#"$root"/} ;;
        *) die "${files[i]} is not in the repository ($root)" ;;
    esac
done

all_files() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files --cached --others --exclude-standard
    else
        find . \( -path './build*' -o -path ./.git \) -prune -o -type f -print | sed 's|^\./||'
    fi
}
is_generated() {
    local g
    for g in "${generated[@]}"; do [[ $1 == "$g" ]] && return 0; done
    return 1
}
is_c_source() { [[ $1 =~ \.(c|h|cu|cuh|cpp|hpp)$ ]]; }
is_measured() {
    is_c_source "$1" || [[ $1 =~ \.(sh|py|cmake|gp)$ || $1 == CMakeLists.txt ||
        $1 == */CMakeLists.txt || $1 == .ci/run ]]
}
# select PREDICATE: the files to work on (given, or all), generated ones left out.
select_files() {
    local f
    if ((${#given[@]})); then
        for f in "${given[@]}"; do is_generated "$f" || ! "$1" "$f" || echo "$f"; done
    else
        while IFS= read -r f; do
            [[ -f $f ]] || continue
            is_generated "$f" || ! "$1" "$f" || echo "$f"
        done < <(all_files)
    fi
}

# ---------------------------------------------------------------------------- columns
# Prints "PATH:LINE: COLUMNS columns" for each line over the limit.
long_lines() {
    LC_ALL=C awk -v max="$max_columns" '
    {
        t = $0
        gsub(/[\200-\277]/, "", t)   # UTF-8 continuation bytes: one character each
        if (index(t, "\t")) {          # tabs to the next multiple of 8
            s = ""
            for (i = 1; i <= length(t); ++i) {
                c = substr(t, i, 1)
                if (c == "\t") { do s = s " "; while (length(s) % 8) } else s = s c
            }
            t = s
        }
        if (length(t) > max) printf "%s:%d: %d columns\n", FILENAME, FNR, length(t)
    }' "$@"
}

columns() {
    local -a measured
    mapfile -t measured < <(select_files is_measured)
    ((${#measured[@]})) || { echo "no files to measure"; return 0; }
    local report
    report=$(long_lines "${measured[@]}")
    local fail=0 total=0
    local -A per_file=() known=()
    local line path
    while IFS= read -r line; do
        [[ -n $line ]] || continue
        path=${line%%:*}
        per_file[$path]=$((${per_file[$path]:-0} + 1))
        total=$((total + 1))
    done <<<"$report"
    if [[ -n $baseline ]]; then
        local count rest
        while read -r count rest; do
            [[ -z $count || $count == \#* ]] && continue
            [[ $count =~ ^[0-9]+$ && -n $rest ]] ||
                die "baseline line '$count $rest': want COUNT PATH"
            known[$rest]=$count
        done <"$baseline"
    fi
    while IFS= read -r line; do
        [[ -n $line ]] || continue
        path=${line%%:*}
        if [[ -n ${known[$path]+x} ]] && ((per_file[$path] <= known[$path])); then
            echo "known: $line"
        else
            echo "long: $line"
            fail=1
        fi
    done <<<"$report"
    for path in "${!known[@]}"; do
        if ((${per_file[$path]:-0} < known[$path])); then
            echo "baseline: $path has ${per_file[$path]:-0} long lines, listed ${known[$path]}:" \
                 "lower the count in $baseline"
        fi
    done
    echo "measured ${#measured[@]} files: $total lines over $max_columns columns" \
         "${baseline:+(baseline $baseline)}"
    ((fail == 0)) || { echo "FAIL: lines over $max_columns columns"; return 1; }
    echo "PASS"
}

# ----------------------------------------------------------------------------- format
find_clang_format() {
    local c
    for c in ${CLANG_FORMAT:+"$CLANG_FORMAT"} clang-format-"$want_major" clang-format; do
        if command -v "$c" >/dev/null 2>&1; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

if [[ $mode == columns ]]; then
    columns
    exit $?
fi

[[ -f .clang-format ]] || die "no .clang-format in $root"
if ! cf=$(find_clang_format); then
    if [[ $mode == check ]]; then
        echo "skipped: clang-format not found (Debian 12: apt-get install clang-format-14)"
        exit 77
    fi
    die "clang-format not found (Debian 12: apt-get install clang-format-14)"
fi
version=$("$cf" --version 2>/dev/null || true)
major=$(sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p' <<<"$version")
if [[ $major != "$want_major" ]]; then
    msg="$cf is version ${major:-unknown} ($version); the tree is formatted by clang-format"
    msg+=" $want_major, and other versions format differently"
    if [[ $mode == check ]]; then
        echo "skipped: $msg"
        exit 77
    fi
    ((force)) || die "$msg: install clang-format-$want_major (or --force)"
    echo "format.sh: warning: $msg" >&2
fi

mapfile -t sources < <(select_files is_c_source)
((${#sources[@]})) || { echo "no C, C++ or CUDA sources to format"; exit 0; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
changed=0
for f in "${sources[@]}"; do
    "$cf" --style=file "$f" >"$tmp" || die "$cf failed on $f"
    if ! cmp -s "$tmp" "$f"; then
        changed=$((changed + 1))
        if [[ $mode == check ]]; then
            echo "would reformat: $f"
            if ((show_diff)); then
                diff -u --label "$f" --label "$f (formatted)" "$f" "$tmp" || true
            fi
        else
            cat "$tmp" >"$f"
            echo "formatted: $f"
        fi
    fi
done
if [[ $mode == check ]]; then
    echo "checked ${#sources[@]} files with $cf ($version): $changed to reformat"
    ((changed == 0)) || { echo "FAIL: run scripts/format.sh"; exit 1; }
    echo "PASS"
    exit 0
fi
echo "formatted ${#sources[@]} files with $cf: $changed changed"
columns
