"""Manifests: where their paths may lead, and cells escaped by vhd's CSV writers."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from PIL import Image

from vhd.cli.main import main
from vhd.errors import ConfigError
from vhd.fileio import escape_cell
from vhd.media.discover import discover
from vhd.media.manifest import RowProblem, read_manifest
from vhd.records import ManifestRow


def _img(path: Path, color: tuple[int, int, int] = (200, 30, 30)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 12), color).save(path)
    return path


def _manifest(tmp_path: Path) -> Path:
    _img(tmp_path / "outside.png", (10, 200, 30))
    _img(tmp_path / "lists" / "inside.png")
    home = tmp_path / "lists" / "m.csv"
    home.write_text(
        f"path,harmful\n../outside.png,yes\n{tmp_path / 'outside.png'},no\n~/x.png,yes\ninside.png,no\n"
        "sub/../inside.png,no\n"
    )
    return home


def test_manifest_paths_must_stay_under_its_folder(tmp_path: Path) -> None:
    rows = read_manifest(_manifest(tmp_path))
    problems = [r for r in rows if isinstance(r, RowProblem)]
    assert [p.where for p in problems] == ["line 2", "line 3"]
    assert all("outside" in p.reason and "--allow-outside-paths" in p.reason for p in problems)
    # a manifest does not expand ~: "~/x.png" names a folder called ~ beside it
    assert [r.path for r in rows if isinstance(r, ManifestRow)] == ["~/x.png", "inside.png", "sub/../inside.png"]
    allowed = read_manifest(_manifest(tmp_path), allow_outside_paths=True)
    assert all(isinstance(r, ManifestRow) for r in allowed)
    found = discover([_manifest(tmp_path)])
    assert [i.path.name for i in found.items] == ["inside.png"] and len(found.skipped) == 4  # 2, ~ missing, a repeat


def test_manifest_rows_naming_stored_samples_may_lead_anywhere(tmp_path: Path) -> None:
    home = _manifest(tmp_path)
    known = {str(tmp_path / "outside.png")}
    rows = read_manifest(home, known=lambda _id, path: str(path) in known)
    assert [r for r in rows if isinstance(r, RowProblem)] == []
    rows = read_manifest(home, known=lambda sample_id, _path: sample_id == "x")
    assert [r.where for r in rows if isinstance(r, RowProblem)] == ["line 2", "line 3"]


def test_ingest_and_annotate_take_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _manifest(tmp_path)
    home.write_text("path\n../outside.png\ninside.png\n")
    store = str(tmp_path / "run.db")
    assert main(["ingest", str(home), "--store", store, "--no-progress", "--strict"]) == 1
    assert "--allow-outside-paths" in capsys.readouterr().out
    assert main(["ingest", str(home), "--store", store, "--no-progress", "--allow-outside-paths", "--strict"]) == 0
    assert "1 sample(s) added" in capsys.readouterr().out
    # once in the store, the row is accepted without the flag (vhd's own files read back)
    assert main(["ingest", str(home), "--store", store, "--no-progress", "--strict"]) == 0
    annotate = ["annotate", str(home), "--model", "scripted:demo", "--no-progress", "--strict"]
    assert main([*annotate, "--store", str(tmp_path / "a.db")]) == 1  # the outside row is skipped
    assert main([*annotate, "--store", str(tmp_path / "b.db"), "--allow-outside-paths"]) == 0
    assert main([*annotate, "--store", store]) == 0


def test_manifest_cells_escaped_by_vhd_read_back(tmp_path: Path) -> None:
    _img(tmp_path / "a.png")
    home = tmp_path / "m.csv"
    with home.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "keyword", "note"])
        w.writerow([escape_cell(v) for v in ("a.png", "=knife", "+1 more")])
    [row] = read_manifest(home)
    assert isinstance(row, ManifestRow) and row.keyword == "=knife" and row.meta == {"note": "+1 more"}


def test_hostile_manifest_rows_are_reported_by_line(tmp_path: Path) -> None:
    """NUL bytes, a quote never closed, a duplicated column, deep JSON: row problems, never an exception."""
    _img(tmp_path / "a.png")
    nul = tmp_path / "nul.csv"
    nul.write_text("path,harmful\na.png,yes\nbad\x00name.png,no\n")
    rows = read_manifest(nul)  # paths are checked against the folder: path_within met the NUL byte
    assert isinstance(rows[0], ManifestRow)
    assert isinstance(rows[1], RowProblem) and rows[1].where == "line 3" and "NUL byte" in rows[1].reason
    quote = tmp_path / "quote.csv"
    quote.write_text('path,harmful\na.png,yes\n"a.png,no\n' + "a.png,no\n" * 5)
    rows = read_manifest(quote)
    assert len(rows) == 2 and isinstance(rows[0], ManifestRow)
    assert isinstance(rows[1], RowProblem) and rows[1].where == "line 3" and "lines 3-8 were left out" in rows[1].reason
    dup = tmp_path / "dup.csv"
    dup.write_text("path,harmful,harmful\na.png,yes,no\n")
    rows = read_manifest(dup)
    assert (
        isinstance(rows[0], RowProblem)
        and rows[0].where == "line 1"
        and "'harmful' appears more than once" in str(rows[0])
    )
    assert isinstance(rows[1], ManifestRow) and rows[1].harmful is True  # the first column of the name
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"path": "a.png"}\n' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "\n")
    rows = read_manifest(deep)
    assert isinstance(rows[0], ManifestRow)
    assert isinstance(rows[1], RowProblem) and "nested 100000 levels deep" in rows[1].reason
    whole = tmp_path / "deep.json"
    whole.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="nested 100000 levels deep"):
        read_manifest(whole)
