#!/usr/bin/env bash
# stage_diff_test.sh — the test of scripts/stage_diff.sh (CTest scripts_stage_diff, label
# unit), on two small stage folders made here: the comment filter keeps strings,
# characters and raw strings and drops comment-only lines; files renamed between stages
# pair by role (a_fwd.cu with b_fwd.cu) and say so; the counts with and without
# comments; the --table row; bad stage names exit 2.
# Exit status: 0 pass, 1 a check failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sd=$here/../../scripts/stage_diff.sh
if (($# > 0)); then
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # check NAME EXPECTED ACTUAL
    if [[ $2 == "$3" ]]; then
        echo "ok: $1"
    else
        echo "FAIL: $1"
        diff -u <(printf '%s\n' "$2") <(printf '%s\n' "$3") | sed 's/^/    /' || true
        fail=1
    fi
}

# 1. The comment filter.
cat >"$tmp/tricky.cu" <<'SRC'
// a header comment
#include "x.h"  // trailing
int a = 1; /* inline */ int b = 2;
/* a block
   over lines */

const char *s = "not // a comment /* either */";
char q = '"'; char r = '\''; int sep = 1'000;
asm volatile("mov.u32 %0, %1; // PTX in a string\n\t" : "=r"(a));
const char *raw = R"(raw // kept /* too */)";
int c = 3; /* starts
ends */ int d = 4;
x = "esc \" // still a string"; // gone
SRC
expected=$(cat <<'SRC'
#include "x.h"
int a = 1;  int b = 2;

const char *s = "not // a comment /* either */";
char q = '"'; char r = '\''; int sep = 1'000;
asm volatile("mov.u32 %0, %1; // PTX in a string\n\t" : "=r"(a));
const char *raw = R"(raw // kept /* too */)";
int c = 3;
 int d = 4;
x = "esc \" // still a string";
SRC
)
check "comment filter" "$expected" "$("$sd" --strip "$tmp/tricky.cu")"

# 2. Two stages: a_fwd.cu becomes b_fwd.cu (2 code lines and 2 comment lines changed, 1
# comment line added), stage.c is the same, model.c is new (3 lines, 1 a comment).
mkdir -p "$tmp/stages/01_a" "$tmp/stages/02_b"
printf '%s\n' '// stage a' 'int x = 1;' 'int y = 2;' 'int z = 3;' '/* old note */' 'int w;' \
    >"$tmp/stages/01_a/a_fwd.cu"
printf '%s\n' '// stage b' 'int x = 10;' 'int y = 2;' 'int z = 30;' '/* new note */' \
    '// one more' 'int w;' >"$tmp/stages/02_b/b_fwd.cu"
printf '%s\n' 'int stage;' >"$tmp/stages/01_a/stage.c"
cp "$tmp/stages/01_a/stage.c" "$tmp/stages/02_b/stage.c"
printf '%s\n' '// the model' 'int m;' '' >"$tmp/stages/02_b/model.c"
printf '%s\n' 'a' >"$tmp/stages/01_a/README.md"
printf '%s\n' 'b' >"$tmp/stages/02_b/README.md"
# With comments: fwd -4 +5 (lines 1, 2, 4, 5 changed; "// one more" added), model.c +3.
# Without: fwd -2 +2 (x and z), model.c +2 (the comment line dropped, the blank kept).
out=$("$sd" --stages "$tmp/stages" -c 1 02_b 2>"$tmp/err")
check "count" "01_a -> 02_b: 12 lines (+8 -4) with comments, 6 (+4 -2) without" "$out"
check "pairing said" "pair: 01_a/a_fwd.cu -> 02_b/b_fwd.cu (same role: fwd.cu)
only in 02_b: model.c (counted as added)" "$(cat "$tmp/err")"
row=$("$sd" --stages "$tmp/stages" --table | tail -n 1)
check "table row" \
    "| 01 → 02 | stage.c, a_fwd.cu → b_fwd.cu; new: model.c | 12 (+8 −4) | 6 (+4 −2) |" "$row"
stat=$("$sd" --stages "$tmp/stages" 01 02 | tail -n 4)
check "diff stat" "    +1     -1  README.md
    +5     -4  a_fwd.cu -> b_fwd.cu
    +3     -0  model.c (only in 02_b)
    +9     -5  total, 3 file(s) changed" "$stat"

# 3. Bad input: exit 2 with a message, never a crash.
for bad in "" "01" "03 01" "x 01" "01 02 03" "--nope"; do
    rc=0
    # shellcheck disable=SC2086  # the words of $bad are the arguments
    "$sd" --stages "$tmp/stages" $bad >/dev/null 2>"$tmp/err" || rc=$?
    if ((rc == 2)) && [[ -s $tmp/err ]]; then
        echo "ok: '$bad' refused: $(head -c 80 "$tmp/err")"
    else
        echo "FAIL: '$bad' gave exit $rc"
        fail=1
    fi
done

if ((fail)); then echo FAIL; exit 1; fi
echo PASS
