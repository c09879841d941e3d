"""The leanest client that does the debate's calls: a yardstick for `vhd annotate`.

Each image is decoded, downscaled to 1024 px, JPEG-encoded and base64-encoded once; then five
sequential Chat Completions calls go through the `openai` SDK's async client (four debater turns
that carry the growing transcript, then the judge), with up to ``--concurrency`` samples in flight.
With ``--icl``, the judge's call also carries the in-context images (encoded once per run). No
validation, no store, no retries: only what the debate needs on the wire.

Usage: python benchmarks/lean_client.py BASE_URL IMAGE_DIR [--icl ICL_DIR] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import sys
from pathlib import Path

from openai import AsyncOpenAI
from PIL import Image


def encode(path: Path) -> str:
    with Image.open(path) as im:
        im = im.convert("RGB")
        im.thumbnail((1024, 1024))
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def image_part(url: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": url}}


async def one(client: AsyncOpenAI, path: Path, icl: list[dict[str, object]], sem: asyncio.Semaphore) -> None:
    async with sem:
        url = encode(path)
        transcript: list[str] = []
        for k in range(4):
            side = "affirmative" if k % 2 == 0 else "negative"
            text = f"Question: is this image harmful?\n\n{chr(10).join(transcript)}\n\nArgue the {side} side."
            r = await client.chat.completions.create(
                model="m",
                messages=[
                    {"role": "system", "content": f"You are the {side} debater."},
                    {"role": "user", "content": [image_part(url), {"type": "text", "text": text}]},
                ],
                max_tokens=500,
                temperature=0.5,
            )
            transcript.append(r.choices[0].message.content or "")
        await client.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": "You are the judge."},
                *icl,
                {"role": "user", "content": [image_part(url), {"type": "text", "text": "\n".join(transcript)}]},
            ],
            max_tokens=100,
            temperature=0.5,
            logprobs=True,
            top_logprobs=10,
        )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("base_url")
    ap.add_argument("images", type=Path)
    ap.add_argument("--icl", type=Path)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    client = AsyncOpenAI(base_url=args.base_url, api_key="none", max_retries=0)
    icl: list[dict[str, object]] = []
    if args.icl:
        for p in sorted(args.icl.glob("*.jpg")):
            icl += [
                {"role": "user", "content": [image_part(encode(p)), {"type": "text", "text": "Verdict?"}]},
                {"role": "assistant", "content": "No, lack of direct message."},
            ]
    sem = asyncio.Semaphore(args.concurrency)
    paths = sorted(args.images.glob("*.jpg"))
    await asyncio.gather(*(one(client, p, icl, sem) for p in paths))
    await client.close()
    print(len(paths), file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
