from __future__ import annotations

import json
from pathlib import Path

import pytest

from vhd.errors import ConfigError
from vhd.records import Kind
from vhd.records import parse_yes_no as parse_bool
from vhd.store import CATEGORIES, read_labels
from vhd.store.labels import normalize_category

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
    labels = read_labels(f)
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
        "ok.png,,no,,,\n"  # 6 duplicate path
        f",{ID_A},no,,,\n"  # 7
        f",{ID_A.upper()},yes,,,\n"  # 8 duplicate id
        ",nothex,yes,,,\n"  # 9
        "s.png,,yes,fake,,\n"  # 10
        "k.png,,yes,,audio,\n"  # 11
        "c.png,,yes,,,K\n"  # 12
        "\n"  # blank line: ignored
        "last.png,,true,,,\n",  # 14
    )
    labels = read_labels(f)
    assert [r.line for r in labels.rows] == [2, 7, 14]
    errors = {e.line: e.message for e in labels.errors}
    assert sorted(errors) == [3, 4, 5, 6, 8, 9, 10, 11, 12]
    assert "missing harmful" in errors[3]
    assert "perhaps" in errors[4]
    assert "no path or id" in errors[5]
    assert errors[6] == "duplicate path, first given in row 2"
    assert errors[8] == "duplicate id, first given in row 7"
    assert "sha256" in errors[9] and "real or synthetic" in errors[10]
    assert "image or video" in errors[11] and "A-J" in errors[12]
    assert str(labels.errors[0]).startswith("row 3: ")


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
