"""`vhd annotate --segments --executor ray`: a video's segments judged as work items of their own.

The driver decodes the video and sends each segment's screen and debate to the workers, so the
segments of one long video run on several workers at once; each result is stored as it comes
back (a stopped run resumes at the segment), and a segment whose judgement fails is that
segment's outcome. The endpoint is a loopback server that answers "harmful" exactly when the
planted red disk is in a frame it is sent, and records which process sent each call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from tests.executors.test_annotate_ray import TWO, rows
from tests.optional import need_module
from tests.servers.chat_server import ChatServer
from vhd.annotate.api import annotate, annotate_async
from vhd.annotate.options import RunOptions
from vhd.store.sqlite import Store

pytestmark = pytest.mark.slow

EVENTS = ((9.0, 11.0), (21.0, 23.0))
CUTS = (3.0, 6.0, 9.0, 11.0, 14.0, 17.0, 21.0, 23.0, 26.0)
SPANS = [(0, 3), (3, 6), (6, 9), (9, 11), (11, 14), (14, 17), (17, 21), (21, 23), (23, 26), (26, 30)]
FLAGGED = [False, False, False, True, False, False, False, True, False, False]


@pytest.fixture
def long_video(tmp_path: Path) -> Path:
    need_module("av", "pip install 'vhd[video]'")
    need_module("psutil", "pip install psutil")
    from vhd.demo import PlantedVideo, write_event_video

    return write_event_video(tmp_path / "long.mp4", PlantedVideo(30.0, events=EVENTS, cuts=CUTS, fps=10))


def stored(db: Path, video: Path, config_hash: str) -> dict[int, Any]:
    with Store(db) as st:
        (sample,) = st.find_samples_named(video.name)
        return st.stored_segments(sample.id, config_hash)


def test_one_videos_segments_run_on_several_workers_with_the_local_result(
    ray_session: Any, tmp_path: Path, long_video: Path
) -> None:
    from tests.annotate.test_segments import config, red_judge

    with ChatServer(reply=red_judge, latency=0.05, peer_pids=True) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        local = annotate([long_video], model="openai:m", config=cfg, store=tmp_path / "local.db", progress=False)
        local_calls = srv.chat_requests
        srv.reset()
        on_ray = annotate(
            [long_video],
            model="openai:m",
            config=cfg,
            store=tmp_path / "ray.db",
            progress=False,
            options=RunOptions(executor="ray", executor_options=TWO),
        )
        senders = {r.peer_pid for r in srv.requests}
        ray_calls = srv.chat_requests
    assert local.harmful == on_ray.harmful == 1 and local.segments == on_ray.segments == len(SPANS)
    assert rows(tmp_path / "local.db") == rows(tmp_path / "ray.db")  # same segments, verdict, turns, usage
    with Store(tmp_path / "ray.db") as st:
        ((_, ann),) = st.iter_annotations()
    assert [(s.start_s, s.end_s) for s in ann.verdict.segments] == SPANS
    assert [s.harmful for s in ann.verdict.segments] == FLAGGED
    assert ray_calls == local_calls == len(SPANS) + 2 * 3  # a screen each, a debate for the two flagged
    assert None not in senders and os.getpid() not in senders  # every call came from a worker
    assert len(senders) == 2  # the one video's segments went to both workers


def test_a_run_stopped_midway_on_ray_resumes_at_the_segment(ray_session: Any, tmp_path: Path, long_video: Path) -> None:
    from tests.annotate.test_segments import config, red_judge

    debating = threading.Event()

    def slow_debates(body: dict[str, Any]) -> str:
        if "You take part in a debate" in str(body["messages"][0]["content"]):  # a debater: slow
            debating.set()
            time.sleep(1.5)
        return red_judge(body)

    db = tmp_path / "vhd.db"
    with ChatServer(reply=slow_debates) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        options = RunOptions(executor="ray", executor_options=TWO)

        async def stop_midway() -> None:
            run = asyncio.create_task(
                annotate_async([long_video], model="openai:m", config=cfg, store=db, progress=False, options=options)
            )
            deadline = time.monotonic() + 60
            while not debating.is_set() and time.monotonic() < deadline and not run.done():
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the screens of the plain segments come back and are stored meanwhile
            run.cancel()  # the driver stops: nothing of the video is committed but its stored segments
            with suppress(asyncio.CancelledError):
                await run

        asyncio.run(stop_midway())
        assert debating.is_set()
        config_hash = annotate([long_video], model="openai:m", config=cfg, store=tmp_path / "plan.db",
                               options=RunOptions(dry_run=True)).config_hash  # fmt: skip
        with Store(db) as st:
            assert list(st.iter_annotations()) == []  # the video was not committed
        kept_before = set(stored(db, long_video, config_hash))
        time.sleep(0.5)
        srv.reset()
        second = annotate([long_video], model="openai:m", config=cfg, store=db, progress=False, options=options)
        calls = srv.chat_requests
    assert second.config_hash == config_hash and kept_before, "no segment was stored before the run stopped"
    assert kept_before <= {i for i, f in enumerate(FLAGGED) if not f}  # the flagged ones were mid-debate
    # The second run asks only the segments the first one had not stored: a screen each, a debate if flagged.
    assert calls == sum(1 + 3 * FLAGGED[i] for i in range(len(SPANS)) if i not in kept_before)
    assert second.annotated == 1 and second.harmful == 1
    with Store(db) as st:
        ((_, ann),) = st.iter_annotations()
    assert [s.harmful for s in ann.verdict.segments] == FLAGGED


def test_a_segment_whose_worker_dies_is_that_segments_outcome(ray_session: Any, tmp_path: Path) -> None:
    """A worker killed on a segment's call (no second try): that segment fails, its video and the run go on."""
    need_module("av", "pip install 'vhd[video]'")
    need_module("psutil", "pip install psutil")
    from tests.annotate.test_segments import CUTS as SHORT_CUTS
    from tests.annotate.test_segments import EVENTS as SHORT_EVENTS
    from tests.annotate.test_segments import config, images_in, red_judge
    from vhd.annotate.segmented import FAILED
    from vhd.demo import PlantedVideo, red_visible, write_event_video
    from vhd.executors.ray_pool import RayExecutor

    media = tmp_path / "videos"
    media.mkdir()
    write_event_video(media / "a.mp4", PlantedVideo(12.0, events=SHORT_EVENTS, cuts=SHORT_CUTS, fps=10))
    write_event_video(media / "b.mp4", PlantedVideo(6.0, cuts=(3.0,), fps=10))
    killed: list[int] = []

    def kill_on_the_first_event(body: dict[str, Any]) -> str:
        request = srv.current()
        pid = request.peer_pid if request is not None else None
        if not killed and pid and pid != os.getpid() and any(red_visible(im) for im in images_in(body)):
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        return red_judge(body)

    runner = RayExecutor(dataclasses.replace(TWO, max_attempts=1))
    with ChatServer(reply=kill_on_the_first_event, peer_pids=True) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        cfg.write_text("concurrency = 1\n" + cfg.read_text())  # one call at a time: the kill hits one segment
        summary = annotate([media], model="openai:m", config=cfg, store=tmp_path / "vhd.db", progress=False,
                           options=RunOptions(executor=runner))  # fmt: skip
    assert killed and runner.timings.redone == 0
    assert summary.annotated == 2 and summary.errors == 0 and summary.harmful == 1 and summary.remaining == 0
    with Store(tmp_path / "vhd.db") as st:
        verdicts = {Path(s.path).name: a.verdict for s, a in st.iter_annotations()}
    first = verdicts["a.mp4"].segments
    assert [s.harmful for s in first] == [False, None, False, False, True, False]
    assert first[1].decided_by == FAILED and first[1].reason.startswith("not judged: the Ray workers running an item")
    assert verdicts["a.mp4"].harmful is True  # the other event decides the video
    assert [s.harmful for s in verdicts["b.mp4"].segments] == [False, False]


def test_the_cascade_screens_each_segment_on_the_driver(
    ray_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--cascade` with `--executor ray`: the stages screen here, what they leave is debated on the workers."""
    need_module("av", "pip install 'vhd[video]'")
    from PIL import Image

    from tests.annotate.test_segments import CUTS as SHORT_CUTS
    from tests.annotate.test_segments import EVENTS as SHORT_EVENTS
    from tests.annotate.test_segments import config, red_judge
    from tests.bench.fake_detector import RedDetector
    from vhd.cli.main import main
    from vhd.demo import PlantedVideo, write_event_video
    from vhd.detectors import registry

    monkeypatch.setitem(registry.BUILTIN, "red", "tests.bench.fake_detector:RedDetector")
    media = tmp_path / "media"
    media.mkdir()
    write_event_video(media / "events.mp4", PlantedVideo(12.0, events=SHORT_EVENTS, cuts=SHORT_CUTS, fps=10))
    Image.new("RGB", (64, 48), (150, 40, 40)).save(media / "dim.png")  # red share 0.59: the stage cannot decide
    seen: dict[str, tuple[int, int]] = {}
    with ChatServer(reply=red_judge) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        for name, extra in (
            ("local", []),
            ("ray", ["--executor", "ray", "--workers", "2", "--cpus-per-worker", "0.5"]),
        ):
            RedDetector.calls, before = 0, srv.chat_requests
            argv = ["annotate", str(media), "--model", "openai:m", "--store", str(tmp_path / f"{name}.db")]
            argv += [
                "--config",
                str(cfg),
                "--no-progress",
                "--cascade",
                "cheap=red",
                "--cascade-thresholds",
                "0.3:0.85",
            ]
            assert main([*argv, *extra]) == 0
            seen[name] = (RedDetector.calls, srv.chat_requests - before)
    assert seen["ray"] == seen["local"] == (6 * 3 + 1, 3 * 3 + 3)  # stages on every frame; four debates
    assert rows(tmp_path / "local.db") == rows(tmp_path / "ray.db")
    with Store(tmp_path / "ray.db") as st:
        found = {Path(s.path).name: a for s, a in st.iter_annotations()}
    assert [s.decided_by for s in found["events.mp4"].verdict.segments] == [
        "cheap", "cheap", "debate", "debate", "cheap", "debate",
    ]  # fmt: skip
    assert found["dim.png"].decided_by == "debate" and len(found["dim.png"].turns) == 3
