"""Checkpoint writes off the training step: each epoch's state copied to the CPU, written on a thread.

The training loop hands `CheckpointWriter.submit` a write made by `checkpoint_write` from a
`cpu_copy` of its state and goes on with the next epoch; one write is in flight at a time, and
`CheckpointWriter.close` (also on Ctrl-C or an error) finishes it, so a finished epoch is never lost.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vhd.backends.soft_prompt_ckpt import CheckpointMeta, write_checkpoint
from vhd.fileio import atomic_write

STATE_FILE = "state/trainer.pt"
"""The resume state (optimizer, scheduler, vector, epoch), under the checkpoint folder."""


def cpu_copy(obj: Any) -> Any:
    """A copy of ``obj`` whose tensors are CPU copies (the training goes on changing the originals)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: cpu_copy(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(cpu_copy(v) for v in obj)
    return obj


class CheckpointWriter:
    """Writes checkpoints on one background thread, one at a time, so the next epoch need not wait."""

    def __init__(self) -> None:
        from concurrent.futures import Future, ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(1, thread_name_prefix="vhd-tune-checkpoint")
        self.pending: Future[None] | None = None

    def submit(self, write: Callable[[], None]) -> None:
        """Start ``write`` once the one before it has finished."""
        self.wait()
        self.pending = self.pool.submit(write)

    def wait(self) -> None:
        """Finish the write in flight (raising its error)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()

    def close(self) -> None:
        """Finish the write in flight and stop the thread."""
        try:
            self.wait()
        finally:
            self.pool.shutdown()


def checkpoint_write(folder: Path, state: dict[str, Any], vector: Any, meta: CheckpointMeta) -> Callable[[], None]:
    """The write of one epoch's resume state and checkpoint (run on the writer thread)."""

    def write() -> None:
        import torch

        buf = io.BytesIO()
        torch.save(state, buf)
        (folder / "state").mkdir(parents=True, exist_ok=True)
        atomic_write(folder / STATE_FILE, buf.getvalue(), binary=True)
        write_checkpoint(folder, vector, meta)

    return write
