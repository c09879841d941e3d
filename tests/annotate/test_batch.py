"""``vhd annotate --batch-api`` against a loopback server with OpenAI's files and batches endpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import vhd
from tests.servers.batch_server import BatchServer
from vhd.annotate.options import RunOptions
from vhd.backends.openai_batch import custom_id, read_results
from vhd.cli.main import main
from vhd.records import Status
from vhd.store.sqlite import Store


def judge_reply(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    system = system if isinstance(system, str) else " ".join(p.get("text", "") for p in system)
    return "No, plain colours." if system.startswith("You are the judge") else "1. A reason.\n2. Another."


@pytest.fixture
def media(tmp_path: Path) -> Path:
    folder = tmp_path / "media"
    folder.mkdir()
    for i in range(3):
        Image.new("RGB", (32, 32), (60 * i, 100, 30)).save(folder / f"{i}.png")
    return folder


def _config(tmp_path: Path, base_url: str) -> Path:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[backends.openai]\nbase_url = "{base_url}"\nmax_retries = 0\n')
    return cfg


def _run(media: Path, db: Path, cfg: Path) -> vhd.annotate.RunSummary:  # type: ignore[name-defined]
    return vhd.annotate(
        [media],
        model="openai:m",
        store=db,
        config=cfg,
        options=RunOptions(batch_api=True, batch_poll_s=0.01, batch_quiet_s=0.05),
    )


def test_stage_wise_batches_end_to_end(media: Path, tmp_path: Path) -> None:
    with BatchServer(judge_reply) as srv:
        summary = _run(media, tmp_path / "b.db", _config(tmp_path, srv.base_url))
        uploads = srv.uploads
    assert summary.exit_code() == 0 and summary.annotated == 3 and summary.unharmful == 3
    # stage by stage: five batches (two rounds of two debaters, then the judge), each with every sample's turn
    assert summary.batches == 5 and [len(u) for u in uploads] == [3, 3, 3, 3, 3]
    assert all(line["url"] == "/v1/chat/completions" and line["method"] == "POST" for u in uploads for line in u)
    assert all(line["custom_id"] == custom_id(line["body"]) for u in uploads for line in u)
    judge_lines = uploads[-1]
    assert all(str(line["body"]["messages"][0]["content"]).startswith("You are the judge") for line in judge_lines)
    with Store(tmp_path / "b.db") as store:
        jobs = store.batch_jobs()
        anns = [a for _, a in store.iter_annotations()]
    assert [j.status for j in jobs] == ["completed"] * 5 and all(j.output_file_id for j in jobs)
    assert all(len(a.turns) == 5 and a.usage.calls == 5 for a in anns)


def test_resumes_a_batch_sent_before_the_endpoint_went_down(media: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with BatchServer(judge_reply, steps=10**6) as srv:
        cfg = _config(tmp_path, srv.base_url)
        srv.broken = True  # the batch is created, then its status cannot be read
        first = _run(media, db, cfg)
        assert first.errors == 3 and first.exit_code() == 1 and len(srv.uploads) == 1
        with Store(db) as store:
            (job,) = store.batch_jobs()
        assert job.status == "validating" and job.requests == 3
        srv.broken = False
        srv.complete_all()  # the provider finished it meanwhile (a day later)
        srv.steps = 2
        second = _run(media, db, cfg)
        uploads = srv.uploads
    assert second.exit_code() == 0 and second.annotated == 3
    # the first turns were answered from the recorded batch, not sent again: 1 + 4 uploads in all
    assert len(uploads) == 5 and second.batches == 4
    first_ids = {line["custom_id"] for line in uploads[0]}
    assert not first_ids & {line["custom_id"] for u in uploads[1:] for line in u}


def test_failed_requests_are_sample_errors_and_are_sent_again(media: Path, tmp_path: Path) -> None:
    failing = {"on": True}

    def fail(body: dict[str, Any]) -> bool:  # every judge request fails while "on"
        return failing["on"] and str(body["messages"][0]["content"]).startswith("You are the judge")

    db = tmp_path / "f.db"
    with BatchServer(judge_reply, fail=fail) as srv:
        cfg = _config(tmp_path, srv.base_url)
        first = _run(media, db, cfg)
        assert first.errors == 3 and first.exit_code() == 1 and len(srv.uploads) == 5
        failing["on"] = False
        second = _run(media, db, cfg)
        uploads = srv.uploads
    # the debaters' turns come from the recorded batches; only the failed judge requests go out again
    assert second.annotated == 3 and second.exit_code() == 0 and len(uploads) == 6 and len(uploads[-1]) == 3
    with Store(db) as store:
        assert all(a.verdict.status is Status.OK for _, a in store.iter_annotations())


def test_read_results_shapes() -> None:
    results = read_results(
        '{"custom_id": "a", "response": {"status_code": 500, "body": {"error": {"message": "boom"}}}, "error": null}\n'
        '{"custom_id": "b", "response": {"status_code": 400, "body": {"error": {"code": "content_policy_violation",'
        ' "message": "safety system"}}}}\nnot json\n'
        '{"custom_id": "c", "response": null, "error": {"code": "batch_expired", "message": "expired"}}\n'
    )
    assert "boom" in str(results["a"]) and getattr(results["b"], "refused", False) is True
    assert "expired" in str(results["c"]) and len(results) == 3


def test_cli_flag_and_non_openai_roles(media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["annotate", str(media), "--model", "scripted:demo", "--store", str(tmp_path / "x.db"), "--batch-api"])
        == 2
    )
    assert "--batch-api needs the openai backend for every role" in capsys.readouterr().err
    with BatchServer(judge_reply, steps=1) as srv:
        cfg = _config(tmp_path, srv.base_url)
        argv = ["annotate", str(media), "--model", "openai:m", "--store", str(tmp_path / "y.db"), "--config", str(cfg)]
        assert main([*argv, "--batch-api", "--batch-poll", "0.01", "--no-progress"]) == 0
    assert "5 batch(es) created through the batch API" in capsys.readouterr().out


def test_batch_api_refuses_an_out_of_process_executor(tmp_path: Path) -> None:
    """The batch API runs in this process (the cascade's stages may: they screen on the driver)."""
    from vhd.errors import ConfigError

    with pytest.raises(ConfigError, match="--batch-api runs in this process"):
        vhd.annotate(
            [tmp_path],
            model="scripted:demo",
            store=tmp_path / "z.db",
            options=RunOptions(batch_api=True, executor="ray"),
        )
    assert not (tmp_path / "z.db").exists()


def test_a_result_line_nested_200000_deep_fails_its_sample_only(media: Path, tmp_path: Path) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    mangled: list[str] = []

    def mangle(body: dict[str, Any]) -> bytes | None:  # the first line of the first result file
        mangled.append(json.dumps(body))
        return deep if len(mangled) == 1 else None

    with BatchServer(judge_reply) as srv:
        srv.mangle = mangle
        summary = _run(media, tmp_path / "b.db", _config(tmp_path, srv.base_url))
    assert (summary.annotated, summary.errors) == (2, 1)


@pytest.mark.timeout(60)
def test_an_endless_result_file_fails_that_batch_at_the_cap_and_the_run_ends(media: Path, tmp_path: Path) -> None:
    cfg = _config(tmp_path, "")
    with BatchServer(judge_reply) as srv:
        srv.endless_files = True
        cfg.write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\nmax_retries = 0\nmax_reply_bytes = 65536\n')
        summary = _run(media, tmp_path / "b.db", cfg)
    assert (summary.annotated, summary.errors) == (0, 3)
    with Store(tmp_path / "b.db") as store:
        errors = {a.error for _, a in store.iter_annotations()}
    assert len(errors) == 1 and "went past the cap" in str(errors.pop())


def test_a_result_file_is_capped_per_request_not_as_one_reply(media: Path, tmp_path: Path) -> None:
    cfg = _config(tmp_path, "")
    with BatchServer(judge_reply) as srv:  # each result file (3 lines) is over 1 KiB; each line is under
        cfg.write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\nmax_retries = 0\nmax_reply_bytes = 1024\n')
        summary = _run(media, tmp_path / "b.db", cfg)
        sizes = [
            len(data)
            for fid, data in srv.files.items()
            if fid not in {b["input_file_id"] for b in srv.batches.values()}
        ]
    assert min(sizes) > 1024 and (summary.annotated, summary.errors) == (3, 0)
