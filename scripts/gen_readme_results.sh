#!/usr/bin/env bash
# gen_readme_results.sh — regenerates README.md's results tables from a sweep CSV
# (bench/sweep.sh), never by hand (docs/STYLE.md).
#
#   scripts/gen_readme_results.sh SWEEP.csv [README.md] [--direction fwd|bwd|both]
#                                 [--tagged] [--check] [--section NAME]
#
# The forward table lies between `<!-- results:begin -->` and `<!-- results:end -->`,
# the backward one between `<!-- results-bwd:begin -->` and `<!-- results-bwd:end -->`;
# each is rewritten from the CSV's rows of its direction, and only the tables of the
# direction asked for are touched: --direction, else the sweep's (the `direction=` line
# of the sidecar .meta), else every direction with rows in the CSV. So a backward
# sweep's CSV (whose stages also wrote forward rows) leaves the forward table alone.
# --section NAME uses the markers `<!-- NAME:begin -->` (and NAME-bwd) instead, for a second
# table from another CSV; its text then points to `bench/plot.sh CSV` for its figures
# (named after the CSV), not to --readme, which would draw over the README's main figures
# with that CSV's. The sidecar may carry `timing_text=` (how the runners were timed,
# in words, when no spin_us says it) and `provenance=` (who measured it, printed as given).
# A README without the markers of a direction asked for is an error (exit 1), and so is
# a direction asked for with no rows in the CSV (its table would be empty): nothing is
# written. A row cut short or with text where a number belongs is refused (exit 2, its
# line said), as is bad usage; nothing is written. --check writes nothing: it exits 1,
# with a diff, when the README differs from what this would write (the docs check,
# scripts/check_doc_numbers.sh).
#
# Each table: above it the GPU, its SM count, the range of SM clocks the rows recorded,
# the dates, the commits, the peers' versions (FA3's, with what its build lacks, PyTorch's
# and cuDNN's, from the sidecar <csv minus .csv>.meta that the sweep wrote), how the
# runners were timed (the spin, from the .meta; a sweep from before the spin says so),
# the reference lines measured in the same run (torch.matmul, copy bandwidth), and the
# command that regenerated it; then one row per (head_dim, causal, seqlen) with, for each
# stage and peer, the median TFLOP/s over the repeats and the spread between them
# (highest minus lowest repeat), in bold where the spread exceeds 3 % of the median, with
# a † after the seqlen where any runner's does; the best stage's share of the
# tensor-core peak at its own SM clock (bench/bounds.sh); where the CSV has FA3 rows, the
# best stage's median over FA3's, and below the table a second one: each stage's median
# over FA3's at every point (stage 08 / FA3 among them). The backward table times the
# backward alone (FLOPs 2.5 times the forward's) and adds the best stage over SDPA
# flash's (the FA2 backward). Marked rows (NAME@TAG: a baseline build's, another spin's)
# are left out unless --tagged, which gives them columns of their own. Needs no GPU.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../bench/lib.sh" # fx_writable, fx_csv_bad_row, fx_sweep_dirs
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
die() {
    echo "gen_readme_results.sh: $*" >&2
    exit 2
}
# needs WHAT "$@": the option $1 has its value $2, else a usage error (exit 2).
needs() {
    local what=$1
    shift
    if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs $what"; fi
}
csv="" readme="" direction="" dir_given=0 tagged=0 check=0 section=results section_given=0
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --direction) needs "fwd, bwd or both" "$@"; direction=$2; dir_given=1; shift ;;
        --tagged) tagged=1 ;;
        --check) check=1 ;;
        --section) needs "a name" "$@"; section=$2; section_given=1; shift ;;
        -*) die "unknown option '$1' (scripts/gen_readme_results.sh --help)" ;;
        *)
            if [[ -z $csv ]]; then csv=$1
            elif [[ -z $readme ]]; then readme=$1
            else die "one CSV and one README"
            fi
            ;;
    esac
    shift
done
[[ -n $csv ]] || { usage >&2; exit 2; }
readme=${readme:-README.md}
case $direction in
    "" | fwd | bwd | both) ;;
    *) die "--direction must be fwd, bwd or both" ;;
esac
[[ -r $csv ]] || die "cannot read $csv"
[[ -r $readme ]] || die "cannot read $readme"
first=$(head -n 1 "$csv")
[[ ,$first, == *,stage,* && ,$first, == *,direction,* && ,$first, == *,tflops,* ]] ||
    die "$csv is not a sweep CSV: its first line has no stage, direction and tflops columns" \
        "(FX_CSV_HEADER)"
meta=${csv%.csv}.meta
# Every row whole, with numbers where the tables read them: a row cut short or with text in
# a number would be tabulated as a zero. Refused, with its line; nothing written.
bad_row=$(fx_csv_bad_row "$csv")
[[ -z $bad_row ]] || die "$csv: $bad_row: nothing written (fix or drop the row)"

# The directions: --direction, the sweep's, or those with rows (bench/lib.sh).
read -r -a dirs <<<"$(fx_sweep_dirs "$csv" "$direction")"
((${#dirs[@]})) || { echo "gen_readme_results.sh: no fwd or bwd rows in $csv" >&2; exit 1; }
marker() { [[ $1 == fwd ]] && echo "$section" || echo "$section-bwd"; }
for dir in "${dirs[@]}"; do
    m=$(marker "$dir")
    if ! grep "<!-- $m:begin -->" "$readme" >/dev/null ||
        ! grep "<!-- $m:end -->" "$readme" >/dev/null; then
        echo "gen_readme_results.sh: $readme has no <!-- $m:begin/end --> markers" \
            "(the $([[ $dir == fwd ]] && echo forward || echo backward) table goes between" \
            "<!-- $m:begin --> and <!-- $m:end -->, each on a line of its own)" >&2
        exit 1
    fi
done
# The command that regenerates a table: the plain one, unless an option was needed.
regen_opt=""
((dir_given)) && regen_opt=" --direction $direction"
((tagged)) && regen_opt+=" --tagged"
((section_given)) && regen_opt+=" --section $section"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every row with its bounds (pct_tensor at the row's own clock).
tagged_opt=()
((tagged)) && tagged_opt=(--tagged)
bench/bounds.sh "$csv" --csv "$tmp/bounds.csv" ${tagged_opt[@]+"${tagged_opt[@]}"} >/dev/null
# A direction asked for with no rows would replace its table with an empty one: refused.
for dir in "${dirs[@]}"; do
    if ! awk -F, -v d="$dir" 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        $c["direction"] == d { found = 1; exit } END { exit !found }' "$tmp/bounds.csv"; then
        name=$([[ $dir == fwd ]] && echo forward || echo backward)
        echo "gen_readme_results.sh: $csv has no $name ($dir) rows$( ((tagged)) ||
            printf ' (marked rows left out: --tagged counts them)'): the $name table would" \
            "be empty; nothing written" >&2
        exit 1
    fi
done

# The peers' versions and the timing method, from the sidecar.
meta_value() { [[ -r $meta ]] && sed -n "s/^$1=//p;T;q" "$meta"; }
torch_v=$(meta_value torch || true)
torch_cuda=$(meta_value torch_cuda || true)
cudnn_v=$(meta_value cudnn || true)
driver_v=$(meta_value driver || true)
fa3_v=$(meta_value fa3 || true)
fa3_api=$(meta_value fa3_api || true)
fa3_version=$(meta_value fa3_version || true)
fa3_lacks=$(meta_value fa3_lacks || true)
spin_us=$(meta_value spin_us || true)
timing_text=$(meta_value timing_text || true)
provenance=$(meta_value provenance || true)
if [[ -n $torch_v ]]; then
    versions="PyTorch $torch_v (CUDA $torch_cuda),"
    versions+=" cuDNN ${cudnn_v%% (*}${driver_v:+, driver $driver_v}"
    if [[ -n $fa3_api ]]; then
        fa3_text="FlashAttention-3 \`$fa3_api\` $fa3_version"
        fa3_text+="${fa3_lacks:+ (its build lacks: $fa3_lacks)}"
        versions="$fa3_text, $versions"
    elif [[ $fa3_v == skipped:* ]]; then
        versions+="; FA3 ${fa3_v}"
    fi
elif [[ -r $meta ]] && grep '^peers=' "$meta" >/dev/null; then
    versions="none: $(meta_value peers)"
else
    versions="not recorded (no $meta beside the CSV)"
fi
if [[ -n $timing_text ]]; then
    timing=$timing_text
elif [[ -n $spin_us ]]; then
    if ((spin_us > 0)); then
        timing="Every runner, stage and peer, timed each call after an L2 flush with the GPU kept"
        timing+=" busy for ${spin_us} µs (\`--spin-us ${spin_us}\`) while the host enqueued it,"
        short=0
        [[ ! -r $meta ]] || short=$(grep -c '^note=.*(spin too short)' "$meta" || true)
        if ((short > 0)); then
            timing+=" so that no launch latency should be in the times; the \`.meta\` names"
            timing+=" the ${short} results (runner, point, repeat) where the spin ended before"
            timing+=" the host was done with some call (\`spin too short\`), whose times may"
            timing+=" hold some"
        else
            timing+=" so no launch latency is in the times"
        fi
        timing+=" ([docs/benchmarks.md](docs/benchmarks.md#how-the-runners-are-timed))."
    else
        timing="Timed without the spin (\`--spin-us 0\`): a Python peer's launch latency can be"
        timing+=" inside its times"
        timing+=" ([docs/benchmarks.md](docs/benchmarks.md#how-the-runners-are-timed))."
    fi
else
    timing="Measured before the sweep kept the GPU busy while the host enqueued each call:"
    timing+=" the Python peers' launch latency can be inside their times, most at the short"
    timing+=" points ([docs/benchmarks.md](docs/benchmarks.md#how-the-runners-are-timed))."
fi
slow_note="" bwd_note=""
if [[ -r $meta ]]; then
    slow_note=$(awk '/^note=.* not run at seqlen / {
        sub(/^note=/, ""); printf "%s%s", n++ ? "; " : "", $0 }' "$meta")
    bwd_note=$(awk '/^note=.* has no backward / {
        sub(/^note=/, ""); printf "%s%s", n++ ? "; " : "", $0 }' "$meta")
fi

# One table: table DIR FILE.
table() {
awk -F, -v csv="$csv" -v versions="$versions" -v slow_note="$slow_note" -v dir="$1" \
    -v provenance="$provenance" -v section_mode="$section_given" \
    -v bwd_note="$bwd_note" -v regen_opt="$regen_opt" -v timing="$timing" \
    "$(<bench/awk_median.awk)"'
function spread(list,    n, v, i, lo, hi) {
    n = split(list, v, " "); lo = hi = v[1] + 0
    for (i = 2; i <= n; ++i) {
        if (v[i] + 0 < lo) lo = v[i] + 0
        if (v[i] + 0 > hi) hi = v[i] + 0
    }
    return hi - lo
}
function count(list,    v) { return split(list, v, " ") }
function num(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.1f", x) }
function rank(s,    base) {
    base = s; sub(/@.*/, "", base)
    if (base == "fa3") return "1 0 " s; if (base == "sdpa_flash") return "1 1 " s
    if (base == "sdpa_cudnn") return "1 2 " s; if (base == "sdpa_efficient") return "1 3 " s
    return (s ~ /^[0-9]/ ? "0 " : "2 ") s
}
function pretty(s,    base, mark) {
    base = s; mark = ""
    if (index(s, "@")) {
        base = substr(s, 1, index(s, "@") - 1); mark = " @" substr(s, index(s, "@") + 1)
    }
    if (base == "fa3") return "FA3" mark; if (base == "sdpa_flash") return "SDPA flash (FA2)" mark
    if (base == "sdpa_cudnn") return "SDPA cuDNN" mark
    if (base == "sdpa_efficient") return "SDPA mem-efficient" mark; return "`" s "`"
}
function sortnum(a, n,    i, j, t) {
    for (i = 2; i <= n; ++i)
        for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; --j) {
            t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
        }
}
# A spread above 3 % of the median (two repeats or more).
function wide(s, p) { return count(v[s, p]) > 1 && spread(v[s, p]) > 0.03 * median(v[s, p]) }
function is_stage(s) { return s ~ /^[0-9]/ && !index(s, "@") }
NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
{
    s = $c["stage"]; m = $c["sm_clock_mhz"] + 0
    if (m > 0) { if (lo_c == "" || m < lo_c) lo_c = m; if (m > hi_c) hi_c = m }
    dev = $c["device"]; sms = $c["sm_count"]; dt = $c["dtype"]
    day = substr($c["date"], 1, 10)
    if (first == "" || day < first) first = day; if (day > last) last = day
    if ($c["check"] != "peer" && !index(s, "@") && !($c["commit"] in cm)) {
        cm[$c["commit"]] = 1; commits = commits (commits == "" ? "" : ", ") "`" $c["commit"] "`"
    }
    if ($c["check"] == "peer" && !($c["commit"] in pcm)) {
        pcm[$c["commit"]] = 1
        pcommits = pcommits (pcommits == "" ? "" : ", ") "`" $c["commit"] "`"
    }
    if ($c["check"] != "peer" && index(s, "@") && !(($c["commit"], s) in tcm)) {
        tcm[$c["commit"], s] = 1
        if (!($c["commit"] in tcs)) {
            tcs[$c["commit"]] = 1
            tcommits = tcommits (tcommits == "" ? "" : ", ") "`" $c["commit"] "`"
        }
    }
    if ($c["direction"] == "ref") { ref[s] = ref[s] " " $c["tflops"]; next }
    if ($c["direction"] != dir) next
    if (!(s in ss)) { ss[s] = 1; names[++ns] = s; key[ns] = rank(s) }
    p = $c["head_dim"] SUBSEP $c["causal"] SUBSEP $c["seqlen_q"]
    if (!(p in ps)) {
        ps[p] = 1; hds[$c["head_dim"]] = 1; lens[$c["seqlen_q"]] = 1; cs[$c["causal"]] = 1
    }
    v[s, p] = v[s, p] " " $c["tflops"]
    if ($c["pct_tensor"] != "") pt[s, p] = pt[s, p] " " $c["pct_tensor"]
    if (count(v[s, p]) > nrep) nrep = count(v[s, p])
}
END {
    # Series order: the stages, then the peers (FA3 first).
    for (i = 2; i <= ns; ++i) for (j = i; j > 1 && key[j - 1] > key[j]; --j) {
        t = key[j]; key[j] = key[j - 1]; key[j - 1] = t
        t = names[j]; names[j] = names[j - 1]; names[j - 1] = t }
    nh = 0; for (h in hds) hd[++nh] = h; sortnum(hd, nh)
    nl = 0; for (l in lens) ln[++nl] = l; sortnum(ln, nl)
    clk = hi_c == 0 ? "SM clock not recorded" \
                    : (lo_c == hi_c ? sprintf("SM clock %d MHz", hi_c) \
                                    : sprintf("SM clock %d–%d MHz", lo_c, hi_c))
    bwd = dir == "bwd"
    fa3 = ("fa3" in ss)
    n_st = 0; for (i = 1; i <= ns; ++i) if (is_stage(names[i])) st[++n_st] = names[i]
    printf "<!-- generated by scripts/gen_readme_results.sh %s%s: " \
           "edit the CSV, not this table -->\n", csv, regen_opt
    if (bwd) {
        printf "The FlashAttention-3 paper'"'"'s setup for the backward " \
               "(%s, hidden 2048: heads = 2048/head_dim, batch·seqlen = 16384), ", dt
        printf "the backward timed alone (the stage programs'"'"' `--bench --bwd`; " \
               "the peers'"'"' `torch.autograd.grad` after one untimed forward), "
    } else
    printf "The FlashAttention-3 paper'"'"'s forward setup " \
           "(%s, hidden 2048: heads = 2048/head_dim, batch·seqlen = 16384), ", dt
    printf "measured on one **%s** (%s SMs; %s during the timed calls, " \
           "where the paper fixed 1830 MHz), ", dev, sms, clk
    printf "%s%s", first, last != first ? " to " last : ""
    if (commits != "") printf ", stages built at commit %s", commits
    if (tcommits != "") printf " (marked stages: %s)", tcommits
    if (pcommits != "" && pcommits != commits) printf ", peers timed from the tree at %s", pcommits
    printf ". "
    printf "Peers in the same run: %s.", versions
    if (provenance != "") printf " %s", provenance
    if ("torch_matmul" in ref || "copy_bw" in ref) {
        printf " Reference lines in the same run:"
        if ("torch_matmul" in ref)
            printf " bf16 `torch.matmul` 8192³ %s TFLOP/s%s",
                   num(median(ref["torch_matmul"])), ("copy_bw" in ref) ? ";" : "."
        if ("copy_bw" in ref)
            printf " device-to-device copy %.2f TB/s (read + written).", median(ref["copy_bw"])
    }
    printf " %s\n\n", timing
    if (bwd)
        printf "TFLOP/s by the FA3 convention for the backward " \
               "(2.5·4·batch·heads·head_dim·unmasked pairs over the time: " \
               "five GEMMs to the forward'"'"'s two). "
    else
        printf "TFLOP/s by the FA3 convention " \
               "(4·batch·heads·head_dim·unmasked pairs over the time). "
    # Cells with fewer repeats than the most (a run cut short): said, with how many.
    nshort = 0; nmin = nrep
    for (k in v) { n = count(v[k]); if (n < nrep) { ++nshort; if (n < nmin) nmin = n } }
    if (nrep > 1) {
        printf "Each cell: the median over %d repeats " \
               "of each repeat'"'"'s median timed call", nrep
        if (nshort > 0)
            printf " (as few as %d at %d of the cells, where a run was cut short: the " \
                   "CSV'"'"'s .meta says which)", nmin, nshort
        printf ", "
        printf "and in brackets the spread between repeats (highest − lowest); "
        printf "the sweep interleaves the runners at every point, " \
               "so a difference larger than both spreads is a measured one. "
        printf "**Bold**: a spread above 3 %% of its median; " \
               "† after the seqlen: a point where some runner'"'"'s spread is above 3 %%. "
    } else {
        printf "Each cell: one repeat'"'"'s median timed call. " \
               "One repeat has no spread: a claim that one runner beats another needs three " \
               "(`bench/sweep.sh --repeats 3`). "
    }
    printf "— : not measured (not run, refused by the stage'"'"'s capabilities, " \
           "or declined by the peer'"'"'s backend; the CSV'"'"'s .meta says which)"
    if (slow_note != "") printf "; %s", slow_note
    if (bwd && bwd_note != "") printf "; %s", bwd_note
    ratio = bwd && ("sdpa_flash" in ss)
    printf ". The last column%s: the fastest stage and its share of the dense bf16 tensor-core " \
           "peak at its own SM clock (`bench/bounds.sh` gives the exp-unit and HBM shares too)",
           (ratio || fa3) ? "s" : ""
    if (fa3) printf ", its median over FA3'"'"'s%s", ratio ? "" : " at that point"
    if (ratio)
        printf "%s its median over SDPA flash'"'"'s (the FA2 backward) at that point",
               fa3 ? " and" : ", and"
    printf ". "
    # The README'"'"'s figures are the main table'"'"'s: a --section table'"'"'s are named after
    # its CSV, which --readme would draw over them.
    if (section_mode) printf "Figures: `bench/plot.sh %s` (named after the CSV). ", csv
    else printf "Figures: `bench/plot.sh --readme %s`. ", csv
    printf "Regenerate this table: `scripts/gen_readme_results.sh %s%s`.\n\n", csv, regen_opt
    printf "| head_dim | causal | seqlen |"
    for (i = 1; i <= ns; ++i) printf " %s |", pretty(names[i])
    printf " fastest stage, %% of tensor-core peak |"
    if (fa3) printf " fastest stage ÷ FA3 |"
    if (ratio) printf " fastest stage ÷ SDPA flash |"
    printf "\n|---|---|---|"
    for (i = 1; i <= ns; ++i) printf "---|"
    printf "---|%s%s\n", fa3 ? "---|" : "", ratio ? "---|" : ""
    for (a = 1; a <= nh; ++a) for (cz = 0; cz <= 1; ++cz) for (b = 1; b <= nl; ++b) {
        p = hd[a] SUBSEP cz SUBSEP ln[b]
        if (!(p in ps)) continue
        n = ln[b]
        any_wide = 0
        for (i = 1; i <= ns; ++i) if (((names[i], p) in v) && wide(names[i], p)) any_wide = 1
        printf "| %s | %s | %s%s |", hd[a], cz ? "yes" : "no",
               n % 1024 == 0 ? (n / 1024) "k" : n, any_wide ? " †" : ""
        best = ""; best_v = -1
        for (i = 1; i <= ns; ++i) {
            s = names[i]
            if (!((s, p) in v)) { printf " — |"; continue }
            med = median(v[s, p])
            cell = count(v[s, p]) > 1 ? sprintf("%s (%s)", num(med), num(spread(v[s, p]))) \
                                      : num(med)
            printf " %s |", wide(s, p) ? "**" cell "**" : cell
            if (is_stage(s) && med > best_v) { best_v = med; best = s }
        }
        if (best == "") printf " — |"
        else if ((best, p) in pt) printf " %s: %.1f %% |", best, median(pt[best, p])
        else printf " %s: ? (no clock or unknown GPU) |", best
        if (fa3) {
            if (best == "" || !(("fa3", p) in v)) printf " — |"
            else printf " %.2f%s |", best_v / median(v["fa3", p]),
                        (wide(best, p) || wide("fa3", p)) ? " †" : ""
        }
        if (ratio) {
            if (best == "" || !(("sdpa_flash", p) in v)) printf " — |"
            else printf " %.2f |", best_v / median(v["sdpa_flash", p])
        }
        printf "\n"
    }
    if (!fa3 || n_st == 0) exit
    printf "\nEach stage'"'"'s median over FA3'"'"'s at the same point " \
           "(above 1: faster than FA3; " \
           "† where the stage'"'"'s or FA3'"'"'s spread exceeds 3 %% of its median, " \
           "so the ratio is less certain than its digits):\n\n"
    printf "| head_dim | causal | seqlen |"
    for (i = 1; i <= n_st; ++i) printf " `%s` ÷ FA3 |", st[i]
    printf "\n|---|---|---|"
    for (i = 1; i <= n_st; ++i) printf "---|"
    printf "\n"
    for (a = 1; a <= nh; ++a) for (cz = 0; cz <= 1; ++cz) for (b = 1; b <= nl; ++b) {
        p = hd[a] SUBSEP cz SUBSEP ln[b]
        if (!(p in ps)) continue
        n = ln[b]
        printf "| %s | %s | %s |", hd[a], cz ? "yes" : "no", n % 1024 == 0 ? (n / 1024) "k" : n
        for (i = 1; i <= n_st; ++i) {
            s = st[i]
            if (!((s, p) in v) || !(("fa3", p) in v)) { printf " — |"; continue }
            printf " %.2f%s |", median(v[s, p]) / median(v["fa3", p]),
                   (wide(s, p) || wide("fa3", p)) ? " †" : ""
        }
        printf "\n"
    }
}' "$tmp/bounds.csv" >"$2"
}

# Each table between its markers; README.md is written once, when something changed.
cp "$readme" "$tmp/readme"
for dir in "${dirs[@]}"; do
    m=$(marker "$dir")
    table "$dir" "$tmp/table"
    awk -v table="$tmp/table" -v begin="<!-- $m:begin -->" -v end="<!-- $m:end -->" '
        index($0, begin) {
            print; while ((getline l < table) > 0) print l
            close(table); skip = 1; next
        }
        index($0, end) { skip = 0 }
        !skip { print }' "$tmp/readme" >"$tmp/readme.new"
    mv "$tmp/readme.new" "$tmp/readme"
done

what="results table"
((${#dirs[@]} == 1)) || what="results tables"
[[ ${dirs[*]} == bwd ]] && what="backward results table"
if cmp -s "$tmp/readme" "$readme"; then
    echo "$readme: $what up to date"
elif ((check)); then
    echo "$readme: $what NOT what $csv gives" \
        "(scripts/gen_readme_results.sh $csv$regen_opt rewrites it):"
    diff "$readme" "$tmp/readme" | sed -n 1,40p || true
    exit 1
else
    cp "$tmp/readme" "$readme"
    echo "$readme: $what rewritten from $csv"
fi
