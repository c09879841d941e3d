"""Backend registry: ``BACKEND:MODEL`` specs resolved lazily to `Backend` instances.

Built-in backends are `vhd.registry` entries (lazy ``"module:Class"`` strings) so that importing
vhd never imports torch or an HTTP SDK. Third-party packages add backends through the
``vhd.backends`` entry-point group. A config file may also define aliases
(``[backends.NAME] type = "openai"``) so two endpoints of the same kind can serve different roles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vhd.backends.base import VIDEO_INPUTS, Backend
from vhd.config import AnnotateConfig
from vhd.errors import ConfigError
from vhd.records import Role
from vhd.registry import BuiltinEntries, Registry

BACKENDS: Registry[type[Backend]] = Registry("backend", "vhd.backends", base=Backend)
"""Every backend: built-ins below, plugins from the ``vhd.backends`` entry-point group."""

BACKENDS.add("openai", "vhd.backends.openai:OpenAIBackend", summary="any OpenAI-compatible Chat Completions endpoint")
BACKENDS.add(
    "hf",
    "vhd.backends.hf:HFBackend",
    extra="local",
    needs=["torch", "transformers"],
    summary="a local Hugging Face vision-language model",
)
BACKENDS.add(
    "vllm-engine",
    "vhd.backends.vllm_engine:VLLMEngineBackend",
    extra="vllm",
    needs=["vllm"],
    summary="a vLLM engine in this process (CUDA GPU)",
)
BACKENDS.add("scripted", "vhd.backends.scripted:ScriptedBackend", summary="canned answers (tests and demos)")

BUILTIN: BuiltinEntries = BACKENDS.builtin
"""The built-in entries by name (assigning ``"module:Class"`` registers one)."""

ENTRY_POINT_GROUP = BACKENDS.group


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


def available() -> list[str]:
    """Names of every registered backend (built-in and plugins), sorted."""
    return BACKENDS.names()


def backend_class(name: str) -> type[Backend]:
    """Import and return the backend class registered as ``name``.

    Its libraries are checked by `Backend.check` (before any call), not here: building a backend
    stays possible without them.

    Raises:
        ConfigError: Unknown name (the message lists the valid ones).
    """
    return BACKENDS.load(name, check_needs=False)


def create_backend(
    spec: str, backend_options: Mapping[str, Mapping[str, Any] | Sequence[Mapping[str, Any]]] | None = None
) -> Backend:
    """Build a backend from a ``BACKEND:MODEL`` spec.

    Args:
        spec: The model spec.
        backend_options: The config file's ``[backends.*]`` tables. A table whose name matches
            the spec's backend supplies its options; a ``type`` key makes it an alias of another
            backend (``[backends.vllm] type = "openai"`` lets ``vllm:MODEL`` reach a second
            endpoint). A list of tables (``[[backends.NAME]]``) configures one endpoint each, for
            backends that take several (``openai``). A table's ``video_input`` (``frames`` or
            ``native``) is taken out of its options and set as `Backend.video_input`.

    Returns:
        An unopened backend instance.

    Raises:
        ConfigError: Unknown backend, an alias named like a registered backend of another type,
            or a list of tables for a backend that takes one endpoint.
    """
    name, model = split_spec(spec)
    raw = (backend_options or {}).get(name, {})
    tables = [dict(t) for t in raw] if isinstance(raw, Sequence) else None
    options = dict(raw) if isinstance(raw, Mapping) else {}
    if tables is not None:
        kinds = {str(t.pop("type", name)) for t in tables}
        if len(kinds) != 1:
            raise ConfigError(f"[[backends.{name}]] tables name different types ({', '.join(sorted(kinds))}): use one")
        kind = kinds.pop()
        modes = {t.pop("video_input") for t in tables if "video_input" in t}
        if len(modes) > 1:
            raise ConfigError(f"[[backends.{name}]] tables set video_input differently: set it once")
        video_input = modes.pop() if modes else None
    else:
        kind = str(options.pop("type", name))
        video_input = options.pop("video_input", None)
    if video_input is not None and video_input not in VIDEO_INPUTS:
        raise ConfigError(f"[backends.{name}] video_input = {video_input!r}: choose frames or native")
    if kind != name and name in available():
        raise ConfigError(
            f"[backends.{name}] type = {kind!r} shadows the registered backend {name!r}: name the alias otherwise, "
            f'e.g. [backends.{name}-alias] type = "{kind}"'
        )
    cls = backend_class(kind)
    if tables is not None:
        if not cls.multi_endpoint:
            raise ConfigError(f"[[backends.{name}]]: the {kind} backend takes one table, not a list of tables")
        options = {"endpoints": tables}
    backend = cls(model, options)
    if kind != name:
        backend.alias = name
    if video_input is not None:
        backend.video_input = str(video_input)
    return backend


def build_backends(config: AnnotateConfig) -> dict[Role, Backend]:
    """Create one backend per distinct spec; roles with the same spec share an instance.

    Each backend is shown videos as its table's ``video_input`` says, else as ``[media] video_input``.
    """
    by_spec: dict[str, Backend] = {}
    roles: dict[Role, Backend] = {}
    for role in Role:
        spec = config.role_model(role.value)
        if spec not in by_spec:
            table = config.backends.get(split_spec(spec)[0], {})
            tables = table if isinstance(table, list) else [table]
            backend = create_backend(spec, config.backends)
            if not any("video_input" in t for t in tables):
                backend.video_input = config.media.video_input
            by_spec[spec] = backend
        roles[role] = by_spec[spec]
    return roles
