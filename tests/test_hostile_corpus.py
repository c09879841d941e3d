"""Every per-item command over the hostile corpus (tests/hostile_corpus.py): no input stops a run.

Each command runs twice over corrupt media of every accepted kind and codec (and hostile text
inputs where it reads text) and must: exit 0 or 1, print no traceback, print its summary, account
for every input (done + skipped + failed = inputs), and on the rerun do no work already done.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.hostile_corpus import endpoint_replies, media_corpus, text_corpus
from tests.optional import need_module
from vhd.cli.main import main
from vhd.media.discover import kind_for
from vhd.records import Kind


@dataclass(frozen=True)
class Corpus:
    root: Path
    media: Path
    files: list[Path]
    texts: dict[str, Path]
    labels: Path  # a labels CSV naming every media file

    @property
    def videos(self) -> list[Path]:
        return [p for p in self.files if kind_for(p) is Kind.VIDEO]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    need_module("av", "pip install 'vhd[video]'")
    root = tmp_path_factory.mktemp("hostile")
    started = time.perf_counter()
    files = media_corpus(root / "media")
    texts = text_corpus(root / "text", root / "media")
    labels = root / "labels.csv"
    rows = "".join(f"media/{p.name},{'yes' if i % 2 else 'no'}\n" for i, p in enumerate(files))
    labels.write_text("path,harmful\n" + rows, encoding="utf-8")
    assert time.perf_counter() - started < 30  # built from code in seconds (generous for a loaded machine)
    assert len(files) >= 90 and {p.suffix for p in files} >= {".jpg", ".png", ".webp", ".bmp", ".gif", ".mp4"}
    return Corpus(root, root / "media", files, texts, labels)


def run(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    """Run the CLI in-process: an exception escaping ``main`` is the traceback a user would see."""
    code = main(args)
    out, err = capsys.readouterr()
    assert code in (0, 1), f"exit {code}: {err[-500:]}"
    assert "Traceback" not in err and "Traceback" not in out
    return code, out, err


@dataclass(frozen=True)
class Command:
    args: Callable[[Corpus, Path], list[str]]
    inputs: Callable[[Corpus], int]
    accounted: Callable[[Any], int]
    repeated: Callable[[Any, Any], int]  # work the rerun did that the first run had already done


JSON = ("--json", "--no-progress")
QUICK = ("--no-plots", "--bootstrap", "0", *JSON)

COMMANDS: dict[str, Command] = {
    "ingest": Command(
        lambda c, t: ["ingest", str(c.media), "--store", str(t / "s.db"), "--json"],
        lambda c: len(c.files),
        lambda s: sum(s["counts"].values()),
        lambda first, again: again["counts"]["added"] + again["counts"]["updated"],
    ),
    "annotate": Command(
        lambda c, t: (["annotate", str(c.media), "--model", "scripted:demo", "--store", str(t / "s.db"), *JSON]),
        lambda c: len(c.files),
        lambda s: s["annotated"] + s["already_done"] + s["skipped"] + s["duplicates"] + s["errors"],
        lambda first, again: again["annotated"],
    ),
    "frames": Command(
        lambda c, t: ["frames", str(c.media), "--out", str(t / "frames"), "--json", "--no-progress"],
        lambda c: len(c.videos),
        len,
        lambda first, again: sum(v["status"] == "written" for v in again),
    ),
    "dedup": Command(  # no store of its own: the rerun computes again, so "repeated" is not measured
        lambda c, t: ["dedup", str(c.media), "--jobs", "1", "--json", "--no-progress"],
        lambda c: len(c.files),
        lambda s: s["files"] + s["unreadable"],
        lambda first, again: 0,
    ),
    "label": Command(
        lambda c, t: ["label", str(c.labels), "--store", str(t / "s.db"), "--json"],
        lambda c: len(c.files),
        lambda s: s["imported"] + len(s["skipped"]),
        lambda first, again: 0,  # importing again replaces the set's labels (documented)
    ),
    "bench": Command(
        lambda c, t: (
            ["bench", "--labels", str(c.labels), "--detector", "debate:scripted:demo", "--out", str(t / "r"), *QUICK]
        ),
        lambda c: len(c.files),
        lambda s: s["samples"] + s["problems"],
        lambda first, again: again["detectors"][0]["computed"] - first["detectors"][0]["failed"],
    ),
}


def _parse(out: str) -> Any:
    return json.loads(out)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_per_item_command_finishes_over_the_hostile_corpus(
    name: str, corpus: Corpus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = COMMANDS[name]
    args = command.args(corpus, tmp_path)
    _, out, _ = run(capsys, args)
    first = _parse(out)
    assert command.accounted(first) == command.inputs(corpus), first
    _, out, _ = run(capsys, args)
    again = _parse(out)
    assert command.accounted(again) == command.inputs(corpus), again
    assert command.repeated(first, again) == 0


@pytest.mark.parametrize("name", ["ingest", "annotate", "dedup"])
def test_hostile_manifests_are_reported_row_by_row(
    name: str, corpus: Corpus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NUL paths, unterminated quotes, duplicated columns, deep JSON lines: one line each, no traceback.

    The run finishes, and its exit code (1, as `vhd label`'s) says that rows were left out.
    """
    manifests = [
        corpus.texts[n] for n in ("nul_path.csv", "unterminated.csv", "duplicate_header.csv", "deep_line.jsonl")
    ]
    for manifest in manifests:
        args = COMMANDS[name].args(corpus, tmp_path)
        args[1] = str(manifest)
        args = [a for a in args if a != "--json"]
        code, out, err = run(capsys, [*args, "--allow-outside-paths"])
        text = out + err
        assert code == 1, (manifest.name, text[-500:])
        assert "manifest row(s) could not be read" in text
        if manifest.name == "nul_path.csv":
            assert "NUL byte" in text
        elif manifest.name == "unterminated.csv":
            assert "line 2" in text and "never closed" in text
        elif manifest.name == "duplicate_header.csv":
            assert "appears more than once" in text
        else:
            assert "nested" in text


def test_label_reports_hostile_label_files_in_one_line(
    corpus: Corpus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every hostile text file as a labels file: a row report (exit 1) or one line (exit 2), never a traceback."""
    for name, path in corpus.texts.items():
        code = main(["label", str(path), "--store", str(tmp_path / "s.db"), "--allow-outside-paths"])
        out, err = capsys.readouterr()
        assert code in (0, 1, 2), name
        assert "Traceback" not in err, name
        if code == 2:
            assert len(err.strip().splitlines()) == 1, (name, err)
    code = main(["label", str(corpus.texts["unterminated.csv"]), "--store", str(tmp_path / "s.db")])
    out, err = capsys.readouterr()
    assert code == 1 and "never closed" in out + err


@pytest.fixture
def served(corpus: Corpus) -> Iterator[tuple[Any, list[str]]]:
    from tests.collect.media_server import MediaServer, Route

    with MediaServer() as server:
        urls = [server.add(f"/{p.name}", Route(body=p.read_bytes())) for p in corpus.files]
        yield server, urls


def test_fetch_with_store_finishes_over_the_hostile_corpus(
    served: tuple[Any, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, urls = served
    listing = tmp_path / "urls.csv"
    listing.write_text("url\n" + "".join(f"{u}\n" for u in urls), encoding="utf-8")
    out = tmp_path / "got"
    args = ["fetch", str(listing), "--out", str(out), "--store", str(tmp_path / "s.db"), "--allow-private"]
    args += ["--retries", "0", "--no-progress", "--json"]
    _, text, _ = run(capsys, args)
    first = json.loads(text)
    assert sum(first["counts"].values()) == len(urls), first
    report = (out / "fetch-report.csv").read_text(encoding="utf-8").splitlines()
    assert len(report) == len(urls) + 1
    kept = {
        p.name for p in out.iterdir() if p.is_file() and p.name != "fetch-report.csv" and not p.name.startswith(".")
    }
    assert len(kept) <= first["counts"]["ok"]  # nothing rejected is left in --out
    hits = sum(server.hits.values())
    _, text, _ = run(capsys, args)
    again = json.loads(text)
    assert sum(again["counts"].values()) == len(urls)
    assert sum(server.hits.values()) - hits <= len(urls) - first["counts"]["ok"]  # fetched files are not fetched again


def test_pixel_bombs_in_the_corpus_are_refused_for_their_frame_size(
    corpus: Corpus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, ["ingest", str(corpus.media), "--store", str(tmp_path / "s.db"), "--json"])
    bombs = {p.name for p in corpus.files if p.name.startswith("bomb_")}
    assert len(bombs) == 4  # the H.264 clip and the GIF, APNG and WebP animations
    reasons = {Path(e["path"]).name: e["reason"] for e in _parse(out)["invalid"]}
    assert all("over the frame limit" in reasons.get(name, "") for name in bombs), reasons


@pytest.mark.timeout(120)
def test_annotate_finishes_past_every_hostile_endpoint_reply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each hostile reply costs the one sample that met it; the others are stored; no traceback."""
    from tests.annotate.test_api import judge_reply, make_images
    from tests.servers.chat_server import ChatServer

    replies = endpoint_replies(stall_s=20)
    make_images(tmp_path / "m", len(replies) + 2)
    with ChatServer(reply=judge_reply) as srv:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[backends.openai]\nbase_url = "{srv.base_url}"\ntimeout = 1\nmax_retries = 0\nmax_reply_bytes = 1048576\n'
        )
        srv.fail_next(list(replies.values()))  # one sample at a time: each reply meets one sample's first call
        args = ["annotate", str(tmp_path / "m"), "--model", "openai:m", "--config", str(cfg), "--concurrency", "1"]
        started = time.monotonic()
        code, out, _ = run(capsys, [*args, "--store", str(tmp_path / "s.db"), *JSON])
    summary = json.loads(out)
    assert code == 1 and (summary["annotated"], summary["errors"]) == (2, len(replies)), summary
    assert time.monotonic() - started < 30  # three 1 s timeouts, the rest refused at once
