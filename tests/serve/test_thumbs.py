"""Previews that hide shape, made once at a bounded cost; reveals per sample with an audit trail; login limit.

Through Starlette's test client on a store of the example media plus silhouettes and line art.
"""

from __future__ import annotations

import io
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_module
from tests.serve.conftest import csrf_of, sample_ids
from vhd.records import Kind, Sample
from vhd.store.sqlite import Store

need_module("starlette", "pip install 'vhd[serve]'")
need_module("jinja2", "pip install 'vhd[serve]'")

from vhd.serve import ServeSettings  # noqa: E402
from vhd.serve.security import RateLimit  # noqa: E402
from vhd.serve.thumbs import (  # noqa: E402
    LEVELS,
    MAX_EDGE_RATIO,
    Look,
    MemoryBudget,
    PreviewCache,
    edge_energy,
    sample_frames,
)


def _settings(store: Path, **kw: Any) -> ServeSettings:
    return ServeSettings(store=store, reviewer=kw.pop("reviewer", "alice"), **kw)


def _samples(db: Path) -> list[Sample]:
    """Every sample of the store (as the gallery lists them: one page holds them all)."""
    from starlette.testclient import TestClient

    from vhd.serve import create_app

    with TestClient(create_app(_settings(db)), base_url="http://127.0.0.1") as client:
        ids = sample_ids(client.get("/").text)
    with Store(db) as store:
        found = [store.get_sample(sid) for sid in ids]
    return [s for s in found if s is not None]


def test_every_preview_hides_shape_on_silhouettes_line_art_and_photos(shapes_copy: Path, client_for: Any) -> None:
    """Edge energy at 128 px: every preview, every level, gray and colour, at most a quarter of the original's."""
    from PIL import Image

    client = client_for(_settings(shapes_copy))
    samples = _samples(shapes_copy)
    names = {Path(s.path).name for s in samples}
    assert {"horse.png", "figure_silhouette.png", "hand_silhouette.png", "line_art.png", "checkers.png"} <= names
    worst: dict[str, float] = {}
    for sample in samples:
        for k, original in enumerate(sample_frames(sample)):
            base = edge_energy(original)
            for level in sorted(LEVELS):
                for colour in ("", "&colour=1"):
                    r = client.get(f"/thumb/{sample.id}?frame={k}&level={level}{colour}")
                    assert r.status_code == 200
                    ratio = edge_energy(Image.open(io.BytesIO(r.content))) / base
                    name = Path(sample.path).name
                    worst[name] = max(worst.get(name, 0.0), ratio)
                    assert ratio <= MAX_EDGE_RATIO, (name, k, level, colour, ratio)
    assert len(worst) == 12  # six photos, a video, five drawings


def test_previews_are_grayscale_by_default_and_colour_on_request(shapes_copy: Path, client_for: Any) -> None:
    from PIL import Image, ImageStat

    client = client_for(_settings(shapes_copy))
    astronaut = next(s for s in _samples(shapes_copy) if Path(s.path).name == "astronaut.jpg")

    def spread(data: bytes) -> float:  # how far the channels are apart: 0 for gray
        r, g, b = (ImageStat.Stat(c).mean[0] for c in Image.open(io.BytesIO(data)).convert("RGB").split())
        return max(r, g, b) - min(r, g, b)

    assert spread(client.get(f"/thumb/{astronaut.id}").content) < 1.0
    assert spread(client.get(f"/thumb/{astronaut.id}?colour=1").content) > 5.0


def test_memory_budget_holds_concurrent_decodes_to_it() -> None:
    budget = MemoryBudget(100)
    inside: list[int] = []
    lock = threading.Lock()
    most = [0]

    def work(cost: int) -> None:
        with budget.hold(cost):
            with lock:
                inside.append(cost)
                most[0] = max(most[0], sum(inside))
            time.sleep(0.02)
            with lock:
                inside.remove(cost)

    threads = [threading.Thread(target=work, args=(60,)) for _ in range(6)]
    threads += [threading.Thread(target=work, args=(250,))]  # larger than the budget: runs alone
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 250 and budget.used == 0
    assert budget.peak <= 250


def test_previews_are_made_once_and_kept_on_disk(shapes_copy: Path, tmp_path: Path) -> None:
    folder = tmp_path / "previews"
    sample = next(s for s in _samples(shapes_copy) if s.kind is Kind.IMAGE)
    cache = PreviewCache(folder)
    results: list[bytes] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(sample, 0, Look()))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.decodes == 1 and len(set(results)) == 1  # eight at once: one decode
    cache.get(sample, 0, Look(level=3, gray=False))
    assert cache.decodes == 1  # another look is drawn from the kept clear base
    files = sorted(p.name for p in (folder / sample.id[:2] / sample.id).iterdir())
    assert len(files) == 3 and not [f for f in files if f.endswith(".tmp")]
    again = PreviewCache(folder)  # a later run of the app reads the files
    assert again.get(sample, 0, Look()) == results[0] and again.decodes == 0
    again.forget(sample.id)
    assert not (folder / sample.id[:2] / sample.id).exists()


def test_takedown_drops_the_cached_previews(shapes_copy: Path, client_for: Any) -> None:
    settings = _settings(shapes_copy)
    client = client_for(settings)
    sid = sample_ids(client.get("/").text)[0]
    assert client.get(f"/thumb/{sid}").status_code == 200
    kept = Path(str(settings.preview_cache)) / sid[:2] / sid
    assert kept.is_dir()
    page = client.get(f"/sample/{sid}/remove")
    client.post(f"/sample/{sid}/remove", data={"csrf": csrf_of(page.text), "confirm": "yes"})
    assert not kept.exists() and client.get(f"/thumb/{sid}").status_code == 404
    other = sample_ids(client.get("/").text)[0]
    assert client.get(f"/thumb/{other}").status_code == 200
    from vhd.cli.main import main

    assert main(["remove", other, "--store", str(shapes_copy), "--reason", "test"]) == 0  # outside the app
    client_for(settings)  # the next start of the app drops its previews
    assert not (Path(str(settings.preview_cache)) / other[:2] / other).exists()


def test_control_and_bidi_characters_in_model_text_are_shown_visibly(tmp_path: Path, demo_media: Path) -> None:
    import yaml

    from vhd.cli.main import main
    from vhd.serve.web import make_env

    reply = "No. The verdict is \u202eharmful\u202c, \x1b[2Jcleared\x07 and fine.\nSecond line."
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump({"default": reply}), encoding="utf-8")
    db = tmp_path / "run.db"
    manifest = str(demo_media / "manifest.csv")
    assert main(["annotate", manifest, "--model", f"scripted:{script}", "--store", str(db), "--no-progress"]) == 0
    from starlette.testclient import TestClient

    from vhd.serve import create_app

    with TestClient(create_app(_settings(db)), base_url="http://127.0.0.1") as client:
        sid = sample_ids(client.get("/").text)[0]
        page = client.get(f"/sample/{sid}").text
    for raw in ("\u202e", "\u202c", "\x1b", "\x07"):
        assert raw not in page
    assert "\\u202eharmful\\u202c" in page and "\\x1b[2Jcleared\\x07" in page
    assert "Second line." in page
    assert make_env().from_string("{{ x }}").render(x="a\u2066b\nc") == "a\\u2066b\nc"


def test_login_has_a_per_client_rate_limit(store_copy: Path, client_for: Any) -> None:
    token = "t0k3n-for-tests-0123456789"
    client = client_for(_settings(store_copy, host="0.0.0.0", token=token), base_url="http://203.0.113.5:8765")
    csrf = csrf_of(client.get("/login").text)
    codes = [client.post("/login", data={"csrf": csrf, "token": f"guess-{k}"}).status_code for k in range(8)]
    assert codes[:5] == [401] * 5 and codes[5:] == [429] * 3
    refused = client.post("/login", data={"csrf": csrf, "token": token})
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1  # even the right token waits
    limit = RateLimit(burst=2, every=10.0)
    assert [limit.wait("a", now=0.0), limit.wait("a", now=0.0)] == [0.0, 0.0]
    assert limit.wait("a", now=1.0) == pytest.approx(9.0)
    assert limit.wait("b", now=1.0) == 0.0  # another client is not held up
    assert limit.wait("a", now=11.0) == 0.0


def test_reveal_is_per_sample_recorded_and_counted_per_hour(shapes_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(shapes_copy))
    ids = sample_ids(client.get("/").text)
    page = client.get(f"/sample/{ids[0]}")
    assert 'id="level">preview level 1 of 3, grayscale' in page.text
    assert "0 reveal(s) in the last hour" in page.text
    revealed = client.get(f"/sample/{ids[0]}?reveal=1")
    assert "clear view" in revealed.text and 'id="hide"' in revealed.text
    next_url = re.search(r'id="next" rel="next"|href="([^"]+)" id="next"', revealed.text)
    assert next_url and "reveal" not in (next_url.group(1) or "")  # the next sample is never revealed
    assert "1 reveal(s) in the last hour" in revealed.text
    done = client.post(
        f"/sample/{ids[0]}/label", data={"csrf": csrf_of(revealed.text), "harmful": "no"}, follow_redirects=False
    )
    assert "reveal" not in done.headers["location"]
    following = client.get(done.headers["location"])
    assert "clear=" not in following.text and 'id="reveal"' in following.text
    with Store(shapes_copy) as store:
        reveals = store.sample_reveals(ids[0])
        assert [(r.reviewer, r.sample_id) for r in reveals] == [("alice", ids[0])]
        assert store.reveal_count("alice", since=time.time() - 3600) == 1
    settings_page = client.get("/settings").text
    assert re.search(r'id="reveals-per-hour".*<td>1</td>', settings_page, re.S)


def test_reveal_for_n_seconds_and_level_settings(shapes_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(shapes_copy))
    page = client.get("/settings")
    client.post("/settings", data={"csrf": csrf_of(page.text), "reviewer": "alice", "level": "3", "reveal_s": "5"})
    sid = sample_ids(client.get("/").text)[0]
    sample = client.get(f"/sample/{sid}")
    assert "preview level 3 of 3" in sample.text and "level=3" in sample.text
    assert "reveal the clear" in sample.text and "for 5 s" in sample.text
    revealed = client.get(f"/sample/{sid}?reveal=1")
    assert 'data-reveal-for="5"' in revealed.text and "hidden again after 5 s" in revealed.text
    with Store(shapes_copy) as store:
        assert store.sample_reveals(sid)[0].seconds == 5


def test_a_revealed_video_plays_its_clip_muted(shapes_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(shapes_copy))
    video = next(s for s in _samples(shapes_copy) if s.kind is Kind.VIDEO)
    hidden = client.get(f"/sample/{video.id}")
    assert "<video" not in hidden.text and "/clip/" not in hidden.text
    assert client.get(f"/clip/{video.id}").status_code == 403
    revealed = client.get(f"/sample/{video.id}?reveal=1")
    match = re.search(r'<video id="clip" src="([^"]+)"[^>]*>', revealed.text)
    assert match and " muted" in match.group(0) and " autoplay" in match.group(0)
    clip = client.get(match.group(1).replace("&amp;", "&"))
    assert clip.status_code == 200 and clip.headers["content-type"] == "video/mp4"
    assert clip.content == Path(video.path).read_bytes()
    assert "media-src 'self'" in clip.headers["content-security-policy"]
    strict = client_for(_settings(shapes_copy, no_reveal=True))
    assert strict.get(match.group(1)).status_code == 403
