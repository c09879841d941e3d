"""The sample record family and `Source`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from vhd.records import (
    Kind,
    LabelledSample,
    LabelRow,
    ManifestRow,
    MediaItem,
    Record,
    Sample,
    Source,
    UrlRow,
)

FAMILY = (ManifestRow, UrlRow, LabelRow, MediaItem, Sample, LabelledSample)
SHARED = ("id", "kind", "harmful", "source", "keyword", "generator", "split", "categories", "reason", "meta")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("real", Source.REAL),
        ("Real ", Source.REAL),
        ("SYNTHETIC", Source.SYNTHETIC),
        ("\tsynthetic\n", Source.SYNTHETIC),
        (Source.REAL, Source.REAL),
        ("", None),
        ("   ", None),
        (None, None),
    ],
)
def test_source_parse_is_lenient(text: object, expected: Source | None) -> None:
    assert Source.parse(text) is expected


@pytest.mark.parametrize("text", ["fake", "Realistic", "real synthetic", 5])
def test_source_parse_rejects_others_in_one_line(text: object) -> None:
    with pytest.raises(ValueError, match="source must be real or synthetic") as info:
        Source.parse(text)
    assert "\n" not in str(info.value) and repr(str(text).strip().lower()) in str(info.value)


def test_source_is_text() -> None:
    assert [s.value for s in Source] == ["real", "synthetic"]
    assert Source.REAL == "real" and f"{Source.SYNTHETIC}" == "synthetic" and str(Source.REAL) == "real"
    assert json.dumps({"source": Source.REAL}) == '{"source": "real"}'


@pytest.mark.parametrize("cls", FAMILY)
def test_every_member_shares_the_descriptive_fields(cls: type[Record]) -> None:
    assert issubclass(cls, Record)
    names = {f.name for f in dataclasses.fields(cls)}
    assert set(SHARED) <= names
    assert not {"label", "extra", "sample_id"} & names


def test_records_read_source_text_and_reject_unknown_sources() -> None:
    item = MediaItem(path=Path("/a.png"), kind=Kind.IMAGE, source="Synthetic")  # type: ignore[arg-type]
    assert item.source is Source.SYNTHETIC
    assert dataclasses.replace(item, source=None).source is None
    with pytest.raises(ValueError, match="source must be real or synthetic"):
        UrlRow(url="https://a.org/1.png", line=2, source="web")  # type: ignore[arg-type]


def test_sample_dict_keeps_the_label_key() -> None:
    sample = Sample(
        id="ab" * 32,
        kind=Kind.VIDEO,
        path="/m/v.mp4",
        source=Source.REAL,
        keyword="toy",
        harmful=True,
        frames=[0, 3],
        meta={"note": "x"},
    )
    d = sample.to_dict()
    assert list(d) == ["id", "kind", "path", "source", "keyword", "generator", "split", "label", "frames", "meta"]
    assert (d["kind"], d["source"], d["label"]) == ("video", "real", True)
    assert type(d["source"]) is str
    assert Sample.from_dict(d) == sample


def test_labelled_sample_is_the_bench_item_and_the_labelled_set_item() -> None:
    from vhd.bench.data import BenchItem
    from vhd.labels.sets import LabelledItem

    assert BenchItem is LabelledSample and LabelledItem is LabelledSample
    item = LabelledSample(
        id="cd" * 32, path=Path("/m/a.png"), kind=Kind.IMAGE, harmful=True, categories=["A"], source=Source.SYNTHETIC
    )
    assert item.to_dict() == {
        "id": "cd" * 32,
        "path": "/m/a.png",
        "kind": "image",
        "harmful": True,
        "categories": ["A"],
        "source": "synthetic",
        "split": None,
        "line": 0,
        "segments": None,
    }


def test_old_import_paths_name_the_family() -> None:
    from vhd.collect import UrlRow as CollectUrlRow
    from vhd.collect.urls import UrlRow as OldUrlRow
    from vhd.labels.files import LabelRow as OldLabelRow
    from vhd.media import MediaItem as MediaMediaItem
    from vhd.media.discover import MediaItem as OldMediaItem
    from vhd.media.manifest import ManifestRow as OldManifestRow
    from vhd.store import LabelRow as StoreLabelRow

    assert OldMediaItem is MediaMediaItem is MediaItem and OldManifestRow is ManifestRow
    assert OldUrlRow is CollectUrlRow is UrlRow and OldLabelRow is StoreLabelRow is LabelRow


def test_rows_carry_the_parsed_source() -> None:
    from vhd.collect.urls import parse_url_row
    from vhd.media.manifest import RowProblem, parse_row

    row = parse_row("line 2", {"path": "a.png", "source": " Real ", "label": "yes", "note": "n"})
    assert isinstance(row, ManifestRow)
    assert (row.source, row.harmful, row.meta) == (Source.REAL, True, {"note": "n"})
    bad = parse_row("line 3", {"path": "a.png", "source": "web"})
    assert isinstance(bad, RowProblem) and str(bad) == "line 3: source must be real or synthetic, got 'web'"
    url_row = parse_url_row(4, {"url": "https://a.org/x.png", "source": "SYNTHETIC", "crawler": "c"})
    assert isinstance(url_row, UrlRow) and (url_row.source, url_row.meta) == (Source.SYNTHETIC, {"crawler": "c"})
