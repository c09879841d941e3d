"""`vhd completion`: the generated bash and zsh scripts complete file and folder paths, run in the real shells.

bash is driven through the generated completion function (``COMP_WORDS`` / ``COMPREPLY``); zsh, which
completes only inside its line editor, through a pseudo-terminal: the test types the line and Tab, then
echoes what the line became. The zsh test is skipped where zsh is not installed (``apt-get install zsh``).
"""

from __future__ import annotations

import os
import re
import select
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.optional import need_executable
from vhd.cli.completion import path_kind
from vhd.cli.main import build_parser


def _script(shell: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "vhd", "completion", shell], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A working folder holding a folder ``examples/``, a store ``run.db`` and a file ``notes.txt``."""
    work = tmp_path / "work"
    (work / "examples").mkdir(parents=True)
    (work / "run.db").write_bytes(b"")
    (work / "notes.txt").write_text("x")
    return work


def _bash(script: Path, cwd: Path, line: str) -> list[str]:
    bash = need_executable("bash", "apt-get install bash")
    words = line.split(" ")
    probe = (
        f"source {shlex.quote(str(script))}; COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
        f"COMP_CWORD={len(words) - 1}; COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}; "
        f"_shtab_vhd vhd {shlex.quote(words[-1])} {shlex.quote(words[-2])}; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    out = subprocess.run([bash, "-c", probe], capture_output=True, text=True, check=True, cwd=cwd).stdout
    return sorted(w.rstrip("/") for w in out.split())


def test_bash_completes_paths_for_inputs_and_path_flags(tmp_path: Path, folder: Path) -> None:
    script = tmp_path / "vhd.bash"
    script.write_text(_script("bash"))
    assert _bash(script, folder, "vhd annotate e") == ["examples"]  # a positional input
    assert _bash(script, folder, "vhd annotate ") == ["examples", "notes.txt", "run.db"]
    assert _bash(script, folder, "vhd annotate --store ru") == ["run.db"]  # a path flag
    assert _bash(script, folder, "vhd show r") == ["run.db"]
    assert _bash(script, folder, "vhd frames --out ") == ["examples"]  # a folder flag: folders only
    assert _bash(script, folder, "vhd annotate --concurrency ") == []  # a number: no paths
    assert _bash(script, folder, "vhd ex") == ["examples", "export"]  # commands still complete


def _zsh(fpath: Path, cwd: Path, line: str) -> str:
    """What ``line`` becomes after Tab in an interactive zsh with ``fpath`` holding ``_vhd``."""
    import pty

    zsh = need_executable("zsh", "apt-get install zsh")
    pid, fd = pty.fork()
    if pid == 0:  # the child: an interactive zsh without start-up files
        os.chdir(cwd)
        os.execve(zsh, [zsh, "-f", "-i"], {"PATH": os.environ.get("PATH", ""), "TERM": "dumb", "HOME": str(cwd)})
    deadline = time.monotonic() + 30

    def read_until(pattern: bytes) -> re.Match[bytes]:
        buf = b""
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    buf += os.read(fd, 4096)
                except OSError:
                    break
                found = re.search(pattern, buf)
                if found:
                    return found
        raise AssertionError(f"zsh said: {buf.decode(errors='replace')[-2000:]}")

    try:
        setup = f"PS1='> '; fpath=({shlex.quote(str(fpath))} $fpath); autoload -Uz compinit; compinit -u -D"
        os.write(fd, f"{setup}; echo RE''ADY\n".encode())  # the quotes keep the echoed command from matching
        read_until(rb"READY\r")
        os.write(fd, line.encode() + b"\t")
        time.sleep(0.5)
        os.write(fd, b"\x01echo LI''NE:\x05\n")  # Ctrl-A, print the line as Tab left it, Ctrl-E, Enter
        return read_until(rb"LINE:([^\r\n]*)\r").group(1).decode().rstrip("/")
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


def test_zsh_completes_paths_for_inputs_and_path_flags(tmp_path: Path, folder: Path) -> None:
    need_executable("zsh", "apt-get install zsh")
    fpath = tmp_path / "zfunc"
    fpath.mkdir()
    (fpath / "_vhd").write_text(_script("zsh"))  # as the help says: vhd completion zsh > ~/.zfunc/_vhd
    assert _zsh(fpath, folder, "vhd annotate --store ru") == "vhd annotate --store run.db"
    assert _zsh(fpath, folder, "vhd annotate ex") == "vhd annotate examples"
    assert _zsh(fpath, folder, "vhd frames --out e") == "vhd frames --out examples"


def test_every_path_argument_is_marked() -> None:
    """Which flags complete paths, read from the parser: inputs, stores, outputs, files; not numbers or names."""
    marked: dict[str, str | None] = {}

    def walk(parser: object, prefix: str) -> None:
        for action in parser._actions:  # type: ignore[attr-defined]
            if action.choices and isinstance(action.choices, dict):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix}{name} ")
            else:
                key = action.option_strings[-1] if action.option_strings else action.dest
                marked[f"{prefix}{key}"] = path_kind(action)

    walk(build_parser(), "")
    for name in (
        "annotate inputs",
        "annotate --store",
        "ingest inputs",
        "show store",
        "show sample",
        "serve store",
        "bench --labels",
        "export --out",
        "label labels",
        "annotate --config",
        "dedup inputs",
    ):
        assert marked[name] == "file", name
    for name in ("frames --out", "bench --media", "fetch --quarantine"):
        assert marked[name] == "dir", name
    for name in (
        "annotate --concurrency",
        "annotate --model",
        "annotate --log-format",
        "serve --port",
        "completion shell",
        "export --format",
        "serve --reviewer",
    ):
        assert marked[name] is None, name
