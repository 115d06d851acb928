# shellcheck shell=bash
# shell_files.sh — sourced by tests/scripts/lint_pipefail.sh and run_shellcheck.sh (not a
# program): which files of the repository are shell scripts.
#
#   fx_shell_files    prints, one per line, every *.sh and every file without an extension
#                     whose first line is a sh/bash shebang, as git lists them (tracked and
#                     new, ignored ones left out); outside a git work tree, every file
#                     outside the build folders. Run from the repository's root.
fx_shell_files() {
    local all=() f first
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        mapfile -t all < <(git ls-files --cached --others --exclude-standard)
    else
        mapfile -t all < <(find . -path './build*' -prune -o -type f -print | sed 's|^\./||')
    fi
    for f in "${all[@]}"; do
        [[ -f $f ]] || continue
        case $f in
            *.sh) echo "$f" ;;
            *.*) ;;
            *)
                first=$(head -c 64 "$f" 2>/dev/null | tr -d '\0' | sed -n 1p) || true
                [[ $first =~ ^#!.*(/|env\ )(ba)?sh ]] && echo "$f" ;;
        esac
    done
    return 0
}
