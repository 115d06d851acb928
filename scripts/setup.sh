#!/usr/bin/env bash
# setup.sh — what the build, the tests and the figures need, installed where it can be.
#
#   source scripts/setup.sh      (run.sh and test.sh do this)
#   bash scripts/setup.sh        (prints what it found; exit 1 when nvcc or cmake is missing)
#
# Needs the CUDA Toolkit already installed (nvcc on PATH, or under /usr/local/cuda*/bin
# or $CUDA_HOME/bin). On Debian/Ubuntu it installs, with apt-get and only when missing:
#   cmake, pkg-config, make, g++   the build (CMake 3.25 or newer)
#   check                          the unit tests (libcheck, found through pkg-config)
#   python3                        the test unit_python_binding (python/flash_explorer)
#   gnuplot-nox                    the figures
#   clang-format-14, shellcheck    with CI=true or FX_INSTALL_LINTERS=1 only: the tests
#                                  format_clang_format and scripts_shellcheck (they
#                                  skip without them)
# It runs `apt-get update` once first, as root or through `sudo -n` (never a password
# prompt). Where it cannot install (no apt-get, not root and no sudo, no network, or
# FX_NO_INSTALL=1) it says what is missing and carries on: Check and gnuplot are
# optional for ./run.sh. After it, in the caller's shell:
#   PATH      has nvcc's folder;  CUDACXX   the nvcc CMake should use
#   FX_HAVE_CHECK, FX_HAVE_GNUPLOT   1 or 0
# and it returns 1 only when nvcc or a usable cmake is missing.
set -euo pipefail

fx_say() { printf 'setup: %s\n' "$*"; }

# nvcc: PATH, then $CUDA_HOME, /usr/local/cuda, then the newest /usr/local/cuda-*.
fx_find_nvcc() {
    local c
    if c=$(command -v nvcc 2>/dev/null); then
        printf '%s\n' "$c"
        return 0
    fi
    for c in ${CUDA_HOME:+"$CUDA_HOME/bin/nvcc"} ${CUDA_PATH:+"$CUDA_PATH/bin/nvcc"} \
             /usr/local/cuda/bin/nvcc; do
        if [[ -x $c ]]; then
            printf '%s\n' "$c"
            return 0
        fi
    done
    c=$(find /usr/local -maxdepth 3 -path '/usr/local/cuda-*/bin/nvcc' 2>/dev/null |
        sort -V | tail -n 1)
    [[ -n $c ]] || return 1
    printf '%s\n' "$c"
}

fx_have_check() {
    command -v pkg-config >/dev/null 2>&1 && pkg-config --exists check
}

# "3.25.1" >= "3.25"?
fx_version_at_least() {
    local lowest
    lowest=$(printf '%s\n%s\n' "$2" "$1" | sort -V)
    [[ ${lowest%%$'\n'*} == "$2" ]]
}

# The Debian packages of what is missing, one per line.
fx_missing_packages() {
    command -v cmake >/dev/null 2>&1 || echo cmake
    command -v pkg-config >/dev/null 2>&1 || echo pkg-config
    command -v make >/dev/null 2>&1 || echo make
    command -v g++ >/dev/null 2>&1 || echo g++
    fx_have_check || dpkg -s check >/dev/null 2>&1 || echo check
    command -v python3 >/dev/null 2>&1 || echo python3
    command -v gnuplot >/dev/null 2>&1 || echo gnuplot-nox
    if [[ ${CI:-} == true || ${FX_INSTALL_LINTERS:-0} == 1 ]]; then
        command -v clang-format-14 >/dev/null 2>&1 || echo clang-format-14
        command -v shellcheck >/dev/null 2>&1 || echo shellcheck
    fi
}

# apt-get as root, or through sudo without a password; prints the prefix, or fails.
fx_apt_prefix() {
    command -v apt-get >/dev/null 2>&1 || return 1
    if [[ $(id -u) -eq 0 ]]; then
        printf '\n'
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        printf 'sudo -n\n'
    else
        return 1
    fi
}

# Installs the missing packages, or says why it cannot. Never fails.
fx_install_missing() {
    local missing prefix
    mapfile -t missing < <(fx_missing_packages)
    ((${#missing[@]} > 0)) || return 0
    if [[ ${FX_NO_INSTALL:-0} == 1 ]]; then
        fx_say "missing: ${missing[*]} (FX_NO_INSTALL=1: not installing)"
        return 0
    fi
    if ! prefix=$(fx_apt_prefix); then
        fx_say "missing: ${missing[*]}; cannot install them here (needs apt-get and root or" \
               "passwordless sudo): carrying on"
        return 0
    fi
    local -a run=()
    if [[ -n $prefix ]]; then
        read -r -a run <<<"$prefix"
    fi
    # No network (the GPU machines) must cost seconds, not minutes of retries.
    local -a apt_opts=(-o Acquire::Retries=0 -o Acquire::http::Timeout=20
                       -o Acquire::https::Timeout=20 -o Dpkg::Use-Pty=0)
    fx_say "installing: ${missing[*]}"
    if [[ -z ${FX_APT_UPDATED:-} ]]; then
        if ! ${run[@]+"${run[@]}"} env DEBIAN_FRONTEND=noninteractive \
                apt-get "${apt_opts[@]}" -qq update; then
            fx_say "apt-get update failed (no network?): trying the package lists already here"
        fi
        export FX_APT_UPDATED=1
    fi
    if ! ${run[@]+"${run[@]}"} env DEBIAN_FRONTEND=noninteractive \
            apt-get "${apt_opts[@]}" -qq install -y --no-install-recommends "${missing[@]}" \
            >/dev/null; then
        # One package that cannot be had must not keep the others out.
        local p
        for p in "${missing[@]}"; do
            ${run[@]+"${run[@]}"} env DEBIAN_FRONTEND=noninteractive \
                apt-get "${apt_opts[@]}" -qq install -y --no-install-recommends "$p" \
                >/dev/null 2>&1 || fx_say "could not install $p"
        done
    fi
    hash -r
}

fx_setup() {
    fx_install_missing

    local nvcc cuda_version
    if ! nvcc=$(fx_find_nvcc); then
        fx_say "nvcc not found (looked on PATH, in \$CUDA_HOME/bin and /usr/local/cuda*/bin):" \
               "install the CUDA Toolkit (12.8 or newer), or put its bin/ on PATH"
        return 1
    fi
    case ":$PATH:" in
        *":$(dirname "$nvcc"):"*) ;;
        *) PATH="$(dirname "$nvcc"):$PATH" ;;
    esac
    export PATH
    export CUDACXX=$nvcc
    cuda_version=$("$nvcc" --version | sed -n 's/.*release \([0-9][0-9.]*\).*/\1/p')
    fx_say "nvcc $nvcc (CUDA ${cuda_version:-unknown})"
    if [[ -n $cuda_version ]] && ! fx_version_at_least "$cuda_version" 12.8; then
        fx_say "CUDA $cuda_version is older than the 12.8 this project is tested with (13.0);" \
               "the build may fail"
    fi

    if ! command -v cmake >/dev/null 2>&1; then
        fx_say "cmake not found: install CMake 3.25 or newer"
        return 1
    fi
    local cmake_version
    cmake_version=$(cmake --version | sed -n '1s/[^0-9]*\([0-9][0-9.]*\).*/\1/p')
    if ! fx_version_at_least "$cmake_version" 3.25; then
        fx_say "cmake $cmake_version is too old: CMakeLists.txt needs 3.25 or newer" \
               "(python3 -m pip install cmake, or Kitware's apt repository)"
        return 1
    fi
    fx_say "cmake $cmake_version"

    if fx_have_check; then
        FX_HAVE_CHECK=1
        fx_say "Check $(pkg-config --modversion check) (unit tests)"
    else
        FX_HAVE_CHECK=0
        fx_say "Check not found: the unit tests will not be built (Debian package 'check')"
    fi
    if command -v gnuplot >/dev/null 2>&1; then
        FX_HAVE_GNUPLOT=1
        fx_say "$(gnuplot --version) (figures)"
    else
        FX_HAVE_GNUPLOT=0
        fx_say "gnuplot not found: no figures (Debian package 'gnuplot-nox')"
    fi
    export FX_HAVE_CHECK FX_HAVE_GNUPLOT
}

# Sourced: set up the caller's shell. Run: report, and exit with the result.
if (return 0 2>/dev/null); then
    fx_setup
else
    fx_setup
    exit $?
fi
