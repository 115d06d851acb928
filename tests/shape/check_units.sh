#!/usr/bin/env bash
# check_units.sh [STAGES_DIR [MANIFEST]] — the copies that must stay equal across stages.
#
# A stage marks the code it inherits verbatim from an earlier stage, or introduces for the
# later ones to inherit, as a unit:
#
#     /* UNIT(softmax) */
#     ... code ...
#     /* END UNIT */
#
# The first stage (in reading order) that has UNIT(name) introduces it. Every later
# occurrence must equal the current reference after comments are stripped and whitespace
# collapsed (so a comment may be reworded; the code may not). A later stage that changes a
# unit on purpose says so and why in the marker,
#
#     /* UNIT(named_barriers, changed: the turn barriers of the pingpong schedule) */
#
# and its version becomes the reference for the stages after it. Fails (exit 1) on a copy
# that differs, a marker without its END, a nested marker, or a "changed:" without a reason,
# printing the unit, the two stages and a diff of their code; and when a stage lacks a unit
# that MANIFEST (tests/shape/units.txt) lists for it, or carries one it does not list.
# Needs bash, gcc (its
# preprocessor strips the comments) and diff; no GPU. Registered as the CTest test
# shape_units (label unit).
set -euo pipefail

stages_dir=${1:-$(dirname "${BASH_SOURCE[0]}")/../../stages}
# The manifest of which stages carry which unit (units.txt beside this script; a second
# argument names another, "" none).
manifest=${2-$(dirname "${BASH_SOURCE[0]}")/units.txt}
[[ -d $stages_dir ]] || { echo "check_units.sh: no folder $stages_dir" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

declare -A ref_stage=()  # unit name -> the stage whose version is the reference
declare -A ref_file=()   # unit name -> its normalized code
declare -A seen_in=()    # unit name -> the stages that carry it
fail=0 n_checked=0

# The code of the unit, comments removed (gcc -fpreprocessed runs no directive and expands
# no macro: it only drops comments) and whitespace collapsed to single blanks.
normalize() {
    gcc -fpreprocessed -E -P -x c - 2>/dev/null | tr -s ' \t\n' ' ' | sed 's/^ //; s/ $//'
    echo
}

for stage in "$stages_dir"/[0-9][0-9]*/; do
    stage=${stage%/}
    id=${stage##*/}
    # Every unit of this stage's sources, in file order: name, whether changed, the code.
    for src in "$stage"/*.cu "$stage"/*.cuh "$stage"/*.c "$stage"/*.h; do
        [[ -f $src ]] || continue
        awk -v out="$tmp/$id" -v src="$src" '
            function fail(msg) { printf "%s:%d: %s\n", src, FNR, msg > "/dev/stderr"; bad = 1 }
            /\/\* UNIT\(/ {
                if (open) fail("UNIT inside UNIT(" name ")")
                line = $0
                sub(/.*\/\* UNIT\(/, "", line)
                sub(/\) *\*\/.*/, "", line)
                name = line; changed = ""
                if (index(line, ",")) {
                    name = substr(line, 1, index(line, ",") - 1)
                    changed = substr(line, index(line, ",") + 1)
                    sub(/^ */, "", changed)
                    if (changed !~ /^changed: *[^ ]/)
                        fail("UNIT(" name "): after the name, only \"changed: <why>\"")
                }
                # A reason too long for one line goes on in the same comment: the lines up to
                # its "*/" belong to the marker, not to the code of the unit.
                in_marker = ($0 !~ /\*\//)
                open = 1; n++
                file = out "." n ".code"
                printf "%s\t%s\t%s\n", n, name, (changed == "" ? "-" : "changed") >> (out ".list")
                printf "" > file
                next
            }
            in_marker { if ($0 ~ /\*\//) in_marker = 0; next }
            /\/\* END UNIT \*\// {
                if (!open) fail("END UNIT without UNIT")
                open = 0; close(file); next
            }
            open { print >> file }
            END { if (open) fail("UNIT(" name ") has no END UNIT"); exit bad }
        ' n="$(if [[ -f $tmp/$id.list ]]; then wc -l < "$tmp/$id.list"; else echo 0; fi)" "$src" ||
            fail=1
    done
    [[ -f $tmp/$id.list ]] || continue
    while IFS=$'\t' read -r n name changed; do
        normalize < "$tmp/$id.$n.code" > "$tmp/$id.$n.norm"
        seen_in[$name]+="${seen_in[$name]:+ }$id"
        if [[ -z ${ref_stage[$name]:-} ]]; then
            [[ $changed == changed ]] &&
                { echo "FAIL: $id introduces UNIT($name) but marks it changed" >&2; fail=1; }
        elif [[ $changed == changed ]]; then
            echo "ok: $id changes UNIT($name) of ${ref_stage[$name]} (marked, with its reason)"
        else
            n_checked=$((n_checked + 1))
            if cmp -s "${ref_file[$name]}" "$tmp/$id.$n.norm"; then
                echo "ok: $id UNIT($name) = ${ref_stage[$name]}'s"
            else
                echo "FAIL: $id UNIT($name) differs from ${ref_stage[$name]}'s (code, comments" \
                    "stripped); mark it 'changed: <why>' if that is the stage's idea:"
                diff <(tr ';{}' '\n\n\n' < "${ref_file[$name]}") \
                    <(tr ';{}' '\n\n\n' < "$tmp/$id.$n.norm") | sed -n 1,40p || true
                fail=1
            fi
        fi
        if [[ -z ${ref_stage[$name]:-} || $changed == changed ]]; then
            ref_stage[$name]=$id
            ref_file[$name]=$tmp/$id.$n.norm
        fi
    done < "$tmp/$id.list"
done

# The manifest: every listed stage carries its units, and no stage carries one unlisted.
if [[ -n $manifest ]]; then
    declare -A listed=()
    while IFS= read -r line; do
        line=${line%%#*}
        [[ $line == *:* ]] || continue
        name=${line%%:*} name=${name//[[:space:]]/}
        read -r -a ids <<<"${line#*:}"
        listed[$name]=1
        for id in "${ids[@]}"; do
            if [[ " ${seen_in[$name]:-} " != *" $id "* ]]; then
                echo "FAIL: $id has no UNIT($name), which ${manifest##*/} lists for it"
                fail=1
            fi
        done
        for id in ${seen_in[$name]:-}; do
            if [[ " ${ids[*]} " != *" $id "* ]]; then
                echo "FAIL: $id carries UNIT($name), which ${manifest##*/} does not list for it"
                fail=1
            fi
        done
    done <"$manifest"
    for name in "${!seen_in[@]}"; do
        [[ -n ${listed[$name]:-} ]] ||
            { echo "FAIL: UNIT($name) is in no line of ${manifest##*/}"; fail=1; }
    done
fi

echo "units: ${#seen_in[@]}, inherited copies checked: $n_checked"
for name in "${!seen_in[@]}"; do echo "  $name: ${seen_in[$name]}"; done | sort
((fail == 0)) && echo PASS || echo FAIL
exit "$fail"
