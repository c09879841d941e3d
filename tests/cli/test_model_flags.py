"""The model flags the judging commands share: added once, handed to the library as its overrides."""

from __future__ import annotations

import argparse

from vhd.cli.main import build_parser
from vhd.cli.model_flags import add_model_flags, model_overrides


def test_a_command_gets_the_flags_it_asks_for_and_passes_exactly_those() -> None:
    p = argparse.ArgumentParser()
    add_model_flags(p, roles=("judge",), concurrency=False, help_of={"judge": "the mixed judge"})
    args = p.parse_args(["--model", "openai:m", "--judge", "openai:j", "--icl", "ex/"])
    assert model_overrides(args) == {"model": "openai:m", "judge": "openai:j", "icl": "ex/"}
    assert "the mixed judge" in p.format_help() and "--debaters" not in p.format_help()


def test_the_judging_commands_share_the_flags() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    wanted = {
        "annotate": {"model", "affirmative", "negative", "debaters", "judge", "icl", "concurrency"},
        "align": {"model", "debaters", "judge", "icl", "concurrency"},
        "compare": {"model", "debaters", "judge", "icl"},
        "icl": {"model"},
    }
    for command, names in wanted.items():
        args = sub.choices[command].parse_args(["x"] if command == "annotate" else _required(command))
        assert set(model_overrides(args)) == names, command


def _required(command: str) -> list[str]:
    return {
        "align": ["--ratings", "r.csv", "--media", "m/"],
        "compare": [],
        "icl": ["--validation", "v", "--out", "o"],
    }[command]
