# shellcheck shell=bash
# lib.sh — functions the benchmark tools share, sourced (not a program) by bench/sweep.sh,
# bench/varlen.sh, bench/join_sweeps.sh, bench/bounds.sh, bench/plot.sh and
# scripts/gen_readme_results.sh, so that each is written once.
#
#   fx_writable [--mkdir] FILE    status 0 when FILE can be written: an existing regular
#                                 file that opens for appending (its contents untouched),
#                                 or a new file in its folder, which must exist — with
#                                 --mkdir, in the nearest existing folder above it (the
#                                 caller makes the rest). Tried, not read from the mode
#                                 bits: a folder can say writable and refuse, as /proc
#                                 does for root.
#   fx_csv_bad_row CSV            prints why CSV cannot be read as a sweep CSV — the first
#                                 row with another field count than the header, or with
#                                 text in a numeric column — and nothing when it can
#   fx_sweep_dirs CSV [DIRECTION] prints the directions (fwd, bwd) to draw or tabulate,
#                                 space-separated: DIRECTION (fwd, bwd or both) when given;
#                                 else the sweep's own, from the `direction=` line of its
#                                 sidecar .meta (CSV minus .csv, plus .meta); else every
#                                 direction the CSV has rows of; nothing when none applies
#   fx_csv_header                 prints the CSV header the stage programs write
#                                 (FX_CSV_HEADER in common/, read from the source, run from
#                                 the repository's root); status 1 with a message on stderr
#                                 when it cannot be found or read
#   fx_tree_commit LEN            prints the commit a run's peer rows record: FX_GIT_COMMIT
#                                 when set (a copy of the tree without .git), else git's
#                                 HEAD abbreviated to LEN, with -dirty after it when tracked
#                                 files differ, else "unknown"

fx_writable() {
    local walk=0 f d probe
    if [[ $1 == --mkdir ]]; then
        walk=1
        shift
    fi
    f=$1
    if [[ -e $f || -L $f ]]; then
        [[ -f $f ]] && { : >>"$f"; } 2>/dev/null
        return
    fi
    d=$(dirname "$f")
    if ((walk)); then
        while [[ ! -e $d ]]; do d=$(dirname "$d"); done
    fi
    [[ -d $d ]] && probe=$(mktemp "$d/.fx_probe.XXXXXX" 2>/dev/null) && rm -f "$probe"
}

fx_csv_bad_row() {
    awk -F, '
    function is_num(x) { return x ~ /^-?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/ }
    NR == 1 {
        for (i = 1; i <= NF; ++i) c[$i] = i
        nh = NF
        nnum = split("sm_count sm_clock_mhz ms tflops batch seqlen_q seqlen_k heads_q " \
                     "heads_kv head_dim causal", num, " ")
        next
    }
    NF != nh { printf "line %d has %d fields, the header %d (cut short?)", NR, NF, nh; exit }
    {
        for (k = 1; k <= nnum; ++k)
            if ((num[k] in c) && !is_num($c[num[k]])) {
                printf "line %d: %s is \"%s\", not a number", NR, num[k], $c[num[k]]; exit
            }
    }' "$1"
}

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

fx_csv_header() {
    local file header
    file=$(grep -l '#define FX_CSV_HEADER' common/*.h common/*.c 2>/dev/null | sed -n 1p || true)
    if [[ -z $file ]]; then
        echo "cannot find #define FX_CSV_HEADER in common/*.h or common/*.c" >&2
        return 1
    fi
    header=$(sed -n '/#define FX_CSV_HEADER/,/[^\\]$/p' "$file" | grep -o '"[^"]*"' | tr -d '"\n')
    if [[ $header != stage,direction,* ]]; then
        echo "cannot read FX_CSV_HEADER from $file" >&2
        return 1
    fi
    echo "$header"
}

fx_tree_commit() {
    local commit=${FX_GIT_COMMIT:-}
    if [[ -z $commit ]] && commit=$(git rev-parse --short="$1" HEAD 2>/dev/null); then
        [[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+=-dirty
    fi
    echo "${commit:-unknown}"
}
