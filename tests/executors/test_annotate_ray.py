"""`vhd.annotate(..., executor="ray")`: the same store rows as a local run, nothing lost to a killed worker."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.annotate.test_api import judge_reply, make_images
from tests.optional import need_module
from tests.servers.chat_server import ChatServer
from vhd.annotate.api import annotate, annotate_config
from vhd.annotate.options import RunOptions
from vhd.annotate.work import DebateWork
from vhd.debate.prompts import Prompts
from vhd.execution import ExecutorOptions, named_env
from vhd.executors.ray_pool import RayExecutor
from vhd.media.load import MediaSettings
from vhd.store.sqlite import Store

pytestmark = pytest.mark.slow

TWO = ExecutorOptions(workers=2, num_cpus=0.5)


def rows(db: Path) -> list[tuple[Any, ...]]:
    """Every annotation with its sample, minus what differs between runs (run id, times, latency)."""
    out = []
    with Store(db) as st:
        for sample, ann in st.iter_annotations():
            turns = [{k: v for k, v in dataclasses.asdict(t).items() if k != "latency_s"} for t in ann.turns]
            out.append(
                (sample.to_dict(), ann.config_hash, dataclasses.asdict(ann.verdict), turns, ann.usage, ann.error)
            )
    return sorted(out, key=lambda r: r[0]["path"])


def demo_media(folder: Path) -> Path:
    need_module("av", "pip install 'vhd[video]'")
    need_module("skimage", "pip install scikit-image")
    from vhd.demo import write_examples

    write_examples(folder)
    return folder


def test_scripted_debate_on_ray_matches_local_on_the_example_media(ray_session: Any, tmp_path: Path) -> None:
    media = demo_media(tmp_path / "examples")
    local = annotate([media], model="scripted:demo", store=tmp_path / "local.db")
    on_ray = annotate(
        [media],
        model="scripted:demo",
        store=tmp_path / "ray.db",
        options=RunOptions(executor="ray", executor_options=TWO),
    )
    shipped = annotate(
        [media],
        model="scripted:demo",
        store=tmp_path / "shipped.db",
        options=RunOptions(executor=RayExecutor(dataclasses.replace(TWO, ship_media=True))),
    )
    assert local.annotated == on_ray.annotated == shipped.annotated == 7  # six photos and a video
    assert local.errors == on_ray.errors == 0
    assert local.usage == on_ray.usage == shipped.usage
    assert rows(tmp_path / "local.db") == rows(tmp_path / "ray.db") == rows(tmp_path / "shipped.db")
    again = annotate(
        [media],
        model="scripted:demo",
        store=tmp_path / "ray.db",
        options=RunOptions(executor="ray", executor_options=TWO),
    )
    assert again.already_done == 7 and again.annotated == 0 and again.usage.calls == 0


def config(path: Path, base_url: str) -> Path:
    lines = ["[backends.openai]", f'base_url = "{base_url}"', 'api_key_env = "VHD_RAY_TEST_KEY"', "max_retries = 2"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_endpoint_debate_on_ray_matches_local_and_keys_stay_out_of_the_work(
    ray_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-ray-" + os.urandom(8).hex()
    monkeypatch.setenv("VHD_RAY_TEST_KEY", secret)
    make_images(tmp_path / "m", 16)
    with ChatServer(reply=judge_reply, latency=0.02, api_key=secret) as srv:
        cfg = config(tmp_path / "c.toml", srv.base_url)
        local = annotate([tmp_path / "m"], model="openai:m", store=tmp_path / "l.db", config=cfg)
        calls = srv.chat_requests
        remote = annotate(
            [tmp_path / "m"],
            model="openai:m",
            store=tmp_path / "r.db",
            config=cfg,
            options=RunOptions(executor="ray", executor_options=TWO),
        )
        assert srv.chat_requests == 2 * calls == 2 * 5 * 16  # every sample once per run, no 401
    assert local.annotated == remote.annotated == 16 and remote.errors == 0
    assert rows(tmp_path / "l.db") == rows(tmp_path / "r.db")
    # What travels to the workers names the variable, never its value.
    resolved = annotate_config(cfg, model="openai:m")
    work = DebateWork(resolved, Prompts(), [], MediaSettings(), named_env(resolved.backends))
    assert "VHD_RAY_TEST_KEY" in work.env_vars()
    assert secret.encode() not in ray_session.cloudpickle.dumps(work)
    with Store(tmp_path / "r.db") as st:
        assert all(secret not in str(r) for r in st.runs())


def test_a_worker_killed_mid_run_loses_nothing(ray_session: Any, tmp_path: Path) -> None:
    n = 24
    make_images(tmp_path / "m", n)
    runner = RayExecutor(TWO)
    killed: list[Any] = []

    def kill_one() -> None:  # once the run is under way, kill a worker holding samples
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            pools = runner.pools
            if pools and srv.chat_requests >= 20 and pools[0].slots[0].in_flight > 0:
                killed.append(pools[0].slots[0].handle)
                ray_session.kill(killed[0])
            time.sleep(0.01)

    with ChatServer(reply=judge_reply, latency=0.05) as srv:
        cfg = (tmp_path / "c.toml").write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\n')
        assert cfg
        killer = threading.Thread(target=kill_one)
        killer.start()
        summary = annotate(
            [tmp_path / "m"],
            model="openai:m",
            store=tmp_path / "k.db",
            config=tmp_path / "c.toml",
            options=RunOptions(executor=runner),
        )
        killer.join()
        assert killed, "the run ended before a worker could be killed"
        assert summary.annotated == n and summary.errors == 0 and summary.remaining == 0
        assert 0 < runner.timings.redone <= 16  # at most what the dead worker held (concurrency 16)
        assert srv.chat_requests >= 5 * n
    with Store(tmp_path / "k.db") as st:
        anns = [a for _, a in st.iter_annotations()]
        assert len(anns) == n and all(len(a.turns) == 5 and a.verdict.status.final for a in anns)
        assert st.leased_samples(summary.run_id or "") == []


def test_cli_annotate_executor_ray(ray_session: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vhd.cli.main import main

    make_images(tmp_path / "m", 6)
    db = tmp_path / "cli.db"
    argv = [
        "annotate",
        str(tmp_path / "m"),
        "--model",
        "scripted:demo",
        "--store",
        str(db),
        "--json",
        "--executor",
        "ray",
        "--workers",
        "2",
        "--cpus-per-worker",
        "0.5",
        "--ship-media",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["annotated"] == 6 and summary["usage"]["calls"] == 30
    with Store(db) as st:
        assert len(list(st.iter_annotations())) == 6


def test_samples_whose_workers_keep_dying_are_left_for_the_next_run(ray_session: Any, tmp_path: Path) -> None:
    n = 16
    make_images(tmp_path / "m", n)
    runner = RayExecutor(dataclasses.replace(TWO, max_attempts=1))  # no second try: the in-flight ones are lost
    events: list[str] = []
    killed: list[Any] = []

    def kill_one() -> None:
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            if runner.pools and srv.chat_requests >= 10 and runner.pools[0].slots[0].in_flight > 0:
                killed.append(runner.pools[0].slots[0].handle)
                ray_session.kill(killed[0])
            time.sleep(0.01)

    with ChatServer(reply=judge_reply, latency=0.05) as srv:
        (tmp_path / "c.toml").write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\n')
        killer = threading.Thread(target=kill_one)
        killer.start()
        first = annotate(
            [tmp_path / "m"],
            model="openai:m",
            store=tmp_path / "d.db",
            config=tmp_path / "c.toml",
            on_event=events.append,
            options=RunOptions(executor=runner),
        )
        killer.join()
        assert killed and first.remaining > 0 and first.annotated + first.remaining == n
        assert first.exit_code() == 1 and any("run the same command again" in e for e in events)
        with Store(tmp_path / "d.db") as st:
            assert st.leased_samples(first.run_id or "") == []  # given back at once
        second = annotate(
            [tmp_path / "m"],
            model="openai:m",
            store=tmp_path / "d.db",
            config=tmp_path / "c.toml",
            options=RunOptions(executor=runner),
        )
    assert second.already_done == first.annotated and second.annotated == first.remaining


def test_shipped_media_need_no_file_on_the_worker(ray_session: Any, tmp_path: Path) -> None:
    """With --ship-media the driver loads and encodes; the worker never opens the path."""
    import asyncio

    from vhd.annotate.work import DebateItem
    from vhd.config import AnnotateConfig
    from vhd.media.load import load_sample
    from vhd.records import Kind, MediaItem

    path = make_images(tmp_path / "m", 1)[0]
    item = MediaItem(path=path, kind=Kind.IMAGE)
    loaded = load_sample(item, MediaSettings())
    path.unlink()  # gone from every filesystem the worker could see
    work = DebateWork(AnnotateConfig(model="scripted:demo"), Prompts(), [], MediaSettings())

    async def main() -> tuple[Any, Any]:
        async with RayExecutor(dataclasses.replace(TWO, workers=1)).pool(work) as pool:
            shipped = await pool.run(DebateItem(loaded.sample.id, loaded=loaded))
            by_path = await pool.run(DebateItem(loaded.sample.id, item=item))
            return shipped, by_path

    shipped, by_path = asyncio.run(main())
    assert shipped.result is not None and shipped.result.verdict.status.final and shipped.sample == loaded.sample
    assert by_path.result is None and by_path.media_error  # by path, the missing file is a per-sample reason


def test_two_drivers_on_one_store_pay_for_each_sample_once(ray_session: Any, tmp_path: Path) -> None:
    n = 24
    make_images(tmp_path / "m", n)
    results: list[Any] = []
    with ChatServer(reply=judge_reply, latency=0.05) as srv:
        (tmp_path / "c.toml").write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\n')

        def drive() -> None:
            results.append(
                annotate(
                    [tmp_path / "m"],
                    model="openai:m",
                    store=tmp_path / "shared.db",
                    config=tmp_path / "c.toml",
                    concurrency=4,
                    options=RunOptions(executor=RayExecutor(TWO)),
                )
            )

        threads = [threading.Thread(target=drive) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert srv.chat_requests == 5 * n  # what one driver alone would have sent
    assert sum(s.annotated for s in results) == n and all(s.errors == 0 for s in results)
    with Store(tmp_path / "shared.db") as st:
        assert len(list(st.iter_annotations())) == n


def test_each_worker_loads_its_own_hf_model(ray_session: Any, tmp_path: Path, tiny_llava_dir: Path) -> None:
    """A real `hf` backend (tiny random LLaVA) loaded in each actor; greedy, so the same as local."""
    need_module("torch", "pip install 'vhd[local]'")
    import torch

    make_images(tmp_path / "m", 4)
    cfg = tmp_path / "hf.toml"
    cfg.write_text(
        "concurrency = 4\n[debate]\nrounds = 1\ntemperature = 0.0\ndebater_max_tokens = 6\njudge_max_tokens = 4\n"
        '[media]\nmax_side = 32\n[backends.hf]\ndevice = "cpu"\ngenerate_kwargs = { min_new_tokens = 2 }\n'
    )
    model = f"hf:{tiny_llava_dir}"
    local = annotate([tmp_path / "m"], model=model, store=tmp_path / "l.db", config=cfg)
    same_threads = {"env_vars": {"OMP_NUM_THREADS": str(torch.get_num_threads())}}  # float sums depend on it
    options = dataclasses.replace(TWO, workers=1, runtime_env=same_threads)
    remote = annotate(
        [tmp_path / "m"],
        model=model,
        store=tmp_path / "r.db",
        config=cfg,
        options=RunOptions(executor="ray", executor_options=options),
    )
    assert local.annotated == remote.annotated == 4 and remote.usage.calls == local.usage.calls == 12
    assert rows(tmp_path / "l.db") == rows(tmp_path / "r.db")
