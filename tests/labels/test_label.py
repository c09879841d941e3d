"""`vhd label`: labelled sets in the store, and the Label Studio round trip in its documented format."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image

import vhd
from vhd.cli.main import main
from vhd.errors import ConfigError
from vhd.labels.labelstudio.convert import export_labelstudio, import_labelstudio
from vhd.labels.sets import import_labels, labelled_set_names, load_labelled_set
from vhd.store.sqlite import Store


def make_images(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = folder / f"img {i}.png"  # a space: URLs must be quoted
        Image.new("RGB", (24, 24), (i * 60 % 256, 90, 200 - i * 30)).save(p)
        out.append(p)
    return out


def test_import_labels_registers_samples_and_reports_bad_rows(tmp_path: Path) -> None:
    imgs = make_images(tmp_path / "m", 3)
    (tmp_path / "m" / "broken.png").write_bytes(b"\x89PNG not really")
    store = tmp_path / "run.db"
    vhd.annotate([imgs[2]], model="scripted:demo", store=store)
    with Store(store) as db:
        known = db.find_samples(str(imgs[2]))[0].id
    labels = tmp_path / "m" / "val.csv"
    labels.write_text(
        "path,id,harmful,reason,categories\n"
        "img 0.png,,yes,a raised fist,A\n"
        "img 1.png,,no,,\n"
        f",{known},no,calm,\n"
        "broken.png,,yes,,\n"
        f",{'0' * 64},yes,,\n"
        "img 1.png,,maybe,,\n"
    )
    res = import_labels(labels, store=store, name="val")
    assert (res.imported, res.harmful) == (3, 1)
    assert sorted(line for line, _ in res.skipped) == [5, 6, 7]
    items = {Path(i.path).name: i for i in load_labelled_set(store, "val")}
    assert items["img 0.png"].harmful and items["img 0.png"].reason == "a raised fist"
    assert items["img 0.png"].categories == ["Violence and Threats"]
    assert not items["img 2.png"].harmful and items["img 2.png"].id == known
    assert labelled_set_names(Store(store)) == {"val": 3}
    with pytest.raises(ConfigError, match="sets there: val"):
        load_labelled_set(store, "other")
    # importing again replaces labels instead of duplicating them
    assert import_labels(labels, store=store, name="val").imported == 3
    assert len(load_labelled_set(store, "val")) == 3


def test_labelstudio_round_trip(tmp_path: Path) -> None:
    imgs = make_images(tmp_path / "m", 3)
    store = tmp_path / "run.db"
    vhd.annotate(imgs, model="scripted:demo", store=store)
    labels = tmp_path / "m" / "val.csv"
    labels.write_text("path,harmful\nimg 0.png,yes\nimg 1.png,no\nimg 2.png,no\n")
    import_labels(labels, store=store, name="val")
    res = export_labelstudio(tmp_path / "ls" / "tasks.json", store=store, name="val", media_root=tmp_path)
    assert (res.tasks, res.with_predictions) == (3, 3)
    tasks = json.loads((tmp_path / "ls" / "tasks.json").read_text())
    config = ET.fromstring((tmp_path / "ls" / "tasks.xml").read_text())
    controls = {el.get("name"): el for el in config.iter() if el.get("name")}
    for task in tasks:
        assert task["data"]["image"].startswith("/data/local-files/?d=m/img%20")
        assert controls["media"].get("value") == "$image" and task["data"]["affirmative"]
        [pred] = task["predictions"]
        assert pred["model_version"].startswith("vhd-debate-") and 0 <= pred["score"] <= 1
        for r in pred["result"]:  # every result names a control of the config, on the media object
            assert r["to_name"] == "media" and controls[r["from_name"]].get("toName") == "media"
            assert r["type"] == controls[r["from_name"]].tag.lower()
        choice = next(r for r in pred["result"] if r["type"] == "choices")
        assert choice["value"] == {"choices": ["Not harmful"]}  # the demo judge says no
        allowed = {c.get("value") for c in controls["harmful"]}
        assert set(choice["value"]["choices"]) <= allowed
    # what Label Studio exports after people worked: annotations next to the predictions
    exported = [dict(t, id=n, annotations=[]) for n, t in enumerate(tasks, start=1)]
    exported[0]["annotations"] = [
        {
            "id": 1,
            "was_cancelled": False,
            "created_at": "2026-01-01T10:00:00Z",
            "result": [
                {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": ["Not harmful"]}}
            ],
        },
        {
            "id": 2,
            "was_cancelled": False,
            "created_at": "2026-01-02T10:00:00Z",
            "result": [
                {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": ["Harmful"]}},
                {"from_name": "reason", "to_name": "media", "type": "textarea", "value": {"text": ["a threat"]}},
                {
                    "from_name": "categories",
                    "to_name": "media",
                    "type": "choices",
                    "value": {"choices": ["Violence and Threats"]},
                },
            ],
        },
    ]
    exported[1]["annotations"] = [{"id": 3, "was_cancelled": True, "result": []}]
    exported[2]["annotations"] = [
        {
            "id": 4,
            "result": [
                {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": ["Not harmful"]}}
            ],
        }
    ]
    del exported[2]["data"]["sample_id"]  # found by its local-file URL instead
    (tmp_path / "export.json").write_text(json.dumps(exported))
    res = import_labelstudio(tmp_path / "export.json", store=tmp_path / "run.db", name="people")
    assert (res.tasks, res.samples, res.skipped) == (3, 2, []) and [t.task_id for t in res.undecided] == [2]
    got = {Path(i.path).name: i for i in load_labelled_set(store, "people")}
    first = Path(tasks[0]["data"]["path"]).name
    assert got[first].harmful and got[first].reason == "a threat" and got[first].categories == ["Violence and Threats"]
    assert set(got) == {first, Path(tasks[2]["data"]["path"]).name}


def test_label_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    imgs = make_images(tmp_path / "m", 2)
    store = str(tmp_path / "run.db")
    labels = tmp_path / "m" / "val.csv"
    labels.write_text("path,harmful\nimg 0.png,yes\nimg 1.png,no\n")
    assert main(["label", str(labels), "--store", store, "--set", "v1"]) == 0
    assert "imported 2 label(s) (1 harmful) into set 'v1'" in capsys.readouterr().out
    out = tmp_path / "tasks.json"
    assert main(["label", "--export-labelstudio", str(out), "--store", store, "--set", "v1"]) == 0
    tasks = json.loads(out.read_text())
    assert len(tasks) == 2 and "predictions" not in tasks[0]  # nothing annotated yet
    for t in tasks:
        t["annotations"] = [
            {
                "result": [
                    {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": ["Harmful"]}}
                ]
            }
        ]
    out.write_text(json.dumps(tasks))
    assert main(["label", "--import-labelstudio", str(out), "--store", store, "--set", "v2"]) == 0
    assert all(i.harmful for i in load_labelled_set(store, "v2")) and len(imgs) == 2
    assert main(["label", "--store", store]) == 2
    assert main(["label", str(labels), "--store", store, "--set", "bad name"]) == 2
