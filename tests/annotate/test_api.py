"""End-to-end tests of `vhd.annotate` and `vhd annotate`: store, resume, exit codes, refusals."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

import vhd
from tests.servers.chat_server import ChatServer
from vhd.annotate.options import RunOptions
from vhd.cli.main import main
from vhd.errors import BackendUnavailableError, ConfigError
from vhd.records import Status
from vhd.store.sqlite import Store


def make_images(folder: Path, n: int, size: int = 48) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = folder / f"img_{i:03d}.png"
        im = Image.new("RGB", (size, size), ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256))
        im.putpixel((i % size, (i // size) % size), (255, 255, 255))
        im.save(p)
        paths.append(p)
    return paths


def write_config(path: Path, base_url: str, **debate: object) -> Path:
    lines = ["[backends.openai]", f'base_url = "{base_url}"', "backoff_base = 0.01", "max_retries = 2"]
    if debate:
        lines.append("[debate]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in debate.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def judge_reply(body: dict) -> str:
    system = body["messages"][0]["content"]
    system = system if isinstance(system, str) else " ".join(p.get("text", "") for p in system)
    if "judge" in system:
        return "No, plain colours."
    return "1. A reason.\n2. Another."


def annotate_command(media: Path, db: Path, cfg: Path) -> list[str]:
    """`vhd annotate` as a subprocess against the test server, two samples in flight."""
    return [sys.executable, "-m", "vhd", "annotate", str(media), "--model", "openai:m", "--store", str(db),
            "--config", str(cfg), "--concurrency", "2", "--no-progress"]  # fmt: skip


def kill_after_annotations(proc: subprocess.Popen[bytes], db: Path, n: int, timeout: float = 60) -> int:
    """SIGKILL an annotate subprocess once ``n`` annotations are in its store; how many there were."""
    deadline = time.time() + timeout
    done = 0
    while time.time() < deadline and done < n:
        time.sleep(0.1)
        if db.exists():
            with Store(db) as s:
                done = sum(1 for _ in s.iter_annotations())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return done


def test_annotate_scripted_end_to_end(tmp_path: Path) -> None:
    make_images(tmp_path / "media", 4)
    (tmp_path / "media" / "notes.txt").write_text("not media")
    (tmp_path / "media" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    store = tmp_path / "run.db"
    s = vhd.annotate([tmp_path / "media"], model="scripted:demo", store=store, concurrency=3)
    assert (s.found, s.annotated, s.unharmful, s.errors) == (4, 4, 4, 0)
    assert s.skipped == 2 and {Path(p).name for p, _ in s.skip_reasons} == {"notes.txt", "broken.jpg"}
    assert s.usage.calls == 20 and s.exit_code() == 0 and s.exit_code(strict=True) == 1
    with Store(store) as db:
        rows = list(db.iter_annotations())
        assert len(rows) == 4
        for sample, ann in rows:
            assert ann.verdict.status is Status.OK and ann.verdict.harmful is False
            assert len(ann.turns) == 5 and ann.verdict.score is not None
            assert ann.config_hash and ann.run_id == s.run_id
            assert sample.id == __import__("hashlib").sha256(Path(sample.path).read_bytes()).hexdigest()
    # same command again: nothing to do, no calls
    again = vhd.annotate([tmp_path / "media"], model="scripted:demo", store=store)
    assert (again.already_done, again.annotated, again.usage.calls) == (4, 0, 0)
    # a different configuration (rounds) is a different annotation
    third = vhd.annotate([tmp_path / "media"], model="scripted:demo", store=store, rounds=1)
    assert third.annotated == 4 and third.usage.calls == 12


def test_same_content_twice_is_annotated_once(tmp_path: Path) -> None:
    [p] = make_images(tmp_path / "a", 1)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "copy.png").write_bytes(p.read_bytes())
    s = vhd.annotate([tmp_path / "a", tmp_path / "b"], model="scripted:demo", store=tmp_path / "s.db")
    assert (s.found, s.annotated, s.duplicates) == (1, 1, 1)


def test_openai_backend_end_to_end_with_retries_and_refusal(tmp_path: Path) -> None:
    make_images(tmp_path / "media", 3)
    with ChatServer(reply=judge_reply) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        srv.fail_next(["429", "500"])
        s = vhd.annotate([tmp_path / "media"], model="openai:test-model", store=tmp_path / "r.db", config=cfg)
        assert s.annotated == 3 and s.errors == 0 and s.unharmful == 3
        assert len(srv.requests) == 3 * 5 + 2
        judge_bodies = [r.json for r in srv.requests if r.json.get("max_tokens") == 100]
        assert len(judge_bodies) == 3 and all(b["temperature"] == 0.5 for b in judge_bodies)
        assert all(b.get("logprobs") for b in judge_bodies)
        with Store(tmp_path / "r.db") as db:
            scores = [a.verdict.score for _, a in db.iter_annotations()]
        assert all(sc is not None and sc < 0.5 for sc in scores)
        # provider content-policy rejection on every call of a new sample: a refusal, harmful
        make_images(tmp_path / "more", 1, size=40)
        srv.fail_next(["content_policy"] * 5)
        s2 = vhd.annotate([tmp_path / "more"], model="openai:test-model", store=tmp_path / "r.db", config=cfg)
        assert (s2.annotated, s2.refused, s2.harmful) == (1, 1, 1)


def test_errors_are_recorded_and_retried(tmp_path: Path) -> None:
    make_images(tmp_path / "m", 2)
    with ChatServer(reply=judge_reply) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        srv.fail_next(["500"] * 3)  # max_retries = 2: the first call fails for good
        s = vhd.annotate([tmp_path / "m"], model="openai:m", store=tmp_path / "r.db", config=cfg, concurrency=1)
        assert s.errors == 1 and s.annotated == 1 and s.exit_code() == 1
        with Store(tmp_path / "r.db") as db:
            statuses = sorted(a.verdict.status.value for _, a in db.iter_annotations())
        assert statuses == ["error", "ok"]
        before = len(srv.requests)
        s2 = vhd.annotate([tmp_path / "m"], model="openai:m", store=tmp_path / "r.db", config=cfg)
        assert (s2.already_done, s2.annotated, s2.errors) == (1, 1, 0)
        assert len(srv.requests) - before == 5


def test_fail_fast_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_images(tmp_path / "m", 1)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(BackendUnavailableError, match="OPENAI_API_KEY"):
        vhd.annotate([tmp_path / "m"], model="openai:gpt-4o", store=tmp_path / "x.db")
    assert not (tmp_path / "x.db").exists()
    with pytest.raises(ConfigError, match="valid backends"):
        vhd.annotate([tmp_path / "m"], model="nope:model", store=tmp_path / "x.db")
    with pytest.raises(ConfigError, match=r"does not exist|not found|no such"):
        vhd.annotate([tmp_path / "missing"], model="scripted:demo", store=tmp_path / "x.db")


def test_dry_run_estimates_without_calls(tmp_path: Path) -> None:
    make_images(tmp_path / "m", 3)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[prices."scripted:demo"]\ninput = 2.5\noutput = 10.0\n')
    s = vhd.annotate(
        [tmp_path / "m"], model="scripted:demo", store=tmp_path / "d.db", config=cfg, options=RunOptions(dry_run=True)
    )
    e = s.estimate
    assert e is not None and e["samples"] == 3 and e["calls"] == 15 and e["to_annotate"] == 3
    assert e["completion_tokens_max"] == 3 * (4 * 500 + 100)
    assert e["cost_max_usd"] > 0
    assert not (tmp_path / "d.db").exists()


def test_dry_run_streams_and_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Done samples are looked up in batches; duplicates count once; skipped inputs are counted, a few kept."""
    from vhd.annotate import estimate, loop

    monkeypatch.setattr(estimate, "LOOKUP", 2)
    monkeypatch.setattr(loop, "SKIP_REASONS_KEPT", 1)
    paths = make_images(tmp_path / "m", 5)
    vhd.annotate(paths[:3], model="scripted:demo", store=tmp_path / "d.db")
    (tmp_path / "m" / "copy.png").write_bytes(paths[0].read_bytes())
    for k in range(3):
        (tmp_path / "m" / f"notes{k}.txt").write_text("not media")
    s = vhd.annotate([tmp_path / "m"], model="scripted:demo", store=tmp_path / "d.db", options=RunOptions(dry_run=True))
    e = s.estimate
    assert e is not None and e["samples"] == 5 and e["already_done"] == 3 and e["to_annotate"] == 2
    assert e["images"] == 5 and e["calls"] == 2 * 5
    assert s.skipped >= 3 and len(s.skip_reasons) == 1


def test_max_cost_stops_cleanly(tmp_path: Path) -> None:
    make_images(tmp_path / "m", 6)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[prices."scripted:demo"]\ninput = 1000.0\noutput = 1000.0\n')
    s = vhd.annotate(
        [tmp_path / "m"],
        model="scripted:demo",
        store=tmp_path / "b.db",
        config=cfg,
        concurrency=1,
        options=RunOptions(max_cost=0.01),
    )
    assert s.budget_reached and s.annotated == 1 and s.remaining == 5 and s.exit_code() == 1


def test_cli_annotate_show_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_images(tmp_path / "m", 2)
    db = str(tmp_path / "c.db")
    assert main(["annotate", str(tmp_path / "m"), "--model", "scripted:demo", "--store", db, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "annotated 2 sample(s)" in out
    assert main(["show", db, str(tmp_path / "m" / "img_000.png")]) == 0
    shown = capsys.readouterr().out
    assert "not harmful" in shown and "affirmative" in shown and "judge" in shown
    assert main(["show", db, str(tmp_path / "m" / "img_000.png"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["turns"]) == 5
    out_csv = tmp_path / "ann.csv"
    assert main(["export", db, "--format", "vhd11k-csv", "-o", str(out_csv)]) == 0
    header = out_csv.read_text().splitlines()[0]
    assert header.startswith("imagePath,decision,harmfulType,affirmativeDebater_argument_0")
    with Store(db) as st:
        [config_hash] = st.config_hashes()
    out_jsonl = tmp_path / "ann.jsonl"
    capsys.readouterr()
    assert main(["export", db, "--format", "jsonl", "-o", str(out_jsonl), "--config-hash", config_hash[:8]]) == 0
    assert "wrote 2 annotation(s)" in capsys.readouterr().out
    assert all(json.loads(line)["config_hash"] == config_hash for line in out_jsonl.read_text().splitlines())
    assert main(["export", db, "-o", str(out_jsonl), "--config-hash", "ffff"]) == 2
    assert "no configuration(s) match 'ffff'" in capsys.readouterr().err
    assert main(["annotate", str(tmp_path / "m"), "--model", "bad", "--store", db]) == 2
    assert "BACKEND:MODEL" in capsys.readouterr().err


@pytest.mark.slow
def test_sigkill_then_resume_makes_no_call_for_finished_samples(tmp_path: Path) -> None:
    make_images(tmp_path / "m", 12)
    db = tmp_path / "k.db"
    with ChatServer(reply=judge_reply, latency=0.05) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        cmd = annotate_command(tmp_path / "m", db, cfg)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        done = kill_after_annotations(proc, db, 4)
        assert 4 <= done < 12
        with Store(db) as s:
            kept = {smp.id for smp, a in s.iter_annotations() if a.verdict.status.final}
            assert all(len(a.turns) == 5 for _, a in s.iter_annotations())
        before = len(srv.requests)
        rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        assert len(srv.requests) - before == 5 * (12 - len(kept))
        with Store(db) as s:
            assert sum(1 for _ in s.iter_annotations()) == 12


@pytest.mark.slow
def test_ctrl_c_finishes_in_flight_and_exits_130(tmp_path: Path) -> None:
    make_images(tmp_path / "m", 30)
    db = tmp_path / "i.db"
    with ChatServer(reply=judge_reply, latency=0.05) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        cmd = annotate_command(tmp_path / "m", db, cfg)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline and len(srv.requests) < 12:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "finishing the samples in flight" in err and "resume" in err
        with Store(db) as s:
            anns = [a for _, a in s.iter_annotations()]
        # the samples in flight were finished, not dropped: every stored one is complete
        assert 2 <= len(anns) < 30 and all(len(a.turns) == 5 for a in anns)
        assert f"annotated {len(anns)} sample(s)" in out


def test_secrets_never_reach_store_or_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-test-SECRET-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    make_images(tmp_path / "m", 2)
    with ChatServer(reply=judge_reply, api_key=secret) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        srv.fail_next(["500"] * 3)
        code = main(
            [
                "annotate",
                str(tmp_path / "m"),
                "--model",
                "openai:m",
                "--store",
                str(tmp_path / "s.db"),
                "--config",
                str(cfg),
                "--concurrency",
                "1",
                "--no-progress",
            ]
        )
        assert code == 1  # one sample errored after retries
        assert srv.requests[0].headers.get("authorization") == f"Bearer {secret}"
    out = capsys.readouterr()
    assert secret not in out.out + out.err
    for f in tmp_path.glob("s.db*"):
        assert secret.encode() not in f.read_bytes()
    assert (
        main(
            [
                "export",
                str(tmp_path / "s.db"),
                "--format",
                "jsonl",
                "--include-unparsed",
                "-o",
                str(tmp_path / "a.jsonl"),
            ]
        )
        == 0
    )
    assert secret not in (tmp_path / "a.jsonl").read_text()


@pytest.mark.slow
def test_examples_with_video_and_in_context_examples(tmp_path: Path) -> None:
    from vhd.demo import write_examples

    write_examples(tmp_path / "ex")
    icl = tmp_path / "icl"
    make_images(icl, 2, size=36)
    (icl / "examples.csv").write_text(
        'path,answer\nimg_000.png,"Yes, potential of harassment."\nimg_001.png,"No, lack of direct message."\n'
    )
    seen: list[dict] = []

    def record(body: dict) -> str:
        seen.append(body)
        return judge_reply(body)

    with ChatServer(reply=record) as srv:
        cfg = write_config(tmp_path / "c.toml", srv.base_url)
        s = vhd.annotate(
            [tmp_path / "ex" / "manifest.csv"], model="openai:m", store=tmp_path / "e.db", config=cfg, icl=icl
        )
    assert s.annotated == 7 and s.errors == 0
    with Store(tmp_path / "e.db") as db:
        samples = {smp.kind.value: smp for smp, _ in db.iter_annotations()}
        assert samples["video"].frames == [0, 12, 24, 35, 47]  # round(linspace(0, 47, 5))
        assert samples["image"].source in ("real", "synthetic") and samples["image"].keyword

    def n_images(body: dict) -> int:
        return sum(
            1
            for m in body["messages"]
            if isinstance(m["content"], list)
            for p in m["content"]
            if p["type"] == "image_url"
        )

    judges = [b for b in seen if b["max_tokens"] == 100]
    debaters = [b for b in seen if b["max_tokens"] == 500]
    # image judges carry the 2 examples (image kind) before the sample; the video judge has none
    assert sorted({n_images(b) for b in judges}) == [3, 5]
    assert sorted({n_images(b) for b in debaters}) == [1, 5]
    prefix = [json.dumps(b["messages"][:5]) for b in judges if n_images(b) == 3]
    assert len(set(prefix)) == 1  # byte-identical in-context prefix across samples
    image_judge = next(b for b in judges if n_images(b) == 3)
    assert image_judge["messages"][2] == {"role": "assistant", "content": "Yes, potential of harassment."}


@pytest.mark.slow
def test_removed_quarantined_and_duplicate_samples_are_never_annotated(tmp_path: Path) -> None:
    import hashlib

    folder = tmp_path / "m"
    a, b, c = make_images(folder, 3)
    copy = folder / "img_000_copy.png"
    Image.open(a).save(copy, optimize=True)  # same pixels, other bytes: an exact duplicate
    assert copy.read_bytes() != a.read_bytes()
    blocklist = tmp_path / "block.txt"
    blocklist.write_text(f"sha256:{hashlib.sha256(b.read_bytes()).hexdigest()} test entry\n")
    db = str(tmp_path / "x.db")
    assert main(["ingest", str(folder), "--store", db, "--block-hashes", str(blocklist), "--no-progress"]) == 0
    assert main(["dedup", db, "--apply", "--keep", "first", "--no-progress"]) == 0
    removed = hashlib.sha256(c.read_bytes()).hexdigest()
    assert main(["remove", removed, "--store", db, "--reason", "takedown"]) == 0
    s = vhd.annotate([folder], model="scripted:demo", store=db)
    assert (s.annotated, s.excluded) == (1, 3)
    reasons = dict(s.skip_reasons)
    assert "quarantined" in reasons[str(b)]
    assert "removed" in reasons[str(c)]
    assert "duplicate of" in reasons[str(copy)]
    with Store(db) as st:
        annotated = [smp.path for smp, _ in st.iter_annotations()]
    assert annotated == [str(a)]
    again = vhd.annotate([folder], model="scripted:demo", store=db, options=RunOptions(include_duplicates=True))
    assert (again.annotated, again.excluded, again.already_done) == (1, 2, 1)
