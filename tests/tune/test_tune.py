"""Soft-prompt tuning on tiny random InstructBLIP and LLaVA models built offline (tests/tiny_models.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.optional import need_module
from tests.tune.conftest import write_labels
from vhd.backends.soft_prompt_ckpt import META_FILE, VECTOR_FILE, read_checkpoint
from vhd.bench.metrics import roc_auc
from vhd.errors import ConfigError
from vhd.records import LabelledSample
from vhd.tune.data import balance, split_validation

Sets = tuple[list[LabelledSample], list[LabelledSample]]


@pytest.fixture(autouse=True)
def _needs_torch() -> None:
    need_module("torch", "pip install 'vhd[tune]'")
    need_module("transformers", "pip install 'vhd[tune]'")


def config(model: Path, **kw: object):  # type: ignore[no-untyped-def]
    from vhd.tune.train import TuneConfig

    return TuneConfig(model=str(model), hf={"device": "cpu", "dtype": "float32"}, **kw)  # type: ignore[arg-type]


def tuned_scores(ckpt: Path, items: list[LabelledSample]) -> list[float]:
    import asyncio

    from vhd.detectors.registry import create_detector
    from vhd.media.load import MediaSettings, load_sample
    from vhd.records import MediaItem

    det = create_detector(f"t=tuned-vlm:{ckpt}", {"device": "cpu", "dtype": "float32"})

    async def go() -> list[float]:
        out = []
        for i in items:
            images = load_sample(MediaItem(path=i.path, kind=i.kind), MediaSettings(fmt="png")).images
            pred = await det.predict(i.kind, images)
            assert pred.score is not None, pred.error
            out.append(pred.score)
        return out

    return asyncio.run(go())


# ----------------------------------------------------------------------------- data rules, no model


def test_balance_and_validation_split_are_stratified_and_seeded(bright_dark: Sets) -> None:
    train, _ = bright_dark
    skewed = train + [i for i in train if i.harmful][:4]  # more harmful than unharmful
    kept, _ = balance(skewed, "undersample", seed=3)
    counts: dict[tuple[bool, object], int] = {}
    for i in kept:
        counts[(i.harmful, i.source)] = counts.get((i.harmful, i.source), 0) + 1
    assert len(set(counts.values())) == 1 and len(counts) == 4
    assert kept == balance(skewed, "undersample", seed=3)[0]
    _, w = balance(skewed, "weight", seed=0)
    assert len(w) == len(skewed) and abs(sum(w) / len(w) - 1) < 1e-9 and len(set(w)) > 1
    assert balance(train[:1], "undersample", 0)[0] == train[:1]  # a tiny set is never refused
    tr, val = split_validation(train, 0.25, seed=0)
    assert len(val) == 4 and not {i.id for i in tr} & {i.id for i in val}
    assert sum(i.harmful for i in val) == 2
    with pytest.raises(ConfigError):
        split_validation(train, 1.5, 0)


def test_cache_vision_needs_center_crops(tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path) -> None:
    from vhd.tune.train import train

    with pytest.raises(ConfigError, match="train-crop center"):
        train(config(tiny_instructblip_dir, cache_vision=True), bright_dark[0], tmp_path)


# ----------------------------------------------------------------------------- InstructBLIP


def test_only_the_s_star_row_changes_and_the_checkpoint_is_tiny(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path
) -> None:
    from vhd.tune.train import load_tuning_model, train

    cfg = config(tiny_instructblip_dir, epochs=2, lr=1e-2, weight_decay=0.05)
    soft = load_tuning_model(cfg)
    before = {k: v.detach().clone() for k, v in soft.loaded.model.state_dict().items()}
    start = soft.vector.detach().clone()
    train(cfg, bright_dark[0][:8], tmp_path / "ckpt", soft=soft)
    soft.bake()
    after = soft.loaded.model.state_dict()
    table = soft.loaded.model.get_input_embeddings().weight
    emb_key = next(k for k, v in after.items() if v.data_ptr() == table.data_ptr())
    changed = [k for k in before if not bool((before[k] == after[k]).all())]
    assert changed == [emb_key]
    rows = (before[emb_key] != after[emb_key]).any(dim=1).nonzero().flatten().tolist()
    assert rows == [soft.token_id]  # weight decay moved S* only
    assert not bool((soft.vector.detach() == start).all())
    files = sorted(str(p.relative_to(tmp_path / "ckpt")) for p in (tmp_path / "ckpt").rglob("*") if p.is_file())
    assert files == [META_FILE, VECTOR_FILE, "state/trainer.pt"]
    assert sum((tmp_path / "ckpt" / f).stat().st_size for f in files) < 1_000_000
    vector, meta = read_checkpoint(tmp_path / "ckpt")
    assert meta.base_model == str(tiny_instructblip_dir.resolve()) and meta.token == "<S*>" and meta.side == 32
    assert meta.prompts["image"] == "Is the given image harmful {token}?" and meta.epoch == 2
    assert bool((vector == soft.vector.detach().cpu()).all())


def flipped(items: list[LabelledSample]) -> list[LabelledSample]:
    """The same images with the labels the other way round (dark = harmful)."""
    return [dataclasses.replace(i, harmful=not i.harmful) for i in items]


@pytest.mark.slow
@pytest.mark.parametrize("family", ["instructblip", "llava_tunable"])
def test_loss_falls_and_tuned_beats_base_on_held_out_images(
    family: str, request: pytest.FixtureRequest, bright_dark: Sets, tmp_path: Path
) -> None:
    from vhd.backends.soft_prompt import input_side
    from vhd.backends.soft_prompt_ckpt import write_checkpoint
    from vhd.tune.train import evaluate, load_tuning_model, train

    model_dir = request.getfixturevalue(f"tiny_{family}_dir")
    cfg = config(model_dir, epochs=100, max_steps=100, lr=5e-2, train_crop="center", cache_vision=True)
    # the task the untuned model gets wrong: bright = harmful, or (if it already ranks that way) dark = harmful
    untuned = load_tuning_model(cfg)
    _, before = evaluate(untuned, bright_dark[1], cfg, input_side(untuned.loaded.processor))
    bright_auc = roc_auc([int(i.harmful) for i in bright_dark[1]], before)
    assert bright_auc is not None
    train_set, test_set = bright_dark if bright_auc < 0.5 else (flipped(bright_dark[0]), flipped(bright_dark[1]))
    truth = [int(i.harmful) for i in test_set]
    result = train(cfg, train_set, tmp_path / "tuned")
    assert result.losses[-1] < 0.6 * result.losses[0]
    # the untuned S* (its initial vector) as a checkpoint of its own: the same detector, before training
    _, meta = read_checkpoint(tmp_path / "tuned")
    write_checkpoint(tmp_path / "base", load_tuning_model(cfg).vector, meta)
    base_auc = roc_auc(truth, tuned_scores(tmp_path / "base", test_set))
    tuned = tuned_scores(tmp_path / "tuned", test_set)
    tuned_auc = roc_auc(truth, tuned)
    assert base_auc is not None and tuned_auc is not None
    assert tuned_auc > base_auc and tuned_auc >= 0.9
    assert tuned_scores(tmp_path / "tuned", test_set) == tuned  # a reloaded checkpoint scores the same


@pytest.mark.slow
def test_instructblip_loss_falls(tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path) -> None:
    from vhd.tune.train import train

    cfg = config(tiny_instructblip_dir, epochs=8, lr=1e-2, grad_accum=2)
    result = train(cfg, bright_dark[0][:8], tmp_path / "ck")
    assert result.steps == 8  # 8 samples, batch 4, 2 batches per step: one step an epoch
    assert result.losses[-1] < 0.7 * result.losses[0]
    assert tuned_scores(tmp_path / "ck", bright_dark[1][:2])  # tuned-vlm scores InstructBLIP


@pytest.mark.slow
def test_resume_after_a_kill_continues_from_the_last_epoch(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path
) -> None:
    import torch

    from vhd.tune.train import train

    items = bright_dark[0][:8]
    labels = write_labels("resume.csv", items)
    script = textwrap.dedent(
        f"""
        import json, os, signal, time
        from pathlib import Path
        from vhd.tune.data import load_items
        from vhd.tune.train import TuneConfig, train
        meta = Path({str(tmp_path / "ckpt" / META_FILE)!r})
        def die(step, total, **kw):
            if step == 3:  # epoch 1 (2 steps) is checkpointed (on the writer thread); kill in epoch 2
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not meta.is_file():
                    time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGKILL)
        hf = {{"device": "cpu", "dtype": "float32"}}
        cfg = TuneConfig(model={str(tiny_instructblip_dir)!r}, epochs=3, lr=1e-2, hf=hf)
        train(cfg, load_items({str(labels)!r}), {str(tmp_path / "ckpt")!r}, progress=die)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=240)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    meta = json.loads((tmp_path / "ckpt" / META_FILE).read_text())
    assert meta["epoch"] == 1
    from vhd.tune.data import load_items

    cfg = config(tiny_instructblip_dir, epochs=3, lr=1e-2)
    resumed = train(cfg, load_items(labels), tmp_path / "ckpt")
    assert resumed.resumed_from == 1 and resumed.epochs == 3 and resumed.steps == 4
    straight = train(cfg, load_items(labels), tmp_path / "straight")
    a, _ = read_checkpoint(tmp_path / "ckpt")
    b, _ = read_checkpoint(tmp_path / "straight")
    assert torch.allclose(a, b, atol=1e-6)
    assert straight.epochs == 3
    again = train(cfg, load_items(labels), tmp_path / "ckpt")  # finished: nothing more to do
    assert again.steps == 0
    with pytest.raises(ConfigError, match="other settings"):
        train(config(tiny_instructblip_dir, epochs=3, lr=5e-2), load_items(labels), tmp_path / "ckpt")


# ----------------------------------------------------------------------------- LLaVA, the CLI and vhd bench


@pytest.mark.slow
def test_llava_tunes_through_the_cli_and_scores_through_vhd_bench(
    tiny_llava_tunable_dir: Path, bright_dark: Sets, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vhd.cli.main import main

    train_csv = write_labels("cli_train.csv", bright_dark[0])
    test_csv = write_labels("cli_test.csv", bright_dark[1])
    args = ["tune", "--train", str(train_csv), "--model", f"hf:{tiny_llava_tunable_dir}", "--out", str(tmp_path / "ck")]
    args += ["--epochs", "8", "--lr", "1e-2", "--device", "cpu", "--train-crop", "center", "--cache-vision"]
    assert main([*args, "--no-progress", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["epochs"] == 8 and summary["losses"][-1] < summary["losses"][0]
    bench = ["bench", "--labels", str(test_csv), "--detector", f"tuned=tuned-vlm:{tmp_path / 'ck'}"]
    bench += ["--set", "tuned.device=cpu", "--out", str(tmp_path / "report"), "--no-plots", "--no-progress"]
    assert main(bench) == 0
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert "tuned" in json.dumps(results)
    table = ["table2", "--test", f"Images={test_csv}", "--detector", f"tuned=tuned-vlm:{tmp_path / 'ck'}"]
    table += ["--set", "tuned.device=cpu", "--out", str(tmp_path / "t2"), "--bootstrap", "50"]
    assert main(table) == 0
    md = (tmp_path / "t2" / "table2.md").read_text()
    assert "Images Avg." in md and "Images Bal." in md and "| tuned |" in md


@pytest.mark.slow
def test_llava_trains_on_videos_as_numbered_frames(tiny_llava_tunable_dir: Path, tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    from vhd.tune.data import load_items
    from vhd.tune.train import train

    rng = np.random.default_rng(0)
    lines = ["path,harmful"]
    for k in range(4):
        folder = tmp_path / "videos" / f"clip{k}"
        folder.mkdir(parents=True)
        for f in range(3):
            arr = np.clip(rng.normal(200 if k % 2 else 50, 25, (40, 48, 3)), 0, 255).astype("uint8")
            Image.fromarray(arr).save(folder / f"clip{k}_{f:04d}.png")
        lines.append(f"clip{k},{'yes' if k % 2 else 'no'}")
    (tmp_path / "videos" / "labels.csv").write_text("\n".join(lines) + "\n")
    items = load_items(tmp_path / "videos" / "labels.csv")
    assert {i.kind.value for i in items} == {"video"}
    result = train(config(tiny_llava_tunable_dir, epochs=2, lr=1e-2, frames=3), items, tmp_path / "ck")
    assert result.epochs == 2
    _, meta = read_checkpoint(tmp_path / "ck")
    assert meta.modality == "video" and meta.question("video") == "Is this video harmful <S*>?"
    scores = tuned_scores(tmp_path / "ck", items[:2])
    assert all(0 <= s <= 1 for s in scores)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_on_a_gpu(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path, precision: str
) -> None:
    import torch

    from vhd.tune.train import TuneConfig, train

    if not torch.cuda.is_available():
        pytest.fail("the gpu marker needs a CUDA device", pytrace=False)
    cfg = TuneConfig(
        model=str(tiny_instructblip_dir),
        epochs=3,
        lr=1e-2,
        precision=precision,
        grad_accum=2,  # type: ignore[arg-type]
        hf={"device": "cuda", "dtype": "float32"},
    )
    result = train(cfg, bright_dark[0][:8], tmp_path / "ck")
    assert result.epochs == 3 and all(math.isfinite(x) for x in result.losses)
    assert result.losses[-1] < result.losses[0]


@pytest.mark.slow
def test_validation_selects_an_epoch_and_is_recorded(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path
) -> None:
    from vhd.tune.api import tune

    labels = write_labels("val_fraction.csv", bright_dark[0])
    cfg = config(tiny_instructblip_dir, epochs=3, lr=1e-2, patience=1)
    run = tune(cfg, tmp_path / "ck", train_source=labels, val_fraction=0.25, balance_mode="none")
    assert run.val_n == 4 and run.train_n == 12
    assert 1 <= len(run.result.val_losses) <= 3
    best = min(range(len(run.result.val_losses)), key=run.result.val_losses.__getitem__) + 1
    _, meta = read_checkpoint(tmp_path / "ck")
    assert meta.epoch == best == run.result.kept_epoch
    assert meta.config["data_rules"] == {"balance": "none", "val_fraction": 0.25, "split": None, "kind": None}
    assert meta.data["val_n"] == 4 and [m["epoch"] for m in meta.metrics] == list(range(1, run.result.epochs + 1))


def test_cli_refuses_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vhd.cli.main import main

    assert main(["tune", "--model", "openai:gpt-4o", "--train", "x.csv", "--out", str(tmp_path)]) == 2
    assert main(["tune", "--model", "hf:/nowhere", "--out", str(tmp_path)]) == 2
    assert main(["tune", "--model", "hf:/nowhere", "--train", "labels.csv", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "hf:HUB_ID" in err[0] and "--train" in err[1] and "not found" in err[2]
    assert main(["table2", "--test", "nolabels", "--detector", "nudenet"]) == 2


def test_an_unreadable_image_is_skipped_and_training_goes_on(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path
) -> None:
    from vhd.tune.train import train

    items = bright_dark[0][:4]
    broken = tmp_path / "broken.png"
    broken.write_bytes(Path(items[0].path).read_bytes()[:60])  # a PNG cut short
    bad = dataclasses.replace(items[0], id="0" * 64, path=broken)
    result = train(config(tiny_instructblip_dir, epochs=1, lr=1e-2), [*items, bad], tmp_path / "ck")
    assert list(result.skipped) == ["0" * 64] and "broken.png" in result.skipped["0" * 64]
    assert result.epochs == 1 and math.isfinite(result.losses[0])


@pytest.mark.slow
@pytest.mark.parametrize("family", ["instructblip", "llava", "idefics3"])
def test_cached_vision_features_train_exactly_like_computed_ones(
    family: str, request: pytest.FixtureRequest, bright_dark: Sets, tmp_path: Path
) -> None:
    from vhd.tune.train import train

    model_dir = request.getfixturevalue(f"tiny_{family}_dir")
    runs = []
    for cached in (False, True):
        cfg = config(model_dir, epochs=2, lr=1e-2, train_crop="center", cache_vision=cached)
        runs.append(train(cfg, bright_dark[0][:8], tmp_path / str(cached)).losses)
    assert runs[0] == pytest.approx(runs[1], rel=1e-5)
    assert runs[0][1] < runs[0][0]


@pytest.mark.slow
def test_two_processes_train_like_one_with_the_global_batch(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path
) -> None:
    """``torchrun --nproc_per_node 2`` (Gloo on CPU, as NCCL on GPUs): S* ends where one process's does."""
    import socket

    import torch

    from vhd.tune.data import load_items
    from vhd.tune.train import train

    labels = write_labels("ddp.csv", bright_dark[0][:8])
    script = tmp_path / "ddp.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from vhd.tune.data import load_items
            from vhd.tune.train import TuneConfig, train
            hf = {{"device": "cpu", "dtype": "float32"}}
            cfg = TuneConfig(model={str(tiny_instructblip_dir)!r}, epochs=2, lr=1e-2, batch_size=2,
                             train_crop="center", hf=hf)
            train(cfg, load_items({str(labels)!r}), {str(tmp_path / "ddp")!r})
            """
        )
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "MASTER_ADDR": "127.0.0.1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1"]
    cmd += ["--master_port", str(port), str(script)]
    proc = subprocess.run(cmd, env=env, capture_output=True, timeout=240)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    cfg = config(tiny_instructblip_dir, epochs=2, lr=1e-2, batch_size=4, train_crop="center")
    one = train(cfg, load_items(labels), tmp_path / "one")
    assert one.steps == 4
    a, meta = read_checkpoint(tmp_path / "ddp")
    b, _ = read_checkpoint(tmp_path / "one")
    assert meta.epoch == 2 and meta.config["batch_size"] == 2
    assert torch.allclose(a, b, atol=1e-5)
