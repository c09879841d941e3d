"""Detector registry and the detector spec ``[LABEL=]NAME[:MODEL_SPEC]`` (DESIGN.md).

Built-in detectors are named as ``"module:Class"`` strings so nothing heavy is imported until a
detector is used; third-party packages add detectors through the ``vhd.detectors`` entry-point
group.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from vhd.detectors.base import Detector
from vhd.errors import ConfigError

BUILTIN: dict[str, str] = {
    "nudenet": "vhd.detectors.nudenet:NudeNetDetector",
    "vlm": "vhd.detectors.vlm:VLMDetector",
    "debate": "vhd.detectors.debate:DebateDetector",
    "hive": "vhd.detectors.hive:HiveDetector",
    "openai-moderation": "vhd.detectors.openai_moderation:OpenAIModerationDetector",
    "q16": "vhd.detectors.q16:Q16Detector",
    "shieldgemma2": "vhd.detectors.shieldgemma2:ShieldGemma2Detector",
    "llavaguard": "vhd.detectors.llavaguard:LlavaGuardDetector",
}
"""Filled by the detector modules' authors: name -> "module:Class"."""

ENTRY_POINT_GROUP = "vhd.detectors"


@dataclass(frozen=True)
class DetectorSpec:
    """A parsed ``[LABEL=]NAME[:MODEL_SPEC]``.

    Attributes:
        label: The name in reports (defaults to NAME).
        name: The registered detector.
        model: What follows the first colon (a backend model spec for model-based detectors).
    """

    label: str
    name: str
    model: str | None

    @classmethod
    def parse(cls, spec: str) -> DetectorSpec:
        """Parse a detector spec; LABEL is split at the first ``=``, NAME at the first ``:``.

        Raises:
            ConfigError: Empty parts.
        """
        label, eq, rest = spec.partition("=")
        if not eq:
            label, rest = "", spec
        name, colon, model = rest.partition(":")
        name, label = name.strip(), label.strip()
        if not name or (eq and not label) or (colon and not model.strip()):
            raise ConfigError(
                f"detector spec {spec!r} must be [LABEL=]NAME[:MODEL], e.g. nudenet or long=vlm:openai:gpt-4o"
            )
        return cls(label or name, name, model.strip() if colon else None)


def _targets() -> dict[str, str]:
    return {**{ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}, **BUILTIN}


def available() -> list[str]:
    """Every registered detector name, sorted."""
    return sorted(_targets())


def create_detector(spec: str | DetectorSpec, options: Mapping[str, Any] | None = None) -> Detector:
    """Build a detector from its spec and options.

    Raises:
        ConfigError: Unknown detector (the message lists the valid ones).
    """
    parsed = spec if isinstance(spec, DetectorSpec) else DetectorSpec.parse(spec)
    target = _targets().get(parsed.name)
    if target is None:
        raise ConfigError(f"unknown detector {parsed.name!r}; valid detectors: {', '.join(available()) or 'none'}")
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Detector)):
        raise ConfigError(f"detector {parsed.name!r} ({target}) is not a vhd Detector subclass")
    return cls(parsed.label, parsed.model, options)
