"""Small things a new user hits: stdout exports, the csv alias, show by file name, broken pipes, hints."""

from __future__ import annotations

import csv as csv_module
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images
from vhd.cli.main import main


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six images and a video, annotated by the scripted backend; four images share two file names."""
    from tests.media.conftest import make_video

    root = tmp_path_factory.mktemp("newcomer")
    paths = make_images(root / "m", 3)
    paths[0].rename(root / "m" / "coffee.png")  # a unique name; img_001.png, img_002.png are in both folders
    make_images(root / "m" / "other", 3, size=40)  # other content (other ids), the same names
    make_video(root / "m" / "clip.mp4", 12)
    db = root / "s.db"
    vhd.annotate([root / "m"], model="scripted:demo", store=db)
    return db


def _vhd(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "vhd", *args], stdout=stdout, stderr=subprocess.PIPE, check=False)


def test_export_to_stdout_jsonl_and_csv(store: Path, tmp_path: Path) -> None:
    out = _vhd("export", str(store), "--format", "jsonl", "-o", "-")
    lines = out.stdout.decode().splitlines()
    assert out.returncode == 0 and len(lines) == 7 and all(json.loads(x)["path"] for x in lines)
    assert b"wrote 7 annotation(s) to stdout" in out.stderr and not (Path.cwd() / "-").exists()
    to_file = tmp_path / "a.jsonl"
    assert main(["export", str(store), "--format", "jsonl", "-o", str(to_file)]) == 0
    assert to_file.read_bytes() == out.stdout  # the same bytes as the file
    csv = _vhd("export", str(store), "--format", "csv", "--kind", "image", "-o", "-")
    rows = list(csv_module.reader(io.StringIO(csv.stdout.decode(), newline="")))
    assert csv.returncode == 0 and rows[0][:3] == ["imagePath", "decision", "harmfulType"] and len(rows) == 7


def test_csv_is_an_alias_of_vhd11k_csv(store: Path, tmp_path: Path) -> None:
    assert main(["export", str(store), "--format", "csv", "--kind", "image", "-o", str(tmp_path / "a.csv")]) == 0
    assert main(["export", str(store), "--kind", "image", "-o", str(tmp_path / "b.csv")]) == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "parquet"], "-o - writes jsonl or csv or vhd11k-csv to stdout"),
        (["--format", "hf"], "-o - writes jsonl"),
        (["--format", "csv"], "add --kind image or --kind video"),  # images and videos: two files
    ],
)
def test_export_to_stdout_refuses_what_it_cannot_write_in_one_line(
    store: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(store), *args, "-o", "-"]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and len(captured.err.strip().splitlines()) == 1 and captured.out == ""


def test_show_accepts_a_unique_file_name_and_says_which_forms_work(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(store), "coffee.png", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["path"].endswith("/m/coffee.png") and shown["meta"] == "{}"  # the export record's form
    assert main(["show", str(store), "img_002.png"]) == 2  # one in m/, one in m/other/
    err = capsys.readouterr().err
    assert "2 samples are called 'img_002.png'" in err and "give the path or an id prefix" in err
    assert main(["show", str(store), "nothing.png"]) == 2
    err = capsys.readouterr().err
    assert "its file path, or its file name when only one sample has that name" in err


@pytest.mark.parametrize(
    "args",
    [
        ["show", "{store}", "coffee.png"],
        ["runs", "{store}"],
        ["export", "{store}", "--format", "jsonl", "-o", "-"],
        ["annotate", "{media}", "--model", "scripted:demo", "--store", "{store}", "--no-progress"],
    ],
)
def test_a_reader_that_went_away_is_exit_141_for_every_command(store: Path, args: list[str]) -> None:
    """One rule: output cut short by the reader (`| head` before vhd wrote it) exits 141, quietly."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before vhd writes a byte
    try:
        done = _vhd(*(a.format(store=store, media=store.parent / "m") for a in args), stdout=write)
    finally:
        os.close(write)
    assert done.returncode == 141 and done.stderr == b"", (args, done.stderr)


def test_plurals_in_dry_run_and_dataset_card(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.media.conftest import make_video
    from vhd.export.hf_card import dataset_card
    from vhd.export.hf_result import HfExport

    make_video(tmp_path / "m" / "clip.mp4", 12)
    assert main(["annotate", str(tmp_path / "m"), "--model", "scripted:demo", "--store", str(tmp_path / "d.db"),
                 "--dry-run"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "1 sample (0 images, 1 video)" in out and "1 videos" not in out
    card = dataset_card(HfExport(out=tmp_path, splits={"train": 3}, kinds={"image": 2, "video": 1}))
    assert "2 images, 1 video)" in card and "1 videos" not in card


def test_install_hints_name_the_running_interpreter() -> None:
    from vhd.backends.hub import unreachable_message
    from vhd.errors import MissingDependencyError

    message = str(MissingDependencyError("pyarrow", "parquet"))
    assert f"{sys.executable} -m pip install 'vhd[parquet]'" in message
    assert f"{sys.executable} -m pip install pyarrow" in message
    line = unreachable_message("hf model", "org/model", "pass a local directory")
    hf = Path(sys.executable).parent / "hf"
    assert (f"{hf} download org/model" if hf.is_file() else f"{sys.executable} -m huggingface_hub.cli.hf") in line


@pytest.mark.parametrize(
    ("model", "says"),
    [("{tmp}/nonexistent", "no such directory"), ("vhd-tests/not-cached-vlm", "not in the local cache")],
)
def test_a_model_that_cannot_be_there_fails_before_torch_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, says: str
) -> None:
    """`--model hf:/nonexistent` (or, offline, an uncached hub id) says so at once: it took 6-26 s importing torch."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    image, db = str(make_images(tmp_path / "m", 1)[0]), str(tmp_path / "d.db")
    spec = "hf:" + model.format(tmp=tmp_path)
    code = (
        "import sys, vhd\nfrom vhd.errors import BackendUnavailableError\n"
        f"try:\n    vhd.annotate([{image!r}], model={spec!r}, store={db!r})\n"
        "except BackendUnavailableError as e:\n    print(e)\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert says in out and out.splitlines()[-1] == "False False"


def test_vhd_examples_says_how_many_media_files_and_names_the_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vhd.cli.main import main as cli

    assert cli(["examples", str(tmp_path / "ex")]) == 0
    media = [p for p in (tmp_path / "ex").iterdir() if p.suffix != ".csv"]
    assert capsys.readouterr().out.strip() == (
        f"wrote {len(media)} example media file(s) and manifest.csv (a manifest of them) to {tmp_path / 'ex'}"
    )
