"""One gate for every video open: outside `vhd.media`, nothing calls ``av.open`` to read a file.

`vhd.media.videoopen.open_video` is the way in (the content sniffed, the header's frame size
checked, FFmpeg's probing bounded) for the run, the dry run, a benchmark's time line and
provenance tags alike; writing a file we make ourselves (``mode="w"``) needs no gate.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "vhd"


def _writes(call: ast.Call) -> bool:
    mode = next((k.value for k in call.keywords if k.arg == "mode"), call.args[1] if len(call.args) > 1 else None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and mode.value.startswith("w")


def _direct_reads(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        named = isinstance(func, ast.Attribute) and func.attr == "open" and isinstance(func.value, ast.Name)
        if named and func.value.id == "av" and not _writes(node):  # type: ignore[union-attr]
            lines.append(node.lineno)
    return lines


def test_no_video_is_opened_outside_media_but_through_its_gate() -> None:
    found = {
        str(path.relative_to(SRC)): lines
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).parts[0] != "media" and (lines := _direct_reads(ast.parse(path.read_text())))
    }
    assert found == {}, f"open videos with vhd.media.videoopen.open_video, not av.open: {found}"


def test_the_check_finds_a_direct_open() -> None:
    assert _direct_reads(ast.parse("import av\nwith av.open(p) as c:\n    pass\n")) == [2]
    assert _direct_reads(ast.parse("av.open(p, 'w')\nav.open(p, mode='w', format='mp4')\n")) == []
