"""One long video judged by segments: this process alone vs the segments spread over Ray workers.

Setup: one drawn video (`vhd.demo.PlantedVideo`, 96x72, a background cut every 15 s, two planted
events) and a Chat Completions server on 127.0.0.1 (tests/servers/chat_server.py, in this
process) that waits ``--latency`` seconds before every answer and says "harmful" exactly when the
planted red disk is in a frame it is sent. The same ``vhd.annotate(..., --segments)`` call (1
debate round: a screen per segment, 3 calls for each flagged one) runs:

- ``local``: in this process; the video's segments are judged one after the other (this is also
  what ``--executor ray`` did before segments became work items: the whole video on one worker);
- ``ray``: ``executor="ray"`` with ``--workers`` actors and a Ray session already up: the driver
  decodes the video and each segment's screen and debate is a work item, ``--concurrency`` of the
  video's segments in flight.

Reported: wall time, calls, segments, the verdict, and how many worker processes sent calls (the
server looks up each connection's process). Both runs must give the same verdict and segments.

Usage: python benchmarks/segments_ray.py [--minutes 5] [--latency 0.2] [--workers 2] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.annotate.test_segments import config, red_judge  # noqa: E402
from tests.servers.chat_server import ChatServer  # noqa: E402

from vhd.annotate.api import annotate  # noqa: E402
from vhd.annotate.options import RunOptions  # noqa: E402
from vhd.demo import PlantedVideo, write_event_video  # noqa: E402
from vhd.execution import ExecutorOptions  # noqa: E402
from vhd.store.sqlite import Store  # noqa: E402


def one_run(video: Path, cfg: Path, db: Path, srv: ChatServer, options: RunOptions) -> dict[str, Any]:
    """Annotate the video once; what it cost and found."""
    srv.reset()
    began = time.perf_counter()
    summary = annotate([video], model="openai:m", config=cfg, store=db, progress=False, options=options)
    wall = time.perf_counter() - began
    with Store(db) as st:
        ((_, ann),) = st.iter_annotations()
    senders = {r.peer_pid for r in srv.requests} - {None}
    return {
        "wall_s": round(wall, 2),
        "calls": srv.chat_requests,
        "segments": summary.segments,
        "harmful": ann.verdict.harmful,
        "spans": [(s.start_s, s.end_s) for s in ann.verdict.segments if s.harmful],
        "all_segments": [(s.start_s, s.end_s, s.harmful) for s in ann.verdict.segments],
        "sender_processes": len(senders),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    import ray

    seconds = args.minutes * 60
    events = ((seconds * 0.3, seconds * 0.3 + 6), (seconds * 0.8, seconds * 0.8 + 4))
    cuts = tuple(float(t) for t in range(15, int(seconds), 15))
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "minutes": args.minutes,
        "latency_s": args.latency,
        "workers": args.workers,
        "concurrency": args.concurrency,
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        video = write_event_video(work / "long.mp4", PlantedVideo(seconds, events=events, cuts=cuts, fps=5))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 _node_ip_address="127.0.0.1")  # fmt: skip
        try:
            with ChatServer(reply=red_judge, latency=args.latency, peer_pids=True) as srv:
                cfg = config(work / "c.toml", srv.base_url)
                cfg.write_text(f"concurrency = {args.concurrency}\n" + cfg.read_text())
                results["local"] = one_run(video, cfg, work / "local.db", srv, RunOptions())
                pool = ExecutorOptions(workers=args.workers, num_cpus=0.5)
                results["ray"] = one_run(
                    video, cfg, work / "ray.db", srv, RunOptions(executor="ray", executor_options=pool)
                )
        finally:
            ray.shutdown()
    same = results["local"].pop("all_segments") == results["ray"].pop("all_segments")
    results["same_segments_and_verdict"] = same and results["local"]["harmful"] == results["ray"]["harmful"]
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
