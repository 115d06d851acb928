#!/usr/bin/env bash
# compare.sh — marked rows of a sweep against the unmarked ones, point by point: an older
# build (bench/sweep.sh --baseline DIR:TAG, rows ID@TAG) against this one, or another spin
# (--spin-compare, rows NAME@spin<N>) against the run's own; or (--versus) every runner
# against one of them, FA3 say, or stage 09 in bf16 beside stage 10 in e4m3.
#
#   bench/compare.sh SWEEP.csv TAG [--against TAG2] [--direction fwd|bwd]
#   bench/compare.sh SWEEP.csv --versus RUNNER [--direction fwd|bwd]
#
# --versus RUNNER: each other runner of the CSV (its stage column as written: 10_fp8,
# 09_persistent@bf16, sdpa_flash, ...) against RUNNER (fa3, or 09_persistent@bf16 from
# bench/sweep.sh --beside bf16:09_persistent) at every point where both have rows. A point
# is the shape (direction, head_dim, causal, seqlen_q, seqlen_k, batch, heads), not the
# dtype: so 10_fp8 in e4m3 meets 09_persistent@bf16 at the same shape, and the ratio is the
# FP8 speed-up (the FLOPs are counted alike, so the TFLOP/s ratio is the time ratio). Each
# runner is shown with its dtype. Ratio: the runner's median over RUNNER's (above 1: the
# runner is faster); the verdict as below, the runner against RUNNER.
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
csv="" tag="" against="" direction="" versus=""
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --against) needs "a tag" "$@"; against=$2; shift ;;
        --versus) needs "a runner (fa3, 09_persistent@bf16, ...)" "$@"; versus=$2; shift ;;
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
if [[ -n $versus ]]; then
    [[ -n $csv && -z $tag && -z $against ]] ||
        die "--versus RUNNER takes the CSV alone (no TAG, no --against)"
else
    [[ -n $csv && -n $tag ]] || { usage >&2; exit 2; }
fi
[[ -z $direction || $direction == fwd || $direction == bwd ]] ||
    die "--direction must be fwd or bwd"
[[ -r $csv ]] || die "cannot read $csv"
first=$(head -n 1 "$csv")
[[ ,$first, == *,stage,* && ,$first, == *,direction,* && ,$first, == *,tflops,* ]] ||
    die "$csv is not a sweep CSV (its first line has no stage, direction and tflops columns)"
against=${against#@}
[[ -n $versus || $against != "$tag" ]] ||
    die "--against $against is TAG itself: compare @$tag with another tag, or leave out" \
        "--against (the unmarked rows)"

# The table (awk prints tab-separated rows with a sort key; the shell sorts and aligns).
rows=$(awk -F, -v tag="$tag" -v against="$against" -v want="$direction" -v vs="$versus" \
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
    if (vs != "") {
        # --versus: side b is RUNNER, side a every other runner; the dtype is shown with the
        # name and left out of the point, so that runners of two dtypes meet.
        side = s == vs ? "b" : "a"
        name = side == "b" ? "" : s " (" $c["dtype"] ")"
        if (side == "b") ref_dtype = $c["dtype"]
    } else {
        name = at ? substr(s, 1, at - 1) : s; mark = at ? substr(s, at + 1) : ""
        if (mark != tag && mark != against) next
        side = mark == tag ? "b" : "a"
    }
    p = sprintf("%d %06d %d %06d %06d", $c["direction"] == "fwd" ? 0 : 1, $c["head_dim"],
                $c["causal"], $c["seqlen_q"], $c["seqlen_k"])
    shown = sprintf("%s\t%s\t%s\t%s", $c["direction"], $c["head_dim"],
                    $c["causal"] ? "yes" : "no",
                    $c["seqlen_q"] == $c["seqlen_k"] ? $c["seqlen_q"] \
                                                     : $c["seqlen_q"] "/" $c["seqlen_k"])
    extra = (vs != "" ? "" : $c["dtype"] " ") $c["batch"] " " $c["heads_q"] " " $c["heads_kv"]
    if (vs != "") {
        pk = p " " extra
        if (side == "b") { ref[pk] = ref[pk] " " $c["tflops"]; next }
        if (!(name in order)) order[name] = ++n_names
        k = pk SUBSEP name
        if (!(k in seen)) { seen[k] = 1; keys[++nk] = k; show[k] = shown }
        v[k, "a"] = v[k, "a"] " " $c["tflops"]
        next
    }
    if (!(name in order)) order[name] = ++n_names
    k = p " " extra SUBSEP name
    if (!(k in seen)) { seen[k] = 1; keys[++nk] = k; show[k] = shown }
    v[k, side] = v[k, side] " " $c["tflops"]
}
END {
    if (vs != "")
        for (i = 1; i <= nk; ++i) {
            split(keys[i], kk, SUBSEP)
            if (kk[1] in ref) v[keys[i], "b"] = ref[kk[1]]
        }
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

if [[ -z $rows && -n $versus ]]; then
    echo "compare.sh: no runner of $csv shares a point with $versus${direction:+ ($direction)}" \
        "(runners: $(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
            $c["direction"] != "ref" && !($c["stage"] in m) { m[$c["stage"]] = 1
                l = l (l ? ", " : "") $c["stage"] } END { print l ? l : "none" }' "$csv"))" >&2
    exit 1
fi
if [[ -z $rows ]]; then
    echo "compare.sh: no runner of $csv has both ${against:+@$against }rows and @$tag rows" \
        "at any point${direction:+ ($direction)}" \
        "(marks found: $(awk -F, 'NR > 1 && index($1, "@") { m[substr($1, index($1, "@") + 1)] = 1 }
            END { for (k in m) l = l (l ? ", " : "") "@" k; print l ? l : "none" }' "$csv"))" >&2
    exit 1
fi

a_label=${against:+@$against}
a_label=${a_label:-unmarked}
b_label="@$tag"
if [[ -n $versus ]]; then
    a_label="the runner" b_label=$versus
    v_dtype=$(awk -F, -v r="$versus" 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        $c["stage"] == r { print $c["dtype"]; exit }' "$csv")
    b_label+=" ($v_dtype)"
fi
width=$(printf '%s\n' "$rows" |
    awk -F'\t' '{ if (length($6) > w) w = length($6) } END { print (w > 5 ? w : 5) }')
echo "$csv: $a_label against $b_label, TFLOP/s: the median over the repeats" \
    "(spread: highest − lowest repeat)"
printf "%-4s %-8s %-6s %11s  %-*s  %-16s %-16s %-10s %s\n" \
    dir head_dim causal seqlen "$width" runner "$a_label" "$b_label" "ratio" "verdict (repeats)"
printf '%s\n' "$rows" | awk -F'\t' -v w="$width" '{
    printf "%-4s %-8s %-6s %11s  %-*s  %-16s %-16s %-10s %s (%s)\n",
           $2, $3, $4, $5, w, $6, $7, $8, $9, $10, $11 }'
echo
echo "summary (ratio: $a_label over $b_label;" \
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
