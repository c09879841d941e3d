from __future__ import annotations

import csv
import importlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vhd.errors import ConfigError, MissingDependencyError
from vhd.export import export
from vhd.labels import read_labels
from vhd.records import Annotation, Kind, Role, Sample, Status, Turn, Verdict
from vhd.store import Store
from vhd.store.reads import AnnotationPage

export_mod = importlib.import_module("vhd.export")  # the package's `export` is the function
jsonl_mod = importlib.import_module("vhd.export.jsonl")

if TYPE_CHECKING:
    from tests.store.conftest import Builder

ARGS_2 = [
    "affirmativeDebater_argument_0",
    "affirmativeDebater_argument_1",
    "negativeDebater_argument_0",
    "negativeDebater_argument_1",
]


FLAT_COLUMNS = [
    "id", "kind", "path", "source", "keyword", "generator", "split", "label", "frames", "meta", "prompt", "seed",
    "credentials", "harmful", "reason", "categories", "score", "status", "refused", "calls", "prompt_tokens",
    "completion_tokens", "cost", "config_hash", "run_id", "error", "started_at", "finished_at", "decided_by", "turns",
    "segments",
]  # fmt: skip


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture
def filled(store: Store, build: Builder, run_id: str) -> Store:
    """Images: ok-yes, ok-no (missing 2nd negative), refused, unparsed, error; one ok video."""
    one_sided = [t for t in build.turns(2) if not (t.role is Role.NEGATIVE and t.round == 2)]
    cases = [
        ("a", Status.OK, True, "violence", ["Violence and Threats"], build.turns(2)),
        ("b", Status.OK, False, "lack of direct messaging", [], one_sided),
        ("c", Status.REFUSED, True, "refused: provider rejected", [], []),
        ("d", Status.UNPARSED, None, "", [], build.turns(2)),
        ("e", Status.ERROR, None, "", [], []),
    ]
    for name, status, harmful, reason, cats, turns in cases:
        s = build.sample(name, path=f"/data/img/{name}.png")
        ann = build.annotation(s, run_id, status=status, harmful=harmful, reason=reason, categories=cats, turns=turns)
        store.save_annotation(ann, s)
    v = build.sample("v", kind=Kind.VIDEO, path="/data/vid/v.mp4", frames=[0, 5, 9])
    cats = ["Substance Misuse", "Child Endangerment"]
    store.save_annotation(build.annotation(v, run_id, categories=cats, reason="drugs"), v)
    return store


def test_vhd11k_csv_images_columns_and_values(filled: Store, tmp_path: Path) -> None:
    out = tmp_path / "ann.csv"
    res = export(filled, "vhd11k-csv", out, kind="image")
    assert res.files == [out] and res.written == 3
    assert res.left_out_counts == {"status unparsed": 1, "status error": 1}
    rows = _rows(out)
    assert rows[0] == ["imagePath", "decision", "harmfulType", *ARGS_2, "categories"]
    assert res.root == Path("/data/img")  # by default paths are relative to the folder of the samples
    assert rows[1] == [
        "a.png", "yes", "violence",
        "aff says 1", "aff says 2", "neg says 1", "neg says 2", "Violence and Threats",
    ]  # fmt: skip
    assert rows[2] == [
        "b.png", "no", "lack of direct messaging",
        "aff says 1", "aff says 2", "neg says 1", "None", "",
    ]  # fmt: skip
    assert rows[3] == [
        "c.png", "yes", "refused: provider rejected", "None", "None", "None", "None", "",
    ]  # fmt: skip
    assert len(rows) == 4


def test_vhd11k_csv_splits_images_and_videos(filled: Store, tmp_path: Path) -> None:
    res = export(filled, "vhd11k-csv", tmp_path / "out" / "ann.csv")
    images, videos = tmp_path / "out" / "ann_images.csv", tmp_path / "out" / "ann_videos.csv"
    assert res.files == [images, videos] and res.written == 4
    assert not (tmp_path / "out" / "ann.csv").exists()
    vrows = _rows(videos)
    assert vrows[0][0] == "videoPath" and vrows[0][-1] == "categories"
    assert vrows[1][:3] == ["vid/v.mp4", "yes", "drugs"]  # relative to /data, the folder of both kinds
    assert vrows[1][-1] == "Substance Misuse;Child Endangerment"
    assert _rows(images)[0][0] == "imagePath"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [images.name, videos.name]


def test_vhd11k_csv_rounds_follow_the_longest_debate(store: Store, build: Builder, run_id: str, tmp_path: Path) -> None:
    s3, s1 = build.sample(1, path="/m/1.png"), build.sample(2, path="/m/2.png")
    store.save_annotation(build.annotation(s3, run_id, turns=build.turns(3)), s3)
    store.save_annotation(build.annotation(s1, run_id, turns=build.turns(1)), s1)
    rows = _rows(export(store, "vhd11k-csv", tmp_path / "x.csv").files[0])
    assert rows[0][3:9] == [f"affirmativeDebater_argument_{i}" for i in range(3)] + [
        f"negativeDebater_argument_{i}" for i in range(3)
    ]
    assert rows[2][3:9] == ["aff says 1", "None", "None", "neg says 1", "None", "None"]


def _exported_paths(fmt: str, files: list[Path]) -> list[str]:
    """The sample paths an export wrote, in file order."""
    if fmt == "vhd11k-csv":
        return [r[0] for f in files for r in _rows(f)[1:]]
    if fmt == "jsonl":
        return [json.loads(line)["path"] for f in files for line in f.read_text().splitlines()]
    import pyarrow.parquet as pq

    return [r["path"] for f in files for r in pq.read_table(f).to_pylist()]


@pytest.mark.parametrize("fmt", ["vhd11k-csv", "jsonl", "parquet"])
@pytest.mark.parametrize("kind", [None, Kind.IMAGE])
def test_paths_relative_to_a_folder(filled: Store, tmp_path: Path, fmt: str, kind: Kind | None) -> None:
    # --relative-to used to be ignored unless --kind left some row out of a page
    images = ["img/a.png", "img/b.png", "img/c.png"]
    res = export(filled, fmt, tmp_path / "r.out", kind=kind, relative_to="/data")
    assert res.root == Path("/data")
    assert _exported_paths(fmt, res.files) == (images if kind else [*images, "vid/v.mp4"])
    res = export(filled, fmt, tmp_path / "r.out", kind=kind, relative_to="/data/img")
    assert _exported_paths(fmt, res.files)[:3] == ["a.png", "b.png", "c.png"]
    res = export(filled, fmt, tmp_path / "r.out", kind=kind, absolute_paths=True)
    assert res.root is None and all(p.startswith("/data/") for p in _exported_paths(fmt, res.files))
    res = export(filled, fmt, tmp_path / "r.out", kind=kind)  # default: the samples' common folder
    assert res.root == Path("/data/img" if kind else "/data")
    assert _exported_paths(fmt, res.files) == (["a.png", "b.png", "c.png"] if kind else [*images, "vid/v.mp4"])
    with pytest.raises(ConfigError, match="contradict"):
        export(filled, fmt, tmp_path / "r.out", relative_to="/data", absolute_paths=True)


def test_the_default_root_follows_the_filters(store: Store, build: Builder, run_id: str, tmp_path: Path) -> None:
    one = build.sample("1", path="/home/alice/data/x/1.png")
    two = build.sample("2", path="/home/alice/data/y/deep/2.png")
    store.save_annotation(build.annotation(one, run_id), one)
    store.save_annotation(build.annotation(two, run_id), two)
    assert store.annotated_path_root() == "/home/alice/data"
    other = store.start_run({}, "cfgB", {}, "p")
    store.save_annotation(build.annotation(two, other, config_hash="cfgB"), two)
    assert store.annotated_path_root(config_hash="cfgB") == "/home/alice/data/y/deep"
    assert store.annotated_path_root(run_id=other) == "/home/alice/data/y/deep"
    assert store.annotated_path_root(kind=Kind.VIDEO) is None
    res = export(store, "jsonl", tmp_path / "a.jsonl", config_hash="cfgB")
    assert _exported_paths("jsonl", res.files) == ["2.png"]
    assert "alice" not in (tmp_path / "a.jsonl").read_text()


def test_jsonl_records(filled: Store, tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    res = export(filled, "jsonl", out)
    recs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert res.written == len(recs) == 4 and res.left_out_counts == {
        "status unparsed": 1,
        "status error": 1,
    }
    first = recs[0]
    assert list(first) == FLAT_COLUMNS  # flat: no column named `sample` (it would hide DataFrame.sample)
    assert first["decided_by"] is None  # annotated without a cascade
    assert first["path"] == "img/a.png" and first["kind"] == "image" and first["meta"] == "{}"
    verdict = {k: first[k] for k in ("harmful", "reason", "categories", "score", "status", "refused")}
    assert verdict == {
        "harmful": True,
        "reason": "violence",
        "categories": ["Violence and Threats"],
        "score": 0.75,
        "status": "ok",
        "refused": False,
    }
    usage = {k: first[k] for k in ("calls", "prompt_tokens", "completion_tokens", "cost")}
    assert usage == {"calls": 5, "prompt_tokens": 100, "completion_tokens": 40, "cost": 0.01}
    assert [t["role"] for t in first["turns"]] == ["affirmative", "negative"] * 2 + ["judge"]
    assert recs[-1]["frames"] == [0, 5, 9]
    everything = export(filled, "jsonl", out, include_unparsed=True)
    assert everything.written == 6 and everything.left_out == []
    statuses = [json.loads(x)["status"] for x in out.read_text().splitlines()]
    assert sorted(statuses) == ["error", "ok", "ok", "ok", "refused", "unparsed"]


def test_parquet_reads_back(filled: Store, build: Builder, run_id: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    s = build.sample("meta", path="/data/img/m.png", meta={"x": 1, "y": [1, 2]})
    filled.save_annotation(build.annotation(s, run_id, score=None), s)
    out = tmp_path / "a.parquet"
    res = export(filled, "parquet", out, include_unparsed=True, absolute_paths=True)
    table = pq.read_table(out)
    assert table.num_rows == res.written == 7
    assert table.column_names == FLAT_COLUMNS
    rows = table.to_pylist()
    by_path = {r["path"]: r for r in rows}
    m = by_path["/data/img/m.png"]
    assert json.loads(m["meta"]) == {"x": 1, "y": [1, 2]}
    assert m["score"] is None and m["turns"][0]["role"] == "affirmative"
    assert by_path["/data/img/e.png"]["harmful"] is None
    assert by_path["/data/vid/v.mp4"]["frames"] == [0, 5, 9]
    try:
        datasets = importlib.import_module("datasets")
    except ImportError:
        return  # optional: checked only where the datasets package is installed
    ds = datasets.Dataset.from_parquet(str(out))
    assert len(ds) == 7


def test_empty_store_exports(store: Store, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    assert _rows(export(store, "vhd11k-csv", tmp_path / "e.csv").files[0]) == [
        ["imagePath", "decision", "harmfulType", *ARGS_2[:1], *ARGS_2[2:3], "categories"]
    ]
    assert export(store, "jsonl", tmp_path / "e.jsonl").written == 0
    assert (tmp_path / "e.jsonl").read_text() == ""
    export(store, "parquet", tmp_path / "e.parquet")
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0


def test_missing_pyarrow_names_the_extra(filled: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(MissingDependencyError, match=r"vhd\[parquet\]"):
        export(filled, "parquet", tmp_path / "a.parquet")
    assert not (tmp_path / "a.parquet").exists()


def test_bad_format_or_kind(filled: Store, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="jsonl"):
        export(filled, "xml", tmp_path / "a.xml")
    with pytest.raises(ConfigError, match="image or video"):
        export(filled, "jsonl", tmp_path / "a.jsonl", kind="audio")


@pytest.mark.parametrize("path", ["fast", "records"])
def test_interrupted_export_keeps_old_file(
    filled: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    out = tmp_path / "a.jsonl"
    out.write_text("old\n")
    out.chmod(0o640)
    calls = 0
    name = "page_cells" if path == "fast" else "record"
    real = getattr(jsonl_mod, name)
    real_pages = filled.iter_annotation_pages

    def failing(*args: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("disk on fire")
        return real(*args)

    def one_row_pages(*args: Any, **kw: Any) -> Iterator[AnnotationPage]:
        return (p.with_rows([r]) for p in real_pages(*args, **kw) for r in p.rows)

    monkeypatch.setattr(filled, "iter_annotation_pages", one_row_pages)  # the first row written before the failure
    monkeypatch.setattr(jsonl_mod, name, failing)
    fmt = "jsonl" if path == "fast" else "records"  # a plugin format: the records of each row
    monkeypatch.setitem(export_mod.EXPORT_FORMATS.builtin, "records", "tests.export.test_pages:JsonlRecords")
    with pytest.raises(RuntimeError):
        export(filled, fmt, out)
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []
    monkeypatch.setattr(jsonl_mod, name, real)
    export(filled, fmt, out)
    assert out.stat().st_mode & 0o777 == 0o640 and out.read_text() != "old\n"


def test_vhd11k_round_trip_through_read_labels(filled: Store, tmp_path: Path) -> None:
    res = export(filled, "vhd11k-csv", tmp_path / "rt.csv", absolute_paths=True)
    decided = {s.path: a for s, a in filled.iter_annotations() if a.verdict.status in (Status.OK, Status.REFUSED)}
    seen = 0
    for f in res.files:
        labels = read_labels(f, store=filled)  # the store's own samples may lie anywhere on disk
        assert labels.errors == [] and labels.format == "vhd11k-csv"
        for row in labels:
            ann = decided[str(row.path)]
            want = ann.verdict.status is Status.REFUSED or bool(ann.verdict.harmful)
            assert row.harmful is want
            assert row.reason == (ann.verdict.reason or None)
            assert row.categories == ann.verdict.categories
            assert row.meta["affirmativeDebater_argument_0"] in ("aff says 1", "None")
            seen += 1
    assert seen == len(decided) == 4


def test_turn_text_with_csv_specials_survives(store: Store, build: Builder, run_id: str, tmp_path: Path) -> None:
    s = build.sample(1, path="/m/1.png")
    text = 'line one,\n"quoted", and\r\nmore; é 漢字'
    turns = [Turn(Role.AFFIRMATIVE, 1, text), Turn(Role.NEGATIVE, 1, "n"), Turn(Role.JUDGE, 1, "Yes")]
    store.save_annotation(build.annotation(s, run_id, reason='a, "b"; c', turns=turns), s)
    row = read_labels(export(store, "vhd11k-csv", tmp_path / "s.csv").files[0], store=store).rows[0]
    assert row.meta["affirmativeDebater_argument_0"] == text
    assert row.reason == 'a, "b"; c'


_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40)


@settings(max_examples=30, deadline=None)
@given(
    cases=st.lists(
        st.tuples(st.booleans(), _TEXT.map(str.strip), _TEXT, st.lists(_TEXT.map(str.strip), max_size=2)),
        min_size=1,
        max_size=4,
    )
)
def test_round_trip_any_text(cases: list[tuple[bool, str, str, list[str]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.db") as store:
        run = store.start_run({}, "cfgA", {}, "p")
        want = {}
        for i, (harmful, reason, argument, cats) in enumerate(cases):
            cats = [c for c in cats if c and ";" not in c and len(c) > 1]
            s = Sample(id=f"{i:064x}", kind=Kind.IMAGE, path=f"{tmp}/m/{i}.png")
            turns = [Turn(Role.AFFIRMATIVE, 1, argument), Turn(Role.JUDGE, 1, "x")]
            verdict = Verdict(harmful=harmful, reason=reason, categories=cats)
            store.save_annotation(Annotation(s.id, run, "cfgA", verdict, turns), s)
            want[str(Path(s.path).resolve())] = (harmful, reason or None, argument if argument.strip() else "None")
        res = export(store, "vhd11k-csv", Path(tmp) / "o.csv")
        labels = read_labels(res.files[0], root=res.root)
        assert labels.errors == []
        got = {str(r.path): (r.harmful, r.reason, r.meta["affirmativeDebater_argument_0"]) for r in labels}
        assert got == want
