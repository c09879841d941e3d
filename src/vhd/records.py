"""Core records shared by every part of vhd: samples, turns, verdicts and annotations.

They are plain dataclasses (cheap to build, no heavy imports) with ``to_dict``/``from_dict``
helpers for JSON storage.

The sample family: `Record` holds what can be known about a sample, under one name per field
(``id``, ``kind``, ``harmful``, ``source``, ``keyword``, ``generator``, ``split``,
``categories``, ``reason``, ``meta``); each stage adds what it has:

- `ManifestRow`, `UrlRow`, `LabelRow`: what one row of a media manifest, a URL list or a
  labels file says;
- `MediaItem`: media found on disk (or listed by a manifest), before hashing;
- `Sample`: a sample with its content id, as the store keeps it;
- `LabelledSample`: a human-labelled sample with its content id and media path (a benchmark
  item, or an item of a labelled set).
"""

from __future__ import annotations

import enum
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

YES = frozenset({"yes", "y", "true", "1", "harmful"})
NO = frozenset({"no", "n", "false", "0", "unharmful", "not harmful"})


def parse_yes_no(value: object) -> bool | None:
    """Read a yes/no label as every vhd file format spells it; None when empty.

    Accepts yes/no, y/n, true/false, 1/0 and harmful/unharmful in any case, with a trailing
    period ignored, and booleans or the numbers 0 and 1.

    Raises:
        ValueError: Any other value (the message lists the accepted spellings).
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    text = " ".join(str(value).strip().lower().rstrip(".").split())
    if not text:
        return None
    if text in YES:
        return True
    if text in NO:
        return False
    raise ValueError(f"expected yes/no, 1/0 or true/false, got {value!r}")


class Kind(enum.StrEnum):
    """What a sample is."""

    IMAGE = "image"
    VIDEO = "video"


class Source(enum.StrEnum):
    """Where a sample comes from: the one list of valid sources."""

    REAL = "real"
    SYNTHETIC = "synthetic"

    @classmethod
    def parse(cls, value: object) -> Source | None:
        """Read a source as users write it (``"Real "``, ``"SYNTHETIC"``); None when empty.

        Raises:
            ValueError: Any other value (one line naming the valid sources).
        """
        if value is None or isinstance(value, Source):
            return value
        text = str(value).strip().lower()
        if not text:
            return None
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"source must be {' or '.join(cls)}, got {text!r}") from None


class Status(enum.StrEnum):
    """Outcome of one annotation.

    ``ok``, ``refused``, ``unparsed`` and ``truncated`` are final (a resumed run does not ask again
    unless told to: ``--retry-unparsed`` asks again for the last two); ``error`` is retried on the
    next run. ``truncated``: a reply was cut off by the token limit before it said anything usable
    (the judge's, or an empty debater's); it is neither a verdict nor a refusal.
    """

    OK = "ok"
    REFUSED = "refused"
    UNPARSED = "unparsed"
    TRUNCATED = "truncated"
    ERROR = "error"

    @property
    def final(self) -> bool:
        """Whether a resumed run keeps this result instead of asking the models again."""
        return self is not Status.ERROR


class Role(enum.StrEnum):
    """A participant in the debate."""

    AFFIRMATIVE = "affirmative"
    NEGATIVE = "negative"
    JUDGE = "judge"


@dataclass(kw_only=True)
class Record:
    """What is known about a sample; the fields every stage of the sample family shares.

    Attributes:
        id: The sample's sha256 (hex) when known; for rows and media items, the id the file
            gives (a sha256 the content must have, or any identifier).
        kind: Image or video.
        harmful: The human (or manifest) label, ``True`` harmful; None when not given.
        source: Real or synthetic, when known.
        keyword: The search keyword or prompt keyword the sample came from, when known.
        generator: The generative model that made a synthetic sample, when known.
        split: Dataset split (``train``/``test``/...), when known.
        categories: Harm categories of the label (names or codes), when given.
        reason: Why the label was given, when given.
        meta: Any other columns, kept verbatim.
    """

    id: str | None = None
    kind: Kind | None = None
    harmful: bool | None = None
    source: Source | None = None
    keyword: str | None = None
    generator: str | None = None
    split: str | None = None
    categories: list[str] = field(default_factory=list)
    reason: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.source = Source.parse(self.source)


@dataclass(kw_only=True)
class ManifestRow(Record):
    """One usable entry of a media manifest (`vhd.media.manifest`).

    Attributes:
        where: Where it came from, e.g. ``line 4``, for messages.
        path: The media path as written in the manifest.
    """

    where: str
    path: str


@dataclass(kw_only=True)
class UrlRow(Record):
    """One URL to fetch, from a URL list (`vhd.collect.urls`).

    Attributes:
        url: The URL, validated (http or https, with a host).
        line: Where it is in the list (CSV line number counting the header as 1, JSONL/text
            line, or JSON item number), for reports.
        meta: Other columns, verbatim.
    """

    url: str
    line: int
    meta: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class LabelRow(Record):
    """One row of a labels file (`vhd.labels.files`).

    Attributes:
        path: The media file, resolved; None when the row gives only an id.
        harmful: The human label.
        line: Row number as a spreadsheet shows it (the header is row 1); for JSON, the
            1-based position of the entry.
        segments: A video's harmful spans as the person marked them (``harmful`` True,
            ``decided_by="human"``), in time order; None when the row gives no spans (an empty
            list: the row says there are none).
    """

    path: Path | None
    harmful: bool
    line: int = 0
    segments: list[Segment] | None = None


@dataclass(kw_only=True)
class MediaItem(Record):
    """One sample to load: an image, a video file or a folder of video frames (`vhd.media`).

    Attributes:
        path: Absolute path (symbolic links not resolved).
        kind: Image or video.
        is_frame_folder: ``path`` is a folder of extracted frames (a video).
    """

    path: Path
    kind: Kind
    is_frame_folder: bool = False


@dataclass(kw_only=True)
class Sample(Record):
    """One image or video to annotate, as the store keeps it.

    Attributes:
        id: sha256 (hex) of the file's bytes; for a folder of frames, of the frames' hashes.
        kind: image or video.
        path: Where the media was found (as given, made absolute).
        frames: For videos, the frame indices used (after sampling).
    """

    id: str
    kind: Kind
    path: str
    frames: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (the human label under ``label``)."""
        d = asdict(self)
        keys = ("id", "kind", "path", "source", "keyword", "generator", "split", "harmful", "frames", "meta")
        out = {"label" if k == "harmful" else k: d[k] for k in keys}
        out["kind"] = self.kind.value
        out["source"] = None if self.source is None else self.source.value
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Sample:
        """Build a sample from `to_dict` output."""
        d = dict(d)
        d["kind"] = Kind(d["kind"])
        if "label" in d:
            d["harmful"] = d.pop("label")
        return cls(**d)


CREDENTIALS_TRUST = ("trusted", "untrusted", "invalid")
"""What a file's C2PA manifest is worth (`vhd.media.credentials`): only ``trusted`` claims change a sample."""


def credentials_trust(meta: dict[str, Any]) -> str | None:
    """The trust of the C2PA manifest recorded in a sample's ``meta``, or None without one.

    A record written before vhd told trust apart carries only the c2pa state: ``Trusted`` is
    ``trusted``, ``Valid`` is ``untrusted``, anything else ``invalid``.
    """
    record = meta.get("content_credentials")
    if not isinstance(record, dict):
        return None
    trust = record.get("trust")
    if trust in CREDENTIALS_TRUST:
        return str(trust)
    state = record.get("state")
    return "trusted" if state == "Trusted" else "untrusted" if state == "Valid" else "invalid"


@dataclass(kw_only=True)
class LabelledSample(Record):
    """A human-labelled sample with its content id and media (a benchmark item, a labelled set's item).

    Attributes:
        id: Content hash of the media (sha256; for a frame folder, of its frames' hashes).
        path: The media file or frame folder (text, as on every record of the family:
            ``Path(item.path)`` for path operations; a `Path` given is stored as text).
        kind: Image or video.
        harmful: The human label.
        line: Row number in the labels file it came from (0 when not from a file).
        segments: A video's human-harmful spans (see `LabelRow.segments`); None when not given.
    """

    id: str
    path: str
    kind: Kind
    harmful: bool
    line: int = 0
    segments: list[Segment] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.path = os.fspath(self.path)  # a `Path` given is kept as text, like `Sample.path`

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "id": self.id,
            "path": self.path,
            "kind": self.kind.value,
            "harmful": self.harmful,
            "categories": self.categories,
            "source": None if self.source is None else self.source.value,
            "split": self.split,
            "line": self.line,
            "segments": None if self.segments is None else [g.to_dict() for g in self.segments],
        }


@dataclass
class Usage:
    """Token and call accounting for one annotation (or a whole run).

    ``cached_tokens`` counts the prompt tokens the endpoint reported served from its prompt cache
    (``usage.prompt_tokens_details.cached_tokens``); they are part of ``prompt_tokens``.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    cached_tokens: int = 0

    def add(self, other: Usage) -> None:
        """Add another usage in place."""
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost += other.cost
        self.cached_tokens += other.cached_tokens

    @property
    def cached_share(self) -> float | None:
        """Share of prompt tokens served from the endpoint's prompt cache (None without prompt tokens)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Turn:
    """One message of the debate.

    Attributes:
        role: Who spoke.
        round: Debate round, 1-based; the judge's turn carries the number of rounds.
        text: What the model answered (empty when the call was rejected).
        prompt_tokens: Tokens the backend reported for the prompt.
        completion_tokens: Tokens the backend reported for the answer.
        latency_s: Wall time of the call.
        refused: The model declined, or the provider rejected the request on content policy.
        model: ``backend:model`` that produced the turn.
        finish_reason: Why generation stopped, as the backend reported it (``stop``, ``length``:
            cut off by the token limit, ``content_filter``...); None when not reported.
        reasoning_tokens: Hidden reasoning tokens the provider reported, part of
            ``completion_tokens``; None when not reported.
    """

    role: Role
    round: int
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    refused: bool = False
    model: str = ""
    finish_reason: str | None = None
    reasoning_tokens: int | None = None

    @property
    def truncated(self) -> bool:
        """Whether the reply was cut off by the token limit (``finish_reason`` ``length``)."""
        return self.finish_reason == "length"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        d = asdict(self)
        d["role"] = self.role.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Turn:
        """Build a turn from `to_dict` output."""
        d = dict(d)
        d["role"] = Role(d["role"])
        return cls(**d)


@dataclass
class Segment:
    """One time span of a video with its own verdict (``vhd annotate --segments``).

    The same shape is used for a model's verdict on a span, a detector's thresholded span and a
    human label's span; exports write it as one object of the ``segments`` list.

    Attributes:
        start_s: Start of the span in seconds, from decoded timestamps (never the header).
        end_s: End of the span in seconds (exclusive), ``end_s > start_s``.
        harmful: The span's decision; None when none could be read.
        score: P(harmful) for the span, when known.
        reason: The short reason or category the judge (or screen) gave for the span.
        categories: Harm categories of the span (zero or more names).
        severity: The policy's severity level name for a harmful span, else None.
        decided_by: What decided the span: ``"screen"``, ``"debate"``, a cascade stage's label,
            ``"human"`` or a detector's name; None when unknown.
    """

    start_s: float
    end_s: float
    harmful: bool | None
    score: float | None = None
    reason: str = ""
    categories: list[str] = field(default_factory=list)
    severity: str | None = None
    decided_by: str | None = None

    @property
    def duration_s(self) -> float:
        """The span's length in seconds."""
        return max(0.0, self.end_s - self.start_s)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (the ``segments`` column's object shape)."""
        return {
            "start_s": self.start_s,
            "end_s": self.end_s,
            "harmful": self.harmful,
            "score": self.score,
            "reason": self.reason,
            "categories": list(self.categories),
            "severity": self.severity,
            "decided_by": self.decided_by,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Segment:
        """Build a segment from `to_dict` output (missing optional keys take their defaults)."""
        return cls(
            start_s=float(d["start_s"]),
            end_s=float(d["end_s"]),
            harmful=None if d.get("harmful") is None else bool(d["harmful"]),
            score=None if d.get("score") is None else float(d["score"]),
            reason=str(d.get("reason") or ""),
            categories=[str(c) for c in d.get("categories") or []],
            severity=None if d.get("severity") is None else str(d["severity"]),
            decided_by=None if d.get("decided_by") is None else str(d["decided_by"]),
        )


@dataclass
class Verdict:
    """The judge's decision on one sample.

    Attributes:
        harmful: True/False; None when no decision could be read (status unparsed/error).
        reason: The judge's short category (harmful) or short reason (unharmful); for a refusal,
            a reason that says it was a refusal.
        categories: Harm categories assigned later (zero or more names).
        score: P(yes) / (P(yes) + P(no)) from first-token log-probabilities, when available.
        status: ok, refused, unparsed, truncated or error.
        refused: Whether a refusal (debater, judge or provider) decided the verdict.
        severity: The policy's severity level name the judge gave with a harmful verdict; None
            when not harmful, not given, or the policy has no severity scale.
        segments: For a video annotated with ``--segments``: every span's verdict in time order
            (the video's verdict is derived from them); empty otherwise and for images.
    """

    harmful: bool | None
    reason: str
    categories: list[str] = field(default_factory=list)
    score: float | None = None
    status: Status = Status.OK
    refused: bool = False
    severity: str | None = None
    segments: list[Segment] = field(default_factory=list)


@dataclass
class Annotation:
    """A sample's full annotation under one configuration.

    Attributes:
        sample_id: The sample's content hash.
        run_id: The run that produced it.
        config_hash: Hash of everything that changes the debate's messages or decoding.
        verdict: The decision.
        turns: Every argument and the judge's answer, in order.
        usage: Calls and tokens spent on this sample.
        error: Error text when status is error (never contains secrets).
        started_at: Unix time when the debate started.
        finished_at: Unix time when it ended.
        decided_by: In a cascade run (``vhd annotate --cascade``), the label of the stage that
            decided the verdict, or ``"debate"`` when the sample went through to the debate;
            None outside a cascade.
    """

    sample_id: str
    run_id: str
    config_hash: str
    verdict: Verdict
    turns: list[Turn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    started_at: float = 0.0
    finished_at: float = 0.0
    decided_by: str | None = None

    def arguments(self, role: Role) -> list[str]:
        """Return the texts a debater gave, in round order."""
        return [t.text for t in sorted(self.turns, key=lambda t: t.round) if t.role is role]
