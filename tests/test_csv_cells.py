"""Every CSV vhd writes escapes text cells a spreadsheet would run as formulas (OWASP CSV injection).

A cell of model text, a path or a keyword that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return gets a leading ``'``; numbers we format are never touched; vhd's own readers
give back the original text (`vhd.fileio.unescape_cell`).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.store.conftest import Builder
from vhd.fileio import unescape_cell
from vhd.records import Kind, Role, Turn
from vhd.store import Store

FORMULAS = ('=HYPERLINK("http://x","y")', "@SUM(A1:A9)", "+1+1", "-2+3", "\t=1")


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def cells(text: str) -> list[str]:
    return [c for r in rows(text) for c in r]


def assert_safe(text: str, originals: tuple[str, ...] | list[str] = FORMULAS) -> None:
    """No cell starts like a formula, and each original comes back through `unescape_cell`."""
    found = cells(text)
    bad = [c for c in found if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert not bad, bad
    back = {unescape_cell(c) for c in found}
    for original in originals:
        assert original in back, (original, found)


def test_vhd11k_export_escapes_reasons_arguments_and_paths(tmp_path: Path) -> None:
    from vhd.export import export

    build = Builder(tmp_path)
    with Store(tmp_path / "s.db") as st:
        run = st.start_run({}, "cfg", {}, "p")
        for i, text in enumerate(FORMULAS):
            s = build.sample(i, path=f"{text}{i}.png")
            turns = [
                Turn(Role.AFFIRMATIVE, 1, text, 1, 1, 0.1, False, "x"),
                Turn(Role.NEGATIVE, 1, f"-{i} no", 1, 1, 0.1, False, "x"),
                Turn(Role.JUDGE, 1, "Yes, x.", 1, 1, 0.1, False, "x"),
            ]
            st.save_annotation(build.annotation(s, run, reason=text, turns=turns, categories=["@cat"]), s)
        export(st, "vhd11k-csv", tmp_path / "a.csv", kind=Kind.IMAGE)
        export(st, "jsonl", tmp_path / "a.jsonl")
    text = (tmp_path / "a.csv").read_text()
    assert_safe(text, [*FORMULAS, "-0 no", "@cat", *(f"{t}{i}.png" for i, t in enumerate(FORMULAS))])
    assert rows(text)[1][1] == "yes"
    # JSON Lines keeps the raw text
    reasons = [json.loads(line)["reason"] for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert sorted(reasons) == sorted(FORMULAS)


def test_stats_tables_escape_text_not_numbers() -> None:
    from vhd.categorize.stats_files import to_csv

    text = to_csv(["reason", "count"], [[f, n] for n, f in enumerate(FORMULAS)])
    assert_safe(text, FORMULAS)
    assert rows(to_csv(["reason", "count"], [["-0.5 share", -3]]))[1] == ["'-0.5 share", "-3"]  # numbers stay


def test_review_queue_escapes_paths_and_reasons() -> None:
    from vhd.compare.review_queue import ReviewItem, ReviewQueue

    items = [
        ReviewItem("id1", "=evil.png", "image", True, 0.5, judge_reason="@SUM(A1)", votes={"judge": True}),
        ReviewItem("id2", "-x.png", "image", None, None, judge_reason="+1", reasons=["=reason"]),
    ]
    text = ReviewQueue(store="s", config_hash="c", items=items).to_csv()
    assert_safe(text, ["=evil.png", "@SUM(A1)", "-x.png", "+1", "=reason"])
    assert rows(text)[1][5] == "0.5000"


def test_bench_tables_escape_labels_keep_negative_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    from vhd.bench import tables

    text = tables.to_csv(["kappa"], [[-0.25], [0.5]], ["=cmd|' /C calc'!A0", "@det"])
    assert rows(text)[1] == ["'=cmd|' /C calc'!A0", "-0.25"]
    assert rows(text)[2] == ["'@det", "0.50"]
    row = {"detector": "=det", "group": "all", "metric": "-kappa", "value": -0.1, "low": None, "high": 0.2, "n": 3}
    monkeypatch.setattr(tables, "long_rows", lambda results: [row])
    long = rows(tables.long_csv([]))
    assert long[1] == ["'=det", "all", "'-kappa", "-0.1", "n/a", "0.2", "3"]


def test_compare_csv_escapes_config_names(tmp_path: Path) -> None:
    from vhd.compare.report import write_outputs
    from vhd.compare.result import CompareResult, ConfigResult
    from vhd.compare.runner import score_config
    from vhd.compare.single import SampleOutcome
    from vhd.labels.sets import LabelledItem

    item = LabelledItem(id="a" * 64, path=tmp_path / "x.png", harmful=True)
    conf = ConfigResult("=HYPERLINK(1)", "@family", {}, [[SampleOutcome(True, 0.9, 10, 2, 1)]])
    score_config(conf, [True], resamples=10)
    result = CompareResult(out=tmp_path / "c", items=[item], configs=[conf])
    (tmp_path / "c").mkdir()
    write_outputs(result)
    text = (tmp_path / "c" / "compare.csv").read_text()
    assert rows(text)[1][:2] == ["'=HYPERLINK(1)", "'@family"]
    header, first = rows(text)[0], rows(text)[1]
    assert first[header.index("accuracy")] == "1.0"


def test_icl_examples_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from PIL import Image

    from vhd.debate.icl import load_examples
    from vhd.icl.files import write_examples
    from vhd.media.load import MediaSettings

    monkeypatch.chdir(tmp_path)
    Image.new("RGB", (32, 32), (200, 10, 10)).save(tmp_path / "=src.png")
    Image.new("RGB", (32, 32), (10, 10, 200)).save(tmp_path / "@src.png")
    examples = [
        {"sample_id": "b" * 64, "path": "=src.png", "answer": "No, a red square."},
        {"sample_id": "c" * 64, "path": "@src.png", "answer": "Yes, a blue square."},
    ]
    write_examples(tmp_path / "icl", examples)
    text = (tmp_path / "icl" / "examples.csv").read_text()
    assert_safe(text, ["=src.png", "@src.png"])
    loaded = load_examples(tmp_path / "icl", MediaSettings())
    assert [e.answer for e in loaded] == ["No, a red square.", "Yes, a blue square."]
    # the reader gives back what an escaping writer was given
    (tmp_path / "mine").mkdir()
    Image.new("RGB", (32, 32), (10, 200, 10)).save(tmp_path / "mine" / "=a.png")
    (tmp_path / "mine" / "examples.csv").write_text('path,answer\n\'=a.png,"Yes, a green square."\n')
    [mine] = load_examples(tmp_path / "mine", MediaSettings())
    assert mine.answer == "Yes, a green square."


def test_dedup_report_escapes_paths_and_reasons(tmp_path: Path) -> None:
    from vhd.curate.dedup import DedupResult, write_dedup_report

    result = DedupResult(threshold=10, keep="largest")
    result.unreadable = [("=cmd.png", "@not an image"), ("+x.png", "-bad")]
    text = write_dedup_report(result, tmp_path / "r.csv").read_text()
    assert_safe(text, ["=cmd.png", "@not an image", "+x.png", "-bad"])


def test_split_csv_escapes_paths(tmp_path: Path) -> None:
    from vhd.curate.split import SplitResult, write_split_csv

    build = Builder(tmp_path)
    with Store(tmp_path / "s.db") as st:
        s, t = build.sample(1, path="=1+1.png"), build.sample(2, path="@SUM(A1).png")
        st.upsert_sample(s)
        st.upsert_sample(t)
        split = SplitResult(assignments={s.id: "train", t.id: "test"})
        text = write_split_csv(st, split, tmp_path / "split.csv").read_text()
    assert rows(text)[1:] == [[s.id, "'=1+1.png", "train", ""], [t.id, "'@SUM(A1).png", "test", ""]]


def test_fetch_report_manifest_and_url_lists_escape_and_read_back(tmp_path: Path) -> None:
    from vhd.collect.fetch_settings import FetchOutcome
    from vhd.collect.fetchlog import write_manifest, write_report
    from vhd.collect.urls import read_url_list, write_url_list
    from vhd.records import UrlRow

    bad = FetchOutcome(
        url="https://example.com/a.jpg", line=2, status="failed", error="http-404", reason="@gone",
        keyword="=cmd", http_status=404, attempts=1, meta={"note": "+1"},
    )  # fmt: skip
    text = write_report([bad], tmp_path / "report.csv").read_text()
    assert_safe(text, ["@gone", "=cmd"])
    assert "404" in rows(text)[1]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "f.jpg").write_bytes(b"x")
    ok = FetchOutcome(
        url="https://example.com/b.jpg", line=3, status="ok", sha256="c" * 64, path="f.jpg", kind="image",
        keyword="-knife", meta={"title": "=HYPERLINK(1)"},
    )  # fmt: skip
    manifest = write_manifest(tmp_path / "out", {"b": ok}).read_text()
    assert_safe(manifest, ["-knife", "=HYPERLINK(1)"])
    url_rows = [
        UrlRow(url="https://example.com/1.jpg", line=2, keyword="=cmd", meta={"title": "@SUM(1)"}),
        UrlRow(url="https://example.com/2.jpg", line=3, keyword="-knife", meta={"title": "'=quoted"}),
    ]
    listed = write_url_list(url_rows, tmp_path / "urls.csv").read_text()
    assert_safe(listed, ["=cmd", "@SUM(1)", "-knife", "'=quoted"])
    back = read_url_list(tmp_path / "urls.csv")
    assert not back.problems
    assert [(r.keyword, r.meta) for r in back.rows] == [
        ("=cmd", {"title": "@SUM(1)"}),
        ("-knife", {"title": "'=quoted"}),
    ]


def test_keywords_csv_escapes_and_reads_back(tmp_path: Path) -> None:
    from vhd.collect.keywords import Keyword, format_keywords, load_keywords

    words = [Keyword("=cmd", True), Keyword("@gun", True), Keyword("-toy", False), Keyword("knife", True)]
    text = format_keywords(words, "csv")
    assert_safe(text, ["=cmd", "@gun", "-toy"])
    (tmp_path / "k.csv").write_text(text)
    assert load_keywords(tmp_path / "k.csv") == words


def test_frames_report_escapes_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import vhd.curate.frames as frames
    from vhd.cli.main import main

    def fake(*args: Any, on_skip: Any = None, **kwargs: Any) -> frames.FramesResult:
        # like the real one: every skip goes to the callback (the report), the result keeps a few
        on_skip("=cmd.mp4", "@unsupported")
        return frames.FramesResult(skipped=[("=cmd.mp4", "@unsupported")])

    monkeypatch.setattr(frames, "extract_frames", fake)
    report = tmp_path / "r.csv"
    main(["frames", str(tmp_path), "--out", str(tmp_path / "o"), "--report", str(report), "--no-progress"])
    capsys.readouterr()
    assert_safe(report.read_text(), ["=cmd.mp4", "@unsupported"])
