"""Backend registry: ``BACKEND:MODEL`` specs resolved lazily to `Backend` instances.

Built-in backends are named as ``"module:Class"`` strings so that importing vhd never imports
torch or an HTTP SDK. Third-party packages add backends through the ``vhd.backends``
entry-point group. A config file may also define aliases (``[backends.NAME] type = "openai"``)
so two endpoints of the same kind can serve different roles.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from vhd.backends.base import Backend
from vhd.config import AnnotateConfig
from vhd.errors import ConfigError
from vhd.records import Role

BUILTIN: dict[str, str] = {
    "openai": "vhd.backends.openai:OpenAIBackend",
    "hf": "vhd.backends.hf:HFBackend",
    "scripted": "vhd.backends.scripted:ScriptedBackend",
}

ENTRY_POINT_GROUP = "vhd.backends"


def split_spec(spec: str) -> tuple[str, str]:
    """Split ``BACKEND:MODEL`` at the first colon only.

    Args:
        spec: e.g. ``openai:llama3.2-vision:11b`` (model ``llama3.2-vision:11b``).

    Returns:
        ``(backend, model)``.

    Raises:
        ConfigError: When there is no colon or either side is empty.
    """
    backend, sep, model = spec.partition(":")
    if not sep or not backend.strip() or not model.strip():
        raise ConfigError(
            f"model spec {spec!r} must be BACKEND:MODEL, e.g. openai:gpt-4o or "
            f"hf:HuggingFaceTB/SmolVLM-256M-Instruct (backends: {', '.join(available())})"
        )
    return backend.strip(), model.strip()


def _entry_point_targets() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[str]:
    """Names of every registered backend (built-in and plugins), sorted."""
    return sorted({*BUILTIN, *_entry_point_targets()})


def backend_class(name: str) -> type[Backend]:
    """Import and return the backend class registered as ``name``.

    Raises:
        ConfigError: Unknown name (the message lists the valid ones).
    """
    targets = {**_entry_point_targets(), **BUILTIN}
    target = targets.get(name)
    if target is None:
        raise ConfigError(f"unknown backend {name!r}; valid backends: {', '.join(available())}")
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise ConfigError(f"backend {name!r} ({target}) is not a vhd Backend subclass")
    return cls


def create_backend(spec: str, backend_options: Mapping[str, Mapping[str, Any]] | None = None) -> Backend:
    """Build a backend from a ``BACKEND:MODEL`` spec.

    Args:
        spec: The model spec.
        backend_options: The config file's ``[backends.*]`` tables. A table whose name matches
            the spec's backend supplies its options; a ``type`` key makes it an alias of another
            backend (``[backends.vllm] type = "openai"`` lets ``vllm:MODEL`` reach a second
            endpoint).

    Returns:
        An unopened backend instance.
    """
    name, model = split_spec(spec)
    options = dict((backend_options or {}).get(name, {}))
    kind = str(options.pop("type", name))
    cls = backend_class(kind)
    backend = cls(model, options)
    if kind != name:
        backend.alias = name
    return backend


def build_backends(config: AnnotateConfig) -> dict[Role, Backend]:
    """Create one backend per distinct spec; roles with the same spec share an instance."""
    by_spec: dict[str, Backend] = {}
    roles: dict[Role, Backend] = {}
    for role in Role:
        spec = config.role_model(role.value)
        if spec not in by_spec:
            by_spec[spec] = create_backend(spec, config.backends)
        roles[role] = by_spec[spec]
    return roles
