"""Loading from the Hugging Face hub: fail fast, in one line, when the hub cannot be reached.

Every hub load of vhd goes through here: the ``hf`` backend (so ``annotate``, ``categorize --model
hf:...``, ``llavaguard:hf:...``), the ``q16`` and ``shieldgemma2`` detectors and q16's
``hf://`` prompt file, and the sentence-transformers embedding model. `local_only` decides
whether to look in the local cache only: when asked to, when ``HF_HUB_OFFLINE`` is set, or when a
quick TCP probe of the hub (``$HF_ENDPOINT``) fails, since an unreachable hub otherwise costs
minutes of retries per file and dozens of log lines. `hub_failure` turns what the load raised
into the one line that says what to do (``hf download MODEL``: the command of huggingface_hub 1.x
and later, which no longer ship ``huggingface-cli``).
"""

from __future__ import annotations

import logging
import os
import shlex
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "on"}
_GATED = ("gated", "401", "403", "restricted")
_MISSING = ("not a valid model identifier", "404", "repository not found", "repositorynotfound")
_NETWORK = ("connect", "offline", "cache", "local_files_only", "resolve", "timed out", "timeout", "network")


def offline_env() -> bool:
    """Whether ``HF_HUB_OFFLINE`` asks for no hub access."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the hub (``$HF_ENDPOINT``) opens within ``timeout``.

    Without this probe an unreachable hub costs minutes of retries per file before the cache
    is used. Behind a proxy (``HTTPS_PROXY``/``ALL_PROXY`` set) the probe is skipped.
    """
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def looks_local(model: str) -> bool:
    """Whether a model spec names a directory (a path) rather than a hub id ``OWNER/NAME``."""
    return model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model


def local_only(model: str, local_files_only: bool = False) -> bool:
    """Whether to load ``model`` from the local cache only.

    True when asked to, when ``HF_HUB_OFFLINE`` is set, or when ``model`` is a hub id and the
    hub does not answer the probe (logged at INFO: the error, if any, is the one line). A local
    directory needs no hub.
    """
    if local_files_only or offline_env():
        return True
    if looks_local(model) or Path(model).expanduser().exists():
        return False
    if hub_reachable():
        return False
    log.info("the Hugging Face hub is unreachable; looking for %r in the local cache only", model)
    return True


def brief(exc: BaseException, limit: int = 240) -> str:
    """An exception's message on one line, cut at a word boundary (never in the middle of a URL)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " ..."


def hf_command() -> str:
    """How to run huggingface_hub's ``hf`` command from this environment, activated or not.

    The ``hf`` script installed beside this interpreter, by its path (a bare ``hf`` is not on
    ``PATH`` in a virtual environment that is not activated); else the module through this
    interpreter.
    """
    script = Path(sys.executable).parent / "hf"
    if sys.executable and script.is_file():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable or 'python3')} -m huggingface_hub.cli.hf"


def unreachable_message(what: str, model: str, alternatives: str, files: tuple[str, ...] = ()) -> str:
    """The one line for a model that is neither in the local cache nor reachable on the hub."""
    command = " ".join((hf_command(), "download", model, *files))
    return (
        f"cannot load {what} {model!r}: not in the local cache and the hub is unreachable; "
        f"download it ({command}) or {alternatives}"
    )


def hub_failure(
    what: str,
    model: str,
    exc: BaseException,
    *,
    offline: bool,
    alternatives: str = "pass a local directory",
    files: tuple[str, ...] = (),
) -> str | None:
    """The one line for a failed hub load, or None when the failure is not about the hub.

    Args:
        what: What was loaded, for the message (``hf model``, ``shieldgemma2 model``...).
        model: The hub id.
        exc: What the load raised.
        offline: Whether the load was local-cache only (then "not found" means "not cached").
        alternatives: What else the user can do, after "download it (...) or".
        files: Files of the repository the load wanted (named in the ``hf download`` command).

    Returns:
        A gated repository, a missing model, or an unreachable hub in one line; None otherwise.
    """
    raw = brief(exc)
    lowered = raw.lower()
    if any(word in lowered for word in _GATED):
        return (
            f"cannot load {what} {model!r}: the repository is gated or private; accept its licence "
            f"on the hub and log in (hf auth login) ({raw})"
        )
    if not offline and any(word in lowered for word in _MISSING):
        return f"cannot load {what} {model!r}: no such model on the hub; check the id ({raw})"
    if isinstance(exc, OSError) or any(word in lowered for word in _NETWORK):
        return unreachable_message(what, model, alternatives, files)
    return None
