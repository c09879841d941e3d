"""A store made from the example media, annotated by two scripted configurations, for the review app.

The second configuration's script answers with HTML and ``<script>`` tags (model text is untrusted)
and calls the astronaut photo harmful, so the store holds a disagreement between configurations.
Each test gets its own copy of the session's store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from vhd.cli.main import main
from vhd.demo import write_examples
from vhd.store.migrations import backup_store

EVIL = "<script>document.title='pwned'</script>"


@pytest.fixture(scope="session")
def demo_media(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("serve-media")
    write_examples(folder)
    return folder


@pytest.fixture(scope="session")
def session_store(demo_media: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-store")
    db = root / "run.db"
    astronaut = hashlib.sha256((demo_media / "astronaut.jpg").read_bytes()).hexdigest()
    script = {
        "default": f"No. {EVIL} <b>bold</b> nothing harmful.",
        "rules": [
            {"when": {"tag": "judge", "image": astronaut[:12]}, "reply": f"Yes, a risky scene {EVIL}."},
            {"when": {"tag": "judge"}, "reply": f"No, an ordinary scene {EVIL}."},
        ],
    }
    script_file = root / "evil.yaml"
    script_file.write_text(yaml.safe_dump(script), encoding="utf-8")
    manifest = str(demo_media / "manifest.csv")
    for model in ("scripted:demo", f"scripted:{script_file}"):
        code = main(["annotate", manifest, "--model", model, "--store", str(db), "--no-progress"])
        assert code == 0
    queue = root / "queue.csv"
    assert main(["review-queue", "--store", str(db), "--out", str(queue)]) == 0
    return db


@pytest.fixture
def store_copy(session_store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run.db"
    backup_store(session_store, target)
    return target


@pytest.fixture
def queue_file(session_store: Path) -> Path:
    return session_store.parent / "queue.csv"


def sample_ids(html: str) -> list[str]:
    """Sample ids linked from a gallery page, in page order."""
    seen: list[str] = []
    for sid in re.findall(r'href="/sample/([0-9a-f]{64})', html):
        if sid not in seen:
            seen.append(sid)
    return seen


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, "no CSRF field in the page"
    return match.group(1)


@pytest.fixture
def client_for() -> Iterator[object]:
    """Build TestClients for settings; all are closed at the end."""
    from starlette.testclient import TestClient

    from vhd.serve import create_app

    made: list[TestClient] = []

    def build(settings: object, base_url: str = "http://127.0.0.1") -> TestClient:
        client = TestClient(create_app(settings), base_url=base_url)  # type: ignore[arg-type]
        client.__enter__()
        made.append(client)
        return client

    yield build
    for client in made:
        client.__exit__(None, None, None)


@pytest.fixture(scope="session")
def shapes_store(demo_media: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example media plus high-contrast silhouettes and line art, annotated: the wellness test set."""
    from vhd.demo import write_shape_examples

    root = tmp_path_factory.mktemp("serve-shapes")
    write_shape_examples(root / "shapes")
    db = root / "run.db"
    for target in (str(demo_media / "manifest.csv"), str(root / "shapes")):
        assert main(["annotate", target, "--model", "scripted:demo", "--store", str(db), "--no-progress"]) == 0
    return db


@pytest.fixture
def shapes_copy(shapes_store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "shapes.db"
    backup_store(shapes_store, target)
    return target
