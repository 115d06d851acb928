"""torch.nested of the stand-in: nested jagged tensors that know their sequences' lengths
(SDPA's cost is counted per sequence, bench/selftest.sh)."""

import torch


class _Jagged(torch.Tensor):
    """[batch, j, heads, head_dim] over packed values, or its transpose(1, 2)."""

    def __init__(self, shape, dtype, lengths, ragged_dim):
        torch.Tensor.__init__(self, shape, dtype)
        self.lengths = lengths
        self.ragged_dim = ragged_dim

    def transpose(self, a, b):
        s = list(self.shape)
        s[a], s[b] = s[b], s[a]
        rd = b if self.ragged_dim == a else a if self.ragged_dim == b else self.ragged_dim
        return _Jagged(s, self.dtype, self.lengths, rd)


def nested_tensor_from_jagged(values, offsets, lengths=None, jagged_dim=None, min_seqlen=None,
                              max_seqlen=None):
    cu = offsets.values
    if max_seqlen is None:
        torch._busy(40)  # a real one reads the offsets back from the GPU: a sync
    lens = [cu[i + 1] - cu[i] for i in range(len(cu) - 1)]
    total, heads, head_dim = values.shape
    return _Jagged((len(lens), None, heads, head_dim), values.dtype, lens, 1)
