"""The shieldgemma2 detector on a tiny random ShieldGemma 2 (Gemma 3 based) built offline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.detectors.conftest import drawn
from vhd.detectors.registry import create_detector
from vhd.detectors.shieldgemma2 import ShieldGemma2Detector
from vhd.errors import BackendUnavailableError, ConfigError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind


def test_options_and_judging_without_a_model() -> None:
    det = create_detector("shieldgemma2", {"threshold": 0.6})
    assert isinstance(det, ShieldGemma2Detector) and det.model == "google/shieldgemma-2-4b-it"
    pred = det.judge({"dangerous": 0.7, "sexual": 0.9, "violence": 0.1})
    assert pred.harmful is True and pred.score == 0.9
    assert pred.labels == {"dangerous_content": 0.7, "sexually_explicit": 0.9, "violence_gore": 0.1}
    assert pred.categories == ["F", "A", "B"]  # the most probable policy's codes first
    calm = det.judge({"dangerous": 0.59, "sexual": 0.2, "violence": 0.3})
    assert calm.harmful is False and calm.categories == [] and calm.score == 0.59
    assert det.judge({"violence": 0.6}).categories == ["A"]

    with pytest.raises(ConfigError, match="unknown policy 'hate'"):
        create_detector("shieldgemma2", {"policies": "sexual,hate"})
    with pytest.raises(ConfigError, match="bad option threshold"):
        create_detector("shieldgemma2", {"threshold": -0.1})
    only = create_detector("shieldgemma2", {"policies": "Violence, sexual"})
    assert isinstance(only, ShieldGemma2Detector) and only.opts.policies == ("violence", "sexual")
    assert only.identity() != det.identity() != create_detector("shieldgemma2").identity()


@pytest.mark.slow
def test_tiny_model_probabilities(tiny_shieldgemma2_dir: Path, photo: Callable[[str], EncodedImage]) -> None:
    import torch
    import transformers

    det = create_detector(f"shieldgemma2:{tiny_shieldgemma2_dir}", {"device": "cpu"})
    assert isinstance(det, ShieldGemma2Detector)
    asyncio.run(det.check())
    model, processor = det._loaded or (None, None)
    assert type(model).__name__ == "ShieldGemma2ForImageClassification"
    assert type(processor).__name__ == "ShieldGemma2Processor"

    image = photo("astronaut")
    probs = det.probabilities(image)
    assert set(probs) == {"dangerous", "sexual", "violence"}
    assert all(0.0 <= p <= 1.0 for p in probs.values()) and len(set(probs.values())) == 3  # the policy matters

    # Reference: the model's first-token logits for Yes and No, by hand, on the sexual policy.
    tok = processor.tokenizer
    yes, no = tok.convert_tokens_to_ids("Yes"), tok.convert_tokens_to_ids("No")
    inputs = processor(images=[image.to_pil()], policies=["sexual"], return_tensors="pt")
    with torch.inference_mode():
        logits = model.model(**inputs).logits[0, -1]
    expected = torch.softmax(logits[[yes, no]], dim=-1)[0].item()
    assert probs["sexual"] == pytest.approx(expected, abs=1e-5)
    assert isinstance(model.model, transformers.Gemma3ForConditionalGeneration)

    pred = asyncio.run(det.predict(Kind.IMAGE, [image]))
    assert pred.error is None and pred.score == pytest.approx(max(probs.values()), abs=1e-5)
    assert pred.harmful is (max(probs.values()) >= 0.5)
    low = ShieldGemma2Detector("sg", str(tiny_shieldgemma2_dir), {"threshold": 0.0, "policies": ["violence"]})
    low_pred = asyncio.run(low.predict(Kind.IMAGE, [image]))
    assert low_pred.harmful is True and low_pred.categories == ["A"] and set(low_pred.labels) == {"violence_gore"}
    never = ShieldGemma2Detector("sg", str(tiny_shieldgemma2_dir), {"threshold": 1.0})
    assert asyncio.run(never.predict(Kind.IMAGE, [image])).harmful is False

    video = asyncio.run(low.predict(Kind.VIDEO, [drawn("red"), drawn("blue")]))
    assert video.harmful is True and video.score is not None


@pytest.mark.slow
def test_load_errors(tmp_path: Path, tiny_clip_dir: Path) -> None:
    with pytest.raises(BackendUnavailableError, match="no such model directory"):
        asyncio.run(ShieldGemma2Detector("sg", str(tmp_path / "missing")).check())
    with pytest.raises(BackendUnavailableError, match="shieldgemma2: cannot load"):
        asyncio.run(ShieldGemma2Detector("sg", str(tiny_clip_dir)).check())


def test_policy_becomes_custom_policies(tmp_path: Path) -> None:
    from tests.detectors.policy_fixture import EXCEPTION, WIDE_EXCEPTION, write_policy

    path = str(write_policy(tmp_path))
    det = create_detector("shieldgemma2", {"policy": path, "threshold": 0.5})
    assert isinstance(det, ShieldGemma2Detector)
    kwargs = det.processor_kwargs()
    assert kwargs["policies"] == ["violence", "nudity"]
    violence = kwargs["custom_policies"]["violence"]
    assert violence.startswith("No Violence: Physical harm to people or animals. The image shall not contain")
    assert f"Allowed, and not a violation of this policy: {EXCEPTION}; {WIDE_EXCEPTION}." in violence
    pred = det.judge({"violence": 0.4, "nudity": 0.8})
    assert pred.harmful is True and pred.categories == ["B"] and pred.labels == {"violence": 0.4, "nudity": 0.8}
    assert det.identity()["policy"] == "acme-moderation@2026-11"
    plain = create_detector("shieldgemma2")
    assert isinstance(plain, ShieldGemma2Detector)
    assert plain.processor_kwargs() == {"policies": ["dangerous", "sexual", "violence"]}
    assert "policy" not in plain.identity() and plain.identity() != det.identity()
    with pytest.raises(ConfigError, match="policies picks among ShieldGemma 2's own"):
        create_detector("shieldgemma2", {"policy": path, "policies": "sexual"})


@pytest.mark.slow
def test_policy_text_reaches_the_tiny_models_prompt(
    tiny_shieldgemma2_dir: Path, tmp_path: Path, photo: Callable[[str], EncodedImage]
) -> None:
    from tests.detectors.policy_fixture import EXCEPTION, write_policy

    det = create_detector(
        f"shieldgemma2:{tiny_shieldgemma2_dir}", {"device": "cpu", "policy": str(write_policy(tmp_path))}
    )
    assert isinstance(det, ShieldGemma2Detector)
    asyncio.run(det.check())
    _, processor = det._loaded or (None, None)
    image = photo("astronaut")
    inputs = processor(images=[image.to_pil()], return_tensors="pt", **det.processor_kwargs())
    prompts = processor.tokenizer.batch_decode(inputs["input_ids"], skip_special_tokens=True)
    assert len(prompts) == 2 and EXCEPTION in prompts[0] and "Exposed bodies shown for arousal." in prompts[1]
    probs = det.probabilities(image)
    assert set(probs) == {"violence", "nudity"} and all(0.0 <= p <= 1.0 for p in probs.values())
