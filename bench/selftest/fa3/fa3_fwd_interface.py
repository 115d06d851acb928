"""A stand-in for fa3-fwd 0.0.3's fa3_fwd_interface (bench/selftest.sh): the same
signatures for flash_attn_func, flash_attn_varlen_func and flash_attn_with_kvcache, a
simulated cost, and the package's own quirk: it reads its build switches as
`flash_attn_config`, which only exists once bench/peers.py aliases it to fa3_fwd_config
(the real module reads it at its first call; this one at import, to test the alias).
FAKE_FA3_HOST_AFTER_US=N: the wrapper's host work after its kernel, N us (the GPU then
waits for the host inside the timed interval when N outlasts the kernel)."""

import os

import torch
from flash_attn_config import CONFIG  # fails unless aliased, as the real one does

_FLAGS = CONFIG["build_flags"]
RATE = 600e12
_HOST_AFTER_US = float(os.environ.get("FAKE_FA3_HOST_AFTER_US", "0"))


def _pairs(sq, sk, causal):
    if not causal:
        return sq * sk
    i0 = sq - sk if sq > sk else 0
    rows = sq - i0
    first = i0 + sk + 1 - sq
    return rows * (first + sk) // 2


def _run(q, k, causal, rate):
    if q.dtype is torch.float16 and _FLAGS["FLASHATTENTION_DISABLE_FP16"]:
        raise RuntimeError("This flash attention build does not support FP16.")
    b, sq, h, d = q.shape
    sk = k.shape[1]
    torch._busy(50)  # the wrapper's Python: autograd.Function, custom_op dispatch
    seconds = 4.0 * b * h * d * _pairs(sq, sk, causal) / rate
    torch._gpu.enqueue(seconds)
    if _HOST_AFTER_US:
        torch._busy(_HOST_AFTER_US)  # after the launch: not under the spin
    out = torch.Tensor(q.shape, torch.bfloat16)
    if q.requires_grad:
        out._fwd_seconds = seconds
        out._bwd_slowdown = 1.0
    return out


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None,
                    k_descale=None, v_descale=None, window_size=(-1, -1), attention_chunk=0,
                    softcap=0.0, num_splits=1, pack_gqa=None, deterministic=False,
                    sm_margin=0, return_attn_probs=False):
    rate = 2 * RATE if q.dtype is torch.float8_e4m3fn else RATE
    if q.dtype is torch.float8_e4m3fn and q_descale is None:
        raise RuntimeError("fp8 without descale")
    return _run(q, k, causal, rate)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           seqused_q=None, seqused_k=None, softmax_scale=None, causal=False,
                           qv=None, q_descale=None, k_descale=None, v_descale=None,
                           window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                           pack_gqa=None, deterministic=False, sm_margin=0,
                           return_attn_probs=False):
    if q.dtype is torch.float16 and _FLAGS["FLASHATTENTION_DISABLE_FP16"]:
        raise RuntimeError("This flash attention build does not support FP16.")
    assert isinstance(max_seqlen_q, int) and isinstance(max_seqlen_k, int)
    total_q, h, d = q.shape
    cq, ck = cu_seqlens_q.values, cu_seqlens_k.values
    assert cq[-1] == total_q and ck[-1] == k.shape[0] and len(cq) == len(ck)
    used = seqused_k.values if seqused_k is not None else None
    seconds = 0.0
    for b in range(len(cq) - 1):
        sq, sk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        if used is not None:
            sk = used[b]
        assert sq <= max_seqlen_q and sk <= max_seqlen_k
        seconds += 4.0 * h * d * _pairs(sq, sk, causal) / RATE
    torch._busy(60)  # the wrapper's Python
    torch._gpu.enqueue(seconds)
    return torch.Tensor(q.shape, torch.bfloat16)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, page_table=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                            rotary_interleaved=True, scheduler_metadata=None, num_splits=0,
                            pack_gqa=None, sm_margin=0, return_softmax_lse=False):
    assert cache_seqlens is not None
    return _run(q, k_cache, causal, RATE / 8)
