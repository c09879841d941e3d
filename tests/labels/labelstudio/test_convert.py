"""Label Studio import: hostile exports, counting tasks and samples, the newest annotation.

Each case is a whole export file (bytes) run through ``vhd label --import-labelstudio``: a file
that cannot be a Label Studio export at all ends with one ``vhd: error:`` line and exit 2; a bad
task is named (by its Label Studio ``id``, else its position) with a one-line reason, the good
tasks beside it are imported, and the exit status is 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vhd.cli.main import main
from vhd.errors import ConfigError
from vhd.labels.labelstudio.convert import import_labelstudio
from vhd.labels.sets import import_labels, load_labelled_set


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store holding six image samples (labelled set ``seed``), and their ids in path order."""
    root = tmp_path_factory.mktemp("ls_hostile")
    lines = ["path,harmful"]
    for i in range(6):
        Image.new("RGB", (16, 16), (40 * i, 80, 200 - 30 * i)).save(root / f"img{i}.png")
        lines.append(f"img{i}.png,no")
    (root / "seed.csv").write_text("\n".join(lines) + "\n")
    store = root / "run.db"
    assert import_labels(root / "seed.csv", store=store, name="seed").imported == 6
    ids = [i.id for i in sorted(load_labelled_set(store, "seed"), key=lambda i: Path(i.path).name)]
    return store, ids


def harmful_result(*choices: Any) -> dict[str, Any]:
    return {"from_name": "harmful", "to_name": "media", "type": "choices", "value": {"choices": list(choices)}}


def task(tid: Any, sid: str, choice: str = "Harmful", **annotation: Any) -> dict[str, Any]:
    ann: dict[str, Any] = {"id": 100 + (tid if isinstance(tid, int) else 0), "result": [harmful_result(choice)]}
    ann.update(annotation)
    return {"id": tid, "data": {"sample_id": sid}, "annotations": [ann]}


def dump(tasks: Any) -> bytes:
    return json.dumps(tasks).encode()


SID = "@SID@"  # replaced by the first sample's id
SID2 = "@SID2@"  # the second sample's id


def deep(levels: int, inner: str = "") -> str:
    return "[" * levels + inner + "]" * levels


GOOD2 = json.dumps(task(2, SID2))

# (case, export bytes, exit status, text the output must hold)
CASES: list[tuple[str, bytes, int, str]] = [
    (
        "invalid UTF-8 in a value",
        b'[{"id": 1, "data": {"sample_id": "\xff\xfe"}}, ' + GOOD2.encode() + b"]",
        1,
        "task 1: data.sample_id holds bytes that are not UTF-8",
    ),
    ("invalid UTF-8 in the structure", b"\xff\xfe[]", 2, "not UTF-8"),
    ("not JSON", b"this is not json", 2, "is not JSON"),
    ("empty file", b"", 2, "is empty"),
    ("trailing garbage", b"[] []", 2, "is not JSON"),
    ("JSON object, not a list", b'{"tasks": []}', 2, "a list of tasks, not an object"),
    ("JSON null", b"null", 2, "a list of tasks, not null"),
    ("no tasks", b"[]", 2, "holds no tasks"),
    ("deep nesting, 10,000 levels", deep(10_000).encode(), 1, "item 1 of the list: nested"),
    (
        "deep nesting in one task",
        f'[{{"id": 1, "data": {{"x": {deep(10_000)}}}}}, {GOOD2}]'.encode(),
        1,
        "item 1 of the list: nested",
    ),
    (
        "deep nesting, object, 10,000 levels",
        ('{"a":' * 10_000 + "1" + "}" * 10_000).encode(),
        2,
        "a list of tasks, not an object",
    ),
    ("deep nesting, unclosed", b"[" * 10_000, 2, "is not JSON"),
    ("task a string", f'["a task", {GOOD2}]'.encode(), 1, "item 1 of the list: should be an object, not a string"),
    ("task a number", f"[7, {GOOD2}]".encode(), 1, "item 1 of the list: should be an object, not a number"),
    (
        "annotations a dict",
        dump([{"id": 1, "data": {"sample_id": SID}, "annotations": {"a": 1}}]),
        1,
        "task 1: annotations should be a list, not an object",
    ),
    (
        "result a string",
        dump([{"id": 1, "data": {"sample_id": SID}, "annotations": [{"result": "Harmful"}]}]),
        1,
        "task 1: annotations[0].result should be a list, not a string",
    ),
    (
        "result items numbers",
        dump([{"id": 1, "data": {"sample_id": SID}, "annotations": [{"result": [1, 2]}]}]),
        1,
        "task 1: annotations[0].result[0] should be an object, not a number",
    ),
    (
        "choices not a list",
        dump([task(1, SID, result=[{"from_name": "harmful", "value": {"choices": "Harmful"}}])]),
        1,
        "task 1: annotations[0].result[0].value.choices should be a list, not a string",
    ),
    (
        "choice a number",
        dump([task(1, SID, result=[harmful_result(1)])]),
        1,
        "task 1: annotations[0].result[0].value.choices[0] should be a string, not a number",
    ),
    (
        "value null",
        dump([task(1, SID, result=[{"from_name": "harmful", "value": None}])]),
        1,
        "task 1: its newest annotation (id 101) has no Harmful / Not harmful choice",
    ),
    (
        "value a list",
        dump([task(1, SID, result=[{"from_name": "harmful", "value": ["Harmful"]}])]),
        1,
        "task 1: annotations[0].result[0].value should be an object, not a list",
    ),
    (
        "textarea text a number",
        dump(
            [
                task(
                    1,
                    SID,
                    result=[
                        harmful_result("Harmful"),
                        {"from_name": "reason", "type": "textarea", "value": {"text": 5}},
                    ],
                )
            ]
        ),
        1,
        "task 1: annotations[0].result[1].value.text should be a string or a list of strings",
    ),
    (
        "huge integer id",
        b'[{"id": ' + b"1" + b"0" * 5000 + b', "data": {}}, ' + GOOD2.encode() + b"]",
        1,
        "item 1 of the list: id is a number of 5001 digits",
    ),
    (
        "huge integer annotation id",
        dump([task(1, SID)]).replace(b'"id": 101', b'"id": ' + b"9" * 5000),
        1,
        "task 1: annotations[0].id is a number of 5000 digits",
    ),
    (
        "huge integer in an unused field",
        dump([task(1, SID, lead_time=1)]).replace(b'"lead_time": 1', b'"lead_time": ' + b"9" * 5000),
        0,
        "1 task -> 1 sample(s)",
    ),
    ("id a boolean", dump([task(True, SID), task(2, SID2)]), 1, "item 1 of the list: id should be an integer"),
    ("id over 64 bits", dump([task(10**30, SID), task(2, SID2)]), 1, "item 1 of the list: id is outside 0 to 2**63"),
    ("id NaN", b'[{"id": NaN, "data": {}}, ' + GOOD2.encode() + b"]", 1, "item 1 of the list: id should be"),
    ("missing data", dump([{"id": 1, "annotations": []}, task(2, SID2)]), 1, "task 1: data is missing"),
    (
        "data a string",
        dump([{"id": 1, "data": "img0.png"}, task(2, SID2)]),
        1,
        "task 1: data should be an object, not a string",
    ),
    (
        "sample_id a number",
        dump([{"id": 1, "data": {"sample_id": 5}}, task(2, SID2)]),
        1,
        "task 1: data.sample_id should be a string, not a number",
    ),
    (
        "was_cancelled a string",
        dump([task(1, SID, was_cancelled="yes"), task(2, SID2)]),
        1,
        "task 1: annotations[0].was_cancelled should be true or false, not a string",
    ),
    (
        "created_at a number",
        dump([task(1, SID, created_at=1700000000), task(2, SID2)]),
        1,
        "task 1: annotations[0].created_at should be a string, not a number",
    ),
    (
        "completed_by a list",
        dump([task(1, SID, completed_by=[1]), task(2, SID2)]),
        1,
        "task 1: annotations[0].completed_by should be a user id or a user object",
    ),
    (
        "empty choices",
        dump([task(1, SID, result=[harmful_result()]), task(2, SID2)]),
        1,
        "task 1: its newest annotation (id 101) has no Harmful / Not harmful choice",
    ),
    (
        "unknown choice text",
        dump([task(1, SID, "Maybe"), task(2, SID2)]),
        1,
        "task 1: its newest annotation (id 101) chooses 'Maybe', not Harmful or Not harmful",
    ),
    (
        "both choices",
        dump([task(1, SID, result=[harmful_result("Harmful", "Not harmful")]), task(2, SID2)]),
        1,
        "chooses both Harmful and Not harmful",
    ),
    (
        "cancelled annotations only",
        dump([task(1, SID, was_cancelled=True), task(2, SID2)]),
        0,
        "1 task(s) not decided in Label Studio (no submitted annotation, or skipped there): not labelled, e.g. task 1",
    ),
    (
        "no annotations",
        dump([{"id": 1, "data": {"sample_id": SID}}, task(2, SID2)]),
        0,
        "1 task(s) not decided in Label Studio",
    ),
    (
        "duplicate task ids",
        dump([task(1, SID), task(1, SID2, "Not harmful")]),
        1,
        "item 2 of the list: repeats task id 1 of item 1",
    ),
    (
        "lone surrogate in the reason",
        dump(
            [
                task(
                    1,
                    SID,
                    result=[
                        harmful_result("Harmful"),
                        {"from_name": "reason", "type": "textarea", "value": {"text": ["\ud800"]}},
                    ],
                ),
                task(2, SID2),
            ]
        ),
        1,
        "task 1: annotations[0].result[1].value.text holds characters that are not valid text",
    ),
    (
        "NUL in the path",
        dump(
            [
                {"id": 1, "data": {"path": "/x\u0000y"}, "annotations": [{"result": [harmful_result("Harmful")]}]},
                task(2, SID2),
            ]
        ),
        1,
        "task 1: data.path holds a NUL character",
    ),
    (
        "names no sample",
        dump(
            [{"id": 1, "data": {"text": "x"}, "annotations": [{"result": [harmful_result("Harmful")]}]}, task(2, SID2)]
        ),
        1,
        "task 1: names no sample",
    ),
    (
        "NUL in a media URL",
        dump(
            [
                {
                    "id": 1,
                    "data": {"image": "/data/local-files/?d=a%00b"},
                    "annotations": [{"result": [harmful_result("Harmful")]}],
                },
                task(2, SID2),
            ]
        ),
        1,
        "task 1: its media URL names a path with a NUL",
    ),
    ("sample not in the store", dump([task(1, "0" * 64), task(2, SID2)]), 1, "task 1: its sample is not in the store"),
    ("UTF-8 byte order mark", b"\xef\xbb\xbf" + f"[{GOOD2}]".encode(), 0, "1 task -> 1 sample(s)"),
]


@pytest.mark.parametrize(("case", "content", "code", "says"), CASES, ids=[c[0] for c in CASES])
def test_hostile_export_is_named_not_a_traceback(
    seeded: tuple[Path, list[str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    content: bytes,
    code: int,
    says: str,
) -> None:
    store, ids = seeded
    export = tmp_path / "export.json"
    export.write_bytes(content.replace(SID2.encode(), ids[1].encode()).replace(SID.encode(), ids[0].encode()))
    got = main(["label", "--import-labelstudio", str(export), "--store", str(store), "--set", "hostile"])
    out, err = capsys.readouterr()
    assert got == code, out + err
    assert says in out + err, out + err
    assert "Traceback" not in out + err
    for line in (out + err).splitlines():
        assert len(line) < 300, line  # one short line each, no echo of hostile content
    if code == 1 and GOOD2 in content.decode("utf-8", "replace"):
        assert {i.id for i in load_labelled_set(store, "hostile")} >= {ids[1]}  # the good task beside it came in


def test_hostile_cases_cover_the_brief() -> None:
    assert len(CASES) >= 23


def test_missing_or_unreadable_export_is_one_line(
    seeded: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, _ = seeded
    for path in (tmp_path / "absent.json", tmp_path):  # missing; a directory
        assert main(["label", "--import-labelstudio", str(path), "--store", str(store)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("vhd: error: cannot read Label Studio export") and err.count("\n") == 1
    with pytest.raises(ConfigError, match="export the project from Label Studio again as JSON"):
        import_labelstudio(tmp_path / "absent.json", store=store)


def test_many_tasks_on_one_sample_count_as_tasks_and_one_sample(
    seeded: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """200,000 tasks naming one sample give one label (the newest decision), and the summary says so."""
    store, ids = seeded
    n, newest_at = 200_000, 1_234

    def one(i: int) -> str:
        newest = i == newest_at
        annotation = {"id": i, "created_at": f"2026-01-01T{12 if newest else 10}:00:00Z", "result": "@R@"}
        text = json.dumps({"id": i, "data": {"sample_id": ids[0]}, "annotations": [annotation]})
        return text.replace('"@R@"', json.dumps([harmful_result("Not harmful" if newest else "Harmful")]))

    export = tmp_path / "big.json"
    export.write_text("[" + ",\n".join(one(i) for i in range(1, n + 1)) + "]")
    assert main(["label", "--import-labelstudio", str(export), "--store", str(store), "--set", "big"]) == 0
    out = capsys.readouterr().out
    assert "200000 tasks -> 1 sample(s) (0 harmful)" in out, out
    assert "199999 task(s) named a sample another task named too: the newest decision counts" in out
    [label] = load_labelled_set(store, "big")
    assert label.id == ids[0] and not label.harmful  # task 1234, the newest, decides; not the last one


def ann(aid: int, choice: str, created: str | None = None, updated: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": aid, "was_cancelled": False, "result": [harmful_result(choice)]}
    if created is not None:
        out["created_at"] = created
    if updated is not None:
        out["updated_at"] = updated
    return out


H, N = "Harmful", "Not harmful"

# (case, annotations in file order, the label that must win); the newer by time has the lower id
NEWEST: list[tuple[str, list[dict[str, Any]], bool]] = [
    ("fractions of a second", [ann(2, H, "2026-01-01T10:00:00Z"), ann(1, N, "2026-01-01T10:00:00.5Z")], False),
    ("offsets", [ann(2, H, "2026-01-01T12:00:00+05:00"), ann(1, N, "2026-01-01T08:00:00Z")], False),
    ("updated_at over created_at", [ann(2, H, "2026-01-02T00:00:00Z"),
                                    ann(1, N, "2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z")], False),
    ("a tie: the higher id", [ann(3, N, "2026-01-01T10:00:00Z"), ann(9, H, "2026-01-01T10:00:00+00:00")], True),
    ("unparseable: the higher id", [ann(5, H, "01/02/2027"), ann(2, N, "2026-01-01T00:00:00Z")], True),
    ("no offset is UTC", [ann(2, H, "2026-01-01T10:30:00"), ann(1, N, "2026-01-01T11:00:00+02:00")], True),
]  # fmt: skip


def test_newest_annotation_by_parsed_time_then_id(seeded: tuple[Path, list[str]], tmp_path: Path) -> None:
    store, ids = seeded
    assert len(ids) >= len(NEWEST)
    tasks = [
        {"id": n, "data": {"sample_id": sid}, "annotations": anns}
        for n, (sid, (_, anns, _)) in enumerate(zip(ids, NEWEST, strict=False), start=1)
    ]
    (tmp_path / "export.json").write_text(json.dumps(tasks))
    res = import_labelstudio(tmp_path / "export.json", store=store, name="newest")
    got = {i.id: i.harmful for i in load_labelled_set(store, "newest")}
    assert [case for sid, (case, _, harmful) in zip(ids, NEWEST, strict=False) if got[sid] is not harmful] == []
    assert (res.tasks, res.decided, res.samples, res.skipped) == (len(NEWEST), len(NEWEST), len(NEWEST), [])


def test_long_list_of_bad_tasks_is_cut_short(
    seeded: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, _ = seeded
    (tmp_path / "export.json").write_text(json.dumps(["not a task"] * 25))
    assert main(["label", "--import-labelstudio", str(tmp_path / "export.json"), "--store", str(store)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 22 and out[19].startswith("item 20 of the list: should be an object")
    assert out[20:] == [
        "... and 5 more task(s) left out",
        f"25 tasks -> 0 sample(s) (0 harmful) in set 'labelstudio' of {store}; 25 task(s) left out",
    ]
