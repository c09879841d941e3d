"""Hostile input files and output pipes: non-UTF-8 names, FIFOs and devices, terminal escapes, `| head`.

No run crashes or hangs on one bad file; every name that is stored or printed is valid UTF-8 and
shows no control character raw; a closed output pipe ends a command quietly.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import vhd
from vhd.cli.main import main
from vhd.fileio import display_path, open_regular, printable
from vhd.media.discover import discover
from vhd.media.hashing import sha256_file
from vhd.store.sqlite import Store

TIMEOUT = 120.0
"""Seconds a subprocess may take before the test calls it hung (imports are slow on a loaded machine)."""


def png(path: Path | bytes, color: tuple[int, int, int] = (10, 120, 200)) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (24, 24), color).save(buf, "PNG")
    with open(path, "wb") as fh:
        fh.write(buf.getvalue())


def images(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        png(folder / f"img_{i}.png", (i * 40, 200 - i * 30, 90))


def finishes(fn: Callable[[], Any], seconds: float = 20.0) -> Any:
    """Run ``fn`` in a thread; fail (instead of hanging the suite) when it does not return in time."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{fn} did not return within {seconds} s (blocked on a FIFO?)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def release(fifo: Path) -> None:
    """Unblock a reader stuck in open() on ``fifo`` (old code under test), so no thread is left hanging."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def vhd_cli(*args: str, cwd: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(vhd.__file__).parents[1])}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "vhd", *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=kwargs.pop("capture_output", True),
        timeout=TIMEOUT,
        **kwargs,
    )


# -- one helper for names ---------------------------------------------------------------------


def test_display_path_escapes_bytes_that_are_not_utf8() -> None:
    bad = os.fsdecode(b"/data/bad\xff.jpg")
    assert display_path(bad) == "/data/bad\\xff.jpg"
    assert display_path(Path(bad)) == "/data/bad\\xff.jpg"
    assert display_path(b"/data/bad\xff.jpg") == "/data/bad\\xff.jpg"
    assert display_path("caf\u00e9.jpg") == "caf\u00e9.jpg"
    assert display_path("lone\ud800.jpg") == "lone\\ud800.jpg"
    for text in (display_path(bad), display_path("lone\ud800.jpg")):
        text.encode("utf-8")  # storable and printable


def test_printable_escapes_control_characters_only() -> None:
    assert printable("\x1b[31mred.jpg") == "\\x1b[31mred.jpg"
    assert printable("\x07bell.png") == "\\x07bell.png"
    assert printable("a\nb\tc\rd\x7f\x9b") == "a\\nb\\tc\\rd\\x7f\\x9b"
    assert printable("a\nb", multiline=True) == "a\nb"
    assert printable("evil\u202egpj.exe") == "evil\\u202egpj.exe"
    assert printable("[bold]x[/bold].jpg \u00e9\u4e2d") == "[bold]x[/bold].jpg \u00e9\u4e2d"
    assert printable(os.fsdecode(b"bad\xff\x1b.jpg")) == "bad\\xff\\x1b.jpg"


# -- item 2: names that are not UTF-8 -----------------------------------------------------------


def test_annotate_records_a_name_that_is_not_utf8_and_annotates_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    media = tmp_path / "media"
    images(media, 2)
    png(os.fsencode(media) + b"/bad\xff.png")
    store = tmp_path / "run.db"
    summary = vhd.annotate([media], model="scripted:demo", store=store, progress=False)
    assert (summary.annotated, summary.skipped) == (2, 1)
    with Store(store) as db:
        (skip,) = db.skips()
    assert skip.path.endswith("bad\\xff.png") and "UTF-8" in skip.reason
    assert all(p.endswith("bad\\xff.png") for p, _ in summary.skip_reasons)
    other = str(tmp_path / "cli.db")
    assert main(["annotate", str(media), "--model", "scripted:demo", "--store", other, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "annotated 2 sample(s)" in out and "bad\\xff.png: file name is not valid UTF-8" in out


def test_ingest_lists_a_name_that_is_not_utf8_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    media = tmp_path / "media"
    images(media, 1)
    png(os.fsencode(media) + b"/bad\xff.png")
    db = str(tmp_path / "s.db")
    assert main(["ingest", str(media), "--store", db, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "1 sample(s) added" in out and "invalid " + str(media) + "/bad\\xff.png" in out


def test_names_that_are_not_utf8_on_the_command_line_do_not_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = os.fsencode(tmp_path) + b"/media\xff"
    os.mkdir(folder)
    png(folder + b"/a.png")
    db = str(tmp_path / "s.db")
    argv_folder = os.fsdecode(folder)  # how Python hands such an argument over
    assert main(["annotate", argv_folder, "--model", "scripted:demo", "--store", db, "--no-progress"]) == 0
    assert "media\\xff: file name is not valid UTF-8" in capsys.readouterr().out
    with Store(db) as st:
        assert "media\\xff" in st.skips()[0].path
    assert main(["show", db, os.fsdecode(b"bad\xff.png")]) == 2
    assert "no sample matching" in capsys.readouterr().err
    assert main(["remove", os.fsdecode(b"bad\xff.png"), "--store", db]) == 1
    assert "not found bad\\xff.png" in capsys.readouterr().out


def test_the_store_takes_any_python_string(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    images(tmp_path / "m", 1)
    db = tmp_path / "s.db"
    vhd.annotate([tmp_path / "m"], model="scripted:demo", store=db, progress=False)
    reason = os.fsdecode(b"takedown \xff request")
    assert main(["remove", str(tmp_path / "m" / "img_0.png"), "--store", str(db), "--reason", reason]) == 0
    assert "removed" in capsys.readouterr().out
    with Store(db) as st:
        st.record_skip(None, os.fsdecode(b"x\xfe.png"), "lone \ud800 surrogate")
        assert [(s.path, s.reason) for s in st.skips()][-1] == ("x\\xfe.png", "lone \\ud800 surrogate")
        rows = st.conn.execute("SELECT reason FROM removals").fetchall()
    assert rows == [("takedown \\xff request",)]


# -- item 3: FIFOs, sockets, devices ----------------------------------------------------------


def test_discovery_skips_what_is_not_a_regular_file(tmp_path: Path) -> None:
    media = tmp_path / "media"
    images(media, 1)
    os.mkfifo(media / "pipe.jpg")
    os.symlink("/dev/zero", tmp_path / "zero.png")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(media / "sock.png"))
        found = discover([media, media / "pipe.jpg", tmp_path / "zero.png"])
    assert [p.name for p in (Path(i.path) for i in found.items)] == ["img_0.png"]
    reasons = {(s.path.name, s.reason) for s in found.skipped}
    assert reasons == {
        ("pipe.jpg", "not a regular file (fifo)"),
        ("sock.png", "not a regular file (socket)"),
        ("zero.png", "not a regular file (character device)"),
    }


def test_a_manifest_row_pointing_at_a_fifo_is_skipped(tmp_path: Path) -> None:
    images(tmp_path, 1)
    os.mkfifo(tmp_path / "pipe.png")
    manifest = tmp_path / "m.csv"
    manifest.write_text("path\nimg_0.png\npipe.png\n")
    found = discover([manifest])
    assert len(found.items) == 1
    assert [s.reason for s in found.skipped] == ["m.csv line 3: not a regular file (fifo)"]


def test_files_are_opened_only_when_regular(tmp_path: Path) -> None:
    fifo = tmp_path / "late.png"
    os.mkfifo(fifo)
    try:
        with pytest.raises(OSError, match=r"not a regular file \(fifo\)"):
            finishes(lambda: sha256_file(fifo))
        with pytest.raises(OSError, match=r"not a regular file \(fifo\)"):
            finishes(lambda: open_regular(fifo))
    finally:
        release(fifo)
    with pytest.raises(OSError, match=r"not a regular file \(character device\)"):
        finishes(lambda: sha256_file("/dev/zero"))
    png(tmp_path / "ok.png")
    with open_regular(tmp_path / "ok.png") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("command", ["annotate", "ingest"])
def test_a_fifo_among_the_inputs_does_not_hang_the_run(tmp_path: Path, command: str) -> None:
    media = tmp_path / "media"
    images(media, 2)
    os.mkfifo(media / "pipe.jpg")
    extra = ["--model", "scripted:demo"] if command == "annotate" else []
    try:
        done = vhd_cli(command, str(media), *extra, "--store", str(tmp_path / "s.db"), "--no-progress", cwd=tmp_path)
    finally:
        release(media / "pipe.jpg")
    assert done.returncode == 0, done.stderr
    assert "pipe.jpg: not a regular file (fifo)" in done.stdout
    assert ("annotated 2 sample(s)" if command == "annotate" else "2 sample(s) added") in done.stdout


# -- item 5: terminal escapes and rich markup in names ------------------------------------------

NASTY = ("\x1b[2Jclear.png", "\x07bell.png", "[bold]x.png", "[link=evil:x]y.png")


def test_show_and_skip_lines_print_names_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping inside a name
    media = tmp_path / "media"
    media.mkdir()
    for i, name in enumerate(NASTY):
        png(media / name, (i * 60, 30, 30))
    (media / "\x1b]0;owned\x07notes.txt").write_text("not media")
    db = str(tmp_path / "s.db")
    assert main(["annotate", str(media), "--model", "scripted:demo", "--store", db, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "skipped " + str(media) + "/\\x1b]0;owned\\x07notes.txt: unsupported file type .txt" in out
    for name in NASTY:
        assert main(["show", db, str(media / name)]) == 0
        shown = capsys.readouterr().out
        assert "\x1b" not in shown and "\x07" not in shown
        assert printable(name) in shown, shown
    assert main(["annotate", str(tmp_path / "\x1b[2Jmissing.png"), "--model", "scripted:demo", "--store", db]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "input not found: " in err and "\\x1b[2Jmissing.png" in err


def test_show_does_not_interpret_markup_or_escapes_from_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping inside a name
    images(tmp_path / "m", 1)
    db = tmp_path / "s.db"
    vhd.annotate([tmp_path / "m"], model="scripted:demo", store=db, progress=False)
    with Store(db) as st:
        [(sample, ann)] = list(st.iter_annotations())
    ann.verdict.reason = "[blink]gotcha[/blink] \x1b[2J"
    ann.verdict.categories = ["\x1b[5mC1"]
    ann.turns[0].text = "line one\nline [red]two[/red] \x1b]0;x\x07"
    with Store(db) as st:
        st.save_annotation(ann, sample)
    assert main(["show", str(db), sample.id]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\x07" not in shown
    assert "[blink]gotcha[/blink] \\x1b[2J" in shown and "\\x1b[5mC1" in shown
    assert "│ line [red]two[/red] \\x1b]0;x\\x07 " in shown and "│ line one " in shown  # newline kept


# -- item 4: a closed output pipe ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("show", "STORE", "SAMPLE", "--json"),
        ("show", "STORE", "SAMPLE"),
        ("keywords",),
        ("keywords", "--format", "json"),
        ("stats", "--store", "STORE", "--out", "stats", "--no-plot"),
    ],
)
def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path, args: tuple[str, ...]) -> None:
    images(tmp_path / "m", 1)
    db = tmp_path / "s.db"
    vhd.annotate([tmp_path / "m"], model="scripted:demo", store=db, progress=False)
    sample = str(tmp_path / "m" / "img_0.png")
    argv = [{"STORE": str(db), "SAMPLE": sample}.get(a, a) for a in args]
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` that has already exited: every write fails with EPIPE
    try:
        done = vhd_cli(*argv, cwd=tmp_path, stdout=write_end, stderr=subprocess.PIPE, capture_output=False)
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == 141


# -- issue 33: filesystem tricks and hostile tables ---------------------------------------------


def test_links_out_and_link_loops_are_skipped_with_a_reason(tmp_path: Path) -> None:
    media = tmp_path / "media"
    images(media, 1)
    os.symlink(".", media / "self")  # a loop through a folder
    os.symlink("loop_b.png", media / "loop_a.png")
    os.symlink("loop_a.png", media / "loop_b.png")
    png(tmp_path / "secret.png")
    os.symlink(tmp_path / "secret.png", media / "out.png")
    os.symlink(tmp_path, media / "outdir")
    found = finishes(lambda: discover([media]))
    assert [Path(i.path).name for i in found.items] == ["img_0.png"]
    reasons = {s.path.name: s.reason for s in found.skipped}
    assert reasons["out.png"].startswith("symbolic link points outside")
    assert reasons["outdir"].startswith("symbolic link points outside")
    assert reasons["loop_a.png"] == reasons["loop_b.png"] == "symbolic link loop (it leads back to itself)"


def test_odd_names_are_ingested_and_a_255_byte_name_fails_alone_in_frames(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.hostile_corpus import video_bytes

    media = tmp_path / "media"
    media.mkdir()
    png(media / "new\nline.png", (1, 2, 3))
    png(media / "tab\tand\x1bescape.png", (4, 5, 6))
    png(media / ("a" * 251 + ".png"), (7, 8, 9))
    assert main(["ingest", str(media), "--store", str(tmp_path / "s.db"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "3 sample(s) added" in out and "\x1b" not in out
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / ("b" * 251 + ".mp4")).write_bytes(video_bytes("libx264", "mp4", frames=4))
    (videos / "ok.mp4").write_bytes(video_bytes("libx264", "mp4", frames=4))
    code = main(["frames", str(videos), "--out", str(tmp_path / "frames"), "--n", "2", "--no-progress"])
    out = capsys.readouterr().out
    assert code != 0 and "1 video(s) written" in out and "1 failed" in out and "File name too long" in out


def test_a_store_path_that_is_a_folder_or_a_fifo_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images(tmp_path / "media", 1)
    (tmp_path / "folder").mkdir()
    os.symlink(tmp_path / "folder", tmp_path / "link.db")
    os.mkfifo(tmp_path / "fifo.db")
    for store, kind in (("folder", "directory"), ("link.db", "directory"), ("fifo.db", "fifo")):
        try:
            code = finishes(partial(main, ["ingest", str(tmp_path / "media"), "--store", str(tmp_path / store)]))
        finally:
            release(tmp_path / "fifo.db")
        err = capsys.readouterr().err.strip()
        assert code == 2 and f"not a regular file ({kind})" in err and len(err.splitlines()) == 1, err


def test_an_output_that_is_a_folder_is_refused_and_a_link_is_replaced_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    images(tmp_path / "media", 1)
    assert main(["annotate", str(tmp_path / "media"), "--model", "scripted:demo", "--store", str(db)]) == 0
    (tmp_path / "out").mkdir()
    for fmt in ("jsonl", "parquet", "csv"):
        assert main(["export", str(db), "-o", str(tmp_path / "out"), "--format", fmt]) == 2
        err = capsys.readouterr().err.strip()
        assert "it is a folder" in err and len(err.splitlines()) == 1, err
    (tmp_path / "a_file").write_text("")
    assert main(["frames", str(tmp_path / "media"), "--out", str(tmp_path / "a_file"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot create output folder" in err and len(err.splitlines()) == 1, err  # already so before issue 33
    (tmp_path / "keep.txt").write_text("keep")
    os.symlink(tmp_path / "keep.txt", tmp_path / "link.jsonl")
    assert main(["export", str(db), "-o", str(tmp_path / "link.jsonl"), "--format", "jsonl"]) == 0
    assert (tmp_path / "keep.txt").read_text() == "keep" and not (tmp_path / "link.jsonl").is_symlink()


def test_hostile_labels_files_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    db = str(tmp_path / "s.db")
    os.mkfifo(tmp_path / "fifo.csv")
    pq.write_table(pa.table({"path": ["a.png"], "harmful": [True]}), tmp_path / "labels.parquet")
    with (tmp_path / "huge.csv").open("wb") as fh:  # 1 GiB, sparse: no disk used
        fh.write(b"path,harmful\n" + b"x" * 100)
        fh.truncate(2**30)
    expected = {
        "fifo.csv": "not a regular file (fifo)",
        "labels.parquet": "or JSON Lines, not Parquet",
        "huge.csv": "1,024 MiB, over the 512 MiB",
    }
    for name, message in expected.items():
        try:
            code = finishes(partial(main, ["label", str(tmp_path / name), "--store", db]))
        finally:
            release(tmp_path / "fifo.csv")
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err and len(err.splitlines()) == 1, (name, err)
    from vhd.bench.data import load_bench_set
    from vhd.errors import ConfigError

    with pytest.raises(ConfigError, match="or JSON Lines, not Parquet"):  # what bench --labels reads through
        load_bench_set(tmp_path / "labels.parquet")


def test_read_table_refuses_hostile_tables_at_once(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhd.errors import ConfigError
    from vhd.export import read_table
    from vhd.export.schema import arrow_schema

    schema = arrow_schema()
    nested = pa.array([[{"a": 1}]], pa.list_(pa.struct([("a", pa.int64())])))
    columns = {f.name: nested if f.name == "id" else pa.nulls(1, f.type) for f in schema}
    pq.write_table(pa.table(columns), tmp_path / "nested.parquet")
    pq.write_table(pa.table({"id": pa.nulls(10**7, pa.int64())}), tmp_path / "rows.parquet")  # 10^7 rows
    with (tmp_path / "line.jsonl").open("wb") as fh:  # one 1 GiB line, sparse: no disk used
        fh.write(b'{"id": "')
        fh.truncate(2**30)
    for name, message in (
        ("nested.parquet", "column 'id' is list<"),
        ("rows.parquet", "column 'id' is int64, not string"),
        ("line.jsonl", "a line is longer than 1 MiB"),
    ):
        with pytest.raises(ConfigError, match="not a vhd export") as caught:
            finishes(partial(read_table, tmp_path / name))
        assert message in str(caught.value) and "\n" not in str(caught.value)


def test_serve_never_follows_a_link_out_of_the_media_folder(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    import re

    from starlette.testclient import TestClient

    from tests.hostile_corpus import video_bytes
    from vhd.serve import ServeSettings, create_app

    media = tmp_path / "media"
    media.mkdir()
    (media / "clip.mp4").write_bytes(video_bytes("libx264", "mp4", frames=4))
    db = tmp_path / "s.db"
    assert main(["annotate", str(media), "--model", "scripted:demo", "--store", str(db), "--no-progress"]) == 0
    secret = tmp_path / "secret.mp4"
    secret.write_bytes(b"SECRET" * 1000)
    (media / "clip.mp4").unlink()
    os.symlink(secret, media / "clip.mp4")  # swapped after ingest
    with Store(db) as store:
        (sample,) = store.find_samples_named("clip.mp4")
    app = create_app(ServeSettings(store=db, reviewer="alice"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(f"/sample/{sample.id}?reveal=1").text
        match = re.search(r'/clip/[^"]+', page)
        assert match, "the page offers the clip"
        clip = client.get(match.group(0).replace("&amp;", "&"))
        assert clip.status_code == 404 and b"SECRET" not in clip.content
        for thumb in re.findall(r'/thumb/[^"]+', page):
            assert b"SECRET" not in client.get(thumb.replace("&amp;", "&")).content


def test_files_that_vanish_or_change_after_listing_are_each_their_own_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from vhd.curate.ingest import ingest

    discover_module = importlib.import_module("vhd.media.discover")  # vhd.media.discover is also a function
    media = tmp_path / "media"
    media.mkdir()
    for i, name in enumerate(("a_gone.png", "b_fifo.png", "c_garbage.png", "d_ok.png")):
        png(media / name, (i * 50, 10, 10))
    real = discover_module.iter_discover

    def listed_then_changed(*args: Any, **kwargs: Any) -> Any:
        found = list(real(*args, **kwargs))  # everything listed first, then the folder changes
        (media / "a_gone.png").unlink()
        (media / "b_fifo.png").unlink()
        os.mkfifo(media / "b_fifo.png")
        (media / "c_garbage.png").write_bytes(b"not an image any more")
        yield from found

    monkeypatch.setattr(discover_module, "iter_discover", listed_then_changed)
    try:
        result = finishes(lambda: ingest([media], tmp_path / "s.db", jobs=1))
    finally:
        release(media / "b_fifo.png")
    assert result.counts["added"] == 1
    reasons = {Path(path).name: reason for path, reason in result.invalid}
    assert set(reasons) == {"a_gone.png", "b_fifo.png", "c_garbage.png"}, reasons
    assert "fifo" in reasons["b_fifo.png"]
