#!/usr/bin/env bash
# run_gpu.sh — the Python binding's GPU tests (tests/python/test_gpu.py, pytest): its results
# against the stage programs' bit for bit and against a PyTorch reference by FlashAttention's
# tolerance rule. Needs the programs, the library, and python3 with torch, numpy and pytest.
#
#   tests/python/run_gpu.sh BIN_DIR LIB [pytest arguments]
#
# BIN_DIR holds the programs (build/bin), LIB is libflash_explorer.so (build/lib/...).
# Exit 77 (a skip) when python3 lacks torch, numpy or pytest, or torch sees no CUDA device;
# with FX_REQUIRE_GPU set to anything but "" or "0" that is a failure (1) instead.
# Otherwise pytest's exit status (0: every test passed).
set -euo pipefail
(($# >= 2)) || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }
bin_dir=$1 lib=$2
shift 2
[[ -d $bin_dir ]] || { echo "run_gpu.sh: $bin_dir is not a directory" >&2; exit 2; }
[[ -f $lib ]] || { echo "run_gpu.sh: no library $lib" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
set +e
why=$(python3 - <<'PY' 2>&1
import importlib.util, sys
missing = [m for m in ("torch", "numpy", "pytest") if importlib.util.find_spec(m) is None]
if missing:
    print("python3 lacks " + ", ".join(missing)); sys.exit(77)
import torch
if not torch.cuda.is_available():
    print("torch sees no CUDA device"); sys.exit(77)
PY
)
rc=$?
set -e
if ((rc != 0)); then
    if [[ -n ${FX_REQUIRE_GPU:-} && ${FX_REQUIRE_GPU} != 0 ]]; then
        echo "run_gpu.sh: FAIL: $why (FX_REQUIRE_GPU is set)" >&2
        exit 1
    fi
    echo "run_gpu.sh: skipped: $why"
    exit 77
fi
FX_BIN=$(cd "$bin_dir" && pwd) FLASH_EXPLORER_LIB=$(cd "$(dirname "$lib")" && pwd)/${lib##*/} \
    exec python3 -m pytest -q -rs -p no:cacheprovider "$here/test_gpu.py" "$@"
