"""Native video input in the message model: the video part, its JSON, the per-backend setting, the start check."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.media.conftest import center_index, make_video
from vhd.backends.base import Backend, GenerateConfig, Message, Output, check_video_input
from vhd.backends.openai_payload import build_payload, encode_payload, parse_options
from vhd.backends.registry import build_backends, create_backend
from vhd.config import AnnotateConfig, apply_overrides
from vhd.errors import BackendError, BackendUnavailableError, ConfigError
from vhd.media.clip import cut_clip, decode_clip
from vhd.media.encoded import EncodedImage

pytest.importorskip("av")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    video = make_video(tmp_path_factory.mktemp("v") / "v.mp4", 40, fps=10)
    return cut_clip(video, 1.0, 3.0, fps=2)


def test_a_clip_is_vllms_video_url_part_in_both_encoders(clip) -> None:  # type: ignore[no-untyped-def]
    image = EncodedImage(b"\xff\xd8\xff", "image/jpeg", 1, 1)
    messages = [Message("system", "judge"), Message("user", ("The video:", clip, "Frame:", image, "Harmful?"))]
    opts = parse_options({"image_detail": "low"})
    body = build_payload("m", messages, GenerateConfig(), opts)
    parts = body["messages"][1]["content"]
    assert parts[1] == {"type": "video_url", "video_url": {"url": clip.data_url}}
    assert parts[3]["type"] == "image_url" and parts[3]["image_url"]["detail"] == "low"
    assert json.loads(encode_payload("m", messages, GenerateConfig(), opts)) == body  # the spliced fast path
    url = parts[1]["video_url"]["url"]
    assert url.startswith("data:video/mp4;base64,")
    sent = base64.b64decode(url.split(",", 1)[1])
    assert [center_index(f) for f in decode_clip(sent)] == [10, 15, 20, 25]  # 1.0 s ... 2.5 s


def test_a_clip_outside_a_user_message_is_refused(clip) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BackendError, match="only allowed in user messages"):
        build_payload("m", [Message("assistant", ("x", clip))], GenerateConfig(), parse_options({}))


def test_message_lists_its_videos(clip) -> None:  # type: ignore[no-untyped-def]
    m = Message("user", ("a", clip, "b"))
    assert m.videos == [clip] and m.images == [] and m.text == "ab"


def _scripted(**table: object) -> dict[str, object]:
    return {"scripted": {"script": {"default": "No."}, **table}}


def test_video_input_per_backend_table_and_media_default() -> None:
    assert create_backend("scripted:x", _scripted()).video_input == "frames"
    native = create_backend("scripted:x", _scripted(video_input="native"))
    assert native.video_input == "native" and "video_input" not in native.options
    with pytest.raises(ConfigError, match="video_input = 'movie': choose frames or native"):
        create_backend("scripted:x", _scripted(video_input="movie"))
    cfg = AnnotateConfig(model="scripted:x", media={"video_input": "native"}, backends=_scripted())  # type: ignore[arg-type]
    assert {b.video_input for b in build_backends(cfg).values()} == {"native"}
    table_wins = AnnotateConfig(
        model="scripted:x",
        media={"video_input": "native"},  # type: ignore[arg-type]
        backends=_scripted(video_input="frames"),
    )
    assert {b.video_input for b in build_backends(table_wins).values()} == {"frames"}


def test_the_flag_beats_every_table() -> None:
    cfg = AnnotateConfig(model="scripted:x", backends=_scripted(video_input="native"))
    flagged = apply_overrides(cfg, {"video_input": "frames"})
    assert flagged.media.video_input == "frames"
    assert {b.video_input for b in build_backends(flagged).values()} == {"frames"}
    assert {b.video_input for b in build_backends(apply_overrides(cfg, {})).values()} == {"native"}


def test_endpoint_tables_must_agree_on_video_input() -> None:
    tables = {
        "openai": [
            {"base_url": "http://127.0.0.1:1/v1", "video_input": "native"},
            {"base_url": "http://127.0.0.1:2/v1"},
        ]
    }
    assert create_backend("openai:m", tables).video_input == "native"
    tables["openai"][1]["video_input"] = "frames"
    with pytest.raises(ConfigError, match="set video_input differently"):
        create_backend("openai:m", tables)


class _FramesOnly(Backend):
    name = "frames-only"

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        return Output("No.")


def test_a_backend_that_cannot_take_video_is_refused_at_start_naming_the_fix() -> None:
    backend = _FramesOnly("m")
    check_video_input(backend)  # frames: nothing to check
    backend.video_input = "native"
    with pytest.raises(BackendUnavailableError) as info:
        check_video_input(backend)
    message = str(info.value)
    assert "frames-only:m" in message and "--video-input frames" in message and "\n" not in message
    backend.alias = "fast"
    with pytest.raises(BackendUnavailableError, match=r"\[backends\.fast\]"):
        check_video_input(backend)


def test_openai_and_scripted_take_videos(tmp_path: Path) -> None:
    for spec, options in (("openai:m", {"openai": {"base_url": "http://127.0.0.1:9/v1"}}), ("scripted:x", _scripted())):
        backend = create_backend(spec, options)
        backend.video_input = "native"
        check_video_input(backend)


def test_frames_only_identity_has_no_video_keys_and_native_adds_them() -> None:
    from vhd.backends.registry import build_backends
    from vhd.debate.identity import config_identity
    from vhd.debate.prompts import Prompts

    old_media_keys = {
        "max_side", "format", "quality", "frames", "first_frames", "max_pixels", "max_file_mb",
        "max_frame_pixels", "decode_memory_mb",
    }  # fmt: skip
    cfg = AnnotateConfig(model="scripted:x", backends=_scripted())
    frames = config_identity(cfg, build_backends(cfg), Prompts(), [])
    assert set(frames["media"]) == old_media_keys  # the VHD11K protocol keeps the hash it had
    assert all("video_input" not in role for role in frames["roles"].values())
    assert not any(name.endswith("_clip") for name in frames["prompts"])
    native_cfg = apply_overrides(cfg, {"video_input": "native"})
    native = config_identity(native_cfg, build_backends(native_cfg), Prompts(), [])
    assert native["media"]["clip_seconds"] == 30.0 and native["roles"]["judge"]["video_input"] == "native"
    assert "judge_clip" in native["prompts"]


def test_a_debate_shows_each_role_what_its_backend_takes(clip) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from vhd.backends.scripted import ScriptedBackend
    from vhd.debate.engine import Debate
    from vhd.debate.prompts import Prompts
    from vhd.records import Kind, Role

    script = {
        "script": {"default": "No, fine.", "rules": [{"when": {"tag": "judge", "videos": 1}, "reply": "Yes, x."}]}
    }
    cfg = AnnotateConfig(
        debaters="scripted:x",
        judge="clipjudge:x",
        backends={"scripted": script, "clipjudge": {"type": "scripted", "video_input": "native", **script}},
    )
    backends = build_backends(cfg)
    debate = Debate(backends, cfg, Prompts())
    assert debate.video_mode == "both"
    frame = EncodedImage(b"\x89PNG", "image/png", 1, 1)
    result = asyncio.run(debate.run(Kind.VIDEO, [frame, frame], clip))
    assert result.verdict.harmful is True  # the judge saw the clip
    debater = backends[Role.AFFIRMATIVE]
    judge = backends[Role.JUDGE]
    assert isinstance(debater, ScriptedBackend) and isinstance(judge, ScriptedBackend)
    for _, messages in debater.calls:
        assert sum(len(m.images) for m in messages) == 2 and not any(m.videos for m in messages)
        assert "2 frames" in messages[0].text
    [(_, judged)] = judge.calls
    assert judged[-1].videos == [clip] and judged[-1].images == []
    assert "a clip of 2.0 seconds" in judged[0].text
