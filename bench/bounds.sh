#!/usr/bin/env bash
# bounds.sh — how close each row of a sweep CSV is to the three walls of attention
# (DESIGN.md, "Benchmarks and plots"; docs/benchmarks.md, "The bounds").
#
#   bench/bounds.sh SWEEP.csv [--direction fwd|bwd] [--csv OUT.csv] [--copy-tbps X]
#                             [--clock-mhz M] [--flop-per-sm-clock F] [--tagged]
#
# For every row, the time each bound alone would need, as a percentage of the row's
# measured (median) time — 100 % means the row runs at that wall:
#   tensor cores  FLOPs / (sm_count × F × SM clock); F = 4096 dense bf16/fp16 FLOP per
#                 SM per clock on Hopper (989 TFLOP/s for 132 SMs at 1830 MHz), 2048 on
#                 A100/A800/A30, 8192 for e4m3 on Hopper; other GPUs: --flop-per-sm-clock.
#                 FLOPs as the row's tflops counts them: the forward's 4·b·h·d·pairs, a
#                 bwd row's 2.5 times that (five GEMMs instead of two)
#   exp unit      batch·heads_q·(unmasked (i, j) pairs) exponentials / (sm_count × 16 ×
#                 SM clock); pairs counted exactly, N(N+1)/2 per slice for causal. The
#                 same count for a bwd row: the backward recomputes P = exp(S − LSE) once
#   HBM           the bytes a row must move at least, over the device-to-device copy
#                 bandwidth measured in the same run (the median of the CSV's copy_bw
#                 rows on that device, bytes read + written over time) or --copy-tbps:
#                 fwd: Q, K, V read once, O written once (dtype bytes; bf16 O for e4m3)
#                 and LSE written once (fp32);
#                 bwd: Q, K, V, O, dO read once, dQ, dK, dV written once (dtype bytes)
#                 and LSE read once (fp32); not counted: D = rowsum(dO∘O) and an fp32
#                 dQ accumulator, which an implementation may keep in HBM on top
# The SM clock is the row's own (sm_clock_mhz, read right after its timed calls), or
# --clock-mhz where the row has 0. The highest percentage names the bound the row is
# closest to. torch_matmul rows get the tensor-core percentage only; copy_bw rows none.
#
# Prints a table (the median over repeats of each (direction, runner, head_dim, causal,
# seqlen): the stages and every peer, FA3 among them; --direction keeps one direction's
# rows in it); with --csv writes every row of the input with these columns added:
# peak_tflops, pct_tensor, exp_ms, pct_exp, hbm_bytes, copy_tbps, hbm_ms, pct_hbm, bound
# (an empty cell where a bound cannot be computed). Marked rows (stage NAME@TAG: a
# baseline build's or another spin's, bench/sweep.sh) are left out of both unless
# --tagged. A CSV with a `variant` column (an ablation's) names each runner
# stage:variant. The runner column is as wide as the longest name. A row cut short (not
# the header's field count) or with text where a number belongs is skipped, with a
# warning. POSIX awk; no GPU needed.
# Exit status: 0; 2 on bad usage (an option without its value, a number that is not
# positive, an OUT that cannot be written) or input (not a sweep CSV, no usable row).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # fx_writable, fx_csv_bad_row, fx_sweep_dirs

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
die() {
    echo "bounds.sh: $*" >&2
    exit 2
}
# needs WHAT "$@": the option $1 has its value $2, else a usage error (exit 2).
needs() {
    local what=$1
    shift
    if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs $what"; fi
}

csv="" out="" copy_tbps="" clock_mhz="" flop_per_clock="" direction="" tagged=0
while (($#)); do
    case $1 in
        --tagged) tagged=1 ;;
        --direction) needs "fwd or bwd" "$@"; direction=$2; shift ;;
        --csv) needs "a file" "$@"; out=$2; shift ;;
        --copy-tbps) needs "TB/s" "$@"; copy_tbps=$2; shift ;;
        --clock-mhz) needs "MHz" "$@"; clock_mhz=$2; shift ;;
        --flop-per-sm-clock) needs "a number" "$@"; flop_per_clock=$2; shift ;;
        -h | --help) usage; exit 0 ;;
        -*) die "unknown option '$1' (bench/bounds.sh --help)" ;;
        *) [[ -z $csv ]] || die "one CSV at a time"; csv=$1 ;;
    esac
    shift
done
[[ -n $csv ]] || { usage >&2; exit 2; }
[[ -z $direction || $direction == fwd || $direction == bwd ]] ||
    die "--direction must be fwd or bwd"
# positive OPTION VALUE: VALUE is a positive finite number (1.5, 3e3), else a usage error.
positive() {
    if ! [[ $2 =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] ||
        ! awk -v x="$2" 'BEGIN { exit !(x + 0 > 0 && x + 0 < 1e300) }'; then
        die "$1 must be a positive number (got '$2')"
    fi
}
[[ -z $copy_tbps ]] || positive --copy-tbps "$copy_tbps"
[[ -z $clock_mhz ]] || positive --clock-mhz "$clock_mhz"
[[ -z $flop_per_clock ]] || positive --flop-per-sm-clock "$flop_per_clock"
[[ -e $csv ]] || die "no file $csv"
[[ ! -d $csv ]] || die "$csv is a directory, not a sweep CSV"
[[ -f $csv && -r $csv ]] || die "cannot read $csv"
if [[ -n $out ]]; then
    [[ ! $out -ef $csv ]] || die "--csv $out is the input CSV: name another file"
    fx_writable "$out" || die "--csv $out: cannot write it (a writable file in an existing folder)"
fi
first=$(head -n 1 "$csv")
[[ ,$first, == *,stage,* && ,$first, == *,direction,* && ,$first, == *,tflops,* ]] ||
    die "$csv is not a sweep CSV: its first line has no stage, direction and tflops columns" \
        "(FX_CSV_HEADER)"
[[ $(wc -l <"$csv") -gt 1 ]] || die "$csv has a header and no rows"

augmented=$(mktemp) bad_count=$(mktemp)
trap 'rm -f "$augmented" "$bad_count"' EXIT

# median() for both awk programs below (bench/awk_median.awk).
awk_median=$(<"$(dirname "${BASH_SOURCE[0]}")/awk_median.awk")

# Pass 1 (NR == FNR): the copy bandwidth of each device. Pass 2: the bounds of each row.
awk -F, -v OFS=, -v copy_opt="$copy_tbps" -v clock_opt="$clock_mhz" -v fpc_opt="$flop_per_clock" \
    -v tagged="$tagged" -v csv="$csv" -v bad_count="$bad_count" "$awk_median"'
# A row is used whole or not at all: the header'"'"'s field count, and numbers where the
# bounds read them (a row cut short, or text in a number, would be drawn as zeros).
function is_num(x) { return x ~ /^-?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/ }
function usable(    k) {
    if (NF != nh || $c["stage"] == "") return 0
    for (k = 1; k <= nnum; ++k) if (!is_num($c[numeric[k]])) return 0
    return 1
}
# Dense tensor-core FLOP per SM per clock, by device and dtype; "" when unknown.
function flop_per_clock(dev, dtype) {
    if (fpc_opt != "") return fpc_opt
    if (dev ~ /H100|H200|H800|GH200/) return dtype == "e4m3" ? 8192 : 4096
    if (dev ~ /A100|A800|A30/) return 2048
    return ""
}
# Unmasked (i, j) pairs, as fx_problem.c counts them (causal: bottom-right aligned).
function pairs(sq, sk, causal,    i0, rows, first) {
    if (!causal) return sq * sk
    i0 = sq > sk ? sq - sk : 0
    rows = sq - i0
    first = i0 + sk + 1 - sq
    return rows * (first + sk) / 2
}
function elem_bytes(dtype) { return dtype == "e4m3" ? 1 : 2 }
function pct(x) { return x == "" ? "" : sprintf("%.1f", x) }
FNR == 1 {
    for (i = 1; i <= NF; ++i) c[$i] = i
    hdr = $0; nh = NF
    nnum = split("sm_count sm_clock_mhz ms tflops batch seqlen_q seqlen_k heads_q heads_kv " \
                 "head_dim causal", numeric, " ")
    next
}
NR == FNR {
    if (usable() && $c["stage"] == "copy_bw")
        copies[$c["device"]] = copies[$c["device"]] " " $c["tflops"]
    next
}
FNR == 2 {
    print hdr, "peak_tflops,pct_tensor,exp_ms,pct_exp,hbm_bytes,copy_tbps,hbm_ms,pct_hbm,bound"
}
!usable() { if (!nbad++) first_bad = FNR; next }
!tagged && index($c["stage"], "@") { next }
{
    stage = $c["stage"]; dev = $c["device"]; dtype = $c["dtype"]
    sms = $c["sm_count"] + 0; mhz = $c["sm_clock_mhz"] + 0; ms = $c["ms"] + 0
    if (mhz == 0 && clock_opt != "") mhz = clock_opt + 0
    b = $c["batch"]; sq = $c["seqlen_q"]; sk = $c["seqlen_k"]; hq = $c["heads_q"]
    hk = $c["heads_kv"]; d = $c["head_dim"]; causal = $c["causal"] + 0
    fpc = flop_per_clock(dev, dtype)
    peak = ""; p_t = ""; exp_ms = ""; p_e = ""; bytes = ""; bw = ""; hbm_ms = ""; p_h = ""
    if (fpc != "" && mhz > 0 && sms > 0)
        peak = sms * fpc * mhz * 1e6 / 1e12
    if (stage == "copy_bw") {
        peak = ""
    } else if (stage == "torch_matmul") {
        if (peak != "" && ms > 0) p_t = 100 * $c["tflops"] / peak
    } else if (ms > 0) {
        if (peak != "") p_t = 100 * $c["tflops"] / peak
        if (mhz > 0 && sms > 0) {
            exp_ms = b * hq * pairs(sq, sk, causal) / (sms * 16 * mhz * 1e6) * 1e3
            p_e = 100 * exp_ms / ms
        }
        bw = copy_opt != "" ? copy_opt : median(copies[dev])
        if ($c["direction"] == "bwd")  # Q, O, dO, dQ and K, V, dK, dV once; LSE read
            bytes = elem_bytes(dtype) * (4 * b * sq * hq * d + 4 * b * sk * hk * d) \
                  + 4 * b * hq * sq
        else                           # Q, K, V read, O written once; LSE written
            bytes = elem_bytes(dtype) * (b * sq * hq * d + 2 * b * sk * hk * d) \
                  + (dtype == "e4m3" ? 2 : elem_bytes(dtype)) * b * sq * hq * d + 4 * b * hq * sq
        if (bw != "" && bw > 0) {
            hbm_ms = bytes / (bw * 1e12) * 1e3
            p_h = 100 * hbm_ms / ms
        }
    }
    best = ""; top = -1
    if (p_t != "" && p_t > top) { top = p_t; best = "tensor" }
    if (p_e != "" && p_e > top) { top = p_e; best = "exp" }
    if (p_h != "" && p_h > top) { top = p_h; best = "hbm" }
    print $0, (peak == "" ? "" : sprintf("%.1f", peak)), pct(p_t),
          (exp_ms == "" ? "" : sprintf("%.5f", exp_ms)), pct(p_e),
          (bytes == "" ? "" : sprintf("%.0f", bytes)), (bw == "" ? "" : sprintf("%.3f", bw)),
          (hbm_ms == "" ? "" : sprintf("%.5f", hbm_ms)), pct(p_h), best
}
END {
    printf "%d\n", nbad > bad_count
    if (nbad)
        printf "bounds.sh: warning: %d row(s) of %s skipped, cut short or not numeric where " \
               "a number belongs (the first: line %d)\n", nbad, csv, first_bad | "cat 1>&2"
}' "$csv" "$csv" >"$augmented"
if (($(<"$bad_count") > 0)) && (($(wc -l <"$augmented") < 2)); then
    die "no usable row in $csv: every row is cut short or not numeric"
fi

if [[ -n $out ]]; then
    cp "$augmented" "$out"
fi

# The table: medians over the repeats, ordered by direction (fwd first), head_dim,
# causal, seqlen, then by the stage's first appearance in the CSV.
awk -F, -v want="$direction" "$awk_median"'
function add(key, name, v) { if (v != "") vals[key, name] = vals[key, name] " " v }
NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
{
    s = $c["stage"]
    if (("variant" in c) && $c["variant"] != "") s = s ":" $c["variant"]
    if (!(s in order)) order[s] = ++n_stages
    if ($c["direction"] == "ref") {
        if (s == "copy_bw") add(s, "bw", $c["tflops"])
        else { add(s, "tf", $c["tflops"]); add(s, "pt", $c["pct_tensor"]) }
        if ($c["sm_clock_mhz"] + 0 > 0) add(s, "clk", $c["sm_clock_mhz"])
        next
    }
    dir = $c["direction"]
    if (want != "" && dir != want) next
    key = sprintf("%d %06d %d %06d %03d %s %s", dir == "fwd" ? 0 : dir == "bwd" ? 1 : 2,
                  $c["head_dim"], $c["causal"], $c["seqlen_q"], order[s], s, dir)
    if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
    add(key, "tf", $c["tflops"]); add(key, "pt", $c["pct_tensor"])
    add(key, "pe", $c["pct_exp"]); add(key, "ph", $c["pct_hbm"]); add(key, "n", 1)
    add(key, "bd",
        $c["bound"] == "tensor" ? 1 : $c["bound"] == "exp" ? 2 : $c["bound"] == "hbm" ? 3 : "")
}
END {
    if ("torch_matmul" in order)
        printf "# torch_matmul bf16 8192^3: %.1f TFLOP/s (median), " \
               "%s%% of the tensor-core peak\n",
               median(vals["torch_matmul", "tf"]),
               median(vals["torch_matmul", "pt"]) == "" ? "?" : \
                   sprintf("%.1f", median(vals["torch_matmul", "pt"]))
    if ("copy_bw" in order)
        printf "# copy_bw (device to device): %.2f TB/s read + written (median): " \
               "the HBM bound uses it\n",
               median(vals["copy_bw", "bw"])
    for (i = 1; i <= nk; ++i) {
        split(keys[i], f, " ")
        # the bound of the medians (the largest of the three median percentages)
        pt = median(vals[keys[i], "pt"]); pe = median(vals[keys[i], "pe"])
        ph = median(vals[keys[i], "ph"])
        best = ""; top = -1
        if (pt != "" && pt + 0 > top) { top = pt + 0; best = "tensor" }
        if (pe != "" && pe + 0 > top) { top = pe + 0; best = "exp" }
        if (ph != "" && ph + 0 > top) { top = ph + 0; best = "hbm" }
        printf "%s\t%s\t%d\t%d\t%d\t%s\t%.1f\t%s\t%s\t%s\t%s\t%d\n",
               keys[i], f[7], f[2] + 0, f[3], f[4] + 0, f[6],
               median(vals[keys[i], "tf"]), pt == "" ? "-" : sprintf("%.1f", pt),
               pe == "" ? "-" : sprintf("%.1f", pe), ph == "" ? "-" : sprintf("%.1f", ph),
               best == "" ? "-" : best, split(vals[keys[i], "n"], tmp, " ")
    }
}' "$augmented" | {
    # Comment lines first, then the table sorted on its key (the first field), the
    # runner column as wide as its longest name (at least 16, the old width).
    rows=()
    width=16
    while IFS= read -r line; do
        if [[ $line == '#'* ]]; then
            echo "${line#\# }"
        else
            rows+=("$line")
            name=${line#*$'\t'*$'\t'*$'\t'*$'\t'*$'\t'}  # the sixth field
            name=${name%%$'\t'*}
            ((${#name} <= width)) || width=${#name}
        fi
    done
    printf '%-4s %-9s %-6s %7s  %-*s %9s %9s %7s %7s  %-7s %s\n' \
        dir head_dim causal seqlen "$width" stage TFLOP/s %tensor %exp %HBM bound repeats
    if ((${#rows[@]})); then
        printf '%s\n' "${rows[@]}" | sort | awk -F'\t' -v w="$width" '{
            printf "%-4s %-9s %-6s %7s  %-*s %9s %9s %7s %7s  %-7s %s\n",
                   $2, $3, $4 ? "yes" : "no", $5, w, $6, $7, $8, $9, $10, $11, $12 }'
    fi
}
[[ -z $out ]] || echo "augmented CSV: $out"
