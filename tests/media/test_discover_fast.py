"""The fast form of discovery a resumed run uses: plain files as strings, paths seen recorded without lookups.

Whatever the layout (symbolic links before or after their targets, overlapping inputs, a folder's
own manifest, odd names), ``iter_discover(..., first_seen=set.add, record_new=set.put_new,
plain_files=True)`` must find the same samples, in the same order, with the same paths and the same
skip reasons as the plain `discover`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from vhd.media.discover import PlainFile, Skipped, discover, iter_discover
from vhd.records import Kind, MediaItem
from vhd.store.statindex import ScratchSet


def _img(path: Path, shade: int = 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (shade, 0, 0)).save(path)
    return path


def _fast(inputs: list[Path], **kw: bool) -> tuple[list[tuple[str, Kind, bool]], list[tuple[str, str]], int]:
    seen = ScratchSet()
    try:
        items: list[tuple[str, Kind, bool]] = []
        skipped: list[tuple[str, str]] = []
        for found in iter_discover(inputs, first_seen=seen.add, record_new=seen.put_new, plain_files=True, **kw):
            if isinstance(found, Skipped):
                skipped.append((str(found.path), found.reason))
            elif isinstance(found, PlainFile):
                item = found.item()
                assert isinstance(item, MediaItem) and item.path == Path(found.path) and not found.is_frame_folder
                items.append((found.path, found.kind, False))
            else:
                items.append((str(found.path), found.kind, found.is_frame_folder))
        return items, skipped, len(seen)
    finally:
        seen.close()


def _slow(inputs: list[Path], **kw: bool) -> tuple[list[tuple[str, Kind, bool]], list[tuple[str, str]]]:
    found = discover(inputs, **kw)
    items = [(str(i.path), i.kind, i.is_frame_folder) for i in found.items]
    assert all(i.kind is not None for i in found.items)
    return items, [(str(s.path), s.reason) for s in found.skipped]  # type: ignore[misc]


def _same(inputs: list[Path], **kw: bool) -> list[tuple[str, Kind, bool]]:
    items, skipped, n_seen = _fast(inputs, **kw)
    assert (items, skipped) == _slow(inputs, **kw)
    assert n_seen == len(items)  # every path yielded is in the set, each once
    return items


@pytest.mark.parametrize("link_name", ["a_link.png", "z_link.png"])  # the link sorts before / after its target
def test_symbolic_link_to_a_file_met_before_or_after_it(tmp_path: Path, link_name: str) -> None:
    root = tmp_path / "data"
    target = _img(root / "m_target.png")
    for i in range(5):
        _img(root / f"plain_{i}.png", i)
    (root / link_name).symlink_to(target)
    items = _same([root])
    paths = [p for p, _, _ in items]
    assert len(paths) == 6 and (str(root / link_name) in paths) == (link_name == "a_link.png")


def test_overlapping_inputs_and_a_file_given_twice(tmp_path: Path) -> None:
    root = tmp_path / "data"
    for i in range(4):
        _img(root / "sub" / f"{i}.png", i)
    _img(root / "top.jpg")
    items = _same([root, root / "sub", root / "sub" / "2.png", root / "top.jpg"])
    assert len(items) == 5


def test_a_file_input_before_its_folder(tmp_path: Path) -> None:
    root = tmp_path / "data"
    for i in range(3):
        _img(root / f"{i}.png", i)
    assert len(_same([root / "1.png", root])) == 3


def test_folder_manifest_odd_names_and_frame_folders(tmp_path: Path) -> None:
    root = tmp_path / "data"
    _img(root / "a.png")
    _img(root / "b.PNG")
    _img(root / "café.webp")
    _img(root / "clip" / "f_0000.png")
    _img(root / "clip" / "f_0001.png", 2)
    (root / "notes.txt").write_text("x")
    (root / "dotted.").write_text("x")
    (root / "noext").write_text("x")
    (root / "manifest.csv").write_text("path,keyword\na.png,k\n")
    _same([root])
    items = _same([root], frame_folders=True)
    assert (str(root / "clip"), Kind.VIDEO, True) in items


def test_scratch_set_put_new_is_seen_by_add_and_contains() -> None:
    seen = ScratchSet()
    try:
        for i in range(5000):
            seen.put_new(f"k{i}")
        assert "k4999" in seen and "k0" in seen and "nope" not in seen
        assert not seen.add("k17") and seen.add("new") and len(seen) == 5001
    finally:
        seen.close()


@pytest.mark.parametrize(
    "names",
    [
        ["b.png", "B.png", "_x.png", "a-1.png", "a.png", "a0.png", "Z.png", "9.png"],  # ASCII: sorted as text
        ["é.png", "z.png", "e.png", "ü.png", "Ω.png", "E.png", "😀.png"],  # UTF-8: sorted as bytes
    ],
)
def test_a_folder_is_walked_in_the_byte_order_of_its_names(tmp_path: Path, names: list[str]) -> None:
    for i, name in enumerate(names):
        _img(tmp_path / "m" / name, shade=i)
    items = _same([tmp_path / "m"])
    assert [Path(p).name for p, _, _ in items] == sorted(names, key=lambda n: n.encode())
