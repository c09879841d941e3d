"""ShieldGemma 2: P(Yes) that an image breaks each of its three image policies.

``shieldgemma2`` or ``shieldgemma2:MODEL`` (hub id or local directory; default
``google/shieldgemma-2-4b-it``). As ShieldGemma 2 is meant to be used, the model's own processor
builds one prompt per policy (its chat template and policy texts), and transformers'
``ShieldGemma2ForImageClassification`` reads the softmax of the first answer token's ``Yes``
and ``No`` logits. The image is harmful when any policy's P(Yes) reaches the threshold; the
score is the highest P(Yes). Policies map to VHD11K codes through the bench crosswalk
(``shieldgemma2`` scheme: sexual -> F, dangerous -> A/B, violence -> A). Videos are judged
frame by frame. Needs the ``local`` extra (and the model's licence accepted on the hub).

A deployer's policy (option ``policy``): each of its categories becomes one ShieldGemma 2
policy, passed to the processor as a custom policy (``custom_policies``, keyed by the category's
id) in the shape of the model's own texts ("No <name>: ... The image shall not contain ...")
with the category's exceptions (``allows``, then the policy-wide ones) in a last sentence.
The model is asked once per category; ``labels`` holds P(Yes) by category id and
``categories`` the letter codes of the categories at or over the threshold. ShieldGemma 2 was
tuned on its three policies: a new category's text is read zero-shot, and an exception sentence
can only lower P(Yes) as far as the model follows it (docs: "Writing a policy").

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    policy: A policy file (YAML or TOML; ``vhd11k`` for the packaged default) to render.
    policies: Which policies to ask (a list or comma-separated: ``dangerous``, ``sexual``,
        ``violence``; default all three).
    threshold: Lowest P(Yes) that counts as a violation (default 0.5).
    crosswalk: A crosswalk file of the packaged layout (default: vhd's own).
    device, dtype, revision, local_files_only: As for the ``hf`` backend.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import field_validator

from vhd.detectors.base import Detector, Prediction, judge_one_image
from vhd.detectors.local_models import (
    LocalModelOptions,
    device_and_dtype,
    hub_kwargs,
    import_torch_transformers,
    load_failure,
    model_path,
)
from vhd.detectors.policy_text import load_detector_policy, policy_identity, policy_rows
from vhd.detectors.vlm import parse_options
from vhd.errors import ConfigError, VhdError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind

if TYPE_CHECKING:
    from vhd.policy import Policy

DEFAULT_MODEL = "google/shieldgemma-2-4b-it"

POLICY_LABELS: dict[str, str] = {
    "dangerous": "dangerous_content",
    "sexual": "sexually_explicit",
    "violence": "violence_gore",
}
"""ShieldGemma 2's policy keys (as its processor names them) -> the crosswalk's label names."""

SCHEME = "shieldgemma2"


def policy_texts(policy: Policy) -> dict[str, str]:
    """A policy's categories as ShieldGemma 2 policy texts, keyed by category id, in order."""
    from vhd.detectors.policy_text import policy_rows, sentence

    texts: dict[str, str] = {}
    for row in policy_rows(policy):
        cat = row.category
        text = f"No {row.title}: {sentence(cat.description)}"
        if cat.forbids:
            text += f" The image shall not contain content that shows any of: {'; '.join(cat.forbids)}."
        if row.allows:
            text += f" Allowed, and not a violation of this policy: {'; '.join(row.allows)}."
        texts[cat.id] = text
    return texts


class ShieldGemma2Options(LocalModelOptions):
    """Options of the ``shieldgemma2`` detector."""

    policy: str | None = None
    policies: tuple[str, ...] = tuple(POLICY_LABELS)
    crosswalk: str | None = None

    @field_validator("policies", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if isinstance(value, list | tuple):
            names = [str(v).strip().lower() for v in value]
            unknown = [n for n in names if n not in POLICY_LABELS]
            if unknown:
                raise ValueError(f"unknown policy {unknown[0]!r}; valid: {', '.join(POLICY_LABELS)}")
            if not names:
                raise ValueError("needs at least one policy")
            return tuple(dict.fromkeys(names))
        return value


class ShieldGemma2Detector(Detector):
    """ShieldGemma 2's per-policy image classifier.

    ``labels`` holds P(Yes) for every policy asked, under the crosswalk's names
    (``dangerous_content``, ``sexually_explicit``, ``violence_gore``); ``categories`` the VHD11K
    codes of the policies at or over the threshold, the most probable first.
    """

    name = "shieldgemma2"
    video_native = False
    multiclass = True

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model or DEFAULT_MODEL, options)
        self.opts: ShieldGemma2Options = parse_options(label, self.options, ShieldGemma2Options)
        from vhd.taxonomy.crosswalk import load_crosswalk

        self.crosswalk = load_crosswalk(self.opts.crosswalk)
        if SCHEME not in self.crosswalk.schemes:
            raise ConfigError(f"detector {label}: the crosswalk has no {SCHEME!r} scheme; add one or use vhd's own")
        self.policy = load_detector_policy(label, self.opts.policy)
        self.custom: dict[str, str] = {}
        self.codes: dict[str, str] = {}
        if self.policy is not None:
            if "policies" in self.opts.model_fields_set:
                raise ConfigError(
                    f"detector {label}: policies picks among ShieldGemma 2's own, a policy brings its own: drop one"
                )
            self.custom = policy_texts(self.policy)
            self.codes = {row.category.id: row.code for row in policy_rows(self.policy)}
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None  # model, processor

    def asked(self) -> list[str]:
        """The policy keys asked about: a rendered policy's category ids, else the chosen built-in ones."""
        return list(self.custom) if self.policy is not None else list(self.opts.policies)

    def processor_kwargs(self) -> dict[str, Any]:
        """The processor's ``policies`` (and ``custom_policies``, for a rendered policy) for one call."""
        kwargs: dict[str, Any] = {"policies": self.asked()}
        if self.custom:
            kwargs["custom_policies"] = dict(self.custom)
        return kwargs

    def identity(self) -> dict[str, Any]:
        """Model, revision, policies, threshold, dtype and the crosswalk's mapping (and a rendered policy's texts)."""
        out: dict[str, Any] = {
            "name": self.name,
            "model": self.model,
            "revision": self.opts.revision,
            "policies": sorted(self.opts.policies) if self.policy is None else self.asked(),
            "threshold": self.opts.threshold,
            "dtype": self.opts.dtype,
            "crosswalk": {k: list(v.to) for k, v in sorted(self.crosswalk.schemes[SCHEME].items())},
        }
        if self.policy is not None:
            out |= {"policy_texts": self.custom, **policy_identity(self.policy)}
        return out

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is not None:
                return self._loaded
            _, transformers = import_torch_transformers()
            device, dtype = device_and_dtype(self.opts)
            path = model_path(str(self.model))
            hub = hub_kwargs(self.opts, path)
            try:
                processor = transformers.AutoProcessor.from_pretrained(path, **hub)
                model = transformers.ShieldGemma2ForImageClassification.from_pretrained(path, dtype=dtype, **hub)
            except Exception as exc:
                raise load_failure("shieldgemma2", path, exc, offline=hub["local_files_only"]) from exc
            known = getattr(processor, "policy_definitions", None)
            if not isinstance(known, Mapping) or not getattr(processor, "chat_template", None):
                raise ConfigError(
                    f"shieldgemma2: {self.model!r} has no ShieldGemma 2 processor (policy texts and chat template); "
                    "use google/shieldgemma-2-4b-it or a copy saved with save_pretrained"
                )
            missing = [p for p in self.opts.policies if p not in known] if self.policy is None else []
            if missing:
                raise ConfigError(f"shieldgemma2: {self.model!r} does not define policy {missing[0]!r}")
            self._loaded = (model.to(device).eval(), processor)
            return self._loaded

    async def check(self) -> None:
        """Load the model and processor (fails with the pip line when the extra is missing)."""
        await asyncio.to_thread(self._load)

    async def aclose(self) -> None:
        """Drop the model."""
        self._loaded = None

    def probabilities(self, image: EncodedImage) -> dict[str, float]:
        """P(Yes) per asked policy (processor keys, or a rendered policy's category ids) for one image."""
        import torch

        model, processor = self._load()
        kwargs = self.processor_kwargs()
        policies = kwargs["policies"]
        inputs = processor(images=[image.to_pil().convert("RGB")], return_tensors="pt", **kwargs)
        inputs = inputs.to(model.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
        with self._lock, torch.inference_mode():
            out = model(**inputs)
        yes = out.probabilities[:, 0].float().cpu().tolist()
        return {policy: float(p) for policy, p in zip(policies, yes, strict=True)}

    def judge(self, probabilities: Mapping[str, float]) -> Prediction:
        """A prediction from P(Yes) per policy (processor keys, or a rendered policy's category ids)."""
        if self.policy is not None:
            fired_ids = sorted(
                (k for k, p in probabilities.items() if p >= self.opts.threshold), key=lambda k: -probabilities[k]
            )
            return Prediction(
                harmful=bool(fired_ids),
                score=max(probabilities.values(), default=0.0),
                labels=dict(probabilities),
                categories=[self.codes[k] for k in fired_ids],
            )
        labels = {POLICY_LABELS[k]: p for k, p in probabilities.items()}
        fired = {k: p for k, p in labels.items() if p >= self.opts.threshold}
        return Prediction(
            harmful=bool(fired),
            score=max(labels.values(), default=0.0),
            labels=labels,
            categories=self.crosswalk.to_vhd(SCHEME, fired) if fired else [],
        )

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Judge one image (videos arrive frame by frame through `Detector.predict`)."""
        return await judge_one_image("shieldgemma2", images, self.probabilities, self.judge, fatal=(VhdError,))
