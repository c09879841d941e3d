from __future__ import annotations

import json
from pathlib import Path

import pytest

from vhd.errors import ConfigError
from vhd.labels import CATEGORIES, read_labels
from vhd.labels.files import LabelOptions, normalize_category
from vhd.records import Kind
from vhd.records import parse_yes_no as parse_bool

ID_A = "a" * 64
ID_B = "B" * 64


def _write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("yes", True), ("YES", True), (" Yes ", True), ("1", True), ("true", True), ("True", True),
        ("no", False), ("No", False), ("0", False), ("false", False), ("FALSE", False),
    ],
)  # fmt: skip
def test_every_accepted_spelling(tmp_path: Path, value: str, expected: bool) -> None:
    f = _write(tmp_path / "l.csv", f"path,harmful\nx.png,{value}\n")
    labels = read_labels(f)
    assert labels.errors == [] and labels.format == "labels-csv"
    assert labels.rows[0].harmful is expected


def test_parse_bool_values() -> None:
    assert parse_bool(True) is True and parse_bool(0) is False and parse_bool(1.0) is True
    assert parse_bool("") is None and parse_bool(None) is None
    with pytest.raises(ValueError, match="yes/no"):
        parse_bool("maybe")
    with pytest.raises(ValueError):
        parse_bool(2)


def test_full_labels_csv(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    f = _write(
        tmp_path / "sub" / "labels.csv",
        "path,id,harmful,categories,reason,source,kind,keyword,split,rater,notes\n"
        "img/1.png,,yes,A;f;Substance Misuse,blood,real,image,knife,test,ann,\n"
        f"/abs/2.mp4,{ID_B},no,,,Synthetic,VIDEO,,train,bob,calm\n"
        f",{ID_A},1,custom harm; A. Violence and Threats,,,,,,,\n",
    )
    labels = read_labels(f, options=LabelOptions(allow_outside_paths=True))  # /abs/2.mp4 is outside sub/
    assert labels.errors == []
    r1, r2, r3 = labels.rows
    assert r1.path == (tmp_path / "sub" / "img" / "1.png").resolve() and r1.id is None
    assert r1.harmful is True and r1.reason == "blood" and r1.source == "real"
    assert r1.categories == ["Violence and Threats", "Explicit and Sexual Content", "Substance Misuse"]
    assert (r1.kind, r1.keyword, r1.split, r1.line) == (Kind.IMAGE, "knife", "test", 2)
    assert r1.meta == {"rater": "ann", "notes": ""}
    assert r2.path == Path("/abs/2.mp4") and r2.id == "b" * 64 and r2.harmful is False
    assert (r2.source, r2.kind, r2.reason, r2.categories) == ("synthetic", Kind.VIDEO, None, [])
    assert r3.path is None and r3.id == ID_A
    assert r3.categories == ["custom harm", "Violence and Threats"]
    assert set(labels.by_id()) == {"b" * 64, ID_A} and len(labels.by_path()) == 2
    assert len(labels) == 3 and list(labels) == labels.rows


def test_root_overrides_the_base_folder(tmp_path: Path) -> None:
    f = _write(tmp_path / "l.csv", "path,harmful\nx.png,no\n")
    assert read_labels(f, root=tmp_path / "media").rows[0].path == (tmp_path / "media" / "x.png").resolve()


def test_bad_rows_are_collected_with_row_numbers(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "l.csv",
        "path,id,harmful,source,kind,categories\n"
        "ok.png,,yes,,,\n"  # 2
        "missing.png,,,,,\n"  # 3
        "odd.png,,perhaps,,,\n"  # 4
        ",,yes,,,\n"  # 5
        "ok.png,,no,,,\n"  # 6 same path, another answer
        f",{ID_A},no,,,\n"  # 7
        f",{ID_A.upper()},yes,,,\n"  # 8 same id, another answer
        ",nothex,yes,,,\n"  # 9
        "s.png,,yes,fake,,\n"  # 10
        "k.png,,yes,,audio,\n"  # 11
        "c.png,,yes,,,K\n"  # 12
        "\n"  # blank line: ignored
        "last.png,,true,,,\n",  # 14
    )
    labels = read_labels(f)
    assert [r.line for r in labels.rows] == [14]
    errors = {e.line: e.message for e in labels.errors}
    assert sorted(errors) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    assert "missing harmful" in errors[3]
    assert "perhaps" in errors[4]
    assert "no path or id" in errors[5]
    # conflicting rows are never settled silently: the default leaves both out and says why
    assert errors[6].startswith("rows name the same path or id with different answers: row 2 (yes), row 6 (no)")
    assert errors[2] == errors[6] and "--duplicates drop, the default" in errors[2]
    assert "row 7 (no), row 8 (yes)" in errors[8]
    assert "sha256" in errors[9] and "real or synthetic" in errors[10]
    assert "image or video" in errors[11] and "A-J" in errors[12]
    assert str(labels.errors[1]).startswith("row 3: ")
    first = read_labels(f, options=LabelOptions(duplicates="first"))
    assert [r.line for r in first.rows] == [2, 7, 14] and [n.line for n in first.notes] == [6, 8]


def test_vhd11k_csv_release_format(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "harmful_image_ann.csv",
        "imagePath,decision,harmfulType,affirmativeDebater_argument_0,affirmativeDebater_argument_1,"
        "negativeDebater_argument_0,negativeDebater_argument_1\n"
        'a.jpg,yes,illegal activity,"first,\nsecond line",None,neg,None\n'
        "b.jpg,no,lack of direct messaging,x,y,z,w\n"
        "c.jpg,error,error,None,None,None,None\n",
    )
    labels = read_labels(f)
    assert labels.format == "vhd11k-csv"
    a, b = labels.rows
    assert a.path == (tmp_path / "a.jpg").resolve() and a.kind is Kind.IMAGE
    assert a.harmful is True and a.reason == "illegal activity" and a.categories == []
    assert a.meta["affirmativeDebater_argument_0"] == "first,\nsecond line"
    assert a.meta["negativeDebater_argument_1"] == "None"
    assert b.harmful is False and b.line == 3  # records are counted, not physical lines
    assert [e.line for e in labels.errors] == [4] and "error" in labels.errors[0].message


def test_vhd11k_video_csv_latin1(tmp_path: Path) -> None:
    f = _write(tmp_path / "v.csv", "videoPath,decision,harmfulType\nv1.mp4,yes,caf\xe9 violence\n", "latin-1")
    row = read_labels(f).rows[0]
    assert row.kind is Kind.VIDEO and row.reason == "caf\xe9 violence"


def test_utf8_bom_header(tmp_path: Path) -> None:
    f = tmp_path / "bom.csv"
    f.write_bytes("\ufeffpath,harmful\nx.png,yes\n".encode())
    assert read_labels(f).rows[0].harmful is True


def test_vhd11k_json_list(tmp_path: Path) -> None:
    data = [
        {"imagePath": "a.jpg", "decision": "yes", "harmfulType": "gore", "affirmativeDebater_argument_0": "x"},
        {"videoPath": "v.mp4", "decision": "no", "harmfulType": "calm"},
        {"imagePath": "b.jpg", "harmfulType": "?"},
        "not an object",
    ]
    f = _write(tmp_path / "ann.json", json.dumps(data))
    labels = read_labels(f)
    assert labels.format == "vhd11k-json"
    a, v = labels.rows
    assert (a.harmful, a.reason, a.kind, a.line) == (True, "gore", Kind.IMAGE, 1)
    assert a.meta == {"affirmativeDebater_argument_0": "x"}
    assert (v.harmful, v.kind, v.path) == (False, Kind.VIDEO, (tmp_path / "v.mp4").resolve())
    assert [(e.line, e.message) for e in labels.errors] == [
        (3, "missing harmful label"),
        (4, "entry is not an object"),
    ]


def test_vhd11k_json_keyed_by_path(tmp_path: Path) -> None:
    data = {
        "a.jpg": {"decision": "yes", "harmfulType": "gore"},
        "b.jpg": {"decision": "no", "harmfulType": "calm", "categories": ["A", "Body Image and Beauty Standards"]},
    }
    labels = read_labels(_write(tmp_path / "ann.json", json.dumps(data)))
    assert [(r.path.name if r.path else None, r.harmful, r.reason) for r in labels] == [
        ("a.jpg", True, "gore"),
        ("b.jpg", False, "calm"),
    ]
    assert labels.rows[1].categories == ["Violence and Threats", "Body Image and Beauty Standards"]


def test_json_labels_style_and_wrapped_list(tmp_path: Path) -> None:
    data = {"annotations": [{"id": ID_A, "harmful": True}, {"path": "x.png", "harmful": 0, "split": "val"}]}
    labels = read_labels(_write(tmp_path / "labels.txt", json.dumps(data)))
    assert [(r.id, r.harmful) for r in labels] == [(ID_A, True), (None, False)]
    assert labels.rows[1].split == "val"


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("nohead.csv", "path,label\nx.png,yes\n", "no 'harmful' column"),
        ("empty.csv", "", "no 'harmful' column"),
        ("noid.csv", "file,harmful\nx.png,yes\n", "'path' or 'id'"),
        ("nodecision.csv", "imagePath,harmfulType\nx.png,gore\n", "'decision'"),
        ("bad.json", "[{", "JSON"),
        ("scalar.json", "42", "JSON list"),
        ("keys.json", '[{"path": "x.png", "label": 1}]', "no 'harmful' column"),
    ],
)
def test_unusable_files_raise_config_error(tmp_path: Path, name: str, text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        read_labels(_write(tmp_path / name, text))


def test_missing_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="check the path"):
        read_labels(tmp_path / "nope.csv")


def test_categories_constant_and_normalization() -> None:
    assert [c for c, _ in CATEGORIES] == list("ABCDEFGHIJ")
    assert CATEGORIES[5] == ("F", "Explicit and Sexual Content")
    assert normalize_category("j") == "Misinformation and Deceptive Content"
    assert normalize_category("C) animal welfare and environmental safeguarding") == (
        "Animal Welfare and Environmental Safeguarding"
    )
    assert normalize_category("mental health and self-harm") == "Mental Health and Self-Harm"
    assert normalize_category(" Gambling ") == "Gambling"
    with pytest.raises(ValueError, match="A-J"):
        normalize_category("Z")


# -- hardening: the paper authors' files, duplicates, where paths may lead, escaped cells ----------

JUDGE_CSV = (
    "imagePath,response,harmfulType\n"
    '/home/author/VHD11K/harmful_images/a.jpg,Yes,"Violence:\na raised fist"\n'  # 2
    "/home/author/VHD11K/harmful_images/b.jpg,No,None\n"  # 3
    "/home/author/VHD11K/harmful_images/a.jpg,No,a toy\n"  # 4: conflicts with row 2
    '/home/author/VHD11K/harmful_images/c.jpg,"Yes, it is harmful.",gore\n'  # 5
    "/home/author/VHD11K/harmful_images/c.jpg,Yes,gore again\n"  # 6: agrees with row 5
    "/home/author/VHD11K/harmful_images/d.jpg,No,x\n"  # 7
    "/home/author/VHD11K/harmful_images/d.jpg,Yes,y\n"  # 8
    "/home/author/VHD11K/harmful_images/d.jpg,no,z\n"  # 9: d is no by 2 to 1
)
OLD = "/home/author/VHD11K/harmful_images"


def _judge_files(tmp_path: Path) -> tuple[Path, Path]:
    images = tmp_path / "vhd11k" / "images"
    images.mkdir(parents=True)
    for name in "abcd":
        (images / f"{name}.jpg").write_bytes(b"x")
    return _write(tmp_path / "judge.csv", JUDGE_CSV), images


def test_paper_judge_csv_response_column_and_outside_paths_refused(tmp_path: Path) -> None:
    f, _images = _judge_files(tmp_path)
    labels = read_labels(f)
    assert labels.format == "vhd11k-csv" and labels.rows == []
    msg = {e.line: e.message for e in labels.errors}
    assert sorted(msg) == list(range(2, 10))
    assert "--media" in msg[3] and "--allow-outside-paths" in msg[3] and "--path-prefix" in msg[3]


def test_paper_judge_csv_with_path_prefix_default_drops_conflicts(tmp_path: Path) -> None:
    from vhd.labels.files import LabelOptions

    f, images = _judge_files(tmp_path)
    labels = read_labels(f, options=LabelOptions(path_prefixes=((OLD, str(images)),)))
    kept = {r.path.name: (r.line, r.harmful, r.reason) for r in labels.rows if r.path}
    assert kept == {"b.jpg": (3, False, "None"), "c.jpg": (5, True, "gore")}
    errors = {e.line: e.message for e in labels.errors}
    assert sorted(errors) == [2, 4, 7, 8, 9]  # conflicting rows left out, each named with its answer
    assert "row 2 (yes)" in errors[4] and "row 4 (no)" in errors[4] and "--duplicates" in errors[2]
    assert "row 7 (no), row 8 (yes), row 9 (no)" in errors[9]
    assert [(n.line, "row 5" in n.message) for n in labels.notes] == [(6, True)]  # same answer: merged


@pytest.mark.parametrize(
    ("policy", "a", "d"),
    [("first", (2, True), (7, False)), ("last", (4, False), (9, False)), ("majority", None, (7, False))],
)
def test_paper_judge_csv_duplicate_policies_with_basename_fallback(
    tmp_path: Path, policy: str, a: tuple[int, bool] | None, d: tuple[int, bool]
) -> None:
    from vhd.labels.files import LabelOptions

    f, images = _judge_files(tmp_path)
    labels = read_labels(f, options=LabelOptions(media=tmp_path / "vhd11k", duplicates=policy))
    kept = {r.path.name: (r.line, r.harmful) for r in labels.rows if r.path}
    assert all(r.path is not None and r.path.parent == images.resolve() for r in labels.rows)
    assert kept.get("a.jpg") == a and kept["d.jpg"] == d
    if a is None:  # a tie has no majority: both rows are left out and said so
        assert {e.line for e in labels.errors} == {2, 4} and "no majority" in labels.errors[0].message
    else:
        assert labels.errors == []
        assert any(f"kept row {a[0]}" in n.message and f"--duplicates {policy}" in n.message for n in labels.notes)


def test_basename_fallback_names_ambiguous_files(tmp_path: Path) -> None:
    from vhd.labels.files import LabelOptions

    for sub in ("x", "y"):
        (tmp_path / "m" / sub).mkdir(parents=True)
        (tmp_path / "m" / sub / "same.png").write_bytes(b"x")
    f = _write(tmp_path / "l.csv", "path,harmful\n/elsewhere/same.png,yes\n")
    labels = read_labels(f, options=LabelOptions(media=tmp_path / "m"))
    assert labels.rows == [] and "2 files named same.png" in labels.errors[0].message


def test_paths_outside_the_folder_need_media_or_the_flag(tmp_path: Path) -> None:
    from vhd.labels.files import LabelOptions

    (tmp_path / "labels").mkdir()
    f = _write(
        tmp_path / "labels" / "l.csv",
        f"path,harmful\n../outside.png,yes\n{tmp_path}/elsewhere.png,no\n~/home.png,yes\ninside.png,no\nsub/../in2.png,yes\n",
    )
    labels = read_labels(f)
    assert [r.line for r in labels.rows] == [5, 6]
    assert [e.line for e in labels.errors] == [2, 3, 4]
    for e in labels.errors:
        assert "outside" in e.message and "--media DIR" in e.message and "--allow-outside-paths" in e.message
    assert len(read_labels(f, options=LabelOptions(allow_outside_paths=True)).rows) == 5
    under_media = read_labels(f, options=LabelOptions(media=tmp_path))
    assert [r.line for r in under_media.rows] == [3, 5, 6]  # relative paths now resolve under --media


def test_rows_naming_samples_of_the_store_may_lead_anywhere(tmp_path: Path) -> None:
    from vhd.records import Sample
    from vhd.store.sqlite import Store

    far = tmp_path / "far" / "x.png"
    with Store(tmp_path / "run.db") as db:
        db.upsert_sample(Sample(id=ID_A, kind=Kind.IMAGE, path=str(far)))
        (tmp_path / "labels").mkdir()
        f = _write(
            tmp_path / "labels" / "l.csv",
            f"path,id,harmful\n{far},,yes\n/abs/y.png,{ID_A},no\n/abs/z.png,,no\n",
        )
        labels = read_labels(f, store=db)
    assert [r.line for r in labels.rows] == [2, 3] and [e.line for e in labels.errors] == [4]


def test_escaped_cells_read_back_as_written(tmp_path: Path) -> None:
    import csv

    from vhd.fileio import escape_cell

    reason = '=HYPERLINK("http://x")  a raised fist'
    f = tmp_path / "l.csv"
    with f.open("w", newline="") as fh:
        csv.writer(fh).writerows(
            [["path", "harmful", "reason", "keyword"], [escape_cell(v) for v in ("x.png", "yes", reason, "-knife")]]
        )
    assert "'=HYPERLINK" in f.read_text()
    row = read_labels(f).rows[0]
    assert row.reason == reason and row.keyword == "-knife"


def test_windows_paths_remapped_to_a_new_relative_to_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "media" / "sub").mkdir(parents=True)
    (tmp_path / "media" / "sub" / "x.png").write_bytes(b"x")
    (tmp_path / "lists").mkdir()
    f = _write(tmp_path / "lists" / "l.csv", "path,harmful\nC:\\Users\\author\\vhd\\sub\\x.png,yes\n")
    monkeypatch.chdir(tmp_path)
    labels = read_labels(f, options=LabelOptions(path_prefixes=(("C:\\Users\\author\\vhd\\", "media"),)))
    assert labels.errors == [] and labels.rows[0].path == (tmp_path / "media" / "sub" / "x.png").resolve()


def test_a_symbolic_link_leading_out_of_the_folder_is_outside(tmp_path: Path) -> None:
    (tmp_path / "secret.png").write_bytes(b"x")
    (tmp_path / "lists").mkdir()
    (tmp_path / "lists" / "link.png").symlink_to(tmp_path / "secret.png")
    (tmp_path / "lists" / "loop.png").symlink_to(tmp_path / "lists" / "loop.png")
    f = _write(tmp_path / "lists" / "l.csv", "path,harmful\nlink.png,yes\nloop.png,no\n")
    labels = read_labels(f)
    assert labels.rows == [] and "outside" in labels.errors[0].message and labels.errors[1].line == 3


def test_broken_csv_structure_is_reported_and_leaves_rows_out(tmp_path: Path) -> None:
    """A quote never closed swallows the rest of the file; a duplicated column hides one: both reported."""
    for name in ("a.jpg", "b.jpg"):
        (tmp_path / name).write_bytes(b"x")
    quote = tmp_path / "quote.csv"
    quote.write_text('path,harmful\na.jpg,yes\n"b.jpg,no\n' + "a.jpg,no\n" * 3000)
    labels = read_labels(quote)
    assert [r.path.name for r in labels.rows if r.path] == ["a.jpg"]
    assert [(e.line, "never closed" in e.message and "lines 3-3003" in e.message) for e in labels.errors] == [(3, True)]
    dup = tmp_path / "dup.csv"
    dup.write_text("path,harmful,harmful\na.jpg,yes,no\n")
    labels = read_labels(dup)
    assert labels.rows[0].harmful is True
    assert [(e.line, e.message) for e in labels.errors] == [
        (1, "column 'harmful' appears more than once; only the first one is read")
    ]
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(ConfigError, match="nested 100000 levels deep"):
        read_labels(deep)


def _spans(row) -> list[tuple[float, float]] | None:  # type: ignore[no-untyped-def]
    return None if row.segments is None else [(s.start_s, s.end_s) for s in row.segments]


def test_csv_segments_column(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "l.csv",
        "path,harmful,segments\n"
        'a.mp4,yes,"12.5-20; 1:02-1:10"\n'
        "b.mp4,no,\n"
        "c.mp4,yes,\n"
        "d.mp4,yes,20-10\n"
        'e.mp4,yes,"1-10;5-20"\n'
        "f.mp4,no,3-4\n"
        "g.png,yes,-1-2\n",
    )
    labels = read_labels(f)
    rows = {r.path.name: r for r in labels.rows if r.path is not None}
    assert _spans(rows["a.mp4"]) == [(12.5, 20.0), (62.0, 70.0)]
    assert rows["b.mp4"].segments is None and rows["c.mp4"].segments is None
    assert "segments" not in rows["a.mp4"].meta
    errors = {e.line: e.message for e in labels.errors}
    assert set(errors) == {5, 6, 7, 8}
    assert "span 20-10 ends before it starts" in errors[5]
    assert "spans 1-10 and 5-20 overlap" in errors[6]
    assert "labelled not harmful" in errors[7]
    assert "negative time" in errors[8]
    assert str(labels.errors[0]).startswith("row 5: span 20-10")


def test_json_and_jsonl_segments(tmp_path: Path) -> None:
    items = [
        {"path": "a.mp4", "harmful": True, "segments": [{"start_s": 1, "end_s": 2}, {"start_s": 4, "end_s": 6}]},
        {"path": "b.mp4", "harmful": False, "segments": []},
        {"path": "c.mp4", "harmful": True, "segments": [[3, 2]]},
        {"videoPath": "d.png", "decision": "yes", "segments": [[1, 2]], "kind": "image"},
        {"path": "e.mp4", "harmful": True, "segments": []},
    ]
    for name, text in (
        ("l.json", json.dumps(items)),
        ("l.jsonl", "\n".join(json.dumps(i) for i in items[:3]) + "\n\n{broken\n" + json.dumps(items[4]) + "\n"),
    ):
        labels = read_labels(_write(tmp_path / name, text))
        rows = {r.path.name: r for r in labels.rows if r.path is not None}
        assert _spans(rows["a.mp4"]) == [(1.0, 2.0), (4.0, 6.0)]
        assert rows["b.mp4"].segments == []
        errors = {e.line: e.message for e in labels.errors}
        assert "span 3-2 ends before it starts" in errors[3]
        if name == "l.jsonl":
            assert labels.format == "jsonl"
            assert set(errors) == {3, 5, 6} and "not a JSON object" in errors[5]
            assert "empty list on a harmful row" in errors[6]
        else:
            assert "empty list on a harmful row" in errors[5]
