"""Fingerprints for duplicate search: a hash of the decoded pixels and perceptual hashes.

A fingerprint is computed in a worker process per file: the file is read once, decoded under
vhd's image limits (the same checks as the annotator), turned upright in RGB, and reduced to

- the sha256 of its bytes (the sample id),
- the sha256 of its decoded pixels (equal for exact duplicates, whatever the file format),
- its 64-bit pHash (``imagehash.phash``: a DCT of the 32x32 grayscale image), and
- what the keep policies need: size in pixels and bytes, and an encoding fidelity.

A video is represented by its sampled frames (`vhd.media.video.read_frames`): one pixel hash
over all of them and one pHash per frame. Nothing else is kept, so memory does not grow with
the size of the files; `iter_fingerprints` streams them, so it need not grow with their number
either (`vhd.curate.fptable` keeps them compactly).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.boundary import is_run_fault, item_boundary
from vhd.errors import MediaError, MissingDependencyError
from vhd.execution import Executor, Work

if TYPE_CHECKING:
    from PIL import Image

# The IJG standard luminance quantization table (ITU T.81 annex K), for JPEG quality estimates.
_STD_LUMA = (
    *(16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56),
    *(14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92),
    *(49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99),
)
_STD_LUMA_SUM = sum(_STD_LUMA)
_LOSSLESS = frozenset({"PNG", "BMP", "GIF"})
LOSSY_DEFAULT_FIDELITY = 90
"""Fidelity given to lossy formats whose quality cannot be read (WebP)."""


@dataclass(frozen=True, slots=True)
class Job:
    """What a worker needs to fingerprint one file (picklable).

    Attributes:
        order: Position of the file among the inputs.
        path: The file (or frame folder).
        kind: ``image`` or ``video``.
        frame_folder: ``path`` is a folder of extracted frames.
        n_frames: Frames sampled per video.
        first_frames: Window of frames sampled from.
        max_pixels: Image pixel limit.
        max_bytes: Image file size limit.
    """

    order: int
    path: str
    kind: str
    frame_folder: bool = False
    n_frames: int = 5
    first_frames: int = 4000
    max_pixels: int = 64_000_000
    max_bytes: int = 50 * 2**20


@dataclass(slots=True)
class Fingerprint:
    """A file reduced to what duplicate search needs.

    Attributes:
        order: Position of the file among the inputs.
        path: The file.
        kind: ``image`` or ``video``.
        sha256: sha256 of the file's bytes (for a frame folder, of its frames' hashes).
        pixels: sha256 of the decoded pixels (all sampled frames for a video).
        phashes: 64-bit pHash of the image, or of each sampled frame.
        width: Width in pixels (of the frames for a video).
        height: Height in pixels.
        size: Bytes on disk.
        fidelity: Encoding fidelity 1-100: 100 for lossless formats, the JPEG quality
            estimated from its quantization tables, `LOSSY_DEFAULT_FIDELITY` otherwise.
        error: Why the file could not be fingerprinted (the other fields are then empty).
    """

    order: int
    path: str
    kind: str
    sha256: str = ""
    pixels: str = ""
    phashes: tuple[int, ...] = field(default_factory=tuple)
    width: int = 0
    height: int = 0
    size: int = 0
    fidelity: int = 100
    error: str | None = None

    @property
    def area(self) -> int:
        """Width x height."""
        return self.width * self.height


def jpeg_quality(image: Image.Image) -> int | None:
    """Estimate a JPEG's quality setting (1-100) from its luminance quantization table."""
    tables = getattr(image, "quantization", None)
    if not tables or 0 not in tables:
        return None
    scale = 100.0 * float(sum(tables[0])) / _STD_LUMA_SUM
    quality = (200.0 - scale) / 2.0 if scale <= 100.0 else 5000.0 / scale
    return max(1, min(100, round(quality)))


def _fidelity(data: bytes) -> int:
    from vhd.media.image import open_untrusted

    try:
        with open_untrusted(data) as probe:
            if probe.format in ("JPEG", "MPO"):
                return jpeg_quality(probe) or LOSSY_DEFAULT_FIDELITY
            return 100 if probe.format in _LOSSLESS else LOSSY_DEFAULT_FIDELITY
    except Exception:
        return LOSSY_DEFAULT_FIDELITY


def phash(image: Image.Image) -> int:
    """Return imagehash's 64-bit pHash of an image as an integer (row-major bits)."""
    try:
        import imagehash
    except ImportError as exc:
        raise MissingDependencyError("imagehash", "dedup") from exc
    bits = imagehash.phash(image).hash.flatten()
    value = 0
    for bit in bits:
        value = (value << 1) | int(bit)
    return value


def _pixel_digest(images: list[Image.Image]) -> str:
    digest = hashlib.sha256()
    for img in images:
        digest.update(f"{img.mode}:{img.width}x{img.height};".encode())
        digest.update(img.tobytes())
    return digest.hexdigest()


def _image(job: Job) -> Fingerprint:
    from vhd.media.image import ImageLimits, open_image_bytes, read_image_bytes

    limits = ImageLimits(max_pixels=job.max_pixels, max_bytes=job.max_bytes)
    data = read_image_bytes(job.path, limits)
    img = open_image_bytes(data, limits)
    return Fingerprint(
        order=job.order,
        path=job.path,
        kind="image",
        sha256=hashlib.sha256(data).hexdigest(),
        pixels=_pixel_digest([img]),
        phashes=(phash(img),),
        width=img.width,
        height=img.height,
        size=len(data),
        fidelity=_fidelity(data),
    )


def _frames(job: Job) -> tuple[list[Image.Image], str, int]:
    """Return a video's sampled frames, its id and its size in bytes."""
    from vhd.media.budget import decode_budget, video_file_cost
    from vhd.media.discover import frame_folder_frames
    from vhd.media.hashing import combine_hashes, sha256_file
    from vhd.media.image import ImageLimits, open_image
    from vhd.media.video import frame_indices, read_frames

    path = Path(job.path)
    if job.frame_folder:
        files = frame_folder_frames(path)
        if files is None:
            raise MediaError("folder is not (or no longer) a frame folder of <stem>_<k:04d> images")
        limits = ImageLimits(max_pixels=job.max_pixels, max_bytes=job.max_bytes)
        chosen = frame_indices(len(files), job.n_frames, job.first_frames)
        images = [open_image(files[k], limits) for k in chosen]
        return images, combine_hashes(sha256_file(f) for f in files), sum(f.stat().st_size for f in files)
    with decode_budget().hold(video_file_cost(path, job.n_frames)):  # shared by the worker threads
        frames = read_frames(path, job.n_frames, job.first_frames)
    return frames.images, sha256_file(path), path.stat().st_size


def _video(job: Job) -> Fingerprint:
    images, digest, size = _frames(job)
    return Fingerprint(
        order=job.order,
        path=job.path,
        kind="video",
        sha256=digest,
        pixels=_pixel_digest(images),
        phashes=tuple(phash(img) for img in images),
        width=images[0].width if images else 0,
        height=images[0].height if images else 0,
        size=size,
        fidelity=100,
    )


def fingerprint(job: Job) -> Fingerprint:
    """Fingerprint one file; failures come back as a fingerprint with ``error`` set.

    Args:
        job: The file and the settings.

    Returns:
        The fingerprint.

    Every error of the file's own (unreadable, damaged, a missing extra such as PyAV for a video,
    or anything unexpected) is its ``error``; run faults (a full disk, an interrupt) pass.
    """
    with item_boundary(job) as b:
        try:
            return _video(job) if job.kind == "video" else _image(job)
        except OSError as exc:
            if is_run_fault(exc):
                raise
            error = f"cannot read file ({exc.strerror})"
    return Fingerprint(order=job.order, path=job.path, kind=job.kind, error=b.failure.reason if b.failure else error)


class FingerprintWork(Work[Job, Fingerprint]):
    """`fingerprint` as executor work (``vhd dedup --executor ray``): files travel by path."""

    async def setup(self) -> None:
        """Fail on a worker without imagehash before any file."""
        from vhd.errors import require

        require("imagehash", "dedup")

    async def run(self, item: Job) -> Fingerprint:
        """Fingerprint one file (in a thread: decoding and hashing block)."""
        return await asyncio.to_thread(fingerprint, item)


def checked_jobs(jobs: Iterable[Job]) -> Iterator[Job]:
    """Pass jobs through, failing on the first video when PyAV is missing (before it is sent to a worker)."""
    from vhd.errors import require

    need_av = True
    for job in jobs:
        if need_av and job.kind == "video":
            require("av", "video")
            need_av = False
        yield job


def fingerprint_many(
    jobs: Iterable[Job], workers: int, on_done: Any = None, *, executor: Executor | None = None
) -> list[Fingerprint]:
    """Fingerprint files in ``workers`` processes (in this process when 1), in input order.

    The jobs are read lazily (a generator streams: no list of jobs is held); the fingerprints
    are returned as a list (`iter_fingerprints` streams them instead).

    Args:
        jobs: The files, in order (``order`` counting from 0).
        workers: Worker processes.
        on_done: Called with the number of files done so far, now and then.
        executor: Fingerprint on this executor's workers instead (``workers`` is then how many
            files are in flight per executor worker).

    Returns:
        One fingerprint per job, in order.
    """
    found = list(iter_fingerprints(jobs, workers, on_done, executor=executor))
    if executor is not None and not executor.in_process:
        found.sort(key=lambda fp: fp.order)
    return found


def iter_fingerprints(
    jobs: Iterable[Job], workers: int, on_done: Any = None, *, executor: Executor | None = None
) -> Iterator[Fingerprint]:
    """Fingerprint files as `fingerprint_many` does, yielding each fingerprint as it is ready.

    Here they come in input order; on an executor in the order they finish (``order`` says
    where each belongs). Nothing is kept once yielded.

    Args:
        jobs: The files (``order`` counting from 0).
        workers: Worker processes.
        on_done: Called with the number of files done so far, now and then.
        executor: Fingerprint on this executor's workers instead.

    Yields:
        One fingerprint per job.

    Raises:
        MissingDependencyError: imagehash is missing here (or a worker), or PyAV before the first video.
    """
    from vhd.errors import require

    require("imagehash", "dedup")  # fail here, once, rather than in every worker
    source = checked_jobs(jobs)
    if executor is not None and not executor.in_process:
        yield from _on_executor(executor, source, workers, on_done)
        return
    head = list(itertools.islice(source, 2 * workers))
    done = 0
    if workers <= 1 or len(head) < 2 * workers:
        for job in itertools.chain(head, source):
            result = fingerprint(job)
            done += 1
            if on_done is not None:
                on_done(done)
            yield result
        return
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers) as pool:
        for result in pool.imap(fingerprint, itertools.chain(head, source), chunksize=16):
            done += 1
            if on_done is not None and done % 64 == 0:
                on_done(done)
            yield result
    if on_done is not None:
        on_done(done)


def _on_executor(executor: Executor, jobs: Iterable[Job], workers: int, on_done: Any) -> Iterator[Fingerprint]:
    """`iter_fingerprints` on an executor: results stream back in the order they finish."""
    from vhd.execution import map_unordered

    done = 0
    in_flight = max(2, workers) * max(1, executor.options.workers)
    for job, result in map_unordered(executor, FingerprintWork(), jobs, in_flight=in_flight):
        if isinstance(result, MissingDependencyError):
            raise result
        if isinstance(result, BaseException):  # a worker lost for good, or a bug: reported per file
            result = Fingerprint(order=job.order, path=job.path, kind=job.kind, error=str(result).splitlines()[0])
        done += 1
        if on_done is not None and done % 64 == 0:
            on_done(done)
        yield result
    if on_done is not None:
        on_done(done)
