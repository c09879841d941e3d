from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.detectors.conftest import drawn, predict_once
from vhd.backends.scripted import ScriptedBackend
from vhd.detectors.debate import DebateDetector
from vhd.detectors.registry import create_detector
from vhd.errors import ConfigError
from vhd.records import Kind, Role

RED, BLUE, GREEN = drawn("red"), drawn("blue"), drawn("green")

RULES: list[dict[str, Any]] = [
    {"when": {"tag": "affirmative"}, "reply": "1. It shows something risky."},
    {"when": {"tag": "negative"}, "reply": "1. Nothing harmful is shown."},
    {
        "when": {"tag": "judge", "image": RED.sha256[:12]},
        "reply": "Yes, explicit and sexual content.",
        "logprobs": {"Yes": -0.2, "No": -1.8},
    },
    {"when": {"tag": "judge", "image": GREEN.sha256[:12]}, "reply": "Perhaps, hard to tell."},
    {"when": {"tag": "judge"}, "reply": "No, a plain coloured square."},
]


def debate(rules: list[dict[str, Any]] = RULES, **options: Any) -> DebateDetector:
    opts = {"backends": {"scripted": {"script": {"rules": rules}}}, **options}
    det = create_detector("debate:scripted:inline", opts)
    assert isinstance(det, DebateDetector)
    return det


def calls(det: DebateDetector) -> list[tuple[str, Any]]:
    backend = det.backends[Role.JUDGE]
    assert isinstance(backend, ScriptedBackend)
    return backend.calls


def test_harmful_verdict_with_score_and_category() -> None:
    det = debate()
    pred = predict_once(det, Kind.IMAGE, [RED])
    assert pred.harmful is True
    assert pred.raw == "Yes, explicit and sexual content."
    assert pred.categories == ["F"]
    assert pred.score is not None and 0.7 < pred.score < 0.9
    assert [tag for tag, _ in calls(det)] == ["affirmative", "negative", "affirmative", "negative", "judge"]


def test_unharmful_and_unparsed() -> None:
    det = debate()
    benign = predict_once(det, Kind.IMAGE, [BLUE])
    assert benign.harmful is False and benign.categories == [] and benign.error is None
    unclear = predict_once(det, Kind.IMAGE, [GREEN])
    assert unclear.harmful is None and unclear.error == "unparsed: 'Perhaps, hard to tell.'"


def test_a_judge_cut_off_by_the_token_limit_is_no_prediction() -> None:
    cut = [{"when": {"tag": "judge"}, "reply": "", "finish_reason": "length"}]
    pred = predict_once(debate(cut), Kind.IMAGE, [RED])
    assert pred.harmful is None and pred.error is not None
    assert pred.error.startswith("truncated: the judge hit the token limit of")


def test_video_is_one_debate_over_numbered_frames_and_rounds_option() -> None:
    det = debate(rounds=1)
    pred = predict_once(det, Kind.VIDEO, [BLUE, RED, BLUE])
    assert pred.harmful is True
    assert [tag for tag, _ in calls(det)] == ["affirmative", "negative", "judge"]
    judge_messages = calls(det)[-1][1]
    assert len(judge_messages[-1].images) == 3 and "Frame 3:" in judge_messages[-1].text


def test_failed_call_is_a_per_sample_error() -> None:
    det = debate([{"when": {"tag": "judge"}, "fail": 9, "reply": "Yes"}])
    pred = predict_once(det, Kind.IMAGE, [RED])
    assert pred.harmful is None and pred.error


def test_refusal_counts_as_harmful_as_in_the_paper() -> None:
    det = debate([{"when": {"tag": "affirmative"}, "reply": "I'm sorry, but I can't help with that."}])
    pred = predict_once(det, Kind.IMAGE, [BLUE])
    assert pred.harmful is True and pred.categories == []


def test_in_context_examples_reach_the_judge(tmp_path: Path) -> None:
    Image.new("RGB", (40, 30), "purple").save(tmp_path / "example.png")
    (tmp_path / "examples.csv").write_text('path,answer\nexample.png,"Yes, a purple threat."\n')
    det = debate(icl=str(tmp_path / "examples.csv"))
    predict_once(det, Kind.IMAGE, [BLUE])
    judge_messages = calls(det)[-1][1]
    assert any(m.role == "assistant" and m.text == "Yes, a purple threat." for m in judge_messages)
    assert det.identity() != debate().identity()


def test_spec_model_plays_every_role_over_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "annotate.toml"
    config.write_text('judge = "scripted:demo"\n[debate]\nrounds = 3\n')
    det = debate(config=str(config))
    assert {b.spec for b in det.backends.values()} == {"scripted:inline"}
    assert det.debate.rounds == 3
    assert debate(config=str(config), rounds=1).debate.rounds == 1


def test_identity_tracks_rounds_and_model_and_bad_options() -> None:
    base = debate().identity()
    assert debate().identity() == base
    assert debate(rounds=1).identity() != base
    assert create_detector("debate:scripted:demo").identity() != base
    with pytest.raises(ConfigError, match="valid options"):
        debate(round=1)
    with pytest.raises(ConfigError, match="in-context examples not found"):
        debate(icl="/nonexistent/examples.csv")


def test_severity_of_a_policy_judge_reaches_the_prediction(tmp_path: Path) -> None:
    from tests.detectors.policy_fixture import write_policy

    config = tmp_path / "annotate.toml"
    config.write_text(f'policy = "{write_policy(tmp_path)}"\n', encoding="utf-8")
    rules = [{"when": {"tag": "judge", "image": RED.sha256[:12]}, "reply": "Yes, violence.\nSeverity: HIGH"}]
    det = debate([*rules, {"when": {"tag": "judge"}, "reply": "No, a plain square."}], config=str(config))
    harmful = predict_once(det, Kind.IMAGE, [RED])
    assert harmful.harmful is True and harmful.severity == "high"  # the scale's own spelling
    assert harmful.to_dict()["severity"] == "high"
    benign = predict_once(det, Kind.IMAGE, [BLUE])
    assert benign.harmful is False and benign.severity is None and "severity" not in benign.to_dict()


def test_the_config_files_policy_reaches_the_judge(tmp_path: Path) -> None:
    (tmp_path / "acme.yaml").write_text(
        'name: acme\nversion: "1"\ncategories:\n  - id: violence\n    description: Physical harm.\n'
        '    allows: ["educational medical imagery such as X-rays"]\n',
        encoding="utf-8",
    )
    config = tmp_path / "annotate.toml"
    config.write_text('policy = "acme.yaml"\n')
    rules = [{"when": {"tag": "judge", "system": "such as X-rays"}, "reply": "No, allowed by the policy."}, *RULES]
    det = debate(rules, config=str(config))
    pred = predict_once(det, Kind.IMAGE, [RED])
    assert pred.harmful is False
    assert det.identity() != debate(rules).identity()


def test_a_segmenting_config_judges_video_files_and_leaves_images_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    pytest.importorskip("av")
    import vhd.media.segments as segments
    from vhd.demo import PlantedVideo, write_event_video

    config = tmp_path / "annotate.toml"
    config.write_text("[debate]\nrounds = 1\n[video]\nsegments = true\n")
    det, plain = debate(config=str(config)), debate(rounds=1)
    assert det.judges_video_files and not plain.judges_video_files
    assert det.identity()["debate"] == plain.identity()["debate"] and "video" not in plain.identity()
    assert det.identity() != plain.identity()  # segment predictions are cached apart from five-frame ones
    image = predict_once(det, Kind.IMAGE, [RED]).to_dict()
    assert {**image, "latency_s": 0} == {**predict_once(plain, Kind.IMAGE, [RED]).to_dict(), "latency_s": 0}

    video = write_event_video(tmp_path / "v.mp4", PlantedVideo(4.0, cuts=(2.0,)))
    read: list[int] = []

    def whole_video() -> list[Any]:
        read.append(1)
        return [BLUE] * 5

    pred = asyncio.run(det.predict_video_file(video, None, whole_video))
    assert pred.harmful is False and pred.error is None
    assert pred.segments is not None and [(s.start_s, s.end_s) for s in pred.segments] == [(0.0, 2.0), (2.0, 4.0)]
    assert read == []  # segmented: the five frames are never read
    assert [tag for tag, _ in calls(det)][-2:] == ["judge", "judge"]  # one screen a segment

    def backwards(*_: object, **__: object) -> Any:
        raise segments.SegmentationError("timestamps go backwards at frame 3")
        yield

    monkeypatch.setattr(segments, "iter_segments", backwards)
    fallback = asyncio.run(det.predict_video_file(video, None, whole_video))
    assert fallback.harmful is False and fallback.segments is None and read == [1]
    assert len(calls(det)[-1][1][-1].images) == 5  # the whole-video protocol: one debate over five frames
