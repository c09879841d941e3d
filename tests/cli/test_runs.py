"""`vhd runs`: list and diff the runs of a store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vhd.cli.main import main


def test_runs_lists_and_diffs(two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", str(two_runs), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["annotated"] for r in rows] == [12, 12]
    assert rows[0]["config_hash"] != rows[1]["config_hash"]
    assert main(["runs", str(two_runs), "--diff", "1", rows[1]["id"][:8], "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert diff["same_config"] is False
    assert diff["changed"]["config.debate.rounds"] == {"a": 2, "b": 1}
    assert main(["runs", str(two_runs)]) == 0
    text = capsys.readouterr().out
    assert "  1  " in text and "scripted:demo" in text
    assert main(["runs", str(two_runs), "--diff", "1", "9"]) == 2
    assert "no run '9'" in capsys.readouterr().err
