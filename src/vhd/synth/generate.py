"""`vhd generate`: prompts to images and videos with provenance, registered in the store.

The per-prompt work is a pure function of (prompt row, generator, seed): `generate_batch` (and
`generate_one`, both in `vhd.synth.batch`, re-exported here) return encoded bytes with their
provenance and touch no file or store, so an executor's workers can run them
(`vhd.synth.work.GenerateWork`, ``--executor ray``); `commit` is the driver-side half that writes
the file atomically under its content hash, registers it through the store's ingest path (dedup,
block lists and removals apply) and records the provenance. `generate` runs both over a CSV,
resumably: (prompt id, generator, seed) already done is skipped, and Ctrl-C finishes the
batches in flight before stopping. Whatever the executor, only this process writes.

A local run overlaps the host work of batch k (watermark, provenance, encoding, Content
Credentials, hashing, writing, the store commit) with the pipeline call of batch k+1, which runs
in one pipeline thread; each output is finished on a pool of host threads (`vhd.synth.overlap`):
at most two batches are in flight, outputs are committed in prompt order, and the files and store
rows are the same as a serial run's.

Example:
    >>> settings = GenerateSettings(device="cpu", size=(64, 64), steps=4)  # doctest: +SKIP
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     result = generate("prompts.csv", "sd:/tmp/tiny-sd", "synth/", store=store, settings=settings)
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.boundary import disk_full, one_line
from vhd.errors import ConfigError
from vhd.progress import ProgressFn, renamed_on_progress
from vhd.records import Kind, Source
from vhd.redaction import hide_local_spec
from vhd.store.sqlite import Store
from vhd.synth.batch import Generated as Generated
from vhd.synth.batch import generate_batch as generate_batch
from vhd.synth.batch import generate_one as generate_one
from vhd.synth.batch import identity as identity
from vhd.synth.batch import row_seed as row_seed
from vhd.synth.floor import floor_reason
from vhd.synth.generators import GenerateSettings, Generator, create_generator
from vhd.synth.overlap import overlapped
from vhd.synth.rows import FirstFrames, generated_files, read_prompt_csv
from vhd.synth.work import Batch, GenerateWork, check_worker_device

if TYPE_CHECKING:
    from vhd.execution import Executor, ExecutorOptions


@dataclass
class GenerateResult:
    """What `generate` did.

    Attributes:
        written: Files written (or found already written and registered now).
        samples: Sample ids registered in the store.
        done_before: Prompts skipped because an earlier run made them.
        refused: ``(prompt id, reason)`` refused by the safety floor.
        blacked_out: ``(prompt id, reason)`` flagged by the safety checker (not stored).
        failed: ``(prompt id or line, reason)`` that could not be generated or registered.
        interrupted: Ctrl-C stopped the run after the batches in flight.
        elapsed_s: Wall time.
        generate_s: Time inside the pipeline calls.
        host_s: Time in host work after the pipeline (encoding, signing, writing, committing),
            overlapped with the next pipeline call in a local run.
        run_id: The store's run id, if a store was given.
    """

    written: list[str] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)
    done_before: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)
    blacked_out: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    interrupted: bool = False
    elapsed_s: float = 0.0
    generate_s: float = 0.0
    host_s: float = 0.0
    run_id: str | None = None

    @property
    def per_second(self) -> float:
        """Outputs per second of pipeline time."""
        return len(self.written) / self.generate_s if self.generate_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary."""
        return {
            "written": len(self.written),
            "samples": len(self.samples),
            "done_before": self.done_before,
            "refused": [{"id": i, "reason": r} for i, r in self.refused],
            "blacked_out": [{"id": i, "reason": r} for i, r in self.blacked_out],
            "failed": [{"id": i, "reason": r} for i, r in self.failed],
            "interrupted": self.interrupted,
            "elapsed_s": round(self.elapsed_s, 3),
            "generate_s": round(self.generate_s, 3),
            "host_s": round(self.host_s, 3),
            "per_second": round(self.per_second, 3),
            "run_id": self.run_id,
        }


def commit(
    item: Generated,
    out_dir: str | os.PathLike[str],
    generator_spec: str,
    *,
    store: Store | None = None,
    keep_frames: str | os.PathLike[str] | None = None,
    block_list: Any = None,
    run_id: str | None = None,
    existing: Path | None = None,
) -> tuple[Path | None, str | None, str | None]:
    """Driver side: write the file atomically, register it as a synthetic sample, record provenance.

    Returns:
        ``(file, sample id, reason)``: the sample id when registered, else the reason (blocked,
        removed earlier, invalid).
    """
    from vhd.curate.ingest import IngestDefaults, ingest, register_written
    from vhd.synth.outputs import write_frames, write_output

    if existing is not None:
        path = existing
    else:
        assert item.data is not None
        path = write_output(out_dir, item.data, item.suffix, sha256=item.sha256)
        if keep_frames is not None and item.frames is not None and item.provenance.frames is not None:
            write_frames(keep_frames, path.stem, item.frames)
    if store is None:
        return path, None, None
    prov = item.provenance
    defaults = IngestDefaults(  # the sample's generator is exported: a local model folder is named local:NAME
        source=Source.SYNTHETIC, keyword=prov.keyword, generator=hide_local_spec(generator_spec), prompt=prov.prompt
    )
    if item.data is not None and item.sha256 is not None:  # the bytes are in hand: no second read or decode
        kind = Kind.VIDEO if prov.frames is not None else Kind.IMAGE
        result = register_written(
            path, item.data, item.sha256, store, kind=kind, frame_count=prov.frames or 1, defaults=defaults,
            block_list=block_list,
        )  # fmt: skip
    else:  # a file an interrupted run wrote: read it like any other
        result = ingest([path], store, defaults=defaults, block_list=block_list, jobs=1)
    problems = result.invalid + result.blocked + result.refused
    if problems:
        if result.refused and existing is None:
            path.unlink(missing_ok=True)  # removed on request earlier: do not keep a new copy
        return None, None, problems[0][1]
    sample_id = (result.added + result.updated + result.unchanged)[0]
    sample = store.get_sample(sample_id)
    data = prov.to_dict()
    if sample is not None:
        extra = {"prompt_id": prov.prompt_id, "seed": prov.seed, "negative_prompt": prov.negative_prompt}
        # the sample's meta is exported: it carries the record as embedded (local model paths hidden)
        sample.meta = {**sample.meta, **extra, "provenance": json.loads(prov.to_json())}
        store.upsert_sample(sample)
    from vhd.store.provenance import record_provenance

    record_provenance(store, sample_id=sample_id, path=str(path), data=data, generator=generator_spec, run_id=run_id)
    return path, sample_id, None


@contextlib.contextmanager
def finish_batch_on_interrupt(stop: threading.Event) -> Iterator[None]:
    """In the main thread: the first Ctrl-C sets ``stop`` (the batch in flight finishes); a second one aborts."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@renamed_on_progress
def generate(
    prompts: str | os.PathLike[str],
    generator: str | Generator,
    out: str | os.PathLike[str],
    *,
    store: Store | None = None,
    settings: GenerateSettings | None = None,
    seed: int = 0,
    limit: int | None = None,
    keep_frames: str | os.PathLike[str] | None = None,
    first_frames: str | os.PathLike[str] | None = None,
    block_list: Any = None,
    progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
    executor: str | Executor = "local",
    executor_options: ExecutorOptions | None = None,
) -> GenerateResult:
    """Generate every prompt of a CSV not generated yet, and register the outputs.

    Args:
        prompts: A CSV with a ``prompt`` column (see `vhd.synth.rows`).
        generator: ``NAME[:PATH_OR_ID]`` or a built `Generator`.
        out: Folder for the files (named by content hash).
        store: Register outputs as synthetic samples with provenance (and resume from it).
        settings: How to generate (ignored when ``generator`` is built already).
        seed: Base seed; each prompt's seed is a hash of it and the prompt id.
        limit: Only the first N prompts of the CSV.
        keep_frames: Also write each video's frames as ``DIR/<stem>/<stem>_<k:04d>.png``.
        first_frames: Image-to-video: a folder of images made earlier (found by PNG provenance).
        block_list: A `vhd.collect.blocklist.BlockList` (or its path) the ingest applies.
        progress: Called with (prompts done, prompts in total) after each batch.
        stop: Set it (or press Ctrl-C) to stop after the batches in flight.
        executor: ``ray`` generates on Ray actors, each loading the pipeline once (on the GPU
            ``executor_options.num_gpus`` gives it); files and store rows are written here, the
            same as a local run's. A built ``generator`` is rebuilt on the workers from its spec.
        executor_options: Workers, Ray address, CPUs and GPUs per worker.

    Raises:
        ConfigError: Bad CSV, generator or settings; ``--keep-frames`` inside ``out``; no GPU.
        ExecutorError: The workers cannot be started.
    """
    from vhd.execution import executor as find_executor

    start = time.perf_counter()
    gen = generator if isinstance(generator, Generator) else create_generator(generator, settings or GenerateSettings())
    runner = None if executor == "local" else find_executor(executor, executor_options)
    if runner is not None and runner.in_process:
        runner = None
    if runner is not None:
        check_worker_device(gen.settings, runner.options)
    out_dir = Path(os.path.abspath(out))
    if keep_frames is not None:
        frames_dir = Path(os.path.abspath(keep_frames))
        if frames_dir == out_dir or out_dir in frames_dir.parents:
            raise ConfigError("--keep-frames must be outside --out (frames there would be ingested as images)")
    rows, problems = read_prompt_csv(prompts)
    rows = rows[:limit] if limit is not None else rows
    result = GenerateResult(failed=[(f"line {n}", why) for n, why in problems])
    allowed = []
    for row in rows:
        why = floor_reason(row.prompt)
        if why:
            result.refused.append((row.id, why))
        else:
            allowed.append(row)
    on_disk = {
        (p.prompt_id, int(p.seed)): (path, p)
        for path, p in generated_files(out_dir)
        if p.same_model(gen.name, gen.model)
    }
    done = set(on_disk) if store is None else _done_in_store(store.create(), gen.spec)  # a writer: make it
    todo = [r for r in allowed if (r.id, row_seed(r, seed)) not in done]
    result.done_before = len(allowed) - len(todo)
    finder = FirstFrames(store, first_frames) if gen.needs_first_frame else None
    run_id = None
    if store is not None and todo:
        settings_record = {k: str(v) for k, v in vars(gen.settings).items() if k != "signing"}  # no key paths
        config = {"generator": gen.spec, "seed": seed, "settings": settings_record}
        digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
        run_id = store.start_run(
            config,
            digest,
            {"generator": gen.spec},
            hashlib.sha256(gen.template.encode()).hexdigest()[:16],
            "vhd generate",
        )
    result.run_id = run_id
    stop = stop or threading.Event()
    batch = max(1, gen.settings.batch_size)
    unit = "videos" if gen.kind is Kind.VIDEO else "images"
    handled = 0

    def save(item: Generated, existing: Path | None = None) -> None:
        if item.reason is not None:
            result.blacked_out.append((item.row.id, item.reason))
        else:
            _commit(result, item, out_dir, gen, store, keep_frames, block_list, run_id, existing)

    def advance(rows: int) -> None:
        nonlocal handled
        handled += rows
        if progress is not None:
            progress(handled, len(todo), info=f"{result.per_second:.2f} {unit}/s")

    def batches() -> Iterator[Batch]:
        """The batches to generate, planned lazily on the driver; stops pulling once ``stop`` is set.

        Files an interrupted run wrote but did not register travel with their batch
        (``Batch.found``) and are committed with it, in order.
        """
        for begin in range(0, len(todo), batch):
            if stop.is_set():
                result.interrupted = True
                return
            chunk = todo[begin : begin + batch]
            planned = Batch([], None, len(chunk))
            frames: list[tuple[Any, str]] = []
            for row in chunk:
                found = on_disk.get((row.id, row_seed(row, seed)))
                if found is not None:  # written by a run that stopped before registering it
                    planned.found.append((Generated(row, found[1], None, found[0].suffix), found[0]))
                    continue
                if finder is not None:
                    got = finder.load(row.id, row_seed(row, seed))
                    if isinstance(got, str):
                        result.failed.append((row.id, got))
                        continue
                    frames.append(got)
                planned.rows.append(row)
            planned.first_frames = frames or None
            yield planned

    try:
        with finish_batch_on_interrupt(stop):
            if runner is None:
                overlapped(gen, seed, batches(), save, advance, result)
            elif todo:
                work = GenerateWork.of(gen, seed, keep_frames is not None)
                _on_executor(runner, work, batches(), save, advance, result)
    except Exception as exc:  # a run-level fault (a full disk): the store's run says where it stopped
        if store is not None and run_id is not None:
            result.elapsed_s = time.perf_counter() - start
            with contextlib.suppress(Exception):  # the store may be on the full disk too
                store.finish_run(run_id, {**result.to_dict(), "stopped": one_line(str(exc))})
        raise
    result.elapsed_s = time.perf_counter() - start
    if store is not None and run_id is not None:
        store.finish_run(run_id, result.to_dict())
    return result


def _on_executor(
    runner: Executor,
    work: GenerateWork,
    planned: Iterator[Batch],
    save: Callable[..., None],
    advance: Callable[[int], None],
    result: GenerateResult,
) -> None:
    """Generate the batches on the executor's workers (two in flight per worker); results are saved here."""
    from vhd.execution import map_unordered

    began = time.perf_counter()

    def to_send() -> Iterator[Batch]:
        for item in planned:
            for found, path in item.found:
                save(found, path)
            if item.rows:
                yield item
            else:  # every row of it was done on the driver
                advance(item.size)

    sending = to_send()
    first = next(sending, None)
    if first is None:  # nothing left to generate (files found on disk were registered): no workers
        return
    in_flight = 2 * max(1, runner.options.workers)
    for item, made in map_unordered(runner, work, itertools.chain([first], sending), in_flight=in_flight):
        result.generate_s = time.perf_counter() - began
        if isinstance(made, BaseException):
            reason = str(made).splitlines()[0] if str(made) else type(made).__name__
            result.failed.extend((row.id, reason) for row in item.rows)
        else:
            for one in made:
                save(one)
        advance(item.size)


def _done_in_store(store: Store, spec: str) -> set[tuple[str, int]]:
    from vhd.store.provenance import provenance_done

    return provenance_done(store, spec)


def _commit(
    result: GenerateResult,
    item: Generated,
    out_dir: Path,
    gen: Generator,
    store: Store | None,
    keep_frames: Any,
    block_list: Any,
    run_id: str | None,
    existing: Path | None,
) -> None:
    try:
        path, sample_id, reason = commit(
            item, out_dir, gen.spec, store=store, keep_frames=keep_frames, block_list=block_list,
            run_id=run_id, existing=existing,
        )  # fmt: skip
    except (OSError, ConfigError) as exc:
        if disk_full(exc) is not None:
            raise  # a full disk fails every image after this one too: the run stops in one line
        result.failed.append((item.row.id, str(exc)))
        return
    if reason is not None:
        result.failed.append((item.row.id, reason))
        return
    if path is not None:
        result.written.append(str(path))
    if sample_id is not None:
        result.samples.append(sample_id)
