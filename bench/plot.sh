#!/usr/bin/env bash
# plot.sh — the figures of a sweep: one per (direction, head_dim, causal) found in the
# CSV (six per direction for the full sweep), drawn by plots/fa3_sweep.gp.
#
#   bench/plot.sh SWEEP.csv [OUTDIR] [--direction fwd|bwd|both]
#
# Writes OUTDIR/fa3_<fwd|bwd>_hd<head_dim>_<causal|noncausal>.png and .svg (OUTDIR:
# plots). The direction: --direction, else the sweep's (the `direction=` line of the
# sidecar <csv minus .csv>.meta that bench/sweep.sh wrote), else every direction with
# rows in the CSV. A backward sweep's CSV also holds the forward rows of the stages that
# ran with --bwd; its .meta says bwd, so those are not drawn (and do not overwrite the
# forward figures) unless --direction asks for them.
# Needs gnuplot, not a GPU: render on any machine from the CSV the GPU run returned.
# Each figure carries the command that regenerates it, at its foot:
#   gnuplot -c plots/fa3_sweep.gp SWEEP.csv HEAD_DIM CAUSAL [bwd] [OUT]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
csv="" outdir="" direction=""
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --direction) direction=${2:?--direction needs fwd, bwd or both}; shift ;;
        -*) echo "plot.sh: unknown option '$1' (bench/plot.sh --help)" >&2; exit 2 ;;
        *)
            if [[ -z $csv ]]; then csv=$1
            elif [[ -z $outdir ]]; then outdir=$1
            else echo "plot.sh: one CSV and one OUTDIR" >&2; exit 2
            fi
            ;;
    esac
    shift
done
[[ -n $csv ]] || { usage >&2; exit 2; }
outdir=${outdir:-plots}
[[ -r $csv ]] || { echo "plot.sh: cannot read $csv" >&2; exit 2; }
case $direction in
    "" | fwd | bwd | both) ;;
    *) echo "plot.sh: --direction must be fwd, bwd or both" >&2; exit 2 ;;
esac
# shellcheck source=bench/sweep_dirs.sh
source bench/sweep_dirs.sh
read -r -a dirs <<<"$(fx_sweep_dirs "$csv" "$direction")"
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "gnuplot is not installed: no figures. Install it (apt-get install gnuplot-nox) or," \
        "on a machine that has it: bench/plot.sh $csv"
    exit 0
fi
mkdir -p "$outdir"

made=0 found=0
for dir in ${dirs[@]+"${dirs[@]}"}; do
    # The (head_dim, causal) pairs of this direction's rows, in order.
    pairs=$(awk -F, -v d="$dir" 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
                     $c["direction"] == d { print $c["head_dim"], $c["causal"] }' "$csv" | sort -n -u -k1,1 -k2,2)
    if [[ -z $pairs ]]; then
        echo "plot.sh: no $([[ $dir == fwd ]] && echo forward || echo backward) rows in $csv" >&2
        continue
    fi
    found=1
    # The forward's command line stays as it was: the direction is named for bwd only.
    dir_arg=()
    [[ $dir == fwd ]] || dir_arg=("$dir")
    while read -r hd causal; do
        name=$outdir/fa3_${dir}_hd${hd}_$( ((causal)) && echo causal || echo noncausal)
        if gnuplot -c plots/fa3_sweep.gp "$csv" "$hd" "$causal" "$dir" "$name"; then
            echo "$name.png, $name.svg   (gnuplot -c plots/fa3_sweep.gp $csv $hd $causal${dir_arg[*]:+ ${dir_arg[*]}})"
            made=$((made + 1))
        else
            echo "plot.sh: gnuplot failed for $dir, head_dim $hd, causal $causal" >&2
        fi
    done <<<"$pairs"
done
((found)) || exit 1
echo "$made figure(s) from $csv"
