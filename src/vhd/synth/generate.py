"""`vhd generate`: prompts to images and videos with provenance, registered in the store.

The per-prompt work is a pure function of (prompt row, generator, seed): `generate_batch` (and
`generate_one`) return encoded bytes with their provenance and touch no file or store, so an
executor (Ray) can run them anywhere; `commit` is the driver-side half that writes the file
atomically under its content hash, registers it through the store's ingest path (dedup,
block lists and removals apply) and records the provenance. `generate` runs both over a CSV,
resumably: (prompt id, generator, seed) already done is skipped, and Ctrl-C finishes the batch in
flight before stopping.

Example:
    >>> settings = GenerateSettings(device="cpu", size=(64, 64), steps=4)  # doctest: +SKIP
    >>> with Store("run.db") as store:  # doctest: +SKIP
    ...     result = generate("prompts.csv", "sd:/tmp/tiny-sd", "synth/", store=store, settings=settings)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError
from vhd.progress import ProgressFn
from vhd.records import Kind, Source
from vhd.store.sqlite import Store
from vhd.synth.floor import floor_reason
from vhd.synth.generators import GenerateSettings, Generator, Job, apply_template, create_generator
from vhd.synth.provenance import Provenance, derive_seed, folder_fingerprint, versions
from vhd.synth.rows import FirstFrames, PromptRow, generated_files, read_prompt_csv


@dataclass
class Generated:
    """One prompt's output, ready to commit (no file written yet).

    Attributes:
        row: The prompt row.
        provenance: What made it (embedded in ``data``).
        data: PNG or MP4 bytes (None when ``reason`` says why there is none).
        suffix: ``.png`` or ``.mp4``.
        frames: The uint8 frames (for ``--keep-frames``).
        reason: Why it is not a sample (blacked out by the safety checker), else None.
    """

    row: PromptRow
    provenance: Provenance
    data: bytes | None
    suffix: str
    frames: Any = None
    reason: str | None = None


def identity(generator: Generator) -> dict[str, Any]:
    """What the generator contributes to every provenance record (computed once: loads the pipeline)."""
    import torch

    generator.load()
    model = generator.model
    local = Path(model).expanduser()
    revision = folder_fingerprint(local) if local.is_dir() else (generator.settings.revision or "main")
    components = {}
    for name, ident in generator.loaded_components.items():
        part = Path(ident).expanduser()
        components[name] = f"{ident}@{folder_fingerprint(part) if part.is_dir() else 'main'}"
    return {
        "generator": generator.name,
        "model": model,
        "model_revision": revision,
        "template": generator.template,
        "steps": generator.steps,
        "guidance": float(generator.guidance),
        "fps": generator.fps,
        "scheduler": generator.scheduler_name(),
        "device": generator.device,
        "dtype": generator.dtype,
        "batch_size": generator.settings.batch_size,
        "torch_threads": torch.get_num_threads(),
        "safety_checker": generator.safety_state(),
        "components": components,
        "versions": versions(),
    }


def make_job(generator: Generator, row: PromptRow, seed: int, first_frame: Any = None) -> Job:
    """The pipeline job of one row."""
    negative = row.negative_prompt or generator.settings.negative_prompt
    return Job(row.id, apply_template(generator.template, row.prompt), negative, seed, first_frame)


def row_seed(row: PromptRow, base_seed: int) -> int:
    """The row's own seed, or the one derived from (``--seed``, prompt id)."""
    return row.seed if row.seed is not None else derive_seed(base_seed, row.id)


def generate_batch(
    generator: Generator,
    rows: Sequence[PromptRow],
    *,
    base_seed: int = 0,
    first_frames: Sequence[tuple[Any, str]] | None = None,
    ident: dict[str, Any] | None = None,
) -> list[Generated]:
    """Generate a batch of prompts: a pure function of (rows, generator, seed); nothing is written.

    Args:
        generator: The generator (loaded on first use).
        rows: The prompt rows (the safety floor is the caller's: see `generate`).
        base_seed: ``--seed``; each row's seed is derived from it and the prompt id.
        first_frames: For image-to-video, ``(PIL image, sha256 of its file)`` per row.
        ident: `identity` of the generator, when the caller has it already.

    Returns:
        One `Generated` per row, in order.
    """
    from vhd.synth.outputs import Watermarker, encode_mp4, encode_png

    ident = ident or identity(generator)
    seeds = [row_seed(r, base_seed) for r in rows]
    images = [f[0] for f in first_frames] if first_frames else [None] * len(rows)
    jobs = [make_job(generator, r, s, im) for r, s, im in zip(rows, seeds, images, strict=True)]
    results = generator.run(jobs)
    marker = Watermarker() if generator.settings.watermark else None
    out: list[Generated] = []
    for k, (row, job, made) in enumerate(zip(rows, jobs, results, strict=True)):
        frames = made.frames
        n, height, width = frames.shape[:3]
        mark = "off"
        if marker is not None:
            mark = "on" if marker.applies(width, height) else "skipped"
            frames = marker.apply(frames)
        prov = Provenance(
            **{k2: v for k2, v in ident.items() if k2 in Provenance.__dataclass_fields__},
            prompt=row.prompt,
            full_prompt=job.full_prompt,
            prompt_id=row.id,
            keyword=row.keyword,
            negative_prompt=job.negative_prompt,
            seed=job.seed,
            width=int(width),
            height=int(height),
            frames=int(n) if generator.kind is Kind.VIDEO else None,
            watermark=mark,
            first_frame_sha256=first_frames[k][1] if first_frames else None,
        )
        if made.blacked_out:
            reason = "blacked out by the safety checker (pass --no-safety-checker to keep such outputs)"
            out.append(Generated(row, prov, None, "", None, reason))
            continue
        if generator.kind is Kind.VIDEO:
            data, suffix = encode_mp4(frames, generator.fps or 8, prov.to_json()), ".mp4"
        else:
            data, suffix = encode_png(frames[0], prov.to_json()), ".png"
        out.append(Generated(row, prov, data, suffix, frames))
    return out


def generate_one(generator: Generator, row: PromptRow, *, base_seed: int = 0, first_frame: Any = None) -> Generated:
    """`generate_batch` for a single row (``first_frame``: ``(PIL image, sha256)`` for image-to-video)."""
    return generate_batch(generator, [row], base_seed=base_seed, first_frames=[first_frame] if first_frame else None)[0]


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
        interrupted: Ctrl-C stopped the run after the batch in flight.
        elapsed_s: Wall time.
        generate_s: Time inside the pipeline calls.
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
    from vhd.curate.ingest import IngestDefaults, ingest
    from vhd.synth.outputs import write_frames, write_output

    if existing is not None:
        path = existing
    else:
        assert item.data is not None
        path = write_output(out_dir, item.data, item.suffix)
        if keep_frames is not None and item.frames is not None and item.provenance.frames is not None:
            write_frames(keep_frames, path.stem, item.frames)
    if store is None:
        return path, None, None
    prov = item.provenance
    defaults = IngestDefaults(
        source=Source.SYNTHETIC, keyword=prov.keyword, generator=generator_spec, prompt=prov.prompt
    )
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
        sample.meta = {**sample.meta, **extra, "provenance": data}
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
    on_progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
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
        on_progress: Called with (prompts done, prompts in total) after each batch.
        stop: Set it (or press Ctrl-C) to stop after the batch in flight.

    Raises:
        ConfigError: Bad CSV, generator or settings; ``--keep-frames`` inside ``out``; no GPU.
    """
    start = time.perf_counter()
    gen = generator if isinstance(generator, Generator) else create_generator(generator, settings or GenerateSettings())
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
        if f"{p.generator}:{p.model}" == gen.spec
    }
    done = set(on_disk) if store is None else _done_in_store(store, gen.spec)
    todo = [r for r in allowed if (r.id, row_seed(r, seed)) not in done]
    result.done_before = len(allowed) - len(todo)
    finder = FirstFrames(store, first_frames) if gen.needs_first_frame else None
    run_id = None
    if store is not None and todo:
        config = {"generator": gen.spec, "seed": seed, "settings": {k: str(v) for k, v in vars(gen.settings).items()}}
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
    ident: dict[str, Any] | None = None
    batch = max(1, gen.settings.batch_size)
    with finish_batch_on_interrupt(stop):
        for begin in range(0, len(todo), batch):
            if stop.is_set():
                result.interrupted = True
                break
            chunk = todo[begin : begin + batch]
            fresh: list[PromptRow] = []
            frames: list[tuple[Any, str]] = []
            for row in chunk:
                found = on_disk.get((row.id, row_seed(row, seed)))
                if found is not None:  # written by a run that stopped before registering it
                    item = Generated(row, found[1], None, found[0].suffix)
                    _commit(result, item, out_dir, gen, store, keep_frames, block_list, run_id, found[0])
                    continue
                if finder is not None:
                    got = finder.load(row.id, row_seed(row, seed))
                    if isinstance(got, str):
                        result.failed.append((row.id, got))
                        continue
                    frames.append(got)
                fresh.append(row)
            if fresh:
                if ident is None:
                    ident = identity(gen)
                began = time.perf_counter()
                made = generate_batch(gen, fresh, base_seed=seed, first_frames=frames or None, ident=ident)
                result.generate_s += time.perf_counter() - began
                for item in made:
                    if item.reason is not None:
                        result.blacked_out.append((item.row.id, item.reason))
                    else:
                        _commit(result, item, out_dir, gen, store, keep_frames, block_list, run_id, None)
            if on_progress is not None:
                rate = f"{result.per_second:.2f} {'videos' if gen.kind is Kind.VIDEO else 'images'}/s"
                on_progress(min(begin + batch, len(todo)), len(todo), info=rate)
    result.elapsed_s = time.perf_counter() - start
    if store is not None and run_id is not None:
        store.finish_run(run_id, result.to_dict())
    return result


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
        result.failed.append((item.row.id, str(exc)))
        return
    if reason is not None:
        result.failed.append((item.row.id, reason))
        return
    if path is not None:
        result.written.append(str(path))
    if sample_id is not None:
        result.samples.append(sample_id)
