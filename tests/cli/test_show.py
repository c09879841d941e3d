"""`vhd show`: how many characters of an id it needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from vhd.cli.main import main


def test_show_says_how_many_characters_an_id_needs(two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(two_runs), "abc"]) == 2
    err = capsys.readouterr().err
    assert "at least 6 characters" in err and "has 3" in err
