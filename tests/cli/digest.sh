#!/bin/sh
# digest.sh — --digest tells outputs apart by their bits: the same run twice gives the same
# digest line, and inputs that differ (another seed) give another.
#
#   tests/cli/digest.sh PROGRAM [ARGS...]
#
# Runs PROGRAM ARGS --digest twice and PROGRAM ARGS --digest --seed 2 once (ARGS must not
# hold --seed), takes each run's "digest:" line, and passes (exit 0) when the first two are
# present and equal and the third differs. Otherwise prints the three lines and exits 1.
# Exit 2: bad usage. The CLI test cli_digest_cpu runs it on stage 03's CPU model (no GPU).
set -u
[ $# -ge 1 ] || { echo "usage: $0 PROGRAM [ARGS...]" >&2; exit 2; }
a=$("$@" --digest 2>&1 | grep '^  digest: ')
b=$("$@" --digest 2>&1 | grep '^  digest: ')
c=$("$@" --digest --seed 2 2>&1 | grep '^  digest: ')
if [ -n "$a" ] && [ "$a" = "$b" ] && [ -n "$c" ] && [ "$c" != "$a" ]; then
    echo "digest.sh: repeatable ($a), and another seed gives another ($c)"
    exit 0
fi
echo "digest.sh: expected two equal digest lines and a third that differs; got:"
printf '  run 1:  %s\n  run 2:  %s\n  seed 2: %s\n' "$a" "$b" "$c"
exit 1
