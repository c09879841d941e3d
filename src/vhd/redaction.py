"""One place that hides secrets: in configuration data, command lines, URLs and free text.

Everything vhd stores, prints or exports that might carry a secret goes through here: a run's
configuration (`redact`), the command line kept with a run (`redact_command`), error text that
may echo a request (`redact_text`), and URLs (`redact_url`). A URL's user info
(``https://user:KEY@host``) and the values of key-like query parameters (``?api-key=``,
``?key=``, ``?token=``, ``?sig=``, ``X-Amz-Signature``...) become ``***`` in every one of them,
wherever the URL sits in a string.

Example:
    >>> redact({"backends": {"x": {"api_key": "sk-123", "api_key_env": "KEY"}}})
    {'backends': {'x': {'api_key': '<redacted>', 'api_key_env': 'KEY'}}}
    >>> redact({"base_url": "https://u:sk-123@host/v1?api-version=1&key=abc"})
    {'base_url': 'https://***@host/v1?api-version=1&key=***'}
    >>> redact_command("vhd annotate --api-key sk-123 x/")
    'vhd annotate --api-key *** x/'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

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


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#\s@'\"<>]+@")
_QUERY_PARAM = re.compile(r"([?&;])([^=&#;?\s'\"<>]+)=([^&#;\s'\"<>]*)")
SECRET_PARAM_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass", "auth", "authorization"}
    | {"sig", "signature", "credential", "credentials", "session", "sessionid", "jwt", "bearer", "hmac"}
)
"""A query parameter whose name has one of these words (split on punctuation) holds a secret."""
_SECRET_PARAM_INFIX = ("apikey", "token", "secret", "password", "signature", "credential")


def is_secret_param(name: str) -> bool:
    """Whether a URL query parameter names a secret (``api-key``, ``sig``, ``X-Amz-Signature``; not ``api-version``)."""
    text = unquote(name).lower()
    words = re.split(r"[^a-z0-9]+", text)
    return any(w in SECRET_PARAM_WORDS for w in words) or any(h in text for h in _SECRET_PARAM_INFIX)


def redact_url(text: str) -> str:
    """Hide the secrets URLs carry: user info and the values of key-like query parameters.

    Works on a URL or on any text holding URLs (a config value, an error message, a command line).

    Args:
        text: The URL or text.

    Returns:
        The text with ``scheme://USERINFO@`` as ``scheme://***@`` and ``?key=VALUE`` as ``?key=***``.

    Example:
        >>> redact_url("https://user:pw@h/v1?api-version=2&sig=abc")
        'https://***@h/v1?api-version=2&sig=***'
    """
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m.group(1)}***@", text)
    if "=" in text:
        text = _QUERY_PARAM.sub(
            lambda m: f"{m.group(1)}{m.group(2)}=***" if m.group(3) and is_secret_param(m.group(2)) else m.group(0),
            text,
        )
    return text


def is_secret_key(key: object) -> bool:
    """Whether a mapping key names a secret (``api_key`` yes, ``api_key_env`` no)."""
    text = str(key).lower()
    return any(hint in text for hint in SECRET_HINTS) and not text.endswith("_env")


def redact(value: Any) -> Any:
    """Hide the secrets of configuration data, in nested dicts, lists and tuples.

    A value whose key looks like a secret becomes ``<redacted>``; every other string goes through
    `redact_url` (a ``base_url`` with a key in its user info or query).
    """
    if isinstance(value, dict):
        return {k: "<redacted>" if is_secret_key(k) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v) for v in value)
    if isinstance(value, str):
        return redact_url(value)
    return value


def redact_command(command: str) -> str:
    """Hide values of flags named like a key, token, secret or password, and API-key-like words.

    Args:
        command: A command line as one string.

    Returns:
        The command with such values, and URL secrets (`redact_url`), replaced by ``***``.
    """
    command = redact_url(command)
    command = _SECRET_FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}***", command)
    return _SECRET_WORD.sub(lambda m: f"{m.group(1)}-***", command)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove API keys and authorization values from a message.

    Args:
        text: Any text that might echo a request (an SDK error, a server's error body).
        secrets: Exact secret values to remove wherever they appear.

    Returns:
        The text with secrets, and URL secrets (`redact_url`), replaced by ``***``.
    """
    text = redact_url(text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.re.groups else "") + "***", text)
    return text
