"""torch.nn.attention of the stand-in: the backend forced by sdpa_kernel."""

import contextlib


class SDPBackend:
    FLASH_ATTENTION = "flash"
    CUDNN_ATTENTION = "cudnn"
    EFFICIENT_ATTENTION = "efficient"


current = [None]


@contextlib.contextmanager
def sdpa_kernel(backend):
    old = current[0]
    current[0] = backend
    try:
        yield
    finally:
        current[0] = old
