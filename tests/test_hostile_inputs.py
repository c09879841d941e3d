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
