"""The habits every command shares: examples at the end of --help, -v/-q/--log-format, VHD_* defaults."""

from __future__ import annotations

import argparse
import json
import logging
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from vhd.cli.main import build_parser, main


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = _commands()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_help_ends_with_two_to_four_examples_that_parse(name: str) -> None:
    """Walks ALL subparsers (commands added later are checked too): the help ends with 2-4 indented
    ``vhd <command> ...`` lines, and each one is accepted by the parser itself."""
    lines = COMMANDS[name].format_help().rstrip().splitlines()
    tail: list[str] = []
    for line in reversed(lines):
        if not re.match(rf"^\s+vhd {re.escape(name)}(\s|$)", line):
            break
        tail.append(line.strip())
    assert 2 <= len(tail) <= 4, f"`vhd {name} --help` must end with 2-4 examples, ends with {lines[-3:]}"
    for example in reversed(tail):
        argv = shlex.split(example)[1:]
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:  # argparse refused it
            pytest.fail(f"example {example!r} of `vhd {name}` does not parse (exit {exc.code})")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_verbose_quiet_and_log_format(name: str) -> None:
    flags = {f for a in COMMANDS[name]._actions for f in a.option_strings}
    assert {"-v", "--verbose", "-q", "--quiet", "--log-format"} <= flags


SUMMARY_COMMANDS = ("bench", "label", "review-queue", "export", "compare", "icl", "runs", "config", "examples")


@pytest.mark.parametrize("name", SUMMARY_COMMANDS)
def test_summary_commands_take_json(name: str) -> None:
    flags = {f for a in COMMANDS[name]._actions for f in a.option_strings}
    assert "--json" in flags


def test_env_gives_store_and_concurrency_defaults_and_a_flag_beats_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VHD_STORE", "from-env.db")
    monkeypatch.setenv("VHD_CONCURRENCY", "7")
    parser = build_parser()
    args = parser.parse_args(["annotate", "x.jpg"])
    assert (args.store, args.concurrency) == ("from-env.db", 7)
    args = parser.parse_args(["annotate", "x.jpg", "--store", "flag.db", "--concurrency", "3"])
    assert (args.store, args.concurrency) == ("flag.db", 3)


def test_bad_env_concurrency_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VHD_CONCURRENCY", "many")
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["annotate", "x.jpg"])
    assert exc.value.code == 2
    assert "--concurrency" in capsys.readouterr().err


def test_verbose_shows_timing_quiet_hides_warnings_json_logs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "path", "-v"]) == 0
    assert re.search(r"vhd: info: config finished in [0-9.]+ s \(exit 0\)", capsys.readouterr().err)
    assert main(["config", "path", "-v", "--log-format", "json"]) == 0
    record = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert record["level"] == "info" and record["logger"] == "vhd.cli" and "finished" in record["message"]
    main(["config", "path", "-q"])
    logging.getLogger("vhd.test").warning("a retry")
    assert "a retry" not in capsys.readouterr().err
    main(["config", "path"])
    logging.getLogger("vhd.test").warning("a retry with key sk-abcdefghijklmnopqrstuvwxyz0123")
    err = capsys.readouterr().err
    assert "vhd: a retry" in err and "sk-abcdefghijklmnopqrstuvwxyz0123" not in err


def test_help_is_fast_and_light() -> None:
    """`vhd --help` in a fresh interpreter (the budget, 0.25 s, is measured in benchmarks/import_speed.py)."""
    out = subprocess.run([sys.executable, "-m", "vhd", "--help"], capture_output=True, text=True, check=True)
    assert "completion" in out.stdout and "runs" in out.stdout


def test_completion_scripts_name_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for shell in ("bash", "zsh", "fish"):
        assert main(["completion", shell]) == 0
        script = capsys.readouterr().out
        for name in COMMANDS:
            assert name in script, (shell, name)
        assert "--log-format" in script


def test_bash_completion_script_loads_and_completes(tmp_path: Path) -> None:
    from tests.optional import need_executable

    bash = need_executable("bash", "apt-get install bash")
    script = tmp_path / "vhd.bash"
    script.write_text(
        subprocess.run(
            [sys.executable, "-m", "vhd", "completion", "bash"], capture_output=True, text=True, check=True
        ).stdout
    )
    probe = (
        f"source {shlex.quote(str(script))}; COMP_WORDS=(vhd ex); COMP_CWORD=1; COMP_LINE='vhd ex'; "
        "COMP_POINT=${#COMP_LINE}; _shtab_vhd vhd ex vhd; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    out = subprocess.run([bash, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert sorted(out.split()) == ["examples", "export"]


def test_a_commands_own_short_flag_wins_over_the_habits() -> None:
    """A command that already uses -q for something else keeps it and still gets --quiet."""
    from vhd.cli.habits import add_habits

    p = argparse.ArgumentParser(prog="vhd x")
    p.add_argument("-q", "--quick", action="store_true")
    add_habits(p)
    args = p.parse_args(["-q", "--quiet", "-vv", "--log-format", "json"])
    assert (args.quick, args.quiet, args.verbose, args.log_format) == (True, 1, 2, "json")
