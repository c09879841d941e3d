"""`vhd.align.smid`: agreement of the annotator with human moral ratings (SMID and the like).

The paper checks its final annotator against the Socio-Moral Image Database's norms (§4.1):
an image whose mean moral rating lies strictly below 2.5 counts as harmful, strictly above 3.5 as
unharmful, and the images in between are left out as neutral. This module reads such a ratings
file, turns ratings into human labels, annotates the kept images with the debate (resumably, in
a store) and reports accuracy, TPR, TNR and Cohen's kappa against the human labels.

Example:
    >>> result = align_ratings("smid_norms.csv", "smid/", model="openai:gpt-4o")  # doctest: +SKIP
    >>> result.metrics["kappa"].value  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack, cast

from vhd.bench.metrics import BOOTSTRAP, Value, fmt
from vhd.errors import ConfigError
from vhd.progress import ProgressFn
from vhd.store.sqlite import StoreLike, store_path

if TYPE_CHECKING:
    from vhd.annotate.options import RunOptions
    from vhd.config import AnnotateConfig, ModelOverrides

ID_COLUMN = "img_name"
"""The image-name column of SMID's published norms file."""

RATING_COLUMN = "moral_mean"
"""The mean moral rating column of SMID's norms file (1 immoral ... 5 moral)."""

HARMFUL_BELOW = 2.5
"""Default: a mean rating strictly below this is harmful."""

UNHARMFUL_ABOVE = 3.5
"""Default: a mean rating strictly above this is unharmful."""

_MISSING = {"", "na", "nan", "n/a", "null", "none", "-"}
_UNNAMED = {"", "unnamed: 0"}


@dataclass(frozen=True)
class Rating:
    """One row of a ratings file.

    Attributes:
        name: The image name as written (with or without an extension).
        rating: The mean rating; None when the cell is empty or NA.
        line: Line number in the file (the header is line 1).
    """

    name: str
    rating: float | None
    line: int


def human_label(
    rating: float | None, harmful_below: float = HARMFUL_BELOW, unharmful_above: float = UNHARMFUL_ABOVE
) -> bool | None:
    """The human label a mean rating implies: True harmful, False unharmful, None neutral or missing.

    Both bounds are strict: a rating of exactly ``harmful_below`` or ``unharmful_above`` is neutral.
    """
    if rating is None:
        return None
    if rating < harmful_below:
        return True
    if rating > unharmful_above:
        return False
    return None


def _pick(header: list[str], wanted: str | None, default: str | None, what: str, flag: str) -> int:
    names = [h.strip() for h in header]
    if wanted is not None:
        if wanted not in names:
            raise ConfigError(f"the ratings file has no column {wanted!r} (columns: {', '.join(names)}); fix {flag}")
        return names.index(wanted)
    if default is not None and default in names:
        return names.index(default)
    if what == "image name" and names and names[0].lower() in _UNNAMED:
        return 0
    raise ConfigError(
        f"the ratings file has no {what} column {default!r} (columns: {', '.join(names)}); name it with {flag}"
    )


def read_ratings(path: str | Path, *, id_column: str | None = None, rating_column: str | None = None) -> list[Rating]:
    """Read a ratings CSV: SMID's norms file as published, or any CSV with named columns.

    The image name comes from ``id_column``, else ``img_name``, else an unnamed first column (some
    copies of the norms file carry the name there); the rating from ``rating_column``, else
    ``moral_mean``. Empty and NA ratings are kept as missing (None).

    Raises:
        ConfigError: The file cannot be read, a column is missing, or a rating is not a number.
    """
    src = Path(path)
    try:
        text = src.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"cannot read ratings file {src}: {exc.strerror}; check the path") from exc
    except UnicodeDecodeError:
        raise ConfigError(f"ratings file {src} is not UTF-8 text: save it as UTF-8 CSV") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise ConfigError(f"ratings file {src} is empty: pass SMID's norms CSV or a CSV with a header")
    header = rows[0]
    name_i = _pick(header, id_column, ID_COLUMN, "image name", "--id-column")
    rating_i = _pick(header, rating_column, RATING_COLUMN, "rating", "--rating-column")
    out: list[Rating] = []
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        name = row[name_i].strip() if name_i < len(row) else ""
        if not name:
            raise ConfigError(f"{src} line {line}: no image name; fill it in or remove the row")
        cell = row[rating_i].strip() if rating_i < len(row) else ""
        if cell.lower() in _MISSING:
            out.append(Rating(name, None, line))
            continue
        try:
            value = float(cell)
        except ValueError:
            raise ConfigError(f"{src} line {line}: rating {cell!r} is not a number; fix the file") from None
        out.append(Rating(name, None if value != value else value, line))
    return out


def index_media(folder: str | Path) -> dict[str, Path]:
    """Image files under a folder (recursive), by file name and by stem; the first in sorted order wins.

    Raises:
        ConfigError: The folder does not exist.
    """
    from vhd.media.discover import IMAGE_EXTENSIONS

    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"media folder {root} does not exist: pass the folder holding the rated images to --media")
    index: dict[str, Path] = {}
    for p in sorted(root.rglob("*")):
        if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file():
            index.setdefault(p.name, p)
            index.setdefault(p.stem, p)
    return index


@dataclass
class RatedSample:
    """One rated image in an alignment report.

    Attributes:
        name: Image name from the ratings file.
        rating: Mean human rating.
        human: Label the rating implies (True harmful).
        path: The image file.
        sample_id: Its content hash.
        model: The annotator's decision; None when it gave none (unparsed, error, not run).
        score: The annotator's P(harmful), when known.
        reason: The judge's short reason.
    """

    name: str
    rating: float
    human: bool
    path: str
    sample_id: str
    model: bool | None = None
    score: float | None = None
    reason: str = ""


@dataclass
class AlignResult:
    """Agreement of the annotator with human ratings.

    Attributes:
        ratings: The ratings file.
        media: The media folder.
        harmful_below: Threshold used (strict).
        unharmful_above: Threshold used (strict).
        config_hash: The annotator configuration whose verdicts were scored.
        rows: Rows read from the ratings file.
        neutral: Names left out as neutral (rating between the thresholds, bounds included).
        missing_rating: Names left out for an empty or NA rating.
        missing_media: Names with a human label but no image under the media folder.
        samples: The labelled images found, with the annotator's decisions.
        metrics: ``accuracy``, ``tpr``, ``tnr``, ``f1``, ``balanced_acc``, ``kappa`` as `Value`s.
        confusion: ``[[TN, FP], [FN, TP]]`` (rows: human unharmful/harmful).
        run: The annotation run's summary (`vhd.annotate.summary.RunSummary.to_dict`).
        exit_code: 0 when every labelled image has a verdict, 1 when work remains, 130 interrupted.
    """

    ratings: str
    media: str
    harmful_below: float
    unharmful_above: float
    config_hash: str | None = None
    rows: int = 0
    neutral: list[str] = field(default_factory=list)
    missing_rating: list[str] = field(default_factory=list)
    missing_media: list[str] = field(default_factory=list)
    samples: list[RatedSample] = field(default_factory=list)
    metrics: dict[str, Value] = field(default_factory=dict)
    confusion: list[list[int]] = field(default_factory=lambda: [[0, 0], [0, 0]])
    run: dict[str, Any] = field(default_factory=dict)
    exit_code: int = 0

    @property
    def scored(self) -> list[RatedSample]:
        """Labelled images the annotator decided (the ones the metrics stand on)."""
        return [s for s in self.samples if s.model is not None]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--out`` (lists of excluded names included)."""
        return {
            "version": 1,
            "ratings": self.ratings,
            "media": self.media,
            "thresholds": {"harmful_below": self.harmful_below, "unharmful_above": self.unharmful_above},
            "config_hash": self.config_hash,
            "counts": {
                "rows": self.rows,
                "harmful": sum(s.human for s in self.samples),
                "unharmful": sum(not s.human for s in self.samples),
                "scored": len(self.scored),
                "no_verdict": len(self.samples) - len(self.scored),
                "neutral": len(self.neutral),
                "missing_rating": len(self.missing_rating),
                "missing_media": len(self.missing_media),
            },
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
            "confusion": self.confusion,
            "excluded": {
                "neutral": self.neutral,
                "missing_rating": self.missing_rating,
                "missing_media": self.missing_media,
            },
            "samples": [vars(s) for s in self.samples],
            "run": self.run,
        }

    def write_json(self, path: str | Path) -> Path:
        """Write `to_dict` as JSON, atomically."""
        from vhd.fileio import atomic_write

        return atomic_write(path, json.dumps(self.to_dict(), indent=1, default=str) + "\n")

    def lines(self) -> list[str]:
        """The terminal report."""
        d = self.to_dict()["counts"]
        out = [
            f"{self.rows} rated image(s): {d['harmful']} harmful (rating < {self.harmful_below:g}), "
            f"{d['unharmful']} unharmful (rating > {self.unharmful_above:g}) with an image; excluded "
            f"{d['neutral']} neutral, {d['missing_rating']} without a rating, {d['missing_media']} without an image",
            f"scored {d['scored']} image(s); {d['no_verdict']} without a verdict (unparsed, error or not run)",
        ]
        for key, title in (
            ("accuracy", "accuracy"),
            ("tpr", "TPR (harmful)"),
            ("tnr", "TNR (unharmful)"),
            ("f1", "F1"),
            ("kappa", "Cohen's kappa"),
        ):
            v = self.metrics.get(key)
            if v is None or v.value is None:
                out.append(f"{title:<16} {fmt(None)}")
                continue
            ci = f" [{fmt(v.low)}, {fmt(v.high)}]" if v.low is not None and v.high is not None else ""
            out.append(f"{title:<16} {fmt(v.value)}{ci}  (n={v.n})")
        (tn, fp), (fn, tp) = self.confusion
        out.append(f"confusion: TP {tp}, FN {fn}, TN {tn}, FP {fp}")
        return out


def score_samples(
    samples: Sequence[RatedSample], *, resamples: int = BOOTSTRAP, seed: int = 0
) -> tuple[dict[str, Value], list[list[int]]]:
    """Metrics of the annotator's decisions against the human labels (undecided samples left out).

    Returns:
        (metrics by name, confusion ``[[TN, FP], [FN, TP]]``).
    """
    from vhd.bench.metrics import BinaryMetrics
    from vhd.bench.metrics.agreement import kappa_value

    done = [s for s in samples if s.model is not None]
    y = [s.human for s in done]
    p = [bool(s.model) for s in done]
    result = BinaryMetrics(resamples=resamples, seed=seed).update(y, p).compute()
    v = result.values
    metrics = {
        "accuracy": v["accuracy"],
        "tpr": v["harmful_acc"],
        "tnr": v["unharmful_acc"],
        "f1": v["f1"],
        "balanced_acc": v["balanced_acc"],
        "kappa": kappa_value(y, p, resamples=resamples, seed=seed),
    }
    return metrics, result.confusion


def align_ratings(
    ratings: str | Path,
    media: str | Path,
    *,
    store: StoreLike = "vhd.db",
    config: AnnotateConfig | str | os.PathLike[str] | None = None,
    options: RunOptions | None = None,
    progress: bool | ProgressFn = False,
    harmful_below: float = HARMFUL_BELOW,
    unharmful_above: float = UNHARMFUL_ABOVE,
    id_column: str | None = None,
    rating_column: str | None = None,
    resamples: int = BOOTSTRAP,
    **overrides: Unpack[ModelOverrides],
) -> AlignResult:
    """Annotate the rated images that carry a human label and score the annotator against them.

    The annotation is `vhd.annotate` into ``store``: a second call with the same settings asks
    no model again and only recomputes the numbers.

    Args:
        ratings: SMID's norms CSV, or any CSV named by ``id_column`` / ``rating_column``.
        media: Folder holding the images (searched recursively by name, any image extension).
        store: SQLite store (created or resumed).
        config: An `AnnotateConfig` or a TOML/YAML config file.
        options: How the annotation runs (`vhd.annotate.options.RunOptions`: ``max_cost`` stops it
            at that spend, every role's model then needing a ``[prices]`` entry; ``command`` is
            recorded with the run).
        progress: True shows the annotation's progress bar on stderr (on a terminal); a
            `vhd.progress.ProgressFn` is called instead.
        harmful_below: A mean rating strictly below this is harmful.
        unharmful_above: A mean rating strictly above this is unharmful.
        id_column: Column of the image name (default ``img_name``, else an unnamed first column).
        rating_column: Column of the mean rating (default ``moral_mean``).
        resamples: Bootstrap resamples per interval (0: none).
        **overrides: Model settings over the configuration (`vhd.config.ModelOverrides`:
            ``model``, ``debaters``, ``judge``, ``icl``, ``concurrency``, ...), as `vhd.annotate` takes them.

    Raises:
        ConfigError: Bad thresholds, file or columns, or no labelled image was found.
    """
    store = store_path(store)
    from vhd.annotate.api import annotate
    from vhd.annotate.options import split_legacy
    from vhd.config import apply_overrides
    from vhd.media.hashing import sha256_file
    from vhd.store.sqlite import Store

    opts, rest = split_legacy(options, dict(overrides), "align_ratings")
    if opts.max_cost is not None:  # refuse an unkeepable budget before reading anything
        apply_overrides(config, cast("ModelOverrides", rest)).check_max_cost(opts.max_cost)
    if not harmful_below <= unharmful_above:
        raise ConfigError(
            f"--harmful-below ({harmful_below:g}) must not exceed --unharmful-above ({unharmful_above:g}): swap them"
        )
    rows = read_ratings(ratings, id_column=id_column, rating_column=rating_column)
    index = index_media(media)
    result = AlignResult(str(ratings), str(media), harmful_below, unharmful_above, rows=len(rows))
    for r in rows:
        label = human_label(r.rating, harmful_below, unharmful_above)
        if r.rating is None:
            result.missing_rating.append(r.name)
        elif label is None:
            result.neutral.append(r.name)
        elif (path := index.get(r.name) or index.get(Path(r.name).stem)) is None:
            result.missing_media.append(r.name)
        else:
            result.samples.append(RatedSample(r.name, r.rating, label, str(path), sha256_file(path)))
    if not result.samples:
        raise ConfigError(
            f"no rated image with a rating below {harmful_below:g} or above {unharmful_above:g} was found under "
            f"{media}: check --media and the columns"
        )
    paths = list(dict.fromkeys(s.path for s in result.samples))
    summary = annotate(paths, store=store, config=config, options=opts, progress=progress, **rest)
    result.run = summary.to_dict()
    result.exit_code = summary.exit_code()
    result.config_hash = summary.config_hash if summary.run_id else None
    if result.config_hash:
        with Store(store, create=True) as db:
            found = db.annotations_for([s.sample_id for s in result.samples], result.config_hash)
        for s in result.samples:
            ann = found.get(s.sample_id)
            if ann is not None and ann.verdict.harmful is not None:
                s.model, s.score, s.reason = ann.verdict.harmful, ann.verdict.score, ann.verdict.reason
    result.metrics, result.confusion = score_samples(result.samples, resamples=resamples)
    return result
