"""The ``embed`` method: categories from sentence embeddings, offline and cheap.

Each category is represented by prototypes: its name and its example reasons (plus, after
calibration, the labelled reasons that carry it). A text's score for a category is the mean of
its average and its best cosine similarity to those prototypes. A text gets its best-scoring
category, and every other category whose score reaches that category's threshold (multi-label).
Thresholds start at one default and are calibrated per category on labelled reasons, each chosen
to maximise that category's F1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vhd.categorize.embedding import Embedder
from vhd.errors import ConfigError
from vhd.taxonomy.taxonomy import Taxonomy

DEFAULT_THRESHOLD = 0.45
"""Score a category needs, besides the best one, when thresholds are not calibrated."""

ARGUMENTS_WEIGHT = 0.25
"""Share of a score that comes from the affirmative debater's arguments (the rest: the reason)."""

SHRINK = 20
"""Labelled positives a category needs before its own threshold counts as much as the shared one."""

_GRID = [round(0.10 + 0.01 * i, 2) for i in range(86)]


@dataclass(frozen=True)
class EmbedText:
    """What the ``embed`` method reads of one annotation.

    Attributes:
        reason: The judge's harm reason ("" for a refusal, whose reason says only who refused).
        arguments: The affirmative debater's arguments ("" when none).
    """

    reason: str
    arguments: str = ""


@dataclass
class Calibration:
    """Per-category thresholds learned from labelled reasons.

    Attributes:
        thresholds: Category code to threshold.
        f1: Category code to its F1 on the calibration set at that threshold.
        examples: Category code to labelled reasons added as prototypes.
        size: Labelled reasons used.
    """

    thresholds: dict[str, float]
    f1: dict[str, float] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    size: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Thresholds, F1 and size (the examples are left out)."""
        return {"thresholds": self.thresholds, "f1": self.f1, "size": self.size}


class EmbedCategorizer:
    """Scores texts against a taxonomy with a sentence-embedding model.

    Args:
        taxonomy: The categories.
        embedder: A loaded `Embedder`.
        threshold: Default threshold for every category (before calibration).
        arguments_weight: Weight of the arguments' score when an annotation has arguments.
    """

    def __init__(
        self,
        taxonomy: Taxonomy,
        embedder: Embedder,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        arguments_weight: float = ARGUMENTS_WEIGHT,
    ) -> None:
        if not 0.0 <= arguments_weight < 1.0:
            raise ConfigError(f"arguments weight {arguments_weight} must be in [0, 1)")
        self.taxonomy = taxonomy
        self.embedder = embedder
        self.arguments_weight = arguments_weight
        self.thresholds = {c.code: threshold for c in taxonomy}
        self.calibration: Calibration | None = None
        self._prototypes = self._encode_prototypes({})

    def _encode_prototypes(self, extra: Mapping[str, Sequence[str]]) -> list[Any]:
        groups = [[c.name, *c.examples, *extra.get(c.code, ())] for c in self.taxonomy]
        flat = [t for g in groups for t in g]
        vectors = self.embedder.encode(flat)
        out, start = [], 0
        for g in groups:
            out.append(vectors[start : start + len(g)])
            start += len(g)
        return out

    def score_vectors(self, vectors: Any) -> Any:
        """Scores (n, categories) of unit vectors against the prototypes."""
        import numpy as np

        columns = []
        for protos in self._prototypes:
            sims = vectors @ protos.T
            columns.append(0.5 * sims.mean(axis=1) + 0.5 * sims.max(axis=1))
        return np.stack(columns, axis=1) if columns else np.zeros((len(vectors), 0), dtype=np.float32)

    def score(self, texts: Sequence[EmbedText]) -> Any:
        """Scores (n, categories) of annotation texts; the arguments weigh in when present."""
        import numpy as np

        reasons = self.score_vectors(self.embedder.encode([t.reason or t.arguments for t in texts]))
        with_args = [i for i, t in enumerate(texts) if t.reason and t.arguments]
        if with_args and self.arguments_weight > 0:
            args = self.score_vectors(self.embedder.encode([texts[i].arguments for i in with_args]))
            w = self.arguments_weight
            reasons[with_args] = (1 - w) * reasons[with_args] + w * args
        return np.asarray(reasons)

    def decide(self, scores: Any) -> list[list[tuple[str, float]]]:
        """Turn scores into ``(code, score)`` lists: the best category and all above their thresholds."""
        codes = self.taxonomy.codes
        out = []
        for row in scores:
            best = int(row.argmax()) if len(row) else -1
            chosen = [
                (code, float(row[j])) for j, code in enumerate(codes) if j == best or row[j] >= self.thresholds[code]
            ]
            out.append(chosen)
        return out

    def categorize(self, texts: Sequence[EmbedText]) -> list[list[tuple[str, float]]]:
        """Categories with scores for each text (empty texts get none)."""
        result: list[list[tuple[str, float]]] = [[] for _ in texts]
        live = [i for i, t in enumerate(texts) if (t.reason or t.arguments).strip()]
        if live:
            decided = self.decide(self.score([texts[i] for i in live]))
            for i, d in zip(live, decided, strict=True):
                result[i] = d
        return result

    def calibrate(
        self, reasons: Sequence[str], labels: Sequence[Sequence[str]], *, add_examples: bool = True
    ) -> Calibration:
        """Learn a threshold per category from labelled reasons (and use them as prototypes).

        Args:
            reasons: Labelled reasons.
            labels: For each, its category codes.
            add_examples: Also add each labelled reason to its categories' prototypes.

        Returns:
            The calibration, also kept on the categorizer.

        Raises:
            ConfigError: No labelled reasons, or a code outside the taxonomy.
        """
        import numpy as np

        if not reasons:
            raise ConfigError("calibration needs labelled reasons with categories; the labels file has none")
        codes = self.taxonomy.codes
        for row in labels:
            unknown = [c for c in row if c not in codes]
            if unknown:
                raise ConfigError(f"calibration label {unknown[0]!r} is no code of taxonomy {self.taxonomy.key}")
        extra: dict[str, list[str]] = {}
        if add_examples:
            for text, row in zip(reasons, labels, strict=True):
                for code in row:
                    extra.setdefault(code, []).append(text)
            self._prototypes = self._encode_prototypes(extra)
        scores = self.score_vectors(self.embedder.encode(list(reasons)))
        truth = np.array([[c in row for c in codes] for row in labels], dtype=bool)
        best = scores.argmax(axis=1)
        is_best = best[:, None] == np.arange(len(codes))[None, :]

        def f1_at(t: float, cols: slice | int) -> float:
            pred = is_best[:, cols] | (scores[:, cols] >= t)
            y = truth[:, cols]
            denom = int(pred.sum()) + int(y.sum())
            return 2 * int((pred & y).sum()) / denom if denom else 0.0

        # One threshold for all categories (micro-F1), then per category, shrunk towards it by
        # how few positives the category has: few labels must not overfit a threshold.
        shared = max(_GRID, key=lambda t: (round(f1_at(t, slice(None)), 9), t))
        thresholds: dict[str, float] = {}
        f1s: dict[str, float] = {}
        for j, code in enumerate(codes):
            own = max(_GRID, key=lambda t: (round(f1_at(t, j), 9), t))
            n = int(truth[:, j].sum())
            t = round((n * own + SHRINK * shared) / (n + SHRINK), 2)
            thresholds[code], f1s[code] = t, round(f1_at(t, j), 4)
        self.thresholds = thresholds
        self.calibration = Calibration(thresholds, f1s, extra, len(reasons))
        return self.calibration

    def params(self) -> dict[str, Any]:
        """What to store with each result: model, thresholds, weights, calibration summary."""
        return {
            "model": self.embedder.name,
            "thresholds": self.thresholds,
            "arguments_weight": self.arguments_weight,
            "calibration": None if self.calibration is None else self.calibration.to_dict(),
        }
