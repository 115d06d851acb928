#!/usr/bin/env python3
"""peers.py — the peers of the FA3 sweep, forward and backward, measured on the same GPU in
the same run.

PyTorch's scaled_dot_product_attention with each backend forced through
torch.nn.attention.sdpa_kernel:

    sdpa_flash      SDPBackend.FLASH_ATTENTION      (FlashAttention-2 inside PyTorch)
    sdpa_cudnn      SDPBackend.CUDNN_ATTENTION      (cuDNN's fused attention)
    sdpa_efficient  SDPBackend.EFFICIENT_ATTENTION  (the memory-efficient kernel)

and, with --gemm, two reference rows: a bf16 torch.matmul 8192x8192x8192 (torch_matmul,
TFLOP/s) and a device-to-device copy (copy_bw: its `tflops` column holds TB/s, bytes read
plus bytes written over the median time; `seqlen_q` holds the buffer size in MiB).

    bench/peers.py --batch 8 --seqlen 2048 --heads 16 --head-dim 128 [--causal] \\
                   [--direction fwd|bwd|both] [--dtype bf16] [--iters 10] [--warmup 3] \\
                   [--csv FILE] [--commit C]
    bench/peers.py --gemm [--csv FILE] [--meta FILE]     (the reference rows, once per run)
    bench/peers.py --serve        (bench/sweep.sh: one line of the options above per request)

PyTorch is optional: without it, or without a CUDA device, this prints one line saying
the peers are skipped and exits 0, writing no row.

Measured as the stage programs measure (common/fx_gpu.c, fx_time): Q, K, V made in the
repository's layout [batch, seqlen, heads, head_dim] and handed to SDPA transposed to
[batch, heads, seqlen, head_dim] (a view, no copy); `--warmup` untimed calls, then
`--iters` calls each timed alone with CUDA events, each after a write of twice the L2
size to a scratch buffer outside the timed region; the median is reported, with the
minimum and maximum. The SM clock is read through NVML (ctypes, libnvidia-ml.so.1, as
the harness does; nvidia-smi as a fallback; 0 when neither answers) right after the
timed calls. FLOPs by the FA3 convention, counted like fx_flops_forward: 4 * batch *
heads * head_dim * (unmasked (i, j) pairs), N(N+1)/2 pairs per slice when causal.

--direction bwd times the backward alone, as the stage programs' --bench --bwd does
(fx_flops_backward: 2.5 times the forward's exact count, five GEMMs instead of two):
per backend, Q, K and V (the same layout) are made leaves with requires_grad, the SDPA
forward runs once under the forced backend, untimed, and then each timed call is
torch.autograd.grad(out, (q, k, v), grad_outputs=dO, retain_graph=True), with dO drawn
like Q in the same layout: --warmup untimed calls, --iters timed ones with the L2 flush
before each, the median. A backend whose forward or backward raises prints a "bwd
skipped:" line and writes no row. --direction both does the forward, then the backward,
for each backend; the default, fwd, is the forward alone.

Rows go to --csv in the columns of the file's header (FX_CSV_HEADER of common/fx_main.h,
written here when the file is new): stage = the peer's name, direction = fwd or bwd (ref
for the two reference rows), commit = --commit, check = peer, the error columns empty.
Stdlib and torch only; Python 3.8 or newer.
"""

import argparse
import ctypes
import datetime
import os
import shlex
import statistics
import subprocess
import sys
import warnings

# The stage programs' CSV columns (FX_CSV_HEADER, common/fx_main.h). Used only for a new
# file: rows appended to an existing file follow that file's own header.
FX_CSV_HEADER = (
    "stage,direction,device,sm_count,sm_clock_mhz,commit,date,batch,seqlen_q,seqlen_k,"
    "heads_q,heads_kv,head_dim,dtype,causal,repeats,ms,ms_min,ms_max,tflops,"
    "err_ref_max,err_prev_max,prev_stage,check"
)

GEMM_SIZE = 8192           # torch_matmul: M = N = K (the DESIGN.md reference line)
COPY_BYTES = 1 << 30       # copy_bw: 1 GiB read and 1 GiB written per call
DEFAULT_L2_BYTES = 64 << 20  # the harness's fallback when the L2 size is unknown
NVML_CLOCK_SM = 1
NVML_SUCCESS = 0

PEERS = (
    ("sdpa_flash", "FLASH_ATTENTION"),
    ("sdpa_cudnn", "CUDNN_ATTENTION"),
    ("sdpa_efficient", "EFFICIENT_ATTENTION"),
)


def say(line):
    print(line, flush=True)


def parser(cls=argparse.ArgumentParser, prog="peers.py"):
    p = cls(
        prog=prog,
        description="PyTorch SDPA backends (and a GEMM and a copy) timed like the stage programs.",
    )
    p.add_argument("--batch", type=int)
    p.add_argument("--seqlen", type=int, help="seqlen_q = seqlen_k")
    p.add_argument("--heads", type=int)
    p.add_argument("--head-dim", type=int)
    p.add_argument("--causal", type=int, nargs="?", const=1, default=0, choices=(0, 1),
                   help="--causal or --causal 1: causal; --causal 0 (default): not")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    p.add_argument("--direction", default="fwd", choices=("fwd", "bwd", "both"),
                   help="time the forward (default), the backward alone, or both")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--csv", help="append rows to this file")
    p.add_argument("--commit", default=os.environ.get("FX_GIT_COMMIT", "unknown"),
                   help="the repository commit the rows record (default: $FX_GIT_COMMIT)")
    p.add_argument("--backends", default="flash,cudnn,efficient",
                   help="comma-separated subset of flash,cudnn,efficient")
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


def flops_forward(batch, heads, head_dim, seqlen, causal):
    return 4.0 * batch * heads * head_dim * unmasked_pairs(seqlen, seqlen, causal)


def flops_backward(batch, heads, head_dim, seqlen, causal):
    """fx_flops_backward: five GEMMs instead of two (FA3 convention), 2.5x the forward."""
    return 2.5 * flops_forward(batch, heads, head_dim, seqlen, causal)


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
                if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != NVML_SUCCESS or count.value != 1:
                    return  # several GPUs and no bus id to tell them apart
                rc = lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle))
            if rc == NVML_SUCCESS:
                self.lib, self.handle = lib, handle
        except (OSError, AttributeError):
            self.lib = None

    def mhz(self):
        if self.lib is not None:
            value = ctypes.c_uint()
            if self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM,
                                               ctypes.byref(value)) == NVML_SUCCESS:
                return int(value.value)
        cmd = ["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"]
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

    def driver(self):
        if self.lib is None:
            return "unknown"
        buf = ctypes.create_string_buffer(96)
        if self.lib.nvmlSystemGetDriverVersion(buf, 96) == NVML_SUCCESS:
            return buf.value.decode(errors="replace")
        return "unknown"


# ----------------------------------------------------------------------------------------
# The measuring context: torch, the device, the flush buffer.

class Peers:
    def __init__(self, torch):
        self.torch = torch
        self.props = torch.cuda.get_device_properties(0)
        self.device = torch.cuda.get_device_name(0).replace(",", " ")
        self.sm_count = self.props.multi_processor_count
        l2 = getattr(self.props, "L2_cache_size", 0) or DEFAULT_L2_BYTES
        self.flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
        self.clock = SmClock(self.props)

    def versions(self):
        t = self.torch
        v = t.backends.cudnn.version() if t.backends.cudnn.is_available() else None
        if v is None:
            cudnn = "none"
        elif v >= 90000:  # cuDNN 9: MAJOR*10000 + MINOR*100 + PATCH
            cudnn = "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)
        else:             # cuDNN 8: MAJOR*1000 + MINOR*100 + PATCH
            cudnn = "%d.%d.%d" % (v // 1000, v // 100 % 10, v % 100)
        return [
            ("torch", t.__version__),
            ("torch_cuda", str(t.version.cuda)),
            ("cudnn", "%s (%s)" % (cudnn, v)),
            ("device", self.device),
            ("sm_count", str(self.sm_count)),
            ("l2_bytes", str(getattr(self.props, "L2_cache_size", 0))),
            ("driver", self.clock.driver()),
        ]

    def time(self, fn, warmup, iters):
        """fx_time: warm-up, then each call alone between two events, L2 flushed before."""
        cuda = self.torch.cuda
        for _ in range(warmup):
            fn()
        start = cuda.Event(enable_timing=True)
        stop = cuda.Event(enable_timing=True)
        ms = []
        for r in range(iters):
            self.flush.fill_(r & 0xFF)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            ms.append(start.elapsed_time(stop))
        mhz = self.clock.mhz()  # right after the timed calls, as the harness reads it
        return statistics.median(ms), min(ms), max(ms), mhz


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
    ms, ms_min, ms_max, mhz = timing
    fields = {
        "stage": stage, "direction": direction, "device": ctx.device,
        "sm_count": ctx.sm_count, "sm_clock_mhz": mhz, "commit": args.commit,
        "date": utc_now(), "repeats": args.iters,
        "ms": "%.5f" % ms, "ms_min": "%.5f" % ms_min, "ms_max": "%.5f" % ms_max,
        "tflops": "%.2f" % rate, "err_ref_max": "", "err_prev_max": "", "prev_stage": "",
        "check": "peer",
    }
    fields.update(problem)
    append_row(args.csv, fields)


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


def run_point(ctx, args):
    torch = ctx.torch
    from torch.nn.attention import SDPBackend

    b, s, h, d, causal = args.batch, args.seqlen, args.heads, args.head_dim, bool(args.causal)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    wanted = set(x.strip() for x in args.backends.split(",") if x.strip())
    problem = {"batch": b, "seqlen_q": s, "seqlen_k": s, "heads_q": h, "heads_kv": h,
               "head_dim": d, "dtype": args.dtype, "causal": int(causal)}
    # The repository's layout [batch, seqlen, heads, head_dim]; SDPA takes
    # [batch, heads, seqlen, head_dim]: a transposed view, innermost dim contiguous.
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=gen).transpose(1, 2)
               for _ in range(3))
    dout = None
    if args.direction in ("bwd", "both"):
        # dO in the same layout, drawn after Q, K, V (which stay the forward's).
        dout = torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=gen).transpose(1, 2)
    try:
        for name, backend in PEERS:
            if name.split("_", 1)[1] not in wanted:
                continue
            if not hasattr(SDPBackend, backend):
                say("  %-15s skipped: this PyTorch has no SDPBackend.%s" % (name, backend))
                continue
            if args.direction in ("fwd", "both"):
                time_forward(ctx, args, name, getattr(SDPBackend, backend), (q, k, v), causal,
                             problem)
            if dout is not None:
                time_backward(ctx, args, name, getattr(SDPBackend, backend), (q, k, v), dout,
                              causal, problem)
    finally:
        del q, k, v, dout
        torch.cuda.empty_cache()  # leave the memory to the stage program that runs next


def time_forward(ctx, args, name, backend, qkv, causal, problem):
    """One backend's forward: a row and a line, or a skip line."""
    torch = ctx.torch
    from torch.nn.attention import sdpa_kernel
    import torch.nn.functional as F

    q, k, v = qkv
    flops = flops_forward(args.batch, args.heads, args.head_dim, args.seqlen, causal)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with sdpa_kernel(backend):
                def call():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                call()  # an unsupported case raises here, before any timing
                timing = ctx.time(call, args.warmup, args.iters)
    except (RuntimeError, ValueError, NotImplementedError) as exc:
        say("  %-15s skipped: %s" % (name, first_reason(exc, caught)))
        torch.cuda.synchronize()
        return
    rate = flops / (timing[0] * 1e-3) / 1e12
    row(ctx, args, name, "fwd", problem, timing, rate)
    say("  %-15s %9.3f ms (min %.3f, max %.3f)  %7.1f TFLOP/s  SM %d MHz"
        % (name, timing[0], timing[1], timing[2], rate, timing[3]))


def time_backward(ctx, args, name, backend, qkv, dout, causal, problem):
    """One backend's backward alone: the forward once (untimed), then autograd.grad timed."""
    torch = ctx.torch
    from torch.nn.attention import sdpa_kernel
    import torch.nn.functional as F

    flops = flops_backward(args.batch, args.heads, args.head_dim, args.seqlen, causal)
    # Leaves that share Q, K, V's memory and strides (no copy), so that the gradients are
    # taken with respect to exactly the tensors the forward read.
    q, k, v = (t.detach().requires_grad_() for t in qkv)
    out = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                def call():
                    return torch.autograd.grad(out, (q, k, v), grad_outputs=dout,
                                               retain_graph=True)
                call()  # a backward this backend lacks raises here, before any timing
                timing = ctx.time(call, args.warmup, args.iters)
    except (RuntimeError, ValueError, NotImplementedError) as exc:
        say("  %-15s bwd skipped: %s" % (name, first_reason(exc, caught)))
        torch.cuda.synchronize()
        return
    finally:
        del out  # frees the graph and what it saved
        del q, k, v
    rate = flops / (timing[0] * 1e-3) / 1e12
    row(ctx, args, name, "bwd", problem, timing, rate)
    say("  %-15s bwd %9.3f ms (min %.3f, max %.3f)  %7.1f TFLOP/s  SM %d MHz"
        % (name, timing[0], timing[1], timing[2], rate, timing[3]))


def run_gemm(ctx, args):
    torch = ctx.torch
    n = GEMM_SIZE
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    bm = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    timing = ctx.time(lambda: torch.matmul(a, bm, out=c), args.warmup, args.iters)
    rate = 2.0 * n * n * n / (timing[0] * 1e-3) / 1e12
    row(ctx, args, "torch_matmul", "ref",
        {"batch": 1, "seqlen_q": n, "seqlen_k": n, "heads_q": 1, "heads_kv": 1, "head_dim": n,
         "dtype": "bf16", "causal": 0}, timing, rate)
    say("  %-15s %9.3f ms  %7.1f TFLOP/s  bf16 %dx%dx%d  SM %d MHz"
        % ("torch_matmul", timing[0], rate, n, n, n, timing[3]))
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
    timing = ctx.time(lambda: dst.copy_(src), args.warmup, args.iters)
    tbps = 2.0 * nbytes / (timing[0] * 1e-3) / 1e12  # read + written
    row(ctx, args, "copy_bw", "ref",
        {"batch": 1, "seqlen_q": nbytes >> 20, "seqlen_k": 0, "heads_q": 0, "heads_kv": 0,
         "head_dim": 0, "dtype": "u8", "causal": 0}, timing, tbps)
    say("  %-15s %9.3f ms  %7.2f TB/s (read + written, %d MiB copied)  SM %d MHz"
        % ("copy_bw", timing[0], tbps, nbytes >> 20, timing[3]))
    del src, dst
    torch.cuda.empty_cache()


def handle(ctx, args, p):
    """One request: the reference rows (--gemm) and/or one point."""
    point = [args.batch, args.seqlen, args.heads, args.head_dim]
    if any(x is not None for x in point) and not all(x is not None for x in point):
        p.error("a point needs --batch, --seqlen, --heads and --head-dim")
    if any(x is not None and x <= 0 for x in point) or args.iters < 1 or args.warmup < 0:
        p.error("sizes and --iters must be positive, --warmup not negative")
    if not args.gemm and not args.meta and args.seqlen is None:
        p.error("nothing to do: give a point (--batch --seqlen --heads --head-dim) or --gemm")
    if args.meta:
        with open(args.meta, "a") as f:
            for key, value in ctx.versions():
                f.write("%s=%s\n" % (key, value))
    if args.gemm:
        run_gemm(ctx, args)
    if all(x is not None for x in point):
        run_point(ctx, args)


def open_torch():
    """Returns (torch, None) or (None, the one line that says why the peers are skipped)."""
    try:
        import torch
    except ImportError as exc:
        if getattr(exc, "name", None) == "torch":
            return None, "PyTorch not installed: peers skipped"
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


def main():
    p = parser()
    args = p.parse_args()
    torch, why = open_torch()
    if torch is None:
        say(why)
        return 0
    ctx = Peers(torch)
    if not args.serve:
        handle(ctx, args, p)
        return 0

    versions = ctx.versions()
    say("peers: ready: " + ", ".join("%s %s" % kv for kv in versions))
    sp = parser(ServeParser, "peers.py --serve")
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        try:
            handle(ctx, sp.parse_args(shlex.split(line)), sp)
        except RequestError as exc:
            say("peers: bad request: %s" % exc)
        except Exception as exc:  # a CUDA error: say it, let the sweep go on
            say("peers: error: %s: %s" % (type(exc).__name__, " ".join(str(exc).split())[:300]))
        say("peers: end")


if __name__ == "__main__":
    sys.exit(main())
