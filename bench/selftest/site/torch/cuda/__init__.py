"""torch.cuda of the stand-in (see torch/__init__.py)."""

import os
import time

import torch


def is_available():
    return not os.environ.get("FAKE_TORCH_NO_CUDA")


class _Props:
    name = "NVIDIA H200"
    multi_processor_count = 132
    L2_cache_size = 60 << 20
    pci_domain_id = 0
    pci_bus_id = 0x1b
    pci_device_id = 0


def get_device_properties(i):
    return _Props()


def get_device_name(i):
    return _Props.name


def synchronize():
    while time.perf_counter() < torch._gpu.free_at:
        pass


def empty_cache():
    pass


def _sleep(cycles):
    """Spins this many SM cycles at the simulated clock."""
    torch._busy(3)
    torch._gpu.enqueue(cycles / (torch._gpu.clock_mhz * 1e6))


class Event:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        torch._busy(2)
        self.t = torch._gpu.enqueue(0.0)

    def query(self):
        return time.perf_counter() >= self.t

    def synchronize(self):
        while time.perf_counter() < self.t:
            pass

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3
