#!/usr/bin/env bash
# stage_caps.sh — what a stage program says it can do, read from its --help.
#
#   source scripts/stage_caps.sh      defines fx_stage_help, fx_stage_has_backward and
#                                     fx_stage_dtypes (run.sh, test.sh,
#                                     scripts/validate_gpu.sh and
#                                     tests/cli/load_roundtrip.sh do this)
#   scripts/stage_caps.sh BIN...      prints "BIN: backward yes|no" for each program
#
# fx_stage_has_backward BIN succeeds when BIN's --help has the line "  backward: yes"
# (or "yes (deterministic)"), fails otherwise: no such line, or a program that does not
# run. The help text is captured whole before it is matched. Never pipe a program into
# `grep -q` under `set -o pipefail`: grep -q exits at the first match, the program's
# later writes get SIGPIPE, the pipeline returns 141 and the answer is "no" at random
# (issue 11: 68 misses in 300 tries on stage 03). tests/scripts/sigpipe_query.sh checks
# this function 300 times against a program that writes a lot after the matching line.
# fx_stage_dtypes BIN prints the dtypes of BIN's first "  dtype:" line as listed there
# ("bf16/fp16"; stage 10: "e4m3"; the first is ${list%%/*}), nothing when it has none (an
# older build); it fails when BIN does.
# Exit status (run): 0, or 2 on bad usage.

# The help text of a stage program on stdout; fails when the program does.
fx_stage_help() {
    local text
    text=$("$1" --help 2>/dev/null) || return 1
    printf '%s\n' "$text"
}

fx_stage_has_backward() {
    local text
    text=$(fx_stage_help "$1") || return 1
    [[ $'\n'$text == *$'\n  backward: yes'* ]]
}

fx_stage_dtypes() {
    local text
    text=$(fx_stage_help "$1") || return 1
    # sed quits at the first match: no reader that exits early in a pipe.
    sed -n 's/^  dtype: *\([a-z0-9/]*\).*/\1/p;T;q' <<<"$text"
}

if ! (return 0 2>/dev/null); then
    set -euo pipefail
    if (($# == 0)) || [[ $1 == -h || $1 == --help ]]; then
        sed -n '2,/^$/{/^$/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
        (($# > 0)) || exit 2
        exit 0
    fi
    for bin in "$@"; do
        if [[ ! -x $bin || -d $bin ]]; then
            echo "stage_caps.sh: $bin is not an executable program" >&2
            exit 2
        fi
        if fx_stage_has_backward "$bin"; then
            echo "$bin: backward yes"
        else
            echo "$bin: backward no"
        fi
    done
fi
