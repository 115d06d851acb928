"""test_gpu.py — python/flash_explorer on a GPU, with PyTorch (pytest).

Three kinds of check, each on every stage the GPU can run (the Hopper stages 04–09 need
compute capability 9.0; the rest is skipped with the reason):

* test_bitwise_*: the binding's outputs equal the stage program's bit for bit on the same
  inputs. The program draws the inputs, runs, checks itself and writes them and its outputs
  (`--save DIR`, common/fx_save.h); the binding then runs the same stage on those inputs.
  The programs are found in $FX_BIN (default: build/bin of this repository).
* test_flash_attn_output (and _varlen, _backward): a matrix in the manner of
  FlashAttention's test_flash_attn_output (seqlens, head_dims, causal, MHA/GQA/MQA, bf16 and
  fp16) against a PyTorch reference, with FlashAttention's tolerance rule: the stage's
  error from a reference computed in fp32 on the same low-precision inputs must be at most
  twice the error of the same attention computed in the low precision (its matmuls'
  outputs rounded to the dtype), plus a slack of two roundings at 0.3 in the dtype
  (FA3's hopper/test_flash_attn.py: fwd_atol). Rows that see no key must give O = 0 and
  LSE = -inf exactly, as everywhere in this repository.
* test_refuses_*: what the binding refuses on a GPU, and with which error.

Run (the GPU machine; tests/gpu/README.md):
    FX_BIN=build/bin FLASH_EXPLORER_LIB=build/lib/libflash_explorer.so \
        python3 -m pytest -q tests/python/test_gpu.py
"""
import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
import flash_explorer as fx  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

BIN = os.environ.get("FX_BIN", os.path.join(ROOT, "build", "bin"))
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
CC = torch.cuda.get_device_capability()


def runnable(stage):
    """The stage's reason not to run on this GPU, or None."""
    c = fx.capabilities(stage)
    if c["sm90a_only"] and CC != (9, 0):
        return f"{stage} runs on compute capability 9.0 only (this GPU: {CC[0]}.{CC[1]})"
    if CC[0] * 10 + CC[1] < c["min_sm"]:
        return f"{stage} needs compute capability {c['min_sm'] / 10:.1f}"
    return None


def need(stage):
    why = runnable(stage)
    if why:
        pytest.skip(why)
    return fx.capabilities(stage)


def head_dims(caps):
    """The head_dims a matrix tries: the stage's list, or 40, 64, 128, 256 where it takes
    every multiple of 8 (40: a head_dim no Hopper stage has)."""
    return caps["head_dims"] or [40, 64, 128, 256]


# ---- references ------------------------------------------------------------------------

def visible(seqlen_q, seqlen_k, causal, device):
    """[seqlen_q, seqlen_k] bool: key j is visible to query i (causal bottom-right aligned:
    j <= i + seqlen_k - seqlen_q)."""
    if not causal:
        return torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    i = torch.arange(seqlen_q, device=device).unsqueeze(1)
    j = torch.arange(seqlen_k, device=device).unsqueeze(0)
    return j <= i + (seqlen_k - seqlen_q)


def attention_ref(q, k, v, causal, scale, upcast=True):
    """O [b, sq, hq, d] and LSE [b, hq, sq] (natural log) for q [b, sq, hq, d], k and v
    [b, sk, hkv, d]. upcast: every step in fp32 from the low-precision inputs, O rounded to
    the dtype at the end (FlashAttention's attention_ref); else the scores and P @ V are
    computed and rounded in the dtype (its upcast=False, the "pt" baseline). A row with no
    visible key: O = 0, LSE = -inf."""
    dt = q.dtype
    g = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(g, dim=2)
    v = v.repeat_interleave(g, dim=2)
    if upcast:
        q, k, v = q.float(), k.float(), v.float()
    s = torch.einsum("bqhd,bkhd->bhqk", q * scale if not upcast else q, k)
    s = s.float() * (scale if upcast else 1.0)
    mask = visible(q.shape[1], k.shape[1], causal, q.device)
    s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # -inf where a row sees no key (or seqlen_k is 0)
    # Such a row's softmax is 0/0: give it zeros, through a path whose gradient is 0 too.
    dead = ~mask.any(dim=1)[:, None]
    p = torch.softmax(s.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
    if not upcast:
        p = p.to(dt)
    o = torch.einsum("bhqk,bkhd->bqhd", p, v).to(dt)
    return o, lse


def assert_fa_rule(name, out, ref, pt, slack=None):
    """FlashAttention's rule: max|out - ref| <= 2 max|pt - ref| + slack (inf-aware: the
    -inf pattern must agree exactly, and the finite entries obey the rule)."""
    out, ref, pt = out.float(), ref.float(), pt.float()
    inf_out, inf_ref = torch.isneginf(out), torch.isneginf(ref)
    assert torch.equal(inf_out, inf_ref), f"{name}: -inf at {int((inf_out ^ inf_ref).sum())} " \
        "entries where the reference has none, or the reverse"
    assert torch.isfinite(out[~inf_out]).all(), f"{name}: non-finite values"
    fin = ~inf_ref
    if not fin.any():
        return
    err = (out[fin] - ref[fin]).abs().max().item()
    err_pt = (pt[fin] - ref[fin]).abs().max().item()
    if slack is None:
        slack = 0.0
    bound = 2 * err_pt + slack
    assert err <= bound, f"{name}: max error {err:.3e} > 2 * {err_pt:.3e} + {slack:.3e}"


def fwd_slack(ref, dtype):
    """FA3's fwd_atol: twice the rounding of (ref + 0.3 - 0.3) in the dtype."""
    r = ref.to(dtype)
    return 2 * (r + 0.3 - 0.3 - r).abs().max().item() if r.numel() else 0.0


def draw(shape, dtype, gen):
    return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)


# ---- bitwise equality with the stage programs ------------------------------------------

def read_problem(folder):
    vals = {}
    with open(os.path.join(folder, "problem.txt")) as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            vals[key] = value
    return vals


def load_bits(folder, name, dtype, shape):
    a = np.fromfile(os.path.join(folder, name), dtype=np.int16)
    assert a.size == math.prod(shape), f"{name}: {a.size} elements, {shape} expected"
    return torch.from_numpy(a).view(dtype).reshape(shape).cuda()


def load_f32(folder, name, shape):
    a = np.fromfile(os.path.join(folder, name), dtype=np.float32)
    assert a.size == math.prod(shape), f"{name}: {a.size} elements, {shape} expected"
    return torch.from_numpy(a).reshape(shape)


def assert_bits_equal(name, got, want):
    """Bit for bit: the fp32 patterns of got (converted exactly from its dtype) and want."""
    g = got.float().cpu().contiguous().view(torch.int32)
    w = want.contiguous().view(torch.int32)
    differ = int((g != w).sum())
    assert differ == 0, f"{name}: {differ} of {g.numel()} elements differ from the program's"


def ordered(bits16):
    """int16 dtype patterns (sign-magnitude) as integers in the order of their values, so
    that the difference of two is their distance in units in the last place."""
    x = bits16.to(torch.int32)
    return torch.where(x < 0, -(x & 0x7FFF), x)


def assert_within_one_ulp(name, got, want):
    """got (dtype) within one unit in the dtype's last place of want (fp32 copies of dtype
    values): what a sum in fp32 gives when only the order of its additions changes."""
    w = want.to(got.dtype).cuda()
    assert torch.equal(w.float().cpu(), want), f"{name}: the program's values are not {got.dtype}"
    dist = (ordered(got.view(torch.int16)) - ordered(w.view(torch.int16))).abs()
    assert int(dist.max()) <= 1, f"{name}: {int((dist > 1).sum())} elements more than one " \
        "ulp from the program's"


def run_program(stage, args, folder):
    exe = os.path.join(BIN, f"stage_{stage}")
    if not os.path.isfile(exe):
        pytest.skip(f"{exe} not built (set FX_BIN)")
    cmd = [exe] + args + ["--save", str(folder)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return read_problem(folder)


BITWISE_CASES = [
    # (name, program arguments): GQA causal with seqlen_q != seqlen_k (and rows that see no
    # key: seqlen_q > seqlen_k), and an fp16 MHA one at another head_dim.
    ("gqa_causal_bf16", ["--batch", "2", "--seqlen-q", "300", "--seqlen-k", "217", "--heads-q",
                         "4", "--heads-kv", "2", "--head-dim", "64", "--causal"]),
    ("mha_fp16", ["--batch", "1", "--seqlen-q", "256", "--seqlen-k", "640", "--heads", "3",
                  "--head-dim", "128", "--dtype", "fp16", "--seed", "0x1234"]),
]


@pytest.mark.parametrize("case", BITWISE_CASES, ids=[c[0] for c in BITWISE_CASES])
@pytest.mark.parametrize("stage", fx.stages())
def test_bitwise_program(stage, case, tmp_path):
    caps = need(stage)
    args = list(case[1])
    if caps["backward"]:
        args.append("--bwd")
    pr = run_program(stage, args, tmp_path)
    b, sq, sk = int(pr["batch"]), int(pr["seqlen_q"]), int(pr["seqlen_k"])
    hq, hkv, d = int(pr["heads_q"]), int(pr["heads_kv"]), int(pr["head_dim"])
    dt = DTYPES[pr["dtype"]]
    scale, causal = float(pr["softmax_scale"]), pr["causal"] == "1"
    q = load_bits(tmp_path, "q.bin", dt, (b, sq, hq, d))
    k = load_bits(tmp_path, "k.bin", dt, (b, sk, hkv, d))
    v = load_bits(tmp_path, "v.bin", dt, (b, sk, hkv, d))
    out, lse = fx.flash_attn_func(q, k, v, scale, causal, stage=stage, return_lse=True)
    torch.cuda.synchronize()
    assert_bits_equal("O", out, load_f32(tmp_path, "o.f32", (b, sq, hq, d)))
    assert_bits_equal("LSE", lse, load_f32(tmp_path, "lse.f32", (b, hq, sq)))
    if caps["backward"]:
        dout = load_bits(tmp_path, "dout.bin", dt, (b, sq, hq, d))
        dq, dk, dv = fx.flash_attn_backward(dout, q, k, v, out, lse, scale, causal, stage=stage)
        torch.cuda.synchronize()
        # A backward that sums dQ with atomics (FlashAttention-2's, stage 03) is not
        # deterministic: its dQ equals the program's up to the order of the additions.
        # The program's own --repeat holds only a deterministic backward to bitwise
        # equality (fx_repeat_check), and so does this test.
        dq_prog = load_f32(tmp_path, "dq.f32", (b, sq, hq, d))
        if caps["deterministic_backward"]:
            assert_bits_equal("dQ", dq, dq_prog)
        else:
            assert_within_one_ulp("dQ", dq, dq_prog)
        assert_bits_equal("dK", dk, load_f32(tmp_path, "dk.f32", (b, sk, hkv, d)))
        assert_bits_equal("dV", dv, load_f32(tmp_path, "dv.f32", (b, sk, hkv, d)))


def pair_stages():
    return [s for s in fx.stages() if fx.capabilities(s)["head_dim_v_pairs"]]


@pytest.mark.parametrize("stage", pair_stages())
def test_bitwise_program_head_dim_v(stage, tmp_path):
    """head_dim_v != head_dim: V and O 128 columns wide beside Q and K's 192."""
    caps = need(stage)
    d, dv = caps["head_dim_v_pairs"][0]
    pr = run_program(stage, ["--batch", "2", "--seqlen-q", "333", "--seqlen-k", "700",
                             "--heads-q", "4", "--heads-kv", "2", "--head-dim", str(d),
                             "--head-dim-v", str(dv), "--causal"], tmp_path)
    assert (int(pr["head_dim"]), int(pr["head_dim_v"])) == (d, dv)
    b, sq, sk = int(pr["batch"]), int(pr["seqlen_q"]), int(pr["seqlen_k"])
    hq, hkv = int(pr["heads_q"]), int(pr["heads_kv"])
    dt = DTYPES[pr["dtype"]]
    q = load_bits(tmp_path, "q.bin", dt, (b, sq, hq, d))
    k = load_bits(tmp_path, "k.bin", dt, (b, sk, hkv, d))
    v = load_bits(tmp_path, "v.bin", dt, (b, sk, hkv, dv))
    out, lse = fx.flash_attn_func(q, k, v, float(pr["softmax_scale"]), True, stage=stage,
                                  return_lse=True)
    torch.cuda.synchronize()
    assert_bits_equal("O", out, load_f32(tmp_path, "o.f32", (b, sq, hq, dv)))
    assert_bits_equal("LSE", lse, load_f32(tmp_path, "lse.f32", (b, hq, sq)))


def varlen_stages():
    return [s for s in fx.stages() if fx.capabilities(s)["varlen"]]


@pytest.mark.parametrize("stage", varlen_stages())
def test_bitwise_program_varlen(stage, tmp_path):
    need(stage)
    pr = run_program(stage, ["--seqlens-q", "0,1,129,300,64", "--seqlens-k", "5,1,200,300,0",
                             "--seqused-k", "5,0,150,300,0", "--heads-q", "4", "--heads-kv",
                             "2", "--head-dim", "128", "--causal"], tmp_path)
    tq, tk = int(pr["total_q"]), int(pr["total_k"])
    hq, hkv, d = int(pr["heads_q"]), int(pr["heads_kv"]), int(pr["head_dim"])
    dt = DTYPES[pr["dtype"]]
    cq = [int(x) for x in pr["cu_seqlens_q"].split(",")]
    ck = [int(x) for x in pr["cu_seqlens_k"].split(",")]
    used = [int(x) for x in pr["seqused_k"].split(",")]
    q = load_bits(tmp_path, "q.bin", dt, (tq, hq, d))
    k = load_bits(tmp_path, "k.bin", dt, (tk, hkv, d))
    v = load_bits(tmp_path, "v.bin", dt, (tk, hkv, d))
    cq_t = torch.tensor(cq, dtype=torch.int32, device="cuda")
    ck_t = torch.tensor(ck, dtype=torch.int32, device="cuda")
    used_t = torch.tensor(used, dtype=torch.int32, device="cuda")
    out, lse = fx.flash_attn_varlen_func(q, k, v, cq_t, ck_t, int(pr["seqlen_q"]),
                                         int(pr["seqlen_k"]), float(pr["softmax_scale"]),
                                         pr["causal"] == "1", seqused_k=used_t, stage=stage,
                                         return_lse=True)
    torch.cuda.synchronize()
    assert_bits_equal("O", out, load_f32(tmp_path, "o.f32", (tq, hq, d)))
    assert_bits_equal("LSE", lse, load_f32(tmp_path, "lse.f32", (hq, tq)))


# ---- the matrix against PyTorch ----------------------------------------------------------

SEQLENS = [(1, 1), (113, 203), (128, 217), (256, 512), (799, 3), (1024, 1024), (2048, 2048)]
HEADS = {"mha": (6, 6), "gqa": (6, 2), "mqa": (6, 1)}


def matrix_params():
    """(stage, head_dim, head_dim_v): each head_dim with V as wide, and the stage's pairs."""
    for stage in fx.stages():
        caps = fx.capabilities(stage)
        for d in head_dims(caps):
            yield stage, d, d
        for d, dv in caps["head_dim_v_pairs"]:
            yield stage, d, dv


@pytest.mark.parametrize("seqlen_q,seqlen_k", SEQLENS)
@pytest.mark.parametrize("mha_type", list(HEADS))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("stage,d,dv", list(matrix_params()))
def test_flash_attn_output(stage, d, dv, dtype, causal, mha_type, seqlen_q, seqlen_k):
    need(stage)
    dt = DTYPES[dtype]
    hq, hkv = HEADS[mha_type]
    batch = 2
    gen = torch.Generator(device="cuda").manual_seed(seqlen_q * 7919 + seqlen_k * 31 + d + dv)
    q = draw((batch, seqlen_q, hq, d), dt, gen)
    k = draw((batch, seqlen_k, hkv, d), dt, gen)
    v = draw((batch, seqlen_k, hkv, dv), dt, gen)
    scale = 1.0 / math.sqrt(d)
    out, lse = fx.flash_attn_func(q, k, v, causal=causal, stage=stage, return_lse=True)
    o_ref, lse_ref = attention_ref(q, k, v, causal, scale, upcast=True)
    o_pt, lse_pt = attention_ref(q, k, v, causal, scale, upcast=False)
    assert out.shape == (batch, seqlen_q, hq, dv) and out.dtype == dt
    assert_fa_rule("O", out, o_ref, o_pt, fwd_slack(o_ref.float(), dt))
    # The LSE by the same rule, its slack two fp32 roundings of the largest |LSE|.
    fin = lse_ref[torch.isfinite(lse_ref)]
    lse_slack = 2 * math.ulp(fin.abs().max().item()) if fin.numel() else 0.0
    assert_fa_rule("LSE", lse, lse_ref, lse_pt, lse_slack)
    # Rows that see no key (causal, seqlen_q > seqlen_k): exactly 0.
    dead = ~visible(seqlen_q, seqlen_k, causal, q.device).any(dim=1)
    if dead.any():
        assert (out[:, dead] == 0).all(), "a row with no visible key is not 0"


VARLEN_CASES = [
    ("mixed", [0, 1, 127, 128, 129, 300, 1000], None),
    ("long_short", [2048, 1, 3, 512], [2047, 5, 3, 700]),
    ("all_empty_k", [64, 64], [0, 0]),
]


@pytest.mark.parametrize("case", VARLEN_CASES, ids=[c[0] for c in VARLEN_CASES])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mha_type", ["mha", "gqa"])
@pytest.mark.parametrize("stage", varlen_stages())
def test_flash_attn_varlen_output(stage, mha_type, dtype, causal, case):
    caps = need(stage)
    dt = DTYPES[dtype]
    hq, hkv = HEADS[mha_type]
    lens_q = case[1]
    lens_k = case[2] if case[2] is not None else case[1]
    gen = torch.Generator(device="cuda").manual_seed(len(lens_q) * 1009 + sum(lens_k))
    for d, dv in [(d, d) for d in caps["head_dims"]] + caps["head_dim_v_pairs"]:
        cq = [0]
        ck = [0]
        for a, b in zip(lens_q, lens_k):
            cq.append(cq[-1] + a)
            ck.append(ck[-1] + b)
        q = draw((cq[-1], hq, d), dt, gen)
        k = draw((ck[-1], hkv, d), dt, gen)
        v = draw((ck[-1], hkv, dv), dt, gen)
        scale = 1.0 / math.sqrt(d)
        out, lse = fx.flash_attn_varlen_func(
            q, k, v, torch.tensor(cq, dtype=torch.int32, device="cuda"),
            torch.tensor(ck, dtype=torch.int32, device="cuda"), max(lens_q), max(lens_k),
            causal=causal, stage=stage, return_lse=True)
        for i in range(len(lens_q)):
            qs, ks = q[cq[i]:cq[i + 1]][None], k[ck[i]:ck[i + 1]][None]
            vs = v[ck[i]:ck[i + 1]][None]
            name = f"d {d}/{dv}, sequence {i} ({lens_q[i]}, {lens_k[i]})"
            o_ref, lse_ref = attention_ref(qs, ks, vs, causal, scale, upcast=True)
            o_pt, lse_pt = attention_ref(qs, ks, vs, causal, scale, upcast=False)
            assert_fa_rule(f"O, {name}", out[cq[i]:cq[i + 1]][None], o_ref, o_pt,
                           fwd_slack(o_ref.float(), dt))
            fin = lse_ref[torch.isfinite(lse_ref)]
            lse_slack = 2 * math.ulp(fin.abs().max().item()) if fin.numel() else 0.0
            assert_fa_rule(f"LSE, {name}", lse[:, cq[i]:cq[i + 1]][None], lse_ref, lse_pt,
                           lse_slack)


def backward_stages():
    return [s for s in fx.stages() if fx.capabilities(s)["backward"]]


@pytest.mark.parametrize("seqlen_q,seqlen_k", [(113, 203), (256, 512), (799, 3), (1024, 1024)])
@pytest.mark.parametrize("mha_type", ["mha", "gqa"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("stage", backward_stages())
def test_flash_attn_backward(stage, d, dtype, causal, mha_type, seqlen_q, seqlen_k):
    need(stage)
    dt = DTYPES[dtype]
    hq, hkv = HEADS[mha_type]
    gen = torch.Generator(device="cuda").manual_seed(seqlen_q * 13 + seqlen_k + d)
    q = draw((2, seqlen_q, hq, d), dt, gen)
    k = draw((2, seqlen_k, hkv, d), dt, gen)
    v = draw((2, seqlen_k, hkv, d), dt, gen)
    dout = draw((2, seqlen_q, hq, d), dt, gen)
    scale = 1.0 / math.sqrt(d)
    out, lse = fx.flash_attn_func(q, k, v, causal=causal, stage=stage, return_lse=True)
    dq, dk, dv = fx.flash_attn_backward(dout, q, k, v, out, lse, causal=causal, stage=stage)
    grads = {}
    for upcast in (True, False):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        o, _ = attention_ref(*leaves, causal, scale, upcast=upcast)
        o.backward(dout)
        grads[upcast] = [t.grad for t in leaves]
    for name, got, ref, pt in zip(("dQ", "dK", "dV"), (dq, dk, dv), grads[True], grads[False]):
        assert_fa_rule(name, got, ref, pt, fwd_slack(ref.float(), dt))


# ---- streams and refusals ----------------------------------------------------------------

def test_side_stream_bitwise():
    """A call under torch.cuda.stream(s) runs on s and gives the default stream's bits."""
    stage = "09_persistent" if runnable("09_persistent") is None else "03_flash2"
    need(stage)
    gen = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = (draw((2, 1000, 4, 128), torch.bfloat16, gen) for _ in range(3))
    want = fx.flash_attn_func(q, k, v, causal=True, stage=stage)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = fx.flash_attn_func(q, k, v, causal=True, stage=stage)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_refuses_unsupported_head_dim():
    need("08_intra_wg_overlap")
    q = torch.zeros(1, 64, 2, 80, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(fx.UnsupportedError, match="head_dim 80 is not supported"):
        fx.flash_attn_func(q, q, q, stage="08_intra_wg_overlap")


def test_refuses_strides_and_types():
    stage = "03_flash2"
    need(stage)
    wide = torch.zeros(1, 64, 2, 68, dtype=torch.bfloat16, device="cuda")
    q = wide[..., :64]  # row and head strides of 68 elements: 136 bytes, not a multiple of 16
    with pytest.raises(fx.UnsupportedError):
        fx.flash_attn_func(q, q, q, stage=stage)
    t = torch.zeros(1, 64, 2, 64, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(fx.UnsupportedError, match="head_dim stride"):
        fx.flash_attn_func(t.transpose(2, 3), t, t, stage=stage)
    kv = torch.zeros(1, 64, 1, 64, dtype=torch.bfloat16, device="cuda").expand(1, 64, 2, 64)
    with pytest.raises(fx.UnsupportedError, match="stride of 0"):
        fx.flash_attn_func(t, kv, kv, stage=stage)  # a backward would write dK through it
    with pytest.raises(fx.UnsupportedError, match="softmax_scale"):
        fx.flash_attn_func(t, t, t, 0.0, stage=stage)
    with pytest.raises(TypeError, match="torch.bfloat16 or torch.float16"):
        fx.flash_attn_func(t.float(), t.float(), t.float(), stage=stage)
    with pytest.raises(TypeError, match="not a CUDA device"):
        fx.flash_attn_func(t.cpu(), t, t, stage=stage)
    with pytest.raises(fx.UnsupportedError, match="variable-length"):
        fx.flash_attn_varlen_func(t[0], t[0], t[0], [0, 64], [0, 64], 64, 64, stage=stage)
