"""A stand-in for PyTorch, for bench/selftest.sh on a machine without a GPU: just enough
of torch's API for bench/peers.py, with a simulated GPU stream. Each enqueued operation
runs on the simulated GPU after the one before it, for a time from a simple cost model;
events take the stream's time when the host records them, so a host that enqueues more
slowly than the GPU runs shows up in the timings as on a real GPU (the launch latency
that the spin hides). Host-side dispatch costs are spent by busy-waiting. Not PyTorch:
nothing here computes."""

import os
import time

__version__ = "2.11.0+fake"


class dtype:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __repr__(self):
        return "torch." + self.name


bfloat16 = dtype("bfloat16", 2)
float16 = dtype("float16", 2)
float32 = dtype("float32", 4)
float8_e4m3fn = dtype("float8_e4m3fn", 1)
uint8 = dtype("uint8", 1)
int32 = dtype("int32", 4)
int64 = dtype("int64", 8)


class version:
    cuda = "13.0"


class _Gpu:
    """The simulated stream: when it is free again (host clock, seconds)."""

    def __init__(self):
        self.free_at = 0.0
        self.clock_mhz = float(os.environ.get("FAKE_GPU_MHZ", "1755"))

    def enqueue(self, seconds):
        start = max(time.perf_counter(), self.free_at)
        self.free_at = start + seconds
        return self.free_at


_gpu = _Gpu()


def _busy(us):
    """Host work: dispatch, argument handling."""
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def _shape(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


class Tensor:
    def __init__(self, shape, dtype=float32, requires_grad=False):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.requires_grad = requires_grad

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    def transpose(self, a, b):
        s = list(self.shape)
        s[a], s[b] = s[b], s[a]
        return Tensor(s, self.dtype, self.requires_grad)

    def detach(self):
        return Tensor(self.shape, self.dtype)

    def requires_grad_(self, flag=True):
        self.requires_grad = flag
        return self

    def to(self, dt):
        _gpu.enqueue(2 * self.nbytes() / 3e12)
        return Tensor(self.shape, dt)

    def contiguous(self):
        return self

    def fill_(self, value):
        _busy(5)
        _gpu.enqueue(self.nbytes() / 3e12)
        return self

    def copy_(self, src):
        _busy(5)
        _gpu.enqueue(2 * self.nbytes() / 4.2e12)
        return self


def empty(*shape, dtype=float32, device=None):
    return Tensor(_shape(shape), dtype)


def empty_like(t):
    return Tensor(t.shape, t.dtype)


def randn(*shape, device=None, dtype=float32, generator=None):
    return Tensor(_shape(shape), dtype)


def ones(*shape, device=None, dtype=float32):
    return Tensor(_shape(shape), dtype)


def full(shape, value, dtype=float32, device=None):
    return Tensor(_shape((shape,)), dtype)


def tensor(data, dtype=float32, device=None):
    """A 1-D tensor that keeps its values (the stand-ins of FA3 and nested tensors read them)."""
    t = Tensor((len(data),), dtype)
    t.values = list(data)
    return t


def matmul(a, b, out=None):
    _busy(10)
    m, k = a.shape
    n = b.shape[1]
    _gpu.enqueue(2.0 * m * n * k / 750e12)
    return out if out is not None else Tensor((m, n), a.dtype)


class Generator:
    def __init__(self, device=None):
        pass

    def manual_seed(self, seed):
        return self


from . import cuda  # noqa: E402
from . import backends  # noqa: E402
from . import nn  # noqa: E402
from . import autograd  # noqa: E402
from . import nested  # noqa: E402
