"""The per-prompt half of `vhd generate`: prompt rows in, encoded bytes with provenance out.

`generate_batch` (and `generate_one`) are pure functions of (prompt rows, generator, seed): they
touch no file and no store, so an executor can run them anywhere (`vhd.synth.work`); the driver
writes and registers what they return (`vhd.synth.generate.commit`). It is two halves a local run
overlaps: `plan_jobs` plus `Generator.run` (the pipeline call) and `finish_batch` (host work:
converting to uint8, watermark, provenance, encoding, Content Credentials, hashing; `finish_one`
is one output's share of it, which a local run spreads over a few threads).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vhd.records import Kind
from vhd.synth.generators import Frames, Generator, Job, apply_template
from vhd.synth.provenance import Provenance, derive_seed, folder_fingerprint, versions
from vhd.synth.rows import PromptRow


@dataclass
class Generated:
    """One prompt's output, ready to commit (no file written yet).

    Attributes:
        row: The prompt row.
        provenance: What made it (embedded in ``data``).
        data: PNG, WebP or MP4 bytes (None when ``reason`` says why there is none).
        suffix: ``.png``, ``.webp`` or ``.mp4``.
        frames: The uint8 frames (for ``--keep-frames``).
        reason: Why it is not a sample (blacked out by the safety checker), else None.
        sha256: Hex digest of ``data`` (its file name and sample id), when computed.
    """

    row: PromptRow
    provenance: Provenance
    data: bytes | None
    suffix: str
    frames: Any = None
    reason: str | None = None
    sha256: str | None = None


def identity(generator: Generator) -> dict[str, Any]:
    """What the generator contributes to every provenance record (computed once: loads the pipeline)."""
    import torch

    from vhd.synth.credentials import credentials_state
    from vhd.synth.outputs import encoding_name

    generator.load()
    model = generator.model
    local = Path(model).expanduser()
    revision = folder_fingerprint(local) if local.is_dir() else (generator.settings.revision or "main")
    components = {}
    for name, ident in generator.loaded_components.items():
        part = Path(ident).expanduser()
        components[name] = f"{ident}@{folder_fingerprint(part) if part.exists() else 'main'}"
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
        "encoding": "h264:crf18"
        if generator.kind is Kind.VIDEO
        else encoding_name(generator.settings.image_format, generator.settings.png_level),
        "content_credentials": credentials_state(generator.settings),
        "speed": generator.speed_options(),
    }


def make_job(generator: Generator, row: PromptRow, seed: int, first_frame: Any = None) -> Job:
    """The pipeline job of one row."""
    negative = row.negative_prompt or generator.settings.negative_prompt
    return Job(row.id, apply_template(generator.template, row.prompt), negative, seed, first_frame)


def row_seed(row: PromptRow, base_seed: int) -> int:
    """The row's own seed, or the one derived from (``--seed``, prompt id)."""
    return row.seed if row.seed is not None else derive_seed(base_seed, row.id)


def plan_jobs(
    generator: Generator,
    rows: Sequence[PromptRow],
    *,
    base_seed: int = 0,
    first_frames: Sequence[tuple[Any, str]] | None = None,
) -> list[Job]:
    """The pipeline jobs of a batch of rows (template applied, seeds derived), in order."""
    images = [f[0] for f in first_frames] if first_frames else [None] * len(rows)
    return [make_job(generator, r, row_seed(r, base_seed), im) for r, im in zip(rows, images, strict=True)]


def finish_batch(
    generator: Generator,
    rows: Sequence[PromptRow],
    jobs: Sequence[Job],
    results: Sequence[Frames],
    *,
    ident: dict[str, Any],
    first_frames: Sequence[tuple[Any, str]] | None = None,
) -> list[Generated]:
    """The host half of a batch: watermark, provenance, encoding, Content Credentials and hash of each output.

    Args:
        generator: The generator that ran the jobs.
        rows: The prompt rows.
        jobs: Their jobs (`plan_jobs`).
        results: What `Generator.run` made of them.
        ident: `identity` of the generator.
        first_frames: For image-to-video, ``(PIL image, sha256 of its file)`` per row.

    Returns:
        One `Generated` per row, in order.
    """
    marker = watermarker(generator)
    return [
        finish_one(generator, row, job, made, ident=ident, first_frame=first_frames[k] if first_frames else None,
                   marker=marker, called=call_size(generator, jobs))
        for k, (row, job, made) in enumerate(zip(rows, jobs, results, strict=True))
    ]  # fmt: skip


def call_size(generator: Generator, jobs: Sequence[Any]) -> int:
    """The prompts one pipeline call held, as provenance records it: the call's size changes pixels.

    Not the ``--batch-size`` setting: a resumed run's or the last batch's call holds fewer, and
    image-to-video runs one prompt a call.
    """
    return len(jobs) if generator.batchable else 1


def watermarker(generator: Generator) -> Any:
    """The `vhd.synth.outputs.Watermarker` the generator's settings ask for, else None (share it between threads)."""
    from vhd.synth.outputs import Watermarker

    return Watermarker() if generator.settings.watermark else None


def finish_one(
    generator: Generator,
    row: PromptRow,
    job: Job,
    made: Frames,
    *,
    ident: dict[str, Any],
    first_frame: tuple[Any, str] | None = None,
    marker: Any = None,
    called: int | None = None,
) -> Generated:
    """The host half of one output (`finish_batch` for one row); thread-safe, so outputs can be finished in parallel.

    Args:
        generator: The generator that ran the job.
        row: The prompt row.
        job: Its job.
        made: What `Generator.run` made of it (float frames are converted to uint8 here, off the
            pipeline's thread).
        ident: `identity` of the generator.
        first_frame: For image-to-video, ``(PIL image, sha256 of its file)``.
        marker: `watermarker` of the generator (None: no watermark).
        called: The prompts the pipeline call held (`call_size`; None: the generator's setting).
    """
    from vhd.synth.credentials import sign_output
    from vhd.synth.outputs import encode_image, encode_mp4, image_suffix

    settings = generator.settings
    made = made.as_uint8()
    frames = made.frames
    n, height, width = frames.shape[:3]
    mark = "off"
    if marker is not None:
        mark = "on" if marker.applies(width, height) else "skipped"
        if not made.blacked_out:  # a blacked-out output is never written: its pixels need no mark
            frames = marker.apply(frames)
    prov = Provenance(
        **{
            k2: v
            for k2, v in {**ident, **({} if called is None else {"batch_size": called})}.items()
            if k2 in Provenance.__dataclass_fields__
        },
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
        first_frame_sha256=first_frame[1] if first_frame else None,
    )
    if made.blacked_out:
        reason = "blacked out by the safety checker (pass --no-safety-checker to keep such outputs)"
        return Generated(row, prov, None, "", None, reason)
    if generator.kind is Kind.VIDEO:
        data, suffix = encode_mp4(frames, generator.fps or 8, prov.to_json()), ".mp4"
    else:
        fmt = settings.image_format
        data = encode_image(frames[0], prov.to_json(), fmt, settings.png_level)
        suffix = image_suffix(fmt)
    data = sign_output(data, suffix, prov, settings)
    return Generated(row, prov, data, suffix, frames, sha256=hashlib.sha256(data).hexdigest())


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
    ident = ident or identity(generator)
    jobs = plan_jobs(generator, rows, base_seed=base_seed, first_frames=first_frames)
    results = generator.run(jobs)
    return finish_batch(generator, rows, jobs, results, ident=ident, first_frames=first_frames)


def generate_one(generator: Generator, row: PromptRow, *, base_seed: int = 0, first_frame: Any = None) -> Generated:
    """`generate_batch` for a single row (``first_frame``: ``(PIL image, sha256)`` for image-to-video)."""
    return generate_batch(generator, [row], base_seed=base_seed, first_frames=[first_frame] if first_frame else None)[0]
