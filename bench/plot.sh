#!/usr/bin/env bash
# plot.sh — the figures of a sweep: one per (direction, head_dim, causal) found in the
# CSV (six per direction for the full sweep), drawn by plots/fa3_sweep.gp.
#
#   bench/plot.sh SWEEP.csv [OUTDIR] [--direction fwd|bwd|both] [--readme | --out PREFIX]
#                 [--tagged]
#
# Names: OUTDIR/<the CSV's name minus .csv>_<fwd|bwd>_hd<head_dim>_<causal|noncausal>
# .png and .svg (OUTDIR: plots), so that drawing any CSV leaves the README's figures
# alone; --readme writes the README's own names, OUTDIR/fa3_<fwd|bwd>_hd<head_dim>_
# <causal|noncausal> (what the README shows: use it with the CSV its results table comes
# from); --out PREFIX writes PREFIX_<fwd|bwd>_hd…. The direction: --direction, else the
# sweep's (the `direction=` line of the sidecar <csv minus .csv>.meta that
# bench/sweep.sh wrote), else every direction with rows in the CSV. A backward sweep's CSV
# also holds the forward rows of the stages that ran with --bwd; its .meta says bwd, so
# those are not drawn unless --direction asks for them. Marked rows (stage NAME@TAG: a
# baseline build's, another spin's) are drawn only with --tagged, hatched beside their
# runner. A CSV with a `variant` column (stage 08's ablation) gets one bar per stage and
# variant.
# Needs gnuplot, not a GPU: render on any machine from the CSV the GPU run returned.
# Each figure carries the command that regenerates it, at its foot:
#   gnuplot -c plots/fa3_sweep.gp SWEEP.csv HEAD_DIM CAUSAL [bwd] [tagged] [OUT]
# Exit status: 0; 1 when nothing is drawn or a figure failed (said why: no rows to draw, a
# row cut short or not numeric, gnuplot failing); 2 on bad usage or a file that is not a
# sweep CSV (said why).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # fx_writable, fx_csv_bad_row, fx_sweep_dirs
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
die() {
    echo "plot.sh: $*" >&2
    exit 2
}
# needs WHAT "$@": the option $1 has its value $2, else a usage error (exit 2).
needs() {
    local what=$1
    shift
    if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs $what"; fi
}
csv="" outdir="" direction="" readme=0 prefix="" tagged=0
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --direction) needs "fwd, bwd or both" "$@"; direction=$2; shift ;;
        --readme) readme=1 ;;
        --out) needs "a prefix" "$@"; prefix=$2; shift ;;
        --tagged) tagged=1 ;;
        -*) die "unknown option '$1' (bench/plot.sh --help)" ;;
        *)
            if [[ -z $csv ]]; then csv=$1
            elif [[ -z $outdir ]]; then outdir=$1
            else die "one CSV and one OUTDIR"
            fi
            ;;
    esac
    shift
done
[[ -n $csv ]] || { usage >&2; exit 2; }
((!readme)) || [[ -z $prefix ]] || die "--readme and --out name the figures two ways: give one"
[[ -z $prefix || -z $outdir ]] || die "--out PREFIX holds the directory: no OUTDIR with it"
outdir=${outdir:-plots}
case $direction in
    "" | fwd | bwd | both) ;;
    *) die "--direction must be fwd, bwd or both" ;;
esac
[[ -e $csv ]] || die "no file $csv"
[[ -f $csv && -r $csv ]] || die "cannot read $csv"
[[ -s $csv ]] || die "$csv is empty: not a sweep CSV (bench/sweep.sh writes one)"
first=$(head -n 1 "$csv")
if [[ ,$first, != *,stage,* || ,$first, != *,direction,* || ,$first, != *,tflops,* ]]; then
    die "$csv is not a sweep CSV: its first line has no stage, direction and tflops columns" \
        "(FX_CSV_HEADER: stage,direction,...)"
fi
if (($(wc -l <"$csv") < 2)); then
    echo "plot.sh: $csv has a header and no rows: nothing to draw" >&2
    exit 1
fi
# Every row whole, with numbers where the figures read them: a row cut short or with text
# in a number would fail in gnuplot or be drawn as a zero. Said with its line; nothing drawn.
bad_row=$(fx_csv_bad_row "$csv")
if [[ -n $bad_row ]]; then
    echo "plot.sh: $csv: $bad_row: nothing drawn (fix or drop the row)" >&2
    exit 1
fi
read -r -a dirs <<<"$(fx_sweep_dirs "$csv" "$direction")"
if ((${#dirs[@]} == 0)); then
    echo "plot.sh: $csv has no fwd or bwd rows" \
        "(only $(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "direction") d = i; next }
        { s[$d] = 1 }
        END { for (k in s) l = l (l ? ", " : "") k; print l ? l : "none" }' "$csv")):" \
        "nothing to draw" >&2
    exit 1
fi
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "gnuplot is not installed: no figures. Install it (apt-get install gnuplot-nox) or," \
        "on a machine that has it: bench/plot.sh $csv"
    exit 0
fi
stem=${csv##*/}
stem=${stem%.csv}
if ((readme)); then
    base=$outdir/fa3
elif [[ -n $prefix ]]; then
    base=$prefix
else
    base=$outdir/$stem
fi
mkdir -p "$(dirname "$base")"

tag_arg=()
((tagged)) && tag_arg=(tagged)
made=0 found=0 failed=0
for dir in "${dirs[@]}"; do
    # The (head_dim, causal) pairs of this direction's rows, in order.
    pairs=$(awk -F, -v d="$dir" -v tagged="$tagged" '
        NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        $c["direction"] == d && (tagged || !index($c["stage"], "@")) {
            print $c["head_dim"], $c["causal"] }' "$csv" | sort -n -u -k1,1 -k2,2)
    if [[ -z $pairs ]]; then
        echo "plot.sh: no $([[ $dir == fwd ]] && echo forward || echo backward)" \
            "rows in $csv$( ((tagged)) ||
                printf ' (marked rows left out: --tagged draws them)')" >&2
        continue
    fi
    found=1
    # The command line names the direction for bwd only, and OUT where it is not the default.
    while read -r hd causal; do
        name=${base}_${dir}_hd${hd}_$( ((causal)) && echo causal || echo noncausal)
        gp_args=()
        [[ $dir == fwd ]] || gp_args+=("$dir")
        ((tagged)) && gp_args+=(tagged)
        default_name=plots/fa3_${dir}_hd${hd}_$( ((causal)) && echo causal || echo noncausal)
        [[ $name == "$default_name" ]] || gp_args+=("$name")
        if gnuplot -c plots/fa3_sweep.gp "$csv" "$hd" "$causal" "$dir" \
            ${tag_arg[@]+"${tag_arg[@]}"} "$name"; then
            echo "$name.png, $name.svg   (gnuplot -c plots/fa3_sweep.gp" \
                "$csv $hd $causal${gp_args[*]:+ ${gp_args[*]}})"
            made=$((made + 1))
        else
            echo "plot.sh: gnuplot failed for $dir, head_dim $hd, causal $causal" >&2
            failed=$((failed + 1))
        fi
    done <<<"$pairs"
done
if ((!found)); then
    echo "plot.sh: nothing drawn from $csv" >&2
    exit 1
fi
echo "$made figure(s) from $csv"
if ((failed || made == 0)); then
    echo "plot.sh: $failed figure(s) failed, $made drawn: exit 1" >&2
    exit 1
fi
if ((!readme)) && [[ -z $prefix ]]; then
    echo "(named after the CSV: the README's figures, plots/fa3_<dir>_hd*, are unchanged)"
    # --readme is for a whole forward or backward sweep (its .meta names bench/sweep.sh or
    # bench/join_sweeps.sh, and no --part): not a ladder's CSV, an ablation's or one part.
    meta=${csv%.csv}.meta
    if [[ -r $meta && ,$first, != *,variant,* ]] &&
        grep -E '^command=bench/(sweep|join_sweeps)\.sh' "$meta" >/dev/null &&
        ! grep '^part=' "$meta" >/dev/null; then
        echo "(bench/plot.sh --readme $csv would overwrite those with this CSV's figures: only" \
            "for the CSV the README's results table comes from)"
    fi
fi
