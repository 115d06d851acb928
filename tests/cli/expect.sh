#!/bin/sh
# expect.sh — runs a program and checks both its exit code and its message.
#
#   tests/cli/expect.sh CODE REGEX -- PROGRAM [ARGS...]
#
# Passes (exit 0) when PROGRAM exits with CODE and its output (stdout and stderr together)
# has a line matching the extended regular expression REGEX (grep -E). Otherwise prints
# what was expected, what came, and the output, and exits 1. Exit 2: bad usage of this
# script. The CLI tests (label unit, tests/CMakeLists.txt) use it: a refusal must say why
# and exit 2, and CTest's PASS_REGULAR_EXPRESSION alone would ignore the exit code.
set -u

if [ $# -lt 4 ] || [ "$3" != "--" ]; then
    echo "usage: $0 CODE REGEX -- PROGRAM [ARGS...]" >&2
    exit 2
fi
want_code=$1
regex=$2
shift 3

out=$(mktemp) || exit 2
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
code=$?

ok=1
if [ "$code" != "$want_code" ]; then
    echo "expect.sh: exit $code, expected $want_code"
    ok=0
fi
if ! grep -Eq -- "$regex" "$out"; then
    echo "expect.sh: no line matches: $regex"
    ok=0
fi
if [ $ok = 0 ]; then
    echo "expect.sh: the command: $*"
    echo "expect.sh: its output:"
    sed 's/^/  | /' "$out"
    exit 1
fi
echo "expect.sh: exit $code and /$regex/ as expected"
exit 0
