"""Soft-prompt tuning: train S* on labelled samples and save a tiny, resumable checkpoint.

`train` is ``vhd tune`` as a library call. The paper's recipe (appendix E.3) is the default:
AdamW (0.9, 0.999) with weight decay 0.05 on the S* vector only, learning rate 1e-5 with cosine
decay to 0, batch size 4, 10 epochs keeping the last; images resized to the model's input side
on their short side, random crops for training, center crops for testing. With validation data
(``val`` or ``val_fraction``) the epoch with the lowest validation loss is kept and training
stops after ``patience`` epochs without improvement; the test set is never used.

Each epoch writes the checkpoint folder (`vhd.backends.soft_prompt_ckpt`) and, under
``state/``, the optimizer, scheduler and vector needed to resume, on a background thread
(`vhd.tune.writer`): a killed run started again with the same arguments continues after its
last written epoch. Samples are decoded once a run and batches built in DataLoader workers
(`vhd.tune.loader`); the step itself reads nothing back from the device except the loss every
``log_every`` steps and once an epoch. The vision tower's features
may be cached per sample with ``cache_vision`` (only with center crops: a random crop changes
them every epoch); the cache lives in memory and grows with the training set. Under a launcher
(``torchrun``, ``accelerate launch``) each process trains on its share of every global batch
(`vhd.tune.distributed`).
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from vhd.backends.soft_prompt import SoftPrompt
from vhd.backends.soft_prompt_ckpt import CheckpointMeta, read_checkpoint
from vhd.errors import ConfigError
from vhd.progress import ProgressFn, no_progress, renamed_on_progress
from vhd.records import LabelledSample
from vhd.tune.config import RUNTIME_ONLY, TuneConfig, TuneResult
from vhd.tune.data import data_hash, modality
from vhd.tune.distributed import barrier, setup, sum_across, world
from vhd.tune.loader import Batches, BatchSet, DecodedSet
from vhd.tune.vision import VisionCache
from vhd.tune.writer import STATE_FILE, CheckpointWriter, checkpoint_write, cpu_copy

__all__ = ["TuneConfig", "TuneResult", "evaluate", "load_tuning_model", "train"]

log = logging.getLogger(__name__)


def load_tuning_model(config: TuneConfig, vector: Any = None, hf: dict[str, Any] | None = None) -> SoftPrompt:
    """Load the base model through the ``hf`` backend's loader and splice S* in (``vector`` or the init).

    ``hf`` overrides ``config.hf`` (a distributed run gives each process its own device).
    """
    from vhd.backends.hf import load_model
    from vhd.backends.soft_prompt import splice

    loaded = load_model(config.model, config.hf if hf is None else hf)
    return splice(loaded, config.token, config.init if vector is None else vector)


def _identity(config: TuneConfig) -> dict[str, Any]:
    """The settings a resumed run must share with the run it continues."""
    return {k: v for k, v in json.loads(json.dumps(asdict(config))).items() if k not in RUNTIME_ONLY}


def _prompts(soft: SoftPrompt, config: TuneConfig, *sets: DecodedSet) -> dict[tuple[str, int], str]:
    """The rendered question per (kind, number of images) the decoded samples need."""
    out: dict[tuple[str, int], str] = {}
    for data in sets:
        for k, frames in data.frames.items():
            key = (data.items[k].kind.value, len(frames))
            if key not in out:
                out[key] = _prompt(soft, config, data.items[k], len(frames))
    return out


def evaluate(
    soft: SoftPrompt,
    items: Sequence[LabelledSample],
    config: TuneConfig,
    side: int,
    *,
    source: Batches | None = None,
) -> tuple[float, list[float]]:
    """Validation loss (mean over samples) and P(yes) per readable sample, on center crops.

    ``source``: a run's batch builder whose ``val`` set holds ``items`` already decoded (the
    samples are decoded here when not given).
    """
    import torch

    from vhd.backends.soft_prompt import answer_loss, forward, to_device, yes_probability

    cuda = str(soft.loaded.device).startswith("cuda")
    own = source is None
    if source is None:
        data = DecodedSet.decode(items, config.frames, side)
        prompts = _prompts(soft, config, data)
        dataset = BatchSet(soft.loaded.processor, {"val": data}, prompts, {"val": [1.0] * len(items)})
        source = Batches(dataset, config.loader_workers(str(soft.loaded.device)), cuda)
    data = source.dataset.sets["val"]
    rng = random.Random(config.seed)  # center crops draw nothing from it
    size = config.batch_size
    tasks = [("val", data.plan(range(k, min(k + size, len(items))), "center", rng)) for k in range(0, len(items), size)]
    losses: list[Any] = []
    probs: list[Any] = []
    try:
        for cpu_batch in source.run(tasks):
            if not cpu_batch:
                continue
            inputs = {k: v for k, v in cpu_batch.items() if k not in ("weights", "ids")}
            batch = to_device(soft, inputs, non_blocking=cuda)
            with torch.inference_mode():
                logits = forward(soft, batch)
                losses.append(answer_loss(logits, batch["labels"]))
                probs.append(yes_probability(soft, logits, batch["prompt_len"]))
    finally:
        if own:
            source.close()
    if not losses:
        return math.nan, []
    loss_list = torch.cat(losses).cpu().tolist()  # one host sync for the whole evaluation
    return sum(loss_list) / len(loss_list), torch.cat(probs).cpu().tolist()


def _prompt(soft: SoftPrompt, config: TuneConfig, item: LabelledSample, n_images: int) -> str:
    from vhd.backends.soft_prompt import render_question

    question = config.prompts.get(item.kind.value, config.prompts["image"]).replace("{token}", soft.token)
    return render_question(soft.loaded.processor, question, n_images)


def _meta(
    config: TuneConfig, side: int, mod: str, epoch: int, data: dict[str, Any], metrics: list[Any]
) -> CheckpointMeta:
    base = Path(config.model).expanduser()
    local = base.is_dir()
    return CheckpointMeta(
        base_model=str(base.resolve()) if local else config.model,
        revision=None if local else config.hf.get("revision"),
        token=config.token,
        prompts=dict(config.prompts),
        side=side,
        modality=mod,
        epoch=epoch,
        config=json.loads(json.dumps(asdict(config))),
        data=data,
        metrics=metrics,
    )


@renamed_on_progress
def train(
    config: TuneConfig,
    items: Sequence[LabelledSample],
    out: str | os.PathLike[str],
    *,
    weights: Sequence[float] | None = None,
    val: Sequence[LabelledSample] = (),
    progress: ProgressFn = no_progress,
    soft: SoftPrompt | None = None,
) -> TuneResult:
    """Train S* and write the checkpoint folder ``out`` (resuming a run found there).

    Args:
        config: The settings.
        items: Training samples (already balanced; see `vhd.tune.data.balance`).
        out: Checkpoint folder: only S*, its JSON and the resume state go there.
        weights: One loss weight per training sample (``--balance weight``); default all 1.
        val: Validation samples (model selection and early stopping).
        progress: Called with (steps done, total steps) and an info text (loss, lr, samples/s).
        soft: A model already loaded with `load_tuning_model` (benchmarks, tests); default: load it.

    Raises:
        ConfigError: Bad settings, no data, or ``out`` holding a different run.
    """
    import torch

    from vhd.backends.soft_prompt import answer_loss, forward, input_side, to_device

    config.check()
    if not items:
        raise ConfigError("no training sample left: check --train, --split and --balance")
    folder = Path(out)
    mod = modality(items)
    data = {"train": data_hash(items), "train_n": len(items), "val": data_hash(val) if val else None, "val_n": len(val)}
    state_path = folder / STATE_FILE
    state: dict[str, Any] | None = None
    if state_path.is_file():
        state = torch.load(io.BytesIO(state_path.read_bytes()), weights_only=False)
        saved = {k: v for k, v in state["config"].items() if k not in RUNTIME_ONLY}
        saved.setdefault("compile", "off")  # a run started before the setting existed
        if saved != _identity(config) or state["data"] != data:
            raise ConfigError(f"{folder} holds a run with other settings or data: pick a new --out (or delete it)")

    w = world()
    hf = setup(w, dict(config.hf))
    if soft is None:
        soft = load_tuning_model(config, None if state is None else state["vector"], hf)
    elif state is not None:
        with torch.no_grad():
            soft.vector.copy_(state["vector"].to(soft.vector.device))
    if config.compile != "off":
        soft.loaded.model.compile(mode=config.compile)
    side = config.image_size or input_side(soft.loaded.processor)
    weights = list(weights) if weights is not None else [1.0] * len(items)
    global_batch = config.batch_size * w.size
    per_epoch = math.ceil(len(items) / (global_batch * config.grad_accum))
    total = min(config.epochs * per_epoch, config.max_steps or 10**12)
    optim = torch.optim.AdamW([soft.vector], lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    epoch, step, losses, val_losses = 0, 0, [], []
    best: tuple[float, int, Any] | None = None
    if state is not None:
        optim.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        epoch, step, losses, val_losses = state["epoch"], state["step"], state["losses"], state["val_losses"]
        best = state["best"]
    workers = config.loader_workers(str(soft.loaded.device))
    started = time.perf_counter()
    decoded = DecodedSet.decode(items, config.frames, side)
    sets = {"train": decoded, "val": DecodedSet.decode(val, config.frames, side)}
    prepare_s = time.perf_counter() - started
    skipped = {items[k].id: f"{items[k].path}: {reason}" for k, reason in decoded.errors.items()}
    loss_weights = {"train": weights, "val": [1.0] * len(val)}
    dataset = BatchSet(soft.loaded.processor, sets, _prompts(soft, config, *sets.values()), loss_weights)
    resumed_from, steps_before, seen, data_wait, steps_s = epoch, step, 0, 0.0, 0.0
    cache = VisionCache(soft) if config.cache_vision else None
    device_type = str(soft.loaded.device).split(":")[0]
    cuda = device_type == "cuda"
    amp = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(config.precision)
    scaler = torch.amp.GradScaler(device_type, enabled=config.precision == "fp16")
    bad_epochs = 0 if best is None else epoch - best[1]
    writer = CheckpointWriter()
    source = Batches(dataset, workers, cuda)
    info = ""
    try:
        while epoch < config.epochs and step < total and (config.patience is None or bad_epochs < config.patience):
            rng = random.Random(f"{config.seed}:{epoch}")
            order = list(range(len(items)))
            rng.shuffle(order)
            shared = [order[k : k + global_batch] for k in range(0, len(order), global_batch)]
            # this process's share of each global batch, its crops drawn in the order the batches are read
            plans = [
                decoded.plan(g[w.rank * config.batch_size : (w.rank + 1) * config.batch_size], config.train_crop, rng)
                for g in shared
            ]
            # each batch's loss weight over all processes: known here, so no device round trip
            window_weights = [sum(weights[k] for k in decoded.readable(g)) for g in shared]
            starting = time.perf_counter()
            built = source.run([("train", plan) for plan in plans])  # starts the workers the first time
            prepare_s += time.perf_counter() - starting
            stepping = time.perf_counter()
            epoch_losses: list[Any] = []  # each batch's weighted loss sum, on the device
            epoch_weights: list[float] = []  # and its samples' total weight
            window = 0.0  # total loss weight (all processes) of the batches since the last optimizer step
            for b in range(len(shared)):
                waited = time.perf_counter()
                cpu_batch = next(built)
                batch = {k: v for k, v in cpu_batch.items() if k not in ("ids", "weights")}
                batch = to_device(soft, batch, non_blocking=cuda) if batch else batch
                data_wait += time.perf_counter() - waited
                window += window_weights[b]
                if batch:
                    ids = cpu_batch["ids"]
                    wt = cpu_batch["weights"].to(soft.vector.device, non_blocking=cuda)
                    feats = cache.features(ids, batch) if cache is not None else None
                    with torch.autocast(device_type, dtype=amp or torch.float32, enabled=amp is not None):
                        per_sample = answer_loss(forward(soft, batch, feats), batch["labels"])
                    weighted = (per_sample * wt).sum()
                    scaler.scale(weighted).backward()
                    epoch_losses.append(weighted.detach())
                    epoch_weights.append(sum(weights[k] for k, _ in plans[b]))
                    seen += len(ids)
                if (b + 1) % config.grad_accum == 0 or b + 1 == len(shared):
                    if soft.vector.grad is None:
                        soft.vector.grad = torch.zeros_like(soft.vector)
                    sum_across(w, soft.vector.grad)
                    total_weight, window = window, 0.0
                    if total_weight <= 0:  # every sample of the window was unreadable
                        optim.zero_grad(set_to_none=True)
                        continue
                    soft.vector.grad /= total_weight  # the weighted mean over the whole (global) window
                    scaler.step(optim)
                    scaler.update()
                    optim.zero_grad(set_to_none=True)
                    sched.step()
                    step += 1
                    if w.main:
                        if not info or step % config.log_every == 0 or step >= total:
                            # the one host sync of a logged step: the loss read back for the text
                            rate = seen * w.size / max(time.perf_counter() - started, 1e-9)
                            last = f"{float(epoch_losses[-1]) / epoch_weights[-1]:.4f}" if epoch_losses else "n/a"
                            info = f"epoch {epoch + 1} loss {last} lr {sched.get_last_lr()[0]:.2e} {rate:.1f} samples/s"
                        progress(step, total, stage="tune", info=info)
                    if step >= total:
                        break
            del built
            steps_s += time.perf_counter() - stepping
            epoch += 1
            sums = torch.stack(epoch_losses).tolist() if epoch_losses else []  # one host sync an epoch
            epoch_values = [v / wsum for v, wsum in zip(sums, epoch_weights, strict=True)]
            losses.append(sum(epoch_values) / len(epoch_values) if epoch_values else math.nan)
            if val:
                val_loss, _ = evaluate(soft, val, config, side, source=source)
                val_losses.append(val_loss)
                if best is None or val_loss < best[0]:
                    best, bad_epochs = (val_loss, epoch, soft.vector.detach().cpu().clone()), 0
                else:
                    bad_epochs += 1
            kept_vector, kept_epoch = (best[2], best[1]) if best is not None else (soft.vector, epoch)
            metrics = [
                {"epoch": k + 1, "loss": losses[k], **({"val_loss": val_losses[k]} if val_losses else {})}
                for k in range(len(losses))
            ]
            state = cpu_copy(
                {
                    "config": json.loads(json.dumps(asdict(config))),
                    "data": data,
                    "vector": soft.vector,
                    "optimizer": optim.state_dict(),
                    "scheduler": sched.state_dict(),
                    "epoch": epoch,
                    "step": step,
                    "losses": list(losses),
                    "val_losses": list(val_losses),
                    "best": best,
                }
            )
            if w.main:
                meta = _meta(config, side, mod, kept_epoch, data, metrics)
                writer.submit(checkpoint_write(folder, state, cpu_copy(kept_vector), meta))
            barrier(w)
    finally:
        source.close()
        writer.close()  # what is in flight is finished, also on Ctrl-C
    if not (folder / "checkpoint.json").is_file():
        raise ConfigError(f"nothing was trained into {folder}")
    _, meta = read_checkpoint(folder)
    elapsed = time.perf_counter() - started
    return TuneResult(
        out=folder,
        epochs=epoch,
        steps=step - steps_before,
        losses=losses,
        val_losses=val_losses,
        kept_epoch=meta.epoch,
        resumed_from=resumed_from,
        samples_per_s=seen / elapsed if elapsed > 0 else 0.0,
        skipped=skipped,
        data_wait_s=data_wait,
        prepare_s=prepare_s,
        steps_s=steps_s,
    )
