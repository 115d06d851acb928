#!/usr/bin/env bash
# run_shellcheck.sh [SCRIPT...] — shellcheck on the repository's shell scripts (CTest
# scripts_shellcheck, label unit), at severity warning and above (.shellcheckrc holds
# the settings): every *.sh and every file whose first line is a sh/bash shebang, as
# git lists them (tracked and new; all files outside build folders without git).
# Exit status: 0 clean, 1 findings, 2 bad usage, 77 shellcheck is not installed (a skip;
# Debian: apt-get install shellcheck).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if (($# > 0)) && [[ $1 == -h || $1 == --help ]]; then
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    exit 0
fi
if ! command -v shellcheck >/dev/null 2>&1; then
    echo "skipped: shellcheck is not installed (apt-get install shellcheck)"
    exit 77
fi
files=("$@")
# shellcheck source=tests/scripts/shell_files.sh
source tests/scripts/shell_files.sh
if ((${#files[@]} == 0)); then
    mapfile -t files < <(fx_shell_files)
fi
((${#files[@]} > 0)) || { echo "no shell scripts found"; exit 0; }
if shellcheck --severity=warning "${files[@]}"; then
    echo "PASS: shellcheck $(shellcheck --version | sed -n 's/^version: //p'), ${#files[@]} scripts"
else
    echo "FAIL: shellcheck findings above"
    exit 1
fi
