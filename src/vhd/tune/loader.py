"""Training batches at the accelerator's pace: every sample decoded once a run, batches built in workers.

`DecodedSet.decode` reads, validates and decodes each sample once per run (threads), keeping its
frames in memory already resized so their short side is the model's input side: about
``side x side x 1.3 x 3`` bytes per frame (200 KB at 224 px, so 2 GB for 10,000 images). The
pixels are the ones the earlier path produced (decode, longest side to twice the input side,
short side to the input side), without its PNG round trip or hashing; a sample that cannot be
read is recorded once and left out of every batch.

`DecodedSet.plan` draws one batch's crops in the main process with the epoch's seeded random
generator, in the same order as before (x then y, sample by sample, frame by frame), so the
crops do not depend on the number of workers. `BatchSet` turns a plan into the processor's CPU
tensors; `Batches` runs it in ``workers`` persistent DataLoader processes with prefetching and pinned
memory (for a CUDA device), or in this process with ``workers=0``.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.backends.soft_prompt import ANSWERS, Crop, collate, crop_box, resize_short
from vhd.errors import MediaError
from vhd.records import Kind, LabelledSample

log = logging.getLogger(__name__)

PREFETCH = 4
"""Batches each worker prepares ahead."""


def decode_frames(item: LabelledSample, frames: int, side: int) -> list[Any]:
    """A sample's images (one, or a video's ``frames`` frames) as RGB PIL images with short side ``side``.

    Raises:
        MediaError: The media cannot be read or decoded (with the reason).
    """
    from vhd.media.discover import frame_folder_frames
    from vhd.media.image import decode_image_bytes, fit_image, read_image_bytes
    from vhd.media.video import read_frames
    from vhd.media.videoframes import DEFAULT_FIRST, frame_indices

    max_side = max(64, 2 * side)
    path = Path(item.path)
    if item.kind is Kind.IMAGE:
        images = [decode_image_bytes(read_image_bytes(path), max_side)]
    elif path.is_dir():
        files = frame_folder_frames(path)
        if files is None:
            raise MediaError("folder is not (or no longer) a frame folder of <stem>_<k:04d> images")
        images = []
        for k in frame_indices(len(files), frames, DEFAULT_FIRST):
            try:
                images.append(decode_image_bytes(read_image_bytes(files[k]), max_side))
            except MediaError as exc:
                raise MediaError(f"frame {files[k].name}: {exc}") from exc
    else:
        images = [fit_image(im, max_side) for im in read_frames(path, frames, DEFAULT_FIRST).images]
    return [resize_short(im, side) for im in images]


@dataclass
class DecodedSet:
    """Samples decoded once: each index's frames, or why it could not be read.

    Attributes:
        items: The samples.
        side: The model's input side (the crops' size).
        frames: Index -> frames (short side ``side``), for the readable samples.
        errors: Index -> reason, for the others.
    """

    items: Sequence[LabelledSample]
    side: int
    frames: dict[int, list[Any]] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)

    @classmethod
    def decode(cls, items: Sequence[LabelledSample], frames: int, side: int, threads: int | None = None) -> DecodedSet:
        """Decode every sample once, ``threads`` at a time; unreadable ones go to ``errors``.

        ``threads`` defaults to one per CPU, up to 8: decoding happens before the first step, so it
        may use every core whatever the number of batch workers.
        """
        threads = threads or min(8, os.cpu_count() or 1)

        def one(k: int) -> tuple[int, list[Any] | None, str]:
            try:
                return k, decode_frames(items[k], frames, side), ""
            except (MediaError, OSError) as exc:
                return k, None, str(exc)

        out = cls(items, side)
        with ThreadPoolExecutor(max(1, threads), thread_name_prefix="vhd-tune-decode") as pool:
            for k, images, error in pool.map(one, range(len(items))):
                if images is None:
                    log.warning("tune: skipping %s: %s", items[k].path, error)
                    out.errors[k] = error
                else:
                    out.frames[k] = images
        return out

    def readable(self, indices: Sequence[int]) -> list[int]:
        """The indices whose media decoded, in order."""
        return [k for k in indices if k in self.frames]

    def plan(self, indices: Sequence[int], crop: Crop, rng: random.Random) -> list[tuple[int, list[tuple[int, ...]]]]:
        """One batch: each readable sample's index with a crop box per frame (random ones drawn from ``rng``)."""
        return [(k, [crop_box(im.size, self.side, crop, rng) for im in self.frames[k]]) for k in self.readable(indices)]


Plan = list[tuple[int, list[tuple[int, ...]]]]
"""One batch: sample indices, each with a crop box per frame."""

Task = tuple[str, Plan]
"""A batch to build: the name of its `DecodedSet` (``train``, ``val``) and its plan."""


class BatchSet:
    """Builds planned batches: a task -> the processor's CPU tensors (a DataLoader's dataset).

    Each batch is a dict of `vhd.backends.soft_prompt.collate`'s tensors plus ``weights`` (one
    loss weight per sample) and ``ids`` (the sample ids); an empty plan gives an empty dict.
    """

    def __init__(
        self,
        processor: Any,
        sets: Mapping[str, DecodedSet],
        prompts: dict[tuple[str, int], str],
        weights: Mapping[str, Sequence[float]],
    ) -> None:
        self.processor, self.sets, self.prompts, self.weights = processor, sets, prompts, weights

    def __getitem__(self, task: Task) -> dict[str, Any]:
        import torch

        name, plan = task
        if not plan:
            return {}
        data, weights = self.sets[name], self.weights[name]
        items = data.items
        images = [[im.crop(box) for im, box in zip(data.frames[k], boxes, strict=True)] for k, boxes in plan]
        prompts = [self.prompts[(items[k].kind.value, len(ims))] for (k, _), ims in zip(plan, images, strict=True)]
        answers = [ANSWERS[0] if items[k].harmful else ANSWERS[1] for k, _ in plan]
        batch = collate(self.processor, prompts, images, answers)
        batch["weights"] = torch.tensor([weights[k] for k, _ in plan], dtype=torch.float32)
        batch["ids"] = [items[k].id for k, _ in plan]
        return batch


class _Tasks:
    """The sampler of the run's one DataLoader: yields the tasks set for the current pass."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []

    def __iter__(self) -> Iterator[Task]:
        return iter(list(self.tasks))

    def __len__(self) -> int:
        return len(self.tasks)


class Batches:
    """The run's batch builder: ``workers`` DataLoader processes kept for the whole run, or this process.

    The workers start once (on the first pass) and build each pass's batches ahead of the
    training loop (``PREFETCH`` each), into pinned memory when ``pin_memory``.
    """

    def __init__(self, dataset: BatchSet, workers: int, pin_memory: bool) -> None:
        self.dataset, self.workers, self.pin_memory = dataset, workers, pin_memory
        self.sampler = _Tasks()
        self.loader: Any = None

    def run(self, tasks: list[Task]) -> Iterator[dict[str, Any]]:
        """The batches of ``tasks``, in order."""
        if self.workers <= 0:
            return (self.dataset[t] for t in tasks)
        if self.loader is None:
            from torch.utils.data import DataLoader

            self.loader = DataLoader(
                self.dataset,  # type: ignore[arg-type]
                batch_size=None,
                sampler=self.sampler,
                num_workers=self.workers,
                pin_memory=self.pin_memory,
                prefetch_factor=PREFETCH,
                persistent_workers=True,
            )
        self.sampler.tasks = tasks
        return iter(self.loader)

    def close(self) -> None:
        """Let the workers go (they stop when the loader is collected)."""
        self.loader = None
