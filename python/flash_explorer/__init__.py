"""flash_explorer: every stage of flash-explorer callable from Python (docs/api.md).

A thin ctypes binding of libflash_explorer.so (the C API of api/fx_api.h); no compiled
code of its own. torch is optional at import and needed only to run a stage:

    import torch, flash_explorer as fx
    q, k, v = (torch.randn(2, 1024, 16, 128, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    out = fx.flash_attn_func(q, k, v, causal=True, stage="08_intra_wg_overlap")

Tensors are in FlashAttention's layout, [batch, seqlen, heads, head_dim], head_dim
contiguous. The library is found at $FLASH_EXPLORER_LIB, else next to this file, else in
the repository's build/lib/. A case outside a stage's capabilities raises UnsupportedError
with the stage program's own message. tests/python/test_gpu.py holds its results to the stage
programs' bit for bit, and to a PyTorch reference by FlashAttention's tolerance rule.
"""

import ctypes
import os

__all__ = [
    "FlashExplorerError", "UnsupportedError", "NoGPUError", "CUDAError", "stages",
    "capabilities", "check", "flash_attn_func", "flash_attn_varlen_func", "flash_attn_backward",
    "library_path",
]

API_VERSION = 2  # FX_API_VERSION of api/fx_api.h, whose structs are mirrored below
_OK, _ERROR, _USAGE, _NO_GPU = 0, 1, 2, 77  # fx_api_status
_DTYPES = {"bf16": 0, "fp16": 1, "e4m3": 2}  # FX_API_BF16, FX_API_FP16, fx_problem.h's FX_E4M3
_MAX_HEAD_DIMS = 8
_MAX_HEAD_DIM_V_PAIRS = 4
_MSG_BYTES = 2048
DEFAULT_STAGE = "08_intra_wg_overlap"


class FlashExplorerError(Exception):
    """A call the library refused or failed; the message is the library's."""


class UnsupportedError(FlashExplorerError, ValueError):
    """Outside the stage's capabilities, or arguments it cannot take (FX_API_USAGE)."""


class NoGPUError(FlashExplorerError, RuntimeError):
    """No driver, no device, or a GPU the stage cannot run on (FX_API_NO_GPU)."""


class CUDAError(FlashExplorerError, RuntimeError):
    """A CUDA error in the call (FX_API_ERROR)."""


class _Caps(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_char_p), ("summary", ctypes.c_char_p),
        ("head_dims", ctypes.c_int * _MAX_HEAD_DIMS), ("n_head_dims", ctypes.c_int),
        ("head_dim_multiple", ctypes.c_int), ("head_dim_max", ctypes.c_int),
        ("dtypes", ctypes.c_uint), ("causal", ctypes.c_int), ("gqa", ctypes.c_int),
        ("varlen", ctypes.c_int), ("backward", ctypes.c_int),
        ("deterministic_backward", ctypes.c_int), ("min_sm", ctypes.c_int),
        ("sm90a_only", ctypes.c_int), ("limits", ctypes.c_char_p),
        ("head_dim_v_pairs", (ctypes.c_int * 2) * _MAX_HEAD_DIM_V_PAIRS),
        ("n_head_dim_v_pairs", ctypes.c_int),
    ]


class _Problem(ctypes.Structure):
    _fields_ = [
        ("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int),
        ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int), ("head_dim", ctypes.c_int),
        ("dtype", ctypes.c_int), ("causal", ctypes.c_int), ("softmax_scale", ctypes.c_double),
        ("varlen", ctypes.c_int), ("total_q", ctypes.c_int), ("total_k", ctypes.c_int),
        ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p),
        ("seqused_k", ctypes.c_void_p), ("head_dim_v", ctypes.c_int),
    ]


class _Layout(ctypes.Structure):
    _fields_ = [("batch_stride", ctypes.c_int64), ("row_stride", ctypes.c_int64),
                ("head_stride", ctypes.c_int64)]


class _FwdArgs(ctypes.Structure):
    _fields_ = [
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
        ("q_layout", _Layout), ("k_layout", _Layout), ("v_layout", _Layout),
        ("o_layout", _Layout),
        ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p),
        ("seqused_k", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
    ]


class _BwdArgs(ctypes.Structure):
    _fields_ = [
        ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p), ("dout", ctypes.c_void_p), ("lse", ctypes.c_void_p),
        ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p),
        ("q_layout", _Layout), ("k_layout", _Layout), ("v_layout", _Layout),
        ("o_layout", _Layout),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
    ]


def library_path():
    """Where the library is loaded from (the first that exists of the module's places)."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("FLASH_EXPLORER_LIB", ""),
                  os.path.join(here, "libflash_explorer.so"),
                  os.path.join(here, "..", "..", "build", "lib", "libflash_explorer.so")]
    for path in candidates:
        if path and os.path.isfile(path):
            return os.path.abspath(path)
    raise FlashExplorerError(
        "libflash_explorer.so not found (set FLASH_EXPLORER_LIB, or build the repository: "
        "cmake -S . -B build && cmake --build build); looked in: "
        + ", ".join(p for p in candidates if p))


_lib = None


def _library():
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(library_path())
    lib.fx_api_version.restype = ctypes.c_int
    lib.fx_api_stage_count.restype = ctypes.c_int
    lib.fx_api_stage_id.restype = ctypes.c_char_p
    lib.fx_api_stage_id.argtypes = [ctypes.c_int]
    msg = [ctypes.c_char_p, ctypes.c_size_t]
    lib.fx_api_stage_caps.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Caps)] + msg
    lib.fx_api_check.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Problem), ctypes.c_int] + msg
    lib.fx_api_workspace_bytes.argtypes = [
        ctypes.c_char_p, ctypes.POINTER(_Problem), ctypes.c_int,
        ctypes.POINTER(ctypes.c_size_t)] + msg
    lib.fx_api_forward.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Problem),
                                   ctypes.POINTER(_FwdArgs)] + msg
    lib.fx_api_backward.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Problem),
                                    ctypes.POINTER(_BwdArgs)] + msg
    for f in ("fx_api_stage_caps", "fx_api_check", "fx_api_workspace_bytes", "fx_api_forward",
              "fx_api_backward"):
        getattr(lib, f).restype = ctypes.c_int
    version = lib.fx_api_version()
    if version != API_VERSION:
        raise FlashExplorerError(
            f"{library_path()} has C API version {version}; this module is for {API_VERSION}")
    _lib = lib
    return lib


def _raise(rc, buf):
    text = buf.value.decode("utf-8", "replace")
    if rc == _USAGE:
        raise UnsupportedError(text)
    if rc == _NO_GPU:
        raise NoGPUError(text)
    raise CUDAError(text or f"flash-explorer: error {rc}")


def _call(fn, *args):
    buf = ctypes.create_string_buffer(_MSG_BYTES)
    rc = fn(*args, buf, _MSG_BYTES)
    if rc != _OK:
        _raise(rc, buf)


def stages():
    """The ids of the library's stages, in reading order: ['01_naive', ..., '09_persistent']."""
    lib = _library()
    return [lib.fx_api_stage_id(i).decode() for i in range(lib.fx_api_stage_count())]


def capabilities(stage):
    """Stage `stage`'s capabilities as a dict (fx_api_caps): head_dims (a list, or None when
    the stage takes every multiple of head_dim_multiple up to head_dim_max), dtypes
    (['bf16', 'fp16']), causal, gqa, varlen, backward, deterministic_backward (bools),
    min_sm, sm90a_only, summary, limits (text or None), head_dim_v_pairs (the (head_dim,
    head_dim_v) pairs with V and O narrower or wider than Q and K; [] when none)."""
    caps = _Caps()
    _call(_library().fx_api_stage_caps, stage.encode(), ctypes.byref(caps))
    return {
        "id": caps.id.decode(),
        "summary": caps.summary.decode(),
        "head_dims": list(caps.head_dims[:caps.n_head_dims]) if caps.n_head_dims else None,
        "head_dim_multiple": caps.head_dim_multiple,
        "head_dim_max": caps.head_dim_max,
        "dtypes": [n for n, code in _DTYPES.items() if caps.dtypes & (1 << code)],
        "causal": bool(caps.causal),
        "gqa": bool(caps.gqa),
        "varlen": bool(caps.varlen),
        "backward": bool(caps.backward),
        "deterministic_backward": bool(caps.deterministic_backward),
        "min_sm": caps.min_sm,
        "sm90a_only": bool(caps.sm90a_only),
        "limits": caps.limits.decode() if caps.limits else None,
        "head_dim_v_pairs": [tuple(caps.head_dim_v_pairs[i])
                             for i in range(caps.n_head_dim_v_pairs)],
    }


def _problem(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, causal,
             softmax_scale, head_dim_v=0):
    if dtype not in _DTYPES:
        raise UnsupportedError(f"flash-explorer: dtype {dtype!r} is not one of bf16, fp16")
    # The C API's ints are 32-bit: a larger size would wrap (2^32 + 8 keys read as 8).
    for name, n in (("batch", batch), ("seqlen_q", seqlen_q), ("seqlen_k", seqlen_k),
                    ("heads_q", heads_q), ("heads_kv", heads_kv), ("head_dim", head_dim),
                    ("head_dim_v", head_dim_v)):
        if not 0 <= int(n) < 2**31:
            raise UnsupportedError(f"flash_explorer: {name} ({n}) is outside [0, 2^31)")
    # FlashAttention's softmax_scale: None is 1/sqrt(head_dim); a number is that number. The
    # C API reads <= 0 as the default, so 0 or a negative scale would silently become it.
    if softmax_scale is not None and not float(softmax_scale) > 0:
        raise UnsupportedError(f"flash_explorer: softmax_scale ({softmax_scale}) must be "
                               "positive (None for 1/sqrt(head_dim))")
    return _Problem(batch=batch, seqlen_q=seqlen_q, seqlen_k=seqlen_k, heads_q=heads_q,
                    heads_kv=heads_kv, head_dim=head_dim, dtype=_DTYPES[dtype],
                    causal=int(bool(causal)),
                    softmax_scale=0.0 if softmax_scale is None else float(softmax_scale),
                    head_dim_v=int(head_dim_v))


def check(stage, batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype="bf16",
          causal=False, softmax_scale=None, backward=False, head_dim_v=0):
    """Raises UnsupportedError with the stage program's message when the stage cannot take
    the problem (fx_api_check); needs no GPU and no torch. dtype: 'bf16' or 'fp16';
    head_dim_v: V's and O's columns, 0 for head_dim."""
    p = _problem(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, causal,
                 softmax_scale, head_dim_v)
    _call(_library().fx_api_check, stage.encode(), ctypes.byref(p), int(bool(backward)))


def _torch():
    try:
        import torch
    except ImportError as e:
        raise FlashExplorerError("flash_explorer: running a stage needs PyTorch (import torch "
                                 f"failed: {e})") from None
    return torch


def _dtype_name(torch, tensors, names, dims=4, shape_text="[batch, seqlen, heads, head_dim]"):
    dtypes = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    for t, name in zip(tensors, names):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"flash_explorer: {name} is a {type(t).__name__}, not a torch.Tensor")
        if not t.is_cuda:
            raise TypeError(f"flash_explorer: {name} is on {t.device}, not a CUDA device")
        if t.dtype != tensors[0].dtype:
            raise TypeError(f"flash_explorer: {name} is {t.dtype}, {names[0]} "
                            f"{tensors[0].dtype}: they must be one dtype")
        if t.device != tensors[0].device:
            raise ValueError(f"flash_explorer: {name} is on {t.device}, {names[0]} on "
                             f"{tensors[0].device}")
        if t.dim() != dims:
            raise ValueError(f"flash_explorer: {name} has shape {tuple(t.shape)}: "
                             f"{shape_text} expected")
        if any(st == 0 and n > 1 for st, n in zip(t.stride(), t.shape)):
            raise UnsupportedError(f"flash_explorer: {name} has a stride of 0 (an expanded "
                                   f"tensor, strides {tuple(t.stride())}): the stages take "
                                   f"each row in memory of its own; pass {name}.contiguous()")
        if t.stride(-1) != 1:
            raise UnsupportedError(f"flash_explorer: {name}'s head_dim stride is "
                                   f"{t.stride(-1)}: the stages take head_dim contiguous (1)")
    if tensors[0].dtype not in dtypes:
        raise TypeError(f"flash_explorer: {names[0]} is {tensors[0].dtype}: the stages take "
                        "torch.bfloat16 or torch.float16")
    return dtypes[tensors[0].dtype]


def _shapes(q, k, v):
    """Sizes of q [b, sq, hq, d], k [b, sk, hkv, d], v [b, sk, hkv, dv]; dv is V's (and
    O's) head_dim, which a stage may take unequal to d (caps' head_dim_v_pairs)."""
    b, sq, hq, d = q.shape
    bk, sk, hkv, dk = k.shape
    if k.shape[:3] != v.shape[:3] or bk != b or dk != d:
        raise ValueError(f"flash_explorer: q {tuple(q.shape)}, k {tuple(k.shape)}, v "
                         f"{tuple(v.shape)}: k must be [batch, seqlen_k, heads_kv, head_dim] "
                         "with q's batch and head_dim, v [batch, seqlen_k, heads_kv, "
                         "head_dim_v]")
    return b, sq, sk, hq, hkv, d, v.shape[3]


def _ptr(t, keep):
    """t's device address; a tensor with no elements (a varlen batch of empty sequences)
    has none (0), which the C API refuses, so it gets a 16-byte stand-in that no kernel
    reads (the programs allocate such buffers the same way). `keep` holds it alive."""
    if t.numel() > 0:
        return t.data_ptr()
    stand_in = _torch().empty(8, dtype=t.dtype, device=t.device)
    keep.append(stand_in)
    return stand_in.data_ptr()


def _layout(t):
    s = t.stride()
    return _Layout(s[0], s[1], s[2])


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, *, stage=DEFAULT_STAGE,
                    return_lse=False):
    """FlashAttention's forward on torch CUDA tensors with one stage's kernels.

    q: [batch, seqlen_q, heads_q, head_dim]; k: [batch, seqlen_k, heads_kv, head_dim]; v:
    [batch, seqlen_k, heads_kv, head_dim_v], head_dim_v = head_dim unless the stage lists
    the pair (capabilities()["head_dim_v_pairs"]); heads_q a multiple of heads_kv; bf16 or
    fp16, one CUDA device, head_dim contiguous, other strides multiples of 16 bytes.
    softmax_scale: None for 1/sqrt(head_dim). causal: bottom-right aligned. Runs on the
    current stream of q's device.
    Returns out [batch, seqlen_q, heads_q, head_dim_v] (q's dtype), and with return_lse also
    lse, fp32 [batch, heads_q, seqlen_q] in natural log.
    Raises UnsupportedError (the stage program's message) for a case the stage excludes,
    TypeError for non-CUDA or wrong-dtype tensors, NoGPUError, CUDAError."""
    torch = _torch()
    dtype = _dtype_name(torch, (q, k, v), ("q", "k", "v"))
    b, sq, sk, hq, hkv, d, dv = _shapes(q, k, v)
    p = _problem(b, sq, sk, hq, hkv, d, dtype, causal, softmax_scale, dv)
    out = torch.empty((b, sq, hq, dv), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)
    with torch.cuda.device(q.device):
        a = _FwdArgs(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=out.data_ptr(),
                     lse=lse.data_ptr(), q_layout=_layout(q), k_layout=_layout(k),
                     v_layout=_layout(v), o_layout=_layout(out),
                     stream=torch.cuda.current_stream(q.device).cuda_stream)
        _call(_library().fx_api_forward, stage.encode(), ctypes.byref(p), ctypes.byref(a))
    return (out, lse) if return_lse else out


def _int_list(t, name):
    """A 1-D integer tensor (any device) or sequence as a Python list, for the host copy."""
    torch = _torch()
    if isinstance(t, torch.Tensor):
        if t.dim() != 1 or t.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"flash_explorer: {name} must be a 1-D int32 tensor, not "
                            f"{t.dtype} of shape {tuple(t.shape)}")
        return [int(x) for x in t.tolist()]
    return [int(x) for x in t]


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           softmax_scale=None, causal=False, *, seqused_k=None,
                           stage="09_persistent", return_lse=False):
    """FlashAttention's variable-length forward (flash_attn_varlen_func) with one stage's
    kernels, for stages whose capabilities have varlen (09).

    q: [total_q, heads_q, head_dim], k: [total_k, heads_kv, head_dim], v: [total_k,
    heads_kv, head_dim_v] (as flash_attn_func's), the sequences
    packed along the rows: sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1
    (cu_seqlens_q, cu_seqlens_k: batch + 1 int32, 0 first, non-decreasing, on any device);
    seqused_k: None, or batch int32 counts, the first keys of each sequence it attends.
    max_seqlen_q, max_seqlen_k: the longest sequence's lengths. Causal is bottom-right
    aligned per sequence. The offsets are read on the host too (the C API checks them
    there), which synchronizes with their device when they live on a GPU.
    Returns out [total_q, heads_q, head_dim_v], and with return_lse lse fp32 [heads_q, total_q].
    Raises as flash_attn_func does; UnsupportedError for offsets the program would refuse."""
    torch = _torch()
    dtype = _dtype_name(torch, (q, k, v), ("q", "k", "v"), dims=3,
                        shape_text="[total, heads, head_dim]")
    tq, hq, d = q.shape
    tk, hkv, dk = k.shape
    dv = v.shape[2]
    if k.shape[:2] != v.shape[:2] or dk != d:
        raise ValueError(f"flash_explorer: q {tuple(q.shape)}, k {tuple(k.shape)}, v "
                         f"{tuple(v.shape)}: k must be [total_k, heads_kv, head_dim] with q's "
                         "head_dim, v [total_k, heads_kv, head_dim_v]")
    cq, ck = _int_list(cu_seqlens_q, "cu_seqlens_q"), _int_list(cu_seqlens_k, "cu_seqlens_k")
    used = None if seqused_k is None else _int_list(seqused_k, "seqused_k")
    batch = len(cq) - 1
    if batch < 1 or len(ck) != len(cq) or (used is not None and len(used) != batch):
        raise ValueError(f"flash_explorer: cu_seqlens_q has {len(cq)} entries, cu_seqlens_k "
                         f"{len(ck)}" + ("" if used is None else f", seqused_k {len(used)}")
                         + ": batch + 1, batch + 1 and batch expected (batch >= 1)")
    host = lambda xs: (ctypes.c_int * len(xs))(*xs)
    cq_h, ck_h = host(cq), host(ck)
    used_h = None if used is None else host(used)
    p = _problem(batch, int(max_seqlen_q), int(max_seqlen_k), hq, hkv, d, dtype, causal,
                 softmax_scale, dv)
    p.varlen, p.total_q, p.total_k = 1, tq, tk
    p.cu_seqlens_q = ctypes.cast(cq_h, ctypes.c_void_p)
    p.cu_seqlens_k = ctypes.cast(ck_h, ctypes.c_void_p)
    p.seqused_k = None if used_h is None else ctypes.cast(used_h, ctypes.c_void_p)
    dev = lambda xs: torch.tensor(xs, dtype=torch.int32, device=q.device)
    cq_d, ck_d = dev(cq), dev(ck)
    used_d = None if used is None else dev(used)
    out = torch.empty((tq, hq, dv), dtype=q.dtype, device=q.device)
    lse = torch.empty((hq, tq), dtype=torch.float32, device=q.device)
    layout = lambda t: _Layout(0, t.stride(0), t.stride(1))  # no batch stride when packed
    keep = []
    with torch.cuda.device(q.device):
        a = _FwdArgs(q=_ptr(q, keep), k=_ptr(k, keep), v=_ptr(v, keep), o=_ptr(out, keep),
                     lse=_ptr(lse, keep), q_layout=layout(q), k_layout=layout(k),
                     v_layout=layout(v), o_layout=layout(out), cu_seqlens_q=cq_d.data_ptr(),
                     cu_seqlens_k=ck_d.data_ptr(),
                     seqused_k=None if used_d is None else used_d.data_ptr(),
                     stream=torch.cuda.current_stream(q.device).cuda_stream)
        _call(_library().fx_api_forward, stage.encode(), ctypes.byref(p), ctypes.byref(a))
    return (out, lse) if return_lse else out


def flash_attn_backward(dout, q, k, v, out, lse, softmax_scale=None, causal=False, *,
                        stage="03_flash2"):
    """The backward of flash_attn_func for stages with one (01, 02, 03): dq, dk, dv from
    dout, the inputs, and out and lse from the same stage's forward (return_lse=True).
    Same layouts, rules and errors as flash_attn_func; dout in out's shape."""
    torch = _torch()
    dtype = _dtype_name(torch, (q, k, v, out, dout), ("q", "k", "v", "out", "dout"))
    b, sq, sk, hq, hkv, d, dv = _shapes(q, k, v)
    if (tuple(out.shape) != (b, sq, hq, dv) or dout.shape != out.shape
            or tuple(lse.shape) != (b, hq, sq)):
        raise ValueError("flash_explorer: out and dout must be [batch, seqlen_q, heads_q, "
                         "head_dim_v], lse [batch, heads_q, seqlen_q]")
    if lse.dtype != torch.float32 or not lse.is_contiguous():
        raise TypeError("flash_explorer: lse must be contiguous torch.float32")
    if lse.device != q.device:
        raise TypeError(f"flash_explorer: lse is on {lse.device}, q on {q.device}")
    like = lambda t: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    if dout.stride() != out.stride():
        dout = like(out).copy_(dout)  # the C API gives dO O's layout
    p = _problem(b, sq, sk, hq, hkv, d, dtype, causal, softmax_scale, dv)
    dq, dk, dv = like(q), like(k), like(v)  # dQ in Q's layout, dK in K's, dV in V's
    with torch.cuda.device(q.device):
        a = _BwdArgs(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=out.data_ptr(),
                     dout=dout.data_ptr(), lse=lse.data_ptr(), dq=dq.data_ptr(),
                     dk=dk.data_ptr(), dv=dv.data_ptr(), q_layout=_layout(q),
                     k_layout=_layout(k), v_layout=_layout(v), o_layout=_layout(out),
                     stream=torch.cuda.current_stream(q.device).cuda_stream)
        _call(_library().fx_api_backward, stage.encode(), ctypes.byref(p), ctypes.byref(a))
    return dq, dk, dv

