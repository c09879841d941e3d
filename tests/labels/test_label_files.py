"""Hostile and foreign labels files: missing media, the paper authors' judge.csv, paths that lead
elsewhere, and the files vhd itself writes read back by `vhd label`."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from PIL import Image

import vhd
from vhd.cli.main import build_parser, main
from vhd.labels.sets import load_labelled_set
from vhd.store.sqlite import Store


def make_images(folder: Path, names: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, name in enumerate(names):
        p = folder / name
        Image.new("RGB", (24, 24), (i * 50 % 256, 90, 200 - i * 20)).save(p)
        out.append(p)
    return out


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_a_missing_file_is_listed_by_row_and_the_rest_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_images(tmp_path / "m", ["a.png", "b.png"])
    (tmp_path / "m" / "folder.png").mkdir()
    labels = tmp_path / "m" / "val.csv"
    labels.write_text("path,harmful\na.png,yes\ngone.png,no\nb.png,no\nfolder.png,yes\n")
    code = main(["label", str(labels), "--store", str(tmp_path / "run.db"), "--set", "val"])
    out = capsys.readouterr().out
    assert code == 1
    assert "row 3:" in out and "gone.png" in out and "not found" in out and "row 5:" in out
    assert "imported 2 label(s)" in out and "2 row(s) left out" in out
    assert sorted(Path(i.path).name for i in load_labelled_set(tmp_path / "run.db", "val")) == ["a.png", "b.png"]


JUDGE = (
    "imagePath,response,harmfulType\n"
    '/home/author/VHD11K/harmful_images/a.jpg,Yes,"Violence:\na raised fist"\n'
    "/home/author/VHD11K/harmful_images/b.jpg,No,None\n"
    "/home/author/VHD11K/harmful_images/a.jpg,No,a toy\n"
    "/home/author/VHD11K/harmful_images/c.jpg,Yes,gore\n"
    "/home/author/VHD11K/harmful_images/c.jpg,Yes,gore\n"
)


def test_the_paper_authors_judge_csv_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_images(tmp_path / "data" / "images", ["a.jpg", "b.jpg", "c.jpg"])
    judge = tmp_path / "judge.csv"
    judge.write_text(JUDGE)
    store = str(tmp_path / "run.db")
    # the default: conflicting rows are named with their answers and left out
    assert main(["label", str(judge), "--store", store, "--media", str(tmp_path / "data")]) == 1
    out = capsys.readouterr().out
    assert "row 2 (yes), row 4 (no)" in out and "--duplicates" in out
    assert "imported 2 label(s)" in out
    # the user's choice, with a remap instead of the name search
    prefix = f"/home/author/VHD11K/harmful_images={tmp_path / 'data' / 'images'}"
    args = ["label", str(judge), "--store", store, "--set", "judge", "--path-prefix", prefix, "--duplicates", "first"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "imported 3 label(s) (2 harmful)" in out and "kept row 2 (--duplicates first)" in out
    items = {Path(i.path).name: i for i in load_labelled_set(store, "judge")}
    assert items["a.jpg"].harmful and items["a.jpg"].reason == "Violence:\na raised fist"


@pytest.mark.parametrize("command", ["label", "bench", "icl", "compare", "split"])
def test_every_labels_command_takes_the_shared_flags(command: str) -> None:
    first = {
        "label": ["label", "l.csv"],
        "bench": ["bench", "--labels", "l.csv"],
        "icl": ["icl", "--validation", "l.csv", "--out", "o"],
        "compare": ["compare", "--labels", "l.csv"],
        "split": ["split", "--store", "s.db", "--labels", "l.csv"],
    }[command]
    flags = ["--media", "m", "--path-prefix", "/a=/b", "--path-prefix", "/c=/d", "--duplicates", "majority"]
    args = build_parser().parse_args([*first, *flags, "--allow-outside-paths"])
    assert args.media == "m" and args.path_prefix == ["/a=/b", "/c=/d"]
    assert args.duplicates == "majority" and args.allow_outside_paths is True


def test_a_bad_path_prefix_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "l.csv").write_text("path,harmful\nx.png,yes\n")
    assert main(["label", str(tmp_path / "l.csv"), "--store", str(tmp_path / "s.db"), "--path-prefix", "nope"]) == 2
    assert "OLD=NEW" in capsys.readouterr().err


def test_split_out_reads_back_with_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_images(tmp_path / "media", [f"{i}.png" for i in range(6)])
    manifest = tmp_path / "media" / "manifest.csv"
    lines = "".join(f"{i}.png,{'yes' if i % 2 else 'no'},real\n" for i in range(6))
    manifest.write_text("path,harmful,source\n" + lines)
    store = str(tmp_path / "run.db")
    assert main(["ingest", str(manifest), "--store", store, "--no-progress"]) == 0
    out = tmp_path / "out" / "splits.csv"
    assert main(["split", "--store", store, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["label", str(out), "--store", store, "--set", "split"]) == 0
    assert "imported 6 label(s) (3 harmful)" in capsys.readouterr().out
    # and back in as a manifest: the rows name the store's own samples
    assert main(["ingest", str(out), "--store", store, "--no-progress", "--strict"]) == 0


def test_review_queue_out_reads_back_with_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_images(tmp_path / "media", [f"{i}.png" for i in range(4)])
    store = str(tmp_path / "run.db")
    vhd.annotate([tmp_path / "media"], model="scripted:demo", store=store)
    queue = tmp_path / "review" / "queue.csv"
    assert main(["review-queue", "--store", store, "--margin", "0.5", "--out", str(queue)]) == 0
    rows = read_rows(queue)
    assert len(rows) == 4
    write_rows(queue, [dict(r, harmful="yes" if n % 2 else "no") for n, r in enumerate(rows)])  # a reviewer's column
    capsys.readouterr()
    assert main(["label", str(queue), "--store", store, "--set", "reviewed"]) == 0
    assert "imported 4 label(s) (2 harmful)" in capsys.readouterr().out


def test_export_reasons_read_back_byte_equal(tmp_path: Path) -> None:
    from vhd.media.load import load_sample
    from vhd.records import Annotation, Kind, MediaItem, Verdict

    [img] = make_images(tmp_path / "media", ["a.png"])
    reason = '=HYPERLINK("http://evil")  -a raised fist'
    store = tmp_path / "run.db"
    with Store(store) as db:
        sample = load_sample(MediaItem(path=img, kind=Kind.IMAGE)).sample
        run = db.start_run({}, "c", {}, "p")
        verdict = Verdict(harmful=True, reason=reason)
        db.save_annotation(Annotation(sample_id=sample.id, run_id=run, config_hash="c", verdict=verdict), sample)
    out = tmp_path / "out" / "export.csv"
    assert main(["export", str(store), "-o", str(out)]) == 0
    # paths are written relative to the samples' folder: --media names it on the way back
    assert main(["label", str(out), "--store", str(store), "--set", "exp", "--media", str(tmp_path / "media")]) == 0
    [item] = load_labelled_set(store, "exp")
    assert item.reason == reason


def test_compare_and_icl_list_bad_rows_and_go_on(tmp_path: Path) -> None:
    from vhd.compare.runner import resolve_items
    from vhd.icl.files import resolve_validation
    from vhd.labels.files import LabelOptions

    make_images(tmp_path / "m", ["a.png", "b.png"])
    labels = tmp_path / "m" / "val.csv"
    labels.write_text("path,harmful\na.png,yes\ngone.png,no\nb.png,no\nb.png,yes\n")
    events: list[str] = []
    items = resolve_items(labels, tmp_path / "c.db", on_event=events.append)
    assert [Path(i.path).name for i in items] == ["a.png"]
    assert any("row 3" in e and "not found" in e for e in events) and any("row 4 (no)" in e for e in events)
    events.clear()
    items = resolve_validation(labels, tmp_path / "i.db", LabelOptions(duplicates="last"), on_event=events.append)
    assert [(Path(i.path).name, i.harmful) for i in items] == [("a.png", True), ("b.png", True)]
    assert any("row 3" in e for e in events)


def test_the_parser_offers_every_duplicates_policy() -> None:
    from vhd.cli.label_flags import DUPLICATES
    from vhd.labels.rules import DUPLICATE_POLICIES

    assert DUPLICATES == DUPLICATE_POLICIES
