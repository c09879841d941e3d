"""Hash block lists: keep known-bad files (for example known illegal material) out of a dataset.

Trust-and-safety teams receive lists of hashes of files they must never store or show to anyone,
models included. A `BlockList` holds such a list: exact hashes (sha256, md5, sha1) matched
against a file's bytes, and perceptual PDQ hashes (Meta's 256-bit image hash) matched within a
Hamming distance, so re-encoded or resized copies of a listed image are caught too.

File format (text, UTF-8), one hash per line::

    # comments and blank lines are ignored
    sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  optional label
    md5:098f6bcd4621d373cade4e832627b4f6
    pdq:f8f8f0cee0f4a84f06370a22038f63f0b36e2ed596621e1d33e6b39c4e9c9b22, hashed by partner X
    9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08   # bare: 64 hex = sha256

A bare hash is read by its length (64 hex digits sha256, 40 sha1, 32 md5); PDQ hashes are also 64
hex digits, so they need the ``pdq:`` prefix. Anything after the hash (separated by a space, a
tab or a comma) is kept as the entry's label. A CSV with a header row naming a ``hash`` column
(and optionally ``type``/``algorithm`` and ``label``) is read too. A line that cannot be read
stops the load with its line number: a safety list is never half-applied.

Only exact hashes can be checked without decoding. PDQ needs the pixels: an image is decoded
with Pillow (under vhd's pixel limits) for the sole purpose of hashing it, and needs the
``pdqhash`` package (``pip install 'vhd[collect]'``). Videos are matched by exact hashes only.

Example:
    >>> blocks = BlockList.load("known_bad.txt")  # doctest: +SKIP
    >>> hit = blocks.match("media/3fa9c2e1.jpg")  # doctest: +SKIP
    >>> if hit:  # doctest: +SKIP
    ...     print(hit.algorithm, hit.distance, hit.label)
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from vhd.collect.sniff import SNIFF_BYTES, sniff
from vhd.errors import ConfigError, MediaError, MissingDependencyError
from vhd.fileio import open_regular
from vhd.records import Kind

EXACT_ALGORITHMS: Final = ("sha256", "sha1", "md5")
"""Exact (cryptographic) hash algorithms a list may hold, matched on a file's bytes."""

PDQ_MATCH_DISTANCE: Final = 31
"""Default largest Hamming distance (of 256 bits) at which two PDQ hashes match (the reference's)."""

PDQ_MIN_QUALITY: Final = 50
"""PDQ hashes of images below this quality (flat, featureless images) are not matched."""

_HEX_LENGTH: Final = {"sha256": 64, "sha1": 40, "md5": 32, "pdq": 64}
_BY_LENGTH: Final = {64: "sha256", 40: "sha1", 32: "md5"}
_ALIASES: Final = {"sha-256": "sha256", "sha-1": "sha1", "md-5": "md5", "pdqhash": "pdq"}
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_SPLIT = re.compile(r"[\s,;]+", re.ASCII)
_CHUNK: Final = 1 << 20
_PDQ_SIDE: Final = 512


@dataclass(frozen=True)
class BlockMatch:
    """A file found on a block list.

    Attributes:
        algorithm: ``sha256``, ``sha1``, ``md5`` or ``pdq``.
        listed: The hash as written on the list (lower-case hex).
        distance: Hamming distance between the file's PDQ hash and the listed one; 0 for exact.
        label: The text after the hash on its line, if any.
        line: Line of the list file the entry came from.
    """

    algorithm: str
    listed: str
    distance: int
    label: str | None
    line: int

    def describe(self) -> str:
        """Return a one-line reason such as ``"on the block list (md5 098f6b..., line 3)"``."""
        how = f"pdq within {self.distance} bits" if self.algorithm == "pdq" else self.algorithm
        label = f", {self.label}" if self.label else ""
        return f"on the block list ({how}: {self.listed[:12]}..., line {self.line}{label})"


@dataclass(frozen=True)
class _Entry:
    listed: str
    label: str | None
    line: int


@dataclass(frozen=True)
class Digests:
    """Exact hashes of some content (hex, lower case); None where not computed."""

    sha256: str
    md5: str | None = None
    sha1: str | None = None


def file_digests(path: str | Path, algorithms: Iterable[str] = EXACT_ALGORITHMS) -> Digests:
    """Hash a file once with several algorithms, streaming it in 1 MiB chunks.

    Args:
        path: The file.
        algorithms: Which of sha256, md5 and sha1 to compute (sha256 always is).

    Returns:
        The digests.

    Raises:
        OSError: The file cannot be read, or is not a regular file (refused without blocking).
    """
    wanted = set(algorithms) | {"sha256"}
    hashers = {name: hashlib.new(name) for name in wanted}
    with open_regular(path) as fh:
        while chunk := fh.read(_CHUNK):
            for h in hashers.values():
                h.update(chunk)
    return Digests(**{name: h.hexdigest() for name, h in hashers.items()})


def bytes_digests(data: bytes, algorithms: Iterable[str] = EXACT_ALGORITHMS) -> Digests:
    """Like `file_digests`, for content in memory."""
    wanted = set(algorithms) | {"sha256"}
    return Digests(**{name: hashlib.new(name, data).hexdigest() for name in wanted})


def pdq_hash(source: str | Path | bytes, *, max_pixels: int = 64_000_000) -> tuple[str, int]:
    """Compute the PDQ hash of an image (decoded with Pillow only to hash it).

    The image is read in RGB, its EXIF orientation ignored (as the reference hashers do) and
    shrunk to at most 512 px a side first, as ThreatExchange's Python hasher does.

    Args:
        source: An image file or its bytes.
        max_pixels: Images declaring more pixels are refused before decoding.

    Returns:
        ``(hex, quality)``: the 64-hex-digit hash and its quality (0-100).

    Raises:
        MissingDependencyError: ``pdqhash`` (or numpy) is not installed.
        MediaError: The image cannot be decoded or is too large.
    """
    try:
        import numpy as np

        pdqhash = importlib.import_module("pdqhash")
    except ImportError as exc:
        raise MissingDependencyError("pdqhash", "collect") from exc
    from vhd.media.image import open_untrusted

    try:
        with open_untrusted(source) as img:
            if img.width * img.height > max_pixels:
                raise MediaError(f"image declares {img.width}x{img.height} pixels, over the {max_pixels} limit")
            img.draft("RGB", (_PDQ_SIDE, _PDQ_SIDE))
            rgb = img.convert("RGB")
    except MediaError:
        raise
    except Exception as exc:
        raise MediaError(f"cannot decode the image to hash it ({type(exc).__name__}: {exc})") from exc
    rgb.thumbnail((_PDQ_SIDE, _PDQ_SIDE))
    bits, quality = pdqhash.compute(np.asarray(rgb, dtype=np.uint8))
    value = int("".join("1" if b else "0" for b in bits), 2)
    return f"{value:064x}", int(quality)


def _algorithm(name: str, where: str) -> str:
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in _HEX_LENGTH:
        raise ConfigError(f"{where}: unknown hash type {name!r}; use sha256, sha1, md5 or pdq")
    return key


def _entry(where: str, value: str, algorithm: str | None) -> tuple[str, str]:
    text = value.strip()
    if algorithm is None and ":" in text:
        prefix, text = text.split(":", 1)
        algorithm = prefix
    if not text or not _HEX.match(text):
        raise ConfigError(f"{where}: {value!r} is not a hex hash; fix or remove the line")
    if algorithm is None:
        guessed = _BY_LENGTH.get(len(text))
        if guessed is None:
            raise ConfigError(
                f"{where}: a bare hash of {len(text)} hex digits is neither sha256 (64), sha1 (40) nor md5 (32); "
                "prefix it with its type, e.g. pdq:"
            )
        algorithm = guessed
    algorithm = _algorithm(algorithm, where)
    if len(text) != _HEX_LENGTH[algorithm]:
        raise ConfigError(f"{where}: a {algorithm} hash has {_HEX_LENGTH[algorithm]} hex digits, got {len(text)}")
    return algorithm, text.lower()


def _header(fields: Sequence[str]) -> dict[str, int] | None:
    names = [f.strip().lower() for f in fields]
    if "hash" not in names:
        return None
    return {name: i for i, name in enumerate(names)}


class BlockList:
    """A list of hashes whose files must be quarantined, never opened by a model.

    Build one with `BlockList.load` (a file) or `BlockList.parse` (text). Matching is
    thread-safe (the object is not modified after construction).

    Args:
        entries: ``(algorithm, hex, label, line)`` tuples.
        pdq_distance: Largest Hamming distance at which a PDQ hash matches (0-256).
        pdq_min_quality: Images whose PDQ quality is below this are not PDQ-matched.

    Raises:
        ConfigError: A hash or a setting is invalid.
    """

    def __init__(
        self,
        entries: Iterable[tuple[str, str, str | None, int]] = (),
        *,
        pdq_distance: int = PDQ_MATCH_DISTANCE,
        pdq_min_quality: int = PDQ_MIN_QUALITY,
    ) -> None:
        if not 0 <= pdq_distance <= 256:
            raise ConfigError(f"the PDQ match distance must be between 0 and 256, got {pdq_distance}")
        self.pdq_distance = pdq_distance
        self.pdq_min_quality = pdq_min_quality
        self._exact: dict[str, dict[str, _Entry]] = {name: {} for name in EXACT_ALGORITHMS}
        self._pdq: list[_Entry] = []
        for algorithm, value, label, line in entries:
            algorithm, value = _entry(f"block list entry {line}", value, algorithm)
            if algorithm == "pdq":
                self._pdq.append(_Entry(value, label, line))
            else:
                self._exact[algorithm].setdefault(value, _Entry(value, label, line))
        self._pdq_table: Any = None

    @classmethod
    def parse(cls, text: str, *, name: str = "block list", **options: Any) -> BlockList:
        """Read a block list from text in the format described in this module.

        Args:
            text: The list's content.
            name: What to call it in error messages (usually its path).
            **options: ``pdq_distance`` and ``pdq_min_quality`` (see the class).

        Returns:
            The block list.

        Raises:
            ConfigError: A line cannot be read (the message gives its number).
        """
        entries: list[tuple[str, str, str | None, int]] = []
        header: dict[str, int] | None = None
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip().lstrip("\ufeff")
            if not line or line.startswith("#"):
                continue
            where = f"{name} line {number}"
            if header is None and not entries:
                header = _header(next(csv.reader([line])))
                if header is not None:
                    continue
            if header is not None:
                fields = next(csv.reader([line]))
                value = fields[header["hash"]] if header["hash"] < len(fields) else ""
                column = header.get("type", header.get("algorithm"))
                kind = fields[column] if column is not None and column < len(fields) and fields[column] else None
                label_at = header.get("label", header.get("note"))
                label = fields[label_at].strip() if label_at is not None and label_at < len(fields) else None
                algorithm, value = _entry(where, value, kind)
                entries.append((algorithm, value, label or None, number))
                continue
            if " #" in line:
                line = line.split(" #", 1)[0].rstrip()
            parts = _SPLIT.split(line, maxsplit=1)
            algorithm, value = _entry(where, parts[0], None)
            label = parts[1].strip(" ,;\t") if len(parts) > 1 else ""
            entries.append((algorithm, value, label or None, number))
        return cls(entries, **options)

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> BlockList:
        """Read a block list file.

        Args:
            path: The list (text or CSV, UTF-8).
            **options: ``pdq_distance`` and ``pdq_min_quality`` (see the class).

        Returns:
            The block list.

        Raises:
            ConfigError: The file cannot be read or a line is invalid.
            MissingDependencyError: The list holds PDQ hashes and ``pdqhash`` is not installed
                (checked here, before any file is fetched or ingested).
        """
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read block list {path}: {exc}; check the path") from exc
        blocks = cls.parse(text, name=str(path), **options)
        if blocks.has_pdq:
            try:
                importlib.import_module("numpy")
                importlib.import_module("pdqhash")
            except ImportError as exc:
                raise MissingDependencyError("pdqhash", "collect") from exc
        return blocks

    # -- what it holds ----------------------------------------------------------------------

    def __len__(self) -> int:
        return sum(len(v) for v in self._exact.values()) + len(self._pdq)

    def counts(self) -> dict[str, int]:
        """Entries per algorithm, e.g. ``{"sha256": 10, "md5": 0, "sha1": 0, "pdq": 3}``."""
        out = {name: len(table) for name, table in self._exact.items()}
        out["pdq"] = len(self._pdq)
        return out

    @property
    def has_pdq(self) -> bool:
        """Whether matching needs perceptual hashes (and so decodes images)."""
        return bool(self._pdq)

    @property
    def exact_algorithms(self) -> list[str]:
        """The exact algorithms the list uses (sha256 always included, it names files)."""
        return ["sha256", *(name for name in ("md5", "sha1") if self._exact[name])]

    # -- matching ---------------------------------------------------------------------------

    def match_digests(self, digests: Digests) -> BlockMatch | None:
        """Return the exact-hash entry these digests hit, or None."""
        for name in EXACT_ALGORITHMS:
            value = getattr(digests, name)
            entry = self._exact[name].get(value) if value else None
            if entry is not None:
                return BlockMatch(name, entry.listed, 0, entry.label, entry.line)
        return None

    def match_pdq(self, pdq_hex: str, quality: int = 100) -> BlockMatch | None:
        """Return the closest listed PDQ hash within the match distance, or None.

        Args:
            pdq_hex: The file's PDQ hash (64 hex digits).
            quality: Its PDQ quality; below ``pdq_min_quality`` nothing matches.
        """
        if not self._pdq or quality < self.pdq_min_quality:
            return None
        import numpy as np

        if self._pdq_table is None:
            self._pdq_table = np.array(
                [[int(e.listed[i : i + 16], 16) for i in range(0, 64, 16)] for e in self._pdq], dtype=np.uint64
            )
        probe = np.array([int(pdq_hex[i : i + 16], 16) for i in range(0, 64, 16)], dtype=np.uint64)
        # bits set per row (np.bitwise_count is numpy 2 only; the floor is numpy 1.24)
        distances = np.unpackbits((self._pdq_table ^ probe).view(np.uint8), axis=1).sum(axis=1)
        best = int(distances.argmin())
        distance = int(distances[best])
        if distance > self.pdq_distance:
            return None
        entry = self._pdq[best]
        return BlockMatch("pdq", entry.listed, distance, entry.label, entry.line)

    def match(self, source: str | Path | bytes, *, digests: Digests | None = None) -> BlockMatch | None:
        """Check a file (or content in memory) against the list.

        Exact hashes are checked first; when none hits and the list holds PDQ hashes, an image
        (recognised by its magic bytes, whatever its name) is decoded and PDQ-hashed. Content
        that cannot be decoded is not PDQ-matched (its exact hashes were still checked).

        Args:
            source: A file path or the content itself.
            digests: Exact digests already computed (skips re-reading the file for them).

        Returns:
            The entry that matched, or None.

        Raises:
            OSError: The file cannot be read.
        """
        if digests is None:
            algorithms = self.exact_algorithms
            if isinstance(source, bytes):
                digests = bytes_digests(source, algorithms)
            else:
                digests = file_digests(source, algorithms)
        hit = self.match_digests(digests)
        if hit is not None or not self._pdq:
            return hit
        if isinstance(source, bytes):
            head = source[:SNIFF_BYTES]
        else:
            with open_regular(source) as fh:
                head = fh.read(SNIFF_BYTES)
        kind = sniff(head)
        if kind is None or kind.kind is not Kind.IMAGE:
            return None
        try:
            value, quality = pdq_hash(source)
        except MediaError:
            return None
        return self.match_pdq(value, quality)
