"""The S* checkpoint format: a folder with the learned embedding and what it was learned for.

A checkpoint folder (``vhd tune --out``) holds::

    s_star.safetensors   the S* vector (tensor "s_star", float32)
    checkpoint.json      base model (hub id and revision, or its absolute path), token, prompts,
                         answers, preprocessing, modality, training config, data hashes, epoch
    state/               (training only) optimizer, scheduler and RNG state for resuming

The base model is never saved: a checkpoint of a tiny model is a few kilobytes, of a 7B model
tens of kilobytes. Every file is written atomically (`vhd.fileio.atomic_write`), the JSON last,
so a folder with a ``checkpoint.json`` always has the vector it describes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError
from vhd.fileio import atomic_write

VECTOR_FILE = "s_star.safetensors"
META_FILE = "checkpoint.json"
FORMAT = "vhd-soft-prompt/1"


@dataclass
class CheckpointMeta:
    """What a checkpoint's vector means.

    Attributes:
        base_model: Hub id, or the absolute path of a local model directory.
        revision: Hub revision (None for a directory).
        token: The pseudo-word's token string.
        prompts: The question per modality (``image``, ``video``), with ``{token}``.
        answers: The harmful and unharmful answers (``Yes``, ``No``).
        side: The image side fed to the model.
        modality: ``image`` or ``video``: what it was trained on.
        epoch: Epochs completed when saved.
        config: The training configuration (for the record).
        data: Hashes and counts of the training and validation data.
        metrics: Losses and validation numbers per epoch.
    """

    base_model: str
    token: str
    prompts: dict[str, str]
    side: int
    modality: str = "image"
    answers: list[str] = field(default_factory=lambda: ["Yes", "No"])
    revision: str | None = None
    epoch: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, with the format tag."""
        return {"format": FORMAT, **self.__dict__}

    def question(self, modality: str) -> str:
        """The question for a modality with S* filled in (the image question when the modality has none)."""
        return (self.prompts.get(modality) or self.prompts["image"]).replace("{token}", self.token)


def is_checkpoint(folder: str | os.PathLike[str]) -> bool:
    """Whether a folder holds an S* checkpoint."""
    return (Path(folder) / META_FILE).is_file() and (Path(folder) / VECTOR_FILE).is_file()


def write_checkpoint(folder: str | os.PathLike[str], vector: Any, meta: CheckpointMeta) -> Path:
    """Write the vector, then the JSON (atomically each); returns the folder."""
    from safetensors.torch import save

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / VECTOR_FILE, save({"s_star": vector.detach().float().cpu().contiguous()}), binary=True)
    atomic_write(out / META_FILE, json.dumps(meta.to_dict(), indent=2, sort_keys=True) + "\n")
    return out


def read_checkpoint(folder: str | os.PathLike[str]) -> tuple[Any, CheckpointMeta]:
    """Read a checkpoint folder.

    Returns:
        The S* vector (a float32 tensor) and its metadata.

    Raises:
        ConfigError: Not a checkpoint folder, or a damaged one (one line with the fix).
    """
    from safetensors.torch import load

    path = Path(folder).expanduser()
    if not is_checkpoint(path):
        raise ConfigError(
            f"{path} is not an S* checkpoint ({META_FILE} and {VECTOR_FILE} expected): pass a vhd tune --out folder"
        )
    try:
        raw = json.loads((path / META_FILE).read_text(encoding="utf-8"))
        if raw.pop("format", None) != FORMAT:
            raise ValueError(f"format is not {FORMAT}")
        meta = CheckpointMeta(**raw)
        vector = load((path / VECTOR_FILE).read_bytes())["s_star"]
    except (ValueError, TypeError, KeyError, OSError) as exc:
        raise ConfigError(f"damaged S* checkpoint {path}: {exc}; train it again with vhd tune") from exc
    return vector, meta
