"""Planted-event videos (`vhd.demo`): the event is drawn exactly during its spans, at decoded times."""

from __future__ import annotations

from pathlib import Path

import pytest

from vhd.demo import PlantedVideo, draw_event_frame, red_fraction, red_visible, write_event_video
from vhd.errors import MediaError

av = pytest.importorskip("av")


def test_event_visible_exactly_in_its_span(tmp_path: Path) -> None:
    video = PlantedVideo(6.0, events=((2.0, 3.5),), cuts=(2.0, 3.5, 5.0), fps=10)
    path = write_event_video(tmp_path / "ev.mp4", video)
    seen = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            t = float(frame.pts * frame.time_base)
            seen.append((t, red_visible(frame.to_image())))
    assert len(seen) == 60
    assert [t for t, _ in seen] == pytest.approx([k / 10 for k in range(60)])
    assert all(visible == video.event_at(t) for t, visible in seen)
    assert sum(visible for _, visible in seen) == 15


def test_shots_differ_and_red_is_only_the_event() -> None:
    video = PlantedVideo(4.0, events=(), cuts=(1.0, 2.0, 3.0), fps=5)
    frames = [draw_event_frame(video, k) for k in (0, 5, 10, 15)]
    assert len({f.getpixel((0, 0)) for f in frames}) == 4  # a new background at each cut
    assert max(red_fraction(f) for f in frames) == 0.0


def test_bad_spans_are_refused() -> None:
    with pytest.raises(MediaError, match="start < end"):
        PlantedVideo(4.0, events=((3.0, 2.0),))
    with pytest.raises(MediaError, match="positive duration"):
        PlantedVideo(0.0)
