#!/usr/bin/env python3
"""far_below_first.py DIR — writes a --load case (common/fx_load.h) whose first K/V block
lies far below the rest: the row's first block holds one key with a logit of about -6·10^8
in log2 units, the keys after it logits of a few hundred.

Why this case: the fast softmax (common/fx_exact_rows.cuh) takes each block's P relative
to R, the block's m·c rounded to fp32. Rounded to nearest, R could sit up to half an ulp
below m·c — 32 here, where an fp32 ulp is 64 — so the first block's one P was up to 2^32,
inf once packed to fp16 for the PV GEMM; the next block's rescale 2^(R_old − R_new) = 0
then turned O into inf·0 = NaN while ℓ stayed finite, and the check after the loop, which
reads the last R and ℓ, let the NaN through. R rounded up keeps every P at or below 1. The
far key's logit is chosen (by emulating fp32 here) so that rounding to nearest would give
the largest such P, 2^e with e close to 16: the case fails loudly if R is ever rounded to
nearest again.

The case: batch 1, 2 query heads over 1 kv head, seqlen_q 16, seqlen_k 257 (the stages
visit the K/V blocks from the last, and 256 is a multiple of every kBlockN, so the last
block holds key 256 alone), head_dim 128, fp16, softmax_scale 100, not causal. Every Q
entry is 63; key 256's entries are -x (x found below), the other keys' entries are small
values from a fixed generator, V's entries too. Writes DIR/problem.txt, q.bin, k.bin, v.bin.
Needs python3 alone (struct, math).
"""
import math
import os
import struct
import sys

SEQLEN_Q, SEQLEN_K, HEADS_Q, HEADS_KV, HEAD_DIM = 16, 257, 2, 1, 128
SCALE = 100.0
Q_VALUE = 63.0
FAR_KEY = 256


def f32(x):
    """x rounded to fp32 (round to nearest even), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f16(x):
    """x rounded to fp16, as a Python float."""
    return struct.unpack("<e", struct.pack("<e", x))[0]


def ulp32(x):
    """The spacing of fp32 numbers at |x| (x normal)."""
    return 2.0 ** (math.frexp(abs(x))[1] - 24)


def far_entry():
    """The fp16 value x of key 256's entries (all -x) whose logit m = -128·63·x (exact in
    fp32) gives the largest m·c − round_to_nearest(m·c), c = fp32(SCALE·log2 e) as the
    harness computes it: the exponent of that block's P under the old rounding."""
    c = f32(SCALE * 1.4426950408889634)
    best = None
    x = 512.0
    while x < 576.0:
        xf = f16(x)
        m = -HEAD_DIM * Q_VALUE * xf  # exact: an integer below 2^24·ulp
        exact = m * c  # double holds the fp32 product exactly
        e = exact - f32(exact)
        if best is None or e > best[1]:
            best = (xf, e, exact)
        x += 0.125
    return best


def small(i):
    """A fixed pseudo-random value in [-1/8, 1/8) for element i (a 32-bit LCG)."""
    v = (1103515245 * (i + 12345) + 12345) & 0x7FFFFFFF
    return (v / 2.0**31 - 0.5) / 4.0


def write_bits(path, values):
    with open(path, "wb") as f:
        f.write(b"".join(struct.pack("<e", v) for v in values))


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    x, e, logit = far_entry()
    with open(os.path.join(out, "problem.txt"), "w") as f:
        f.write("# tests/cli/far_below_first.py: key %d's logit %.6g (log2 units), under\n"
                "# round-to-nearest its block's P would be 2^%.3f\n" % (FAR_KEY, logit, e))
        for k, v in (("batch", 1), ("seqlen_q", SEQLEN_Q), ("seqlen_k", SEQLEN_K),
                     ("heads_q", HEADS_Q), ("heads_kv", HEADS_KV), ("head_dim", HEAD_DIM),
                     ("dtype", "fp16"), ("causal", 0), ("softmax_scale", "%g" % SCALE)):
            f.write("%s=%s\n" % (k, v))
    # [batch, seqlen, heads, head_dim], row-major
    write_bits(os.path.join(out, "q.bin"), [Q_VALUE] * (SEQLEN_Q * HEADS_Q * HEAD_DIM))
    k = []
    for key in range(SEQLEN_K):
        for d in range(HEAD_DIM):
            k.append(-x if key == FAR_KEY else f16(small(key * HEAD_DIM + d) / 64.0))
    write_bits(os.path.join(out, "k.bin"), k)
    v = [f16(small(7 * i + 3) * 8.0) for i in range(SEQLEN_K * HEADS_KV * HEAD_DIM)]
    write_bits(os.path.join(out, "v.bin"), v)
    print("far_below_first.py: %s (key %d logit %.6g in log2 units, P 2^%.3f if rounded to "
          "nearest)" % (out, FAR_KEY, logit, e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
