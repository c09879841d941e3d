"""Default values the command line shows in its help, kept apart from `vhd.config`.

`vhd.config` builds pydantic models at import (a few hundred ms); the parser of ``vhd --help``
needs only these names, so they live here and `vhd.config` re-exports them.
"""

from __future__ import annotations

DEFAULT_MODEL = "hf:HuggingFaceTB/SmolVLM-256M-Instruct"
"""Used for every role when nothing else is given: small enough for a laptop CPU."""

MODEL_ENV = "VHD_MODEL"
"""Environment variable that sets the model of every role (below flags, above the file)."""
