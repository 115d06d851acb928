# ladder.gp — the stage ladder: TFLOP/s of each stage, from a ladder CSV written by run.sh.
#
# Regenerate (from the repository root):
#   gnuplot -c plots/ladder.gp plots/data/ladder_<UTC date>_<device>.csv [plots/ladder]
#   gnuplot -e "csv='plots/data/ladder_<UTC date>_<device>.csv'" plots/ladder.gp
# Writes <out>.png and <out>.svg (out: the second argument, or plots/ladder).
#
# The CSV's columns are named by its header (FX_CSV_HEADER, common/fx_main.h). When a
# file holds several runs (run.sh appends), the problem of its last row is drawn: each
# stage's last row of each direction. Forward bars always; backward bars beside them
# when there are backward rows.
# On a Hopper GPU (H100/H200/H800/GH200) a line marks the dense bf16 tensor-core peak at
# the SM clock recorded in the run: SMs × 4096 FLOP per clock × clock (989 TFLOP/s for
# 132 SMs at 1830 MHz, the FA3 paper's setting).

if (ARGC >= 1) { csv = ARG1 }
if (!exists("csv")) {
    print "usage: gnuplot -c plots/ladder.gp LADDER.csv [OUT]"
    exit status 2
}
if (!exists("out")) { out = (ARGC >= 2) ? ARG2 : "plots/ladder" }

# awk programs over the CSV, which they read twice (no single quotes inside: the shell
# wraps them in some). The first pass names the columns and finds the problem of the
# last row; the second keeps the rows of that problem on that device, so a file that
# holds runs of several problems draws the last one.
cols = 'FNR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next } ' . \
  'function key() { return $c["device"] "," $c["batch"] "," $c["seqlen_q"] "," ' . \
  '$c["seqlen_k"] "," $c["heads_q"] "," $c["heads_kv"] "," $c["head_dim"] "," ' . \
  '$c["dtype"] "," $c["causal"] } ' . \
  'NR == FNR { last = key(); next } key() != last { next } '
# One line per stage, in the order of first appearance: stage fwd bwd ("?" = none).
table = cols . \
  '{ s = $c["stage"]; if (!(s in seen)) { seen[s] = 1; order[++n] = s } ' . \
  'v[s, $c["direction"]] = $c["tflops"] } ' . \
  'END { for (i = 1; i <= n; ++i) { s = order[i]; ' . \
  'printf "%s %s %s\n", s, ((s, "fwd") in v) ? v[s, "fwd"] : "?", ' . \
  '((s, "bwd") in v) ? v[s, "bwd"] : "?" } }'
# The title: device, SMs, SM clock range, date, problem.
title = cols . \
  '{ dev = $c["device"]; sms = $c["sm_count"]; mhz = $c["sm_clock_mhz"] + 0; ' . \
  'if (lo == "" || mhz < lo) lo = mhz; if (mhz > hi) hi = mhz; ' . \
  'date = substr($c["date"], 1, 10); ' . \
  'p = sprintf("batch %s, seqlen %s", $c["batch"], $c["seqlen_q"]); ' . \
  'if ($c["seqlen_k"] != $c["seqlen_q"]) p = p sprintf(" (keys %s)", $c["seqlen_k"]); ' . \
  'p = p sprintf(", heads %s", $c["heads_q"]); ' . \
  'if ($c["heads_kv"] != $c["heads_q"]) p = p sprintf(" (kv %s)", $c["heads_kv"]); ' . \
  'p = p sprintf(", head_dim %s, %s%s", $c["head_dim"], $c["dtype"], ' . \
  '$c["causal"] == 1 ? ", causal" : "") } ' . \
  'END { clk = hi == 0 ? "SM clock not read" : ' . \
  '(lo == hi ? sprintf("SM %d MHz", hi) : sprintf("SM %d-%d MHz", lo, hi)); ' . \
  'printf "Stage ladder on %s (%s SMs, %s), %s\n%s", dev, sms, clk, date, p }'
# Dense bf16 tensor-core peak in TFLOP/s at the highest clock recorded: SMs × FLOP per SM
# per clock (4096 on Hopper, 2048 on A100, as bench/bounds.sh and fa3_sweep.gp count them)
# × clock; 0 on other GPUs.
peak = cols . \
  '{ dev = $c["device"]; sms = $c["sm_count"]; ' . \
  'if ($c["sm_clock_mhz"] + 0 > mhz) mhz = $c["sm_clock_mhz"] + 0 } ' . \
  'END { f = dev ~ /H100|H200|H800|GH200/ ? 4096 : dev ~ /A100|A800|A30/ ? 2048 : 0; ' . \
  'printf "%.1f", sms * f * mhz * 1e6 / 1e12 }'
has_bwd_prog = cols . '$c["direction"] == "bwd" { n++ } END { print n + 0 }'

run(prog) = system("awk -F, '" . prog . "' '" . csv . "' '" . csv . "'")
data = "< awk -F, '" . table . "' '" . csv . "' '" . csv . "'"
graph_title = run(title)
bound = real(run(peak))
has_bwd = int(run(has_bwd_prog))

set title graph_title noenhanced
set ylabel "TFLOP/s (log scale)"
set logscale y
set ytics (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
set format y "%g"
set grid ytics mytics
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics nomirror rotate by -20 noenhanced
set datafile missing "?"
set key top left
set bmargin 5

# Bars from the floor of the graph: the y range spans the data (and the bound) on a log axis.
stats data using 2 nooutput
ymax = STATS_max
ymin = STATS_min
if (has_bwd) {
    stats data using 3 nooutput
    ymax = (STATS_max > ymax) ? STATS_max : ymax
    ymin = (STATS_min < ymin) ? STATS_min : ymin
}
if (bound > ymax) { ymax = bound }
set yrange [ymin / 3.0 : ymax * 3.0]

if (bound > 0) {
    set arrow 1 from graph 0, first bound to graph 1, first bound \
        nohead dt 2 lw 1.5 lc rgb "#444444" front
    set label 1 \
        sprintf("dense bf16 tensor-core peak at the run's highest SM clock: %.0f TFLOP/s", bound) \
        at graph 0.99, first bound * 1.3 right front
}

# Bar centres: clustered histograms put series k of row i at i + (k - (n-1)/2)·w.
w = has_bwd ? 1.0 / 3 : 0.0
lbl(v) = sprintf("%.1f", v)

do for [fmt in "png svg"] {
    if (fmt eq "png") {
        if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
            set terminal pngcairo size 1000,600 font "sans,11" noenhanced
        } else {
            set terminal png size 1000,600 noenhanced
        }
    } else {
        set terminal svg size 1000,600 dynamic font "sans,11" noenhanced
    }
    set output out . "." . fmt
    if (has_bwd) {
        plot data using 2:xtic(1) title "forward" lc rgb "#3b6ea5", \
             "" using 3 title "backward" lc rgb "#d17a22", \
             "" using ($0 - w / 2):2:(lbl($2)) with labels offset 0,0.7 notitle, \
             "" using ($0 + w / 2):3:(lbl($3)) with labels offset 0,0.7 notitle
    } else {
        plot data using 2:xtic(1) title "forward" lc rgb "#3b6ea5", \
             "" using 0:2:(lbl($2)) with labels offset 0,0.7 notitle
    }
    unset output
}
