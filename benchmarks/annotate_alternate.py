"""Client CPU of `vhd annotate` for two (or more) source trees, run in turn under the same load.

The machine these figures come from is shared, and its load moves a lot between runs, so a
before/after pair is fair only when the two codes alternate: round after round, each tree runs
the same command as `annotate_throughput.py`'s *vhd* client (its photos, 100 ms server,
``--concurrency 64``, progress off, a fresh store) with ``PYTHONPATH`` set to that tree.

Per run: client CPU per sample (user + sys of the child from ``wait4``, start-up included), and
how it splits between the main thread (the event loop: HTTP, JSON, store, start-up) and the
other threads (image preparation in ``asyncio.to_thread``), read from ``/proc/PID/task`` every
50 ms while the child runs (Linux only; a thread's last reading before it ends is kept). The
one-minute load average is recorded at the start and end of each run. Medians are printed.

Usage:
    git archive BASE src | tar -x -C /tmp/before      # the code before, beside this tree's
    python benchmarks/annotate_alternate.py --src before=/tmp/before/src --src after=src --rounds 5
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from annotate_throughput import make_photos, reply  # noqa: E402
from tests.servers.chat_server import ChatServer  # noqa: E402


def thread_cpu(pid: int, seen: dict[int, float], stop: threading.Event) -> None:
    """Keep each thread's user + sys seconds of process ``pid`` in ``seen`` until ``stop``."""
    tick = os.sysconf("SC_CLK_TCK")
    while not stop.is_set():
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            tids = []
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            seen[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
        stop.wait(0.05)


def run_once(cmd: list[str], src: Path, samples: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: dict[int, float] = {}
    stop = threading.Event()
    poller = threading.Thread(target=thread_cpu, args=(proc.pid, seen, stop), daemon=True)
    poller.start()
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stop.set()
    poller.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{src}: vhd annotate failed: {err[-2000:]}")
    return {
        "cpu_ms": 1000 * (usage.ru_utime + usage.ru_stime) / samples,
        "sys_ms": 1000 * usage.ru_stime / samples,
        "main_thread_ms": 1000 * seen.get(proc.pid, 0.0) / samples,
        "other_threads_ms": 1000 * sum(v for tid, v in seen.items() if tid != proc.pid) / samples,
        "samples_per_s": samples / wall,
        "load": [round(load, 1), round(os.getloadavg()[0], 1)],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", action="append", required=True, help="NAME=PATH of a tree's src folder (repeat)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    trees = {name: Path(path).resolve() for name, path in (s.split("=", 1) for s in args.src)}
    for path in trees.values():
        compileall.compile_dir(str(path / "vhd"), quiet=1)  # start-up as an installed package's
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp, ChatServer(reply=reply, latency=args.latency, record=False) as srv:
        folder = Path(tmp)
        make_photos(folder / "photos", args.samples, seed=1)
        (folder / "vhd.toml").write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\n')
        for round_ in range(args.rounds):
            for name, src in trees.items():
                store = folder / f"{name}.db"
                for side in ("", "-wal", "-shm"):
                    Path(f"{store}{side}").unlink(missing_ok=True)
                cmd = [
                    sys.executable, "-m", "vhd", "annotate", str(folder / "photos"), "--model", "openai:m",
                    "--config", str(folder / "vhd.toml"), "--concurrency", str(args.concurrency),
                    "--no-progress", "--store", str(store),
                ]  # fmt: skip
                srv.reset()
                result = run_once(cmd, src, args.samples)
                result["requests_per_sample"] = srv.chat_requests / args.samples
                runs[name].append(result)
                shown = {k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}
                print(round_, name, json.dumps(shown), flush=True)
    for name, results in runs.items():
        medians = {k: round(statistics.median(r[k] for r in results), 2) for k in results[0] if k != "load"}
        print(name, "medians", json.dumps(medians), "cpu runs", [round(r["cpu_ms"], 1) for r in results])
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
