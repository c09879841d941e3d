"""Client CPU per chat request on the HTTP path: vhd's openai backend against lighter ways to send it.

The request is a debate call's: a short text and one photo of `annotate_throughput.py` (1024 px,
about 190 KiB of base64), to `tests/servers/chat_server.py` answering after 100 ms, run in a
separate process so that only the client's CPU is counted (``time.process_time`` of this
process). ``--requests`` calls go out with ``--concurrency`` in flight, through:

- *vhd*: `vhd.backends.openai.OpenAIBackend.generate` (its HTTP client, reply bounds, retries
  armed, the body built by `encode_payload`, the reply parsed into an `Output`; an aiohttp
  session per endpoint since issue 35's fourth pass, httpx2 clients in pool shards before);
- *httpx2*: eight plain ``httpx2.AsyncClient`` (no event hooks), ``post`` with the same body;
- *httpcore2*: eight ``httpcore2.AsyncConnectionPool``, ``request`` with the same body;
- *aiohttp*: eight plain ``aiohttp.ClientSession``, ``post`` with the same body;
- *asyncio*: the floor: one keep-alive connection per slot on asyncio streams, the request
  written as is, the reply read by its ``Content-Length`` and parsed with ``json.loads``.

Every client builds the body with `encode_payload` for each request and parses the reply's JSON,
so the differences are the HTTP machinery. The order is run twice; the table gives each run.

Usage: python benchmarks/http_client_cost.py [--requests 1500] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from annotate_throughput import make_photos  # noqa: E402

SERVER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.servers.chat_server import ChatServer
with ChatServer(reply="No, an everyday scene.", latency=0.1, record=False) as srv:
    print(srv.base_url, flush=True)
    sys.stdin.read()
"""


def main() -> None:
    from vhd.backends.base import GenerateConfig, Message
    from vhd.backends.openai import OpenAIBackend
    from vhd.backends.openai_payload import encode_payload, parse_options
    from vhd.media.load import load_sample
    from vhd.records import Kind, MediaItem

    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    n, conc = args.requests, args.concurrency
    with tempfile.TemporaryDirectory() as tmp:
        make_photos(Path(tmp), 2, seed=1)
        image = load_sample(MediaItem(path=Path(tmp) / "photo_0001.jpg", kind=Kind.IMAGE)).images[0]
    messages = [
        Message(role="system", content="You argue that the image is harmless. " * 10),
        Message(role="user", content=("Is this image harmful? Answer in three points. " * 10, image)),
    ]
    config = GenerateConfig()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(root=str(ROOT))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    base = server.stdout.readline().strip()
    opts = parse_options({"base_url": base})
    url = f"{base}/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-local"}

    def body() -> bytes:
        return encode_payload("m", messages, config, opts)

    async def in_flight(call: Callable[[int], Awaitable[None]]) -> float:
        gate = asyncio.Semaphore(conc)

        async def one(i: int) -> None:
            async with gate:
                await call(i)

        start = time.process_time()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.process_time() - start

    async def vhd_backend() -> float:
        backend = OpenAIBackend("m", {"base_url": base, "max_in_flight": conc})
        await backend.check()

        async def call(i: int) -> None:
            await backend.generate(messages, config)

        try:
            return await in_flight(call)
        finally:
            await backend.aclose()

    async def httpx2_clients() -> float:
        import httpx2

        limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
        clients = [httpx2.AsyncClient(limits=limits, timeout=60.0) for _ in range(8)]

        async def call(i: int) -> None:
            reply = await clients[i % 8].post(url, content=body(), headers=headers)
            json.loads(reply.content)

        try:
            return await in_flight(call)
        finally:
            for client in clients:
                await client.aclose()

    async def httpcore2_pools() -> float:
        import httpcore2

        pools = [httpcore2.AsyncConnectionPool(max_connections=1000, max_keepalive_connections=100) for _ in range(8)]

        async def call(i: int) -> None:
            reply = await pools[i % 8].request("POST", url, content=body(), headers=list(headers.items()))
            json.loads(reply.content)

        try:
            return await in_flight(call)
        finally:
            for pool in pools:
                await pool.aclose()

    async def aiohttp_sessions() -> float:
        import aiohttp

        sessions = [
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000, limit_per_host=0)) for _ in range(8)
        ]

        async def call(i: int) -> None:
            async with sessions[i % 8].post(url, data=body(), headers=headers) as reply:
                json.loads(await reply.read())

        try:
            return await in_flight(call)
        finally:
            for session in sessions:
                await session.close()

    async def asyncio_streams() -> float:
        parts = urlsplit(base)
        assert parts.hostname is not None and parts.port is not None
        host, port = parts.hostname, parts.port

        async def connection(count: int) -> None:
            reader, writer = await asyncio.open_connection(host, port)
            for _ in range(count):
                data = body()
                head = (
                    f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                    f"Content-Type: application/json\r\nAuthorization: Bearer sk-local\r\n"
                    f"Content-Length: {len(data)}\r\n\r\n"
                )
                writer.write(head.encode())
                writer.write(data)
                await writer.drain()
                lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
                length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length:"))
                json.loads(await reader.readexactly(length))
            writer.close()

        start = time.process_time()
        await asyncio.gather(*(connection(n // conc + (i < n % conc)) for i in range(conc)))
        return time.process_time() - start

    clients: dict[str, Callable[[], Coroutine[Any, Any, float]]] = {
        "vhd (OpenAIBackend.generate)": vhd_backend,
        "httpx2 AsyncClient.post, no hooks": httpx2_clients,
        "httpcore2 AsyncConnectionPool.request": httpcore2_pools,
        "aiohttp ClientSession.post": aiohttp_sessions,
        "asyncio streams (the floor)": asyncio_streams,
    }
    results: dict[str, list[float]] = {name: [] for name in clients}
    try:
        for _ in range(2):
            for name, run in clients.items():
                results[name].append(1000 * asyncio.run(run()) / n)
                print(f"{name}: {results[name][-1]:.3f} ms", file=sys.stderr, flush=True)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait()
    load: Any = [round(x, 1) for x in os.getloadavg()]
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load after: {load}")
    print(f"{n} requests of {len(image.data_url) // 1024} KiB of image, {conc} in flight; client CPU ms per request")
    for name, runs in results.items():
        print(f"| {name} | {' / '.join(f'{r:.2f}' for r in runs)} |")


if __name__ == "__main__":
    main()
