#!/usr/bin/env bash
# build_trees.sh OUT [NAME...] — build, on this machine (no GPU needed), the course trees that
# tests/course/gpu_grading.sh grades on a GPU machine, and keep only what grading needs.
#
# NAME is unfilled_NN (make_assignment.sh NN: the assignment as a student receives it) or a
# mutant of tests/course/mutants/ (the reference solution with one deliberate mistake, built
# with the mutant's "cuda-flags:" line). Default: unfilled_NN for every stage that has
# assignment regions, and every mutant.
#
# For each NAME, OUT/NAME/ holds bin/stage_<id>, ptx/<id>.ptx, ptx/<id>.ptxas.txt (what
# grade.sh --prebuilt reads), and meta.txt (stage, kind, the criteria expected to catch it).
# The trees are built in a temporary folder, removed at the end. Exit 1 if any fails to
# build (its log is kept as OUT/NAME/build.log), 2 on a usage error.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
(($# >= 1)) || { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
out=$1
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${FX_COURSE_JOBS:-$(nproc)}

names=("$@")
if ((${#names[@]} == 0)); then
    for n in $("$root/scripts/make_assignment.sh" --list | grep -v '^ '); do
        names+=("unfilled_${n%%_*}")
    done
    for m in "$here"/mutants/[0-9]*.sh; do names+=("$(basename "$m" .sh)"); done
fi

# One source folder and one build folder (per set of CUDA flags) serve every tree: each tree
# is written over the source folder file by file, and only the files whose content differs are
# replaced, so make rebuilds only the stage that changed (and the one it replaced), not the
# earlier stages every program links (a stage 09 program compiles stages 01-09).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$tmp/src
mkdir -p "$src"
sync_tree() {  # new tree -> $src, touching only what differs
    local new=$1 f
    (cd "$new" && find . -type f) | while read -r f; do
        if ! cmp -s "$new/$f" "$src/$f"; then
            mkdir -p "$(dirname "$src/$f")"
            cp "$new/$f" "$src/$f"
        fi
    done
    (cd "$src" && find . -type f) | while read -r f; do
        [[ -e $new/$f ]] || rm -f "$src/$f"
    done
}
failed=0
for name in "${names[@]}"; do
    t0=$SECONDS
    dir=$out/$name
    rm -rf "$dir"
    mkdir -p "$dir/bin" "$dir/ptx"
    new=$tmp/new
    rm -rf "$new"
    flags=""
    case $name in
        unfilled_[0-9][0-9])
            stage=${name#unfilled_}
            "$root/scripts/make_assignment.sh" "$stage" "$new" > /dev/null
            caught="matrix"
            kind=unfilled ;;
        *)
            m=$here/mutants/$name.sh
            if [[ ! -f $m ]]; then
                echo "build_trees.sh: no tree $name (unfilled_NN or a mutant)" >&2
                exit 2
            fi
            stage=$(sed -n 's/^# stage: *//p' "$m")
            caught=$(sed -n 's/^# caught-by: *//p' "$m")
            flags=$(sed -n 's/^# cuda-flags: *//p' "$m")
            "$root/scripts/make_assignment.sh" --solution "$stage" "$new" > /dev/null
            bash "$m" "$new"
            kind=mutant ;;
    esac
    id=$(basename "$root"/stages/"$stage"_*)
    sync_tree "$new"
    b=$tmp/build-$(printf '%s' "$flags" | cksum | cut -d' ' -f1)
    if cmake -S "$src" -B "$b" -DFX_CUDA_ARCHS=90 -DFX_REQUIRE_CHECK=OFF \
        -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_FLAGS=$flags" > "$dir/build.log" 2>&1 &&
        cmake --build "$b" -j "$jobs" --target "stage_$id" "ptxas_$id" >> "$dir/build.log" 2>&1
    then
        cp "$b/bin/stage_$id" "$dir/bin/"
        cp "$b/ptx/$id.ptx" "$b/ptx/$id.ptxas.txt" "$dir/ptx/"
        rm "$dir/build.log"
        printf 'stage: %s\nkind: %s\ncaught-by: %s\ncuda-flags: %s\n' "$id" "$kind" "$caught" \
            "$flags" > "$dir/meta.txt"
        echo "built $name ($id) in $((SECONDS - t0)) s"
    else
        echo "FAIL: $name does not build (see $dir/build.log)"
        failed=1
    fi
done
exit $failed
