#!/usr/bin/env bash
# plot.sh — the figures of a forward sweep: one per (head_dim, causal) found in the CSV
# (six for the full sweep), drawn by plots/fa3_sweep.gp.
#
#   bench/plot.sh SWEEP.csv [OUTDIR]
#
# Writes OUTDIR/fa3_fwd_hd<head_dim>_<causal|noncausal>.png and .svg (OUTDIR: plots).
# Needs gnuplot, not a GPU: render on any machine from the CSV the GPU run returned.
# Each figure carries the command that regenerates it, at its foot:
#   gnuplot -c plots/fa3_sweep.gp SWEEP.csv HEAD_DIM CAUSAL [OUT]
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
outdir=${2:-plots}
[[ -r $csv ]] || { echo "plot.sh: cannot read $csv" >&2; exit 2; }
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "gnuplot is not installed: no figures. Install it (apt-get install gnuplot-nox) or," \
        "on a machine that has it: bench/plot.sh $csv"
    exit 0
fi
mkdir -p "$outdir"

# The (head_dim, causal) pairs of the forward rows, in order.
pairs=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
                 $c["direction"] == "fwd" { print $c["head_dim"], $c["causal"] }' "$csv" | sort -n -u -k1,1 -k2,2)
[[ -n $pairs ]] || { echo "plot.sh: no forward rows in $csv" >&2; exit 1; }

made=0
while read -r hd causal; do
    name=$outdir/fa3_fwd_hd${hd}_$( ((causal)) && echo causal || echo noncausal)
    if gnuplot -c plots/fa3_sweep.gp "$csv" "$hd" "$causal" "$name"; then
        echo "$name.png, $name.svg   (gnuplot -c plots/fa3_sweep.gp $csv $hd $causal)"
        made=$((made + 1))
    else
        echo "plot.sh: gnuplot failed for head_dim $hd, causal $causal" >&2
    fi
done <<<"$pairs"
echo "$made figure(s) from $csv"
