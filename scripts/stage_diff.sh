#!/usr/bin/env bash
# stage_diff.sh — what a stage adds over another: the diff between two stage folders.
#
#   scripts/stage_diff.sh 07 08          diff -u of every file pair of stages/07_* and
#                                        stages/08_*, then its stat (+added -removed)
#   scripts/stage_diff.sh -s 07 08       the same with comments stripped from the C, C++
#                                        and CUDA files (strings and characters kept)
#   scripts/stage_diff.sh -c 07 08       only the count: lines added + removed by diff -u
#                                        between the kernel files (*.cu *.cuh *.c *.h), with
#                                        and without comment lines
#   scripts/stage_diff.sh --table        a markdown table of that count for every stage
#                                        against the one it builds on (01→02, 02→03, ...,
#                                        08→10: its CHECKS list's last), for docs/
#   scripts/stage_diff.sh --strip FILE   FILE with its comments stripped (the -s filter)
#
# A stage is named by its number (7, 07, 05a) or its folder (07_pingpong). Files pair
# by the same name; else by the same role, the name after the stage's prefix
# (pingpong_fwd.cu and overlap_fwd.cu are both fwd.cu); else, per extension, the only
# file left on each side; else the most similar (the most lines in common, at least a
# third of the smaller file). A file left unpaired counts as wholly added or removed.
# Each pairing that is not by the same name is printed ("pair: ..."), and so is each
# unpaired file. Without comments means: comments removed, and the lines that held
# only a comment dropped (blank lines of the source are kept).
#
# Options: -s|--strip-comments  -c|--count  -t|--table  -k|--kernel-only (diff only the
# kernel files, not README.md or CMakeLists.txt)  --stages DIR (the folder that holds
# the stage folders; default the repository's stages/)  -h|--help.
# Exit status: 0 (also when the stages differ), 2 bad usage or an unknown stage.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stages_dir=$here/../stages

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() { echo "stage_diff.sh: $*" >&2; exit 2; }

# The comment filter (awk, POSIX: Debian's mawk runs it).
read -r -d '' strip_awk <<'AWK' || true
# Removes C/C++/CUDA comments (// and /* */), keeping string and character literals
# (also raw strings R"d(...)d") intact. A line that held only comment (and blanks) is
# dropped; a line left with trailing blanks where a comment was is trimmed; a line
# blank in the source is kept. mawk-compatible (POSIX awk).
function isident(ch) { return ch ~ /[A-Za-z0-9_]/ }
BEGIN { state = "code" }
{
    line = $0
    n = length(line)
    out = ""
    had_comment = (state == "block")
    i = 1
    while (i <= n) {
        c = substr(line, i, 1)
        if (state == "block") {
            if (c == "*" && substr(line, i + 1, 1) == "/") { state = "code"; i += 2 } else i++
            continue
        }
        if (state == "string") {
            out = out c
            if (c == "\\") { out = out substr(line, i + 1, 1); i += 2; continue }
            if (c == "\"") state = "code"
            i++
            continue
        }
        if (state == "raw") {
            k = index(substr(line, i), rawend)
            if (k == 0) { out = out substr(line, i); i = n + 1; continue }
            out = out substr(line, i, k - 1 + length(rawend))
            i += k - 1 + length(rawend)
            state = "code"
            continue
        }
        if (state == "char") {
            out = out c
            if (c == "\\") { out = out substr(line, i + 1, 1); i += 2; continue }
            if (c == "\047") state = "code"
            i++
            continue
        }
        # code
        two = substr(line, i, 2)
        if (two == "//") { had_comment = 1; i = n + 1; continue }
        if (two == "/*") { had_comment = 1; state = "block"; i += 2; continue }
        if (c == "\"") {
            prev = (i > 1) ? substr(line, i - 1, 1) : ""
            before = (i > 2) ? substr(line, i - 2, 1) : ""
            if (prev == "R" && !isident(before) || prev == "R" && before ~ /[uUL8]/) {
                rest = substr(line, i + 1)
                p = index(rest, "(")
                if (p > 0 && p <= 17) {
                    rawend = ")" substr(rest, 1, p - 1) "\""
                    out = out "\"" substr(rest, 1, p)
                    i += p + 1
                    state = "raw"
                    continue
                }
            }
            state = "string"
            out = out c
            i++
            continue
        }
        if (c == "\047" && !(i > 1 && isident(substr(line, i - 1, 1)))) {
            state = "char"
            out = out c
            i++
            continue
        }
        out = out c
        i++
    }
    # A string or character literal does not continue past its line without a backslash.
    if ((state == "string" || state == "char") && substr(line, n, 1) != "\\") state = "code"
    if (had_comment) {
        sub(/[ \t]+$/, "", out)
        if (out ~ /^[ \t]*$/) next
    }
    print out
}
AWK

strip_comments() { awk "$strip_awk" "$1"; }
is_kernel() { [[ $1 == *.cu || $1 == *.cuh || $1 == *.c || $1 == *.h ]]; }
is_c_family() { is_kernel "$1" || [[ $1 == *.cpp || $1 == *.hpp || $1 == *.cc ]]; }

strip=0 count=0 table=0 kernel_only=0
args=()
while (($# > 0)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        -s | --strip-comments) strip=1 ;;
        -c | --count) count=1 ;;
        -t | --table) table=1 ;;
        -k | --kernel-only) kernel_only=1 ;;
        --stages)
            (($# >= 2)) || die "--stages needs a folder"
            stages_dir=$2
            shift ;;
        --strip)
            (($# >= 2)) || die "--strip needs a FILE"
            [[ -f $2 && -r $2 ]] || die "--strip: cannot read $2"
            strip_comments "$2"
            exit 0 ;;
        --) shift; args+=("$@"); break ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) args+=("$1") ;;
    esac
    shift
done
[[ -d $stages_dir ]] || die "no stages folder at $stages_dir"
stages_dir=$(cd "$stages_dir" && pwd)

# The stage folders, in reading order (a name starting with digits).
list_stages() {
    local d
    for d in "$stages_dir"/[0-9]*/; do
        [[ -d $d ]] && basename "$d"
    done | LC_ALL=C sort
}

# resolve NN: prints the folder name of stage NN, or fails with a message.
resolve() {
    local want=${1%/} d
    want=${want##*/}
    [[ -n $want ]] || die "an empty stage name"
    if [[ -d $stages_dir/$want && $want == [0-9]* ]]; then
        echo "$want"
        return
    fi
    [[ $want =~ ^[0-9]+[a-z]?$ ]] ||
        die "'$1' is not a stage number (e.g. 07, 7, 05a) or folder;" \
            "stages: $(list_stages | tr '\n' ' ')"
    if [[ $want =~ ^[0-9]$ || $want =~ ^[0-9][a-z]$ ]]; then want=0$want; fi
    local -a hits=()
    for d in "$stages_dir/${want}"_*/; do
        [[ -d $d ]] && hits+=("$(basename "$d")")
    done
    ((${#hits[@]} == 1)) && { echo "${hits[0]}"; return; }
    ((${#hits[@]} == 0)) && die "no stage $1 in $stages_dir; stages: $(list_stages | tr '\n' ' ')"
    die "stage $1 is ambiguous: ${hits[*]}"
}

# The files of a stage folder, relative, sorted.
files_of() {
    (cd "$stages_dir/$1" && find . -type f ! -name '*~' -print | sed 's|^\./||' | LC_ALL=C sort)
}

# A file's role: its name without the stage's prefix ("pingpong_fwd.cu" -> "fwd.cu").
role_of() {
    local dir=${1%/*} base=${1##*/}
    [[ $1 == */* ]] || dir=""
    [[ $base == *_* ]] && base=${base#*_}
    echo "${dir:+$dir/}$base"
}
ext_of() { local b=${1##*/}; [[ $b == *.* ]] && echo "${b##*.}" || echo ""; }

# The text diff reads: the file, or its comments stripped. file_text STAGE PATH [STRIP]
file_text() {
    local f=$stages_dir/$1/$2
    if [[ ${3:-0} == 1 ]] && is_c_family "$2"; then strip_comments "$f"; else cat "$f"; fi
}

# Lines added and removed by diff -u: prints "ADDED REMOVED". changed A_FILE B_FILE
changed() {
    local rc=0 out
    out=$(diff -u "$1" "$2") || rc=$?
    ((rc <= 1)) || die "diff failed on $1 and $2"
    awk 'NR > 2 && /^\+/ { a++ } NR > 2 && /^-/ { r++ } END { printf "%d %d\n", a, r }' \
        <<<"$out"
}

# pair A B: fills pair_a[], pair_b[], pair_how[] (parallel), only_a[], only_b[].
pair() {
    local a=$1 b=$2 f g i
    local -a fa fb
    mapfile -t fa < <(files_of "$a")
    mapfile -t fb < <(files_of "$b")
    pair_a=() pair_b=() pair_how=() only_a=() only_b=()
    local -A used_a=() used_b=()
    add_pair() { pair_a+=("$1"); pair_b+=("$2"); pair_how+=("$3"); used_a[$1]=1; used_b[$2]=1; }

    # 1. The same name.
    for f in "${fa[@]+"${fa[@]}"}"; do
        for g in "${fb[@]+"${fb[@]}"}"; do
            [[ $f == "$g" ]] && add_pair "$f" "$g" "same name"
        done
    done
    # 2. The same role, one file with it on each side.
    local -A role_a=() role_b=() nrole_a=() nrole_b=()
    for f in "${fa[@]+"${fa[@]}"}"; do
        [[ -n ${used_a[$f]+x} ]] && continue
        i=$(role_of "$f"); role_a[$i]=$f; nrole_a[$i]=$((${nrole_a[$i]:-0} + 1))
    done
    for g in "${fb[@]+"${fb[@]}"}"; do
        [[ -n ${used_b[$g]+x} ]] && continue
        i=$(role_of "$g"); role_b[$i]=$g; nrole_b[$i]=$((${nrole_b[$i]:-0} + 1))
    done
    for i in "${!role_a[@]}"; do
        if [[ ${nrole_a[$i]} == 1 && ${nrole_b[$i]:-0} == 1 ]]; then
            add_pair "${role_a[$i]}" "${role_b[$i]}" "same role: $i"
        fi
    done
    # 3. Per extension, the only file left on each side.
    local -A ext_a=() ext_b=() next_a=() next_b=()
    for f in "${fa[@]+"${fa[@]}"}"; do
        [[ -n ${used_a[$f]+x} ]] && continue
        i=.$(ext_of "$f"); ext_a[$i]=$f; next_a[$i]=$((${next_a[$i]:-0} + 1))
    done
    for g in "${fb[@]+"${fb[@]}"}"; do
        [[ -n ${used_b[$g]+x} ]] && continue
        i=.$(ext_of "$g"); ext_b[$i]=$g; next_b[$i]=$((${next_b[$i]:-0} + 1))
    done
    for i in "${!ext_a[@]}"; do
        if [[ ${next_a[$i]} == 1 && ${next_b[$i]:-0} == 1 ]]; then
            add_pair "${ext_a[$i]}" "${ext_b[$i]}" "the only *$i left on each side"
        fi
    done
    # 4. The most similar of the same extension: the most lines in common, at least a
    # third of the smaller file's lines.
    local best best_f best_g common la lb ad rm
    while :; do
        best=0 best_f="" best_g=""
        for f in "${fa[@]+"${fa[@]}"}"; do
            [[ -n ${used_a[$f]+x} ]] && continue
            for g in "${fb[@]+"${fb[@]}"}"; do
                [[ -n ${used_b[$g]+x} ]] && continue
                [[ $(ext_of "$f") == "$(ext_of "$g")" ]] || continue
                la=$(wc -l <"$stages_dir/$a/$f")
                lb=$(wc -l <"$stages_dir/$b/$g")
                read -r ad rm < <(changed "$stages_dir/$a/$f" "$stages_dir/$b/$g")
                common=$((la - rm))
                ((common * 3 >= (la < lb ? la : lb))) || continue
                if ((common > best)); then best=$common best_f=$f best_g=$g; fi
            done
        done
        [[ -n $best_f ]] || break
        add_pair "$best_f" "$best_g" "most similar: $best lines in common"
    done
    for f in "${fa[@]+"${fa[@]}"}"; do [[ -n ${used_a[$f]+x} ]] || only_a+=("$f"); done
    for g in "${fb[@]+"${fb[@]}"}"; do [[ -n ${used_b[$g]+x} ]] || only_b+=("$g"); done
    unset -f add_pair
}

# Prints the pairings that are not by the same name, and the unpaired files.
# say_pairs A B KERNEL_ONLY
say_pairs() {
    local i
    for ((i = 0; i < ${#pair_a[@]}; ++i)); do
        (($3)) && ! is_kernel "${pair_a[i]}" && continue
        [[ ${pair_how[i]} == "same name" ]] && continue
        echo "pair: $1/${pair_a[i]} -> $2/${pair_b[i]} (${pair_how[i]})"
    done
    for i in "${only_a[@]+"${only_a[@]}"}"; do
        (($3)) && ! is_kernel "$i" && continue
        echo "only in $1: $i (counted as removed)"
    done
    for i in "${only_b[@]+"${only_b[@]}"}"; do
        (($3)) && ! is_kernel "$i" && continue
        echo "only in $2: $i (counted as added)"
    done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# count A B STRIP: prints "ADDED REMOVED" over the kernel files.
count_pair() {
    local a=$1 b=$2 s=$3 i ad rm tot_a=0 tot_r=0
    for ((i = 0; i < ${#pair_a[@]}; ++i)); do
        is_kernel "${pair_a[i]}" || continue
        file_text "$a" "${pair_a[i]}" "$s" >"$tmp/a"
        file_text "$b" "${pair_b[i]}" "$s" >"$tmp/b"
        read -r ad rm < <(changed "$tmp/a" "$tmp/b")
        tot_a=$((tot_a + ad)) tot_r=$((tot_r + rm))
    done
    for i in "${only_a[@]+"${only_a[@]}"}"; do
        is_kernel "$i" || continue
        tot_r=$((tot_r + $(file_text "$a" "$i" "$s" | wc -l)))
    done
    for i in "${only_b[@]+"${only_b[@]}"}"; do
        is_kernel "$i" || continue
        tot_a=$((tot_a + $(file_text "$b" "$i" "$s" | wc -l)))
    done
    echo "$tot_a $tot_r"
}

# The kernel files compared, for the table: "a.cu → b.cu, stage.c; new: x.h; gone: y.c".
describe_pairs() {
    local i text="" sep=""
    for ((i = 0; i < ${#pair_a[@]}; ++i)); do
        is_kernel "${pair_a[i]}" || continue
        if [[ ${pair_a[i]} == "${pair_b[i]}" ]]; then
            text+="$sep${pair_a[i]}"
        else
            text+="$sep${pair_a[i]} → ${pair_b[i]}"
        fi
        sep=", "
    done
    local -a n=() g=()
    for i in "${only_b[@]+"${only_b[@]}"}"; do is_kernel "$i" && n+=("$i"); done
    for i in "${only_a[@]+"${only_a[@]}"}"; do is_kernel "$i" && g+=("$i"); done
    if ((${#n[@]})); then text+="; new: $(printf '%s, ' "${n[@]}")"; text=${text%, }; fi
    if ((${#g[@]})); then text+="; gone: $(printf '%s, ' "${g[@]}")"; text=${text%, }; fi
    echo "$text"
}

# The stage that stage folder $1 builds on: the last id in fx_add_stage's CHECKS list of its
# CMakeLists.txt ("" when it has none).
base_of() {
    local cmake=$stages_dir/$1/CMakeLists.txt
    [[ -f $cmake ]] || return 0
    sed -n '/fx_add_stage(/,/)/p' "$cmake" | tr '\n' ' ' | sed -n 's/.*CHECKS//p' |
        { grep -oE '(^|[[:space:]])[0-9]{2}[a-z]?_[a-z0-9_]+' || true; } | tail -1 | tr -d ' '
}

if ((table)); then
    ((${#args[@]} == 0)) || die "--table takes no stage numbers (it covers every pair)"
    mapfile -t all < <(list_stages)
    ((${#all[@]} >= 2)) || die "fewer than two stages in $stages_dir"
    commit=$(git -C "$stages_dir" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
    if [[ $commit != unknown ]] &&
        [[ -n $(git -C "$stages_dir" status --porcelain -- . 2>/dev/null) ]]; then
        commit+="-dirty"
    fi
    echo "<!-- generated by scripts/stage_diff.sh --table at commit $commit -->"
    echo "| step | kernel files compared | added + removed | without comments |"
    echo "|---|---|---:|---:|"
    for ((k = 1; k < ${#all[@]}; ++k)); do
        # Each stage against the one it builds on: the last stage its CMakeLists.txt
        # checks against (fx_add_stage's CHECKS; stage 10 builds on 08, not 09), else
        # the folder before it.
        a=$(base_of "${all[k]}") b=${all[k]}
        [[ -n $a && -d $stages_dir/$a ]] || a=${all[k - 1]}
        pair "$a" "$b"
        read -r ad rm < <(count_pair "$a" "$b" 0)
        read -r sad srm < <(count_pair "$a" "$b" 1)
        printf '| %s → %s | %s | %d (+%d −%d) | %d (+%d −%d) |\n' "${a%%_*}" "${b%%_*}" \
            "$(describe_pairs)" $((ad + rm)) "$ad" "$rm" $((sad + srm)) "$sad" "$srm"
    done
    exit 0
fi

((${#args[@]} == 2)) || die "give two stages, e.g. 07 08 (or --table; see --help)"
a=$(resolve "${args[0]}")
b=$(resolve "${args[1]}")
pair "$a" "$b"

if ((count)); then
    say_pairs "$a" "$b" 1 >&2
    read -r ad rm < <(count_pair "$a" "$b" 0)
    read -r sad srm < <(count_pair "$a" "$b" 1)
    printf '%s -> %s: %d lines (+%d -%d) with comments, %d (+%d -%d) without\n' \
        "$a" "$b" $((ad + rm)) "$ad" "$rm" $((sad + srm)) "$sad" "$srm"
    exit 0
fi

say_pairs "$a" "$b" "$kernel_only"
declare -a stat=()
tot_a=0 tot_r=0
show() {  # show LABEL_A LABEL_B FILE_A FILE_B: one diff -u, and its stat line
    local rc=0 ad rm
    diff -u --label "$1" --label "$2" "$3" "$4" >"$tmp/d" || rc=$?
    ((rc <= 1)) || die "diff failed on $1 and $2"
    ((rc == 0)) && return 0
    echo "diff -u $1 $2"
    cat "$tmp/d"
    read -r ad rm < <(awk 'NR > 2 && /^\+/ { a++ } NR > 2 && /^-/ { r++ }
                           END { printf "%d %d\n", a, r }' "$tmp/d")
    tot_a=$((tot_a + ad)) tot_r=$((tot_r + rm))
    stat+=("$(printf '%6s %6s  %s' "+$ad" "-$rm" "$5")")
}
for ((i = 0; i < ${#pair_a[@]}; ++i)); do
    ((kernel_only)) && ! is_kernel "${pair_a[i]}" && continue
    file_text "$a" "${pair_a[i]}" "$strip" >"$tmp/a"
    file_text "$b" "${pair_b[i]}" "$strip" >"$tmp/b"
    name=${pair_a[i]}
    [[ ${pair_a[i]} == "${pair_b[i]}" ]] || name="${pair_a[i]} -> ${pair_b[i]}"
    show "stages/$a/${pair_a[i]}" "stages/$b/${pair_b[i]}" "$tmp/a" "$tmp/b" "$name"
done
for f in "${only_a[@]+"${only_a[@]}"}"; do
    ((kernel_only)) && ! is_kernel "$f" && continue
    file_text "$a" "$f" "$strip" >"$tmp/a"
    show "stages/$a/$f" /dev/null "$tmp/a" /dev/null "$f (only in $a)"
done
for f in "${only_b[@]+"${only_b[@]}"}"; do
    ((kernel_only)) && ! is_kernel "$f" && continue
    file_text "$b" "$f" "$strip" >"$tmp/b"
    show /dev/null "stages/$b/$f" /dev/null "$tmp/b" "$f (only in $b)"
done
echo
echo "stat: stages/$a -> stages/$b$( ((strip)) && echo ", comments stripped")"
for s in "${stat[@]+"${stat[@]}"}"; do echo "$s"; done
printf '%6s %6s  total, %d file(s) changed\n' "+$tot_a" "-$tot_r" "${#stat[@]}"
