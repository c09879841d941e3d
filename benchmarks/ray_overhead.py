"""What `--executor ray` costs over the local executor, and where the time goes.

Setup: N small byte-distinct PNG images and a Chat Completions server on 127.0.0.1
(tests/servers/chat_server.py, in this process) that waits ``--latency`` seconds before every
answer. The same ``vhd.annotate`` call (5 calls a sample, ``--concurrency C`` samples in flight
in all) runs:

- ``local``: in this process (the default executor);
- ``ray cold``: ``executor="ray"`` with no Ray running: the run starts a local Ray, its
  ``--workers`` actors (each with its own client), and stops Ray at the end;
- ``ray warm``: the same with a Ray session already up (a cluster joined with ``--ray-address``).

Reported: wall time, the ratio to local, and the split of the Ray runs into ``ray.init``, actor
start-up (the actors build their backends in parallel) and the rest (the debate itself plus the
per-sample round trip); then the bare round trip of one item through a pool (a no-op work), one
at a time and 32 at once.

Usage: python benchmarks/ray_overhead.py [--samples 200] [--latency 0.05] [--workers 2] [--out results.json]
"""

from __future__ import annotations

import argparse
import asyncio
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

from tests.annotate.test_api import judge_reply, make_images  # noqa: E402
from tests.servers.chat_server import ChatServer  # noqa: E402

from vhd.annotate.api import annotate  # noqa: E402
from vhd.annotate.options import RunOptions  # noqa: E402
from vhd.execution import ExecutorOptions, Work  # noqa: E402
from vhd.executors.ray_pool import RayExecutor  # noqa: E402


class Echo(Work[int, int]):
    """A work that does nothing: what is left is the executor's own round trip."""

    async def run(self, item: int) -> int:
        return item


def one_run(media: Path, db: Path, cfg: Path, concurrency: int, runner: RayExecutor | None) -> dict[str, Any]:
    began = time.perf_counter()
    summary = annotate(
        [media],
        model="openai:m",
        store=db,
        config=cfg,
        concurrency=concurrency,
        options=RunOptions(executor=runner if runner is not None else "local"),
    )
    wall = time.perf_counter() - began
    assert summary.annotated == summary.found and summary.errors == 0, summary.to_dict()
    out: dict[str, Any] = {"wall_s": round(wall, 3), "samples": summary.annotated, "calls": summary.usage.calls}
    if runner is not None:
        t = runner.timings
        out |= {
            "ray_init_s": round(t.connect, 3),
            "actors_start_s": round(t.actors, 3),
            "rest_s": round(wall - t.connect - t.actors, 3),
        }
    return out


async def round_trip(runner: RayExecutor, n: int) -> dict[str, float]:
    async with runner.pool(Echo()) as pool:
        await asyncio.gather(*(pool.run(i) for i in range(8)))  # warm the path
        began = time.perf_counter()
        for i in range(n):
            await pool.run(i)
        serial = (time.perf_counter() - began) / n
        began = time.perf_counter()
        for start in range(0, n, 32):
            await asyncio.gather(*(pool.run(i) for i in range(start, min(n, start + 32))))
        concurrent = (time.perf_counter() - began) / n
    return {"serial_ms": round(serial * 1000, 2), "32_at_once_ms_per_item": round(concurrent * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds the server waits per request")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cpus-per-worker", type=float, default=0.5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import ray

    options = ExecutorOptions(workers=args.workers, num_cpus=args.cpus_per_worker)
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"ray {ray.__version__}",
        "samples": args.samples,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "workers": args.workers,
    }
    with tempfile.TemporaryDirectory() as tmp, ChatServer(reply=judge_reply, latency=args.latency, record=False) as srv:
        root = Path(tmp)
        make_images(root / "m", args.samples)
        cfg = root / "c.toml"
        cfg.write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\nmax_in_flight = 256\n')
        results["local"] = one_run(root / "m", root / "local.db", cfg, args.concurrency, None)
        results["ray_cold"] = one_run(root / "m", root / "cold.db", cfg, args.concurrency, RayExecutor(options))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            results["ray_warm"] = one_run(root / "m", root / "warm.db", cfg, args.concurrency, RayExecutor(options))
            results["round_trip"] = asyncio.run(round_trip(RayExecutor(options), 300))
        finally:
            ray.shutdown()
    local = results["local"]["wall_s"]
    for key in ("ray_cold", "ray_warm"):
        results[key]["ratio_to_local"] = round(results[key]["wall_s"] / local, 2)
        results[key]["rest_ratio_to_local"] = round(results[key]["rest_s"] / local, 2)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
