"""The llamaguard detector: Meta's prompt, answer reading, P(unsafe), the crosswalk, a loopback server.

The loopback server replays vLLM's Chat Completions shape for Llama Guard 4: the answer starts
with a whitespace token (``"\\n\\n"``), then ``unsafe`` / ``safe``, then the codes line. No tiny Llama
Guard 4 can be built here: Llama 4's image processor imports torchvision, which the test
environment leaves out (README, "Tests"), so the ``hf`` path runs on the tiny LLaVA instead.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest

from tests.detectors.conftest import drawn, predict_once
from tests.servers.chat_server import ChatServer
from vhd.detectors.llamaguard import HAZARDS, LlamaGuardDetector, meta_prompt, read_answer, unsafe_probability
from vhd.detectors.registry import create_detector
from vhd.errors import ConfigError
from vhd.records import Kind

RED, BLUE = drawn("red"), drawn("blue")


def test_meta_prompt_lists_s1_to_s14_and_the_answer_format() -> None:
    before, after = meta_prompt()
    assert list(HAZARDS) == [f"S{i}" for i in range(1, 15)]
    for code, name in HAZARDS.items():
        assert f"\n{code}: {name}\n" in before
    assert before.index("<BEGIN UNSAFE CONTENT CATEGORIES>") < before.index("<END UNSAFE CONTENT CATEGORIES>")
    assert before.endswith("<BEGIN CONVERSATION>\n\nUser: ")
    assert "First line must read 'safe' or 'unsafe'." in after and "comma-separated list" in after
    few, _ = meta_prompt(["S1", "S12"])
    assert "S1: Violent Crimes." in few and "S2:" not in few


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("safe", (False, [])),
        ("\n\nsafe", (False, [])),
        ("unsafe\nS1", (True, ["S1"])),
        ("\n\nunsafe\nS10,S1", (True, ["S10", "S1"])),
        ("UNSAFE\nS12, s3", (True, ["S12", "S3"])),
        ("unsafe S11", (True, ["S11"])),
        ("unsafe", (True, [])),
        ("unsafe\nS15,S9", (True, ["S9"])),
        ("I cannot help", None),
        ("", None),
    ],
)
def test_read_answer(text: str, expected: tuple[bool, list[str]] | None) -> None:
    assert read_answer(text) == expected


def test_unsafe_probability_from_token_alternatives() -> None:
    assert unsafe_probability({"unsafe": math.log(0.3), "safe": math.log(0.6), "The": -1.0}) == pytest.approx(1 / 3)
    split = {"un": math.log(0.2), "Ġsafe": math.log(0.2), "uns": math.log(0.2)}  # tokenizers that split "unsafe"
    assert unsafe_probability(split) == pytest.approx(2 / 3)
    assert unsafe_probability({"hello": -0.1}) is None and unsafe_probability(None) is None


def _vllm_logprobs(p_unsafe: float) -> Any:
    """A vLLM-style ``logprobs`` object whose first token is whitespace."""

    def build(body: dict[str, Any]) -> dict[str, Any]:
        k = int(body.get("top_logprobs") or 0)
        top = [("unsafe", math.log(p_unsafe)), ("safe", math.log(1 - p_unsafe))]
        chosen = max(top, key=lambda t: t[1])[0]
        entries = [("\n\n", [("\n\n", -0.001), ("\n", -7.0)]), (chosen, top), ("\n", [("\n", -0.01)])]
        return {
            "content": [
                {
                    "token": tok,
                    "logprob": dict(alts).get(tok, -0.01),
                    "bytes": list(tok.encode()),
                    "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alts[:k]],
                }
                for tok, alts in entries
            ]
        }

    return build


def _endpoint(srv: ChatServer, **options: Any) -> LlamaGuardDetector:
    opts = {"backends": {"openai": {"base_url": srv.base_url}}, **options}
    det = create_detector("llamaguard:openai:meta-llama/Llama-Guard-4-12B", opts)
    assert isinstance(det, LlamaGuardDetector)
    return det


def test_loopback_vllm_shapes_unsafe_with_codes_and_p_unsafe() -> None:
    with ChatServer(reply="\n\nunsafe\nS1,S10", logprobs=_vllm_logprobs(0.8)) as srv:
        pred = predict_once(_endpoint(srv), Kind.IMAGE, [RED])
        (req,) = srv.requests
    assert pred.harmful is True and pred.error is None
    assert pred.score == pytest.approx(0.8)  # read past the leading "\n\n" token
    assert pred.labels == {"S1": 1.0, "S10": 1.0} and pred.categories == ["A", "G"]
    # template mode: only the image is sent; the model's chat template writes Meta's task around it
    assert req.json["logprobs"] is True and req.json["temperature"] == 0.0
    assert [p["type"] for p in req.json["messages"][0]["content"]] == ["image_url"]


def test_loopback_safe_text_only_hazards_and_unparsed() -> None:
    answers = iter(["\n\nsafe", "unsafe\nS5", "I am not able to assess this."])
    with ChatServer(reply=lambda body: next(answers), logprobs=_vllm_logprobs(0.1)) as srv:
        det = _endpoint(srv, prompt="meta")
        safe, defamation, garbage = (predict_once(det, Kind.IMAGE, [img]) for img in (BLUE, RED, BLUE))
        texts = [" ".join(p.get("text", "") for p in r.json["messages"][0]["content"]) for r in srv.requests]
    assert safe.harmful is False and safe.score == pytest.approx(0.1) and safe.categories == []
    # S5 (defamation) judges text, not pictures: unsafe, but no VHD11K category for an image
    assert defamation.harmful is True and defamation.labels == {"S5": 1.0} and defamation.categories == []
    assert garbage.harmful is None and (garbage.error or "").startswith("unparsed:")
    assert all("S14: Code Interpreter Abuse." in t and "ONLY THE LAST User message" in t for t in texts)


def test_without_logprobs_the_score_is_the_decision_and_video_goes_frame_by_frame() -> None:
    opts = {
        "backends": {
            "scripted": {
                "script": {"default": "safe", "rules": [{"when": {"image": RED.sha256[:8]}, "reply": "unsafe\nS11"}]}
            }
        }
    }
    det = create_detector("llamaguard:scripted:inline", opts)
    assert isinstance(det, LlamaGuardDetector)
    video = asyncio.run(det.predict(Kind.VIDEO, [BLUE, RED]))
    assert video.harmful is True and video.score == 1.0 and video.categories == ["D"]
    assert asyncio.run(det.predict(Kind.IMAGE, [BLUE])).score == 0.0


def test_options_and_identity() -> None:
    with pytest.raises(ConfigError, match="needs a backend model"):
        create_detector("llamaguard")
    with pytest.raises(ConfigError, match=r"S1\.\.S14"):
        create_detector("llamaguard:scripted:demo", {"categories": "S1,S99"})
    with pytest.raises(ConfigError, match="bad option prompt"):
        create_detector("llamaguard:scripted:demo", {"prompt": "long"})
    base = create_detector("llamaguard:scripted:demo").identity()
    assert create_detector("llamaguard:scripted:demo", {"prompt": "meta"}).identity() != base
    assert create_detector("llamaguard:scripted:demo").identity() == base


@pytest.mark.slow
def test_hf_path_on_a_tiny_random_vlm(tiny_llava_dir: Path) -> None:
    det = create_detector(
        f"llamaguard:hf:{tiny_llava_dir}", {"prompt": "meta", "backends": {"hf": {"device": "cpu"}}, "max_tokens": 6}
    )
    assert isinstance(det, LlamaGuardDetector)
    pred = predict_once(det, Kind.IMAGE, [RED])
    # A random model writes gibberish: reported as unparsed, with the raw text; never a crash.
    assert pred.raw is not None and pred.latency_s > 0
    assert pred.harmful is None and (pred.error or "").startswith("unparsed:")


def test_runs_through_vhd_bench_into_table_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from PIL import Image

    from vhd.cli.main import main

    Image.new("RGB", (32, 32), "red").save(tmp_path / "a.png")
    Image.new("RGB", (32, 32), "blue").save(tmp_path / "b.png")
    (tmp_path / "labels.csv").write_text("path,harmful\na.png,yes\nb.png,no\n")
    script = {"scripted": {"script": {"default": "\n\nunsafe\nS1", "rules": []}}}
    argv = ["bench", "--labels", str(tmp_path / "labels.csv"), "--detector", "guard=llamaguard:scripted:inline"]
    argv += ["--set", f"guard.backends={json.dumps(script)}", "--out", str(tmp_path / "out"), "--no-plots"]
    assert main([*argv, "--bootstrap", "0", "--no-progress"]) == 0
    assert "| guard |" in (tmp_path / "out" / "table1.md").read_text()
    run = json.loads((tmp_path / "out" / "results.json").read_text())["detectors"][0]["run"]
    assert run["identity"]["name"] == "llamaguard"


def test_policy_replaces_s1_to_s14_and_reaches_the_server(tmp_path: Path) -> None:
    from tests.detectors.policy_fixture import EXCEPTION, WIDE_EXCEPTION, write_policy

    path = str(write_policy(tmp_path))
    with ChatServer(reply="\n\nunsafe\nS2,S14", logprobs=_vllm_logprobs(0.7)) as srv:
        det = _endpoint(srv, policy=path)
        pred = predict_once(det, Kind.IMAGE, [RED])
        (req,) = srv.requests
    content = req.json["messages"][0]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "text"]  # vhd writes Meta's format around the image
    text = content[0]["text"]
    block = text[text.index("<BEGIN UNSAFE CONTENT CATEGORIES>") : text.index("<END UNSAFE CONTENT CATEGORIES>")]
    assert "S1: Violence.\nPhysical harm to people or animals.\nShould not\n - graphic injury." in block
    assert f"Can\n - {EXCEPTION}.\n - {WIDE_EXCEPTION}." in block and "\nS2: nudity." in block
    assert "Violent Crimes" not in block and "S3" not in block
    # S14 is past the policy's two categories: dropped; S2 is the policy's second category
    assert pred.harmful is True and pred.labels == {"nudity": 1.0} and pred.categories == ["B"]
    assert pred.score == pytest.approx(0.7)
    assert det.identity()["policy"] == "acme-moderation@2026-11" and det.identity()["prompt"] == "meta"
    with pytest.raises(ConfigError, match=r"prompt=template .* cannot take a policy"):
        create_detector("llamaguard:scripted:demo", {"policy": path, "prompt": "template"})
    with pytest.raises(ConfigError, match="categories picks among S1-S14"):
        create_detector("llamaguard:scripted:demo", {"policy": path, "categories": "S1"})
    assert read_answer("unsafe\nS15,S9") == (True, ["S9"])
    assert read_answer("unsafe\nS15,S3", 20) == (True, ["S15", "S3"])
