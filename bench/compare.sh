#!/usr/bin/env bash
# compare.sh — marked rows of a sweep against the unmarked ones, point by point: an older
# build (bench/sweep.sh --baseline DIR:TAG, rows ID@TAG) against this one, or another spin
# (--spin-compare, rows NAME@spin<N>) against the run's own.
#
#   bench/compare.sh SWEEP.csv TAG [--against TAG2] [--direction fwd|bwd]
#
# For every runner and point that has both rows NAME (or NAME@TAG2 with --against) and
# NAME@TAG: the median TFLOP/s over the repeats of each, the spread of each (highest −
# lowest repeat), the ratio of the unmarked median to the marked one (above 1: the
# unmarked runner is faster), and a verdict: "within spread" where the difference of the
# medians is no larger than the larger of the two spreads (DESIGN.md: no measured
# difference), else "faster" or "slower" (the unmarked runner against the marked one).
# With one repeat there is no spread and the verdict says so. Then a summary per runner:
# points, how many faster, slower and within the spread, and the range and median of the
# ratios. Needs no GPU (POSIX awk).
# Exit status: 0; 1 when no runner has both rows at any point; 2 on bad usage (TAG
# --against TAG too, an option without its value) or input.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
die() {
    echo "compare.sh: $*" >&2
    exit 2
}
# needs WHAT "$@": the option $1 has its value $2, else a usage error (exit 2).
needs() {
    local what=$1
    shift
    if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs $what"; fi
}
csv="" tag="" against="" direction=""
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --against) needs "a tag" "$@"; against=$2; shift ;;
        --direction) needs "fwd or bwd" "$@"; direction=$2; shift ;;
        -*) die "unknown option '$1' (bench/compare.sh --help)" ;;
        *)
            if [[ -z $csv ]]; then csv=$1
            elif [[ -z $tag ]]; then tag=${1#@}
            else die "one CSV and one TAG"
            fi
            ;;
    esac
    shift
done
[[ -n $csv && -n $tag ]] || { usage >&2; exit 2; }
[[ -z $direction || $direction == fwd || $direction == bwd ]] ||
    die "--direction must be fwd or bwd"
[[ -r $csv ]] || die "cannot read $csv"
first=$(head -n 1 "$csv")
[[ ,$first, == *,stage,* && ,$first, == *,direction,* && ,$first, == *,tflops,* ]] ||
    die "$csv is not a sweep CSV (its first line has no stage, direction and tflops columns)"
against=${against#@}
[[ $against != "$tag" ]] ||
    die "--against $against is TAG itself: compare @$tag with another tag, or leave out" \
        "--against (the unmarked rows)"

# The table (awk prints tab-separated rows with a sort key; the shell sorts and aligns).
rows=$(awk -F, -v tag="$tag" -v against="$against" -v want="$direction" \
    "$(<"$(dirname "${BASH_SOURCE[0]}")/awk_median.awk")"'
function spread(list,    n, v, i, lo, hi) {
    n = split(list, v, " "); lo = hi = v[1] + 0
    for (i = 2; i <= n; ++i) { if (v[i] + 0 < lo) lo = v[i] + 0; if (v[i] + 0 > hi) hi = v[i] + 0 }
    return hi - lo
}
function count(list,    v) { return split(list, v, " ") }
NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
$c["direction"] != "ref" && (want == "" || $c["direction"] == want) {
    s = $c["stage"]; at = index(s, "@")
    name = at ? substr(s, 1, at - 1) : s; mark = at ? substr(s, at + 1) : ""
    if (mark != tag && mark != against) next
    side = mark == tag ? "b" : "a"
    p = sprintf("%d %06d %d %06d %06d", $c["direction"] == "fwd" ? 0 : 1, $c["head_dim"],
                $c["causal"], $c["seqlen_q"], $c["seqlen_k"])
    shown = sprintf("%s\t%s\t%s\t%s", $c["direction"], $c["head_dim"],
                    $c["causal"] ? "yes" : "no",
                    $c["seqlen_q"] == $c["seqlen_k"] ? $c["seqlen_q"] \
                                                     : $c["seqlen_q"] "/" $c["seqlen_k"])
    extra = $c["dtype"] " " $c["batch"] " " $c["heads_q"] " " $c["heads_kv"]
    if (!(name in order)) order[name] = ++n_names
    k = p " " extra SUBSEP name
    if (!(k in seen)) { seen[k] = 1; keys[++nk] = k; show[k] = shown }
    v[k, side] = v[k, side] " " $c["tflops"]
}
END {
    for (i = 1; i <= nk; ++i) {
        k = keys[i]
        if (!((k, "a") in v) || !((k, "b") in v)) continue
        split(k, kk, SUBSEP); name = kk[2]
        ma = median(v[k, "a"]); mb = median(v[k, "b"])
        sa = spread(v[k, "a"]); sb = spread(v[k, "b"])
        na = count(v[k, "a"]); nb = count(v[k, "b"])
        r = mb > 0 ? ma / mb : 0
        lim = sa > sb ? sa : sb
        if (na < 2 || nb < 2)
            verdict = (ma >= mb ? "faster" : "slower") " (one repeat: no spread)"
        else if (ma - mb <= lim && mb - ma <= lim) verdict = "within spread"
        else verdict = ma > mb ? "faster" : "slower"
        printf "%s %03d\t%s\t%s\t%.1f (%.1f)\t%.1f (%.1f)\t%.3f\t%s\t%d/%d\n",
               kk[1], order[name], show[k], name, ma, sa, mb, sb, r, verdict, na, nb
    }
}' "$csv" | sort)

if [[ -z $rows ]]; then
    echo "compare.sh: no runner of $csv has both ${against:+@$against }rows and @$tag rows" \
        "at any point${direction:+ ($direction)}" \
        "(marks found: $(awk -F, 'NR > 1 && index($1, "@") { m[substr($1, index($1, "@") + 1)] = 1 }
            END { for (k in m) l = l (l ? ", " : "") "@" k; print l ? l : "none" }' "$csv"))" >&2
    exit 1
fi

a_label=${against:+@$against}
a_label=${a_label:-unmarked}
width=$(printf '%s\n' "$rows" |
    awk -F'\t' '{ if (length($6) > w) w = length($6) } END { print (w > 5 ? w : 5) }')
echo "$csv: $a_label against @$tag, TFLOP/s: the median over the repeats" \
    "(spread: highest − lowest repeat)"
printf "%-4s %-8s %-6s %11s  %-*s  %-16s %-16s %-10s %s\n" \
    dir head_dim causal seqlen "$width" runner "$a_label" "@$tag" "ratio" "verdict (repeats)"
printf '%s\n' "$rows" | awk -F'\t' -v w="$width" '{
    printf "%-4s %-8s %-6s %11s  %-*s  %-16s %-16s %-10s %s (%s)\n",
           $2, $3, $4, $5, w, $6, $7, $8, $9, $10, $11 }'
echo
echo "summary (ratio: $a_label over @$tag;" \
    "within spread: the medians differ by no more than the larger spread):"
printf '%s\n' "$rows" | awk -F'\t' -v w="$width" \
    "$(<"$(dirname "${BASH_SOURCE[0]}")/awk_median.awk")"'
{
    n = $6; if (!(n in seen)) { seen[n] = 1; names[++nn] = n }
    pts[n]++; r[n] = r[n] " " $9
    if ($10 ~ /^within/) within[n]++; else if ($10 ~ /^faster/) fast[n]++; else slow[n]++
    if (lo[n] == "" || $9 + 0 < lo[n]) lo[n] = $9 + 0; if ($9 + 0 > hi[n]) hi[n] = $9 + 0
}
END {
    for (i = 1; i <= nn; ++i) {
        n = names[i]
        printf "  %-*s  %d points: %d faster, %d slower beyond the spread, %d within it; " \
               "ratio %.3f to %.3f, median %.3f\n",
               w, n, pts[n], fast[n], slow[n], within[n], lo[n], hi[n], median(r[n])
    }
}'
