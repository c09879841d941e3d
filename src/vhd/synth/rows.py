"""Prompt rows for `vhd generate`: reading a prompt CSV, and finding what earlier runs made.

Any CSV with a ``prompt`` column works; ``keyword``, ``id``, ``negative_prompt`` and ``seed`` are
optional (a missing id is computed as `vhd prompts` computes it; a row's ``seed`` is used as its
seed instead of the derived one). A bad row gets a per-row reason; the others go on.
"""

from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError
from vhd.fileio import open_regular, unescape_cell
from vhd.synth.provenance import Provenance, prompt_id, read_embedded


@dataclass(frozen=True)
class PromptRow:
    """One prompt to generate.

    Attributes:
        prompt: The prompt text.
        keyword: The keyword it came from, if known.
        id: The prompt id (given, or computed from keyword and prompt).
        negative_prompt: A negative prompt for this row, if any.
        seed: A seed given by the row (used as is), else None (derived from ``--seed`` and the id).
        line: Row number as a spreadsheet shows it (the header is row 1).
    """

    prompt: str
    keyword: str | None
    id: str
    negative_prompt: str | None = None
    seed: int | None = None
    line: int = 0


def read_prompt_csv(path: str | os.PathLike[str]) -> tuple[list[PromptRow], list[tuple[int, str]]]:
    """Read a prompt CSV.

    Returns:
        The usable rows (duplicate ids after the first dropped) and ``(line, reason)`` for the others.

    Raises:
        ConfigError: The file cannot be read or has no ``prompt`` column.
    """
    try:
        with open_regular(path) as raw:
            text = raw.read().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read prompt CSV {os.fspath(path)!r} ({exc}); pass a UTF-8 CSV file") from exc
    reader = csv.DictReader(text.splitlines())
    fields = [f.strip().lower() for f in reader.fieldnames or []]
    if "prompt" not in fields:
        raise ConfigError(f"{os.fspath(path)}: no 'prompt' column; the header must name one (prompt[,keyword,id,...])")
    rows: list[PromptRow] = []
    problems: list[tuple[int, str]] = []
    seen: set[str] = set()
    for n, raw_row in enumerate(reader, start=2):
        row = {(k or "").strip().lower(): unescape_cell((v or "").strip()) for k, v in raw_row.items() if k}
        prompt = row.get("prompt", "")
        if not prompt:
            problems.append((n, "empty prompt"))
            continue
        keyword = row.get("keyword") or None
        pid = row.get("id") or prompt_id(keyword, prompt)
        seed = None
        if row.get("seed"):
            try:
                seed = int(row["seed"])
            except ValueError:
                problems.append((n, f"seed {row['seed']!r} is not a whole number"))
                continue
            if not 0 <= seed < 2**63:
                problems.append((n, f"seed {seed} must be between 0 and 2**63 - 1"))
                continue
        if pid in seen:
            problems.append((n, f"duplicate prompt id {pid}"))
            continue
        seen.add(pid)
        rows.append(PromptRow(prompt, keyword, pid, row.get("negative_prompt") or None, seed, n))
    return rows, problems


def generated_files(folder: str | os.PathLike[str]) -> Iterator[tuple[Path, Provenance]]:
    """vhd-generated PNG, WebP and MP4 files under a folder (recursively), with their embedded provenance."""
    root = Path(folder)
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*")):
        if path.suffix.lower() in (".png", ".webp", ".mp4") and path.is_file() and not path.name.startswith("."):
            found = read_embedded(path)
            if found is not None:
                yield path, found


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class FirstFrames:
    """Finds the first frame of an image-to-video prompt: the image with the same prompt id and seed.

    It looks in the store's provenance first, then in the PNG provenance of the images under a
    folder (``--first-frames DIR``, read once).
    """

    def __init__(self, store: object | None = None, folder: str | os.PathLike[str] | None = None) -> None:
        self.store = store
        self.folder = folder
        self._index: dict[tuple[str, int], Path] | None = None

    def _folder_index(self) -> dict[tuple[str, int], Path]:
        if self._index is None:
            self._index = {}
            if self.folder is not None:
                for path, prov in generated_files(self.folder):
                    if path.suffix.lower() in (".png", ".webp"):
                        self._index.setdefault((prov.prompt_id, int(prov.seed)), path)
        return self._index

    def find(self, pid: str, seed: int) -> Path | None:
        """The first frame's file, or None."""
        if self.store is not None:
            from vhd.store.provenance import find_provenance

            for row in find_provenance(self.store, pid, seed, kind="image"):  # type: ignore[arg-type]
                if Path(row.path).is_file():
                    return Path(row.path)
        return self._folder_index().get((pid, int(seed)))

    def load(self, pid: str, seed: int) -> tuple[Any, str] | str:
        """``(RGB image, sha256 of its file)``, or a reason naming the prompt id.

        The reason says there is no first frame, or that its file is not an image vhd accepts (it
        is opened as untrusted input, like every user file).
        """
        from vhd.errors import MediaError
        from vhd.media.untrusted import open_untrusted

        path = self.find(pid, seed)
        if path is None:
            return (
                f"no first frame for prompt {pid} (seed {seed}): generate its image first with the same --seed "
                "(e.g. --generator sdxl), into the same --store or under --first-frames DIR"
            )
        try:
            with open_untrusted(path) as im:
                return im.convert("RGB"), file_sha256(path)
        except (MediaError, OSError) as exc:
            return f"first frame for prompt {pid} (seed {seed}) unusable: {path.name}: {exc}"
