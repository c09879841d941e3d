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

Known secrets. A backend calls `remember_secrets_in` with its options and `remember_secret`
with the key it sends; from then on `redact_text` (and so the store, which runs it over every
reply, reason and error it writes, and the log lines) also removes each known secret in these
forms: as is; URL-encoded (``quote``, ``quote_plus``, either case of hex); base64 (standard and
URL-safe, padded or not), also inside a longer base64 text such as the ``Authorization: Basic
base64(user:key)`` header an endpoint may echo (the whole base64 run is hidden). Unknown
secrets are caught by shape: ``Bearer TOKEN``, ``Basic BASE64(user:pass)``, ``sk-...`` /
``hf_...`` words, ``api_key=...``, URL user info, key-like query values and key-like path
segments (``https://gw/sk-.../v1``).
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

SECRET_HINTS = ("key", "token", "secret", "password", "authorization")
"""A mapping key containing one of these (and not ending in ``_env``) holds a secret."""

_SECRET_FLAG = re.compile(
    r"(?<!\S)(--?(?:[\w-]*[-_])?(?:api[-_]?key|key|token|secret|password|passwd))(=|\s+)(\S+)", re.IGNORECASE
)
_SECRET_WORD = re.compile(r"\b(sk|hf|ghp|xox[bp])[-_][A-Za-z0-9_-]{8,}")
_SECRET_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)(?=[^\s'\",}]*[0-9_.~+/=-])[^\s'\",}]{6,}"),
    re.compile(r"(?i)((?:api[-_]?key|authorization)['\"]?\s*[:=]\s*['\"]?)(?!basic\s)[^\s'\",}]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}"),
    re.compile(r"\b(hf|ghp|gho|ghs|xox[abprs])_[A-Za-z0-9]{16,}"),
)
_PATTERN_HINTS = ("bearer", "sk-", "hf_", "ghp_", "gho_", "ghs_", "xox", "apikey", "api_key", "api-key", "authoriz")
"""A cheap first look (in the lower-cased text): none of `_SECRET_PATTERNS` matches a text without one."""
_BASIC = re.compile(r"(?i)(basic\s+)([A-Za-z0-9+/]{4,}={0,2})")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s'\"<>]+")
_KEYLIKE_SEGMENT = re.compile(
    r"(?:sk|pk|rk|hf|ghp|key|api[-_]?key|token|secret)[-_][A-Za-z0-9_\-]{8,}|[0-9a-fA-F]{32,}"
    r"|(?=[A-Za-z0-9_\-]*[0-9])(?=[A-Za-z0-9_\-]*[a-z])(?=[A-Za-z0-9_\-]*[A-Z])[A-Za-z0-9_\-]{24,}"
)
"""A URL path segment that is an API key (some gateways take it in the path), not a route."""
MIN_SECRET = 6
"""Known secrets shorter than this are not searched for (they would hide ordinary words)."""


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
    if "://" in text:
        text = _URL.sub(lambda m: _redact_path(m.group(0)), text)
    return text


def _redact_path(url: str) -> str:
    """A URL with its key-like path segments (`_KEYLIKE_SEGMENT`) as ``***``."""
    start = url.find("/", url.find("://") + 3)
    if start < 0:
        return url
    end = min((i for i in (url.find("?", start), url.find("#", start)) if i >= 0), default=len(url))
    segments = url[start:end].split("/")
    if not any(_KEYLIKE_SEGMENT.fullmatch(unquote(seg)) for seg in segments):
        return url
    path = "/".join("***" if _KEYLIKE_SEGMENT.fullmatch(unquote(seg)) else seg for seg in segments)
    return url[:start] + path + url[end:]


_LOCAL_PATH = re.compile(r"^(?:[/~]|\.{1,2}[/\\]|[A-Za-z]:[/\\]|\\\\)")


def hide_local_path(name: str) -> str:
    """A name as it may leave the machine: a local path becomes ``local:`` and its last part.

    A local path is ``/home/alice/models/x``, ``~/x``, ``./x`` or a Windows drive path; a hub id
    (``org/model``) is kept. For model names written into shared records (embedded provenance, a
    dataset card): the folder and the user name stay on the machine; a revision (a folder
    fingerprint) still identifies it.

    Example:
        >>> hide_local_path("/home/alice/ckpt/tuned/"), hide_local_path("Qwen/Qwen2-VL-2B-Instruct")
        ('local:tuned', 'Qwen/Qwen2-VL-2B-Instruct')
    """
    if not _LOCAL_PATH.match(name):
        return name
    last = re.split(r"[/\\]", name.rstrip("/\\"))[-1]
    return f"local:{last or 'folder'}"


def hide_local_spec(spec: str) -> str:
    """A ``name:model`` spec with `hide_local_path` applied to the model part.

    Example:
        >>> hide_local_spec("sd:/home/alice/models/tiny-sd"), hide_local_spec("openai:gpt-4o")
        ('sd:local:tiny-sd', 'openai:gpt-4o')
    """
    name, sep, model = spec.partition(":")
    return f"{name}{sep}{hide_local_path(model)}" if sep else spec


def is_secret_key(key: object) -> bool:
    """Whether a mapping key names a secret (``api_key`` yes, ``api_key_env``, ``max_tokens`` no)."""
    text = str(key).lower()
    counted = re.sub(r"tokens|tokeni[sz]er", "", text)  # token counts and tokenizers are no secrets
    return any(hint in counted for hint in SECRET_HINTS) and not text.endswith("_env")


def redact(value: Any) -> Any:
    """Hide the secrets of configuration data, in nested dicts, lists and tuples.

    A value whose key looks like a secret becomes ``<redacted>``; every other string goes through
    `redact_url` (a ``base_url`` with a key in its user info, path or query) and loses the known
    secrets (`redact_secrets`).
    """
    if isinstance(value, dict):
        return {k: "<redacted>" if is_secret_key(k) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v) for v in value)
    if isinstance(value, str):
        return redact_secrets(redact_url(value))
    return value


def redact_strings(value: Any) -> Any:
    """`redact_text` over every string in nested dicts, lists and tuples (keys kept, numbers kept).

    For records such as a run's summary, whose keys (``prompt_tokens``) are not secrets.
    """
    if isinstance(value, dict):
        return {k: redact_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_strings(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_strings(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_command(command: str) -> str:
    """Hide values of flags named like a key, token, secret or password, and API-key-like words.

    Args:
        command: A command line as one string.

    Returns:
        The command with such values, and URL secrets (`redact_url`), replaced by ``***``.
    """
    command = redact_secrets(redact_url(command))
    command = _SECRET_FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}***", command)
    return _SECRET_WORD.sub(lambda m: f"{m.group(1)}-***", command)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove API keys and authorization values from a message, a model's reply or a log line.

    Args:
        text: Any text that might echo a request (an SDK error, a server's error body, a reply).
        secrets: Exact secret values to remove (with their encodings, as for known secrets)
            besides those remembered (`remember_secret`).

    Returns:
        The text with known secrets and their URL-encoded and base64 forms, URL secrets
        (`redact_url`) and secret-shaped values (``Bearer``/``Basic`` credentials, ``sk-...``,
        ``api_key=...``) replaced by ``***``.
    """
    text = redact_secrets(text, secrets)
    text = redact_url(text)
    lower = text.lower()
    if any(hint in lower for hint in _PATTERN_HINTS):
        for pattern in _SECRET_PATTERNS:
            text = pattern.sub(lambda m: (m.group(1) if m.re.groups else "") + "***", text)
    if "basic" in lower:
        text = _BASIC.sub(lambda m: m.group(1) + "***" if _is_basic_credential(m.group(2)) else m.group(0), text)
    return text


def _is_basic_credential(token: str) -> bool:
    """Whether a word after ``Basic`` is base64 of ``user:password`` (not an English word)."""
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in raw and raw.isascii() and raw.decode("ascii").isprintable()


_lock = threading.Lock()
_known: dict[str, None] = {}
_matchers: tuple[re.Pattern[str] | None, re.Pattern[str] | None] | None = None


def remember_secret(*values: object) -> None:
    """Remember secret values: `redact_text` removes them (and their encodings) from now on.

    Values that are not strings, or shorter than `MIN_SECRET`, are ignored.
    """
    global _matchers
    new = [v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET and v not in _known]
    if new:
        with _lock:
            _known.update(dict.fromkeys(new))
            _matchers = None


def remember_secrets_in(value: Any) -> None:
    """Remember the secrets of configuration data: values under secret-like keys and URL secrets.

    Walks nested dicts, lists and tuples: a string under a key one of whose words is a secret
    word (``api_key``, ``x-api-key``, ``access_token``; not ``max_tokens_field`` or
    ``api_key_env``) is a secret; every other string gives its URL secrets (`url_secrets`).
    """
    if isinstance(value, dict):
        for k, v in value.items():
            if _names_a_secret(k) and isinstance(v, str):
                remember_secret(v)
            else:
                remember_secrets_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            remember_secrets_in(v)
    elif isinstance(value, str) and "://" in value:
        remember_secret(*url_secrets(value))


_SECRET_KEY_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "authorization"})


def _names_a_secret(key: object) -> bool:
    # Narrower than `is_secret_key` (whole words: not ``keyword``): a value remembered by mistake
    # would be hidden from every text, while `redact` hiding one more config value costs nothing.
    words = re.split(r"[^a-z0-9]+", str(key).lower())
    return words[-1:] != ["env"] and any(w in _SECRET_KEY_WORDS for w in words)


def url_secrets(text: str) -> list[str]:
    """The secrets of every URL in ``text``, raw and percent-decoded.

    User info (``user:password``, and the password), values of key-like query parameters, and
    key-like path segments.

    Example:
        >>> url_secrets("https://me:pa55word@h/sk-abcdefgh1234/v1?api-version=1&key=k3y-value")
        ['me:pa55word', 'pa55word', 'sk-abcdefgh1234', 'k3y-value']
    """
    found: list[str] = []
    for match in _URL.finditer(text):
        parts = urlsplit(match.group(0))
        netloc = parts.netloc
        if "@" in netloc:
            info = netloc.rsplit("@", 1)[0]
            found += [info, unquote(info)]
            if ":" in info:
                password = info.split(":", 1)[1]
                found += [password, unquote(password)]
        found += [seg for seg in parts.path.split("/") if _KEYLIKE_SEGMENT.fullmatch(unquote(seg))]
        for pair in parts.query.split("&"):
            name, eq, value = pair.partition("=")
            if eq and value and is_secret_param(name):
                found += [value, unquote(value)]
    return list(dict.fromkeys(found))


def known_secrets() -> tuple[str, ...]:
    """The remembered secrets, in the order they were first remembered."""
    return tuple(_known)


def forget_secrets() -> None:
    """Forget every remembered secret (tests; a long-lived process switching credentials)."""
    global _matchers
    with _lock:
        _known.clear()
        _matchers = None


def secret_forms(secret: str) -> tuple[list[str], list[str]]:
    """The texts a secret may appear as.

    Returns:
        ``(exact, cores)``: the secret, its URL-encoded forms and its whole base64 encodings;
        and the base64 characters it gives inside a longer base64 text, at each of the three
        byte alignments (only those of 8 characters or more, so they cannot match by chance).
    """
    raw = secret.encode("utf-8")
    exact = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
    exact |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), form) for form in list(exact)}
    cores: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        exact |= {whole, whole.rstrip("=")}
        for offset in range(3):
            text = encode(b"\0" * offset + raw).decode("ascii")
            first = -(-offset // 3)  # the first 4-character group made of the secret's bytes only
            last = (offset + len(raw)) // 3  # groups before this one end inside the secret
            core = text[4 * first : 4 * last]
            if len(core) >= 8:
                cores.add(core)
    return sorted(exact, key=len, reverse=True), sorted(cores, key=len, reverse=True)


def _compiled(extra: tuple[str, ...]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    global _matchers
    if not extra and _matchers is not None:
        return _matchers
    with _lock:  # another thread may be remembering one
        known = tuple(_known)
    exact: set[str] = set()
    cores: set[str] = set()
    for secret in (*known, *(s for s in extra if s and len(s) >= 4)):
        e, c = secret_forms(secret)
        exact.update(e)
        cores.update(c)
    exact_re = re.compile("|".join(map(re.escape, sorted(exact, key=len, reverse=True)))) if exact else None
    cores_re = re.compile("|".join(map(re.escape, sorted(cores, key=len, reverse=True)))) if cores else None
    if not extra:
        _matchers = (exact_re, cores_re)
    return exact_re, cores_re


_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")


def _hide_base64_runs(text: str, cores: re.Pattern[str]) -> str:
    """Replace each whole run of base64 characters holding a core by ``***`` (one linear pass)."""
    out: list[str] = []
    done = 0
    for match in cores.finditer(text):
        start, end = match.start(), match.end()
        if start < done:
            continue
        while start > done and text[start - 1] in _BASE64_CHARS:
            start -= 1
        while end < len(text) and text[end] in _BASE64_CHARS:
            end += 1
        while end < len(text) and text[end] == "=":
            end += 1
        out += [text[done:start], "***"]
        done = end
    out.append(text[done:])
    return "".join(out)


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """Replace known secrets (`remember_secret`) and ``secrets``, in every form `secret_forms` lists, by ``***``."""
    extra = tuple(secrets)
    if not _known and not extra:
        return text
    exact_re, cores_re = _compiled(extra)
    if cores_re is not None and cores_re.search(text):
        text = _hide_base64_runs(text, cores_re)
    if exact_re is not None:
        text = exact_re.sub("***", text)
    return text
