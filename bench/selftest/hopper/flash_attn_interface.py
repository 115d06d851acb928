"""A stand-in for an older public hopper/ build's flash_attn_interface (bench/selftest.sh):
flash_attn_func returns (out, softmax_lse) and takes no descale, num_splits or pack_gqa
arguments; it has a backward."""

import torch

__version__ = "3.0.0b1"


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, deterministic=False):
    b, sq, h, d = q.shape
    torch._busy(40)
    seconds = 4.0 * b * h * d * sq * k.shape[1] / (2 if causal else 1) / 650e12
    torch._gpu.enqueue(seconds)
    out = torch.Tensor(q.shape, q.dtype)
    if q.requires_grad:
        out._fwd_seconds = seconds
        out._bwd_slowdown = 1.2
    return out, torch.Tensor((b, h, sq), torch.float32)
