#!/usr/bin/env bash
# gen_readme_results.sh — regenerates README.md's results table from a forward sweep CSV
# (bench/sweep.sh), never by hand (STYLE.md).
#
#   scripts/gen_readme_results.sh plots/data/fa3_fwd_<UTC date>_<device>.csv [README.md]
#
# Rewrites what lies between `<!-- results:begin -->` and `<!-- results:end -->`: above
# the table the GPU, its SM count, the range of SM clocks the rows recorded, the dates,
# the commits, the peers' versions (from the sidecar <csv minus .csv>.meta that the sweep
# wrote) and the reference lines measured in the same run (torch.matmul, copy
# bandwidth), and the command that regenerated it; then one row per (head_dim, causal,
# seqlen) with, for each stage and peer, the median TFLOP/s over the repeats and the
# spread between them (highest minus lowest repeat), and the best stage's share of the
# tensor-core peak at its own SM clock (bench/bounds.sh). Needs no GPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

case ${1:-} in
    "" | -h | --help)
        sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
        [[ -n ${1:-} ]] && exit 0
        exit 2
        ;;
esac
csv=$1
readme=${2:-README.md}
[[ -r $csv ]] || { echo "gen_readme_results.sh: cannot read $csv" >&2; exit 2; }
head -n 1 "$csv" | grep -q '^stage,direction,' ||
    { echo "gen_readme_results.sh: $csv has no sweep header (FX_CSV_HEADER)" >&2; exit 2; }
if ! grep -q '<!-- results:begin -->' "$readme" || ! grep -q '<!-- results:end -->' "$readme"; then
    echo "gen_readme_results.sh: $readme has no <!-- results:begin/end --> markers" >&2
    exit 1
fi
meta=${csv%.csv}.meta

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every row with its bounds (pct_tensor at the row's own clock).
bench/bounds.sh "$csv" --csv "$tmp/bounds.csv" >/dev/null

# The peers' versions, from the sidecar.
meta_value() { [[ -r $meta ]] && sed -n "s/^$1=//p" "$meta" | head -n 1; }
torch_v=$(meta_value torch || true)
torch_cuda=$(meta_value torch_cuda || true)
cudnn_v=$(meta_value cudnn || true)
driver_v=$(meta_value driver || true)
if [[ -n $torch_v ]]; then
    versions="PyTorch $torch_v (CUDA $torch_cuda), cuDNN ${cudnn_v%% (*}${driver_v:+, driver $driver_v}"
elif [[ -r $meta ]] && grep -q '^peers=' "$meta"; then
    versions="none: $(meta_value peers)"
else
    versions="not recorded (no $meta beside the CSV)"
fi
slow_note=""
if [[ -r $meta ]]; then
    slow_note=$(awk '/^note=.* not run at seqlen / { sub(/^note=/, ""); printf "%s%s", n++ ? "; " : "", $0 }' "$meta")
fi

awk -F, -v csv="$csv" -v versions="$versions" -v slow_note="$slow_note" '
function median(list,    n, v, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; ++i)
        for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function spread(list,    n, v, i, lo, hi) {
    n = split(list, v, " "); lo = hi = v[1] + 0
    for (i = 2; i <= n; ++i) { if (v[i] + 0 < lo) lo = v[i] + 0; if (v[i] + 0 > hi) hi = v[i] + 0 }
    return hi - lo
}
function count(list,    v) { return split(list, v, " ") }
function num(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.1f", x) }
function rank(s) {
    if (s == "sdpa_flash") return "1 1"; if (s == "sdpa_cudnn") return "1 2"
    if (s == "sdpa_efficient") return "1 3"; return (s ~ /^[0-9]/ ? "0 " : "2 ") s
}
function pretty(s) {
    if (s == "sdpa_flash") return "SDPA flash (FA2)"; if (s == "sdpa_cudnn") return "SDPA cuDNN"
    if (s == "sdpa_efficient") return "SDPA mem-efficient"; return "`" s "`"
}
function sortnum(a, n,    i, j, t) {
    for (i = 2; i <= n; ++i) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; --j) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
}
NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
{
    s = $c["stage"]; m = $c["sm_clock_mhz"] + 0
    if (m > 0) { if (lo_c == "" || m < lo_c) lo_c = m; if (m > hi_c) hi_c = m }
    dev = $c["device"]; sms = $c["sm_count"]; dt = $c["dtype"]
    day = substr($c["date"], 1, 10); if (first == "" || day < first) first = day; if (day > last) last = day
    if ($c["check"] != "peer" && !($c["commit"] in cm)) { cm[$c["commit"]] = 1; commits = commits (commits == "" ? "" : ", ") "`" $c["commit"] "`" }
    if ($c["check"] == "peer" && !($c["commit"] in pcm)) { pcm[$c["commit"]] = 1; pcommits = pcommits (pcommits == "" ? "" : ", ") "`" $c["commit"] "`" }
    if ($c["direction"] == "ref") { ref[s] = ref[s] " " $c["tflops"]; next }
    if ($c["direction"] != "fwd") next
    if (!(s in ss)) { ss[s] = 1; names[++ns] = s; key[ns] = rank(s) " " s }
    p = $c["head_dim"] SUBSEP $c["causal"] SUBSEP $c["seqlen_q"]
    if (!(p in ps)) { ps[p] = 1; hds[$c["head_dim"]] = 1; lens[$c["seqlen_q"]] = 1; cs[$c["causal"]] = 1 }
    v[s, p] = v[s, p] " " $c["tflops"]
    if ($c["pct_tensor"] != "") pt[s, p] = pt[s, p] " " $c["pct_tensor"]
    if (count(v[s, p]) > nrep) nrep = count(v[s, p])
}
END {
    # Series order: the stages, then the peers.
    for (i = 2; i <= ns; ++i) for (j = i; j > 1 && key[j - 1] > key[j]; --j) {
        t = key[j]; key[j] = key[j - 1]; key[j - 1] = t; t = names[j]; names[j] = names[j - 1]; names[j - 1] = t }
    nh = 0; for (h in hds) hd[++nh] = h; sortnum(hd, nh)
    nl = 0; for (l in lens) ln[++nl] = l; sortnum(ln, nl)
    clk = hi_c == 0 ? "SM clock not recorded" : (lo_c == hi_c ? sprintf("SM clock %d MHz", hi_c) : sprintf("SM clock %d–%d MHz", lo_c, hi_c))
    printf "<!-- generated by scripts/gen_readme_results.sh %s: edit the CSV, not this table -->\n", csv
    printf "The FlashAttention-3 paper'"'"'s forward setup (%s, hidden 2048: heads = 2048/head_dim, batch·seqlen = 16384), ", dt
    printf "measured on one **%s** (%s SMs; %s during the timed calls, where the paper fixed 1830 MHz), ", dev, sms, clk
    printf "%s%s", first, last != first ? " to " last : ""
    if (commits != "") printf ", stages built at commit %s", commits
    if (pcommits != "" && pcommits != commits) printf ", peers timed from the tree at %s", pcommits
    printf ". "
    printf "Peers in the same run: %s.", versions
    if ("torch_matmul" in ref || "copy_bw" in ref) {
        printf " Reference lines in the same run:"
        if ("torch_matmul" in ref) printf " bf16 `torch.matmul` 8192³ %s TFLOP/s%s", num(median(ref["torch_matmul"])), ("copy_bw" in ref) ? ";" : "."
        if ("copy_bw" in ref) printf " device-to-device copy %.2f TB/s (read + written).", median(ref["copy_bw"])
    }
    printf "\n\n"
    printf "TFLOP/s by the FA3 convention (4·batch·heads·head_dim·unmasked pairs over the time). "
    if (nrep > 1) {
        printf "Each cell: the median over %d repeats of each repeat'"'"'s median timed call, ", nrep
        printf "and in brackets the spread between repeats (highest − lowest); "
        printf "the sweep interleaves the runners at every point, so a difference larger than both spreads is a measured one. "
    } else {
        printf "Each cell: one repeat'"'"'s median timed call. One repeat has no spread: a claim that one runner beats another needs three (`bench/sweep.sh --repeats 3`). "
    }
    printf "— : not measured (not run, refused by the stage'"'"'s capabilities, or declined by the peer'"'"'s backend; the CSV'"'"'s .meta says which)"
    if (slow_note != "") printf "; %s", slow_note
    printf ". The last column: the fastest stage and its share of the dense bf16 tensor-core peak at its own SM clock (`bench/bounds.sh` gives the exp-unit and HBM shares too). "
    printf "Figures: `bench/plot.sh %s`. Regenerate this table: `scripts/gen_readme_results.sh %s`.\n\n", csv, csv
    printf "| head_dim | causal | seqlen |"
    for (i = 1; i <= ns; ++i) printf " %s |", pretty(names[i])
    printf " fastest stage, %% of tensor-core peak |\n|---|---|---|"
    for (i = 1; i <= ns; ++i) printf "---|"
    printf "---|\n"
    for (a = 1; a <= nh; ++a) for (cz = 0; cz <= 1; ++cz) for (b = 1; b <= nl; ++b) {
        p = hd[a] SUBSEP cz SUBSEP ln[b]
        if (!(p in ps)) continue
        n = ln[b]
        printf "| %s | %s | %s |", hd[a], cz ? "yes" : "no", n % 1024 == 0 ? (n / 1024) "k" : n
        best = ""; best_v = -1
        for (i = 1; i <= ns; ++i) {
            s = names[i]
            if (!((s, p) in v)) { printf " — |"; continue }
            med = median(v[s, p])
            if (count(v[s, p]) > 1) printf " %s (%s) |", num(med), num(spread(v[s, p]))
            else printf " %s |", num(med)
            if (s ~ /^[0-9]/ && med > best_v) { best_v = med; best = s }
        }
        if (best == "") printf " — |\n"
        else if ((best, p) in pt) printf " %s: %.1f %% |\n", best, median(pt[best, p])
        else printf " %s: ? (no clock or unknown GPU) |\n", best
    }
}' "$tmp/bounds.csv" >"$tmp/table"

awk -v table="$tmp/table" '
    /<!-- results:begin -->/ { print; while ((getline l < table) > 0) print l; skip = 1; next }
    /<!-- results:end -->/ { skip = 0 }
    !skip { print }' "$readme" >"$tmp/readme"

if cmp -s "$tmp/readme" "$readme"; then
    echo "$readme: results table up to date"
else
    cp "$tmp/readme" "$readme"
    echo "$readme: results table rewritten from $csv"
fi
