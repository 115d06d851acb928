"""torch.nn.functional of the stand-in: SDPA's cost by backend (host dispatch us, TFLOP/s)."""

import warnings

import torch
from torch.nn import attention

COSTS = {"flash": (30, 300e12), "cudnn": (60, 450e12), "efficient": (20, 130e12)}


def pairs(sq, sk, causal):
    if not causal:
        return sq * sk
    i0 = sq - sk if sq > sk else 0
    rows = sq - i0
    first = i0 + sk + 1 - sq
    return rows * (first + sk) // 2


def scaled_dot_product_attention(q, k, v, is_causal=False, enable_gqa=False):
    backend = attention.current[0]
    if getattr(q, "lengths", None) is not None:  # nested jagged tensors (torch/nested.py)
        if backend == "cudnn":
            warnings.warn("CuDNN attention kernel not used because: nested tensors")
            raise RuntimeError("No available kernel. Aborting execution.")
        dispatch, rate = COSTS[backend]
        # The nested tensors' own dispatch: milliseconds on torch 2.11 (docs/benchmarks.md,
        # "Variable-length batches"), longer than a 1000 us spin.
        torch._busy(dispatch + 2000)
        h, d = q.shape[1], q.shape[3]
        flops = sum(4.0 * h * d * pairs(a, b, is_causal) for a, b in zip(q.lengths, k.lengths))
        torch._gpu.enqueue(flops / rate)
        return torch.Tensor(q.shape, q.dtype)
    b, h, sq, d = q.shape
    sk = k.shape[2]
    if backend == "efficient" and d > 128 and q.requires_grad:
        warnings.warn("Memory efficient kernel not used because: head_dim > 128 with grad")
        raise RuntimeError("No available kernel. Aborting execution.")
    dispatch, rate = COSTS[backend]
    torch._busy(dispatch)
    seconds = 4.0 * b * h * d * pairs(sq, sk, is_causal) / rate
    torch._gpu.enqueue(seconds)
    out = torch.Tensor(q.shape, q.dtype)
    if q.requires_grad:
        out._fwd_seconds = seconds
        out._bwd_slowdown = 1.0
    return out
