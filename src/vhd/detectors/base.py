"""The one interface every harmfulness detector implements, and what it returns.

A detector judges one sample (an image, or a video's sampled frames) and returns a
`Prediction`. Detectors that only take single images judge each frame of a video and the video
is harmful when any frame is (the paper's rule); `Detector.predict` does that for them.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from vhd.media.encoded import EncodedImage
from vhd.records import Kind, Segment
from vhd.redaction import redact

if TYPE_CHECKING:
    from vhd.media.load import MediaSettings

T = TypeVar("T")


@dataclass
class Prediction:
    """A detector's verdict on one sample.

    Attributes:
        harmful: The binary decision; None when the detector failed or abstained.
        score: P(harmful) in [0, 1] where the method has one (for ROC/PR curves, calibration).
        labels: Raw labels the detector fired, with their confidences (e.g. NudeNet classes).
        categories: Taxonomy codes (A-J...) of the harm it names, when it can name one; empty
            for unharmful or when it cannot.
        raw: The raw answer text, for model-based detectors.
        error: Why the detector failed on this sample (harmful is then None).
        latency_s: Wall time spent on the sample.
        boxes: Object detections behind the decision, for detectors that find objects (HOD):
            ``{"label", "score", "box": [x1, y1, x2, y2]}`` in image pixels, plus ``"frame"``
            (the frame's index) in a video's combined prediction.
        segments: Where in a video the detector found harm (harmful spans, `vhd.records.Segment`);
            None when it was not asked or cannot say (see `Detector.predict_segments`).
        severity: The policy's severity level name given with a harmful decision, for
            detectors that give one (the debate's judge under a policy with a scale); else None.
    """

    harmful: bool | None
    score: float | None = None
    labels: dict[str, float] = field(default_factory=dict)
    categories: list[str] = field(default_factory=list)
    raw: str | None = None
    error: str | None = None
    latency_s: float = 0.0
    boxes: list[dict[str, Any]] = field(default_factory=list)
    segments: list[Segment] | None = None
    severity: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (the prediction cache stores this)."""
        data: dict[str, Any] = {
            "harmful": self.harmful,
            "score": self.score,
            "labels": self.labels,
            "categories": self.categories,
            "raw": self.raw,
            "error": self.error,
            "latency_s": self.latency_s,
        }
        if self.boxes:
            data["boxes"] = self.boxes
        if self.segments is not None:
            data["segments"] = [s.to_dict() for s in self.segments]
        if self.severity is not None:
            data["severity"] = self.severity
        return data

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Prediction:
        """Inverse of `to_dict`."""
        keys = ("harmful", "score", "labels", "categories", "raw", "error", "latency_s", "boxes", "severity")
        pred = cls(**{k: d[k] for k in keys if k in d})
        if d.get("segments") is not None:
            pred.segments = [Segment.from_dict(s) for s in d["segments"]]
        return pred


def api_key(env: str, label: str, what: str) -> str:
    """Read an API key from the environment variable ``env``, or fail in one line.

    Args:
        env: The variable's name.
        label: The detector's label (for the fix in the message).
        what: What the key is, e.g. "your Hive visual moderation API key".

    Raises:
        BackendUnavailableError: The variable is unset or empty.
    """
    import os

    from vhd.errors import BackendUnavailableError

    key = os.environ.get(env, "").strip()
    if not key:
        raise BackendUnavailableError(
            f"{env} is not set: export {what} (or name another variable with --set {label}.api_key_env=VAR)"
        )
    return key


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def best_scores(detections: Sequence[Mapping[str, Any]], key: str) -> dict[str, float]:
    """Each detected class (``detection[key]``) with its highest ``score``, in first-seen order."""
    labels: dict[str, float] = {}
    for det in detections:
        name, score = str(det[key]), float(det["score"])
        labels[name] = max(score, labels.get(name, score))
    return labels


async def judge_one_image(
    name: str,
    images: Sequence[EncodedImage],
    run: Callable[[EncodedImage], T],
    judge: Callable[[T], Prediction],
    *,
    fatal: tuple[type[BaseException], ...],
) -> Prediction:
    """A local single-image model's `Detector.predict_images`: ``run`` in a thread, then ``judge``.

    Args:
        name: The detector's name, for the error messages.
        images: What `Detector.predict` passes (one image; videos arrive frame by frame).
        run: The blocking model call on one image.
        judge: Turns ``run``'s result into a prediction.
        fatal: Errors that stop the whole run (a missing extra, missing weights); any other
            error becomes this sample's ``error``.

    Returns:
        The prediction, with its wall time in ``latency_s``.
    """
    start = time.perf_counter()
    if len(images) != 1:
        return Prediction(None, error=f"{name} judges one image at a time, got {len(images)}")
    try:
        result = await asyncio.to_thread(run, images[0])
    except fatal:
        raise
    except Exception as exc:
        return Prediction(None, error=f"{name} failed: {first_line(exc)}", latency_s=time.perf_counter() - start)
    pred = judge(result)
    pred.latency_s = time.perf_counter() - start
    return pred


def combine_frames(frames: Sequence[Prediction]) -> Prediction:
    """A video's prediction from its frames': harmful when any frame is, score = the highest.

    Failed frames are ignored unless every frame failed.
    """
    ok = [p for p in frames if p.harmful is not None]
    if not ok:
        errors = "; ".join(sorted({p.error or "no decision" for p in frames}))
        return Prediction(None, error=errors or "no frames", latency_s=sum(p.latency_s for p in frames))
    labels: dict[str, float] = {}
    for p in ok:
        for name, conf in p.labels.items():
            labels[name] = max(conf, labels.get(name, conf))
    categories = list(dict.fromkeys(c for p in ok for c in p.categories))
    scores = [p.score for p in ok if p.score is not None]
    boxes = [{**box, "frame": index} for index, p in enumerate(frames) for box in p.boxes]
    return Prediction(
        harmful=any(p.harmful for p in ok),
        score=max(scores) if scores else None,
        labels=labels,
        categories=categories,
        raw=" | ".join(p.raw for p in ok if p.raw) or None,
        latency_s=sum(p.latency_s for p in frames),
        boxes=boxes,
    )


class Detector(abc.ABC):
    """A harmfulness detector, registered by name (see `vhd.detectors.registry`).

    Subclasses set `name` (and `video_native` when they take several frames at once), accept
    ``(label, model, options)`` and implement `predict_images`.

    Attributes:
        name: Registry name (``nudenet``, ``vlm``, ``debate``, ...).
        video_native: Whether `predict_images` understands a video's frames together; when
            False, each frame is judged alone and combined with `combine_frames`.
        multiclass: Whether predictions name categories (for multi-class accuracy).
        wants_original: Whether images should reach `predict_images` as their original file
            bytes (checked, not re-encoded) rather than downscaled for a vision-language model:
            for local detectors that decode files themselves, such as NudeNet.
        label: The user's label for this detector in reports (``[LABEL=]NAME[:MODEL]``).
        model: The model spec after ``NAME:``, when the detector takes one.
        options: Options from ``--set LABEL.key=value`` or the config's ``[detectors.LABEL]``.
    """

    name: ClassVar[str] = ""
    video_native: ClassVar[bool] = False
    wants_original: ClassVar[bool] = False
    multiclass: ClassVar[bool] = False

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        self.label = label
        self.model = model
        self.options = dict(options or {})

    def identity(self) -> dict[str, Any]:
        """What makes this detector's predictions what they are (the prediction cache key); never secrets."""
        return {"name": self.name, "model": self.model, "options": redact(self.options)}

    async def check(self) -> None:  # noqa: B027 - optional hook
        """Fail fast, before any work, when the detector cannot run (missing weights, key, endpoint)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release models and connections."""

    @abc.abstractmethod
    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Judge one image, or (``video_native``) a video's frames in order."""

    @property
    def judges_video_files(self) -> bool:
        """Whether the detector judges a video from its file (`predict_video_file`), not from its sampled frames.

        False by default; the ``debate`` detector reads the file when its configuration judges
        videos segment by segment (``[video] segments = true``).
        """
        return False

    async def predict_video_file(
        self,
        path: Path,
        settings: MediaSettings | None,
        whole_video: Callable[[], Sequence[EncodedImage]],
    ) -> Prediction:
        """Judge a video from its file, for a detector whose `judges_video_files` is True.

        Args:
            path: The video file.
            settings: How frames are prepared for the models (None: the defaults).
            whole_video: Reads the frames `predict` would have been given (the VHD11K protocol's
                five), for a detector that falls back to them; blocking, so call it in a thread.

        Raises:
            NotImplementedError: A detector that judges a video's sampled frames only.
        """
        raise NotImplementedError(f"{self.name} judges a video's sampled frames, not its file")

    @property
    def scores_frames(self) -> bool:
        """Whether the detector judges a video's frames one at a time (so can score frames over time)."""
        return not self.video_native

    async def score_frames(self, frames: Sequence[EncodedImage]) -> list[float | None]:
        """Each frame's P(harmful) (1.0 / 0.0 for a yes/no answer, None where it failed), frame by frame.

        Raises:
            NotImplementedError: A video-native detector, which judges frames only together.
        """
        if not self.scores_frames:
            raise NotImplementedError(f"{self.name} judges a video's frames together, not one at a time")
        out: list[float | None] = []
        for frame in frames:
            pred = await self.predict_images(Kind.IMAGE, [frame])
            if pred.harmful is None:
                out.append(None)
            else:
                out.append(pred.score if pred.score is not None else float(pred.harmful))
        return out

    async def predict_segments(
        self,
        times: Sequence[float],
        frames: Sequence[EncodedImage],
        *,
        end_s: float | None = None,
        threshold: float | None = None,
        low: float | None = None,
        merge_gap_s: float | None = None,
        min_duration_s: float = 0.0,
    ) -> list[Segment] | None:
        """Where in a video the harm is, from frames sampled over time (``times``: each frame's seconds).

        A frame-scoring detector scores each frame (`score_frames`) and the scores become spans
        through `vhd.detectors.timeline.spans_from_scores` (hysteresis ``threshold`` / ``low``,
        spans ``merge_gap_s`` apart joined); a video-native detector returns None unless it
        overrides this.

        Returns:
            The harmful spans, or None when the detector cannot place harm in time.
        """
        from vhd.detectors import timeline

        if not self.scores_frames:
            return None
        scores = await self.score_frames(frames)
        return timeline.spans_from_scores(
            times,
            scores,
            threshold=timeline.THRESHOLD if threshold is None else threshold,
            low=low,
            end_s=end_s,
            merge_gap_s=timeline.MERGE_GAP_S if merge_gap_s is None else merge_gap_s,
            min_duration_s=min_duration_s,
            decided_by=self.label,
        )

    async def predict(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Judge a sample, frame by frame for videos unless the detector is video-native."""
        start = time.perf_counter()
        if kind is Kind.IMAGE or self.video_native:
            pred = await self.predict_images(kind, images)
        else:
            pred = combine_frames([await self.predict_images(Kind.IMAGE, [frame]) for frame in images])
        pred.latency_s = pred.latency_s or time.perf_counter() - start
        return pred
