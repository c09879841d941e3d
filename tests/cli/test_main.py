"""The command line's entry: bare `vhd`, and a mistyped option answered by the command's own usage."""

from __future__ import annotations

import pytest

from vhd.cli.main import main


def test_bare_vhd_prints_the_help_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("usage: vhd ") and "annotate" in out.out and out.err == ""


def test_a_mistyped_option_gets_the_commands_usage_and_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["annotate", "photos/", "--modle", "openai:m"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: vhd annotate ")
    assert "vhd annotate: error: unrecognized arguments: --modle" in err and "did you mean --model?" in err
    with pytest.raises(SystemExit):
        main(["export", "run.db", "-o", "x.jsonl", "--zzz"])
    err = capsys.readouterr().err
    assert "vhd export: error: unrecognized arguments: --zzz" in err and "did you mean" not in err
