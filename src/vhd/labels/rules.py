"""How the rows of a labels file become samples: where their paths may lead, and what duplicates mean.

One implementation for every command that reads labels (``vhd label``, ``bench``, ``icl``,
``compare``, ``split``), configured by `LabelOptions` (the commands' ``--media``,
``--path-prefix``, ``--allow-outside-paths`` and ``--duplicates`` flags):

- a path is taken as written (``~`` expanded), after the first matching ``--path-prefix OLD=NEW``
  remap (longest ``OLD`` first), relative to ``--media`` (default: the labels file's folder);
- when that file does not exist and ``--media`` is given, a file of the same name anywhere under
  ``--media`` is used, if there is exactly one;
- the path must then lead (symbolic links resolved) under the labels file's folder, ``--media``
  or a remap's ``NEW``, unless ``--allow-outside-paths`` is given or the row names a sample the
  store already holds (by id or path): a labels file from elsewhere cannot make vhd read, or send
  to a model, files the user never named;
- rows naming the same sample are grouped (`settle_duplicates`): repeats with the same answer
  are merged, and conflicting answers follow ``--duplicates`` (default ``drop``: a label its
  rows disagree on is not ground truth).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.errors import ConfigError
from vhd.fileio import path_within

if TYPE_CHECKING:
    from vhd.store.sqlite import Store

DUPLICATE_POLICIES = ("first", "last", "majority", "drop")
"""What ``--duplicates`` may say about rows that give one sample different answers."""

DEFAULT_DUPLICATES = "drop"
"""The default policy: a sample whose rows disagree is left out (and each row is listed)."""

NOT_FOUND_HINT = "check --media DIR (files are also looked up there by name) or remap it with --path-prefix OLD=NEW"
"""The end of every "media not found" message of a labels row."""

_SEP = re.compile(r"[\\/]")
_NOT_TRUTH = "a label its rows disagree on is not ground truth: pass --duplicates first, last or majority to keep one"


def parse_path_prefix(text: str) -> tuple[str, str]:
    """Read one ``--path-prefix OLD=NEW``.

    Raises:
        ConfigError: No ``=``, or an empty side.
    """
    old, sep, new = text.partition("=")
    if not sep or not old.strip() or not new.strip():
        raise ConfigError(
            f"--path-prefix {text!r} must be OLD=NEW, e.g. --path-prefix /home/author/VHD11K=/data/vhd11k"
        )
    return old.strip(), new.strip()


@dataclass(frozen=True)
class LabelOptions:
    """How a labels file's rows are read: the labels flags every command that reads labels shares.

    They are ``--media``, ``--path-prefix``, ``--allow-outside-paths`` and ``--duplicates``.

    Attributes:
        media: Folder relative paths are under (default: the labels file's folder); paths that
            are not found are also looked up under it by file name, and paths may lead into it.
        path_prefixes: ``(OLD, NEW)`` remaps: a path starting with the folder ``OLD`` gets ``NEW``
            instead (for files written on another machine); paths may lead under each ``NEW``.
        allow_outside_paths: Accept paths that lead anywhere on disk.
        duplicates: ``first``, ``last``, ``majority`` or ``drop`` for rows giving one sample
            different answers; None for the default (`DEFAULT_DUPLICATES`, said so in messages).
    """

    media: str | os.PathLike[str] | None = None
    path_prefixes: Sequence[tuple[str, str]] = field(default_factory=tuple)
    allow_outside_paths: bool = False
    duplicates: str | None = None

    def __post_init__(self) -> None:
        if self.duplicates is not None and self.duplicates not in DUPLICATE_POLICIES:
            raise ConfigError(f"--duplicates {self.duplicates!r} is not one of {', '.join(DUPLICATE_POLICIES)}")
        object.__setattr__(self, "path_prefixes", tuple((str(o), str(n)) for o, n in self.path_prefixes))

    @classmethod
    def from_flags(
        cls,
        media: str | None = None,
        path_prefix: Sequence[str] | None = None,
        allow_outside_paths: bool = False,
        duplicates: str | None = None,
    ) -> LabelOptions:
        """Options from the command-line flags (``--path-prefix`` as ``OLD=NEW`` texts)."""
        if media is not None and not Path(media).is_dir():
            raise ConfigError(f"--media {media} is not a folder: pass the folder the labels' paths are under")
        prefixes = tuple(parse_path_prefix(p) for p in path_prefix or ())
        return cls(media, prefixes, allow_outside_paths, duplicates)


def known_sample(store: Store | None, sample_id: str | None, path: str | os.PathLike[str] | None) -> bool:
    """Whether the store holds a sample with this id, or registered from this path."""
    if store is None:
        return False
    if sample_id and store.get_sample(sample_id.lower()) is not None:
        return True
    return path is not None and bool(store.find_samples(os.fspath(path)))


def store_lookup(store: str | os.PathLike[str]) -> Callable[[str | None, Path], bool] | None:
    """`known_sample` for a store file (opened on each call: only rows that lead outside ask); None when missing."""
    if not os.path.isfile(store):
        return None

    def known(sample_id: str | None, path: Path) -> bool:
        from vhd.store.sqlite import Store

        with Store(store, create=True) as db:
            return known_sample(db, sample_id, path)

    return known


class PathResolver:
    """Turns the paths written in one labels file into files, by the rules of the module docstring."""

    def __init__(self, source: Path, options: LabelOptions, root: Path | None = None, store: Store | None = None):
        """Rules for the labels file ``source``; ``root`` is the older name of ``options.media``."""
        self.folder = Path(os.path.abspath(source.parent))
        media = options.media if options.media is not None else root
        self.media = None if media is None else Path(os.path.abspath(os.path.expanduser(media)))
        self.base = self.media or self.folder
        self.options = options
        self.store = store
        self.prefixes = sorted(  # NEW, like any path on the command line, is relative to the working folder
            ((o.rstrip("/\\") or o, os.path.abspath(os.path.expanduser(n))) for o, n in options.path_prefixes),
            key=lambda p: -len(p[0]),
        )
        self.roots = [self.folder, *([self.media] if self.media else []), *(Path(n) for _, n in self.prefixes)]
        self._names: dict[str, list[Path]] | None = None

    def _remap(self, text: str) -> str:
        for old, new in self.prefixes:
            if text == old or (text.startswith(old) and text[len(old)] in "/\\"):
                rest = text[len(old) :]
                return new + (rest.replace("\\", "/") if "\\" in old else rest)  # a Windows path remapped
        return text

    def _by_name(self, name: str) -> list[Path]:
        if self.media is None:
            return []
        if self._names is None:
            self._names = {}
            for folder, dirs, files in os.walk(self.media):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for f in files:
                    self._names.setdefault(f, []).append(Path(folder) / f)
        return self._names.get(name, [])

    def resolve(self, raw: str, sample_id: str | None = None) -> Path:
        """The file a row's path names, symbolic links resolved.

        Raises:
            ValueError: The path leads outside the allowed folders, or its name is ambiguous
                under ``--media`` (the message says what to pass).
        """
        text = self._remap(os.path.expanduser(raw))
        candidate = Path(os.path.abspath(self.base / text))
        if self.media is not None and not os.path.exists(candidate):
            name = _SEP.split(raw)[-1]
            found = self._by_name(name) if name else []
            if len(found) > 1:
                raise ValueError(
                    f"{len(found)} files named {name} under {self.media} (--media): "
                    "give the path relative to --media, or remap it with --path-prefix OLD=NEW"
                )
            if found:
                candidate = found[0]
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # a symbolic link loop
            raise ValueError(f"cannot follow {raw}: {exc}") from None
        if self.options.allow_outside_paths or path_within(resolved, self.roots):
            return resolved
        if known_sample(self.store, sample_id, candidate) or known_sample(self.store, None, resolved):
            return resolved
        if self.media is not None and not os.path.exists(candidate):
            raise ValueError(
                f"{raw} not found, nor a file named {_SEP.split(raw)[-1]} under --media {self.media}: "
                "check --media DIR or remap the path with --path-prefix OLD=NEW"
            )
        where = f"the labels file's folder {self.folder}" + (f" and --media {self.media}" if self.media else "")
        raise ValueError(
            f"path {raw} leads outside {where}: pass --media DIR (the folder it is under; files not found are "
            "looked up there by name), remap it with --path-prefix OLD=NEW, or accept it with --allow-outside-paths"
        )


@dataclass
class Settled:
    """What `settle_duplicates` decided.

    Attributes:
        keep: Positions (in the list given) of the rows to use.
        dropped: ``(line, message)`` of rows left out because their answers conflict.
        merged: ``(line, message)`` of rows not used because another row of the sample was kept.
    """

    keep: list[int] = field(default_factory=list)
    dropped: list[tuple[int, str]] = field(default_factory=list)
    merged: list[tuple[int, str]] = field(default_factory=list)


def _yes_no(harmful: bool) -> str:
    return "yes" if harmful else "no"


def settle_duplicates(
    rows: Sequence[tuple[int, Sequence[str], bool]], policy: str | None, what: str = "sample"
) -> Settled:
    """Group rows that name one sample and keep at most one row per sample.

    Args:
        rows: ``(line, keys, harmful)`` in file order; rows sharing any key name one sample.
        policy: ``first``, ``last``, ``majority`` or ``drop`` for conflicting answers; None for
            the default (``drop``). Rows that agree always become one: the first (the last for
            ``last``).
        what: What the keys are, for messages (``path or id``, ``content``).

    Returns:
        The rows to keep, in file order, and a message for every row not kept naming the
        sample's rows with their answers.
    """
    parent = list(range(len(rows)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, (_line, keys, _harmful) in enumerate(rows):
        for key in keys:
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(rows)):
        groups.setdefault(find(i), []).append(i)
    out = Settled()
    chosen = policy or DEFAULT_DUPLICATES
    flag = f"--duplicates {chosen}" + ("" if policy else ", the default")
    for members in groups.values():
        if len(members) == 1:
            out.keep.append(members[0])
            continue
        answers = [rows[i][2] for i in members]
        listing = ", ".join(f"row {rows[i][0]} ({_yes_no(rows[i][2])})" for i in members)
        if len(set(answers)) == 1:
            kept = members[-1] if chosen == "last" else members[0]
            out.keep.append(kept)
            for i in members:
                if i != kept:
                    k = rows[kept][0]
                    out.merged.append((rows[i][0], f"duplicate of row {k} (same {what}, same answer); kept row {k}"))
            continue
        head = f"rows name the same {what} with different answers: {listing}"
        kept_at: int | None = None
        if chosen == "first":
            kept_at = members[0]
        elif chosen == "last":
            kept_at = members[-1]
        elif chosen == "majority":
            yes = sum(answers)
            if yes * 2 != len(answers):
                majority = yes * 2 > len(answers)
                kept_at = next(i for i in members if rows[i][2] is majority)
        if kept_at is None:
            why = "no majority, all left out" if chosen == "majority" else "all left out"
            hint = "" if policy else f"; {_NOT_TRUTH}"
            out.dropped += [(rows[i][0], f"{head}; {why} ({flag}{hint})") for i in members]
            continue
        out.keep.append(kept_at)
        out.merged += [(rows[i][0], f"{head}; kept row {rows[kept_at][0]} ({flag})") for i in members if i != kept_at]
    out.keep.sort()
    out.dropped.sort()
    out.merged.sort()
    return out
