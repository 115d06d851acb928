#!/usr/bin/env python3
"""test_binding.py — python/flash_explorer on the CPU, python3 alone (no torch, no GPU).

The module loads libflash_explorer.so ($FLASH_EXPLORER_LIB, which CTest sets) through
ctypes; the stages and their capabilities round-trip; a case outside a stage's caps raises
UnsupportedError with the stage program's line. Where torch is installed, CPU tensors are
refused with TypeError; where it is not, calling a stage says that torch is needed.
Exit 0 when every check holds, 1 otherwise (the failures are printed).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
import flash_explorer as fx  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def raises(exc_type, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 — the wrong kind is a failure too
        failures.append(f"{fn.__name__}: {type(e).__name__} ({e}), not {exc_type.__name__}")
        print("FAIL:", failures[-1])
        return None
    failures.append(f"{fn.__name__}: no {exc_type.__name__}")
    print("FAIL:", failures[-1])
    return None


ids = ["01_naive", "02_flash1", "03_flash2", "04_tma_mbarrier", "05_wgmma",
       "06_warp_specialized", "07_pingpong", "08_intra_wg_overlap", "09_persistent", "10_fp8"]
expect(fx.stages() == ids, f"stages() is {fx.stages()}")

for sid in ids:
    c = fx.capabilities(sid)
    n = int(sid[:2])
    expect(c["id"] == sid, f"{sid}: id {c['id']}")
    want_dtypes = ["e4m3"] if n == 10 else ["bf16", "fp16"]
    expect(c["dtypes"] == want_dtypes, f"{sid}: dtypes {c['dtypes']}")
    expect(c["causal"] and c["gqa"], f"{sid}: causal {c['causal']} gqa {c['gqa']}")
    expect(c["backward"] == (n <= 3), f"{sid}: backward {c['backward']}")
    expect(c["varlen"] == (n == 9), f"{sid}: varlen {c['varlen']}")
    expect(c["sm90a_only"] == (n >= 4), f"{sid}: sm90a_only {c['sm90a_only']}")
    want_dims = {1: None, 2: None, 3: [64, 96, 128, 256], 9: [64, 96, 128, 192, 256]}.get(
        n, [64, 128, 256])
    expect(c["head_dims"] == want_dims, f"{sid}: head_dims {c['head_dims']}")
    if want_dims is None:
        expect((c["head_dim_multiple"], c["head_dim_max"]) == (8, 256),
               f"{sid}: head_dim multiples of {c['head_dim_multiple']} to {c['head_dim_max']}")
    expect(len(c["summary"]) > 10, f"{sid}: summary {c['summary']!r}")
    want_pairs = [(192, 128)] if n == 9 else []
    expect(c["head_dim_v_pairs"] == want_pairs, f"{sid}: head_dim_v_pairs {c['head_dim_v_pairs']}")

msg = raises(fx.UnsupportedError, fx.capabilities, "99_none")
expect(msg is not None and msg.startswith("flash-explorer: no stage '99_none' (stages: 01_naive"),
       f"unknown stage: {msg!r}")

# The line tests/CMakeLists.txt's cli_refuses_unsupported_head_dim expects of the program.
msg = raises(fx.UnsupportedError, fx.check, "08_intra_wg_overlap", 1, 128, 128, 2, 2, 80)
expect(msg == "stage_08_intra_wg_overlap: head_dim 80 is not supported (head_dim: 64/128/256)",
       f"head_dim 80: {msg!r}")
msg = raises(fx.UnsupportedError, fx.check, "02_flash1", 1, 64, 64, 6, 4, 64)
expect(msg == "stage_02_flash1: heads_q (6) is not a multiple of heads_kv (4)", f"heads: {msg!r}")
msg = raises(fx.UnsupportedError, fx.check, "05_wgmma", 1, 64, 64, 2, 2, 64, backward=True)
expect(msg == "stage_05_wgmma: there is no backward", f"backward: {msg!r}")
msg = raises(fx.UnsupportedError, fx.check, "03_flash2", 1, 64, 64, 2, 2, 64, dtype="fp8")
expect(msg == "flash-explorer: dtype 'fp8' is not one of bf16, fp16", f"dtype: {msg!r}")
fx.check("08_intra_wg_overlap", 2, 1000, 1000, 16, 4, 128, dtype="fp16", causal=True)
fx.check("09_persistent", 2, 1000, 1000, 16, 4, 192, causal=True, head_dim_v=128)
# FlashAttention's softmax_scale=0.0 is a scale of 0, not the default: refused, never replaced.
msg = raises(fx.UnsupportedError, fx.check, "03_flash2", 1, 64, 64, 2, 2, 64, softmax_scale=0.0)
expect(msg is not None and "softmax_scale (0.0) must be positive" in msg, f"scale 0: {msg!r}")
# A size past the C API's 32-bit ints is refused, not wrapped (2^32 + 8 keys as 8).
msg = raises(fx.UnsupportedError, fx.check, "03_flash2", 1, 64, 2**32 + 8, 2, 2, 64)
expect(msg is not None and "seqlen_k (4294967304) is outside" in msg, f"2^32+8: {msg!r}")
msg = raises(fx.UnsupportedError, fx.check, "08_intra_wg_overlap", 1, 64, 64, 2, 2, 128,
             head_dim_v=64)
expect(msg == "stage_08_intra_wg_overlap: head_dim_v 64 with head_dim 128 is not supported "
       "(head_dim_v: head_dim only)", f"head_dim_v: {msg!r}")

try:
    import torch
except ImportError:
    torch = None
if torch is None:
    msg = raises(fx.FlashExplorerError, fx.flash_attn_func, None, None, None)
    expect(msg is not None and "needs PyTorch" in msg, f"without torch: {msg!r}")
else:
    q = torch.zeros(1, 64, 2, 64, dtype=torch.bfloat16)
    msg = raises(TypeError, fx.flash_attn_func, q, q, q)
    expect(msg is not None and "not a CUDA device" in msg, f"CPU tensors: {msg!r}")

if failures:
    print(f"test_binding.py: {len(failures)} failed")
    sys.exit(1)
print(f"test_binding.py: all checks passed (library {fx.library_path()}, "
      f"torch {'absent' if torch is None else torch.__version__})")
