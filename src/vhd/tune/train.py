"""Soft-prompt tuning: train S* on labelled samples and save a tiny, resumable checkpoint.

`train` is ``vhd tune`` as a library call. The paper's recipe (appendix E.3) is the default:
AdamW (0.9, 0.999) with weight decay 0.05 on the S* vector only, learning rate 1e-5 with cosine
decay to 0, batch size 4, 10 epochs keeping the last; images resized to the model's input side
on their short side, random crops for training, center crops for testing. With validation data
(``val`` or ``val_fraction``) the epoch with the lowest validation loss is kept and training
stops after ``patience`` epochs without improvement; the test set is never used.

Each epoch writes the checkpoint folder (`vhd.backends.soft_prompt_ckpt`) and, under
``state/``, the optimizer, scheduler and vector needed to resume: a killed run started again
with the same arguments continues after its last finished epoch. The vision tower's features
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from vhd.backends.soft_prompt import DEFAULT_TOKEN, PAPER_PROMPTS, SoftPrompt
from vhd.backends.soft_prompt_ckpt import CheckpointMeta, read_checkpoint, write_checkpoint
from vhd.errors import ConfigError
from vhd.fileio import atomic_write
from vhd.progress import ProgressFn, no_progress
from vhd.records import LabelledSample
from vhd.tune.data import data_hash, modality
from vhd.tune.distributed import barrier, setup, sum_across, world

log = logging.getLogger(__name__)

STATE_FILE = "state/trainer.pt"


@dataclass
class TuneConfig:
    """Training settings (defaults: the paper's, appendix E.3).

    Attributes:
        model: The base model (``hf`` spec without ``hf:``: hub id or local directory).
        epochs: Epochs (the last one is kept unless validation picks another).
        batch_size: Samples per optimizer step (before accumulation).
        lr: Peak learning rate (cosine decay to 0 over all steps).
        weight_decay: AdamW weight decay, applied to S* only.
        betas: AdamW betas.
        grad_accum: Batches per optimizer step.
        max_steps: Stop after this many optimizer steps (None: epochs decide).
        seed: Seed for shuffling, crops, balance and the validation split.
        token: The pseudo-word's token string.
        init: ``mean`` or a word whose embedding starts S*.
        prompts: Question per modality with ``{token}``.
        image_size: Side fed to the model (None: the processor's).
        train_crop: ``random`` (paper) or ``center``.
        cache_vision: Cache the vision tower's output per sample (needs ``train_crop="center"``).
        patience: With validation, stop after this many epochs without a lower validation loss.
        precision: ``no``, ``fp16`` or ``bf16`` autocast (CUDA).
        frames: Frames per video.
        hf: ``[backends.hf]`` options for loading (device, dtype, revision...).
        data_rules: How the data was chosen (balance, validation fraction, split), for the record.
    """

    model: str
    epochs: int = 10
    batch_size: int = 4
    lr: float = 1e-5
    weight_decay: float = 0.05
    betas: tuple[float, float] = (0.9, 0.999)
    grad_accum: int = 1
    max_steps: int | None = None
    seed: int = 0
    token: str = DEFAULT_TOKEN
    init: str = "mean"
    prompts: dict[str, str] = field(default_factory=lambda: dict(PAPER_PROMPTS))
    image_size: int | None = None
    train_crop: Literal["random", "center"] = "random"
    cache_vision: bool = False
    patience: int | None = None
    precision: Literal["no", "fp16", "bf16"] = "no"
    frames: int = 5
    hf: dict[str, Any] = field(default_factory=dict)
    data_rules: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Reject settings that cannot work, in one line each.

        Raises:
            ConfigError: The first bad setting.
        """
        if self.cache_vision and self.train_crop != "center":
            raise ConfigError(
                "--cache-vision needs --train-crop center: a random crop changes the vision features every epoch"
            )
        for name in ("epochs", "batch_size", "grad_accum", "frames"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ConfigError("--lr must be positive and --weight-decay not negative")
        if any("{token}" not in p for p in self.prompts.values()):
            raise ConfigError("every prompt must contain {token}, where S* goes")


@dataclass
class TuneResult:
    """What a training run did.

    Attributes:
        out: The checkpoint folder.
        epochs: Epochs completed (all runs of a resumed training together).
        steps: Optimizer steps taken in this call.
        losses: Mean training loss per epoch.
        val_losses: Validation loss per epoch (empty without validation).
        kept_epoch: The epoch whose S* the checkpoint holds.
        resumed_from: The epoch a resumed run started after (0: fresh).
        samples_per_s: Training throughput of this call.
        skipped: Samples whose media could not be read (id -> reason); training went on without them.
    """

    out: Path
    epochs: int
    steps: int
    losses: list[float]
    val_losses: list[float]
    kept_epoch: int
    resumed_from: int
    samples_per_s: float
    skipped: dict[str, str] = field(default_factory=dict)


def load_tuning_model(config: TuneConfig, vector: Any = None, hf: dict[str, Any] | None = None) -> SoftPrompt:
    """Load the base model through the ``hf`` backend's loader and splice S* in (``vector`` or the init).

    ``hf`` overrides ``config.hf`` (a distributed run gives each process its own device).
    """
    from vhd.backends.hf import load_model
    from vhd.backends.soft_prompt import splice

    loaded = load_model(config.model, config.hf if hf is None else hf)
    return splice(loaded, config.token, config.init if vector is None else vector)


def _images(item: LabelledSample, frames: int, side: int, crop: str, rng: random.Random) -> list[Any]:
    from vhd.backends.soft_prompt import prepare_image
    from vhd.media.load import MediaSettings, load_sample
    from vhd.records import MediaItem

    settings = MediaSettings(max_side=max(64, 2 * side), fmt="png", n_frames=frames)
    path = Path(item.path)
    loaded = load_sample(MediaItem(path=path, kind=item.kind, is_frame_folder=path.is_dir()), settings)
    return [prepare_image(im.to_pil(), side, crop, rng) for im in loaded.images]  # type: ignore[arg-type]


def readable(
    chunk: Sequence[LabelledSample],
    config: TuneConfig,
    side: int,
    crop: str,
    rng: random.Random,
    skipped: dict[str, str],
) -> tuple[list[LabelledSample], list[list[Any]]]:
    """The samples of a batch whose media loads, with their images; the others go to ``skipped`` (id -> reason)."""
    from vhd.errors import MediaError

    kept: list[LabelledSample] = []
    images: list[list[Any]] = []
    for item in chunk:
        try:
            images.append(_images(item, config.frames, side, crop, rng))
        except (MediaError, OSError) as exc:
            if item.id not in skipped:
                log.warning("tune: skipping %s: %s", item.path, exc)
            skipped[item.id] = f"{item.path}: {exc}"
            continue
        kept.append(item)
    return kept, images


class _VisionCache:
    """The vision features of each sample, computed once (center crops only)."""

    def __init__(self, soft: SoftPrompt) -> None:
        import inspect

        model = soft.loaded.model
        forward_params = inspect.signature(model.forward).parameters
        if "mm_encoder_outputs" not in forward_params or not hasattr(model, "get_image_features"):
            raise ConfigError(f"--cache-vision is not supported for {type(model).__name__}: train without it")
        self.soft = soft
        self.keys = set(inspect.signature(model.get_image_features).parameters) - {"input_ids"}
        self.rows: dict[str, list[Any]] = {}
        self.as_tensor = False

    def features(self, ids: Sequence[str], batch: dict[str, Any]) -> Any:
        import torch

        missing = [k for k, sid in enumerate(ids) if sid not in self.rows]
        if missing:
            args = {k: v for k, v in batch.items() if k in self.keys or k == "pixel_values"}
            with torch.no_grad():
                out = self.soft.loaded.model.get_image_features(**args, return_dict=True).pooler_output
            self.as_tensor = isinstance(out, torch.Tensor)
            per_image = list(out)
            per_sample = len(per_image) // len(ids)
            for k in missing:
                self.rows[ids[k]] = [t.detach() for t in per_image[k * per_sample : (k + 1) * per_sample]]
        rows = [t for sid in ids for t in self.rows[sid]]
        from types import SimpleNamespace

        pooled: Any = torch.stack(rows) if self.as_tensor else rows
        return SimpleNamespace(pooler_output=pooled, qformer_outputs=None, vision_outputs=None)


def evaluate(
    soft: SoftPrompt, items: Sequence[LabelledSample], config: TuneConfig, side: int
) -> tuple[float, list[float]]:
    """Validation loss (mean over samples) and P(yes) per sample, on center crops."""
    import torch

    from vhd.backends.soft_prompt import ANSWERS, answer_loss, encode, forward, yes_probability

    losses: list[float] = []
    probs: list[float] = []
    rng = random.Random(config.seed)
    for start in range(0, len(items), config.batch_size):
        chunk, images = readable(items[start : start + config.batch_size], config, side, "center", rng, {})
        if not chunk:
            continue
        prompts = [_prompt(soft, config, i, len(ims)) for i, ims in zip(chunk, images, strict=True)]
        batch = encode(soft, prompts, images, [ANSWERS[0] if i.harmful else ANSWERS[1] for i in chunk])
        with torch.inference_mode():
            logits = forward(soft, batch)
            losses += answer_loss(logits, batch["labels"]).cpu().tolist()
            probs += yes_probability(soft, logits, batch["prompt_len"]).cpu().tolist()
    return (sum(losses) / len(losses) if losses else math.nan), probs


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


def train(
    config: TuneConfig,
    items: Sequence[LabelledSample],
    out: str | os.PathLike[str],
    *,
    weights: Sequence[float] | None = None,
    val: Sequence[LabelledSample] = (),
    on_progress: ProgressFn = no_progress,
    soft: SoftPrompt | None = None,
) -> TuneResult:
    """Train S* and write the checkpoint folder ``out`` (resuming a run found there).

    Args:
        config: The settings.
        items: Training samples (already balanced; see `vhd.tune.data.balance`).
        out: Checkpoint folder: only S*, its JSON and the resume state go there.
        weights: One loss weight per training sample (``--balance weight``); default all 1.
        val: Validation samples (model selection and early stopping).
        on_progress: Called with (steps done, total steps) and an info text (loss, lr, samples/s).
        soft: A model already loaded with `load_tuning_model` (benchmarks, tests); default: load it.

    Raises:
        ConfigError: Bad settings, no data, or ``out`` holding a different run.
    """
    import torch

    from vhd.backends.soft_prompt import ANSWERS, answer_loss, encode, forward, input_side

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
        if state["config"] != json.loads(json.dumps(asdict(config))) or state["data"] != data:
            raise ConfigError(f"{folder} holds a run with other settings or data: pick a new --out (or delete it)")

    w = world()
    hf = setup(w, dict(config.hf))
    if soft is None:
        soft = load_tuning_model(config, None if state is None else state["vector"], hf)
    elif state is not None:
        with torch.no_grad():
            soft.vector.copy_(state["vector"].to(soft.vector.device))
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
    resumed_from, steps_before, started, seen = epoch, step, time.perf_counter(), 0
    skipped: dict[str, str] = {}
    cache = _VisionCache(soft) if config.cache_vision else None
    device_type = str(soft.loaded.device).split(":")[0]
    amp = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(config.precision)
    scaler = torch.amp.GradScaler(device_type, enabled=config.precision == "fp16")
    bad_epochs = 0 if best is None else epoch - best[1]
    while epoch < config.epochs and step < total and (config.patience is None or bad_epochs < config.patience):
        rng = random.Random(f"{config.seed}:{epoch}")
        order = list(range(len(items)))
        rng.shuffle(order)
        epoch_losses: list[float] = []
        batches = [order[k : k + global_batch] for k in range(0, len(order), global_batch)]
        window = 0.0  # total loss weight of the batches since the last optimizer step
        for b, shared in enumerate(batches):
            idx = shared[w.rank * config.batch_size : (w.rank + 1) * config.batch_size]  # this process's share
            chunk, images = readable([items[k] for k in idx], config, side, config.train_crop, rng, skipped)
            if chunk:
                alive = {id(i) for i in chunk}
                idx = [k for k in idx if id(items[k]) in alive]
                prompts = [_prompt(soft, config, i, len(ims)) for i, ims in zip(chunk, images, strict=True)]
                batch = encode(soft, prompts, images, [ANSWERS[0] if i.harmful else ANSWERS[1] for i in chunk])
                feats = cache.features([i.id for i in chunk], batch) if cache is not None else None
                with torch.autocast(device_type, dtype=amp or torch.float32, enabled=amp is not None):
                    per_sample = answer_loss(forward(soft, batch, feats), batch["labels"])
                wt = torch.tensor([weights[k] for k in idx], device=per_sample.device)
                weighted = (per_sample * wt).sum()
                scaler.scale(weighted).backward()
                window += float(wt.sum())
                epoch_losses.append(float(weighted.detach()) / float(wt.sum()))
                seen += len(chunk)
            if (b + 1) % config.grad_accum == 0 or b + 1 == len(batches):
                if soft.vector.grad is None:
                    soft.vector.grad = torch.zeros_like(soft.vector)
                total_weight = sum_across(w, torch.tensor([window], device=soft.vector.device))
                sum_across(w, soft.vector.grad)
                window = 0.0
                if float(total_weight) <= 0:  # every sample of the window was unreadable
                    optim.zero_grad(set_to_none=True)
                    continue
                soft.vector.grad /= total_weight  # the weighted mean over the whole (global) window
                scaler.step(optim)
                scaler.update()
                optim.zero_grad(set_to_none=True)
                sched.step()
                step += 1
                if w.main:
                    rate = seen * w.size / max(time.perf_counter() - started, 1e-9)
                    lr = sched.get_last_lr()[0]
                    last = f"{epoch_losses[-1]:.4f}" if epoch_losses else "n/a"
                    info = f"epoch {epoch + 1} loss {last} lr {lr:.2e} {rate:.1f} samples/s"
                    on_progress(step, total, stage="tune", info=info)
                if step >= total:
                    break
        epoch += 1
        losses.append(sum(epoch_losses) / len(epoch_losses) if epoch_losses else math.nan)
        if val:
            val_loss, _ = evaluate(soft, val, config, side)
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
        state = {
            "config": json.loads(json.dumps(asdict(config))),
            "data": data,
            "vector": soft.vector.detach().cpu().clone(),
            "optimizer": optim.state_dict(),
            "scheduler": sched.state_dict(),
            "epoch": epoch,
            "step": step,
            "losses": losses,
            "val_losses": val_losses,
            "best": best,
        }
        if w.main:
            buf = io.BytesIO()
            torch.save(state, buf)
            (folder / "state").mkdir(parents=True, exist_ok=True)
            atomic_write(state_path, buf.getvalue(), binary=True)
            write_checkpoint(folder, kept_vector, _meta(config, side, mod, kept_epoch, data, metrics))
        barrier(w)
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
    )
