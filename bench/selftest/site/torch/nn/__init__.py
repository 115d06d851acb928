from . import functional  # noqa: F401
from . import attention  # noqa: F401
