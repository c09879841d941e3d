"""Throughput of the openai backend over 1, 2 and 4 endpoints that are each the bottleneck.

Setup: K loopback Chat Completions servers (tests/servers/chat_server.py: stdlib, Nagle off) run
in a child process, so the client's CPU does not compete with them for the GIL. Each waits a
fixed ``--latency`` before answering and answers at most ``--capacity`` requests at once (later
ones wait their turn), so one endpoint serves at most capacity / latency requests per second. One
`OpenAIBackend` with ``base_urls`` = the K endpoints (``max_in_flight`` twice the capacity, so the
servers stay the bottleneck) keeps ``4 x capacity x K`` text-only requests going for
``--seconds`` after a warm-up. Reported per K: requests/s, its ratio to K x the one-endpoint
figure (target: at least 0.9), requests per endpoint, client CPU per request.

Usage: python benchmarks/endpoint_scaling.py [--latency 0.1] [--capacity 4] [--seconds 6] [--out results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))


def serve(k: int, latency: float, capacity: int, ports: Any, stop: Any) -> None:
    """Child process: K servers; send their ports, serve until told to stop."""
    from tests.servers.chat_server import ChatServer

    servers = [ChatServer("No, nothing harmful.", latency=latency, capacity=capacity, record=False) for _ in range(k)]
    for s in servers:
        s.start()
    ports.put([s.port for s in servers])
    stop.wait()
    counts = [s.chat_requests for s in servers]
    for s in servers:
        s.stop()
    ports.put(counts)


async def drive(urls: list[str], capacity: int, seconds: float) -> dict[str, Any]:
    from vhd.backends.base import GenerateConfig, Message
    from vhd.backends.openai import OpenAIBackend

    backend = OpenAIBackend("bench", {"base_urls": urls, "max_in_flight": 2 * capacity, "max_retries": 0})
    messages = [Message("system", "Answer yes or no."), Message("user", "Is a kitchen harmful?")]
    config = GenerateConfig(max_tokens=8)
    workers = 4 * capacity * len(urls)
    done = 0
    counting = False
    deadline = 0.0

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            await backend.generate(messages, config)
            if counting:
                done += 1

    try:
        deadline = time.monotonic() + 1.0  # warm-up: connections opened
        await asyncio.gather(*(worker() for _ in range(workers)))
        counting = True
        cpu0, start = time.process_time(), time.monotonic()
        deadline = start + seconds
        await asyncio.gather(*(worker() for _ in range(workers)))
        wall, cpu = time.monotonic() - start, time.process_time() - cpu0
        stats = backend.endpoint_stats()
    finally:
        await backend.aclose()
    return {
        "requests": done,
        "wall_s": round(wall, 3),
        "rps": round(done / wall, 1),
        "cpu_ms_per_request": round(1000 * cpu / max(done, 1), 3),
        "errors": sum(s["errors"] for s in stats.values()),
    }


def run_k(k: int, latency: float, capacity: int, seconds: float) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    ports_q, stop = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=serve, args=(k, latency, capacity, ports_q, stop), daemon=True)
    child.start()
    ports = ports_q.get(timeout=30)
    try:
        result = asyncio.run(drive([f"http://127.0.0.1:{p}/v1" for p in ports], capacity, seconds))
    finally:
        stop.set()
        counts = ports_q.get(timeout=30)
        child.join(timeout=10)
    result["per_endpoint_total"] = counts
    return {"endpoints": k, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--capacity", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = [run_k(k, args.latency, args.capacity, args.seconds) for k in (1, 2, 4)]
    one = rows[0]["rps"]
    for row in rows:
        row["ratio_to_k_x_one"] = round(row["rps"] / (row["endpoints"] * one), 3)
    ceiling = args.capacity / args.latency
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"each endpoint: {args.latency * 1000:g} ms, {args.capacity} at once (ceiling {ceiling:g} req/s)")
    print("K  req/s   ratio  client CPU ms/req  requests per endpoint (whole run)")
    for r in rows:
        print(
            f"{r['endpoints']}  {r['rps']:6.1f}  {r['ratio_to_k_x_one']:.3f}  "
            f"{r['cpu_ms_per_request']:17.3f}  {r['per_endpoint_total']}"
        )
    if args.out:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
