"""What the shell sees: Ctrl-C's notice on its own line under a progress bar, `-` reading input paths
from stdin, and `vhd show` piped without wrapping."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from vhd.demo import write_examples

SRC = Path(__file__).resolve().parents[2] / "src"
CSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def _slow_script(tmp_path: Path) -> Path:
    script = tmp_path / "slow.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"when": {}, "reply": "No, nothing harmful.", "delay": 0.4}]}))
    return script


@pytest.mark.slow
def test_ctrl_c_notice_starts_its_own_line_under_the_progress_bar(tmp_path: Path) -> None:
    """`vhd annotate` in a terminal (a pseudo-terminal), its bar drawn; Ctrl-C typed as a user would."""
    import pty

    media = tmp_path / "media"
    write_examples(media)
    command = [
        sys.executable, "-m", "vhd", "annotate", str(media / "manifest.csv"), "--model",
        f"scripted:{_slow_script(tmp_path)}", "--store", str(tmp_path / "s.db"), "--concurrency", "1",
    ]  # fmt: skip
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, on the terminal
        os.environ.update({**_env(), "COLUMNS": "160", "TERM": "xterm"})
        os.execv(sys.executable, command)
    out = b""
    deadline = time.monotonic() + 60
    sent = False
    try:
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            if not sent and b"errors 0" in out:
                os.write(fd, b"\x03")  # Ctrl-C: the terminal echoes ^C and sends SIGINT
                sent = True
        assert sent, out.decode(errors="replace")[-2000:]
    finally:
        with __import__("contextlib").suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    text = CSI.sub(b"", out).decode(errors="replace")
    at = text.find("interrupted: finishing")
    assert at > 0, text[-2000:]
    line = re.split(r"[\r\n]", text[:at])[-1]  # what stands before the notice on its line
    assert line.strip() in ("", "vhd:", "vhd: warning:", "warning:"), repr(text[max(0, at - 300) : at + 80])


def test_a_dash_reads_input_paths_from_stdin(tmp_path: Path) -> None:
    """`ls *.jpg | vhd annotate - --store s.db`: the piped paths are the inputs (a path with spaces too)."""
    media = tmp_path / "media"
    files = [p for p in write_examples(media) if p.suffix == ".jpg"]
    spaced = media / "with space.jpg"
    from PIL import Image

    Image.new("RGB", (64, 48), (20, 120, 200)).save(spaced)  # a plain blue picture
    listed = [*files, spaced]
    db = tmp_path / "s.db"
    piped = "".join(f"{p}\n" for p in listed) + "\n"  # a blank line is skipped
    command = [sys.executable, "-m", "vhd", "annotate", "-", "--model", "scripted:demo", "--store", str(db)]
    done = subprocess.run(command, input=piped, capture_output=True, text=True, env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    from vhd.store.sqlite import Store

    with Store(db) as store:
        paths = {Path(r[0]).name for r in store.conn.execute("SELECT path FROM samples")}
    assert paths == {p.name for p in listed}
    # every command taking input paths: ingest, dedup, frames (its videos), remove (its samples)
    report = tmp_path / "dedup.csv"
    for cmd in (["ingest", "-", "--store", str(tmp_path / "i.db")], ["dedup", "-", "--report", str(report)]):
        done = subprocess.run(
            [sys.executable, "-m", "vhd", *cmd], input=piped, capture_output=True, text=True, env=_env(), timeout=120
        )
        assert done.returncode == 0, (cmd, done.stderr)
    assert all(p.name in report.read_text() for p in listed)
    with Store(tmp_path / "i.db") as store:
        assert {Path(r[0]).name for r in store.conn.execute("SELECT path FROM samples")} == {p.name for p in listed}


def test_a_dash_with_nothing_piped_or_twice_is_a_clear_error() -> None:
    import argparse
    import io

    from vhd.cli.main import stdin_paths
    from vhd.errors import ConfigError

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    with pytest.raises(ConfigError, match="nothing is piped in"):
        stdin_paths(argparse.Namespace(inputs=["-"]), Terminal())
    with pytest.raises(ConfigError, match="once"):
        stdin_paths(argparse.Namespace(inputs=["-", "-"]), io.StringIO("a\n"))
    with pytest.raises(ConfigError, match="no path"):
        stdin_paths(argparse.Namespace(inputs=["-"]), io.StringIO("\n\n"))
    args = argparse.Namespace(inputs=["a.jpg", "-", "z.jpg"])
    stdin_paths(args, io.StringIO("b c.jpg\r\nd.jpg\n"))
    assert args.inputs == ["a.jpg", "b c.jpg", "d.jpg", "z.jpg"]  # in place, in order


def test_show_piped_keeps_the_verdict_on_one_line(tmp_path: Path) -> None:
    """`vhd show STORE SAMPLE | cat`: the verdict line and its long reason are not wrapped at 80 columns."""
    media = tmp_path / "media"
    write_examples(media)
    reason = "an ordinary outdoor scene with nothing dangerous, violent, sexual or hateful in any part of it at all"
    script = tmp_path / "long.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"when": {}, "reply": f"No, {reason}."}]}))
    db = tmp_path / "s.db"
    env = {k: v for k, v in _env().items() if k not in ("COLUMNS", "LINES")}
    for command in (
        ["annotate", str(media / "astronaut.jpg"), "--model", f"scripted:{script}", "--store", str(db)],
        ["show", str(db), "astronaut.jpg"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "vhd", *command], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
    verdict = [line for line in done.stdout.splitlines() if line.startswith("not harmful")]
    assert len(verdict) == 1 and reason in verdict[0] and verdict[0].rstrip().endswith("status ok"), done.stdout
    assert len(verdict[0]) > 120  # longer than rich's 80 columns without a terminal: kept whole
