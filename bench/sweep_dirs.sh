# shellcheck shell=bash
# sweep_dirs.sh — sourced by bench/plot.sh and scripts/gen_readme_results.sh: which
# directions (fwd, bwd) of a sweep CSV to draw or tabulate. Not a program.
#
#   fx_sweep_dirs CSV [DIRECTION]    prints the directions, space-separated
#
# DIRECTION (fwd, bwd or both) when given; else the sweep's own, from the `direction=`
# line of its sidecar .meta (CSV minus .csv, plus .meta); else every direction the CSV
# has rows of. Prints nothing when none applies.
fx_sweep_dirs() {
    local csv=$1 direction=${2:-} meta=${1%.csv}.meta
    if [[ -z $direction && -r $meta ]]; then
        direction=$(sed -n 's/^direction=//p' "$meta" | head -n 1)
    fi
    case $direction in
        fwd) echo fwd ;;
        bwd) echo bwd ;;
        both) echo fwd bwd ;;
        *)
            awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
                $c["direction"] == "fwd" { f = 1 } $c["direction"] == "bwd" { b = 1 }
                END { print (f ? "fwd " : "") (b ? "bwd" : "") }' "$csv"
            ;;
    esac
}
