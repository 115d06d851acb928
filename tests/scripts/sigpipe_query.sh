#!/usr/bin/env bash
# sigpipe_query.sh [TRIES] [STAGE_PROGRAM...] — the test of issue 11's SIGPIPE defect
# (CTest scripts_sigpipe_query, label unit).
#
# Calls fx_stage_has_backward (scripts/stage_caps.sh) TRIES times (default 300) under
# `set -o pipefail` on a fake stage program whose --help writes the line
# "  backward: yes" and then 500 more lines, one write each: a query that pipes the
# program into `grep -q` misses most of these (the writer gets SIGPIPE, the pipeline
# returns 141). Also checks, TRIES/3 times each, fakes that say "yes (deterministic)"
# (yes) and "backward: no" (no), and 3 times each a fake that exits 1 and a missing
# program (both no). STAGE_PROGRAMs (real stage programs, e.g. build/bin/stage_03_flash2)
# are queried TRIES times too and must always give the answer their --help gives when
# read from a file. Fails on any other answer.
# Exit status: 0 pass, 1 a miss, 2 bad usage.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/stage_caps.sh
source "$here/../../scripts/stage_caps.sh"

tries=300
if (($# > 0)) && [[ $1 =~ ^[0-9]+$ ]]; then
    tries=$1
    shift
elif (($# > 0)) && [[ $1 == -h || $1 == --help ]]; then
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    exit 0
fi
((tries > 0)) || { echo "sigpipe_query.sh: TRIES must be at least 1" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fake() {  # fake NAME ANSWER: a program whose --help says "backward: ANSWER", then a lot
    cat >"$tmp/$1" <<FAKE
#!/usr/bin/env bash
echo "usage: $1 [options]"
echo "capabilities:"
echo "  backward: $2"
for ((i = 0; i < 500; ++i)); do echo "  filler line \$i, written after the matching one"; done
FAKE
    chmod +x "$tmp/$1"
}
fake yes_prog yes
fake det_prog 'yes (deterministic)'
fake no_prog no
printf '#!/bin/sh\necho "  backward: yes"\nexit 1\n' >"$tmp/failing_prog"
chmod +x "$tmp/failing_prog"

fail=0
# count_answers PROG EXPECT(yes|no): TRIES queries, fails on any answer but EXPECT.
count_answers() {
    local prog=$1 expect=$2 n_yes=0 i
    for ((i = 0; i < tries; ++i)); do
        if fx_stage_has_backward "$prog"; then n_yes=$((n_yes + 1)); fi
    done
    local n_want=$n_yes
    [[ $expect == yes ]] || n_want=$((tries - n_yes))
    if ((n_want == tries)); then
        echo "ok: $(basename "$prog"): backward $expect in $tries of $tries queries"
    else
        echo "FAIL: $(basename "$prog"): backward $expect in only $n_want of $tries queries"
        fail=1
    fi
}

count_answers "$tmp/yes_prog" yes
tries_saved=$tries
tries=$(((tries + 2) / 3))
count_answers "$tmp/det_prog" yes
count_answers "$tmp/no_prog" no
tries=3
count_answers "$tmp/failing_prog" no
count_answers "$tmp/no_such_program" no
tries=$tries_saved

# The old query must miss on the same fake at least once, or this machine cannot show the
# race and the test would pass with the old query too: then it is a skip (exit 77).
old_miss=0
for ((i = 0; i < 100; ++i)); do
    if ! "$tmp/yes_prog" --help | grep -q '^  backward: yes'; then  # sigpipe-ok: on purpose
        old_miss=$((old_miss + 1))
    fi
done
echo "info: the old query ('| grep -q' under pipefail) missed $old_miss of 100 on the same fake"

for prog in "$@"; do
    if [[ ! -x $prog ]]; then
        echo "FAIL: $prog is not an executable program"
        fail=1
        continue
    fi
    "$prog" --help >"$tmp/help.txt" 2>/dev/null || true
    if grep -q '^  backward: yes' "$tmp/help.txt"; then
        count_answers "$prog" yes
    else
        count_answers "$prog" no
    fi
done

if ((!fail && old_miss == 0)); then
    echo "SKIP: the old query never missed here, so this machine cannot tell the two apart"
    exit 77
fi
if ((fail)); then
    echo "FAIL"
    exit 1
fi
echo "PASS"
