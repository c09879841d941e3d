"""`vhd generate --executor ray`: the same files and store rows as a local run, written by the driver."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_module
from vhd.cli.main import main
from vhd.errors import ConfigError
from vhd.execution import ExecutorOptions
from vhd.store.sqlite import Store
from vhd.synth.generate import generate
from vhd.synth.generators import GenerateSettings

TINY = ["--device", "cpu", "--size", "32x32", "--steps", "2", "--no-watermark", "--no-progress", "--json", "--no-c2pa"]
"""Fast flags; no Content Credentials, whose random salts would make equal outputs differ in bytes."""


@pytest.fixture(scope="module")
def tiny_sd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight SD pipeline folder."""
    need_module("diffusers", "pip install 'vhd[gen]'")
    from tests.tiny_pipelines import build_sd

    return build_sd(tmp_path_factory.mktemp("pipes") / "sd")


def write_prompts(path: Path) -> Path:
    path.write_text(
        "prompt,keyword\n"
        "A man holding a kitchen knife in a dark alley.,knife in hand\n"
        "A toy robot on a wooden table,toy\n"
        "A red bicycle leaning on a fence,bicycle\n"
        "A bowl of soup on a kitchen counter,soup\n",
        encoding="utf-8",
    )
    return path


def rows(db: Path, out: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(samples, provenance) of the files in ``out``, without what differs by run (run ids, times, folder)."""
    from vhd.store.provenance import sample_provenance

    with Store(db) as store:
        samples = [store.get_sample(p.stem) for p in sorted(out.iterdir())]
        assert all(s is not None for s in samples)
        samples = [s for s in samples if s is not None]
        found = [(s.id, s.kind, s.source, s.generator, s.keyword, Path(s.path).name, s.meta) for s in samples]
        prov = []
        for s in samples:
            row = sample_provenance(store, s.id)
            assert row is not None and row.run_id is not None
            prov.append(
                (row.prompt_id, row.generator, row.seed, row.sample_id, row.model, Path(row.path).name, row.data)
            )
    return found, prov


def run_cli(*args: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["generate", *args]) == 0
    summary: dict[str, Any] = json.loads(capsys.readouterr().out)
    return summary


@pytest.mark.slow
def test_ray_generate_equals_local_and_resumes(
    ray_session: Any, tiny_sd: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = write_prompts(tmp_path / "prompts.csv")
    spec = f"sd:{tiny_sd}"
    common = [str(csv), "--generator", spec, "--seed", "7", *TINY]
    local = run_cli(*common, "--out", str(tmp_path / "local"), "--store", str(tmp_path / "local.db"), capsys=capsys)
    ray_args = [*common, "--out", str(tmp_path / "ray"), "--store", str(tmp_path / "ray.db")]
    ray_args += ["--executor", "ray", "--workers", "2", "--cpus-per-worker", "0.5"]
    remote = run_cli(*ray_args, capsys=capsys)
    assert local["written"] == remote["written"] == 4 and local["samples"] == remote["samples"] == 4
    assert remote["failed"] == [] and remote["run_id"] != local["run_id"]

    made = {p.name: p.read_bytes() for p in sorted((tmp_path / "local").iterdir())}
    assert {p.name: p.read_bytes() for p in sorted((tmp_path / "ray").iterdir())} == made
    assert len(made) == 4 and all(name.endswith(".png") for name in made)
    assert rows(tmp_path / "local.db", tmp_path / "local") == rows(tmp_path / "ray.db", tmp_path / "ray")
    import torch

    assert {p[-1]["torch_threads"] for p in rows(tmp_path / "ray.db", tmp_path / "ray")[1]} == {torch.get_num_threads()}

    # a rerun on Ray generates nothing and writes nothing
    again = run_cli(*ray_args, capsys=capsys)
    assert again["written"] == 0 and again["done_before"] == 4 and again["run_id"] is None
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == sorted(made)


@pytest.mark.slow
def test_ray_batches_and_a_worker_that_cannot_load(ray_session: Any, tiny_sd: Path, tmp_path: Path) -> None:
    csv = write_prompts(tmp_path / "prompts.csv")
    settings = GenerateSettings(
        device="cpu", size=(32, 32), steps=2, watermark=False, batch_size=3, content_credentials="off"
    )
    options = ExecutorOptions(workers=1, num_cpus=0.5)
    out = tmp_path / "o"
    result = generate(csv, f"sd:{tiny_sd}", out, settings=settings, executor="ray", executor_options=options, limit=3)
    assert len(result.written) == 3 and not result.failed
    local = generate(csv, f"sd:{tiny_sd}", tmp_path / "l", settings=settings, limit=3)
    assert sorted(Path(p).name for p in result.written) == sorted(Path(p).name for p in local.written)

    # files written by a run without a store are registered on the driver: no worker is started
    from vhd.executors.ray_pool import RayExecutor

    runner = RayExecutor(options)
    db = tmp_path / "l.db"
    with Store(db) as store:
        found = generate(csv, f"sd:{tiny_sd}", tmp_path / "l", store=store, settings=settings, executor=runner, limit=3)
    assert len(found.samples) == 3 and not found.failed and runner.pools == []
    assert rows(db, tmp_path / "l")[1][0][-1]["seed"] > 0

    with pytest.raises(ConfigError, match="cannot load sd"):
        generate(csv, f"sd:{tmp_path / 'nowhere'}", tmp_path / "x", settings=settings, executor="ray",
                 executor_options=options)  # fmt: skip


@pytest.mark.slow
def test_ctrl_c_on_ray_finishes_the_batches_in_flight_then_resumes(
    ray_session: Any, tiny_sd: Path, tmp_path: Path
) -> None:
    import threading

    csv = write_prompts(tmp_path / "prompts.csv")
    settings = GenerateSettings(device="cpu", size=(32, 32), steps=2, watermark=False)
    options = ExecutorOptions(workers=1, num_cpus=0.5)
    stop = threading.Event()

    def on_progress(done: int, total: int | None, *, stage: str = "", info: str = "") -> None:
        stop.set()  # as the first Ctrl-C does: after the first result

    db = tmp_path / "s.db"
    with Store(db) as store:
        first = generate(csv, f"sd:{tiny_sd}", tmp_path / "o", store=store, settings=settings, stop=stop,
                         progress=on_progress, executor="ray", executor_options=options)  # fmt: skip
        assert first.interrupted and len(first.samples) == 2  # two batches were in flight for one worker
        rest = generate(csv, f"sd:{tiny_sd}", tmp_path / "o", store=store, settings=settings, executor="ray",
                        executor_options=options)  # fmt: skip
    assert rest.done_before == 2 and len(rest.samples) == 2 and not rest.interrupted
    assert len(list((tmp_path / "o").iterdir())) == 4


@pytest.mark.gpu
@pytest.mark.slow
def test_workers_generate_on_the_gpu_ray_gives_them(ray_session: Any, tiny_sd: Path, tmp_path: Path) -> None:
    csv = write_prompts(tmp_path / "prompts.csv")
    settings = GenerateSettings(size=(32, 32), steps=2, watermark=False, dtype="float32")  # no device: the GPU
    options = ExecutorOptions(workers=1, num_cpus=0.5, num_gpus=1)
    result = generate(csv, f"sd:{tiny_sd}", tmp_path / "o", settings=settings, executor="ray",
                      executor_options=options, limit=2)  # fmt: skip
    assert len(result.written) == 2 and not result.failed
    from vhd.synth.provenance import read_embedded

    prov = read_embedded(Path(result.written[0]))
    assert prov is not None and prov.device == "cuda"


def test_gpu_generator_on_workers_without_gpus_is_refused(tmp_path: Path) -> None:
    need_module("ray", "pip install 'vhd[ray]'")
    csv = write_prompts(tmp_path / "prompts.csv")
    with pytest.raises(ConfigError, match="--gpus-per-worker 1"):
        generate(csv, "sd:/models/sd", tmp_path / "o", settings=GenerateSettings(device="cuda"), executor="ray")
    assert not (tmp_path / "o").exists()
    cli = [str(csv), "--generator", "sd:/models/sd", "--out", str(tmp_path / "o"), "--store", str(tmp_path / "r.db")]
    assert main(["generate", *cli, "--no-watermark", "--executor", "ray"]) == 2
    assert not (tmp_path / "o").exists() and not (tmp_path / "r.db").exists()


def test_the_work_travels_without_its_pipeline(tmp_path: Path) -> None:
    from vhd.synth.work import GenerateWork

    work = GenerateWork("sd:/models/sd", GenerateSettings(device="cpu"), base_seed=3, torch_threads=2)
    work.ident = {"model": "loaded"}
    copy = pickle.loads(pickle.dumps(work))
    assert copy.ident is None and copy.generator is None and copy == work
