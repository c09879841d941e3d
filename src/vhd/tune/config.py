"""`vhd tune`'s settings (`TuneConfig`, the paper's defaults) and what a run did (`TuneResult`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from vhd.backends.soft_prompt import DEFAULT_TOKEN, PAPER_PROMPTS
from vhd.errors import ConfigError

Compile = Literal["off", "default", "reduce-overhead", "max-autotune"]
COMPILE_MODES: tuple[str, ...] = get_args(Compile)
RUNTIME_ONLY = ("workers", "log_every")
"""Settings that do not change what is trained (a resumed run may change them)."""


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
        compile: ``torch.compile`` the model: ``off``, ``default``, ``reduce-overhead`` (CUDA
            graphs on a GPU: the shapes are fixed within a run) or ``max-autotune``. Changes
            the arithmetic slightly, hence recorded in the checkpoint.
        workers: DataLoader processes that crop and run the processor (None: on an
            accelerator up to 4, one CPU left free; on the CPU none, since the model's own
            threads use every core and a worker's hand-over costs more than building the
            batch; 0: in the training process). Does not change results.
        log_every: Read the loss back from the device (a host sync) every this many steps
            for the progress text. Does not change results.
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
    compile: Compile = "off"
    workers: int | None = None
    log_every: int = 10
    hf: dict[str, Any] = field(default_factory=dict)
    data_rules: dict[str, Any] = field(default_factory=dict)

    def loader_workers(self, device: str) -> int:
        """The DataLoader processes used for a model on ``device``: ``workers`` if set.

        Otherwise none for a model on the CPU (its threads already use every core), and up to 4
        with one CPU left for the training loop for a model on an accelerator.
        """
        if self.workers is not None:
            return self.workers
        if str(device).split(":")[0] == "cpu":
            return 0
        return max(0, min(4, (os.cpu_count() or 1) - 1))

    def check(self) -> None:
        """Reject settings that cannot work, in one line each.

        Raises:
            ConfigError: The first bad setting.
        """
        if self.cache_vision and self.train_crop != "center":
            raise ConfigError(
                "--cache-vision needs --train-crop center: a random crop changes the vision features every epoch"
            )
        if self.compile not in COMPILE_MODES:
            raise ConfigError(f"--compile must be one of {', '.join(COMPILE_MODES)}, got {self.compile!r}")
        if self.workers is not None and self.workers < 0:
            raise ConfigError("--workers must be 0 or more")
        for name in ("epochs", "batch_size", "grad_accum", "frames", "log_every"):
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
        data_wait_s: Seconds the training loop waited for its batches in this call (the host-bound
            share of the time: near 0 when the workers keep up).
        prepare_s: Seconds spent outside the steps: decoding every sample once at the start and
            starting the batch workers.
        steps_s: Seconds spent in the steps themselves (waiting for batches included; decoding,
            validation and the epochs' checkpoint writes not): ``steps / steps_s`` is the step rate.
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
    data_wait_s: float = 0.0
    prepare_s: float = 0.0
    steps_s: float = 0.0
