"""Label Studio end to end, for real: its own venv, a server on 127.0.0.1, the README's set-up.

Push vhd's images and a video (two projects, a Local Storage per media folder, through the API),
check every medium is served (HTTP 200), submit and skip annotations as people would, pull the
JSON and the JSON-MIN exports of both projects back (same exit code), import the files too, and
push again with a Personal Access Token: nothing is added twice. Needs Label Studio's venv
(``tools/labelstudio_venv.sh``, about 1 GB): skips without it, fails under ``VHD_REQUIRE_ALL=1``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import vhd
from tests.annotate.test_api import make_images
from tests.optional import need
from tests.servers import free_port, popen_server
from vhd.cli.main import main
from vhd.labels.sets import load_labelled_set

pytestmark = pytest.mark.slow

TOKEN = "vhd-test-token-0123456789"
VENV = Path(os.environ.get("VHD_LABELSTUDIO_VENV", Path.home() / ".cache" / "vhd" / "labelstudio-venv"))
START = "import sys; from label_studio.server import main; sys.argv[0] = 'label-studio'; sys.exit(main())"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Label Studio serving local files under ROOT (a strict parent of ROOT/media); (url, ROOT)."""
    import httpx

    need(
        (VENV / ".vhd-complete").is_file(),
        f"Label Studio's venv is missing at {VENV} (create it with tools/labelstudio_venv.sh, ~1 GB)",
    )
    base = tmp_path_factory.mktemp("labelstudio")
    root = base / "root"
    (root / "media").mkdir(parents=True)
    port = free_port()
    env = {
        **os.environ,
        "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(root),
        "LATEST_VERSION_CHECK": "false",  # no call to pypi.org at start
    }
    log = (base / "server.log").open("wb")
    proc = popen_server(
        [str(VENV / "bin" / "python"), "-c", START, "start", "--no-browser", "--internal-host", "127.0.0.1",
         "--port", str(port), "--data-dir", str(base / "data"), "--username", "vhd@example.com",
         "--password", "vhd-test-password", "--user-token", TOKEN, "--enable-legacy-api-token"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (base / "server.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"Label Studio did not start (exit {proc.poll()}):\n{tail}")
            time.sleep(1)
        yield url, root
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _api(url: str) -> Any:
    import httpx

    return httpx.Client(base_url=url, headers={"Authorization": f"Token {TOKEN}"}, timeout=30, trust_env=False)


def test_push_serve_annotate_pull_json_and_json_min(
    server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.media.conftest import make_video

    url, root = server
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", TOKEN)
    make_images(root / "media", 4)
    make_video(root / "videos" / "clip.mp4", 12)  # a sibling folder: a Local Storage of its own
    store = root.parent / "run.db"
    vhd.annotate([root / "media", root / "videos"], model="scripted:demo", store=store, progress=False)

    # 1. push: projects (videos beside images) + Local Storages + tasks, through the API
    push = ["label", "--store", str(store), "--push-labelstudio", url, "--project", "vhd e2e", "--media-root",
            str(root), "--json"]  # fmt: skip
    assert main(push) == 0
    pushed = json.loads(capsys.readouterr().out)
    assert pushed["tasks"] == 5 and pushed["created"] == ["vhd e2e", "vhd e2e (videos)"]
    assert pushed["storages"] == [str(root / "media"), str(root / "videos")]
    pid, vid = pushed["projects"]["vhd e2e"], pushed["projects"]["vhd e2e (videos)"]

    with _api(url) as api:
        tasks = api.get("/api/tasks", params={"project": pid, "page_size": 100}).json()["tasks"]
        (video,) = api.get("/api/tasks", params={"project": vid, "page_size": 100}).json()["tasks"]
        assert len(tasks) == 4
        # 2. every medium is served (the README's set-up: serving on, a parent root, a storage per folder)
        for t in tasks:
            got = api.get(t["data"]["image"])
            assert got.status_code == 200 and got.headers["content-type"] == "image/png"
        assert api.get(video["data"]["video"]).status_code == 200
        # 3. one task loses its vhd ids (as tasks made in Label Studio have none): matched by URL
        by_name = {Path(t["data"]["path"]).name: t for t in tasks} | {"clip.mp4": video}
        bare = by_name["img_002.png"]
        assert api.patch(f"/api/tasks/{bare['id']}", json={"data": {"image": bare["data"]["image"]}}).status_code == 200
        # 4. people decide; img_003 is skipped (Label Studio keeps a cancelled annotation)
        decisions = {"img_000.png": "Harmful", "img_001.png": "Not harmful", "img_002.png": "Harmful",
                     "clip.mp4": "Harmful"}  # fmt: skip
        for name, choice in decisions.items():
            result = [{"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": [choice]}}]
            if name == "img_000.png":
                result.append({"from_name": "reason", "to_name": "media", "type": "textarea",
                               "value": {"text": ["drawn test square"]}})  # fmt: skip
            posted = api.post(f"/api/tasks/{by_name[name]['id']}/annotations", json={"result": result})
            assert posted.status_code == 201, posted.text
        skipped = {"result": [], "was_cancelled": True}
        posted = api.post(f"/api/tasks/{by_name['img_003.png']['id']}/annotations", json=skipped)
        assert posted.status_code == 201, posted.text
        # a Personal Access Token (Label Studio's recommended kind) for the second push
        personal = api.post("/api/token/").json()["token"]

    want = {n: c == "Harmful" for n, c in decisions.items()}
    # 5. pull both export formats (both projects) through the API, keeping the files, then import the files
    for export_type in ("JSON", "JSON_MIN"):
        saved = root.parent / f"export-{export_type}.json"
        pull = ["label", "--store", str(store), "--pull-labelstudio", url, "--project", "vhd e2e", "--media-root",
                str(root), "--export-type", export_type, "--save-export", str(saved),
                "--set", f"pull-{export_type}"]  # fmt: skip
        assert main(pull) == 0, capsys.readouterr()  # the skipped task is no fault, in either format
        out = capsys.readouterr().out
        assert "pulled project 'vhd e2e (videos)'" in out and "-> 4 sample(s) (3 harmful)" in out, out
        labels = {Path(i.path).name: i.harmful for i in load_labelled_set(store, f"pull-{export_type}")}
        assert labels == want, export_type
        file_import = ["label", "--store", str(store), "--import-labelstudio", str(saved), "--media-root",
                       str(root), "--set", f"file-{export_type}"]  # fmt: skip
        assert main(file_import) == 0
        capsys.readouterr()
        labels = {Path(i.path).name: i.harmful for i in load_labelled_set(store, f"file-{export_type}")}
        assert labels == want, export_type
    reasons = {Path(i.path).name: i.reason for i in load_labelled_set(store, "pull-JSON_MIN")}
    assert reasons["img_000.png"] == "drawn test square"

    # 6. pushing again, with the Personal Access Token: same projects and storages, no task twice
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", personal)
    assert main(push) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["created"] == [] and again["projects"] == pushed["projects"]
    assert (again["tasks"], again["updated"], again["unchanged"]) == (0, 1, 4)  # img_002 got its ids back
    with _api(url) as api:
        assert api.get("/api/tasks", params={"project": pid, "page_size": 100}).json()["total"] == 4
        assert api.get("/api/tasks", params={"project": vid, "page_size": 100}).json()["total"] == 1
        assert len(api.get("/api/storages/localfiles", params={"project": pid}).json()) == 2


def test_timeline_spans_round_trip(
    server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A video's predicted harmful segments arrive as TimelineLabels regions; drawn spans come back."""
    from tests.media.conftest import make_video
    from vhd.labels.labelstudio import pull_labelstudio, push_labelstudio
    from vhd.records import Segment
    from vhd.store.sqlite import Store

    url, root = server
    make_video(root / "timeline" / "clip.mp4", 48)  # 2 s at 24 fps
    store = root.parent / "timeline.db"
    vhd.annotate([root / "timeline"], model="scripted:demo", store=store, progress=False)
    original = Store.get_annotation

    def with_segments(self: Store, *args: Any, **kwargs: Any) -> Any:
        ann = original(self, *args, **kwargs)
        if ann is not None:
            ann.verdict.harmful = True
            ann.verdict.segments = [Segment(0.0, 0.5, False), Segment(0.5, 1.0, True)]
        return ann

    monkeypatch.setattr(Store, "get_annotation", with_segments)
    pushed = push_labelstudio(url, "vhd timeline", store=store, media_root=root, token=TOKEN)
    pid = pushed.projects["vhd timeline"]
    with _api(url) as api:
        (task,) = api.get("/api/tasks", params={"project": pid, "page_size": 10}).json()["tasks"]
        (pred,) = api.get("/api/predictions", params={"task": task["id"]}).json()
        regions = [r for r in pred["result"] if r["type"] == "timelinelabels"]
        assert [r["value"]["ranges"] for r in regions] == [[{"start": 13, "end": 24}]]
        config = api.get(f"/api/projects/{pid}").json()["label_config"]
        assert "<TimelineLabels" in config and 'frameRate="$fps"' in config
        drawn = [
            {"id": "a", "from_name": "spans", "to_name": "media", "type": "timelinelabels",
             "value": {"ranges": [{"start": 25, "end": 36}], "timelinelabels": ["Harmful"]}},
            {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": ["Harmful"]}},
        ]  # fmt: skip
        posted = api.post(f"/api/tasks/{task['id']}/annotations", json={"result": drawn})
        assert posted.status_code == 201, posted.text
    for export_type in ("JSON", "JSON_MIN"):
        pull_labelstudio(
            url, "vhd timeline", store=store, name=f"tl-{export_type}", media_root=root, token=TOKEN,
            export_type=export_type,
        )  # fmt: skip
        (item,) = load_labelled_set(store, f"tl-{export_type}")
        assert item.harmful and item.segments is not None, export_type
        assert [(s.start_s, s.end_s) for s in item.segments] == [(1.0, 1.5)], export_type
