"""`vhd annotate --segments`: every part of a video looked at, harm located in time, calls bounded.

The endpoint is a real loopback server that answers "harmful" exactly when the planted red disk
is visible in one of the frames it is sent (`vhd.demo.red_visible`), so what the models see is
what is tested: pixels, not text.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import vhd
from tests.servers.chat_server import ChatServer, Failure
from vhd.annotate import RunSummary
from vhd.annotate.options import RunOptions
from vhd.annotate.segmented import CAPPED, DEBATE, SCREEN
from vhd.demo import PlantedVideo, red_visible, write_event_video
from vhd.errors import ConfigError
from vhd.store.sqlite import Store

pytest.importorskip("av")

EVENTS = ((3.0, 5.0), (9.0, 10.5))
CUTS = (3.0, 5.0, 7.0, 9.0, 10.5)


def images_in(body: dict[str, Any]) -> list[Image.Image]:
    found = []
    for message in body["messages"]:
        content = message["content"]
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                data = part["image_url"]["url"].split(",", 1)[1]
                found.append(Image.open(io.BytesIO(base64.b64decode(data))))
    return found


def red_judge(body: dict[str, Any]) -> str:
    """The loopback model: harmful exactly when the red event is in a frame it was sent."""
    system = body["messages"][0]["content"]
    system = system if isinstance(system, str) else " ".join(p.get("text", "") for p in system)
    seen = any(red_visible(im) for im in images_in(body))
    if "judge" in system:
        return "Yes, a red disk." if seen else "No, plain colours."
    return "1. A red disk is shown." if seen else "1. Plain colours."


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("planted")
    write_event_video(folder / "events.mp4", PlantedVideo(12.0, events=EVENTS, cuts=CUTS, fps=10))
    return folder / "events.mp4"


def config(path: Path, base_url: str, **video: object) -> Path:
    lines = ["[backends.openai]", f'base_url = "{base_url}"', "backoff_base = 0.01", "max_retries = 1"]
    lines += ["[debate]", "rounds = 1", "[video]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in {"segments": True, **video}.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def run(media: Path, db: Path, cfg: Path) -> RunSummary:
    return vhd.annotate([media], config=cfg, store=db, model="openai:m", progress=False)


def test_segments_locate_the_events_and_debate_only_the_flagged(planted: Path, tmp_path: Path) -> None:
    with ChatServer(reply=red_judge) as srv:
        summary = run(planted, tmp_path / "vhd.db", config(tmp_path / "c.toml", srv.base_url))
        calls = srv.chat_requests
    assert summary.annotated == 1 and summary.harmful == 1 and summary.segments == 6
    with Store(tmp_path / "vhd.db") as db:
        (_, ann), *_ = db.iter_annotations(summary.config_hash)
    segments = ann.verdict.segments
    assert [(s.start_s, s.end_s) for s in segments] == [(0, 3), (3, 5), (5, 7), (7, 9), (9, 10.5), (10.5, 12)]
    assert [s.harmful for s in segments] == [False, True, False, False, True, False]
    assert [s.decided_by for s in segments] == [SCREEN, DEBATE, SCREEN, SCREEN, DEBATE, SCREEN]
    assert ann.decided_by == "segments"
    assert ann.verdict.reason.startswith("harmful in 2 of 6 segments: 0:03-0:05 a red disk; 0:09-0:10.5 a red disk")
    assert calls == 6 + 2 * 3  # one screen per segment, a 3-call debate (1 round) for the two flagged


def test_the_five_frame_protocol_misses_an_event_between_its_frames(tmp_path: Path) -> None:
    video = write_event_video(tmp_path / "between.mp4", PlantedVideo(20.0, events=((6.0, 8.0),), cuts=(6.0, 8.0)))
    cfg = tmp_path / "c.toml"
    with ChatServer(reply=red_judge) as srv:
        off = config(cfg, srv.base_url, segments=False)
        whole = run(video, tmp_path / "a.db", off)
        on = run(video, tmp_path / "b.db", config(cfg, srv.base_url))
    assert whole.harmful == 0  # frames at 0, 5, 10, 15, 19.9 s: the event at 6-8 s is never shown
    assert on.harmful == 1


def test_the_call_cap_leaves_flagged_segments_at_their_screen_verdict(planted: Path, tmp_path: Path) -> None:
    with ChatServer(reply=red_judge) as srv:
        summary = run(planted, tmp_path / "vhd.db", config(tmp_path / "c.toml", srv.base_url, max_calls_per_video=9))
        calls = srv.chat_requests
    with Store(tmp_path / "vhd.db") as db:
        (_, ann), *_ = db.iter_annotations(summary.config_hash)
    by = [s.decided_by for s in ann.verdict.segments]
    assert by == [SCREEN, DEBATE, SCREEN, SCREEN, CAPPED, SCREEN]
    assert summary.segments_capped == 1 and ann.verdict.harmful is True
    assert calls == summary.usage.calls == 9  # 6 screens and one debate: the screens count against the cap


def test_the_call_cap_counts_screens_and_says_what_it_left_unjudged(planted: Path, tmp_path: Path) -> None:
    """Once not even a screen fits, the rest of the video is not judged, and the verdict and summary say so."""
    events: list[str] = []
    with ChatServer(reply=red_judge) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url, max_calls_per_video=6)
        summary = vhd.annotate(
            [planted], config=cfg, store=tmp_path / "vhd.db", model="openai:m", progress=False, on_event=events.append
        )
        calls = srv.chat_requests
    assert calls == summary.usage.calls == 6  # three screens and one debate (it was 6 + 3: every screen ran)
    with Store(tmp_path / "vhd.db") as db:
        (_, ann), *_ = db.iter_annotations(summary.config_hash)
    assert [s.decided_by for s in ann.verdict.segments] == [SCREEN, DEBATE, SCREEN]
    assert ann.verdict.harmful is True  # what was judged decides it
    assert "not judged from 0:07 on: the call cap (6 calls a video, max_calls_per_video) is spent" in ann.verdict.reason
    assert summary.videos_cut_short == 1 and any("not judged from 0:07 on" in e for e in events)


def test_a_video_the_cap_cuts_short_is_undecided_not_clean(tmp_path: Path) -> None:
    """Segments not looked at never make a video "not harmful": it stays undecided, with the reason."""
    video = write_event_video(tmp_path / "late.mp4", PlantedVideo(12.0, events=((10.5, 12.0),), cuts=CUTS, fps=10))
    with ChatServer(reply=red_judge) as srv:
        summary = run(video, tmp_path / "vhd.db", config(tmp_path / "c.toml", srv.base_url, max_calls_per_video=2))
        calls = srv.chat_requests
    assert calls == 2 and summary.unparsed == 1 and summary.unharmful == 0
    with Store(tmp_path / "vhd.db") as db:
        (_, ann), *_ = db.iter_annotations(summary.config_hash)
    assert ann.verdict.harmful is None
    assert ann.verdict.reason.startswith("not judged from 0:05 on: the call cap (2 calls a video")


def test_segments_show_progress_while_a_video_is_judged(planted: Path, tmp_path: Path) -> None:
    """The bar moves with the seconds of video decided (it sat at 0/1 while a video's segments were judged)."""
    reports: list[tuple[int, int | None, str]] = []

    def progress(done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
        reports.append((done, total, stage))

    with ChatServer(reply=red_judge) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        vhd.annotate([planted], config=cfg, store=tmp_path / "vhd.db", model="openai:m", progress=progress)
    seconds = [(done, total) for done, total, stage in reports if stage == "video segments (seconds)"]
    assert [done for done, _ in seconds] == [3, 5, 7, 9, 10, 12, 12]  # one report a segment, then the end
    assert all(total == 12 for _, total in seconds)  # the header's length: an ETA while it runs


def test_the_call_cap_counts_the_cascades_stage_calls(
    planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.bench.fake_detector import RedDetector
    from vhd.cli.main import main
    from vhd.detectors import registry

    monkeypatch.setitem(registry.BUILTIN, "red", "tests.bench.fake_detector:RedDetector")
    RedDetector.calls = 0
    with ChatServer(reply=red_judge) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url, max_calls_per_video=10)
        argv = ["annotate", str(planted), "--model", "openai:m", "--store", str(tmp_path / "vhd.db"), "--config"]
        cascade = ["--cascade", "cheap=red", "--cascade-thresholds", "0.3:0.85"]
        assert main([*argv, str(cfg), "--no-progress", *cascade]) == 0
        chat = srv.chat_requests
    assert RedDetector.calls + chat <= 10  # was 18 stage calls and 9 debate calls: the stages went uncounted
    assert RedDetector.calls == 9 and chat == 0  # three segments' stages (3 frames each), then no screen fits


def test_a_killed_run_resumes_at_the_segment_it_stopped(planted: Path, tmp_path: Path) -> None:
    db = tmp_path / "vhd.db"
    answered = 0

    def failing_later(body: dict[str, Any]) -> str:
        nonlocal answered
        answered += 1
        if answered == 5:  # the segments after the third fail: the endpoint turns the key away
            srv.fail_next([Failure.http(401, "bad key")] * 50)
        return red_judge(body)

    with ChatServer(reply=failing_later) as srv:
        first = run(planted, db, config(tmp_path / "c.toml", srv.base_url))
        assert first.errors == 1
        with Store(db) as store:
            kept = store.stored_segments(next(iter(store.iter_annotations()))[0].id, first.config_hash)
        assert [kept[i].harmful for i in sorted(kept)] == [False, True, None]  # the third failed
        srv.reset()  # the key works again
        second = run(planted, db, config(tmp_path / "c.toml", srv.base_url))
        calls = srv.chat_requests
    assert second.config_hash == first.config_hash
    assert second.annotated == 1 and second.harmful == 1
    assert calls == 1 + 1 + (1 + 3) + 1  # segments 2, 3, 4 (flagged, debated) and 5; not 0 and 1


def test_a_resumed_video_is_capped_as_if_its_first_run_had_gone_on(planted: Path, tmp_path: Path) -> None:
    """The calls stored with the segments taken back count against ``--max-calls-per-video``."""
    db, cfg = tmp_path / "vhd.db", config(tmp_path / "c.toml", "", max_calls_per_video=9)
    answered = 0

    def failing_later(body: dict[str, Any]) -> str:
        nonlocal answered
        answered += 1
        if answered == 5:  # segment 0's screen, segment 1's screen and debate; then the key is refused
            srv.fail_next([Failure.http(401, "bad key")] * 50)
        return red_judge(body)

    with ChatServer(reply=failing_later) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url, max_calls_per_video=9)
        first = run(planted, db, cfg)
        assert first.errors == 1
        with Store(db) as store:
            sid = next(iter(store.iter_annotations()))[0].id
            assert store.stored_segment_calls(sid, first.config_hash) == {0: 1, 1: 4, 2: 0}
        srv.reset()
        second = run(planted, db, cfg)
        calls = srv.chat_requests
    with Store(db) as store:
        (_, ann), *_ = store.iter_annotations(second.config_hash)
    # what one uninterrupted run decides (test_the_call_cap_leaves_flagged_segments_at_their_screen_verdict)
    assert [s.decided_by for s in ann.verdict.segments] == [SCREEN, DEBATE, SCREEN, SCREEN, CAPPED, SCREEN]
    assert calls == 4  # the screens of segments 2-5; a fresh cap would have debated segment 4 (3 more)


def test_a_video_that_cannot_be_segmented_falls_back(
    planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vhd.media.segments as segments

    def backwards(*_: object, **__: object) -> Any:
        raise segments.SegmentationError("timestamps go backwards at frame 7 (0.700 s, then 0.100 s)")
        yield  # a generator, like the real one

    monkeypatch.setattr(segments, "iter_segments", backwards)
    events: list[str] = []
    with ChatServer(reply=red_judge) as srv:
        summary = vhd.annotate(
            [planted], config=config(tmp_path / "c.toml", srv.base_url), store=tmp_path / "vhd.db",
            model="openai:m", progress=False, on_event=events.append,
        )  # fmt: skip
    assert summary.annotated == 1
    with Store(tmp_path / "vhd.db") as db:
        (_, ann), *_ = db.iter_annotations(summary.config_hash)
    assert ann.decided_by == "whole-video" and ann.verdict.segments == []
    assert any("whole-video protocol (timestamps go backwards" in e for e in events)
    with Store(tmp_path / "vhd.db") as db:
        (sample, _), *_ = db.iter_annotations(summary.config_hash)
    assert len(sample.frames) == 5  # the five frames read for the fallback are the sample's


def test_a_segmented_video_is_decoded_once(planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The segment pass is the one decode: the five whole-video frames are not read beside it."""
    import av

    opened: list[str] = []
    real_open = av.open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("mode", args[0] if args else "r") == "r":
            opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(av, "open", counting_open)
    with ChatServer(reply=red_judge) as srv:
        summary = run(planted, tmp_path / "vhd.db", config(tmp_path / "c.toml", srv.base_url))
    assert summary.annotated == 1 and summary.segments == 6
    assert opened == [str(planted)]  # one pass over the file (it was two: the five frames, then the segments)
    with Store(tmp_path / "vhd.db") as db:
        (sample, ann), *_ = db.iter_annotations(summary.config_hash)
    assert ann.decided_by == "segments" and sample.frames == []  # no whole-video frames were read


def test_an_unreadable_video_is_skipped_and_the_run_goes_on(planted: Path, tmp_path: Path) -> None:
    media = tmp_path / "media"
    media.mkdir()
    (media / "good.mp4").write_bytes(planted.read_bytes())
    (media / "cut.mp4").write_bytes(planted.read_bytes()[:2000])  # cut before its index: no decoder opens it
    with ChatServer(reply=red_judge) as srv:
        summary = run(media, tmp_path / "vhd.db", config(tmp_path / "c.toml", srv.base_url))
    assert summary.annotated == 1 and summary.harmful == 1 and summary.skipped == 1
    assert "cut.mp4" in summary.skip_reasons[0][0]
    with Store(tmp_path / "vhd.db") as db:
        assert [s.path for s, _ in db.iter_annotations()] == [str(media / "good.mp4")]
        assert db.find_samples_named("cut.mp4") == []  # the cut file left no sample behind


def test_a_video_damaged_past_its_start_is_skipped_not_the_run(
    planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Damage the segment pass meets midway (past the first frames) is that video's outcome."""
    import vhd.media.segments as segments
    from vhd.errors import MediaError

    real = segments.iter_segments

    def damaged_later(path: Any, *args: Any, **kwargs: Any) -> Any:
        stream = real(path, *args, **kwargs)
        yield next(stream)
        if Path(path).name == "bad.mp4":
            raise MediaError("cannot decode video (InvalidDataError: invalid data at 0:03)")
        yield from stream

    monkeypatch.setattr(segments, "iter_segments", damaged_later)
    media = tmp_path / "media"
    media.mkdir()
    (media / "bad.mp4").write_bytes(planted.read_bytes())
    write_event_video(media / "good.mp4", PlantedVideo(6.0, events=((1.0, 2.0),), cuts=(1.0, 2.0), fps=10))
    with ChatServer(reply=red_judge) as srv:
        summary = run(media, tmp_path / "vhd.db", config(tmp_path / "c.toml", srv.base_url))
    assert summary.annotated == 1 and summary.harmful == 1 and summary.skipped == 1
    assert summary.skip_reasons == [
        (str(media / "bad.mp4"), "cannot decode video (InvalidDataError: invalid data at 0:03)")
    ]


def test_segments_refuse_stage_wise_debates(planted: Path, tmp_path: Path) -> None:
    with ChatServer(reply=red_judge) as srv, pytest.raises(ConfigError, match="--segments works with ordinary"):
        vhd.annotate(
            [planted], config=config(tmp_path / "c.toml", srv.base_url), store=tmp_path / "vhd.db",
            model="openai:m", progress=False, options=RunOptions(stage_wise=True),
        )  # fmt: skip


def test_without_segments_the_configuration_is_the_vhd11k_one(planted: Path, tmp_path: Path) -> None:
    """`[video]` settings with segments off leave the configuration (and its hash) as before."""
    plain = tmp_path / "plain.toml"
    plain.write_text('[backends.openai]\nbase_url = "http://127.0.0.1:9/v1"\n[debate]\nrounds = 1\n')
    tuned = config(tmp_path / "off.toml", "http://127.0.0.1:9/v1", segments=False, max_segment_s=5.0)
    on = config(tmp_path / "on.toml", "http://127.0.0.1:9/v1")
    hashes = [
        vhd.annotate([planted], config=c, store=tmp_path / "d.db", model="openai:m", progress=False,
                     options=RunOptions(dry_run=True)).config_hash
        for c in (plain, tuned, on)
    ]  # fmt: skip
    assert hashes[0] == hashes[1] != hashes[2]


def test_the_cascade_screens_each_segment(planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.bench.fake_detector import RedDetector
    from vhd.cli.main import main
    from vhd.detectors import registry

    monkeypatch.setitem(registry.BUILTIN, "red", "tests.bench.fake_detector:RedDetector")
    RedDetector.calls = 0
    db = tmp_path / "vhd.db"
    with ChatServer(reply=red_judge) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        argv = ["annotate", str(planted), "--model", "openai:m", "--store", str(db), "--config", str(cfg)]
        assert main([*argv, "--no-progress", "--cascade", "cheap=red", "--cascade-thresholds", "0.3:0.85"]) == 0
        chat = srv.chat_requests
    with Store(db) as store:
        (_, ann), *_ = store.iter_annotations()
    segments = ann.verdict.segments
    # the centre's red share: blue 0.1, event 0.9, yellow 0.7, grey 0.4, event, purple 0.5
    assert [s.decided_by for s in segments] == ["cheap", "cheap", DEBATE, DEBATE, "cheap", DEBATE]
    assert [s.harmful for s in segments] == [False, True, False, False, True, False]
    assert RedDetector.calls == 6 * 3 and chat == 3 * 3  # the stage on each frame; three debates of 3 calls
    assert ann.verdict.harmful is True


class _OutOfOrder:
    """The run's own calls (`InProcess`), answered later for earlier segments, counting those in flight.

    A screen may also raise for one span, as a bug or a lost worker would.
    """

    def __init__(self, calls: Any, raise_at: float | None = None) -> None:
        self.calls = calls
        self.raise_at = raise_at
        self.in_flight = 0
        self.peak = 0
        self.screened: list[float] = []

    @property
    def calls_per_debate(self) -> int:
        return int(self.calls.calls_per_debate)

    @property
    def calls_per_screen(self) -> int:
        return int(self.calls.calls_per_screen)

    async def screen(self, images: Any, clip: Any, span: tuple[float, float]) -> Any:
        import asyncio

        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep((12.0 - span[0]) * 0.02)  # the first segment answers last
            if span[0] == self.raise_at:
                raise RuntimeError("the screen broke")
            self.screened.append(span[0])
            return await self.calls.screen(images, clip, span)
        finally:
            self.in_flight -= 1

    async def debate(self, images: Any, clip: Any, span: tuple[float, float] | None) -> Any:
        return await self.calls.debate(images, clip, span)


def _judge(
    planted: Path, cfg: Path, *, parallel: int, raise_at: float | None = None, store: Any = None
) -> tuple[Any, Any, list[int]]:
    """`judge_video` over the loopback model, its calls answered out of order; also the positions stored."""
    from vhd.aio import run_sync
    from vhd.annotate.api import annotate_config
    from vhd.backends.registry import build_backends
    from vhd.debate.engine import Debate
    from vhd.debate.prompts import Prompts
    from vhd.debate.segmented import InProcess, judge_video
    from vhd.media.load import MediaSettings

    config = annotate_config(cfg, model="openai:m")
    debate = Debate(build_backends(config), config, Prompts(), [])
    calls = _OutOfOrder(InProcess(debate), raise_at)
    stored: list[int] = []
    judged = run_sync(
        judge_video(
            planted, config.video, MediaSettings(), calls=calls, parallel=parallel,
            on_segment=store or (lambda i, _s, _n: stored.append(i)),
        )
    )  # fmt: skip
    return judged, calls, stored


def test_segments_judged_at_once_give_the_sequential_verdict_and_cap(planted: Path, tmp_path: Path) -> None:
    """Segments in flight at once, answered last-first: same segments, verdict and capped debate as one by one."""
    with ChatServer(reply=red_judge) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url, max_calls_per_video=9)
        one, one_calls, _ = _judge(planted, cfg, parallel=1)
        sequential = srv.chat_requests
        many, many_calls, stored = _judge(planted, cfg, parallel=6)
        concurrent = srv.chat_requests - sequential
    # under the cap, a screen runs ahead only while every earlier debate still fits: three at once at most here
    assert one_calls.peak == 1 and 1 < many_calls.peak <= 3
    assert many.verdict == one.verdict and many.verdict.harmful is True
    assert [s.decided_by for s in many.verdict.segments] == [SCREEN, DEBATE, SCREEN, SCREEN, CAPPED, SCREEN]
    assert many.capped == one.capped == [4] and many.usage == one.usage
    assert sequential == concurrent == 9  # the cap bounds the video's calls however they ran
    assert sorted(stored) == [0, 1, 2, 3, 4, 5]


def test_a_segment_whose_judgement_raises_is_its_outcome(planted: Path, tmp_path: Path) -> None:
    from vhd.annotate.segmented import FAILED
    from vhd.records import Status

    with ChatServer(reply=red_judge) as srv:
        judged, _, stored = _judge(planted, config(tmp_path / "c.toml", srv.base_url), parallel=3, raise_at=5.0)
        ruled, _, _ = _judge(
            planted, config(tmp_path / "r.toml", srv.base_url, min_harmful_segments=3), parallel=3, raise_at=5.0
        )
    segments = judged.verdict.segments
    assert [s.harmful for s in segments] == [False, True, None, False, True, False]
    assert segments[2].decided_by == FAILED
    assert segments[2].reason == "not judged: unexpected error (RuntimeError: the screen broke)"
    assert judged.verdict.harmful is True and judged.verdict.status is Status.OK  # the other segments decide it
    assert sorted(stored) == [0, 1, 3, 4, 5]  # the failed one is stored with the verdict, asked again later
    # When the others cannot decide it, the video ends with status error (the next run asks that segment).
    assert (
        ruled.verdict.status is Status.ERROR
        and ruled.error == "0:05-0:07: unexpected error (RuntimeError: the screen broke)"
    )
    assert [s.harmful for s in ruled.verdict.segments] == [False, True, None, False, True, False]


def test_segments_take_ship_media_since_the_driver_decodes(planted: Path, tmp_path: Path) -> None:
    """Segment steps always carry their frames, so ``--ship-media`` (for the other samples) is accepted."""
    from vhd.execution import ExecutorOptions
    from vhd.executors.ray_pool import RayExecutor

    cfg = config(tmp_path / "c.toml", "http://127.0.0.1:9/v1")
    runner = RayExecutor(ExecutorOptions(ship_media=True))
    summary = vhd.annotate([planted], config=cfg, store=tmp_path / "d.db", model="openai:m", progress=False,
                           options=RunOptions(dry_run=True, executor=runner))  # fmt: skip
    assert summary.dry_run and summary.found == 1


def test_a_store_that_cannot_be_written_stops_the_video_at_once(planted: Path, tmp_path: Path) -> None:
    """A run fault in one segment (its store write) is not that segment's outcome: no further segment starts."""
    from vhd.errors import StoreWriteError

    def full(*_: object) -> None:
        raise StoreWriteError("database or disk is full", full=True)

    with ChatServer(reply=red_judge) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        with pytest.raises(StoreWriteError):
            _judge(planted, cfg, parallel=2, store=full)
        asked = srv.chat_requests
    assert asked <= 3  # the two segments in flight (and a debate's first call), not all six


def test_a_video_damaged_past_the_whole_video_frames_is_skipped(
    planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Damage met while segmenting (after the whole-video frames loaded) is the video's skip reason."""
    import vhd.media.segments as segments
    from vhd.errors import MediaError

    def damaged(*_: object, **__: object) -> Any:
        raise MediaError("events.mp4: the stream is damaged at 7.3 s (Invalid data found)")
        yield  # a generator, like the real one

    monkeypatch.setattr(segments, "iter_segments", damaged)
    with ChatServer(reply=red_judge) as srv:
        summary = run(planted, tmp_path / "vhd.db", config(tmp_path / "c.toml", srv.base_url))
    assert summary.skipped == 1 and summary.annotated == 0
    assert any("damaged at 7.3 s" in reason for _, reason in summary.skip_reasons)
