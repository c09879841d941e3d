"""Detector registry and the detector spec ``[LABEL=]NAME[:MODEL_SPEC]`` (DESIGN.md).

Built-in detectors are `vhd.registry` entries (lazy ``"module:Class"`` strings) so nothing heavy is
imported until a detector is used; third-party packages add detectors through the
``vhd.detectors`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vhd.detectors.base import Detector
from vhd.errors import ConfigError
from vhd.registry import BuiltinEntries, Registry

DETECTORS: Registry[type[Detector]] = Registry("detector", "vhd.detectors", base=Detector)
"""Every detector: built-ins below, plugins from the ``vhd.detectors`` entry-point group."""

DETECTORS.add(
    "nudenet",
    "vhd.detectors.nudenet:NudeNetDetector",
    extra="nudenet",
    needs=["nudenet"],
    summary="NudeNet 3 nudity detector (local ONNX)",
)
DETECTORS.add("vlm", "vhd.detectors.vlm:VLMDetector", summary="a vision-language model asked (vlm:BACKEND:MODEL)")
DETECTORS.add("debate", "vhd.detectors.debate:DebateDetector", summary="the debate annotator (debate:BACKEND:MODEL)")
DETECTORS.add("hive", "vhd.detectors.hive:HiveDetector", summary="Hive visual moderation API")
DETECTORS.add(
    "openai-moderation",
    "vhd.detectors.openai_moderation:OpenAIModerationDetector",
    summary="OpenAI moderation endpoint with image input",
)
DETECTORS.add(
    "q16",
    "vhd.detectors.q16:Q16Detector",
    extra="local",
    needs=["torch", "transformers"],
    summary="Q16: CLIP against learned prompts",
)
DETECTORS.add(
    "shieldgemma2",
    "vhd.detectors.shieldgemma2:ShieldGemma2Detector",
    extra="local",
    needs=["torch", "transformers"],
    summary="ShieldGemma 2 image policies (local)",
)
DETECTORS.add(
    "hod",
    "vhd.detectors.hod:HodDetector",
    extra="hod",
    needs=["onnxruntime", "numpy"],
    summary="HOD harmful objects: a YOLOv5 model you trained, as ONNX (hod:/path/to/best.onnx)",
)
DETECTORS.add(
    "llavaguard",
    "vhd.detectors.llavaguard:LlavaGuardDetector",
    summary="LlavaGuard policy assessment (llavaguard:BACKEND:MODEL)",
)

DETECTORS.add(
    "llamaguard",
    "vhd.detectors.llamaguard:LlamaGuardDetector",
    summary="Meta's Llama Guard 4, S1-S14 hazards (llamaguard:BACKEND:MODEL)",
)

DETECTORS.add(
    "tuned-vlm",
    "vhd.detectors.tuned_vlm:TunedVLMDetector",
    extra="tune",
    needs=["torch", "transformers"],
    summary="a prompt-tuned VLM from vhd tune (tuned-vlm:CKPT_DIR), P(yes) from logits",
)

BUILTIN: BuiltinEntries = DETECTORS.builtin
"""The built-in entries by name (assigning ``"module:Class"`` registers one)."""

ENTRY_POINT_GROUP = DETECTORS.group


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


def available() -> list[str]:
    """Every registered detector name, sorted."""
    return DETECTORS.names()


def create_detector(spec: str | DetectorSpec, options: Mapping[str, Any] | None = None) -> Detector:
    """Build a detector from its spec and options.

    Its libraries are checked by `Detector.check`, which runs only when the detector has work
    (a detector whose predictions are all cached never needs them).

    Raises:
        ConfigError: Unknown detector (the message lists the valid ones).
    """
    parsed = spec if isinstance(spec, DetectorSpec) else DetectorSpec.parse(spec)
    cls = DETECTORS.load(parsed.name, check_needs=False)
    return cls(parsed.label, parsed.model, options)
