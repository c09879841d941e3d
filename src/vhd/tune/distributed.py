"""Data-parallel training across processes: ``torchrun`` / ``accelerate launch`` on several GPUs.

A launcher starts one process per device and sets ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``.
Each process then loads the model on its own device, trains on its share of every global batch,
and the gradient of S* (one vector) is summed across processes before each optimizer step, so the
update equals one process's over the global batch. Only rank 0 writes the checkpoint. Without a
launcher (``WORLD_SIZE`` unset or 1) nothing here does anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class World:
    """This process's place among the training processes.

    Attributes:
        rank: Global rank (0 writes files).
        local_rank: Rank on this machine (picks the GPU).
        size: Number of processes.
    """

    rank: int = 0
    local_rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        """Whether this process writes files and reports progress."""
        return self.rank == 0


def world() -> World:
    """The launcher's environment (a single process when none)."""
    size = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if size <= 1:
        return World()
    return World(int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0")), size)


def setup(w: World, hf: dict[str, Any]) -> dict[str, Any]:
    """Join the process group (NCCL on CUDA, else Gloo) and give this process its own GPU.

    Returns:
        The ``[backends.hf]`` options with ``device`` set to ``cuda:LOCAL_RANK`` on CUDA.
    """
    if w.size <= 1:
        return hf
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and str(hf.get("device", "auto")) in ("auto", "cuda")
    if not dist.is_initialized():
        if cuda:
            torch.cuda.set_device(w.local_rank)
        dist.init_process_group(backend="nccl" if cuda else "gloo")
    return {**hf, "device": f"cuda:{w.local_rank}"} if cuda else hf


def sum_across(w: World, tensor: Any) -> Any:
    """Sum a tensor over all processes in place (no-op alone); returns it."""
    if w.size > 1:
        import torch.distributed as dist

        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def barrier(w: World) -> None:
    """Wait for every process (no-op alone)."""
    if w.size > 1:
        import torch.distributed as dist

        dist.barrier()
