"""`vhd generate` as executor work (``vhd generate --executor ray``): pipelines on workers, files on the driver.

Each worker builds the generator from its spec and settings and loads the pipeline once
(`GenerateWork.setup`, on the GPU Ray gives it), then runs `vhd.synth.generate.generate_batch` on
one batch of prompt rows at a time and sends back the encoded bytes with their provenance. The
driver alone writes the files (atomically, under their content hash) and commits to the store,
through the same `vhd.synth.generate.commit` as a local run, so the files and store rows are the
same.

Determinism: a CPU pipeline's output depends on torch's intra-op thread count (reductions split
differently), and Ray starts workers with ``OMP_NUM_THREADS`` set to their CPU share. The work
therefore carries the driver's thread count and each worker pins torch to it before loading, so
the outputs are byte-identical to a local run; the count goes into the provenance either way.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vhd.errors import ConfigError
from vhd.execution import Work

if TYPE_CHECKING:
    from pathlib import Path

    from vhd.execution import ExecutorOptions
    from vhd.synth.batch import Generated
    from vhd.synth.generators import GenerateSettings, Generator
    from vhd.synth.rows import PromptRow


def check_worker_device(settings: GenerateSettings, options: ExecutorOptions) -> None:
    """Refuse, before anything runs, a GPU generator on workers that reserve no GPU.

    Raises:
        ConfigError: No ``--device`` (or a CUDA one) and ``num_gpus`` 0.
    """
    device = settings.device
    if not options.num_gpus and (device is None or device.startswith("cuda")):
        raise ConfigError("workers get no GPU: pass --gpus-per-worker 1 (or --device cpu to generate on their CPUs)")


@dataclass
class Batch:
    """Prompts a worker generates in one pipeline call.

    Attributes:
        rows: The prompt rows (already past the safety floor).
        first_frames: For image-to-video, ``(PIL image, sha256 of its file)`` per row.
        size: Rows of the prompt list this batch stands for (rows done on the driver included),
            for the progress.
        found: Outputs of its rows an interrupted run wrote but did not register, with their
            files (committed on the driver with the batch; never sent to a worker).
    """

    rows: list[PromptRow]
    first_frames: list[tuple[Any, str]] | None = None
    size: int = 0
    found: list[tuple[Generated, Path]] = field(default_factory=list)

    def __getstate__(self) -> dict[str, Any]:
        """The rows and first frames travel to a worker; ``found`` stays on the driver."""
        return {**self.__dict__, "found": []}


@dataclass
class GenerateWork(Work[Batch, "list[Generated]"]):
    """Generate a batch on a worker: a pure function of the rows, the generator spec, the settings and the seed.

    Args:
        spec: ``NAME[:PATH_OR_ID]`` of the generator (a local path must exist on the workers).
        settings: How to generate.
        base_seed: ``--seed``.
        torch_threads: Torch intra-op threads to pin on the worker (the driver's, for equal outputs).
        keep_frames: Send the raw frames back too (``--keep-frames``); else only the encoded bytes.
    """

    spec: str
    settings: GenerateSettings
    base_seed: int = 0
    torch_threads: int = 1
    keep_frames: bool = False
    generator: Generator | None = field(default=None, repr=False, compare=False)
    ident: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    lock: asyncio.Lock | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, generator: Generator, base_seed: int, keep_frames: bool) -> GenerateWork:
        """The work for ``generator`` (its spec and settings), with this process's torch thread count."""
        import torch

        return cls(generator.spec, generator.settings, base_seed, torch.get_num_threads(), keep_frames)

    def __getstate__(self) -> dict[str, Any]:
        """Only the configuration travels: the loaded pipeline and the lock stay where they are."""
        return {**self.__dict__, "generator": None, "ident": None, "lock": None}

    async def setup(self) -> None:
        """Pin torch's threads, build the generator and load its pipeline once.

        Raises:
            vhd.errors.ConfigError: The model or a component cannot be loaded here, or no GPU.
            vhd.errors.MissingDependencyError: torch or diffusers is missing on the worker.
        """
        from vhd.synth.batch import identity
        from vhd.synth.generators import create_generator

        try:
            import torch
        except ImportError as exc:
            from vhd.errors import MissingDependencyError

            raise MissingDependencyError("torch", "gen") from exc
        torch.set_num_threads(max(1, self.torch_threads))
        self.generator = create_generator(self.spec, self.settings)
        self.ident = await asyncio.to_thread(identity, self.generator)  # loads the pipeline
        self.lock = asyncio.Lock()

    async def run(self, item: Batch) -> list[Generated]:
        """The outputs of one batch: bytes and provenance, nothing written (one batch at a time per worker)."""
        from vhd.synth.batch import generate_batch

        assert self.generator is not None and self.lock is not None, "setup() first"
        async with self.lock:  # one pipeline call at a time: a pipeline is not re-entrant
            made = await asyncio.to_thread(
                generate_batch,
                self.generator,
                item.rows,
                base_seed=self.base_seed,
                first_frames=item.first_frames,
                ident=self.ident,
            )
        if not self.keep_frames:
            for one in made:
                one.frames = None  # the encoded bytes are enough: do not ship the raw frames
        return made

    async def aclose(self) -> None:
        """Drop the pipeline (its memory, GPU memory included, goes with the actor)."""
        self.generator = None
        self.ident = None
