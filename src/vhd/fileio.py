r"""Files and their names, shared by every command: atomic writes, safe reads, names shown and stored.

Writes are atomic: the content goes to a temporary file in the target's folder, is flushed to
disk, and is then renamed over the target: a reader, or a re-run after the process was killed,
sees the old file or the complete new one, never a partial file under the final name. A crash
leaves at most a hidden ``.NAME.*.tmp`` file beside it.

Reads of user files go through `open_regular`: a FIFO, socket or device named ``*.jpg`` is
refused instead of blocking (or streaming forever). Names go through `display_path` before they
are stored (bytes that are not UTF-8 become ``\xNN``, so SQLite, JSON and CSV accept them) and
through `printable` before they are printed (control characters, terminal escape sequences
among them, are shown escaped, never sent to the terminal).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import re
import shutil
import stat
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from pathlib import Path
from typing import IO, Any, BinaryIO, NamedTuple

from vhd.errors import ConfigError

Content = str | bytes | Callable[[IO[Any]], None]
"""Text (written as UTF-8), bytes, or a function that writes to the open file."""


def default_mode(*, folder: bool = False) -> int:
    """The mode ``open()`` (``mkdir``) gives a new file (folder) under the umask, not tempfile's 0600 (0700)."""
    mask = None
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii", errors="replace") as fh:
        mask = next((int(line.split()[1], 8) for line in fh if line.startswith("Umask:")), None)
    if mask is None:  # no /proc: set it and set it back (os.umask has no read-only form)
        os.umask(mask := os.umask(0o022))
    return (0o777 if folder else 0o666) & ~mask


def atomic_write(path: str | os.PathLike[str], content: Content, *, binary: bool = False) -> Path:
    """Write a file atomically.

    Args:
        path: The final file; its folder is created when missing.
        content: Text (UTF-8, newlines untranslated), bytes, or a function given the open
            temporary file.
        binary: For a function: open the file in binary mode instead of text.

    Returns:
        The final path. The file keeps the mode of the file it replaces, else the umask's (`default_mode`).
        A symbolic link at ``path`` is replaced by the file, never written through.

    Raises:
        ConfigError: ``path`` is a folder (or a link to one), or its folder cannot be created or
            written (the message says which).
    """
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"cannot write {display_path(target)}: it is a folder; name a file to write instead")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror}; choose another output path") from exc
    if isinstance(content, str):
        data: bytes | None = content.encode("utf-8")
    else:
        data = content if isinstance(content, bytes) else None
    try:
        if data is not None or binary:
            fh: IO[Any] = os.fdopen(fd, "wb")
        else:
            fh = os.fdopen(fd, "w", encoding="utf-8", newline="")
        with fh:
            if data is not None:
                fh.write(data)
            elif callable(content):
                content(fh)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            mode = target.stat().st_mode & 0o777
        except OSError:
            mode = default_mode()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a folder atomically: yield a hidden temporary folder beside ``path``, then swap it in.

    On success the temporary folder replaces ``path`` (an existing folder there is removed after
    the new one is in place); on any error it is removed, so ``path`` is the old folder or none,
    never a partial one. The folder gets the umask's mode (`default_mode`), not a private 0700.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        os.chmod(tmp, default_mode(folder=True))
        yield tmp
        old = None
        if target.exists() or target.is_symlink():
            old = target.with_name(f"{tmp.name}.old")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() and not old.is_symlink() else old.unlink()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""A spreadsheet reads a cell starting with one of these as a formula (OWASP's CSV-injection rule)."""


def escape_cell(value: object) -> object:
    """Make a text cell safe to open in a spreadsheet: a leading formula character gets a ``'``.

    Text that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is prefixed with a
    single quote, which spreadsheets show as text. Text that already starts with quotes followed
    by such a character gets one more quote, so `unescape_cell` gives back exactly the original.
    Numbers, booleans and None are returned unchanged.
    """
    if isinstance(value, str) and value.lstrip("'").startswith(_FORMULA_START):
        return "'" + value
    return value


def unescape_cell(value: str) -> str:
    """Undo `escape_cell`: vhd's CSV readers give back the text vhd's writers were given."""
    if value.startswith("'") and value[1:].lstrip("'").startswith(_FORMULA_START):
        return value[1:]
    return value


def path_within(path: str | os.PathLike[str], folders: Iterable[str | os.PathLike[str]]) -> bool:
    """Whether a path lies in one of the folders (or is one), symbolic links resolved on both sides.

    The rule every reader of a file that names other files applies (labels files, manifests): a
    path written there, as ``../``, ``~`` or absolute, may lead anywhere on disk, so by default it
    must stay under the folders the user named; a symbolic link inside them that leads out counts
    as outside.
    """
    real = os.path.realpath(path)
    for folder in folders:
        root = os.path.realpath(folder)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def display_path(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    r"""Return a path (or any text that may hold one) as valid UTF-8 text, to store or show.

    A file name that is not valid UTF-8 reaches Python with surrogate characters, which SQLite,
    JSON encoders and a UTF-8 terminal refuse; its bytes come back here as ``\xNN``
    (``b"bad\xff.jpg"`` becomes ``bad\xff.jpg``). Valid names are returned unchanged. Use it
    wherever a path is stored; print through `printable`, which calls it.
    """
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:  # surrogates that did not come from the file system
        raw = os.fspath(path).encode("utf-8", "backslashreplace")  # type: ignore[union-attr]
    return raw.decode("utf-8", "backslashreplace")


_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional overrides and isolates: they reorder what a terminal shows (``evil\\u202egpj.exe``)."""

_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, multiline: bool = False) -> str:
    r"""Return text that is safe to print to a terminal: control characters shown escaped.

    Escape sequences in a file name (``"\x1b[2J"`` clears the screen), a bell, a carriage return
    that overwrites the line, or a bidirectional override are shown as ``\x1b``, ``\x07``,
    ``\r``, ``\u202e``, never interpreted. Bytes that are not UTF-8 are shown as by
    `display_path`. Everything else, non-ASCII letters included, is unchanged. Rich markup is not
    this function's business: print such text with ``markup=False`` or as a ``rich.text.Text``.

    Args:
        text: Anything; it is converted with ``str()`` (paths with `display_path`).
        multiline: Keep newlines (for multi-line text such as a model's reply).
    """
    value = display_path(text) if isinstance(text, str | bytes | os.PathLike) else display_path(str(text))
    return "".join(
        _escaped(c) if (unicodedata.category(c) == "Cc" and not (multiline and c == "\n")) or c in _BIDI_CONTROLS else c
        for c in value
    )


UNTRUSTED_TEXT_LIMIT = 256
"""Characters kept of a string another party wrote (a manifest's claimed generator, a signer name)."""

_TERMINAL_SEQUENCE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])|\x9b[0-?]*[ -/]*[@-~]"
)
"""ANSI escape sequences (CSI, OSC, two-character escapes): removed whole, not only their ESC."""

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Controls, format characters (bidirectional and zero-width ones included), surrogates,
private-use and unassigned code points, line and paragraph separators."""


def untrusted_text(text: object, limit: int = UNTRUSTED_TEXT_LIMIT) -> str | None:
    r"""A string written by someone else, made safe to keep, show and export: printable, one line, bounded.

    Terminal escape sequences are removed whole; control, format (bidirectional and zero-width),
    surrogate, private-use and unassigned characters are dropped; any run of white space (CR and
    LF included) becomes one space; the result is cut to ``limit`` characters, the last one an
    ellipsis when something was cut. Markup such as ``<script>`` is kept as text: whoever shows
    it escapes it (the review app's templates do). Nothing printable left gives None.

    Args:
        text: Anything; non-strings are converted with ``str()``.
        limit: Most characters kept (at least 1).

    Example:
        >>> untrusted_text("DALL\u202e-E\r\n\x1b[31m3\x1b[0m")
        'DALL-E 3'
    """
    value = text if isinstance(text, str) else str(text)
    cut = len(value) > limit * 8  # only this much is read: plenty to fill `limit` once cleaned
    value = _TERMINAL_SEQUENCE.sub("", value[: limit * 8])
    kept = " ".join(
        "".join(c for c in value if c.isspace() or unicodedata.category(c) not in _INVISIBLE_CATEGORIES).split()
    )
    if kept and (cut or len(kept) > limit):
        kept = kept[: max(0, limit - 1)] + "\u2026"
    return kept or None


_FILE_KINDS = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISLNK, "symbolic link"),
)


def not_regular_reason(mode: int) -> str | None:
    """Return ``"not a regular file (fifo)"`` (socket, character device...) for a ``st_mode``, or None."""
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _FILE_KINDS if test(mode)), "special file")
    return f"not a regular file ({kind})"


def regular_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` (symbolic links followed) must not be opened as a file, or None.

    A FIFO blocks whoever opens it until a writer comes, a device streams forever: only regular
    files are read. A path that cannot be examined at all gives None (opening it reports why).
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return not_regular_reason(mode)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a user's file for binary reading, refusing (without blocking) anything but a regular file.

    The file is opened non-blocking and examined before any byte is read, so a FIFO named
    ``*.jpg`` (or one swapped in after discovery) fails at once instead of hanging the run.

    Raises:
        OSError: The file cannot be opened, or is not a regular file (``strerror`` says
            ``not a regular file (fifo)``, ``(character device)``...).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        problem = not_regular_reason(os.fstat(fd).st_mode)
        if problem is not None:
            raise OSError(errno.EINVAL, problem, os.fspath(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class FileStat(NamedTuple):
    """What a file's ``stat`` says about it: the key of the store's stat index (like git's index).

    A file whose path, size, modification and change times and inode are all unchanged is taken to
    hold the same bytes as when it was last hashed, so a resumed run need not read it again. A
    named tuple: a resumed run makes one per file, and a tuple is several times quicker to build.

    Attributes:
        path: The path as given (absolute, symbolic links not resolved), as `display_path` shows it.
        size: Size in bytes.
        mtime_ns: Modification time, nanoseconds since the epoch.
        ctime_ns: Inode change time, nanoseconds (changed by ``touch -d``, renames, ``chmod``...).
        inode: Inode number.
    """

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int


def file_stat(path: str | os.PathLike[str]) -> FileStat:
    """Return a file's `FileStat` (following symbolic links).

    Raises:
        OSError: The file cannot be reached.
    """
    st = os.stat(path)
    return FileStat(display_path(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


# --- hostile text: JSON nesting and CSV structure ------------------------------------------------

JSON_MAX_DEPTH = 100
"""Deepest nesting of lists and objects read from a user's JSON (real inputs are under 10 deep)."""

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """Deepest nesting of lists and objects in JSON text, strings skipped (two regex passes, at C speed)."""
    bare = _JSON_STRING.sub("", text)
    brackets = _NOT_BRACKET.sub("", bare)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


class JSONTooDeep(ValueError):
    """JSON nested deeper than allowed (parsing it would exhaust Python's recursion limit)."""

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(f"JSON nested {depth} levels deep (at most {limit} are read)")
        self.depth = depth
        self.limit = limit


def load_json(text: str, *, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """``json.loads`` behind a nesting guard, checked before parsing (no `RecursionError`).

    Raises:
        JSONTooDeep: The text nests deeper than ``max_depth`` (a `ValueError`).
        json.JSONDecodeError: The text is not JSON.
    """
    if text.count("[") + text.count("{") > max_depth:  # only then can it be too deep
        depth = json_depth(text)
        if depth > max_depth:
            raise JSONTooDeep(depth, max_depth)
    return json.loads(text)


class CsvTable(NamedTuple):
    """A CSV file read with its structural problems found (see `read_csv`).

    Attributes:
        header: The column names (stripped), duplicates included as written.
        rows: ``(line, cells)`` for each record: its first physical line, and the cells by column
            (the first of duplicated columns wins; cells beyond the header are under None, as
            `csv.DictReader` puts them).
        problems: ``(line, message)`` for what was left out or ignored: a duplicated column, a
            quote never closed (the lines it swallowed are left out).
    """

    header: list[str]
    rows: list[tuple[int, dict[str | None, Any]]]
    problems: list[tuple[int, str]]


def read_csv(text: str) -> CsvTable:
    """Read CSV text into a header and rows, reporting duplicated columns and an unterminated quote.

    Python's reader silently takes the last of two same-named columns, and reads everything after
    a quote that is never closed as one cell, to the end of the file. Here the first column of a
    name is kept and each later one is reported; a record that runs to the end of the file inside
    an open quote is left out and reported with the line where the quote opened.

    Raises:
        csv.Error: The text cannot be read as CSV at all (a NUL byte, ...).
    """
    reader = csv.reader(io.StringIO(text, newline=""))
    problems: list[tuple[int, str]] = []
    header = [h.strip() for h in next(reader, [])]
    first: dict[str, int] = {}
    for index, name in enumerate(header):
        key = name.lower()
        if key in first and key:
            problems.append((1, f"column {name!r} appears more than once; only the first one is read"))
        else:
            first.setdefault(key, index)
    keep = sorted(first.values())
    records: list[tuple[int, int, list[str]]] = []
    start = reader.line_num + 1
    for values in reader:
        records.append((start, reader.line_num, values))
        start = reader.line_num + 1
    if records and records[-1][1] > records[-1][0] and _unclosed(text):
        begin, end, _ = records.pop()
        problems.append((begin, f"a quote opened on this line is never closed; lines {begin}-{end} were left out"))
    rows: list[tuple[int, dict[str | None, Any]]] = []
    for begin, _, values in records:
        cells: dict[str | None, Any] = {header[i]: values[i] for i in keep if i < len(values)}
        if len(values) > len(header):
            cells[None] = values[len(header) :]
        rows.append((begin, cells))
    return CsvTable(header, rows, problems)


def _unclosed(text: str) -> bool:
    """Whether CSV text ends inside a quoted cell (Python's strict reader says so at its end)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    while True:
        try:
            next(reader)
        except StopIteration:
            return False
        except csv.Error as exc:  # the strict reader goes on with the next line after an error
            if "unexpected end of data" in str(exc):
                return True
