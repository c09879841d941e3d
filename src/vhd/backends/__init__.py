"""Model backends behind one interface (`Backend.generate`), resolved from ``BACKEND:MODEL``."""

from vhd.backends.base import Backend, GenerateConfig, Message, Output, Part
from vhd.backends.registry import available, create_backend, split_spec

__all__ = [
    "Backend",
    "GenerateConfig",
    "Message",
    "Output",
    "Part",
    "available",
    "create_backend",
    "split_spec",
]
