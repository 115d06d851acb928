"""torch.autograd of the stand-in: the backward costs 2.5 times its forward on the GPU."""

import torch


def grad(out, inputs, grad_outputs=None, retain_graph=False):
    if not getattr(out, "_fwd_seconds", None):
        raise RuntimeError("element 0 of tensors does not require grad")
    torch._busy(getattr(out, "_bwd_dispatch_us", 80))
    torch._gpu.enqueue(2.5 * out._fwd_seconds * out._bwd_slowdown)
    return tuple(torch.empty_like(t) for t in inputs)
