#!/usr/bin/env bash
# check_diff_table.sh [--update] [DOC] — the stage-diff table in DOC (default
# docs/stage_shape.md, between <!-- stage-diff:begin --> and <!-- stage-diff:end -->) must
# be the one scripts/stage_diff.sh --table gives for the tree as it is now.
#
# The table's rows (the lines that start with '|') are compared; the "generated at commit"
# comment above them is not, since it names the commit the table was last written at.
# Fails (exit 1) with a diff when a stage's kernel files changed and the table did not;
# --update rewrites the block in place instead (then commit the doc with the change).
# Needs bash, gcc (stage_diff.sh strips comments with its preprocessor), git, diff, awk; no
# GPU. Registered as the CTest test shape_diff_table (label unit).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
update=0
if [[ ${1:-} == --update ]]; then
    update=1
    shift
fi
doc=${1:-$here/../../docs/stage_shape.md}
begin='<!-- stage-diff:begin -->'
end='<!-- stage-diff:end -->'
if ! grep -qxF "$begin" "$doc" || ! grep -qxF "$end" "$doc"; then
    echo "check_diff_table: $doc has no '$begin' ... '$end' block" >&2
    exit 2
fi

fresh=$(bash "$here/../../scripts/stage_diff.sh" --table)
if ((update)); then
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    # Everything up to the begin marker, the fresh table, everything from the end marker.
    awk -v begin="$begin" -v end="$end" -v table="$fresh" '
        $0 == begin { print; print table; skip = 1; next }
        $0 == end   { skip = 0 }
        !skip       { print }' "$doc" >"$tmp"
    cat "$tmp" >"$doc"
    echo "check_diff_table: $doc updated"
    exit 0
fi

in_doc=$(awk -v begin="$begin" -v end="$end" '
    $0 == begin { inside = 1; next }
    $0 == end   { inside = 0 }
    inside && /^\|/' "$doc")
if ! delta=$(diff -u --label doc --label tree <(printf '%s\n' "$in_doc") \
    <(printf '%s\n' "$fresh" | grep '^|')); then
    echo "check_diff_table: the table in $doc is stale (- the doc, + the tree now):" >&2
    printf '%s\n' "$delta" >&2
    echo "rewrite it: bash tests/shape/check_diff_table.sh --update" >&2
    exit 1
fi
echo "check_diff_table: the table in $doc matches scripts/stage_diff.sh --table"
