#!/usr/bin/env bash
# lint_pipefail.sh [--known FILE] [SCRIPT...] — forbids, in the shell scripts that set
# `pipefail`, a pipe into a reader that may exit before its writer is done (CTest
# scripts_lint_pipefail, label unit; issue 11's SIGPIPE defect).
#
# Such a reader (`grep -q`, `grep -m N`, `grep -l`, `head`, `cmp`, `read`) closes the
# pipe early, the writer's next write gets SIGPIPE, and under pipefail the pipeline's
# status is 141 whatever the reader found: `prog --help | grep -q 'x' && ...` is then
# false at random. Write instead: text=$(prog --help); [[ $text == *x* ]], or grep
# without -q to /dev/null, or read from a file. A line that is safe on purpose carries
# the comment `# sigpipe-ok: <why>`.
#
# SCRIPT: files to check; default every shell script of the repository (git ls-files:
# *.sh, and files whose first line is a sh/bash shebang). Only files that set pipefail
# are checked. The scan joins continued lines, skips comments, heredocs and the text of
# single-quoted strings; it cannot see `sed q` or `awk exit` inside a quoted program.
# --known FILE: findings listed there ("path: pipeline", as this script prints them
# after "found: ") are reported as known and do not fail; listed ones no longer found
# are reported so that the list can shrink.
# --self-test: first the scan on a fixture of bad and good pipelines, then as usual.
# Exit status: 0 none (or only known ones), 1 a finding, 2 bad usage.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
known=""
self_test=0
files=()
while (($# > 0)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --self-test) self_test=1; shift ;;
        --known)
            (($# >= 2)) || { echo "lint_pipefail.sh: --known needs a FILE" >&2; exit 2; }
            [[ -r $2 ]] || { echo "lint_pipefail.sh: cannot read the known list $2" >&2; exit 2; }
            known=$2
            shift 2 ;;
        -*) echo "lint_pipefail.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) files+=("$1"); shift ;;
    esac
done

cd "$root"
# shellcheck source=tests/scripts/shell_files.sh
source "$root/tests/scripts/shell_files.sh"
if ((${#files[@]} == 0)); then
    mapfile -t files < <(fx_shell_files)
fi

# One finding per line: "path<TAB>line<TAB>logical line". The scan keeps a stack of
# contexts: code (the top level, or inside $(...)), '...' and "..."; the text of strings
# is blanked for the search (a | or grep -q in a message is not a pipe), the code of a
# $(...) inside "..." is not.
scan() {
    awk '
    function flush(   n, segs, i, s, w, t, early_grep) {
        if (code ~ /sigpipe-ok:/) { code = ""; raw = ""; return }
        t = code
        gsub(/\|\|/, "\001\001", t)   # || is not a pipe
        n = split(t, segs, /\|&?/)
        bad = 0
        for (i = 2; i <= n; ++i) {
            s = segs[i]
            sub(/^[ \t]+/, "", s)
            split(s, w, /[ \t]+/)
            early_grep = s ~ /[ \t]-[A-Za-z]*[qlLm]/ || s ~ /--(quiet|silent|max-count|files-with)/
            if (w[1] ~ /^(grep|egrep|fgrep)$/ && early_grep) bad = 1
            else if (w[1] == "head" || w[1] == "cmp" || w[1] == "read") bad = 1
        }
        if (bad) {
            t = raw
            sub(/^[ \t]+/, "", t)
            sub(/[ \t]+$/, "", t)
            printf "%s\t%d\t%s\n", FILENAME, start, t
        }
        code = ""
        raw = ""
    }
    function push(st) { stack[++depth] = st; parens[depth] = 0 }
    BEGIN { depth = 0; stack[0] = "C"; code = ""; raw = ""; heredoc = "" }
    {
        if (heredoc != "") {
            t = $0
            if (heredoc_tabs) sub(/^\t+/, "", t)
            if (t == heredoc) heredoc = ""
            next
        }
        if (code == "" && depth == 0) start = FNR
        line = $0
        L = length(line)
        prev = " "
        continued = 0
        for (i = 1; i <= L; ++i) {
            c = substr(line, i, 1)
            st = stack[depth]
            if (st == "S") {
                raw = raw c
                if (c == "\047") { depth--; code = code c } else code = code "_"
                prev = c
                continue
            }
            if (st == "D") {
                if (c == "\\") {
                    raw = raw c substr(line, i + 1, 1); code = code "__"; i++; prev = "x"; continue
                }
                raw = raw c
                if (c == "\"") { depth--; code = code c }
                else if (c == "$" && substr(line, i + 1, 1) == "(") {
                    code = code "$("; raw = raw "("; i++; push("C")
                } else code = code "_"
                prev = c
                continue
            }
            # Code: the top level, or inside $(...).
            if (c == "#" && prev ~ /[ \t;(|&]/) {
                if (substr(line, i) ~ /sigpipe-ok:/) code = code " sigpipe-ok: "
                break
            }
            if (c == "\\") {
                if (i == L) { continued = 1; break }
                raw = raw c substr(line, i + 1, 1); code = code "__"; i++; prev = "x"; continue
            }
            raw = raw c
            code = code c
            if (c == "\047") push("S")
            else if (c == "\"") push("D")
            else if (c == "(" ) { if (depth > 0) parens[depth]++ }
            else if (c == ")" && depth > 0) {
                if (parens[depth] > 0) parens[depth]--; else depth--
            } else if (c == "<" && substr(line, i, 2) == "<<" && substr(line, i, 3) != "<<<") {
                rest = substr(line, i + 2)
                heredoc_tabs = (substr(rest, 1, 1) == "-")
                if (heredoc_tabs) rest = substr(rest, 2)
                sub(/^[ \t]*/, "", rest)
                if (match(rest, /^["\047]?[A-Za-z_][A-Za-z_0-9]*/)) {
                    heredoc = substr(rest, RSTART, RLENGTH)
                    gsub(/["\047]/, "", heredoc)
                }
            }
            prev = c
        }
        # A string or $(...) open at the end of the line, a backslash, or a line ending in
        # | or && continues the logical line.
        t = code
        sub(/[ \t]+$/, "", t)
        if (depth > 0 || continued || t ~ /(\||&&)$/) { code = code " "; raw = raw " "; next }
        flush()
    }
    END { if (code != "") flush() }
    ' "$1"
}

if ((self_test)); then
    fixture=$(mktemp)
    trap 'rm -f "$fixture"' EXIT
    # Lines 2-10 are bad (5 continues 4), the rest are not.
    cat >"$fixture" <<'FIXTURE'
set -euo pipefail
prog --help | grep -q x && y=1
prog | grep -Fxq x
prog |
    head -n 1
prog | grep -m 1 x
x=$(prog | head -1)
echo "$(prog | grep -q "x")"
prog | cmp - file
prog | read -r first
prog | grep x >/dev/null
grep -q x file
prog || grep -q x file
echo "a | grep -q b, it's"
echo 'a | head'
# prog | grep -q x
prog | grep -q x  # sigpipe-ok: a reason
cat <<EOF
prog | grep -q x
EOF
prog | while read -r l; do :; done
y=$(printf '%s' "$(prog)" | sed -n 1p)
FIXTURE
    got=$(scan "$fixture" | cut -f 2 | tr '\n' ' ')
    want="2 3 4 6 7 8 9 10 "
    if [[ $got == "$want" ]]; then
        echo "ok: self-test: found the pipelines at lines $want of the fixture"
    else
        echo "FAIL: self-test: found lines '$got', want '$want'"
        exit 1
    fi
fi

findings=()
for f in "${files[@]}"; do
    if [[ ! -r $f ]]; then
        echo "lint_pipefail.sh: cannot read $f" >&2
        exit 2
    fi
    # Only scripts that set pipefail (set -o pipefail, set -euo pipefail, ...).
    grep -Eq '^[[:space:]]*set[[:space:]]+(-[a-zA-Z]*o[[:space:]]+pipefail|.*-o pipefail)' "$f" ||
        continue
    while IFS=$'\t' read -r path lineno text; do
        findings+=("$path"$'\t'"$lineno"$'\t'"$text")
    done < <(scan "$f")
done

fail=0
declare -A seen=()
for hit in "${findings[@]+"${findings[@]}"}"; do
    IFS=$'\t' read -r path lineno text <<<"$hit"
    key="$path: $text"
    if [[ -n $known ]] && grep -Fxq -- "$key" "$known"; then
        echo "known: $key  (line $lineno)"
        seen[$key]=1
    else
        echo "found: $key  (line $lineno)"
        fail=1
    fi
done
if [[ -n $known ]]; then
    while IFS= read -r entry; do
        [[ -z $entry || $entry == \#* ]] && continue
        [[ -n ${seen[$entry]+x} ]] || echo "gone: $entry  (fixed: remove it from $known)"
    done <"$known"
fi
echo "checked ${#files[@]} scripts: ${#findings[@]} pipe(s) into an early-exit reader" \
     "under pipefail"
if ((fail)); then
    echo "FAIL: a pipe into grep -q/-m/-l, head, cmp or read under pipefail" \
         "(see --help for the fix)"
    exit 1
fi
echo "PASS"
