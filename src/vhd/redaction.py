"""One place that hides secrets: in configuration data, command lines and free text.

Everything vhd stores, prints or exports that might carry a secret goes through here: a run's
configuration (`redact`), the command line kept with a run (`redact_command`), and error text
that may echo a request (`redact_text`).

Example:
    >>> redact({"backends": {"x": {"api_key": "sk-123", "api_key_env": "KEY"}}})
    {'backends': {'x': {'api_key': '<redacted>', 'api_key_env': 'KEY'}}}
    >>> redact_command("vhd annotate --api-key sk-123 x/")
    'vhd annotate --api-key *** x/'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

SECRET_HINTS = ("key", "token", "secret", "password", "authorization")
"""A mapping key containing one of these (and not ending in ``_env``) holds a secret."""

_SECRET_FLAG = re.compile(
    r"(?<!\S)(--?(?:[\w-]*[-_])?(?:api[-_]?key|key|token|secret|password|passwd))(=|\s+)(\S+)", re.IGNORECASE
)
_SECRET_WORD = re.compile(r"\b(sk|hf|ghp|xox[bp])[-_][A-Za-z0-9_-]{8,}")
_SECRET_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s'\",}]+"),
    re.compile(r"(?i)((?:api[-_]?key|authorization)['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}"),
)


def is_secret_key(key: object) -> bool:
    """Whether a mapping key names a secret (``api_key`` yes, ``api_key_env`` no)."""
    text = str(key).lower()
    return any(hint in text for hint in SECRET_HINTS) and not text.endswith("_env")


def redact(value: Any) -> Any:
    """Replace values whose key looks like a secret by ``<redacted>``, in nested dicts and lists."""
    if isinstance(value, dict):
        return {k: "<redacted>" if is_secret_key(k) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redact_command(command: str) -> str:
    """Hide values of flags named like a key, token, secret or password, and API-key-like words.

    Args:
        command: A command line as one string.

    Returns:
        The command with such values replaced by ``***``.
    """
    command = _SECRET_FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}***", command)
    return _SECRET_WORD.sub(lambda m: f"{m.group(1)}-***", command)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove API keys and authorization values from a message.

    Args:
        text: Any text that might echo a request (an SDK error, a server's error body).
        secrets: Exact secret values to remove wherever they appear.

    Returns:
        The text with secrets replaced by ``***``.
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.re.groups else "") + "***", text)
    return text
