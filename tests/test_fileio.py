import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vhd.errors import ConfigError
from vhd.fileio import atomic_folder, atomic_write, default_mode


def test_text_bytes_and_writers(tmp_path: Path) -> None:
    assert atomic_write(tmp_path / "a" / "t.txt", "héllo\r\n").read_bytes() == "héllo\r\n".encode()
    assert atomic_write(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    assert atomic_write(tmp_path / "c.txt", lambda f: f.write("x\n")).read_text() == "x\n"
    assert atomic_write(tmp_path / "d.bin", lambda f: f.write(b"\xff"), binary=True).read_bytes() == b"\xff"


def test_failure_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("old")
    os.chmod(target, 0o600)

    def boom(f: object) -> None:
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        atomic_write(target, boom)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    atomic_write(target, "new")
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o600


@pytest.fixture
def umask() -> Iterator[Callable[[int], int]]:
    before = os.umask(0o022)
    os.umask(before)
    try:
        yield os.umask
    finally:
        os.umask(before)


@pytest.mark.parametrize(("mask", "file_mode", "folder_mode"), [(0o002, 0o664, 0o775), (0o027, 0o640, 0o750)])
def test_new_files_and_folders_get_the_umask_mode(
    tmp_path: Path, umask: Callable[[int], int], mask: int, file_mode: int, folder_mode: int
) -> None:
    umask(mask)
    assert (default_mode(), default_mode(folder=True)) == (file_mode, folder_mode)
    written = atomic_write(tmp_path / "new.txt", "x")
    assert written.stat().st_mode & 0o777 == file_mode  # tempfile alone gives 0600
    with atomic_folder(tmp_path / "dataset") as building:
        atomic_write(building / "inner.json", "{}")
    assert (tmp_path / "dataset").stat().st_mode & 0o777 == folder_mode  # tempfile alone gives 0700
    assert (tmp_path / "dataset" / "inner.json").stat().st_mode & 0o777 == file_mode


def test_unwritable_folder_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ConfigError, match="cannot write"):
        atomic_write(tmp_path / "file" / "x.txt", "x")


@settings(max_examples=300)
@given(st.text())
def test_csv_cell_escape_round_trips(text: str) -> None:
    from vhd.fileio import escape_cell, unescape_cell

    escaped = escape_cell(text)
    assert isinstance(escaped, str) and unescape_cell(escaped) == text
    assert not escaped.startswith(("=", "+", "-", "@", "\t", "\r"))


def test_csv_cell_escape_examples() -> None:
    from vhd.fileio import escape_cell

    assert escape_cell("=HYPERLINK(1)") == "'=HYPERLINK(1)"
    assert escape_cell("'=x") == "''=x" and escape_cell("'quoted") == "'quoted"
    assert escape_cell("plain") == "plain" and escape_cell(-1.5) == -1.5 and escape_cell(None) is None


def test_untrusted_text_is_printable_one_line_and_bounded() -> None:
    from vhd.fileio import untrusted_text

    assert untrusted_text("DALL\u202e-E\r\n\x1b[31m3\x1b[0m") == "DALL-E 3"  # bidi, CR/LF, colour codes
    assert untrusted_text("\x1b]0;new title\x07ok\u200b\u2028go") == "ok go"  # OSC, zero-width, line separator
    assert untrusted_text("<script>alert(1)</script>") == "<script>alert(1)</script>"  # escaped where shown
    assert untrusted_text("\x00\x07 \t ") is None and untrusted_text(42) == "42"
    cut = untrusted_text("A" * 60_000)
    assert cut is not None and len(cut) == 256 and cut.endswith("\u2026")
    assert untrusted_text("abc", limit=2) == "a\u2026"
