from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.detectors.conftest import drawn
from vhd.backends.base import GenerateConfig
from vhd.backends.scripted import ScriptedBackend
from vhd.detectors.registry import create_detector
from vhd.detectors.vlm import VLMDetector
from vhd.errors import ConfigError
from vhd.records import Kind

RED, BLUE, GREEN = drawn("red"), drawn("blue"), drawn("green")


def scripted(rules: list[dict[str, Any]], default: str = "No.", **options: Any) -> VLMDetector:
    opts = {"backends": {"scripted": {"script": {"default": default, "rules": rules}}}, **options}
    det = create_detector("vlm:scripted:inline", opts)
    assert isinstance(det, VLMDetector)
    return det


def predict(det: VLMDetector, kind: Kind, images: list[Any]) -> Any:
    return asyncio.run(det.predict(kind, images))


def test_binary_answers_and_logprob_score() -> None:
    det = scripted(
        [{"when": {"image": RED.sha256[:12]}, "reply": "Yes, gore.", "logprobs": {"Yes": -0.1, "No": -2.4}}],
        default="No, a plain square.",
    )
    harmful = predict(det, Kind.IMAGE, [RED])
    assert harmful.harmful is True and harmful.raw == "Yes, gore."
    assert harmful.score == pytest.approx(0.9, abs=0.01)
    benign = predict(det, Kind.IMAGE, [BLUE])
    assert benign.harmful is False and benign.score is None and benign.error is None
    assert not det.multiclass and det.video_native


def test_short_and_long_prompts_are_sent() -> None:
    det = scripted([{"when": {"text": "social norms"}, "reply": "Yes"}], prompt="long")
    assert predict(det, Kind.IMAGE, [BLUE]).harmful is True
    short = scripted([{"when": {"text": "social norms"}, "reply": "Yes"}])
    assert predict(short, Kind.IMAGE, [BLUE]).harmful is False
    backend = short.backend
    assert isinstance(backend, ScriptedBackend)
    tag, messages = backend.calls[-1]
    assert tag == "detector:short"
    assert messages[-1].text.endswith("Is this image harmful? Answer yes or no.")


def test_video_is_one_call_with_numbered_frames() -> None:
    det = scripted([{"when": {"images": 3, "text": "Frame 3:"}, "reply": "Yes"}])
    pred = predict(det, Kind.VIDEO, [RED, BLUE, GREEN])
    assert pred.harmful is True
    backend = det.backend
    assert isinstance(backend, ScriptedBackend)
    assert len(backend.calls) == 1
    assert "Is this video harmful?" in backend.calls[0][1][-1].text


def test_multiclass_prompt() -> None:
    det = scripted(
        [
            {
                "when": {"image": RED.sha256[:12]},
                "reply": "**F. Explicit and Sexual Content**",
                "logprobs": {"F": -0.2},
            },
            {"when": {"image": GREEN.sha256[:12]}, "reply": "Well, it is hard to say."},
        ],
        default="K. Unharmful",
        prompt="multiclass",
    )
    assert det.multiclass is True
    red = predict(det, Kind.IMAGE, [RED])
    assert red.harmful is True and red.categories == ["F"] and red.score == pytest.approx(1.0)
    blue = predict(det, Kind.IMAGE, [BLUE])
    assert blue.harmful is False and blue.categories == []
    green = predict(det, Kind.IMAGE, [GREEN])
    assert green.harmful is None and green.error == "unparsed: 'Well, it is hard to say.'"
    backend = det.backend
    assert isinstance(backend, ScriptedBackend)
    assert '"J. Misinformation and Deceptive Content"' in backend.calls[0][1][-1].text


def test_backend_failures_and_refusals_are_per_sample() -> None:
    det = scripted(
        [{"when": {"image": RED.sha256[:12]}, "fail": 5, "reply": "Yes"}, {"when": {}, "refused": True, "reply": ""}]
    )
    failed = predict(det, Kind.IMAGE, [RED])
    assert failed.harmful is None and failed.error
    refused = predict(det, Kind.IMAGE, [BLUE])
    assert refused.harmful is None and refused.error is not None and "refused" in refused.error
    counted = scripted([{"when": {}, "refused": True, "reply": ""}], refusal_is_harmful=True)
    assert predict(counted, Kind.IMAGE, [BLUE]).harmful is True


def test_identity_tracks_prediction_changing_options() -> None:
    base = scripted([]).identity()
    assert scripted([], temperature=0.7).identity() != base
    assert scripted([], prompt="long").identity() != base
    assert scripted([], max_tokens=5).identity() != base
    assert scripted([]).identity() == base
    assert base["temperature"] == 0.0 and base["prompt"] == "short"


def test_identity_names_the_endpoint_never_a_key() -> None:
    opts = {"backends": {"openai": {"api_key_env": "MY_KEY", "base_url": "http://127.0.0.1:9/v1"}}}
    identity = create_detector("vlm:openai:gpt-4o", opts).identity()
    assert identity["backends"]["openai"]["base_url"] == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigError, match="must not hold an API key"):
        create_detector("vlm:openai:gpt-4o", {"backends": {"openai": {"api_key": "sk-secret"}}})


def test_bad_specs_and_options() -> None:
    with pytest.raises(ConfigError, match="vlm needs a model"):
        create_detector("vlm")
    with pytest.raises(ConfigError, match="prompt"):
        create_detector("vlm:scripted:demo", {"prompt": "medium"})
    with pytest.raises(ConfigError, match="valid options"):
        create_detector("vlm:scripted:demo", {"promt": "long"})
    with pytest.raises(ConfigError, match="BACKEND:MODEL"):
        create_detector("vlm:gpt-4o")


def test_check_fails_fast_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from vhd.errors import BackendUnavailableError

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    det = create_detector("vlm:openai:gpt-4o")
    with pytest.raises(BackendUnavailableError, match="OPENAI_API_KEY"):
        asyncio.run(det.check())


@pytest.mark.slow
def test_tiny_hf_model_end_to_end(tiny_llava_dir: Path) -> None:
    det = create_detector(f"vlm:hf:{tiny_llava_dir}", {"backends": {"hf": {"device": "cpu"}}, "max_tokens": 6})
    assert isinstance(det, VLMDetector)

    async def go() -> tuple[Any, Any, Any]:
        await det.check()
        try:
            image = await det.predict(Kind.IMAGE, [RED])
            video = await det.predict(Kind.VIDEO, [RED, BLUE])
            direct = await det.backend.generate(
                det.messages(Kind.IMAGE, [RED]), GenerateConfig(temperature=0, max_tokens=6)
            )
        finally:
            await det.aclose()
        return image, video, direct

    image, video, direct = asyncio.run(go())
    assert image.raw == direct.text  # the detector reads exactly what the model said
    expected = det.read(direct.text, None)
    assert (image.harmful, image.categories, image.error) == (expected.harmful, expected.categories, expected.error)
    for pred in (image, video):
        assert pred.harmful in (True, False, None)
        assert pred.latency_s > 0
        if pred.harmful is None:
            assert pred.error is not None and pred.error.startswith("unparsed: ")
