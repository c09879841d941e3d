from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from vhd.errors import VhdError
from vhd.records import Kind, Role, Status, Turn
from vhd.redaction import redact_command
from vhd.store import Store

if TYPE_CHECKING:
    from tests.store.conftest import Builder


def test_runs_are_recorded_and_finished(store: Store) -> None:
    first = store.start_run({"rounds": 2, "p": Path("/x")}, "h1", {"judge": "a:b"}, "ph", "vhd x")
    second = store.start_run({}, "h2", {}, "ph")
    store.finish_run(first, {"ok": 3})
    runs = store.runs()
    assert [r.id for r in runs] == [first, second]
    assert len(first) == 32 and int(first, 16) >= 0
    info = runs[0]
    assert info.config == {"rounds": 2, "p": "/x"}
    assert info.models == {"judge": "a:b"}
    assert (info.config_hash, info.prompt_hash, info.command) == ("h1", "ph", "vhd x")
    assert info.summary == {"ok": 3} and info.finished_at is not None
    assert info.vhd_version
    latest = store.latest_run()
    assert latest is not None and latest.id == second and latest.finished_at is None
    with pytest.raises(VhdError, match="not in store"):
        store.finish_run("nope", {})


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("vhd annotate --api-key sk-123 x/", "vhd annotate --api-key *** x/"),
        ("vhd x --token=abc --HF_TOKEN q", "vhd x --token=*** --HF_TOKEN ***"),
        ("vhd x --openai-key k --password=p", "vhd x --openai-key *** --password=***"),
        ("vhd x --keyword knife --max-tokens 500 my-key y", "vhd x --keyword knife --max-tokens 500 my-key y"),
        ("vhd x --header Bearer sk-abcdefgh1234 hf_abcdefghijk", "vhd x --header Bearer sk-*** hf-***"),
    ],
)
def test_command_secrets_are_redacted(store: Store, command: str, expected: str) -> None:
    assert redact_command(command) == expected
    store.start_run({}, "h", {}, "p", command)
    assert store.runs()[-1].command == expected


def test_upsert_keeps_newest_path_and_fills_unknown_fields(store: Store, build: Builder) -> None:
    s = build.sample(1, source="real", meta={"a": 1})
    store.upsert_sample(s)
    newer = build.sample(
        1,
        path="/elsewhere/1.png",
        source="synthetic",
        keyword="gun",
        harmful=True,
        frames=[0, 4],
        meta={"a": 2, "b": 3},
    )
    store.upsert_sample(newer)
    got = store.get_sample(s.id)
    assert got is not None
    assert got.path == "/elsewhere/1.png"
    assert got.source == "real"  # known: kept
    assert got.keyword == "gun" and got.harmful is True and got.frames == [0, 4]
    assert got.meta == {"a": 1, "b": 3}
    assert got.kind is Kind.IMAGE
    assert store.get_sample("0" * 64) is None


def test_find_samples_by_id_prefix_and_path(
    store: Store, build: Builder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    a, b = build.sample("a"), build.sample("b")
    store.upsert_sample(a)
    store.upsert_sample(b)
    assert [s.id for s in store.find_samples(a.id)] == [a.id]
    assert [s.id for s in store.find_samples(a.id[:6].upper())] == [a.id]
    assert store.find_samples(a.id[:5]) == []  # too short to be an id prefix
    assert [s.id for s in store.find_samples(b.path)] == [b.id]
    monkeypatch.chdir(tmp_path)
    assert [s.id for s in store.find_samples("media/b.png")] == [b.id]
    assert [s.id for s in store.find_samples("./media/../media/a.png")] == [a.id]
    assert store.find_samples("media/zzz.png") == []
    # a prefix shared by two samples returns both: the caller reports the ambiguity
    one, two = build.sample("x", id="abcdef" + "0" * 58), build.sample("y", id="abcdef" + "1" * 58)
    store.upsert_sample(one)
    store.upsert_sample(two)
    assert {s.id for s in store.find_samples("abcdef")} == {one.id, two.id}
    assert [s.id for s in store.find_samples("abcdef1")] == [two.id]


def test_save_and_get_annotation_round_trip(store: Store, build: Builder, run_id: str) -> None:
    s = build.sample(1)
    ann = build.annotation(s, run_id, categories=["Violence and Threats"])
    store.save_annotation(ann, s)
    got = store.get_annotation(s.id, "cfgA")
    assert got == ann
    assert store.get_annotation(s.id, "other") is None
    assert store.get_annotation("f" * 64) is None


def test_save_needs_known_sample_and_run(store: Store, build: Builder, run_id: str) -> None:
    s = build.sample(1)
    with pytest.raises(VhdError, match="pass the Sample"):
        store.save_annotation(build.annotation(s, run_id))
    with pytest.raises(VhdError, match="start_run"):
        store.save_annotation(build.annotation(s, "unknown-run"), s)
    assert store.get_sample(s.id) is None  # the failed transaction wrote nothing
    with pytest.raises(VhdError, match="matching sample"):
        store.save_annotation(build.annotation(s, run_id), build.sample(2))


def test_undecided_results_store_no_harmful(store: Store, build: Builder, run_id: str) -> None:
    s = build.sample(1)
    store.save_annotation(build.annotation(s, run_id, status=Status.ERROR, harmful=True, error="timeout"), s)
    got = store.get_annotation(s.id)
    assert got is not None and got.verdict.harmful is None and got.error == "timeout"


def test_final_ids_and_resume_semantics(store: Store, build: Builder, run_id: str) -> None:
    statuses = [Status.OK, Status.REFUSED, Status.UNPARSED, Status.TRUNCATED, Status.ERROR]
    samples = {st: build.sample(st.value) for st in statuses}
    for st, s in samples.items():
        harmful = None if st in (Status.UNPARSED, Status.TRUNCATED, Status.ERROR) else True
        store.save_annotation(build.annotation(s, run_id, status=st, harmful=harmful), s)
    ids = {st: s.id for st, s in samples.items()}
    final = {ids[Status.OK], ids[Status.REFUSED], ids[Status.UNPARSED], ids[Status.TRUNCATED]}
    assert store.final_ids("cfgA") == final
    assert store.final_ids("cfgA", retry_unparsed=True) == {ids[Status.OK], ids[Status.REFUSED]}
    assert store.final_ids("cfgB") == set()
    assert store.counts("cfgA") == {"ok": 1, "refused": 1, "unparsed": 1, "truncated": 1, "error": 1}
    assert store.counts("cfgB") == {"ok": 0, "refused": 0, "unparsed": 0, "truncated": 0, "error": 0}


def test_resave_replaces_old_result_and_its_turns(store: Store, build: Builder, run_id: str) -> None:
    s = build.sample(1)
    store.save_annotation(build.annotation(s, run_id, status=Status.ERROR, harmful=None, turns=build.turns(3)), s)
    run2 = store.start_run({}, "cfgA", {}, "p")
    retry = build.annotation(s, run2, turns=[Turn(Role.JUDGE, 1, "No, calm.")], harmful=False)
    store.save_annotation(retry)
    conn = store.conn
    assert conn.execute("SELECT COUNT(*) FROM annotations").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == 1
    assert store.get_annotation(s.id) == retry
    assert store.final_ids("cfgA") == {s.id}
    assert store.counts("cfgA")["error"] == 0


def test_iter_annotations_order_filters_and_latest(store: Store, build: Builder, run_id: str) -> None:
    b = build.sample("b", path="/m/b.png")
    a = build.sample("a", path="/m/a.png")
    c = build.sample("c", path="/m/c.png")
    for s in (b, a, c):
        store.save_annotation(build.annotation(s, run_id, reason=f"A-{s.path}"), s)
    run2 = store.start_run({}, "cfgB", {}, "p")
    store.save_annotation(build.annotation(b, run2, config_hash="cfgB", reason="B"))
    every = list(store.iter_annotations())
    assert [s.path for s, _ in every] == ["/m/a.png", "/m/b.png", "/m/c.png"]
    assert [a_.verdict.reason for _, a_ in every] == ["A-/m/a.png", "B", "A-/m/c.png"]
    assert all(a_.turns for _, a_ in every)
    only_a = list(store.iter_annotations(config_hash="cfgA"))
    assert [x.config_hash for _, x in only_a] == ["cfgA"] * 3
    assert [s.id for s, _ in store.iter_annotations(run_id=run2)] == [b.id]
    latest = store.get_annotation(b.id)
    assert latest is not None and latest.config_hash == "cfgB"
    assert store.remove_sample(c.id) and not store.remove_sample("0" * 64)
    assert [s.id for s, _ in store.iter_annotations(config_hash="cfgA")] == [a.id, b.id]


def test_iter_annotations_reads_in_chunks(store: Store, build: Builder, run_id: str) -> None:
    for n in range(600):
        s = build.sample(n, path=f"/m/{n:04d}.png")
        store.save_annotation(build.annotation(s, run_id, turns=build.turns(1)), s)
    got = list(store.iter_annotations(config_hash="cfgA"))
    assert [s.path for s, _ in got] == [f"/m/{n:04d}.png" for n in range(600)]
    assert all(len(a.turns) == 3 and a.sample_id == s.id for s, a in got)


def test_skips(store: Store, run_id: str) -> None:
    store.record_skip(run_id, "/x/broken.jpg", "truncated JPEG")
    store.record_skip(None, "/x/dup.jpg", "duplicate")
    assert [(k.path, k.reason) for k in store.skips(run_id)] == [("/x/broken.jpg", "truncated JPEG")]
    assert len(store.skips()) == 2


def test_closed_store_and_memory_store(tmp_path: Path, build: Builder) -> None:
    s = Store(tmp_path / "x.db")
    s.close()
    s.close()
    with pytest.raises(VhdError, match="closed"):
        s.runs()
    with Store(":memory:") as mem:
        run_id = mem.start_run({}, "h", {}, "p")
        sample = build.sample(1)
        mem.save_annotation(build.annotation(sample, run_id), sample)
        assert mem.final_ids("cfgA") == {sample.id}


def test_store_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with Store("rel/x.db") as s:
        assert s.path == Path(os.path.abspath("rel/x.db"))


def test_a_read_of_a_store_that_does_not_exist_fails_in_one_line_and_creates_nothing(tmp_path: Path) -> None:
    from vhd.errors import ConfigError

    typo = tmp_path / "typo.db"
    with Store(typo) as db:
        for read in (db.runs, lambda: list(db.iter_annotations()), db.latest_run):
            with pytest.raises(ConfigError, match=r"^no store at .*typo\.db: check the path") as err:
                read()
            assert "\n" not in str(err.value)
    assert not typo.exists() and not list(tmp_path.iterdir())  # nothing made, not even the folder's WAL files


def test_the_first_write_creates_the_store_and_create_true_makes_it_at_once(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "new.db"
    with Store(path) as db:
        assert not path.exists()
        run = db.start_run({}, "h", {}, "ph")  # a write: the file and its folder are made
        assert path.is_file() and [r.id for r in db.runs()] == [run]
    with Store(path) as db:  # an existing store reads at once
        assert [r.id for r in db.runs()] == [run]
    made = tmp_path / "made.db"
    with Store(made, create=True) as db:
        assert made.is_file() and db.runs() == []  # a caller about to fill it reads an empty store


def test_a_writing_call_handed_an_unmade_store_makes_it_first(tmp_path: Path) -> None:
    from vhd.store.sqlite import using_store

    path = tmp_path / "handed.db"
    with Store(path) as db:
        with using_store(db) as same:  # a reading call: nothing made
            assert same is db and not path.exists()
        with using_store(db, create=True) as same:  # a writing call (ingest...): its look-ups read an empty store
            assert same is db and path.is_file() and db.runs() == []
