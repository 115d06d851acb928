#!/usr/bin/env python3
"""peers.py — the peers of the FA3 sweep, forward and backward, measured on the same GPU in
the same run.

PyTorch's scaled_dot_product_attention with each backend forced through
torch.nn.attention.sdpa_kernel, and FlashAttention-3 itself:

    sdpa_flash      SDPBackend.FLASH_ATTENTION      (FlashAttention-2 inside PyTorch)
    sdpa_cudnn      SDPBackend.CUDNN_ATTENTION      (cuDNN's fused attention)
    sdpa_efficient  SDPBackend.EFFICIENT_ATTENTION  (the memory-efficient kernel)
    fa3             FlashAttention-3's flash_attn_func: the public hopper/ build's
                    `flash_attn_interface` where it imports, else the `fa3-fwd` package
                    (PyPI, 0.0.3: `fa3_fwd_interface`, the hopper/ forward prebuilt for
                    torch 2.10; it imports under torch 2.11 once sys.modules
                    ["flash_attn_config"] is its `fa3_fwd_config`, which this script sets)
    fa3_kvcache     the same FA3's flash_attn_with_kvcache (--kvcache: the decode path,
                    split-KV by --num-splits, PackGQA by --pack-gqa)

and, for a variable-length batch (--seqlens-q), FA3's flash_attn_varlen_func (row fa3) and
SDPA's flash and memory-efficient backends on nested jagged tensors (SDPA itself has no
varlen entry; its cuDNN backend is skipped with a line, below).

and, with --gemm, two reference rows: a bf16 torch.matmul 8192x8192x8192 (torch_matmul,
TFLOP/s) and a device-to-device copy (copy_bw: its `tflops` column holds TB/s, bytes read
plus bytes written over the median time; `seqlen_q` holds the buffer size in MiB).

    bench/peers.py --batch 8 --seqlen 2048 --heads 16 --head-dim 128 [--causal] \\
                   [--direction fwd|bwd|both] [--dtype bf16|fp16|e4m3] [--iters 10] \\
                   [--warmup 3] [--spin-us 1000] [--backends flash,cudnn,efficient,fa3] \\
                   [--csv FILE] [--commit C] [--tag TAG]
    bench/peers.py --batch 1 --seqlen-q 1 --seqlen-k 8192 --heads 32 --heads-kv 8 \\
                   --head-dim 128 --backends fa3,cudnn --kvcache [--num-splits 0] \\
                   [--pack-gqa auto|0|1]                       (decode: FA3's split-KV path)
    bench/peers.py --seqlens-q 128,2048,512 [--seqlens-k 128,4096,512] \\
                   [--seqused-k 128,3000,512] --heads 16 --head-dim 128 [--causal] \\
                   [--backends fa3,flash]              (a variable-length batch: varlen)
    bench/peers.py --gemm [--csv FILE] [--meta FILE]     (the reference rows, once per run)
    bench/peers.py --serve        (bench/sweep.sh: one line of the options above per request)

PyTorch is optional: without it, or without a CUDA device, this prints one line saying
the peers are skipped and exits 0, writing no row. FA3 is optional too: where neither
FA3 module imports, one line says `fa3 skipped` and why, and the SDPA peers still run.
What this FA3 build lacks (fa3-fwd: the backward, paged KV, local attention, fp16 and
column-major V, from its fa3_fwd_config.CONFIG build switches) is skipped with a line.

Timing (as the stage programs time, common/fx_gpu.c fx_time; docs/benchmarks.md, "How
the runners are timed"): `--warmup` untimed calls, then `--iters` calls, each alone:
synchronize, write twice the L2 size to a scratch buffer (the L2 flush), then keep the
GPU busy for `--spin-us` microseconds (torch.cuda._sleep, which spins a number of SM
cycles: the spin is sized at the highest SM clock the GPU reports, so that it lasts at
least that long at any clock), then record the start event, make the call, record the
stop event. The host's work between the flush and the call's first kernel (recording the
event, Python's dispatch of SDPA or of FA3's wrapper: tens of microseconds) then happens
while the GPU spins, and is not timed as kernel time; the flush and the spin stay
outside the interval. After each call the script asks whether the start event had
already passed when the host finished enqueueing the call: if so the GPU waited on the
host inside the interval, and the line says in how many calls (`--spin-us` too short for
this call). `--spin-us 0` is the old method (no spin). The median is reported, with the
minimum and maximum. The SM clock is read through NVML (ctypes, libnvidia-ml.so.1, as
the harness does; nvidia-smi as a fallback; 0 when neither answers) right after the
timed calls. FLOPs by the FA3 convention, counted like fx_flops_forward: 4 * batch *
heads_q * head_dim * (unmasked (i, j) pairs), bottom-right causal, N(N+1)/2 pairs per
slice when seqlen_q = seqlen_k = N.

Inputs: Q, K, V made in the repository's layout [batch, seqlen, heads, head_dim]
(torch.randn, N(0, 1)); SDPA gets them transposed to [batch, heads, seqlen, head_dim] (a
view, no copy), FA3 as they are (its own layout). GQA (--heads-kv below --heads): SDPA
with enable_gqa. SDPA's is_causal aligns the mask top-left, the harness and FA3
bottom-right: they agree when seqlen_q = seqlen_k, and SDPA is skipped for causal with
seqlen_q != seqlen_k. e4m3 (--dtype e4m3): FA3 only, Q, K, V drawn in bf16 and converted,
with descale factors of 1 (q_descale, k_descale, v_descale: [batch, heads_kv] fp32),
bf16 output.

A variable-length batch (--seqlens-q L0,L1,...; FlashAttention's varlen layout, as the
stage programs take it: docs/harness.md, "Variable-length batches"): the sequences packed
along the rows without padding, Q [total_q, heads, head_dim], K and V [total_k, heads_kv,
head_dim], cu_seqlens_q/k the prefix sums of --seqlens-q/-k from 0 (int32, on the GPU,
made once outside the timed calls), --seqused-k the keys each sequence attends (the first
N of its keys). FA3: flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k,
max_seqlen_q, max_seqlen_k, seqused_k=..., causal=...), softmax_scale its default
1/sqrt(head_dim) (the harness's), causal bottom-right in each sequence. SDPA has no varlen
entry, but takes nested jagged tensors: sdpa_flash and sdpa_efficient get Q, K, V as nested
jagged tensors over the same packed buffers (torch.nested.nested_tensor_from_jagged with
the offsets and the min/max lengths given, so that SDPA need not read them back from the
GPU), transposed to [batch, heads, j, head_dim], SDPA with is_causal under the backend:
PyTorch's FlashAttention-2 varlen kernel, and the memory-efficient one. Their Python
dispatch is slow, milliseconds of host time a call without waiting for the GPU
(docs/benchmarks.md, "Variable-length batches"), so bench/varlen.sh spins 10 ms. Skipped for causal
when a sequence has seqlen_q != seqlen_k (top-left against bottom-right), and with
--seqused-k (nested tensors have none); GQA: SDPA's nested path refuses it (a line with
its reason). sdpa_cudnn is skipped: its nested-tensor path
waits for the GPU inside the call (measured: docs/benchmarks.md), so no spin keeps its
host time out of the interval. The row: batch = the number of sequences,
seqlen_q and seqlen_k = the largest lengths (keys attended, with --seqused-k; or
--seqlen-q/--seqlen-k, FA's max_seqlen, at least every length), as the stage programs
write a varlen row; FLOPs the sum over the sequences of 4 * heads_q * head_dim *
(unmasked pairs), bottom-right causal per sequence (fx_flops_forward's). Forward only: no
stage has a varlen backward yet.

--direction bwd times the backward alone, as the stage programs' --bench --bwd does
(fx_flops_backward: 2.5 times the forward's exact count, five GEMMs instead of two):
per backend, Q, K and V (the same layout) are made leaves with requires_grad, the
forward runs once, untimed, and then each timed call is
torch.autograd.grad(out, (q, k, v), grad_outputs=dO, retain_graph=True), with dO drawn
like Q in the same layout: --warmup untimed calls, --iters timed ones, each after the
flush and the spin, the median. A backend whose forward or backward raises prints a "bwd
skipped:" line and writes no row. --direction both does the forward, then the backward,
for each backend; the default, fwd, is the forward alone.

Rows go to --csv in the columns of the file's header (FX_CSV_HEADER of common/fx_main.h,
written here when the file is new): stage = the peer's name (with --tag T: name@T, a
marked row that the tables and figures leave out unless asked), direction = fwd or bwd
(ref for the two reference rows), commit = --commit, check = peer, the error columns
empty. --meta appends key=value lines: versions (torch, CUDA, cuDNN, driver, FA3 and its
build switches) and the spin's sizing. Stdlib and torch only; Python 3.8 or newer.
"""

import argparse
import ctypes
import datetime
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
import warnings

# The stage programs' CSV columns (FX_CSV_HEADER, common/fx_main.h). Used only for a new
# file: rows appended to an existing file follow that file's own header.
FX_CSV_HEADER = (
    "stage,direction,device,sm_count,sm_clock_mhz,commit,date,batch,seqlen_q,seqlen_k,"
    "heads_q,heads_kv,head_dim,dtype,causal,repeats,ms,ms_min,ms_max,tflops,"
    "err_ref_max,err_prev_max,prev_stage,check,head_dim_v"
)

GEMM_SIZE = 8192           # torch_matmul: M = N = K (the DESIGN.md reference line)
COPY_BYTES = 1 << 30       # copy_bw: 1 GiB read and 1 GiB written per call
DEFAULT_L2_BYTES = 64 << 20  # the harness's fallback when the L2 size is unknown
NVML_CLOCK_SM = 1
NVML_SUCCESS = 0

# The spin before each timed call, in microseconds (docs/benchmarks.md, "How the runners
# are timed"). It must outlast the host's work from the spin's enqueue to the call's
# first kernel: recording the start event and Python's dispatch of SDPA, of FA3's
# wrapper (an autograd Function around a torch.library custom op) or of the autograd
# engine for a backward. On the lent H200 that took FA3's wrapper up to about 1.1 ms at
# some calls (2026-12-01); on 2026-12-02, 200 us was too short at 66 results of one run,
# FA3 reading 3-4 % low at seqlen 16k; at 1000 us 4 of about 1550 were (1 or 2 of 10 calls
# each) and every peer's spread at head_dim 128 was at most 1.7 % of its median. Every
# result line reports the longest enqueue it saw and whether any call outlasted the spin,
# so a too-short spin shows. A longer one costs only wall time, 1 ms per timed call (10 ms
# per runner and point at --iters 10; warm-up calls are not spun), nothing of the
# measurement.
DEFAULT_SPIN_US = 1000
MAX_SPIN_US = 100000  # the stage programs' limit (FX_MAX_SPIN_US): 0.1 s per timed call
# Where no maximum SM clock can be read, cycles are counted at this clock: above the
# boost clock of every current NVIDIA GPU (H200: 1980 MHz), so the spin only gets longer.
FALLBACK_MAX_MHZ = 3000

SDPA_PEERS = (
    ("flash", "sdpa_flash", "FLASH_ATTENTION"),
    ("cudnn", "sdpa_cudnn", "CUDNN_ATTENTION"),
    ("efficient", "sdpa_efficient", "EFFICIENT_ATTENTION"),
)
BACKENDS = ("flash", "cudnn", "efficient", "fa3")
DEFAULT_BACKENDS = ",".join(BACKENDS)

# fa3-fwd's build switches (fa3_fwd_config.CONFIG["build_flags"]) and what each takes away.
FA3_SWITCHES = (
    ("FLASHATTENTION_DISABLE_BACKWARD", True, "backward"),
    ("FLASHATTENTION_DISABLE_PAGEDKV", True, "paged KV"),
    ("FLASHATTENTION_DISABLE_LOCAL", True, "local attention"),
    ("FLASHATTENTION_DISABLE_FP16", True, "fp16"),
    ("FLASHATTENTION_DISABLE_FP8", True, "fp8"),
    ("FLASHATTENTION_DISABLE_SPLIT", True, "split-KV"),
    ("FLASHATTENTION_DISABLE_PACKGQA", True, "PackGQA"),
    ("FLASHATTENTION_DISABLE_VARLEN", True, "varlen"),
    ("FLASHATTENTION_DISABLE_APPENDKV", True, "appending to the KV cache"),
    ("FLASHATTENTION_DISABLE_SOFTCAP", True, "softcap"),
    ("FLASHATTENTION_DISABLE_CLUSTER", True, "clusters"),
    ("FLASHATTENTION_ENABLE_VCOLMAJOR", False, "column-major V"),
)


def say(line):
    print(line, flush=True)


def parser(cls=argparse.ArgumentParser, prog="peers.py"):
    p = cls(
        prog=prog,
        description="PyTorch SDPA backends and FlashAttention-3 (and a GEMM and a copy) "
                    "timed like the stage programs.",
    )
    p.add_argument("--batch", type=int)
    p.add_argument("--seqlen", type=int, help="seqlen_q = seqlen_k")
    p.add_argument("--seqlen-q", type=int, help="queries (default --seqlen)")
    p.add_argument("--seqlen-k", type=int, help="keys (default --seqlen)")
    p.add_argument("--heads", type=int, help="query heads")
    p.add_argument("--heads-kv", type=int, help="K/V heads (GQA/MQA; default --heads)")
    p.add_argument("--head-dim", type=int)
    p.add_argument("--causal", type=int, nargs="?", const=1, default=0, choices=(0, 1),
                   help="--causal or --causal 1: causal; --causal 0 (default): not")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "e4m3"),
                   help="e4m3: FA3 only (descale factors 1, bf16 output)")
    p.add_argument("--direction", default="fwd", choices=("fwd", "bwd", "both"),
                   help="time the forward (default), the backward alone, or both")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--spin-us", type=float, default=DEFAULT_SPIN_US,
                   help="keep the GPU busy this many microseconds after the L2 flush, "
                        "while the host records the start event and enqueues the call "
                        "(default %d; 0: no spin, the old method)" % DEFAULT_SPIN_US)
    p.add_argument("--csv", help="append rows to this file")
    p.add_argument("--commit", default=os.environ.get("FX_GIT_COMMIT", "unknown"),
                   help="the repository commit the rows record (default: $FX_GIT_COMMIT)")
    p.add_argument("--tag", default="",
                   help="mark the rows: stage column NAME@TAG (left out of tables and "
                        "figures unless asked; bench/compare.sh CSV TAG compares them)")
    p.add_argument("--backends", default=DEFAULT_BACKENDS,
                   help="comma-separated subset of %s, timed in this order" % DEFAULT_BACKENDS)
    p.add_argument("--kvcache", action="store_true",
                   help="FA3 through flash_attn_with_kvcache (the decode path; row fa3_kvcache)")
    p.add_argument("--num-splits", type=int,
                   help="FA3's num_splits (0: its heuristic; default 0 with --kvcache, "
                        "else the interface's own, 1)")
    p.add_argument("--pack-gqa", default="auto", choices=("auto", "0", "1"),
                   help="FA3's pack_gqa (auto: its heuristic)")
    p.add_argument("--seqlens-q",
                   help="a variable-length batch (varlen): each sequence's query rows, "
                        "comma-separated; FA3's flash_attn_varlen_func")
    p.add_argument("--seqlens-k", help="each sequence's keys (default: --seqlens-q)")
    p.add_argument("--seqused-k",
                   help="the keys each sequence attends, the first N of its --seqlens-k "
                        "(FA3's seqused_k; default all)")
    p.add_argument("--gemm", action="store_true",
                   help="also time the torch_matmul and copy_bw reference rows")
    p.add_argument("--meta", help="append the peers' versions (key=value lines) to this file")
    p.add_argument("--serve", action="store_true",
                   help="read one request (these options) per stdin line; "
                        "answer with lines ending in 'peers: end'")
    return p


# ----------------------------------------------------------------------------------------
# Counting, as common/fx_problem.c counts.

def unmasked_pairs(seqlen_q, seqlen_k, causal):
    """fx_problem.c unmasked_pairs(): bottom-right causal; N(N+1)/2 when sq = sk = N."""
    if not causal:
        return seqlen_q * seqlen_k
    i0 = seqlen_q - seqlen_k if seqlen_q > seqlen_k else 0
    rows = seqlen_q - i0
    first = i0 + seqlen_k + 1 - seqlen_q
    return rows * (first + seqlen_k) // 2


def flops_forward(batch, heads, head_dim, seqlen_q, seqlen_k, causal):
    return 4.0 * batch * heads * head_dim * unmasked_pairs(seqlen_q, seqlen_k, causal)


def flops_backward(batch, heads, head_dim, seqlen_q, seqlen_k, causal):
    """fx_flops_backward: five GEMMs instead of two (FA3 convention), 2.5x the forward."""
    return 2.5 * flops_forward(batch, heads, head_dim, seqlen_q, seqlen_k, causal)


VARLEN_MAX_SEQS = 1024   # FX_VARLEN_MAX_SEQS (common/fx_problem.h)
INDEX_LIMIT = 2 ** 31 - 1  # rows a varlen batch may pack (the harness's 32-bit index limit)


def parse_lengths(text, opt):
    """A comma list of lengths >= 0, as the stage programs take --seqlens-q (fx_options.c);
    raises ValueError in their words."""
    items = text.split(",")
    lengths = []
    for b, item in enumerate(items):
        item = item.strip()
        if not item.isdigit():
            raise ValueError("%s: '%s' is not a comma list of lengths (sequence %d's is '%s')"
                             % (opt, text, b, item))
        lengths.append(int(item))
    return lengths


def prefix_sums(lengths):
    """cu_seqlens: 0, then the running sums (batch + 1 offsets)."""
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return cu


def flops_forward_varlen(heads, head_dim, seqlens_q, seqlens_k, causal):
    """fx_flops_forward of a varlen batch: each sequence's unmasked pairs, bottom-right
    causal per sequence (seqlens_k: the keys each attends)."""
    return sum(flops_forward(1, heads, head_dim, sq, sk, causal)
               for sq, sk in zip(seqlens_q, seqlens_k))


def spin_cycles(spin_us, max_mhz):
    """SM cycles that last at least spin_us at every clock up to max_mhz (us x MHz)."""
    if spin_us <= 0:
        return 0
    return int(math.ceil(spin_us * max_mhz))


# ----------------------------------------------------------------------------------------
# The SM clock: NVML through ctypes (the harness reads it through dlopen), by PCI bus id.

class SmClock:
    def __init__(self, props):
        self.lib = None
        self.handle = None
        self.bus = None
        dom = getattr(props, "pci_domain_id", None)
        bus = getattr(props, "pci_bus_id", None)
        dev = getattr(props, "pci_device_id", None)
        if dom is not None and bus is not None and dev is not None:
            # cudaDeviceGetPCIBusId's form, which NVML accepts.
            self.bus = "%04x:%02x:%02x.0" % (dom, bus, dev)
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != NVML_SUCCESS:
                return
            handle = ctypes.c_void_p()
            if self.bus is not None:
                rc = lib.nvmlDeviceGetHandleByPciBusId_v2(self.bus.encode(), ctypes.byref(handle))
            else:
                count = ctypes.c_uint()
                if (lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != NVML_SUCCESS
                        or count.value != 1):
                    return  # several GPUs and no bus id to tell them apart
                rc = lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle))
            if rc == NVML_SUCCESS:
                self.lib, self.handle = lib, handle
        except (OSError, AttributeError):
            self.lib = None

    def _smi(self, field):
        cmd = ["nvidia-smi", "--query-gpu=" + field, "--format=csv,noheader,nounits"]
        if self.bus is not None:
            cmd += ["--id=" + self.bus]
        try:
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 universal_newlines=True, timeout=10).stdout.split()
            if len(out) == 1 and out[0].isdigit():
                return int(out[0])
        except (OSError, subprocess.SubprocessError):
            pass
        return 0

    def mhz(self):
        if self.lib is not None:
            value = ctypes.c_uint()
            if self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM,
                                               ctypes.byref(value)) == NVML_SUCCESS:
                return int(value.value)
        return self._smi("clocks.sm")

    def max_mhz(self):
        """(the highest SM clock this GPU reports, where it came from)."""
        if self.lib is not None:
            value = ctypes.c_uint()
            try:
                rc = self.lib.nvmlDeviceGetMaxClockInfo(self.handle, NVML_CLOCK_SM,
                                                        ctypes.byref(value))
            except AttributeError:
                rc = -1
            if rc == NVML_SUCCESS and value.value > 0:
                return int(value.value), "NVML nvmlDeviceGetMaxClockInfo"
        mhz = self._smi("clocks.max.sm")
        if mhz > 0:
            return mhz, "nvidia-smi clocks.max.sm"
        return FALLBACK_MAX_MHZ, "not readable: %d MHz assumed (above any current GPU's)" \
            % FALLBACK_MAX_MHZ

    def driver(self):
        if self.lib is None:
            return "unknown"
        buf = ctypes.create_string_buffer(96)
        if self.lib.nvmlSystemGetDriverVersion(buf, 96) == NVML_SUCCESS:
            return buf.value.decode(errors="replace")
        return "unknown"


# ----------------------------------------------------------------------------------------
# FlashAttention-3: the public hopper/ build, else the fa3-fwd package.

def one_line(exc):
    text = " ".join(str(exc).split())
    return "%s: %s" % (type(exc).__name__, text[:300]) if text else type(exc).__name__


def dist_version(names):
    """The installed version of the first of these distributions, or None."""
    try:
        from importlib import metadata
    except ImportError:  # Python 3.7
        return None
    for name in names:
        try:
            return metadata.version(name)
        except Exception:  # PackageNotFoundError, or a broken dist-info
            continue
    return None


class FA3:
    """The FA3 module in use, what it is, and what its build switches leave out."""

    def __init__(self, module, api, version, flags, note):
        self.m = module
        self.api = api            # "flash_attn_interface" or "fa3_fwd_interface"
        self.version = version
        self.flags = flags        # CONFIG["build_flags"], {} when the build has none
        self.note = note

    @classmethod
    def open(cls):
        """(FA3, None) or (None, the reason it is skipped). Call after importing torch."""
        reasons = []
        try:
            import flash_attn_interface as m  # the public hopper/ build
            flags = {}
            try:
                import flash_attn_config  # newer hopper/ builds write one
                flags = dict(getattr(flash_attn_config, "CONFIG", {}).get("build_flags", {}))
            except Exception:
                pass
            version = (dist_version(("flash_attn_3", "flash-attn-3", "flashattn-hopper",
                                     "flashattn_hopper", "flash_attn"))
                       or getattr(m, "__version__", None) or "unknown")
            return cls(m, "flash_attn_interface", version, flags,
                       "the hopper/ build (%s)" % getattr(m, "__file__", "?")), None
        except ImportError as exc:
            if getattr(exc, "name", None) == "flash_attn_interface":
                reasons.append("flash_attn_interface not installed")
            else:
                reasons.append("flash_attn_interface failed to import (%s)" % one_line(exc))
        except Exception as exc:  # an ABI mismatch raises OSError or RuntimeError
            reasons.append("flash_attn_interface failed to import (%s)" % one_line(exc))
        try:
            import fa3_fwd_config
            # fa3_fwd_interface reads its switches as `flash_attn_config` (the hopper/
            # name); the package ships them as fa3_fwd_config.
            sys.modules["flash_attn_config"] = fa3_fwd_config
            import fa3_fwd_interface as m
            flags = dict(getattr(fa3_fwd_config, "CONFIG", {}).get("build_flags", {}))
            version = dist_version(("fa3-fwd", "fa3_fwd")) or "unknown"
            return cls(m, "fa3_fwd_interface", version, flags,
                       "the fa3-fwd package (%s; flash_attn_config = fa3_fwd_config)"
                       % getattr(m, "__file__", "?")), None
        except ImportError as exc:
            if getattr(exc, "name", None) in ("fa3_fwd_config", "fa3_fwd_interface"):
                reasons.append("fa3-fwd not installed (python3 -m pip install fa3-fwd==0.0.3)")
            else:
                reasons.append("fa3_fwd_interface failed to import (%s)" % one_line(exc))
        except Exception as exc:
            reasons.append("fa3_fwd_interface failed to import (%s)" % one_line(exc))
        return None, "; ".join(reasons)

    def switches_on(self):
        return sorted(k for k, v in self.flags.items() if v)

    def lacks(self):
        """What the build switches take away, in words ([] when unknown or nothing)."""
        return [what for key, off_when, what in FA3_SWITCHES
                if key in self.flags and bool(self.flags[key]) == off_when]

    def lacks_feature(self, key):
        for k, off_when, what in FA3_SWITCHES:
            if k == key and k in self.flags and bool(self.flags[k]) == off_when:
                return "this FA3 build has no %s (%s, %s)" % (what, self.api,
                                                              "%s=%s" % (k, self.flags[k]))
        return None

    def versions(self):
        return [
            ("fa3", "%s %s from %s" % (self.api, self.version, self.note)),
            ("fa3_api", self.api),
            ("fa3_version", self.version),
            ("fa3_build_switches_on", ",".join(self.switches_on()) or "none recorded"),
            ("fa3_lacks", ", ".join(self.lacks()) or "nothing its switches say"),
        ]

    def accepts(self, fn, *names):
        """Whether fn takes these keyword arguments (older hopper/ builds lack some)."""
        try:
            import inspect
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return True
        if any(p.kind == p.VAR_KEYWORD for p in params.values()):
            return True
        return all(n in params for n in names)


# ----------------------------------------------------------------------------------------
# The measuring context: torch, the device, the flush buffer, the spin.

class Peers:
    def __init__(self, torch):
        self.torch = torch
        self.props = torch.cuda.get_device_properties(0)
        self.device = torch.cuda.get_device_name(0).replace(",", " ")
        self.sm_count = self.props.multi_processor_count
        l2 = getattr(self.props, "L2_cache_size", 0) or DEFAULT_L2_BYTES
        self.flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
        self.clock = SmClock(self.props)
        self.max_mhz, self.max_mhz_source = self.clock.max_mhz()
        self.has_sleep = hasattr(torch.cuda, "_sleep")
        self.fa3, self.fa3_why = FA3.open()
        self.fa3_said = False  # the skip line is said once per process

    def versions(self):
        t = self.torch
        v = t.backends.cudnn.version() if t.backends.cudnn.is_available() else None
        if v is None:
            cudnn = "none"
        elif v >= 90000:  # cuDNN 9: MAJOR*10000 + MINOR*100 + PATCH
            cudnn = "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)
        else:             # cuDNN 8: MAJOR*1000 + MINOR*100 + PATCH
            cudnn = "%d.%d.%d" % (v // 1000, v // 100 % 10, v % 100)
        rows = [
            ("torch", t.__version__),
            ("torch_cuda", str(t.version.cuda)),
            ("cudnn", "%s (%s)" % (cudnn, v)),
            ("device", self.device),
            ("sm_count", str(self.sm_count)),
            ("l2_bytes", str(getattr(self.props, "L2_cache_size", 0))),
            ("driver", self.clock.driver()),
            ("spin_max_sm_clock_mhz", "%d (%s)" % (self.max_mhz, self.max_mhz_source)),
            ("spin_method", "torch.cuda._sleep(ceil(spin_us x %d)) after the flush, before "
                            "the start event" % self.max_mhz if self.has_sleep else
                            "none: this PyTorch has no torch.cuda._sleep (no spin)"),
        ]
        if self.fa3 is not None:
            rows += self.fa3.versions()
        else:
            rows.append(("fa3", "skipped: " + self.fa3_why))
        return rows

    def time(self, fn, warmup, iters, spin_us):
        """fx_time: warm-up, then each call alone between two events, after the L2 flush
        and a spin of spin_us; returns (median, min, max ms, SM MHz, calls in which the
        GPU had passed the start event when the call returned, the longest time from the
        start event's record to the call's return in us, calls in which the GPU had
        reached the stop event as soon as the host recorded it)."""
        cuda = self.torch.cuda
        cycles = spin_cycles(spin_us, self.max_mhz) if self.has_sleep else 0
        for _ in range(warmup):
            fn()
        start = cuda.Event(enable_timing=True)
        stop = cuda.Event(enable_timing=True)
        ms = []
        late = 0
        idle_in = 0
        enqueue_us = 0.0
        for r in range(iters):
            cuda.synchronize()
            self.flush.fill_(r & 0xFF)   # the L2 flush, before the interval
            if cycles:
                cuda._sleep(cycles)      # the GPU busy while the host enqueues what follows
            t0 = time.perf_counter()
            start.record()
            fn()
            t1 = time.perf_counter()
            # Asked as soon as the call returns: had the GPU passed the start event? Then
            # the spin ended before the host was done with the call, and host time may be
            # inside the interval (before the first kernel, or between kernels). Asked any
            # later, the question would count host time that comes after the call too.
            started = start.query()
            stop.record()
            # Asked at once: the GPU had done the call's work and reached the stop event
            # before the host recorded it, so it waited for the host, at least from the
            # end of the call's last kernel, inside the interval.
            stop_done = stop.query()
            if started:
                late += 1
            if stop_done:
                idle_in += 1
            stop.synchronize()
            ms.append(start.elapsed_time(stop))
            enqueue_us = max(enqueue_us, (t1 - t0) * 1e6)
        mhz = self.clock.mhz()  # right after the timed calls, as the harness reads it
        return statistics.median(ms), min(ms), max(ms), mhz, late, enqueue_us, idle_in


# ----------------------------------------------------------------------------------------
# Rows.

def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def append_row(path, fields):
    """Appends one row in the column order of the file's header (written when new)."""
    if not path:
        return
    header = ""
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path) as f:
            header = f.readline().strip()
    with open(path, "a") as f:
        if not header:
            header = FX_CSV_HEADER
            f.write(header + "\n")
        f.write(",".join(str(fields.get(c, "")) for c in header.split(",")) + "\n")


def row(ctx, args, stage, direction, problem, timing, rate):
    ms, ms_min, ms_max, mhz = timing[:4]
    fields = {
        "stage": stage + ("@" + args.tag if args.tag else ""), "direction": direction,
        "device": ctx.device, "sm_count": ctx.sm_count, "sm_clock_mhz": mhz,
        "commit": args.commit, "date": utc_now(), "repeats": args.iters,
        "ms": "%.5f" % ms, "ms_min": "%.5f" % ms_min, "ms_max": "%.5f" % ms_max,
        "tflops": "%.2f" % rate, "err_ref_max": "", "err_prev_max": "", "prev_stage": "",
        "check": "peer",
    }
    fields.update(problem)
    fields.setdefault("head_dim_v", fields.get("head_dim", ""))  # the peers' V is Q's width
    append_row(args.csv, fields)


def timing_note(args, timing):
    """The spin's part of a result line: the spin, the longest enqueue, late calls, calls
    in which the GPU waited for the host before the call returned."""
    late, enqueue_us, idle_in = timing[4], timing[5], timing[6]
    text = "  spin %g us, enqueue <= %.0f us" % (args.spin_us, enqueue_us)
    if late:
        text += ", GPU idle at enqueue in %d/%d calls" % (late, args.iters)
        if args.spin_us > 0:
            text += " (spin too short)"
    if idle_in:
        text += (", GPU idle before the call returned in %d/%d calls (host time timed)"
                 % (idle_in, args.iters))
    return text


def result_line(ctx, args, name, direction, timing, rate, extra=""):
    shown = name + ("@" + args.tag if args.tag else "")
    say("  %-15s %s%9.3f ms (min %.3f, max %.3f)  %7.1f TFLOP/s  SM %d MHz%s%s"
        % (shown, "bwd " if direction == "bwd" else "", timing[0], timing[1], timing[2],
           rate, timing[3], extra, timing_note(args, timing)))


def skip_line(name, direction, reason, every=False):
    """A skip; `every`: the reason holds at every point (the sweep says it once)."""
    say("  %-15s %sskipped%s: %s" % (name, "bwd " if direction == "bwd" else "",
                                     " (every point)" if every else "", reason))


def first_reason(exc, caught):
    """The exception's first line, with the first warning PyTorch gave as the why."""
    text = str(exc).strip().splitlines()
    reason = text[0] if text else type(exc).__name__
    for w in caught:
        msg = " ".join(str(w.message).split())
        if msg:
            reason += " (" + msg[:300] + ")"
            break
    return reason


class Point:
    """One problem: sizes, dtype, the tensors, the FLOPs."""

    def __init__(self, args):
        self.b = args.batch
        self.sq = args.seqlen_q if args.seqlen_q is not None else args.seqlen
        self.sk = args.seqlen_k if args.seqlen_k is not None else args.seqlen
        self.hq = args.heads
        self.hk = args.heads_kv if args.heads_kv is not None else args.heads
        self.d = args.head_dim
        self.causal = bool(args.causal)
        self.dtype = args.dtype
        # A variable-length batch (validate_varlen): per-sequence lengths, None otherwise.
        self.varlen = getattr(args, "varlen_lengths", None)
        if self.varlen is not None:
            self.lq, self.lk, self.used = self.varlen
            self.attended = self.used if self.used is not None else self.lk

    def problem(self):
        return {"batch": self.b, "seqlen_q": self.sq, "seqlen_k": self.sk,
                "heads_q": self.hq, "heads_kv": self.hk, "head_dim": self.d,
                "dtype": self.dtype, "causal": int(self.causal)}

    def flops(self, direction):
        if self.varlen is not None:
            f = flops_forward_varlen(self.hq, self.d, self.lq, self.attended, self.causal)
        else:
            f = flops_forward(self.b, self.hq, self.d, self.sq, self.sk, self.causal)
        return 2.5 * f if direction == "bwd" else f

    def kv_bytes(self, elem):
        return 2.0 * self.b * self.sk * self.hk * self.d * elem


def run_point(ctx, args):
    torch = ctx.torch
    pt = Point(args)
    wanted = [x.strip() for x in args.backends.split(",") if x.strip()]
    if pt.varlen is not None:
        run_varlen(ctx, args, pt, wanted)
        return
    # The repository's layout [batch, seqlen, heads, head_dim], bf16 or fp16 (e4m3 is
    # drawn in bf16 and converted for FA3 alone).
    dtype = torch.float16 if pt.dtype == "fp16" else torch.bfloat16
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    q = torch.randn(pt.b, pt.sq, pt.hq, pt.d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(pt.b, pt.sk, pt.hk, pt.d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(pt.b, pt.sk, pt.hk, pt.d, device="cuda", dtype=dtype, generator=gen)
    dout = None
    if args.direction in ("bwd", "both"):
        # dO in the same layout, drawn after Q, K, V (which stay the forward's).
        dout = torch.randn(pt.b, pt.sq, pt.hq, pt.d, device="cuda", dtype=dtype, generator=gen)
    dirs = {"fwd": ("fwd",), "bwd": ("bwd",), "both": ("fwd", "bwd")}[args.direction]
    try:
        for name in wanted:
            if name == "fa3":
                time_fa3(ctx, args, pt, (q, k, v), dout, dirs)
                continue
            spec = [s for s in SDPA_PEERS if s[0] == name][0]
            _, peer, backend = spec
            for direction in dirs:
                time_sdpa(ctx, args, pt, peer, backend, (q, k, v), dout, direction)
    finally:
        del q, k, v, dout
        torch.cuda.empty_cache()  # leave the memory to the stage program that runs next


def sdpa_refusal(ctx, pt, backend):
    """Why SDPA cannot run this point as the harness defines it, or None."""
    from torch.nn.attention import SDPBackend
    if not hasattr(SDPBackend, backend):
        return "this PyTorch has no SDPBackend.%s" % backend
    if pt.dtype == "e4m3":
        return "SDPA has no e4m3 path (FA3 alone runs fp8 here)"
    if pt.causal and pt.sq != pt.sk:
        return "SDPA's is_causal aligns the mask top-left, the harness bottom-right: " \
               "they differ when seqlen_q != seqlen_k"
    return None


def time_sdpa(ctx, args, pt, name, backend, qkv, dout, direction):
    """One SDPA backend, one direction: a row and a line, or a skip line."""
    torch = ctx.torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    why = sdpa_refusal(ctx, pt, backend)
    if why:
        skip_line(name, direction, why)
        return
    # SDPA's layout [batch, heads, seqlen, head_dim]: a transposed view, head_dim contiguous.
    q, k, v = (t.transpose(1, 2) for t in qkv)
    kw = {"is_causal": pt.causal}
    if pt.hq != pt.hk:
        kw["enable_gqa"] = True  # PyTorch 2.5 or newer
    out = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with sdpa_kernel(getattr(SDPBackend, backend)):
                if direction == "fwd":
                    def call():
                        return F.scaled_dot_product_attention(q, k, v, **kw)
                else:
                    # Leaves that share Q, K, V's memory and strides (no copy), so that
                    # the gradients are taken with respect to exactly what the forward read.
                    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
                    out = F.scaled_dot_product_attention(q, k, v, **kw)
                    do = dout.transpose(1, 2)

                    def call():
                        return torch.autograd.grad(out, (q, k, v), grad_outputs=do,
                                                   retain_graph=True)
                call()  # an unsupported case raises here, before any timing
                timing = ctx.time(call, args.warmup, args.iters, args.spin_us)
    except (RuntimeError, ValueError, NotImplementedError, TypeError) as exc:
        skip_line(name, direction, first_reason(exc, caught))
        torch.cuda.synchronize()
        return
    finally:
        del out  # frees the graph and what it saved
    rate = pt.flops(direction) / (timing[0] * 1e-3) / 1e12
    row(ctx, args, name, direction, pt.problem(), timing, rate)
    result_line(ctx, args, name, direction, timing, rate)


def fa3_or_skip(ctx, args, name):
    """The FA3 module (ctx.fa3), or None after one skip line saying why it did not import
    (once per --serve process; every time in a one-shot run)."""
    if ctx.fa3 is None and (not ctx.fa3_said or not args.serve):
        skip_line(name, "", ctx.fa3_why, every=True)
        ctx.fa3_said = True
    return ctx.fa3


def time_fa3(ctx, args, pt, qkv, dout, dirs):
    """FA3's forward (flash_attn_func, or flash_attn_with_kvcache with --kvcache) and,
    where the build has one, its backward."""
    torch = ctx.torch
    name = "fa3_kvcache" if args.kvcache else "fa3"
    fa3 = fa3_or_skip(ctx, args, name)
    if fa3 is None:
        return
    m = fa3.m
    for direction in dirs:
        why = None
        every = False  # a reason that holds at every point of a sweep
        if pt.dtype == "fp16":
            why = fa3.lacks_feature("FLASHATTENTION_DISABLE_FP16")
        elif pt.dtype == "e4m3":
            why = fa3.lacks_feature("FLASHATTENTION_DISABLE_FP8")
        every = why is not None
        if why is None and direction == "bwd":
            why = fa3.lacks_feature("FLASHATTENTION_DISABLE_BACKWARD")
            every = why is not None
            if why is None and (args.kvcache or pt.dtype == "e4m3"):
                why = "FA3 has no backward for %s" % ("the KV-cache path" if args.kvcache
                                                      else "e4m3")
        fn = m.flash_attn_with_kvcache if args.kvcache else m.flash_attn_func
        if why is None and args.kvcache and not hasattr(m, "flash_attn_with_kvcache"):
            why = "%s has no flash_attn_with_kvcache" % fa3.api
        if why is None and pt.dtype == "e4m3" and not fa3.accepts(fn, "q_descale"):
            why = "this %s's flash_attn_func takes no descale arguments" % fa3.api
        if why is None and (args.num_splits is not None or args.pack_gqa != "auto") \
                and not fa3.accepts(fn, "num_splits", "pack_gqa"):
            why = "this %s takes no num_splits/pack_gqa" % fa3.api
        if why:
            skip_line(name, direction, why, every=every or why.startswith("this "))
            continue
        q, k, v = qkv
        kw = {"causal": pt.causal}
        if pt.dtype == "e4m3":
            f8 = torch.float8_e4m3fn
            q, k, v = (t.to(f8) for t in (q, k, v))
            # Descale factors of 1 ([batch, heads_kv], fp32): N(0, 1) fits e4m3 unscaled.
            one = torch.ones(pt.b, pt.hk, device="cuda", dtype=torch.float32)
            kw.update(q_descale=one, k_descale=one, v_descale=one)
        if args.kvcache:
            # cache_seqlens made once, outside the timed calls (an int would make the
            # wrapper allocate and fill a tensor inside each call).
            kw["cache_seqlens"] = torch.full((pt.b,), pt.sk, dtype=torch.int32, device="cuda")
            kw["num_splits"] = 0 if args.num_splits is None else args.num_splits
        elif args.num_splits is not None:
            kw["num_splits"] = args.num_splits
        if args.pack_gqa != "auto":
            kw["pack_gqa"] = args.pack_gqa == "1"
        out = None
        try:
            if direction == "fwd":
                def call():
                    return fn(q, k, v, **kw)
            else:
                q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
                res = fn(q, k, v, **kw)
                out = res[0] if isinstance(res, (tuple, list)) else res

                def call():
                    return torch.autograd.grad(out, (q, k, v), grad_outputs=dout,
                                               retain_graph=True)
            call()  # an unsupported case raises here, before any timing
            timing = ctx.time(call, args.warmup, args.iters, args.spin_us)
        except (RuntimeError, ValueError, NotImplementedError, TypeError, AssertionError) as exc:
            skip_line(name, direction, "%s: %s" % (fa3.api, first_reason(exc, [])))
            torch.cuda.synchronize()
            continue
        finally:
            del out
        rate = pt.flops(direction) / (timing[0] * 1e-3) / 1e12
        extra = ""
        if args.kvcache:
            elem = 1 if pt.dtype == "e4m3" else 2
            extra = "  K,V read once: %.2f TB/s, num_splits %s, pack_gqa %s" % (
                pt.kv_bytes(elem) / (timing[0] * 1e-3) / 1e12, kw["num_splits"],
                args.pack_gqa)
        row(ctx, args, name, direction, pt.problem(), timing, rate)
        result_line(ctx, args, name, direction, timing, rate, extra)


# ----------------------------------------------------------------------------------------
# A variable-length batch (--seqlens-q): FA3's flash_attn_varlen_func, SDPA on nested
# jagged tensors.

def varlen_note(pt):
    return "  varlen: %d sequences, total_q %d, total_k %d" % (pt.b, sum(pt.lq), sum(pt.lk))


def run_varlen(ctx, args, pt, wanted):
    """One varlen point: the packed tensors and their offsets made once, then each peer."""
    torch = ctx.torch
    dtype = torch.float16 if pt.dtype == "fp16" else torch.bfloat16
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    total_q, total_k = sum(pt.lq), sum(pt.lk)
    q = torch.randn(total_q, pt.hq, pt.d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(total_k, pt.hk, pt.d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(total_k, pt.hk, pt.d, device="cuda", dtype=dtype, generator=gen)
    # The offsets on the GPU, made here, outside the timed calls (as the harness copies
    # its cu_seqlens once before timing).
    cu_q = torch.tensor(prefix_sums(pt.lq), dtype=torch.int32, device="cuda")
    cu_k = cu_q if pt.lk == pt.lq else torch.tensor(prefix_sums(pt.lk), dtype=torch.int32,
                                                    device="cuda")
    used = None
    if pt.used is not None:
        used = torch.tensor(pt.used, dtype=torch.int32, device="cuda")
    try:
        for name in wanted:
            if name == "fa3":
                time_fa3_varlen(ctx, args, pt, (q, k, v), (cu_q, cu_k), used)
                continue
            _, peer, backend = [s for s in SDPA_PEERS if s[0] == name][0]
            time_sdpa_varlen(ctx, args, pt, peer, backend, (q, k, v))
    finally:
        del q, k, v, cu_q, cu_k, used
        torch.cuda.empty_cache()


def time_fa3_varlen(ctx, args, pt, qkv, cu, used):
    """FA3's flash_attn_varlen_func on the packed batch: a row and a line, or a skip line."""
    torch = ctx.torch
    name = "fa3"
    fa3 = fa3_or_skip(ctx, args, name)
    if fa3 is None:
        return
    m = fa3.m
    fn = getattr(m, "flash_attn_varlen_func", None)
    why = None
    if pt.dtype == "fp16":
        why = fa3.lacks_feature("FLASHATTENTION_DISABLE_FP16")
    if why is None:
        why = fa3.lacks_feature("FLASHATTENTION_DISABLE_VARLEN")
    if why is None and fn is None:
        why = "this %s has no flash_attn_varlen_func" % fa3.api
    if why is None and used is not None and not fa3.accepts(fn, "seqused_k"):
        why = "this %s's flash_attn_varlen_func takes no seqused_k" % fa3.api
    if why is None and (args.num_splits is not None or args.pack_gqa != "auto") \
            and not fa3.accepts(fn, "num_splits", "pack_gqa"):
        why = "this %s takes no num_splits/pack_gqa" % fa3.api
    if why:
        skip_line(name, "", why, every=True)
        return
    q, k, v = qkv
    cu_q, cu_k = cu
    # Everything after the seven positional arguments by keyword: the hopper/ builds have
    # moved seqused_q/seqused_k and softmax_scale between versions. softmax_scale left to
    # FA3's default, 1/sqrt(head_dim), the harness's.
    kw = {"causal": pt.causal}
    if used is not None:
        kw["seqused_k"] = used
    if args.num_splits is not None:
        kw["num_splits"] = args.num_splits
    if args.pack_gqa != "auto":
        kw["pack_gqa"] = args.pack_gqa == "1"

    def call():
        return fn(q, k, v, cu_q, cu_k, pt.sq, pt.sk, **kw)
    try:
        call()  # an unsupported case raises here, before any timing
        timing = ctx.time(call, args.warmup, args.iters, args.spin_us)
    except (RuntimeError, ValueError, NotImplementedError, TypeError, AssertionError) as exc:
        skip_line(name, "", "%s: %s" % (fa3.api, first_reason(exc, [])))
        torch.cuda.synchronize()
        return
    rate = pt.flops("fwd") / (timing[0] * 1e-3) / 1e12
    row(ctx, args, name, "fwd", pt.problem(), timing, rate)
    result_line(ctx, args, name, "fwd", timing, rate, varlen_note(pt))


def sdpa_varlen_refusal(ctx, pt, backend):
    """(why SDPA cannot run this varlen point fairly, whether that holds at every point),
    or (None, False)."""
    from torch.nn.attention import SDPBackend
    if not hasattr(SDPBackend, backend):
        return "this PyTorch has no SDPBackend.%s" % backend, True
    nested = getattr(ctx.torch, "nested", None)
    if nested is None or not hasattr(nested, "nested_tensor_from_jagged"):
        return "SDPA has no varlen entry, and this PyTorch has no nested jagged tensors " \
               "(torch.nested.nested_tensor_from_jagged)", True
    if backend == "CUDNN_ATTENTION":
        # Its nested path waits for the GPU inside the call (measured: docs/benchmarks.md,
        # "Variable-length batches"), so no spin keeps its host time out of the interval.
        return "SDPA has no varlen entry; its cuDNN backend takes nested jagged tensors " \
               "but waits for the GPU inside the call (docs/benchmarks.md, Variable-length " \
               "batches), so its time would hold host time: not timed", True
    if pt.used is not None:
        return "SDPA has no varlen entry and nested jagged tensors have no seqused_k", False
    if pt.causal and pt.lq != pt.attended:
        return "SDPA's is_causal aligns the mask top-left, the harness bottom-right: " \
               "they differ in a sequence with seqlen_q != seqlen_k", False
    return None, False


def time_sdpa_varlen(ctx, args, pt, name, backend, qkv):
    """SDPA on nested jagged tensors over the packed buffers (the backend forced): a row
    and a line, or a skip line with the reason SDPA gave."""
    torch = ctx.torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    why, every = sdpa_varlen_refusal(ctx, pt, backend)
    if why:
        skip_line(name, "", why, every=every)
        return
    q, k, v = qkv
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # [batch, j, heads, head_dim] over the packed rows (views, no copy), the
            # offsets and the shortest and longest lengths given so that SDPA need not
            # read them back from the GPU inside the call; K and V share one offsets
            # tensor (one ragged size), and Q shares it too when the lengths are equal.
            off_q = torch.tensor(prefix_sums(pt.lq), dtype=torch.int64, device="cuda")
            off_k = off_q if pt.lk == pt.lq else torch.tensor(
                prefix_sums(pt.lk), dtype=torch.int64, device="cuda")

            def jagged(values, offsets, lengths):
                return torch.nested.nested_tensor_from_jagged(
                    values, offsets, min_seqlen=min(lengths), max_seqlen=max(lengths))
            nq = jagged(q, off_q, pt.lq).transpose(1, 2)
            nk = jagged(k, off_k, pt.lk).transpose(1, 2)
            nv = jagged(v, off_k, pt.lk).transpose(1, 2)
            kw = {"is_causal": pt.causal}
            if pt.hq != pt.hk:
                kw["enable_gqa"] = True

            def call():
                return F.scaled_dot_product_attention(nq, nk, nv, **kw)
            with sdpa_kernel(getattr(SDPBackend, backend)):
                call()  # an unsupported case raises here, before any timing
                timing = ctx.time(call, args.warmup, args.iters, args.spin_us)
    except (RuntimeError, ValueError, NotImplementedError, TypeError, AssertionError) as exc:
        skip_line(name, "", "on nested jagged tensors: " + first_reason(exc, caught))
        torch.cuda.synchronize()
        return
    rate = pt.flops("fwd") / (timing[0] * 1e-3) / 1e12
    row(ctx, args, name, "fwd", pt.problem(), timing, rate)
    result_line(ctx, args, name, "fwd", timing, rate, varlen_note(pt))


def run_gemm(ctx, args):
    torch = ctx.torch
    n = GEMM_SIZE
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    bm = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    timing = ctx.time(lambda: torch.matmul(a, bm, out=c), args.warmup, args.iters, args.spin_us)
    rate = 2.0 * n * n * n / (timing[0] * 1e-3) / 1e12
    row(ctx, args, "torch_matmul", "ref",
        {"batch": 1, "seqlen_q": n, "seqlen_k": n, "heads_q": 1, "heads_kv": 1, "head_dim": n,
         "dtype": "bf16", "causal": 0}, timing, rate)
    say("  %-15s %9.3f ms  %7.1f TFLOP/s  bf16 %dx%dx%d  SM %d MHz%s"
        % ("torch_matmul", timing[0], rate, n, n, n, timing[3], timing_note(args, timing)))
    del a, bm, c
    torch.cuda.empty_cache()

    nbytes = COPY_BYTES
    while True:
        try:
            src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(1)
            dst = torch.empty_like(src)
            break
        except RuntimeError:  # out of memory on a small GPU: halve
            torch.cuda.empty_cache()
            nbytes //= 2
            if nbytes < (64 << 20):
                say("  %-15s skipped: cannot allocate two 64 MiB buffers" % "copy_bw")
                return
    timing = ctx.time(lambda: dst.copy_(src), args.warmup, args.iters, args.spin_us)
    tbps = 2.0 * nbytes / (timing[0] * 1e-3) / 1e12  # read + written
    row(ctx, args, "copy_bw", "ref",
        {"batch": 1, "seqlen_q": nbytes >> 20, "seqlen_k": 0, "heads_q": 0, "heads_kv": 0,
         "head_dim": 0, "dtype": "u8", "causal": 0}, timing, tbps)
    say("  %-15s %9.3f ms  %7.2f TB/s (read + written, %d MiB copied)  SM %d MHz%s"
        % ("copy_bw", timing[0], tbps, nbytes >> 20, timing[3], timing_note(args, timing)))
    del src, dst
    torch.cuda.empty_cache()


def validate_varlen(args, p):
    """A variable-length batch's usage errors (the stage programs' rules, fx_options.h);
    fills args.batch, args.seqlen_q, args.seqlen_k (the row's: the count, the largest
    lengths or the given max_seqlen) and args.varlen_lengths = (seqlens_q, seqlens_k,
    seqused_k or None)."""
    try:
        lq = parse_lengths(args.seqlens_q, "--seqlens-q")
        lk = parse_lengths(args.seqlens_k, "--seqlens-k") if args.seqlens_k is not None \
            else list(lq)
        used = parse_lengths(args.seqused_k, "--seqused-k") if args.seqused_k is not None \
            else None
    except ValueError as exc:
        p.error(str(exc))
    n = len(lq)
    if n > VARLEN_MAX_SEQS:
        p.error("--seqlens-q gives %d lengths: at most %d sequences (FX_VARLEN_MAX_SEQS)"
                % (n, VARLEN_MAX_SEQS))
    for opt, lens in (("--seqlens-k", lk), ("--seqused-k", used)):
        if lens is not None and len(lens) != n:
            p.error("%s gives %d lengths for the %d sequences of --seqlens-q: one per sequence"
                    % (opt, len(lens), n))
    if used is not None:
        for b in range(n):
            if used[b] > lk[b]:
                p.error("--seqused-k: sequence %d attends %d keys, more than its %d "
                        "(--seqlens-k)" % (b, used[b], lk[b]))
    if args.batch is not None and args.batch != n:
        p.error("--batch %d is not the %d sequences of --seqlens-q" % (args.batch, n))
    attended = used if used is not None else lk
    if sum(lq) == 0:
        p.error("--seqlens-q: every sequence has 0 query rows: nothing to time")
    if sum(attended) == 0:
        p.error("--seqlens-k/--seqused-k: no sequence attends any key: nothing to time")
    if sum(lq) > INDEX_LIMIT or sum(lk) > INDEX_LIMIT:
        p.error("--seqlens-q/--seqlens-k: the lengths sum past %d rows" % INDEX_LIMIT)
    sq = args.seqlen_q if args.seqlen_q is not None else args.seqlen
    sk = args.seqlen_k if args.seqlen_k is not None else args.seqlen
    for opt, given, longest in (("--seqlen-q", sq, max(lq)), ("--seqlen-k", sk, max(attended))):
        if given is not None and given < longest:
            p.error("%s %d is below the longest length, %d (with --seqlens-q it is FA's "
                    "max_seqlen)" % (opt, given, longest))
    if args.kvcache:
        p.error("--kvcache with --seqlens-q: the decode path is not measured as a varlen batch")
    if args.direction != "fwd":
        p.error("--seqlens-q times the forward alone (no stage has a varlen backward yet)")
    if args.dtype == "e4m3":
        p.error("--seqlens-q with --dtype e4m3: not measured here (bf16 or fp16)")
    args.batch = n
    args.seqlen_q = sq if sq is not None else max(lq)
    args.seqlen_k = sk if sk is not None else max(attended)
    args.varlen_lengths = (lq, lk, used)


def validate(args, p):
    """Usage errors of one request (p.error exits, or raises in --serve)."""
    args.varlen_lengths = None
    if args.seqlens_q is not None:
        validate_varlen(args, p)
    else:
        for opt, value in (("--seqlens-k", args.seqlens_k), ("--seqused-k", args.seqused_k)):
            if value is not None:
                p.error("%s goes with --seqlens-q (a variable-length batch)" % opt)
    sq = args.seqlen_q if args.seqlen_q is not None else args.seqlen
    sk = args.seqlen_k if args.seqlen_k is not None else args.seqlen
    point = [args.batch, sq, sk, args.heads, args.head_dim]
    given = [args.batch, args.seqlen, args.seqlen_q, args.seqlen_k, args.heads, args.head_dim]
    if any(x is not None for x in given) and not all(x is not None for x in point):
        p.error("a point needs --batch, --seqlen (or --seqlen-q and --seqlen-k), --heads "
                "and --head-dim")
    sizes = point + [args.heads_kv]
    if any(x is not None and x <= 0 for x in sizes) or args.iters < 1 or args.warmup < 0:
        p.error("sizes and --iters must be positive, --warmup not negative")
    if args.heads_kv is not None and args.heads is not None and args.heads % args.heads_kv:
        p.error("--heads %d is not a multiple of --heads-kv %d" % (args.heads, args.heads_kv))
    if not (args.spin_us >= 0 and args.spin_us <= MAX_SPIN_US):
        p.error("--spin-us must be between 0 and %d microseconds" % MAX_SPIN_US)
    if args.num_splits is not None and args.num_splits < 0:
        p.error("--num-splits must be 0 (FA3's heuristic) or positive")
    names = [x.strip() for x in args.backends.split(",") if x.strip()]
    bad = [x for x in names if x not in BACKENDS]
    if bad or not names:
        p.error("--backends: %s not among %s" % (",".join(bad) or "(empty)", DEFAULT_BACKENDS))
    if len(set(names)) != len(names):
        p.error("--backends names a backend twice")
    if args.tag and not all(ch.isalnum() or ch in "._-" for ch in args.tag):
        p.error("--tag: letters, digits, '.', '_' and '-' only (it becomes part of a CSV field)")
    if not args.gemm and not args.meta and sq is None:
        p.error("nothing to do: give a point (--batch --seqlen --heads --head-dim) or --gemm")
    return sq is not None


def handle(ctx, args, p):
    """One request: the reference rows (--gemm) and/or one point."""
    has_point = validate(args, p)
    if args.meta:
        with open(args.meta, "a") as f:
            for key, value in ctx.versions():
                f.write("%s=%s\n" % (key, value))
    if args.gemm:
        run_gemm(ctx, args)
    if has_point:
        run_point(ctx, args)


def open_torch():
    """Returns (torch, None) or (None, the one line that says why the peers are skipped)."""
    try:
        import torch
    except ImportError as exc:
        if getattr(exc, "name", None) == "torch":
            return None, "PyTorch not installed: peers (SDPA, FA3) skipped"
        return None, "PyTorch failed to import (%s): peers skipped" % " ".join(str(exc).split())
    if not torch.cuda.is_available():
        return None, "PyTorch %s installed but CUDA is unavailable (no GPU or no driver): " \
                     "peers skipped" % torch.__version__
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401
    except ImportError:
        return None, "PyTorch %s has no torch.nn.attention.sdpa_kernel (2.3 or newer " \
                     "needed): peers skipped" % torch.__version__
    return torch, None


class RequestError(Exception):
    pass


class ServeParser(argparse.ArgumentParser):
    """In --serve, a bad request is answered, not fatal."""

    def error(self, message):
        raise RequestError(message)

    def exit(self, status=0, message=None):
        raise RequestError((message or "exit %d" % status).strip())


def ready_line(ctx):
    fa3 = ("fa3 %s %s" % (ctx.fa3.api, ctx.fa3.version) if ctx.fa3 is not None
           else "fa3 skipped: " + ctx.fa3_why)
    keep = ("torch", "torch_cuda", "cudnn", "device", "sm_count", "l2_bytes", "driver")
    return "peers: ready: " + ", ".join("%s %s" % kv for kv in ctx.versions()
                                        if kv[0] in keep) + ", " + fa3


def main():
    p = parser()
    args = p.parse_args()
    if not args.serve:
        # Usage errors before PyTorch is imported (seconds), and without a GPU too.
        validate(args, p)
    torch, why = open_torch()
    if torch is None:
        say(why)
        return 0
    ctx = Peers(torch)
    if not args.serve:
        handle(ctx, args, p)
        return 0

    say(ready_line(ctx))
    sp = parser(ServeParser, "peers.py --serve")
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        try:
            req = sp.parse_args(shlex.split(line))
            req.serve = True
            handle(ctx, req, sp)
        except RequestError as exc:
            say("peers: bad request: %s" % exc)
        except Exception as exc:  # a CUDA error: say it, let the sweep go on
            say("peers: error: %s" % one_line(exc))
        say("peers: end")


if __name__ == "__main__":
    sys.exit(main())
