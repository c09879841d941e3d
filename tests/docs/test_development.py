"""The Development page (docs/development.md): its commands run here as written.

A ``-m`` on pytest's command line replaces the default ``-m 'not api and not gpu'`` of
pyproject.toml, so a quick command must exclude ``api`` and ``gpu`` itself; every program it
names must exist beside this interpreter (the test virtualenv).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def development_commands() -> list[list[str]]:
    """Every command (split on ``&&``) of the bash blocks on the Development page."""
    section = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            for part in filter(None, (p.strip() for p in line.split("&&"))):
                commands.append(shlex.split(part))
    return commands


def _selected(expression: str, **marks: bool) -> bool:
    assert re.fullmatch(r"[\w\s()]+", expression), expression
    names = {"slow": False, "api": False, "gpu": False, **marks}
    return bool(eval(expression, {"__builtins__": {}}, names))  # the page's text, its characters checked above


def test_quick_pytest_commands_still_leave_out_api_and_gpu() -> None:
    pytests = [c for c in development_commands() if "pytest" in c]
    assert pytests, "the Development section shows how to run the tests"
    for cmd in pytests:
        args = cmd[cmd.index("pytest") + 1 :]  # python -m pytest ...: the marker -m comes after
        if "-m" not in args:
            continue  # pyproject's default leaves out api and gpu
        expression = args[args.index("-m") + 1]
        assert not _selected(expression, api=True), f"{shlex.join(cmd)} runs the api tests (they reach the network)"
        assert not _selected(expression, gpu=True), f"{shlex.join(cmd)} runs the gpu tests"
        assert _selected(expression), f"{shlex.join(cmd)} selects nothing"


def test_every_program_named_exists_in_the_test_environment() -> None:
    bindir = Path(sys.executable).parent
    for cmd in development_commands():
        program = cmd[0]
        if program.startswith(".venv/bin/"):
            name = program.removeprefix(".venv/bin/")
            assert (bindir / name).exists(), f"{program}: no {name} in {bindir}"
