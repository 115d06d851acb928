#!/usr/bin/env bash
# csv_header_copies.sh — the CSV header that bench/peers.py writes for a new file is the
# stage programs' FX_CSV_HEADER (common/fx_main.h; test_csv.c checks that one against the
# writer's column table). Joins the string literals of each and compares. No GPU, no Python.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The quoted pieces of a definition, from its first line to the first line that ends it.
# mode c: a macro, ended by its first line without a trailing backslash; mode py: a
# parenthesized expression, ended by the line that starts with ')'.
join_quoted() {
    awk -v start="$2" -v mode="$3" '
        index($0, start) { on = 1 }
        on {
            line = $0
            while (match(line, /"[^"]*"/)) {
                out = out substr(line, RSTART + 1, RLENGTH - 2)
                line = substr(line, RSTART + RLENGTH)
            }
            if (mode == "c" && $0 !~ /\\$/) exit
            if (mode == "py" && $0 ~ /^\)/) exit
        }
        END { print out }' "$1"
}
c=$(join_quoted "$root/common/fx_main.h" "#define FX_CSV_HEADER" c)
py=$(join_quoted "$root/bench/peers.py" "FX_CSV_HEADER = (" py)
if [[ -z $c || $c != "$py" ]]; then
    echo "FAIL: bench/peers.py's FX_CSV_HEADER differs from common/fx_main.h's:"
    echo "  fx_main.h: $c"
    echo "  peers.py:  $py"
    exit 1
fi
echo "PASS: one CSV header (${c%%,*},...: $(tr -cd , <<<"$c" | wc -c) commas)"
