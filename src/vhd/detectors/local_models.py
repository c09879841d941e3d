"""Helpers shared by detectors that run a local transformers model (``q16``, ``shieldgemma2``).

They import torch and transformers lazily (a missing extra gives the exact pip line), resolve
the device and dtype like the ``hf`` backend, look in the local cache only when the hub cannot be
reached, and turn loading failures into the ``hf`` backend's one-line errors (`vhd.backends.hub`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vhd.backends.hub import brief, hub_failure, local_only, looks_local, offline_env
from vhd.errors import BackendUnavailableError, MissingDependencyError

_LOCAL_EXTRA = "local"


class LocalModelOptions(BaseModel):
    """Options every local-model detector accepts, besides its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    """Lowest P(harmful) that counts as harmful."""
    device: str = "auto"
    """``auto`` (cuda, then mps, then cpu), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``."""
    dtype: str = "auto"
    """``auto`` (bfloat16 on CUDA, float32 elsewhere), ``float32``, ``float16`` or ``bfloat16``."""
    revision: str | None = None
    """Hub revision of the model (branch, tag or commit)."""
    local_files_only: bool = Field(default_factory=offline_env)
    """Never reach the hub; defaults to true when ``HF_HUB_OFFLINE=1``."""

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        from vhd.backends.hf import DEVICE_PATTERN

        if not DEVICE_PATTERN.match(value):
            raise ValueError("must be auto, cpu, cuda, cuda:N or mps")
        return value

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: str) -> str:
        if value not in {"auto", "float32", "float16", "bfloat16"}:
            raise ValueError("must be auto, float32, float16 or bfloat16")
        return value


def import_torch_transformers() -> tuple[Any, Any]:
    """Import torch and transformers, or raise `MissingDependencyError` naming the ``local`` extra."""
    try:
        torch = importlib.import_module("torch")
        transformers = importlib.import_module("transformers")
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "transformers", _LOCAL_EXTRA) from exc
    return torch, transformers


def device_and_dtype(opts: LocalModelOptions) -> tuple[str, Any]:
    """The concrete device and torch dtype for the options (``auto`` resolved)."""
    from vhd.backends.hf import resolve_device, resolve_dtype

    torch, _ = import_torch_transformers()
    device = resolve_device(opts.device)
    return device, getattr(torch, resolve_dtype(opts.dtype, device))


def hub_kwargs(opts: LocalModelOptions, model: str) -> dict[str, Any]:
    """Keyword arguments for ``from_pretrained``: revision, and local-files-only when asked, offline or unreachable.

    Call it once per load: it may probe the hub (`vhd.backends.hub.local_only`).
    """
    return {"revision": opts.revision, "local_files_only": local_only(model, opts.local_files_only)}


def model_path(model: str) -> str:
    """A model spec with ``~`` expanded (hub ids pass through)."""
    return str(Path(model).expanduser()) if model.startswith("~") else model


def load_failure(detector: str, model: str, exc: BaseException, *, offline: bool = True) -> Exception:
    """A one-line error for a model that did not load, saying what to do.

    Args:
        detector: The detector's name (``q16``, ``shieldgemma2``).
        model: The model spec (hub id or directory).
        exc: What the load raised.
        offline: Whether the load was local-cache only.
    """
    if isinstance(exc, ImportError) and getattr(exc, "name", None):
        return MissingDependencyError(str(exc.name), _LOCAL_EXTRA)
    if Path(model).is_dir():
        return BackendUnavailableError(
            f"{detector}: cannot load {model!r} ({brief(exc)}); the directory must hold a model and its processor "
            "saved with save_pretrained"
        )
    if looks_local(model):
        return BackendUnavailableError(f"{detector}: no such model directory {model!r}; pass an existing directory")
    alternatives = f"pass a local directory ({detector}:/path/to/model)"
    message = hub_failure(f"{detector} model", model, exc, offline=offline, alternatives=alternatives)
    return BackendUnavailableError(message or f"{detector}: cannot load {model!r} ({brief(exc)})")
