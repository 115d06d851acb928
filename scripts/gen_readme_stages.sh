#!/usr/bin/env bash
# gen_readme_stages.sh — regenerates the capabilities column of README.md's stage table.
#
#   scripts/gen_readme_stages.sh [README.md]        (after a build: needs build/bin/stage_*)
#
# Rewrites the table between `<!-- stages:begin -->` and `<!-- stages:end -->`. Its rows
# look like
#   | 02 | [`02_flash1`](stages/02_flash1/) | adds | checked against | capabilities |
# and the script replaces the last cell only: for a stage with a program, the
# capabilities its `--help` prints (which needs no GPU); for a row whose folder
# stages/<id> does not exist yet, "planned". A stage folder without a program is an
# error (build first). Cells must not contain '|'.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
readme=${1:-README.md}

if ! grep -q '<!-- stages:begin -->' "$readme" || ! grep -q '<!-- stages:end -->' "$readme"; then
    echo "gen_readme_stages.sh: $readme has no <!-- stages:begin/end --> markers" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One "id<TAB>cell" line per stage program, from its --help:
#   capabilities:
#     head_dim: multiples of 8 up to 256
#     dtype:    bf16/fp16
#     causal:   yes (bottom-right)
#     GQA/MQA:  yes
#     varlen:   yes (--seqlens-q, ...)
#     backward: yes
#     CPU model: yes (--cpu; forward and backward)
#     GPU:      sm_80 or newer
#     limits:   ...
caps_cell() {
    awk '
        /^capabilities:/ { on = 1; next }
        on && !/^  / { on = 0 }
        on {
            line = $0; sub(/^ +/, "", line)
            key = line; sub(/:.*/, "", key)
            val = line; sub(/^[^:]*: */, "", val)
            if (key == "head_dim") cell = "head_dim " val
            else if (key == "dtype") cell = cell "; " val
            else if (key == "causal") cell = cell "; " (val ~ /^yes/ ? "causal" : "no causal")
            else if (key == "GQA/MQA") cell = cell (val ~ /^yes/ ? "; GQA/MQA" : "; no GQA")
            else if (key == "varlen") { if (val ~ /^yes/) cell = cell "; varlen" }
            else if (key == "backward") {
                if (val ~ /deterministic/) cell = cell "; backward (deterministic)"
                else if (val ~ /^yes/) cell = cell "; backward"
                else cell = cell "; forward only"
            }
            else if (key == "CPU model") { if (val ~ /^yes/) cell = cell "; CPU model" }
            else if (key == "GPU") {
                sub(/ or newer/, "+", val); sub(/ \(Hopper\) only/, " only", val)
                cell = cell "; " val
            }
            else cell = cell "; " val
        }
        END { gsub(/\|/, "/", cell); print cell }'
}

for bin in build/bin/stage_*; do
    [[ -f $bin && -x $bin ]] || continue
    id=${bin##*/stage_}
    "$bin" --help >"$tmp/help"
    cell=$(caps_cell <"$tmp/help")
    [[ -n $cell ]] || { echo "gen_readme_stages.sh: no capabilities in $bin --help" >&2; exit 1; }
    printf '%s\t%s\n' "$id" "$cell" >>"$tmp/caps"
done
touch "$tmp/caps"

for dir in stages/*/; do
    id=$(basename "$dir")
    [[ -f $dir/CMakeLists.txt ]] || continue
    if ! grep -q "^$id	" "$tmp/caps"; then
        echo "gen_readme_stages.sh: stages/$id has no program build/bin/stage_$id: build first" \
             "(cmake -S . -B build && cmake --build build -j)" >&2
        exit 1
    fi
done

awk -F'|' -v caps="$tmp/caps" '
    BEGIN { while ((getline l < caps) > 0) { split(l, kv, "\t"); cell[kv[1]] = kv[2] } }
    /<!-- stages:begin -->/ { on = 1; print; next }
    /<!-- stages:end -->/ { on = 0; print; next }
    on && /^\|/ && match($3, /[0-9][0-9][a-z]?_[a-z0-9_]+/) {
        id = substr($3, RSTART, RLENGTH)
        if (id in cell) c = cell[id]
        else if (system("test -d stages/" id) == 0) c = "not built"
        else c = "planned"
        $(NF - 1) = " " c " "
        out = $1
        for (i = 2; i <= NF; ++i) out = out "|" $i
        print out
        next
    }
    { print }' "$readme" >"$tmp/readme"

if cmp -s "$tmp/readme" "$readme"; then
    echo "$readme: stage table up to date"
else
    cp "$tmp/readme" "$readme"
    echo "$readme: stage table rewritten"
fi
