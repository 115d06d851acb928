#!/usr/bin/env bash
# join_sweeps.sh — one CSV from the runs of a sweep split into parts (bench/sweep.sh
# --part 1/N … --part N/N, the same options otherwise), with a .meta that says how.
#
#   bench/join_sweeps.sh [--force] OUT.csv PART1.csv PART2.csv ...
#
# Each part must be a sweep CSV with the same header, beside its .meta (CSV minus .csv,
# plus .meta, as bench/sweep.sh writes them), and the parts must agree on what decides
# the numbers: direction, repeats, iters, warmup, spin_us, spin_compare, stages,
# baselines, runners, the points' definition and dtype, stage_args and beside (the
# stages' extra arguments and the runners in another dtype, bench/sweep.sh); and their
# --part K/N (the part= line of each .meta) must be one split, each part from 1/N to N/N
# given once. A disagreement, a part given twice or missing is an error (exit 1) unless
# --force, which joins anyway and writes each difference into the .meta. OUT is checked
# writable first.
# Exit status: 0; 1 on such a disagreement; 2 on bad usage or input (a file that cannot
# be read or written, not a sweep CSV, parts with different headers).
# Writes OUT.csv (the header, then every part's rows in the order given: the stage rows,
# the peers' rows and each part's reference rows, which measure the same GPU in each
# run) and OUT.meta: how they were joined (the command, the parts, their rows and
# points), the settings they share, the peers' versions (torch, cudnn, fa3, …) where
# every part has the same, every part's `note=` lines, and every line of each part's
# .meta prefixed part<i>_ (part1_command=…, part2_elapsed_s=…). Then it counts the rows
# per (runner, point) and says where a count differs from the others (a part cut short,
# or parts that overlap). Needs no GPU.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # fx_writable, fx_csv_bad_row, fx_sweep_dirs

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
die() {
    echo "join_sweeps.sh: $*" >&2
    exit 2
}
force=0 out=""
parts=()
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --force) force=1 ;;
        -*) die "unknown option '$1' (bench/join_sweeps.sh --help)" ;;
        *) if [[ -z $out ]]; then out=$1; else parts+=("$1"); fi ;;
    esac
    shift
done
[[ -n $out ]] || { usage >&2; exit 2; }
((${#parts[@]} >= 1)) || die "give the parts' CSVs after OUT.csv"
[[ $out == *.csv ]] || die "OUT must end in .csv (its .meta goes beside it)"
for f in "$out" "${out%.csv}.meta"; do
    fx_writable --mkdir "$f" || die "cannot write $f (OUT: a writable file, checked before joining)"
done
for p in "${parts[@]}"; do
    [[ -r $p && -f $p ]] || die "cannot read $p"
    [[ $(cd "$(dirname "$p")" && pwd)/${p##*/} != \
        "$(cd "$(dirname "$out")" 2>/dev/null && pwd)/${out##*/}" ]] ||
        die "OUT ($out) is one of the parts"
done

header=$(head -n 1 "${parts[0]}")
[[ ,$header, == *,stage,* && ,$header, == *,direction,* ]] ||
    die "${parts[0]} is not a sweep CSV (no stage and direction columns in its first line)"
for p in "${parts[@]:1}"; do
    [[ $(head -n 1 "$p") == "$header" ]] ||
        die "$p has another header than ${parts[0]}: not parts of one sweep"
done

meta_of() { printf '%s' "${1%.csv}.meta"; }
value() {  # value META KEY: the first KEY= line's value ("" when none)
    [[ -r $1 ]] || return 0
    sed -n "s/^$2=//p;T;q" "$1"
}
shared_keys=(direction repeats iters warmup spin_us spin_compare stages runners points dtype
    stage_args beside)
version_keys=(torch torch_cuda cudnn device sm_count l2_bytes driver spin_max_sm_clock_mhz
    spin_method fa3 fa3_api fa3_version fa3_build_switches_on fa3_lacks peers)
problems=()
for p in "${parts[@]}"; do
    [[ -r $(meta_of "$p") ]] || problems+=("$p has no $(meta_of "$p") beside it")
done
for key in "${shared_keys[@]}"; do
    v0=$(value "$(meta_of "${parts[0]}")" "$key")
    for p in "${parts[@]:1}"; do
        v=$(value "$(meta_of "$p")" "$key")
        [[ $v == "$v0" ]] || problems+=("$key differs: '$v0' in ${parts[0]}, '$v' in $p")
    done
done
# The parts' --part K/N (their part= lines): one split, each K from 1 to N exactly once.
declare -A part_of=()
split_n="" split_from=""
for p in "${parts[@]}"; do
    kn=$(value "$(meta_of "$p")" part)
    if ! [[ $kn =~ ^([0-9]+)/([0-9]+) ]]; then
        [[ ! -r $(meta_of "$p") ]] ||
            problems+=("$p is not a part (its .meta has no part= line: a whole sweep, no --part)")
        continue
    fi
    k=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]}
    if [[ -z $split_n ]]; then
        split_n=$n split_from=$p
    elif [[ $n != "$split_n" ]]; then
        problems+=("parts of different splits: --part .../$split_n in $split_from," \
            "--part $k/$n in $p")
        continue
    fi
    if [[ -n ${part_of[$k]:-} ]]; then
        problems+=("part $k/$n given twice: ${part_of[$k]} and $p (its rows would count twice)")
    else
        part_of[$k]=$p
    fi
done
if [[ -n $split_n ]]; then
    missing=""
    for ((k = 1; k <= split_n; ++k)); do
        [[ -n ${part_of[$k]:-} ]] || missing+="${missing:+, }$k/$split_n"
    done
    [[ -z $missing ]] ||
        problems+=("part(s) $missing missing: the joined sweep would lack their points")
fi
# The baselines (one baseline= line each).
b0=$(sed -n 's/^baseline=//p' "$(meta_of "${parts[0]}")" 2>/dev/null | paste -sd' ' - || true)
for p in "${parts[@]:1}"; do
    b=$(sed -n 's/^baseline=//p' "$(meta_of "$p")" 2>/dev/null | paste -sd' ' - || true)
    [[ $b == "$b0" ]] || problems+=("baselines differ: '$b0' in ${parts[0]}, '$b' in $p")
done
if ((${#problems[@]})); then
    for x in "${problems[@]}"; do echo "join_sweeps.sh: $x" >&2; done
    if ((!force)); then
        echo "join_sweeps.sh: not joined (--force joins anyway and records the differences)" >&2
        exit 1
    fi
fi

mkdir -p "$(dirname "$out")"
tmp_csv=$(mktemp) tmp_meta=$(mktemp)
trap 'rm -f "$tmp_csv" "$tmp_meta"' EXIT
{
    printf '%s\n' "$header"
    for p in "${parts[@]}"; do tail -n +2 "$p"; done
} >"$tmp_csv"

{
    echo "command=bench/join_sweeps.sh$( ((force)) && printf ' --force') $out ${parts[*]}"
    echo "joined_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "joined=${#parts[@]} runs of one sweep split into parts, each measuring its own points" \
        "with every runner interleaved at every point, all repeats; the rows of each part follow" \
        "the header in the order given (reference rows included: each run measured them)"
    i=0
    for p in "${parts[@]}"; do
        i=$((i + 1))
        m=$(meta_of "$p")
        echo "part${i}=$p ($(($(wc -l <"$p") - 1)) rows; $(value "$m" part);" \
            "$(value "$m" started_utc) to $(value "$m" finished_utc), $(value "$m" elapsed_s) s)"
    done
    for key in "${shared_keys[@]}"; do
        v=$(value "$(meta_of "${parts[0]}")" "$key")
        [[ -z $v ]] || echo "$key=$v"
    done
    sed -n 's/^baseline=/baseline=/p' "$(meta_of "${parts[0]}")" 2>/dev/null || true
    for key in "${version_keys[@]}"; do
        v0=$(value "$(meta_of "${parts[0]}")" "$key") same=1
        for p in "${parts[@]:1}"; do
            [[ $(value "$(meta_of "$p")" "$key") == "$v0" ]] || same=0
        done
        if [[ -n $v0 ]]; then
            if ((same)); then
                echo "$key=$v0"
            else
                echo "note=$key differs between the parts (see part<i>_$key)"
            fi
        fi
    done
    for x in ${problems[@]+"${problems[@]}"}; do echo "note=joined with --force: $x"; done
    # Every part's notes, each once.
    for p in "${parts[@]}"; do
        sed -n '/^note=/p' "$(meta_of "$p")" 2>/dev/null || true
    done | awk '!seen[$0]++'
    i=0
    for p in "${parts[@]}"; do
        i=$((i + 1))
        [[ -r $(meta_of "$p") ]] && sed "s/^/part${i}_/" "$(meta_of "$p")"
    done
} >"$tmp_meta"

# Rows per (runner, point): the same count everywhere, unless a part was cut short.
counts=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
    $c["direction"] != "ref" {
        k = $c["stage"] " " $c["direction"] " hd " $c["head_dim"] \
            " causal " $c["causal"] " seqlen " $c["seqlen_q"]
        n[k]++ }
    END { for (k in n) { h[n[k]]++; if (!(n[k] in ex)) ex[n[k]] = k }
          best = ""; for (x in h) if (best == "" || h[x] > h[best]) best = x
          printf "%d", best
          for (x in h)
              if (x != best)
                  printf "; %d (runner, point) pairs have %d rows, e.g. %s", h[x], x, ex[x]
          printf "\n" }' "$tmp_csv")
rows_each=${counts%%;*}
odd=""
[[ $counts == *";"* ]] && odd=${counts#*; }
{
    echo "rows_per_runner_and_point=$rows_each"
    [[ -z $odd ]] || echo "note=uneven: $odd (the other pairs have $rows_each)"
} >>"$tmp_meta"

cp "$tmp_csv" "$out"
cp "$tmp_meta" "${out%.csv}.meta"
echo "$(($(wc -l <"$out") - 1)) rows from ${#parts[@]} parts: $out (sidecar ${out%.csv}.meta)"
echo "rows per (runner, point): $rows_each${odd:+; uneven: $odd}"
((${#problems[@]} == 0)) ||
    echo "joined with --force: ${#problems[@]} difference(s), written into the .meta"
