# fa3_sweep.gp — one figure of the FA3 paper's sweep, forward or backward, in the manner
# of the paper's bar charts: for one (direction, head_dim, causal), TFLOP/s over seqlen,
# the stages and the peers (PyTorch SDPA backends) side by side, from a CSV written by
# bench/sweep.sh.
#
# Regenerate (from the repository root; bench/plot.sh CSV renders them all):
#   gnuplot -c plots/fa3_sweep.gp SWEEP.csv HEAD_DIM CAUSAL [fwd|bwd] [tagged] [OUT]
#   e.g. gnuplot -c plots/fa3_sweep.gp plots/data/fa3_fwd_2026-12-01_nvidia-h200.csv 128 0
#        gnuplot -c plots/fa3_sweep.gp plots/data/fa3_bwd_<UTC date>_<device>.csv 128 0 bwd
# Writes OUT.png and OUT.svg (OUT: plots/fa3_<fwd|bwd>_hd<HEAD_DIM>_<causal|noncausal>,
# the README's names), from the CSV's rows of that direction (a backward row times the
# backward alone; its FLOPs are 2.5 times the forward's). Marked rows (stage NAME@TAG,
# bench/sweep.sh --baseline or --spin-compare) are left out unless `tagged` is given; a
# CSV with a `variant` column (an ablation's) gets one series per stage and variant.
#
# Bars: the median over the repeats of each runner's per-repeat median; whiskers: the
# lowest and highest repeat. Lines: the dense bf16 tensor-core peak at the highest SM
# clock the run recorded (SMs × 4096 FLOP per clock × clock on Hopper, 2048 on A100),
# the exp unit's bound where it is that low (head_dim 64: 16 exponentials per SM per
# clock, one per unmasked pair, each pair worth 4·head_dim FLOPs, 2.5 times that in the
# backward, so there it lies above the peak and is not drawn), and the bf16
# torch.matmul 8192³ measured in the same run (a reference, not a ceiling). The HBM bound
# is not drawn: at these shapes (each K/V tile read once per Q block, mostly from L2) it
# lies far above the tensor-core peak; bench/bounds.sh prints each point's HBM share.
# Where the CSV has FA3 rows (the `fa3` peer), a dashed purple line joins FA3's medians
# across the seqlens, and each stage's label gives its median over FA3's in brackets.
# Where the runners have different numbers of repeats (an ablation's), the key gives
# each one's count. The command that regenerates the figure is printed at its foot.

if (ARGC < 3) {
    print "usage: gnuplot -c plots/fa3_sweep.gp SWEEP.csv HEAD_DIM CAUSAL [fwd|bwd] [tagged] [OUT]"
    exit status 2
}
csv = ARG1
hd = int(ARG2)
causal = int(ARG3)
cname = causal ? "causal" : "noncausal"
# After the first three: the direction (fwd, bwd), `tagged`, OUT, each optional, in any order.
dir = "fwd"
out = ""
tagged = 0
do for [k = 4:ARGC] {
    a = value("ARG" . k)
    if (a eq "fwd" || a eq "bwd") {
        dir = a
    } else {
        if (a eq "tagged") { tagged = 1 } else { out = a }
    }
}
default_out = sprintf("plots/fa3_%s_hd%d_%s", dir, hd, cname)
if (out eq "") { out = default_out }
bwd = dir eq "bwd"

# awk programs over the CSV (no single quotes inside: the shell wraps them in some).
# The columns are named by the header (FX_CSV_HEADER, common/fx_main.h).
# median() comes from bench/awk_median.awk (gnuplot runs from the repository root).
cols = 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next } ' . \
  system('cat bench/awk_median.awk') . ' ' . \
  'function sname(    s) { s = $c["stage"]; ' . \
  'if (("variant" in c) && $c["variant"] != "") s = s ":" $c["variant"]; return s } ' . \
  'function lo(list,    n, v, i, m) { n = split(list, v, " "); m = v[1]; ' . \
  'for (i = 2; i <= n; ++i) if (v[i] + 0 < m + 0) m = v[i]; return m } ' . \
  'function hi(list,    n, v, i, m) { n = split(list, v, " "); m = v[1]; ' . \
  'for (i = 2; i <= n; ++i) if (v[i] + 0 > m + 0) m = v[i]; return m } ' . \
  sprintf('function mine() { return $c["direction"] == "%s" && $c["head_dim"] == %d && ' . \
          '$c["causal"] == %d && (%d || !index($c["stage"], "@")) } ', dir, hd, causal, tagged) . \
  'function rank(s,    b) { b = s; sub(/@.*/, "", b); sub(/:.*/, "", b); ' . \
  'if (b == "fa3") return "1 0"; if (b == "sdpa_flash") return "1 1"; ' . \
  'if (b == "sdpa_cudnn") return "1 2"; ' . \
  'if (b == "sdpa_efficient") return "1 3"; return (s ~ /^[0-9]/ ? "0 " : "2 ") b } ' . \
  'function order_series(    i, j, t, v) { ' . \
  'for (i = 1; i <= ns; ++i) { v = index(names[i], ":"); ' . \
  'key[i] = rank(names[i]) " " ' . \
  '(v ? substr(names[i], 1, v - 1) sprintf(":%03d", i) : names[i]) } ' . \
  'for (i = 2; i <= ns; ++i) for (j = i; j > 1 && key[j - 1] > key[j]; --j) { ' . \
  't = key[j]; key[j] = key[j - 1]; key[j - 1] = t; ' . \
  't = names[j]; names[j] = names[j - 1]; names[j - 1] = t } } ' . \
  'mine() { s = sname(); n = $c["seqlen_q"] + 0; ' . \
  'if (!(s in ss)) { ss[s] = 1; names[++ns] = s } ' . \
  'if (!(n in sl)) { sl[n] = 1; lens[++nl] = n } ' . \
  'v[s, n] = v[s, n] " " $c["tflops"] } '
# The series, in the order drawn: the stages, then the peers.
series_prog = cols . 'END { order_series(); ' . \
  'for (i = 1; i <= ns; ++i) printf "%s%s", names[i], i < ns ? " " : "" }'
# One line per seqlen (ascending): its label, then median low high per series ("?" = none).
table_prog = cols . 'END { order_series(); ' . \
  'for (i = 2; i <= nl; ++i) for (j = i; j > 1 && lens[j - 1] > lens[j]; --j) { ' . \
  't = lens[j]; lens[j] = lens[j - 1]; lens[j - 1] = t } ' . \
  'for (k = 1; k <= nl; ++k) { n = lens[k]; ' . \
  'printf "%s", n % 1024 == 0 ? (n / 1024) "k" : n; ' . \
  'for (i = 1; i <= ns; ++i) { s = names[i]; ' . \
  'if ((s, n) in v) printf " %s %s %s", median(v[s, n]), lo(v[s, n]), hi(v[s, n]); ' . \
  'else printf " ? ? ?" } printf "\n" } }'
# The title: device, SMs, clock range, dates, commits, repeats, problem.
title_prog = cols . \
  'mine() || $c["direction"] == "ref" { dev = $c["device"]; sms = $c["sm_count"]; ' . \
  'm = $c["sm_clock_mhz"] + 0; ' . \
  'if (m > 0 && (lo_c == "" || m < lo_c)) lo_c = m; if (m > hi_c) hi_c = m; ' . \
  'd = substr($c["date"], 1, 10); ' . \
  'if (first == "" || d < first) first = d; if (d > last) last = d; ' . \
  'if ($c["check"] != "peer" && !($c["commit"] in cm)) { cm[$c["commit"]] = 1; ' . \
  'commits = commits (commits == "" ? "" : ", ") $c["commit"] } } ' . \
  'mine() { reps[sname(), $c["seqlen_q"]]++; ' . \
  'if (reps[sname(), $c["seqlen_q"]] > nrep) nrep = reps[sname(), $c["seqlen_q"]]; ' . \
  'h = $c["heads_q"]; dt = $c["dtype"] } ' . \
  'END { clk = hi_c == 0 ? "SM clock not read" : ' . \
  '(lo_c == hi_c ? sprintf("SM %d MHz", hi_c) : sprintf("SM %d-%d MHz", lo_c, hi_c)); ' . \
  sprintf('printf "FA3 %s, head_dim %%d, %%s, %%s, heads %%s, batch x seqlen = 16384 - ' . \
          '%%s (%%s SMs, %%s), %%s%%s, commit %%s\n", ', \
          bwd ? "backward (timed alone)" : "forward") . \
  sprintf('%d, "%s", ', hd, causal ? "causal" : "non-causal") . \
  'dt, h, dev, sms, clk, first, last != first ? " to " last : "", ' . \
  'commits == "" ? "-" : commits; ' . \
  'lo_r = ""; for (k in reps) if (lo_r == "" || reps[k] < lo_r) lo_r = reps[k]; ' . \
  'if (lo_r == nrep) printf "bars: median of %d repeat%s ' . \
  '(each the median of its timed calls); whiskers: lowest and highest repeat", ' . \
  'nrep, nrep == 1 ? "" : "s"; ' . \
  'else printf "bars: median of each runner%ss %d to %d repeats ' . \
  '(the key gives each count; each the median of its timed calls); ' . \
  'whiskers: lowest and highest repeat", sprintf("%c", 39), lo_r, nrep }'
# Each series' repeats (the most at any seqlen), in the order drawn; all equal: "".
counts_prog = cols . 'mine() { reps[sname(), $c["seqlen_q"]]++ } ' . \
  'END { order_series(); ' . \
  'for (k in reps) { split(k, kk, SUBSEP); if (reps[k] > cnt[kk[1]]) cnt[kk[1]] = reps[k] } ' . \
  'same = 1; for (i = 2; i <= ns; ++i) if (cnt[names[i]] != cnt[names[1]]) same = 0; ' . \
  'if (!same) for (i = 1; i <= ns; ++i) printf "%d%s", cnt[names[i]], i < ns ? " " : "" }'
# The tensor-core peak and the exp bound (as TFLOP/s at this head_dim) at the highest
# clock recorded, and the GEMM's median; 0 where unknown.
lines_prog = cols . \
  '{ if ($c["sm_clock_mhz"] + 0 > mhz) mhz = $c["sm_clock_mhz"] + 0; ' . \
  'dev = $c["device"]; sms = $c["sm_count"] } ' . \
  '$c["stage"] == "torch_matmul" { g = g " " $c["tflops"] } ' . \
  'END { f = dev ~ /H100|H200|H800|GH200/ ? 4096 : dev ~ /A100|A800|A30/ ? 2048 : 0; ' . \
  sprintf('printf "%%.1f %%.1f %%.1f", sms * f * mhz * 1e6 / 1e12, ' . \
          'f ? sms * 16 * mhz * 1e6 * 4 * %d * %s / 1e12 : 0, ', hd, bwd ? "2.5" : "1") . \
  'g == "" ? 0 : median(g) }'

awk(prog) = "awk -F, '" . prog . "' '" . csv . "'"
series = system(awk(series_prog))
n = words(series)
if (n == 0) {
    print sprintf("fa3_sweep.gp: no %s rows with head_dim %d, causal %d in %s", \
                  bwd ? "backward" : "forward", hd, causal, csv)
    exit status 1
}
data = "< " . awk(table_prog)
title_text = system(awk(title_prog))
lines = system(awk(lines_prog))
peak = real(word(lines, 1))
exp_bound = real(word(lines, 2))
gemm = real(word(lines, 3))
regen = sprintf("gnuplot -c plots/fa3_sweep.gp %s %d %d%s%s%s", csv, hd, causal, \
                bwd ? " bwd" : "", tagged ? " tagged" : "", out eq default_out ? "" : " " . out)
counts = system(awk(counts_prog))
# FA3's series (0: none): its line, and each stage's ratio to it in the labels.
i_fa3 = 0
do for [i = 1:n] { if (word(series, i) eq "fa3") { i_fa3 = i } }

# Colours: stages 01-05 in blues (01 lightest, 05 darkest), 06-10 in greens (06 lightest),
# then again from the lightest blue; FA3 purple, SDPA flash light orange, cuDNN dark
# orange, mem-efficient grey, other peers lavender. A stage's variants (an ablation) and
# its marked rows (@TAG) take its colour, the later ones drawn in lighter hatching.
stage_colors = "#c6dbef #9ecae1 #4292c6 #08519c #08306b #a1d99b #74c476 #41ab5d #238b45 #00441b"
fa3_color = "#54278f"
peer_color(s) = s eq "fa3" ? fa3_color : s eq "sdpa_flash" ? "#fdae6b" : \
                s eq "sdpa_cudnn" ? "#e6550d" : s eq "sdpa_efficient" ? "#969696" : "#bcbddc"
is_stage(s) = strstrt("0123456789", s[1:1]) > 0
# A stage keeps its colour in every figure: the colour is chosen by its number (read
# digit by digit: gnuplot takes "08" and "09" for bad octal).
stage_num(s) = 10 * int(s[1:1]) + int(s[2:2])
stage_color(s) = word(stage_colors, (stage_num(s) + 9) % 10 + 1)
color(i) = is_stage(word(series, i)) ? stage_color(word(series, i)) : \
           peer_color(plain(word(series, i)))
pretty0(s) = s eq "fa3" ? "FA3" : s eq "sdpa_flash" ? "SDPA flash (FA2)" : \
            s eq "sdpa_cudnn" ? "SDPA cuDNN" : \
            s eq "sdpa_efficient" ? "SDPA mem-efficient" : \
            (strstrt(s, "@") > 0 && !is_stage(s) ? \
             pretty0(s[1:strstrt(s, "@") - 1]) . " " . s[strstrt(s, "@"):] : \
            (strstrt(s, ":") > 0 ? \
             "stage " . s[1:strstrt(s, ":") - 1] . " (" . s[strstrt(s, ":") + 1:] . ")" : \
             (is_stage(s) ? "stage " . s : s)))
pretty(i) = counts eq "" ? pretty0(word(series, i)) : \
            sprintf("%s, %s repeats", pretty0(word(series, i)), word(counts, i))
# A series drawn hatched: a stage's second and later variants, and marked rows.
plain(s) = (strstrt(s, "@") > 0 ? s[1:strstrt(s, "@") - 1] : \
            (strstrt(s, ":") > 0 ? s[1:strstrt(s, ":") - 1] : s))
hatched(i) = strstrt(word(series, i), "@") > 0 || \
             (i > 1 && strstrt(word(series, i), ":") > 0 && \
              plain(word(series, i)) eq plain(word(series, i - 1)))

ymax = 0
do for [i = 1:n] {
    stats data using (column(3 * i + 1)) nooutput
    if (STATS_records > 0 && STATS_max > ymax) { ymax = STATS_max }
}
top = ymax
if (peak > top) { top = peak }
if (gemm > top) { top = gemm }
if (exp_bound > 0 && exp_bound < 1.3 * peak && exp_bound > top) { top = exp_bound }

set title title_text noenhanced font ",11"
if (bwd) {
    set ylabel "TFLOP/s (FA3 convention: 2.5 · 4·batch·heads·head_dim·unmasked pairs / time)" \
        noenhanced
} else {
    set ylabel "TFLOP/s (FA3 convention: 4·batch·heads·head_dim·unmasked pairs / time)" \
        noenhanced
}
set xlabel "seqlen (batch = 16384 / seqlen)"
# Room above the bars for their labels (longer with the ratio to FA3).
set yrange [0 : top * (i_fa3 > 0 ? 1.25 : 1.15)]
set grid ytics
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.9 border -1
set boxwidth 0.95
set datafile missing "?"
set xtics nomirror scale 0
set key outside top center horizontal noenhanced samplen 2 spacing 1 width 1
set bmargin 5
set label 90 regen at screen 0.01, screen 0.02 left font ",8" tc rgb "#555555" noenhanced
set label 91 "no bar: not run or refused at that point (the CSV's .meta says why)" \
    at screen 0.99, screen 0.02 right font ",8" tc rgb "#555555" noenhanced

if (peak > 0) {
    set arrow 1 from graph 0, first peak to graph 1, first peak \
        nohead dt 2 lw 1.5 lc rgb "#222222" front
    set label 1 sprintf("tensor-core peak at the run's highest SM clock: %.0f TFLOP/s", peak) \
        at graph 0.005, first peak left offset 0, 0.6 front font ",9" noenhanced
}
if (exp_bound > 0 && exp_bound < 1.3 * peak) {
    set arrow 2 from graph 0, first exp_bound to graph 1, first exp_bound \
        nohead dt 3 lw 1.5 lc rgb "#9e3a8c" front
    set label 2 sprintf("exp-unit bound at head_dim %d: %.0f TFLOP/s", hd, exp_bound) \
        at graph 0.995, first exp_bound right offset 0, 0.6 front font ",9" tc rgb "#9e3a8c" \
        noenhanced
}
if (gemm > 0) {
    set arrow 3 from graph 0, first gemm to graph 1, first gemm \
        nohead dt 4 lw 1.5 lc rgb "#777777" front
    set label 3 \
        sprintf("torch.matmul bf16 8192^3, same run: %.0f TFLOP/s " . \
                "(reference, not a ceiling)", gemm) \
        at graph 0.005, first gemm left offset 0, -0.7 front font ",9" tc rgb "#555555" noenhanced
}

# Bar centres: clustered histograms put series i of cluster j at j + (i - 1 - (n - 1)/2)·w.
w = 1.0 / (n + 1)
lbl(v) = sprintf("%.0f", v)
# A stage's label with FA3 in the figure: its TFLOP/s and, in brackets, its median over FA3's.
lbl_fa3(v, f) = f > 0 ? sprintf("%.0f (%.2f)", v, v / f) : sprintf("%.0f", v)
# Fill per series: solid, or a hatch pattern for a stage's later variants and marked rows.
array pattern[n]
special = i_fa3 > 0
do for [i = 1:n] {
    pattern[i] = 0
    if (hatched(i)) {
        k = 0
        do for [j = 1:i - 1] { if (plain(word(series, j)) eq plain(word(series, i))) { k = k + 1 } }
        pattern[i] = 4 + (k - 1) % 4
        special = 1
    }
}
# The plot command where a series needs its own fill, a stage label its ratio, or FA3 its line.
cmd = "plot"
do for [i = 1:n] {
    cmd = cmd . sprintf(" data using (column(%d)):(column(%d)):(column(%d)):xtic(1)" . \
                        " title pretty(%d) lc rgb color(%d)", \
                        3 * i - 1, 3 * i, 3 * i + 1, i, i)
    cmd = cmd . (pattern[i] > 0 ? \
                 sprintf(" fs pattern %d border rgb color(%d)", pattern[i], i) : "") . ","
}
do for [i = 1:n] {
    ratio_here = i_fa3 > 0 && is_stage(word(series, i))
    cmd = cmd . sprintf(" data using ($0 + (%d - 1 - (n - 1) / 2.0) * w):(column(%d)):(%s)" . \
                        " with labels rotate by 90 left offset 0, 0.4 font ',8' notitle,", \
                        i, 3 * i + 1, \
                        ratio_here ? \
                        sprintf("lbl_fa3(column(%d), column(%d))", 3 * i - 1, 3 * i_fa3 - 1) : \
                        sprintf("lbl(column(%d))", 3 * i - 1))
}
if (i_fa3 > 0) {
    cmd = cmd . sprintf(" data using 0:(column(%d)) with linespoints dt 2 lw 1.5 pt 7 ps 0.6" . \
                        " lc rgb fa3_color" . \
                        " title 'FA3 medians, joined; stage labels: TFLOP/s (ratio to FA3)',", \
                        3 * i_fa3 - 1)
}
cmd = cmd[1:strlen(cmd) - 1]

do for [fmt in "png svg"] {
    if (fmt eq "png") {
        if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
            set terminal pngcairo size 1400,700 font "sans,10" noenhanced
        } else {
            set terminal png size 1400,700 noenhanced
        }
    } else {
        set terminal svg size 1400,700 dynamic font "sans,10" noenhanced
    }
    set output out . "." . fmt
    if (special) {
        eval(cmd)
    } else {
        plot for [i = 1:n] data \
                 using (column(3 * i - 1)):(column(3 * i)):(column(3 * i + 1)):xtic(1) \
                 title pretty(i) lc rgb color(i), \
             for [i = 1:n] data \
                 using ($0 + \
                        (i - 1 - (n - 1) / 2.0) * w):(column(3 * i + 1)):(lbl(column(3 * i - 1))) \
                 with labels rotate by 90 left offset 0, 0.4 font ",8" notitle
    }
    unset output
}
