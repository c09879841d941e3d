"""How `vhd serve` runs: the store, where it listens, who reviews, and the bind-safety rule.

Example:
    >>> settings = ServeSettings(store="run.db", reviewer="alice")
    >>> settings.set_name
    'review'
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from vhd.errors import ConfigError

DEFAULT_PORT = 8765
DEFAULT_HOST = "127.0.0.1"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
"""Hosts that only this machine reaches: the app may run on them without a token."""

DEFAULT_PREVIEW_MEMORY_MB = 768
"""Default memory budget of the preview decodes (two 8000x8000 RGB images at once: 256 MiB each)."""

_REVIEWER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


def default_reviewer() -> str:
    """The OS user's name (``reviewer`` when it cannot be read)."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        name = ""
    return name if _REVIEWER.fullmatch(name or "") else "reviewer"


def check_reviewer(name: str) -> str:
    """Validate a reviewer name (letters, digits, ``. _ @ -``; 64 at most)."""
    name = name.strip()
    if not _REVIEWER.fullmatch(name):
        raise ConfigError(f"reviewer name {name!r} is not valid: use letters, digits, '.', '_', '@' or '-'")
    return name


def check_bind(host: str, token_env: str | None) -> str | None:
    """The token the app requires, after the bind-safety rule: another host than loopback needs a token.

    Args:
        host: The address to listen on.
        token_env: The environment variable holding the token, or None.

    Returns:
        The token, or None (loopback without ``--auth-token-env``).

    Raises:
        ConfigError: A non-loopback host without a token variable, or the variable is unset or short.
    """
    if token_env is None:
        if host not in LOOPBACK:
            raise ConfigError(
                f"refusing to serve on {host} without a token: set one in an environment variable and pass "
                "--auth-token-env VAR (or serve on 127.0.0.1)"
            )
        return None
    token = os.environ.get(token_env, "")
    if len(token) < 16:
        raise ConfigError(
            f"--auth-token-env {token_env}: the variable is unset or shorter than 16 characters; "
            f"set it first, e.g. export {token_env}=\"$(python -c 'import secrets; print(secrets.token_urlsafe(24))')\""
        )
    return token


@dataclass
class ServeSettings:
    """Settings of one review app.

    Attributes:
        store: The store file (must exist).
        host: Address to listen on.
        port: Port to listen on.
        set_name: The labelled set the reviews go to.
        reviewer: The default reviewer name (a browser may set its own on the settings page).
        queue: A review-queue CSV (`vhd review-queue`): its samples, most uncertain first.
        no_reveal: Never send a clear (unblurred) image.
        token: The access token every request must carry (None: no token, loopback only).
        reviews_per_sample: Different reviewers asked per sample before it gets a label.
        preview_cache: Folder where previews are kept once made (None: ``<store>.previews`` beside
            the store).
        preview_memory_mb: Memory budget of the image decodes behind previews, in MiB: large images
            requested at once wait for room instead of being decoded together.
    """

    store: str | os.PathLike[str]
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    set_name: str = "review"
    reviewer: str = field(default_factory=default_reviewer)
    queue: str | os.PathLike[str] | None = None
    no_reveal: bool = False
    token: str | None = None
    reviews_per_sample: int = 1
    preview_cache: str | os.PathLike[str] | None = None
    preview_memory_mb: int = DEFAULT_PREVIEW_MEMORY_MB

    def __post_init__(self) -> None:
        from vhd.labels.sets import check_set_name

        check_set_name(self.set_name)
        self.reviewer = check_reviewer(self.reviewer)
        if self.reviews_per_sample < 1:
            raise ConfigError(f"--reviews-per-sample must be 1 or more, not {self.reviews_per_sample}")
        if self.preview_memory_mb < 16:
            raise ConfigError(f"--preview-memory must be at least 16 (MiB), not {self.preview_memory_mb}")
        if self.preview_cache is None:
            self.preview_cache = Path(f"{self.store}.previews")
        if not 0 < self.port < 65536:
            raise ConfigError(f"--port must be between 1 and 65535, not {self.port}")
        if self.token is None and self.host not in LOOPBACK:
            raise ConfigError(f"refusing to serve on {self.host} without a token: pass --auth-token-env VAR")
        if not Path(self.store).is_file():
            raise ConfigError(f"no store at {self.store}: create one with `vhd annotate PATH --store {self.store}`")
        if self.queue is not None and not Path(self.queue).is_file():
            raise ConfigError(
                f"no review queue at {self.queue}: write one with `vhd review-queue --store STORE --out FILE`"
            )
