"""``vhd serve``'s command line: the bind-safety rule and the help's examples."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vhd.cli.main import build_parser, main

SRC = Path(__file__).resolve().parents[2] / "src"


def test_help_ends_with_examples() -> None:
    text = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()  # type: ignore[union-attr]
    tail = text.strip().splitlines()[-4:]
    assert all(line.startswith("  vhd serve ") for line in tail)
    for flag in ("--port", "--host", "--labelled-set", "--reviewer", "--queue", "--no-reveal"):
        assert flag in text
    assert "--auth-token-env" in text and "--reviews-per-sample" in text


def test_other_host_without_token_exits_2_naming_the_flag(session_store: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "vhd", "serve", str(session_store), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "--auth-token-env" in lines[0]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--host", "10.0.0.5", "--auth-token-env", "VHD_TEST_UNSET_TOKEN"], "VHD_TEST_UNSET_TOKEN"),
        (["--reviews-per-sample", "0"], "--reviews-per-sample"),
        (["--labelled-set", "bad name!"], "labelled set name"),
        (["--reviewer", "a;b"], "reviewer name"),
        (["--queue", "missing.csv"], "no review queue"),
    ],
)
def test_bad_flags_fail_in_one_line(
    session_store: Path, argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", str(session_store), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_missing_store_fails_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(tmp_path / "none.db")]) == 2
    assert "no store at" in capsys.readouterr().err


def test_a_busy_port_fails_in_one_line(session_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", str(session_store), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"127.0.0.1:{port}" in err[0] and "--port" in err[0]
