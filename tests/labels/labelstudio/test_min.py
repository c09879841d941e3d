"""Label Studio JSON-MIN exports, tasks matched by media URL under --media-root, prediction scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images
from vhd.cli.main import main
from vhd.labels.labelstudio.convert import build_tasks, confidence, json_min_tasks, path_from_url, prediction
from vhd.labels.sets import load_labelled_set


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """Three images under ROOT/media annotated by the scripted backend; their ids by file name."""
    root = tmp_path_factory.mktemp("ls_min")
    make_images(root / "media", 3)
    store = root / "run.db"
    vhd.annotate([root / "media"], model="scripted:demo", store=store, progress=False)
    tasks = build_tasks(store=store, media_root=root)
    ids = {Path(t["data"]["path"]).name: t["data"]["sample_id"] for ts in tasks.values() for t in ts}
    return root, store, ids


def test_json_min_rows_become_tasks_newest_annotation_wins(
    annotated: tuple[Path, Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, store, ids = annotated
    rows = [
        {
            "image": "/data/local-files/?d=media/img_000.png",
            "sample_id": ids["img_000.png"],
            "id": 1,
            "harmful": "Harmful",
            "reason": "a knife",
            "categories": {"choices": ["Violence", "Weapons"]},
            "annotator": 1,
            "annotation_id": 10,
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
        },
        {
            "image": "/data/local-files/?d=media/img_000.png",
            "sample_id": ids["img_000.png"],
            "id": 1,
            "harmful": "Not harmful",
            "annotator": 2,
            "annotation_id": 11,
            "created_at": "2026-02-01T00:00:00Z",
            "updated_at": "2026-02-01T00:00:00Z",
        },
        # no vhd ids at all: matched by its media URL under --media-root
        {
            "image": "http://127.0.0.1:8080/data/local-files/?d=media/img_001.png",
            "id": 2,
            "harmful": "Harmful",
            "annotator": 1,
            "annotation_id": 12,
            "created_at": "2026-01-01T00:00:00Z",
        },
    ]
    export = root / "min.json"
    export.write_text(json.dumps(rows))
    code = main(
        [
            "label",
            "--import-labelstudio",
            str(export),
            "--store",
            str(store),
            "--set",
            "min",
            "--media-root",
            str(root),
            "--json",
        ]
    )
    got = json.loads(capsys.readouterr().out)
    assert code == 0 and got["tasks"] == 2 and got["samples"] == 2 and got["harmful"] == 1 and not got["skipped"]
    labels = {Path(i.path).name: i.harmful for i in load_labelled_set(store, "min")}
    assert labels == {"img_000.png": False, "img_001.png": True}  # the February annotation is the newest


def test_json_min_categories_and_reason_survive() -> None:
    rows = [
        {"id": 3, "path": "/x.png", "harmful": "Harmful", "reason": "why", "categories": "Violence", "annotation_id": 1}
    ]
    (task,) = json_min_tasks(rows)
    result = {r["from_name"]: r["value"] for r in task["annotations"][0]["result"]}
    assert task["data"] == {"path": "/x.png"} and task["id"] == 3
    assert result == {
        "harmful": {"choices": ["Harmful"]},
        "categories": {"choices": ["Violence"]},
        "reason": {"text": ["why"]},
    }


def test_a_json_export_is_left_as_it_is() -> None:
    tasks = [{"id": 1, "data": {"path": "/x.png"}, "annotations": []}]
    assert json_min_tasks(tasks) is tasks


def test_path_from_url_reads_under_the_media_root() -> None:
    assert path_from_url("/data/local-files/?d=media/a%20b.png", "/srv/root") == "/srv/root/media/a b.png"
    assert path_from_url("http://h:8080/data/local-files/?d=media/a.png", "/srv/root") == "/srv/root/media/a.png"
    assert path_from_url("https://example.com/a.png", "/srv") == ""


def test_prediction_score_is_the_confidence_of_the_predicted_choice(
    annotated: tuple[Path, Path, dict[str, str]],
) -> None:
    assert confidence(True, 0.8) == pytest.approx(0.8) and confidence(False, 0.2) == pytest.approx(0.8)
    assert prediction(False, "", 0.1, "m")["score"] == pytest.approx(0.9)
    _, store, _ = annotated
    for tasks in build_tasks(store=store, media_root="/").values():
        for task in tasks:
            p = task["data"].get("p_harmful")
            if p is None or "predictions" not in task:
                continue
            choice = task["predictions"][0]["result"][0]["value"]["choices"][0]
            want = p if choice == "Harmful" else 1 - p
            assert task["predictions"][0]["score"] == pytest.approx(want)


def test_push_without_token_or_server_is_one_line(
    annotated: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    root, store, _ = annotated
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    push = ["label", "--store", str(store), "--push-labelstudio", "http://127.0.0.1:9", "--media-root", str(root)]
    assert main([*push, "--project", "p"]) == 2
    assert "set LABEL_STUDIO_API_KEY" in capsys.readouterr().err
    assert main(push) == 2
    assert "need --project NAME" in capsys.readouterr().err
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "t")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    push[4] = f"http://127.0.0.1:{port}"
    assert main([*push, "--project", "p"]) == 1
    err = capsys.readouterr().err
    assert "cannot be reached" in err and len(err.strip().splitlines()) == 1


def test_media_at_the_document_root_itself_is_refused_with_the_fix(
    annotated: tuple[Path, Path, dict[str, str]],
) -> None:
    from vhd.errors import ConfigError
    from vhd.labels.labelstudio.api import DOCUMENT_ROOT_RULE, storage_folders

    root, _, _ = annotated
    assert storage_folders([str(root / "media" / "a.png")], root) == [str(root / "media")]
    with pytest.raises(ConfigError, match="not in a folder below --media-root") as caught:
        storage_folders([str(root / "media" / "a.png")], root / "media")
    assert DOCUMENT_ROOT_RULE in str(caught.value)


def test_undecided_task_gives_the_same_exit_code_in_json_and_json_min(
    annotated: tuple[Path, Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """A task exported with nobody's decision (``download_all_tasks``) is undecided in both forms, not a fault."""
    root, store, ids = annotated
    url = "/data/local-files/?d=media/img_002.png"
    decided = {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": ["Harmful"]}}
    full = [
        {"id": 1, "data": {"sample_id": ids["img_000.png"]}, "annotations": [{"id": 9, "result": [decided]}]},
        {"id": 2, "data": {"image": url}, "annotations": []},
    ]
    rows = [
        {"sample_id": ids["img_000.png"], "id": 1, "harmful": "Harmful", "annotator": 1, "annotation_id": 9},
        {"image": url, "id": 2, "annotator": None, "annotation_id": None, "created_at": None},
    ]
    for kind, content in (("json", full), ("min", rows)):
        export = root / f"undecided-{kind}.json"
        export.write_text(json.dumps(content))
        args = ["label", "--import-labelstudio", str(export), "--store", str(store), "--media-root", str(root)]
        assert main([*args, "--set", f"u-{kind}", "--json"]) == 0, kind
        got = json.loads(capsys.readouterr().out)
        assert (got["samples"], got["skipped"], [t["task_id"] for t in got["undecided"]]) == (1, [], [2]), kind
