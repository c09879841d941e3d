"""Core records shared by every part of vhd: samples, turns, verdicts and annotations.

They are plain dataclasses (cheap to build, no heavy imports) with ``to_dict``/``from_dict``
helpers for JSON storage.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
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

    ``ok``, ``refused`` and ``unparsed`` are final (a resumed run does not ask again unless told
    to); ``error`` is retried on the next run.
    """

    OK = "ok"
    REFUSED = "refused"
    UNPARSED = "unparsed"
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


@dataclass
class Sample:
    """One image or video to annotate.

    Attributes:
        id: sha256 (hex) of the file's bytes; for a folder of frames, of the frames' hashes.
        kind: image or video.
        path: Where the media was found (as given, made absolute).
        source: ``real`` or ``synthetic`` when known.
        keyword: The search keyword or prompt keyword the sample came from, when known.
        generator: The generative model that made a synthetic sample, when known.
        split: Dataset split (``train``/``test``/...), when known.
        label: A human label carried by a manifest (``True`` harmful), when given.
        frames: For videos, the frame indices used (after sampling).
        meta: Any other manifest columns, kept verbatim.
    """

    id: str
    kind: Kind
    path: str
    source: str | None = None
    keyword: str | None = None
    generator: str | None = None
    split: str | None = None
    label: bool | None = None
    frames: list[int] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict."""
        d = asdict(self)
        d["kind"] = self.kind.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Sample:
        """Build a sample from `to_dict` output."""
        d = dict(d)
        d["kind"] = Kind(d["kind"])
        return cls(**d)


@dataclass
class Usage:
    """Token and call accounting for one annotation (or a whole run)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    def add(self, other: Usage) -> None:
        """Add another usage in place."""
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost += other.cost

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
    """

    role: Role
    round: int
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    refused: bool = False
    model: str = ""

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
class Verdict:
    """The judge's decision on one sample.

    Attributes:
        harmful: True/False; None when no decision could be read (status unparsed/error).
        reason: The judge's short category (harmful) or short reason (unharmful); for a refusal,
            a reason that says it was a refusal.
        categories: Harm categories assigned later (zero or more names).
        score: P(yes) / (P(yes) + P(no)) from first-token log-probabilities, when available.
        status: ok, refused, unparsed or error.
        refused: Whether a refusal (debater, judge or provider) decided the verdict.
    """

    harmful: bool | None
    reason: str
    categories: list[str] = field(default_factory=list)
    score: float | None = None
    status: Status = Status.OK
    refused: bool = False


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

    def arguments(self, role: Role) -> list[str]:
        """Return the texts a debater gave, in round order."""
        return [t.text for t in sorted(self.turns, key=lambda t: t.round) if t.role is role]
