"""`vhd annotate` with native video input against a loopback server that reads the real content parts.

The server decodes what it is sent (JPEG frames from ``image_url`` parts, an MP4 from vLLM's
``video_url`` part) and its judge answers "Yes" exactly when a red frame is among them: the video
has a red event at 4-5 s that the five VHD11K frames (0, 3, 6, 8.9, 11.9 s) miss and an 8-second
clip at 2 frames a second shows.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import vhd
from tests.media.conftest import center_index, index_color, make_video
from tests.servers.chat_server import ChatServer
from vhd.errors import BackendUnavailableError
from vhd.store.sqlite import Store

pytest.importorskip("av")

RED = (255, 0, 0)
EVENT = range(40, 50)  # frames 40-49 of a 10 fps video: 4.0-4.9 s


def _draw(i: int) -> Image.Image:
    return Image.new("RGB", (64, 48), RED if i in EVENT else index_color(i))


def _is_red(image: Image.Image) -> bool:
    r, g, b = image.convert("RGB").getpixel((32, 24))  # type: ignore[misc]
    return bool(r > 200 and g < 60 and b < 60)


def _decode_url(url: str) -> bytes:
    return base64.b64decode(url.split(",", 1)[1])


def _shown(body: dict[str, Any]) -> list[Image.Image]:
    """Every picture a request shows: its image parts, and each frame of its video parts."""
    from vhd.media.clip import decode_clip

    pictures: list[Image.Image] = []
    for message in body["messages"]:
        content = message["content"]
        for part in content if isinstance(content, list) else []:
            if part["type"] == "image_url":
                pictures.append(Image.open(io.BytesIO(_decode_url(part["image_url"]["url"]))))
            elif part["type"] == "video_url":
                pictures += decode_clip(_decode_url(part["video_url"]["url"]))
    return pictures


def sees_red(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    if "judge" not in system:
        return "1. A reason.\n2. Another."
    return "Yes, violence." if any(_is_red(p) for p in _shown(body)) else "No, plain colours."


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def _config(path: Path, base_url: str, *, native_table: bool) -> Path:
    lines = ["[backends.openai]", f'base_url = "{base_url}"', "max_retries = 0"]
    if native_table:
        lines.append('video_input = "native"')
    lines += ["[media]", "clip_seconds = 8", "clip_fps = 2", "clip_max_side = 64"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_native_input_sends_one_decodable_clip_of_the_first_seconds(tmp_path: Path) -> None:
    make_video(tmp_path / "media" / "event.mp4", 120, fps=10, size=(64, 48), draw=_draw)  # 12 s
    with ChatServer(reply=sees_red) as srv:
        cfg = _config(tmp_path / "native.toml", srv.base_url, native_table=True)
        native = vhd.annotate([tmp_path / "media"], model="openai:qwen", store=tmp_path / "n.db", config=cfg)
        assert (native.annotated, native.harmful, native.usage.calls) == (1, 1, 5)
        assert len(srv.requests) == 5
        for request in srv.requests:
            assert request.images == [] and len(request.videos) == 1  # the clip instead of the frames
            assert request.json["messages"][0]["content"].count("a clip of 8.0 seconds") == 1
        sent = _decode_url(srv.requests[0].videos[0]["url"])
        import av

        with av.open(io.BytesIO(sent)) as container:
            stream = container.streams.video[0]
            assert (stream.codec_context.name, stream.codec_context.pix_fmt) == ("h264", "yuv420p")
            frames = list(container.decode(stream))
        assert [round(float(f.time), 2) for f in frames] == [k / 2 for k in range(16)]  # 0-7.5 s at 2 fps
        shown = [f.to_image() for f in frames]
        assert [_is_red(im) for im in shown] == [t in (8, 9) for t in range(16)]  # 4.0 s and 4.5 s
        assert [center_index(im) for i, im in enumerate(shown) if i not in (8, 9)] == [
            5 * i for i in range(16) if i not in (8, 9)
        ]
        assert len({r.videos[0]["url"] for r in srv.requests}) == 1  # cut and encoded once per sample

        srv.requests.clear()
        cfg = _config(tmp_path / "frames.toml", srv.base_url, native_table=False)
        frames_run = vhd.annotate([tmp_path / "media"], model="openai:qwen", store=tmp_path / "f.db", config=cfg)
        assert (frames_run.annotated, frames_run.harmful) == (1, 0)  # the five frames miss the event
        assert all(len(r.images) == 5 and r.videos == [] for r in srv.requests)

        # the flag beats the table: --video-input frames on the native config is the frames protocol
        srv.requests.clear()
        cfg = _config(tmp_path / "native.toml", srv.base_url, native_table=True)
        flagged = vhd.annotate(
            [tmp_path / "media"], model="openai:qwen", store=tmp_path / "f.db", config=cfg, video_input="frames"
        )
        assert (flagged.annotated, flagged.already_done, len(srv.requests)) == (0, 1, 0)  # same hash as frames_run
    with Store(tmp_path / "n.db") as n, Store(tmp_path / "f.db") as f:
        [(_, native_ann)] = list(n.iter_annotations())
        [(_, frames_ann)] = list(f.iter_annotations())
    assert native_ann.config_hash != frames_ann.config_hash


def test_a_model_without_video_is_refused_before_any_sample(tmp_path: Path, tiny_llava_dir: Path) -> None:
    make_video(tmp_path / "media" / "v.mp4", 20, fps=10)
    with pytest.raises(BackendUnavailableError) as info:
        vhd.annotate([tmp_path / "media"], model=f"hf:{tiny_llava_dir}", store=tmp_path / "s.db", video_input="native")
    message = str(info.value)
    assert "takes no video" in message and "--video-input frames" in message and "\n" not in message
    assert not (tmp_path / "s.db").exists()  # refused before the store was made


def test_an_unreadable_clip_is_that_videos_outcome(tmp_path: Path) -> None:
    make_video(tmp_path / "media" / "ok.mp4", 20, fps=10)
    (tmp_path / "media" / "bad.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 40)
    s = vhd.annotate(
        [tmp_path / "media"],
        model="scripted:demo",
        store=tmp_path / "s.db",
        video_input="native",
    )
    assert s.annotated == 1 and s.skipped == 1
    [(path, reason)] = s.skip_reasons
    assert Path(path).name == "bad.mp4" and "\n" not in reason


def test_dry_run_counts_a_clip_instead_of_the_frames(tmp_path: Path) -> None:
    from vhd.annotate.estimate import image_tokens
    from vhd.annotate.options import RunOptions

    make_video(tmp_path / "media" / "v.mp4", 20, fps=10)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[media]\nclip_seconds = 10\nclip_fps = 1\nclip_max_side = 280\n")

    def estimate(video_input: str) -> int:
        s = vhd.annotate(
            [tmp_path / "media"],
            model="scripted:demo",
            store=tmp_path / "d.db",
            config=cfg,
            video_input=video_input,  # type: ignore[arg-type]
            options=RunOptions(dry_run=True),
        )
        assert s.estimate is not None and s.estimate["calls"] == 5
        return int(s.estimate["prompt_tokens_max"])

    clip = 5 * 10 * 10  # ceil(10 frames / 2) x (280 / 28)^2 cells
    assert estimate("native") - estimate("frames") == 5 * (clip - 5 * image_tokens(1024, 1024))


def test_segments_with_native_input_send_each_span_as_its_own_clip(tmp_path: Path) -> None:
    from vhd.media.clip import decode_clip

    make_video(tmp_path / "media" / "event.mp4", 120, fps=10, size=(64, 48), draw=_draw)  # 12 s, red 4.0-4.9 s
    with ChatServer(reply=sees_red) as srv:
        cfg = _config(tmp_path / "native.toml", srv.base_url, native_table=True)
        with cfg.open("a") as f:
            f.write('[video]\nsegments = true\ndetect = "windows"\nwindow_s = 3\nmin_segment_s = 1\n')
        run = vhd.annotate([tmp_path / "media"], model="openai:qwen", store=tmp_path / "s.db", config=cfg)
        assert (run.annotated, run.harmful) == (1, 1)
        starts = set()
        for request in srv.requests:
            assert request.images == [] and len(request.videos) == 1  # every call: the span's clip only
            frames = decode_clip(_decode_url(request.videos[0]["url"]))
            first = center_index(frames[0]) / 10  # the drawn frame index says where the clip starts
            starts.add(first)
            assert any(_is_red(p) for p in frames) == (first <= 4.0 < first + 3)  # red 4.0-4.9 s
        assert starts == {0.0, 3.0, 6.0, 9.0}  # four 3-second windows, each cut as its own clip
    with Store(tmp_path / "s.db") as db:
        [(_, ann)] = list(db.iter_annotations())
    harmful = [(s.start_s, s.end_s) for s in ann.verdict.segments if s.harmful]
    assert len(harmful) == 1 and harmful[0][0] <= 4.0 < harmful[0][1]
