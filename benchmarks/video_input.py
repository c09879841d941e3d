"""Frames against native video input (`--video-input`): calls, prompt tokens and time per video-minute.

Setup: ``--videos`` drawn videos of ``--seconds`` seconds each (640x360, 24 fps, H.264 by PyAV: a
grey ramp background with a square that moves and changes colour every frame, so no two frames
are alike), cached under ``--cache``. Each configuration annotates all of them with the real
`vhd.annotate` (two debate rounds, the `openai` backend, one sample in flight at a time) against a
real OpenAI-compatible server on 127.0.0.1 (`tests/servers/chat_server.py`, in this process) that
answers at once and reports prompt tokens counted the way vLLM serving Qwen2.5-VL would:

- text: words x 1.35 (no Qwen tokenizer here; the same count in every configuration);
- an image part: decoded, resized as Qwen2.5-VL's processor does (sides rounded to multiples of
  28 px, 3,136 to 12,845,056 pixels), one token per 28 x 28 cell;
- a ``video_url`` part: the MP4 decoded, every frame kept (a server started with
  ``--media-io-kwargs '{"video": {"num_frames": -1}}'``; vLLM's default samples 32 frames), sides
  rounded to multiples of 28 px within 602,112 pixels a frame, frames paired in time: one token
  per 28 x 28 cell per pair of frames.

Configurations: ``frames`` (the VHD11K protocol: 5 frames of the first 4,000, 1024 px JPEG),
``native`` (one clip of the first 30 s at 2 fps, 448 px: the defaults) and ``native-all`` (one clip
of the whole video: ``clip_seconds`` = the video's length). Reported per video-minute: calls,
prompt tokens, seconds of video shown to the models (coverage), request KiB, and wall seconds of
the client (decoding, clip cutting, encoding, HTTP; the server answers at once, so this is vhd's
own cost, not a model's latency). Median of ``--repeats`` runs for time; the counts do not vary.

Usage: python benchmarks/video_input.py [--videos 4] [--seconds 60] [--repeats 3] [--out results.json]
"""

from __future__ import annotations

import argparse
import base64
import functools
import io
import json
import math
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.servers.chat_server import ChatServer  # noqa: E402

W, H, FPS = 640, 360, 24
CELL = 28
IMAGE_PIXELS = (3136, 12_845_056)
VIDEO_FRAME_PIXELS = (3136, 602_112)


def draw_video(path: Path, seconds: int, seed: int) -> Path:
    import av
    import numpy as np

    ramp = np.tile(np.linspace(40, 200, W, dtype=np.uint8), (H, 1))
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "28"}
        for i in range(seconds * FPS):
            frame = np.stack([ramp, ramp, ramp], axis=-1)
            x, y = (i * 7 + seed * 101) % (W - 80), (i * 3 + seed * 53) % (H - 80)
            frame[y : y + 80, x : x + 80] = ((i * 5 + seed) % 256, (i * 11) % 256, (i * 17 + 7 * seed) % 256)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def cells(width: int, height: int, bounds: tuple[int, int]) -> int:
    """28 x 28 cells of a picture resized as Qwen2.5-VL's processors do (``smart_resize``)."""
    h, w = max(CELL, round(height / CELL) * CELL), max(CELL, round(width / CELL) * CELL)
    low, high = bounds
    if h * w > high:
        scale = math.sqrt(height * width / high)
        h, w = math.floor(height / scale / CELL) * CELL, math.floor(width / scale / CELL) * CELL
    elif h * w < low:
        scale = math.sqrt(low / (height * width))
        h, w = math.ceil(height * scale / CELL) * CELL, math.ceil(width * scale / CELL) * CELL
    return (h // CELL) * (w // CELL)


@functools.lru_cache(maxsize=64)
def media_tokens(kind: str, url: str) -> tuple[int, int]:
    """(tokens, frames) of one image or video part (cached: a sample's media is sent on every call)."""
    import av
    from PIL import Image

    data = base64.b64decode(url.split(",", 1)[1])
    if kind == "image_url":
        with Image.open(io.BytesIO(data)) as im:
            return cells(im.width, im.height, IMAGE_PIXELS), 1
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(stream))
        size = (stream.codec_context.width, stream.codec_context.height)
    return math.ceil(frames / 2) * cells(*size, VIDEO_FRAME_PIXELS), frames


SEEN: dict[str, int] = {"frames": 0}
"""Frames the judge requests showed (a clip's frames, or the still frames)."""


def qwen_tokens(body: dict[str, Any]) -> tuple[int, int]:
    """(prompt, completion) tokens of a request, counted as described in the module docstring."""
    words, tokens, frames = 0, 0, 0
    for message in body.get("messages", []):
        content = message.get("content")
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if part["type"] == "text":
                words += len(str(part["text"]).split())
            elif part["type"] in ("image_url", "video_url"):
                count, shown = media_tokens(part["type"], part[part["type"]]["url"])
                tokens, frames = tokens + count, frames + shown
    if body["messages"][0]["content"].startswith("You are the judge"):
        SEEN["frames"] += frames
    return tokens + round(words * 1.35), 8


def reply(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    return "No, plain shapes." if system.startswith("You are the judge") else "1. A reason.\n2. Another."


def run(videos: list[Path], seconds: int, name: str, srv: ChatServer, tmp: Path) -> dict[str, Any]:
    import vhd

    cfg = tmp / f"{name}.toml"
    media = {"frames": "", "native": "", "native-all": f"clip_seconds = {seconds}\n"}[name]
    cfg.write_text(f'[backends.openai]\nbase_url = "{srv.base_url}"\nmax_retries = 0\n[media]\n{media}')
    srv.reset()
    SEEN["frames"] = 0
    began = time.perf_counter()
    summary = vhd.annotate(
        [str(v) for v in videos],
        model="openai:qwen2.5-vl",
        store=tmp / f"{name}-{time.monotonic_ns()}.db",
        config=cfg,
        concurrency=1,
        video_input="frames" if name == "frames" else "native",
    )
    wall = time.perf_counter() - began
    assert summary.annotated == len(videos) and summary.errors == 0 and summary.duplicates == 0, summary
    span = min(4000 / FPS, seconds) if name == "frames" else min(30 if name == "native" else seconds, seconds)
    return {
        "frames_seen": SEEN["frames"],
        "calls": summary.usage.calls,
        "prompt_tokens": summary.usage.prompt_tokens,
        "kib_sent": srv.bytes_received / 1024,
        "wall_s": wall,
        "span_s": span * len(videos),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/vhd-bench-video-input"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    videos = []
    for k in range(args.videos):
        path = args.cache / f"drawn_{args.seconds}s_seed{k}.mp4"
        videos.append(path if path.exists() else draw_video(path, args.seconds, k))
    minutes = args.videos * args.seconds / 60
    rows = []
    with ChatServer(reply=reply, usage=qwen_tokens, record=False) as srv, tempfile.TemporaryDirectory() as tmp:
        run(videos[:1], args.seconds, "frames", srv, Path(tmp))  # warm-up: imports, first connections
        for name in ("frames", "native", "native-all"):
            runs = [run(videos, args.seconds, name, srv, Path(tmp)) for _ in range(args.repeats)]
            first = runs[0]
            rows.append(
                {
                    "config": name,
                    "calls_per_min": first["calls"] / minutes,
                    "prompt_tokens_per_min": first["prompt_tokens"] / minutes,
                    "span_s_per_min": first["span_s"] / minutes,
                    "frames_seen_per_min": first["frames_seen"] / minutes,
                    "kib_sent_per_min": first["kib_sent"] / minutes,
                    "wall_s_per_min": statistics.median(r["wall_s"] for r in runs) / minutes,
                    "wall_runs": [round(r["wall_s"], 2) for r in runs],
                }
            )
    print(f"{args.videos} videos x {args.seconds} s ({minutes:g} video-minutes), {platform.machine()}, "
          f"Python {platform.python_version()}")  # fmt: skip
    print("| input | calls / video-min | prompt tokens / video-min | frames the judge sees / video-min | "
          "seconds spanned / video-min | KiB sent / video-min | client wall s / video-min |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['config']} | {r['calls_per_min']:.2f} | {r['prompt_tokens_per_min']:,.0f} | "
            f"{r['frames_seen_per_min']:.1f} | {r['span_s_per_min']:.1f} | {r['kib_sent_per_min']:,.0f} | "
            f"{r['wall_s_per_min']:.2f} |"
        )
    if args.out:
        args.out.write_text(json.dumps({"videos": args.videos, "seconds": args.seconds, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
