"""The review app shows what landed after it: which cascade stage decided, and synthetic provenance.

The cascade store is made by a real `vhd annotate --cascade` run: the bench tests' red detector as
the stage (score = red share of the image) and the scripted backend as the debate. A pure red and a
black image are decided by the stage; a half-red one (inside the band) and a green one (the stage
fails on green) go to the debate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.optional import need_module
from tests.serve.conftest import EVIL, sample_ids
from vhd.annotate.cascade import DEBATE, StageDecision, run_stage_models, stage_model
from vhd.cli.main import main
from vhd.detectors import registry
from vhd.records import Source
from vhd.store import gallery
from vhd.store.gallery import GalleryFilter
from vhd.store.provenance import record_provenance
from vhd.store.sqlite import Store

need_module("starlette", "pip install 'vhd[serve]'")
need_module("jinja2", "pip install 'vhd[serve]'")

from vhd.serve import ServeSettings  # noqa: E402

COLOURS = {"red": (255, 0, 0), "black": (0, 0, 0), "half": (128, 0, 0), "green": (0, 255, 0)}


@pytest.fixture
def cascade_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """A store annotated through a one-stage cascade; returns it and image name -> sample id."""
    monkeypatch.setitem(registry.BUILTIN, "red", "tests.bench.fake_detector:RedDetector")
    media = tmp_path / "media"
    media.mkdir()
    for name, rgb in COLOURS.items():
        Image.new("RGB", (32, 32), rgb).save(media / f"{name}.png")
    db = tmp_path / "run.db"
    argv = ["annotate", str(media), "--model", "scripted:demo", "--store", str(db), "--no-progress"]
    assert main([*argv, "--cascade", "cheap=red", "--cascade-thresholds", "0.2:0.8"]) == 0
    with Store(db) as store:
        ids = {Path(s.path).stem: s.id for s, _ in store.iter_annotations()}
    return db, ids


def _synthetic(store: Store) -> set[str]:
    return {row.sample_id for row in store.gallery_page(GalleryFilter(source="synthetic"), limit=100)}


def _client(client_for: Any, db: Path) -> Any:
    return client_for(ServeSettings(store=db, reviewer="alice"))


def test_decided_by_filter_choices_and_sample_page(
    cascade_store: tuple[Path, dict[str, str]], client_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, ids = cascade_store
    client = _client(client_for, db)
    page = client.get("/").text
    select = re.search(r'<select name="decided_by">(.*?)</select>', page, re.S)
    assert select and re.findall(r'<option value="([^"]*)"', select.group(1)) == ["", "cheap", DEBATE]

    by_stage = client.get("/?decided_by=cheap").text
    assert set(sample_ids(by_stage)) == {ids["red"], ids["black"]} and len(sample_ids(by_stage)) == 2
    assert f'href="/sample/{ids["red"]}?decided_by=cheap"' in by_stage  # the filter follows the links
    assert 'value="cheap" selected' in by_stage and "by cheap" in by_stage
    debated = sample_ids(client.get("/?decided_by=debate").text)
    assert set(debated) == {ids["half"], ids["green"]} and len(debated) == 2
    assert sample_ids(client.get("/?decided_by=nobody").text) == []
    assert sample_ids(client.get("/?decided_by=cheap&decision=harmful").text) == [ids["red"]]

    # the same answers when the value is common enough to be scanned for rather than looked up
    with Store(db) as store:
        config = store.config_hashes()[0]
        assert store.gallery_stages(config) == ["cheap", DEBATE] and store.gallery_stages(None) == []
        rows = store.gallery_page(GalleryFilter(config_hash=config, decided_by="cheap"))
        monkeypatch.setattr(gallery, "RARE", 0)
        scanned = store.gallery_page(GalleryFilter(config_hash=config, decided_by="cheap"))
    assert [r.sample_id for r in rows] == [r.sample_id for r in scanned] and {r.decided_by for r in rows} == {"cheap"}

    red = client.get(f"/sample/{ids['red']}?decided_by=cheap").text
    shown = re.search(r'<dd id="decided-by">(.*?)</dd>', red)
    assert shown and re.fullmatch(r"stage cheap · score 0\.99\d\d · model red", shown.group(1)), shown
    half = client.get(f"/sample/{ids['half']}").text
    assert re.search(r'<dd id="decided-by">the debate[^<]*</dd>', half)


def test_stage_model_comes_from_the_run_and_older_runs_from_the_reason(
    cascade_store: tuple[Path, dict[str, str]], client_for: Any
) -> None:
    db, ids = cascade_store
    with Store(db) as store:
        (run,) = store.runs()
        assert run.config["cascade"] == {
            "stages": [{"label": "cheap", "model": "red", "low": 0.2, "high": 0.8, "calibration": None}]
        }
        assert run_stage_models(run.config) == {"cheap": "red"} and run_stage_models({}) == {}
        with store.conn:  # the reason no longer names the model: the run's record still does
            store.conn.execute("UPDATE annotations SET reason = 'decided early' WHERE sample_id = ?", (ids["red"],))
    client = _client(client_for, db)

    def shown() -> str:
        found = re.search(r'<dd id="decided-by">(.*?)</dd>', client.get(f"/sample/{ids['red']}").text)
        assert found
        return found.group(1)

    assert shown().endswith(" · model red")
    with Store(db) as store, store.conn:  # a run recorded before the stages were stored with it
        config = {k: v for k, v in run.config.items() if k != "cascade"}
        store.conn.execute("UPDATE runs SET config_json = ? WHERE id = ?", (json.dumps(config), run.id))
        store.conn.execute(
            "UPDATE annotations SET reason = ? WHERE sample_id = ?",
            (StageDecision("cheap", "red:older", True, 0.99).reason(), ids["red"]),
        )
    assert shown().endswith(" · model red:older")
    with Store(db) as store, store.conn:
        store.conn.execute("UPDATE annotations SET reason = 'decided early' WHERE sample_id = ?", (ids["red"],))
    assert re.fullmatch(r"stage cheap · score 0\.99\d\d", shown())  # neither names it: no model shown


def test_no_decided_by_outside_a_cascade(store_copy: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    page = client.get("/").text
    assert 'name="decided_by"' not in page
    assert 'id="decided-by"' not in client.get(f"/sample/{sample_ids(page)[0]}").text


def test_stage_model_reads_the_reason_a_stage_writes() -> None:
    decision = StageDecision(label="nsfw (fast)", model="nudenet:320n", harmful=True, score=0.97)
    assert stage_model(decision.reason(), "nsfw (fast)") == "nudenet:320n"
    assert stage_model("a debate's reason, score 1", "nsfw (fast)") is None
    assert stage_model(decision.reason(), "other") is None


def test_synthetic_sample_shows_its_provenance_escaped(store_copy: Path, client_for: Any) -> None:
    with Store(store_copy) as store:
        synthetic = _synthetic(store)
        assert len(synthetic) == 1
        sample = store.get_sample(synthetic.pop())
        assert sample is not None and sample.source is Source.SYNTHETIC
        data = {
            "prompt": f"a quiet harbour {EVIL}",
            "full_prompt": f"photo of a quiet harbour {EVIL}",
            "negative_prompt": "<b>blurry</b>",
            "prompt_id": "p-0007",
            "keyword": "harbour",
            "generator": "sdxl",
            "model": "tiny/sdxl-random",
            "seed": 123456789,
            "steps": 2,
            "guidance": 5.0,
            "width": 64,
            "height": 48,
            "frames": None,
            "scheduler": "EulerDiscreteScheduler",
            "versions": {"vhd": "0.1"},
        }
        record_provenance(store, sample_id=sample.id, path=str(sample.path), data=data, generator="sdxl:tiny")
    client = _client(client_for, store_copy)
    page = client.get(f"/sample/{sample.id}").text
    block = re.search(r'<dl id="synthetic-provenance">(.*?)</dl>', page, re.S)
    assert block, "no provenance on the synthetic sample's page"
    shown = dict(re.findall(r"<dt>([^<]*)</dt><dd[^>]*>(.*?)</dd>", block.group(1), re.S))
    assert list(shown)[:5] == ["prompt", "full prompt", "negative prompt", "prompt id", "keyword"]
    assert shown["prompt id"] == "p-0007" and shown["seed"] == "123456789" and shown["steps"] == "2"
    assert shown["guidance"] == "5.0" and shown["width"] == "64" and shown["height"] == "48"
    assert shown["scheduler"] == "EulerDiscreteScheduler" and shown["model"] == "tiny/sdxl-random"
    assert "frames" not in shown  # an image has none
    assert shown["negative prompt"] == "&lt;b&gt;blurry&lt;/b&gt;"
    assert EVIL not in page and "&lt;script&gt;" in shown["prompt"]
    real = next(sid for sid in sample_ids(client.get("/?source=real").text))
    assert 'id="synthetic-provenance"' not in client.get(f"/sample/{real}").text


def test_gallery_marks_synthetic_samples(store_copy: Path, client_for: Any) -> None:
    client = _client(client_for, store_copy)
    page = client.get("/").text
    cards = re.findall(r'<li class="card[^"]*" data-id="([0-9a-f]{64})">(.*?)</li>', page, re.S)
    with Store(store_copy) as store:
        synthetic = _synthetic(store)
    marked = {sid for sid, body in cards if 'class="synthetic"' in body}
    assert len(cards) == 7 and marked == synthetic and len(marked) == 1
