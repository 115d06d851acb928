#!/usr/bin/env bash
# make_assignment.sh [--solution] [--list] NN [DIR] — a course assignment made from stage NN.
#
# The regions a student writes are marked in the stage's own sources (docs/course.md,
# "Adding an assignment"):
#
#     /* ASSIGNMENT(name): what to implement, in a line or two
#      * stub: return 0; */          <- optional: code the stub needs after it stops
#     ... the reference code ...
#     /* END ASSIGNMENT */
#
# This copies the repository (the files git tracks, as they are in the working tree, and the
# untracked ones it does not ignore; every file but build folders where there is no git) to
# DIR (default: ./assignment_<stage>) and replaces each region of stage NN's sources with its
# spec, kept as a comment whose marker reads TASK(name), and a stub
# that compiles and stops any kernel that reaches it: it prints
#     flash-explorer: ASSIGNMENT(name) of stage NN_... is not written yet
# and executes trap, so every GPU check of the stage fails loudly, and the instructions the
# region held are missing from the stage's PTX (the grader's ptx criterion fails without a
# GPU). The earlier stages, and the later ones, are copied whole (the later ones hold this
# stage's idea too: docs/course.md, "What a student receives"). DIR/ASSIGNMENT.md lists the
# regions, where they are and how to grade the tree (scripts/grade.sh).
#
# --solution  copy the tree with the regions whole (the reference solution, to grade, or to
#             apply a deliberately wrong change to: tests/course/mutants/)
# --list      print the stages that have regions, and their regions (file:line name), then exit
#
# NN is the stage's number (04) or its folder name (04_tma_mbarrier). Exit 0 on success;
# 2 on a usage error, an unknown stage, a stage without regions, a malformed region (file
# and line named), or a DIR that exists and is not empty.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)  # -P: as realpath gives DIR
usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}
die() { echo "make_assignment.sh: $*" >&2; exit 2; }

solution=0 list=0
# getopt(1) puts the options first and the operands after "--", wherever they were given.
opts=$(getopt -q -o h -l solution,list,help -- "$@") ||
    die "unknown option in '$*' (see --help)"
eval set -- "$opts"
while :; do
    case $1 in
        --solution) solution=1; shift ;;
        --list) list=1; shift ;;
        -h | --help) usage ;;
        --) shift; break ;;
    esac
done

# The regions of one source file, checked: "line<TAB>name" per opening marker. Exit 2 (with
# file:line) on an unclosed, nested or nameless region.
regions_of() {
    awk -v src="$1" '
        function bad(msg) { printf "%s:%d: %s\n", src, FNR, msg > "/dev/stderr"; err = 1; exit 2 }
        /\/\* ASSIGNMENT\(/ {
            if (open) bad("ASSIGNMENT inside ASSIGNMENT(" name ")")
            name = $0; sub(/.*\/\* ASSIGNMENT\(/, "", name)
            if (name !~ /^[a-z0-9_]+\):/)
                bad("ASSIGNMENT(name): a lowercase name, then a colon and the spec")
            sub(/\).*/, "", name)
            open = 1; start = FNR; printf "%d\t%s\n", FNR, name
            next
        }
        /\/\* END ASSIGNMENT \*\// { if (!open) bad("END ASSIGNMENT without ASSIGNMENT"); open = 0 }
        END {
            if (err) exit 2
            if (open) { FNR = start; bad("ASSIGNMENT(" name ") has no END ASSIGNMENT") }
        }
    ' "$1"
}

stage_sources() {  # the stage folder's sources that hold a region
    local f
    for f in "$1"/*.cu "$1"/*.cuh "$1"/*.c "$1"/*.h; do
        [[ -f $f ]] && grep -q '/\* ASSIGNMENT(' "$f" && echo "$f"
    done
    return 0
}

if ((list)); then
    for dir in "$root"/stages/[0-9][0-9]_*/; do
        dir=${dir%/}
        srcs=$(stage_sources "$dir")
        [[ -n $srcs ]] || continue
        echo "${dir##*/}"
        for f in $srcs; do
            regions_of "$f" | while IFS=$'\t' read -r line name; do
                printf '  %s:%s %s\n' "stages/${dir##*/}/${f##*/}" "$line" "$name"
            done
        done
    done
    exit 0
fi

(($# >= 1 && $# <= 2)) || usage
want=${1%%/}  # 04_tma_mbarrier/ is 04_tma_mbarrier
want=${want##*/}  # so is stages/04_tma_mbarrier
case $want in
    [0-9][0-9]) matches=("$root"/stages/"$want"_*/) ;;
    [0-9][0-9]_*) matches=("$root/stages/$want/") ;;
    *) die "stage '$want': give its number (04) or folder name (04_tma_mbarrier)" ;;
esac
[[ -d ${matches[0]} ]] || die "no stage '$want' under stages/"
stage_dir=${matches[0]%/}
id=${stage_dir##*/}
sources=$(stage_sources "$stage_dir")
if [[ -z $sources ]]; then
    have=$("${BASH_SOURCE[0]}" --list | grep -v '^ ' | paste -sd ' ' -)
    die "stage $id has no ASSIGNMENT regions (stages with regions: ${have:-none})"
fi
for f in $sources; do regions_of "$f" > /dev/null || exit 2; done

out=${2:-$PWD/assignment_$id}
if [[ -e $out ]] && [[ -n $(ls -A "$out" 2> /dev/null) || ! -d $out ]]; then
    die "$out exists and is not an empty folder: give another DIR"
fi
abs=$(realpath -m "$out")
case $abs/ in "$root"/*) die "DIR $abs is inside the repository: give a folder outside it" ;; esac
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)

# ---- The copy: what git tracks (with the working tree's edits), or all but build folders
if git -C "$root" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    (cd "$root" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -xf - -C "$out"
else
    (cd "$root" && tar --exclude='./build*' --exclude='./assignment_*' --exclude=./.dev -cf - .) |
        tar -xf - -C "$out"
fi

# ---- The regions: spec kept, code replaced by the stub (or kept whole with --solution)
# The stub: the spec's comment lines, a note, the stop, and the "stub:" code if any.
stub_awk='
    function indent_of(s) { match(s, /^[ \t]*/); return substr(s, 1, RLENGTH) }
    /\/\* ASSIGNMENT\(/ {
        name = $0; sub(/.*\/\* ASSIGNMENT\(/, "", name); sub(/\).*/, "", name)
        ind = indent_of($0); spec = ""; stub = ""; in_spec = 1; open = 1
        # The spec stays, as TASK(name): an ASSIGNMENT marker without its END would make
        # the tree of the student a malformed one for this script and the course tests.
        sub(/\/\* ASSIGNMENT\(/, "/* TASK(")
    }
    open && in_spec {
        line = $0
        if (line ~ /^[ \t]*\*?[ \t]*stub:/) {
            s = line; sub(/.*stub:[ \t]*/, "", s); sub(/[ \t]*\*\/[ \t]*$/, "", s); stub = s
            if (line ~ /\*\//) { spec = spec ind " */\n"; in_spec = 0 }
            next
        }
        spec = spec line "\n"
        if (line ~ /\*\//) in_spec = 0
        next
    }
    /\/\* END ASSIGNMENT \*\// {
        printf "%s", spec
        printf "%s/* TODO: write ASSIGNMENT(%s) here; until then a kernel that reaches it " \
               "stops. */\n", ind, name
        printf "%s{\n", ind
        printf "%s    printf(\"flash-explorer: ASSIGNMENT(%s) of stage %s\"\n", ind, name, id
        printf "%s           \" is not written yet\\n\");\n", ind
        printf "%s    __trap();\n", ind
        printf "%s}\n", ind
        if (stub != "") printf "%s%s\n", ind, stub
        open = 0
        next
    }
    open { next }
    { print }
'
manifest=""
for f in $sources; do
    rel=stages/$id/${f##*/}
    while IFS=$'\t' read -r line name; do
        spec=$(awk -v l="$line" 'FNR >= l { print; if (/\*\//) exit }' "$f" |
            sed 's/^[[:space:]]*\/\* ASSIGNMENT([a-z0-9_]*): *//;
            s/^[[:space:]]*\* \{0,1\}//; s/ *\*\/[[:space:]]*$//; /^stub:/d' | tr '\n' ' ')
        manifest+="- \`$name\` in \`$rel\` (line $line of the reference): ${spec% }"$'\n'
    done < <(regions_of "$f")
    ((solution)) && continue
    awk -v id="$id" "$stub_awk" "$f" > "$out/$rel"
done

kind="assignment"
((solution)) && kind="reference solution (regions whole)"
{
    echo "# Stage $id: $kind"
    echo
    echo "Made by \`scripts/make_assignment.sh$( ((solution)) && echo " --solution") $id\` from"
    echo "commit $(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)" \
        "of flash-explorer. $( ((solution)) && echo "The regions, written" ||
            echo "The regions to write") (marked in the source):"
    echo
    printf '%s' "$manifest"
    echo
    echo "Build and check as in the README (\`./run.sh\`, \`./test.sh\`), or have the course's"
    echo "copy of the repository grade this folder: \`scripts/grade.sh ${id%%_*} '$out'\`."
    echo "docs/course.md says what each criterion checks."
} > "$out/ASSIGNMENT.md"
echo "make_assignment.sh: wrote $out ($kind of stage $id; see $out/ASSIGNMENT.md)"
