#!/bin/sh
# check_ptxas.sh REPORT PTX EXPECT — the ptx test of one stage (DESIGN.md, "Tests").
#
# REPORT: the stage's `nvcc -Xptxas -v` output (built by cmake/fx_stage.cmake).
# PTX:    the stage's PTX.
# EXPECT: one PTX instruction prefix per line that the PTX must contain
#         ("mma.sync.aligned.m16n8k16"), matched where an instruction may start
#         (line start, blank, '{' or ';': inline asm blocks included); a line
#         "!prefix" must NOT appear;
#         '#' starts a comment.
# Fails when a kernel spills, when ptxas ignored setmaxnreg (C7508) or serialized
# wgmma, or when an expected instruction is missing.
set -u
report=$1 ptx=$2 expect=$3
fail=0
say() { printf '%s\n' "$*"; }

[ -s "$report" ] || { say "FAIL: no ptxas report at $report"; exit 1; }
[ -s "$ptx" ] || { say "FAIL: no PTX at $ptx"; exit 1; }
kernels=$(grep -c "Compiling entry function" "$report")
[ "$kernels" -gt 0 ] || { say "FAIL: the report names no kernel"; exit 1; }
say "ptxas report: $kernels kernel(s)"

spills=$(grep -E "[1-9][0-9]* bytes spill (stores|loads)" "$report")
if [ -n "$spills" ]; then
    say "FAIL: spills:"; say "$spills"; fail=1
else
    say "ok: no kernel spills"
fi
if grep -q "C7508" "$report"; then
    say "FAIL: ptxas ignored setmaxnreg (C7508):"; grep "C7508" "$report"; fail=1
fi
if grep -qi "wgmma.*serializ" "$report"; then
    say "FAIL: wgmma serialized:"; grep -i "serializ" "$report"; fail=1
fi

if [ -f "$expect" ]; then
    while IFS= read -r line || [ -n "$line" ]; do
        line=$(printf '%s' "$line" | sed 's/#.*//; s/^[[:space:]]*//; s/[[:space:]]*$//')
        [ -n "$line" ] || continue
        case $line in
        !*)
            instr=${line#!}
            if grep -qE "(^|[[:space:]{;])$instr" "$ptx"; then
                say "FAIL: $instr must not appear"; fail=1
            else
                say "ok: no $instr"
            fi ;;
        *)
            n=$(grep -cE "(^|[[:space:]{;])$line" "$ptx")
            if [ "$n" -gt 0 ]; then
                say "ok: $line ($n)"
            else
                say "FAIL: $line missing"; fail=1
            fi ;;
        esac
    done < "$expect"
else
    say "FAIL: no expect file $expect"; fail=1
fi
[ $fail -eq 0 ] && say "PASS" || say "FAIL"
exit $fail
