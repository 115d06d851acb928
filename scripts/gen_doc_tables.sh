#!/usr/bin/env bash
# gen_doc_tables.sh — regenerates the measured tables of the docs between their markers,
# from the committed CSVs under plots/data (docs/STYLE.md: generated, never typed by hand).
#
#   scripts/gen_doc_tables.sh [--check] FILE.md...
#
# A table is generated between a line `<!-- gen:KIND ARGS -->` and a line
# `<!-- gen:end -->`; everything between them is rewritten, so edit the CSV or the
# marker line, not the table. With --check nothing is written: the exit status is 1,
# with a diff, when a file differs from what this would write (the docs check,
# scripts/check_doc_numbers.sh). Kinds:
#
#   <!-- gen:stage-rows STAGE OTHERS CSV... -->
#       One row per CSV (paths from the repository root): the CSV's last fwd row of
#       STAGE — its commit, date, problem, median ms with the fastest and slowest timed
#       call, TFLOP/s and check — and for each stage of OTHERS (comma-separated, or -)
#       the last row of the same problem in the same file: its ms and how many times
#       STAGE's time it took. The ladder files of ./run.sh are the example
#       (docs/03_flash2.md, "Measured").
#
#   <!-- gen:spin-table CSV -->
#       A sweep run with --spin-compare (bench/sweep.sh): per runner and point, the
#       median TFLOP/s (spread: highest − lowest repeat) at every spin — the run's own
#       (`spin_us` of the CSV's .meta; its rows unmarked) and each other (rows
#       NAME@spin<N>) — each other spin's median over the run's own, and "within" where
#       the two medians differ by no more than the larger spread (docs/benchmarks.md,
#       "How the runners are timed").
#
# Exit status: 0; 1 (--check) when a table is out of date; 2 on bad usage, an unknown
# kind, a CSV that cannot be read, or a row that is not there (said where).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
die() {
    echo "gen_doc_tables.sh: $*" >&2
    exit 2
}
check=0
files=()
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --check) check=1 ;;
        -*) die "unknown option '$1' (scripts/gen_doc_tables.sh --help)" ;;
        *) files+=("$1") ;;
    esac
    shift
done
((${#files[@]})) || { usage >&2; exit 2; }

# stage_rows WHERE STAGE OTHERS CSV...: the table (stdout).
stage_rows() {
    local where=$1 stage=$2 others=$3 f
    shift 3
    (($#)) || die "$where: gen:stage-rows needs STAGE OTHERS CSV..."
    for f in "$@"; do
        [[ -r $f ]] || die "$where: cannot read $f"
        [[ ,$(head -n 1 "$f"), == *,stage,* ]] || die "$where: $f is not a sweep or ladder CSV"
    done
    [[ $others == - ]] && others=""
    local col
    # shellcheck disable=SC2016 # the backticks are Markdown's
    col=$(printf '| file, row `%s` |' "$stage")
    col+=' commit | date (UTC) | problem | ms (min – max) | TFLOP/s | check |'
    local o
    local -a other_list=()
    [[ -z $others ]] || IFS=, read -r -a other_list <<<"$others"
    for o in ${other_list[@]+"${other_list[@]}"}; do
        # shellcheck disable=SC2016 # the backticks are Markdown's
        col+=$(printf ' `%s`, same file: ms (× `%s`'"'"'s time) |' "$o" "$stage")
    done
    echo "$col"
    local sep="|---|---|---|---|---|---|---|"
    for o in ${other_list[@]+"${other_list[@]}"}; do sep+="---|"; done
    echo "$sep"
    for f in "$@"; do
        awk -F, -v stage="$stage" -v others="$others" -v file="$f" -v where="$where" '
            NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
            function prob() {
                return $c["batch"] "," $c["seqlen_q"] "," $c["seqlen_k"] "," $c["heads_q"] "," \
                       $c["heads_kv"] "," $c["head_dim"] "," $c["dtype"] "," $c["causal"]
            }
            $c["direction"] == "fwd" { last[$c["stage"]] = $0; lastp[$c["stage"], prob()] = $0 }
            END {
                if (!(stage in last)) {
                    printf "%s: no fwd row of %s in %s\n", where, stage, file > "/dev/stderr"
                    exit 3
                }
                n = split(last[stage], r, ",")
                p = r[c["batch"]] "," r[c["seqlen_q"]] "," r[c["seqlen_k"]] "," \
                    r[c["heads_q"]] "," r[c["heads_kv"]] "," r[c["head_dim"]] "," \
                    r[c["dtype"]] "," r[c["causal"]]
                sq = r[c["seqlen_q"]]; sk = r[c["seqlen_k"]]
                hq = r[c["heads_q"]]; hk = r[c["heads_kv"]]
                desc = sprintf("batch %s, %s, %s heads, head_dim %s, %s, %s", r[c["batch"]],
                               sq == sk ? "seqlen " sq : "seqlen_q " sq ", seqlen_k " sk,
                               hq == hk ? hq : hq "/" hk, r[c["head_dim"]], r[c["dtype"]],
                               r[c["causal"]] == 1 ? "causal" : "non-causal")
                printf "| `%s` | `%s` | %s | %s | %s (%s – %s) | %s | %s |",
                       file, r[c["commit"]], r[c["date"]], desc,
                       r[c["ms"]], r[c["ms_min"]], r[c["ms_max"]], r[c["tflops"]], r[c["check"]]
                m = others == "" ? 0 : split(others, os, ",")
                for (k = 1; k <= m; ++k) {
                    if (!((os[k], p) in lastp)) { printf " — |"; continue }
                    split(lastp[os[k], p], q, ",")
                    printf " %s (%.2f×) |", q[c["ms"]], q[c["ms"]] / r[c["ms"]]
                }
                printf "\n"
            }' "$f" || die "$where: a row named by the marker is not in $f"
    done
}

# spin_table WHERE CSV: the table (stdout).
spin_table() {
    local where=$1 f=${2:-}
    [[ -n $f && -r $f ]] || die "$where: gen:spin-table needs a readable CSV"
    local own
    own=$(sed -n 's/^spin_us=//p' "${f%.csv}.meta" 2>/dev/null | sed -n 1p)
    [[ $own =~ ^[0-9]+$ ]] ||
        die "$where: ${f%.csv}.meta has no spin_us= line (a sweep from before --spin-us)"
    awk -F, -v own="$own" -v where="$where" -v file="$f" "$(<bench/awk_median.awk)"'
        function spread(list,    n, v, i, lo, hi) {
            n = split(list, v, " "); lo = hi = v[1] + 0
            for (i = 2; i <= n; ++i) {
                if (v[i] + 0 < lo) lo = v[i] + 0
                if (v[i] + 0 > hi) hi = v[i] + 0
            }
            return hi - lo }
        function num(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.1f", x) }
        NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        $c["direction"] == "ref" { next }
        {
            s = $c["stage"]; sp = own
            if (s ~ /@spin[0-9]+$/) {
                sp = substr(s, index(s, "@spin") + 5) + 0
                s = substr(s, 1, index(s, "@spin") - 1)
            } else if (index(s, "@")) next
            if (!(sp in spins)) { spins[sp] = 1; sl[++ns] = sp }
            k = s SUBSEP $c["direction"] SUBSEP $c["head_dim"] SUBSEP $c["causal"] \
                SUBSEP $c["seqlen_q"]
            if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
            v[k, sp] = v[k, sp] " " $c["tflops"]
        }
        END {
            if (ns < 2) {
                printf "%s: %s has rows at one spin only (no --spin-compare)\n",
                       where, file > "/dev/stderr"
                exit 3
            }
            for (i = 2; i <= ns; ++i)
                for (j = i; j > 1 && sl[j - 1] + 0 > sl[j] + 0; --j) {
                    t = sl[j]; sl[j] = sl[j - 1]; sl[j - 1] = t
                }
            printf "| runner | direction | head_dim | causal | seqlen |"
            for (i = 1; i <= ns; ++i)
                printf " %s µs%s |", sl[i], sl[i] == own ? " (the run'"'"'s)" : ""
            for (i = 1; i <= ns; ++i) if (sl[i] != own) printf " %s ÷ %s µs |", sl[i], own
            printf "\n|---|---|---|---|---|"
            for (i = 1; i <= ns; ++i) printf "---|"
            for (i = 1; i <= ns; ++i) if (sl[i] != own) printf "---|"
            printf "\n"
            for (n = 1; n <= nk; ++n) {
                split(keys[n], kk, SUBSEP)
                printf "| `%s` | %s | %s | %s | %s |",
                       kk[1], kk[2], kk[3], kk[4] ? "yes" : "no", kk[5]
                for (i = 1; i <= ns; ++i) {
                    if (!((keys[n], sl[i]) in v)) { printf " — |"; continue }
                    printf " %s (%s) |",
                           num(median(v[keys[n], sl[i]])), num(spread(v[keys[n], sl[i]]))
                }
                for (i = 1; i <= ns; ++i) {
                    if (sl[i] == own) continue
                    if (!((keys[n], sl[i]) in v) || !((keys[n], own) in v)) {
                        printf " — |"; continue
                    }
                    a = median(v[keys[n], sl[i]]); b = median(v[keys[n], own])
                    sa = spread(v[keys[n], sl[i]]); sb = spread(v[keys[n], own])
                    lim = sa > sb ? sa : sb
                    printf " %.3f%s |", a / b, (a - b <= lim && b - a <= lim) ? " (within)" : ""
                }
                printf "\n"
            }
        }' "$f" || die "$where: no spin table from $f"
}

status=0
for file in "${files[@]}"; do
    [[ -r $file ]] || die "cannot read $file"
    tmp=$(mktemp)
    lineno=0 inside=0 opened=0
    {
        while IFS= read -r line || [[ -n $line ]]; do
            lineno=$((lineno + 1))
            if ((inside)); then
                if [[ $line == "<!-- gen:end -->" ]]; then
                    inside=0
                    printf '%s\n' "$line"
                fi
                continue
            fi
            printf '%s\n' "$line"
            if [[ $line =~ ^\<!--\ gen:([a-z-]+)\ (.*)\ --\>$ ]]; then
                kind=${BASH_REMATCH[1]}
                read -r -a margs <<<"${BASH_REMATCH[2]}"
                opened=$lineno inside=1
                printf '<!-- generated by scripts/gen_doc_tables.sh %s' "$file"
                printf ' from the marker above: edit the CSVs or the marker, not this table -->\n'
                case $kind in
                    stage-rows) stage_rows "$file:$lineno" "${margs[@]}" ;;
                    spin-table) spin_table "$file:$lineno" "${margs[@]}" ;;
                    *) die "$file:$lineno: unknown kind gen:$kind (stage-rows, spin-table)" ;;
                esac
            fi
        done <"$file"
        ((!inside)) || die "$file:$opened: <!-- gen:... --> without its <!-- gen:end -->"
    } >"$tmp"
    if cmp -s "$tmp" "$file"; then
        ((check)) || echo "$file: generated tables up to date"
    elif ((check)); then
        echo "$file: a generated table is not what its CSVs give" \
            "(scripts/gen_doc_tables.sh $file rewrites it):"
        diff "$file" "$tmp" | sed -n 1,20p || true
        status=1
    else
        cp "$tmp" "$file"
        echo "$file: generated tables rewritten"
    fi
    rm -f "$tmp"
done
exit "$status"
