"""In-context examples for the judge: samples with the answer they should get.

A run's examples are read once and encoded once; every judge call then starts with the same
messages (system prompt, then each example as a user turn and the expected answer as the
assistant's turn), byte for byte, so providers that cache prompt prefixes (OpenAI, vLLM prefix
caching) reuse them.

File formats (given as a file, or a folder holding ``examples.csv``/``examples.yaml``):

- CSV with ``path`` and ``answer`` columns (``answer`` like "Yes, potential of harassment." or
  "No, lack of direct message."), or a labels CSV (``harmful`` yes/no and an optional ``reason``;
  the answer is then built as "Yes, <reason>." / "No, <reason>.").
- YAML: a list of ``{path, answer}`` (or ``{path, harmful, reason}``) mappings, or a mapping with
  an ``examples`` list.

Paths are relative to the file's folder. A path may be an image, a video or a frame folder.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vhd.debate.parse import parse_verdict
from vhd.errors import ConfigError, MediaError
from vhd.media.encoded import EncodedImage
from vhd.policy.model import Policy
from vhd.records import Kind, parse_yes_no

_FOLDER_FILES = ("examples.csv", "examples.yaml", "examples.yml", "icl.csv", "icl.yaml", "icl.yml")


@dataclass(frozen=True)
class ICLExample:
    """One in-context example.

    Attributes:
        path: Where the media came from.
        kind: image or video (an example is shown only to the judge of the same kind).
        images: The encoded image, or the video's frames in order.
        answer: The answer the judge should give, e.g. "Yes, illegal activity.".
    """

    path: str
    kind: Kind
    images: tuple[EncodedImage, ...]
    answer: str

    def identity(self) -> dict[str, Any]:
        """What identifies the example in the configuration hash."""
        return {
            "kind": self.kind.value,
            "images": [im.sha256 for im in self.images],
            "answer": self.answer,
        }


def _answer(row: dict[str, Any], where: str) -> str:
    answer = str(row.get("answer") or "").strip()
    if not answer:
        reason = str(row.get("reason") or "").strip().rstrip(".")
        try:
            harmful = parse_yes_no(row.get("harmful", row.get("label")))
        except ValueError:
            harmful = None
        if harmful is None:
            raise ConfigError(f"{where}: give an 'answer' (e.g. 'Yes, violence.') or 'harmful' yes/no")
        answer = f"Yes, {reason or 'harmful content'}." if harmful else f"No, {reason or 'nothing harmful is shown'}."
    if parse_verdict(answer).harmful is None:
        raise ConfigError(f"{where}: answer {answer!r} must start with Yes or No, e.g. 'No, lack of direct message.'")
    return answer


def _read_rows(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read in-context examples file {path}: {exc}") from None
    if path.suffix.lower() == ".csv":
        from vhd.fileio import unescape_cell

        rows = [
            {k: unescape_cell(v) if isinstance(v, str) else v for k, v in row.items()}
            for row in csv.DictReader(text.splitlines())
        ]  # `vhd icl` writes examples.csv with formula-like cells escaped
        if rows and "path" not in rows[0]:
            raise ConfigError(f"{path}: in-context examples CSV needs a 'path' column")
        return rows
    import yaml

    data = yaml.safe_load(text)
    if isinstance(data, dict):
        data = data.get("examples")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ConfigError(f"{path}: expected a list of {{path, answer}} mappings (or 'examples: [...]')")
    return data


def find_examples_file(path: Path) -> Path:
    """Return the examples file for a file or folder argument."""
    if path.is_dir():
        for name in _FOLDER_FILES:
            if (path / name).is_file():
                return path / name
        raise ConfigError(f"no examples file in {path}; add one of: {', '.join(_FOLDER_FILES)}")
    if not path.is_file():
        raise ConfigError(f"in-context examples not found: {path}")
    return path


def _load_one(media: Path, where: str, settings: Any) -> tuple[Kind, tuple[EncodedImage, ...]]:
    from vhd.media.discover import discover
    from vhd.media.load import load_sample

    found = discover([media], frame_folders=True)  # a folder given as an example is one video
    if found.skipped or len(found.items) != 1:
        reason = found.skipped[0].reason if found.skipped else "not a single image, video or frame folder"
        raise ConfigError(f"{where}: cannot use {media} as an example: {reason}")
    try:
        loaded = load_sample(found.items[0], settings)
    except MediaError as exc:
        raise ConfigError(f"{where}: cannot use {media} as an example: {exc}") from None
    return loaded.sample.kind, tuple(loaded.images)


def policy_answer(policy: Policy, category: int, example: int) -> str:
    """The answer a policy's example should get: ``"Yes, <reason>."`` (with its severity line) or ``"No, ..."``.

    A harmful example without a reason answers with its category's name; one that is not harmful,
    with "allowed under <category>".
    """
    cat = policy.categories[category]
    ex = cat.examples[example]
    reason = ex.reason.strip().rstrip(".")
    if not ex.harmful:
        return f"No, {reason or 'allowed under ' + cat.title}."
    answer = f"Yes, {reason or cat.title}."
    level = policy.severity_level(ex.severity) if ex.severity else None
    return f"{answer}\nSeverity: {level}" if level else answer


def policy_examples(policy: Policy, base_dir: Path, settings: Any) -> list[ICLExample]:
    """Read and encode a policy's example media as in-context examples, in file order.

    Args:
        policy: The policy.
        base_dir: The policy file's folder (example paths are relative to it).
        settings: `vhd.media.load.MediaSettings` used to load the media (same as the samples).

    Raises:
        ConfigError: An example that cannot be loaded (naming its category and path).
    """
    out: list[ICLExample] = []
    for i, cat in enumerate(policy.categories):
        for j, ex in enumerate(cat.examples):
            media = Path(ex.path).expanduser()
            if not media.is_absolute():
                media = base_dir / media
            where = f"policy {policy.key}, category {cat.id!r}, example {j + 1}"
            kind, images = _load_one(media, where, settings)
            out.append(ICLExample(str(media), kind, images, policy_answer(policy, i, j)))
    return out


def load_examples(path: str | Path, settings: Any) -> list[ICLExample]:
    """Read and encode a run's in-context examples.

    Args:
        path: An examples file or a folder holding one.
        settings: `vhd.media.load.MediaSettings` used to load the media (same as the samples).

    Returns:
        The examples in file order.

    Raises:
        ConfigError: Bad file, bad answer, or media that cannot be loaded (with the row).
    """
    file = find_examples_file(Path(path).expanduser())
    examples: list[ICLExample] = []
    for i, row in enumerate(_read_rows(file), start=2 if file.suffix.lower() == ".csv" else 1):
        where = f"{file}, {'row' if file.suffix.lower() == '.csv' else 'item'} {i}"
        raw = str(row.get("path") or "").strip()
        if not raw:
            raise ConfigError(f"{where}: missing 'path'")
        media = Path(raw).expanduser()
        if not media.is_absolute():
            media = file.parent / media
        answer = _answer(row, where)
        kind, images = _load_one(media, where, settings)
        examples.append(ICLExample(str(media), kind, images, answer))
    return examples


def examples_identity(examples: Sequence[ICLExample]) -> list[dict[str, Any]]:
    """Identity of a list of examples, in order, for the configuration hash."""
    return [e.identity() for e in examples]
