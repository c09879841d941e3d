"""Generation speed and peak memory (`vhd generate`), and prompt-expansion speed (`vhd prompts`).

Generation: the tiny random-weight pipelines of ``tests/tiny_pipelines.py`` (SD, SDXL, AnimateDiff)
at batch 1 and batch 8 on the CPU (the mechanics: batching, encoding, provenance, commit), each
configuration in a fresh child process so its peak RSS is its own; on a machine with CUDA pass
``--device cuda`` (and, for real models, ``--model NAME=PATH_OR_ID``) and the peak GPU memory is
reported too. Prompt expansion: `vhd.synth.prompts.expand` against the loopback chat server
(``tests/servers/chat_server.py``) answering each request with a 20-item list, a quarter of
them duplicates; distinct prompts per request and per second.

    python benchmarks/generate_speed.py --prompts 32 --out generate.json
    python benchmarks/generate_speed.py --overlap --prompts 16 --size 256x256 --threads 1

``--overlap`` is the CPU proxy of issue 24's GPU target: with one torch thread, a tiny SDXL
pipeline, a store and Content Credentials on, it reports the wall time of `generate` against the
time spent inside the pipeline calls (the part a faster accelerator shrinks) and the host seconds
after them (encoding, signing, hashing, writing, committing), which a local run overlaps with the
next pipeline call; ``wall / pipeline`` near 1.0 means the host work is hidden. ``--src DIR`` runs
it against another checkout's ``src`` (the before figure). ``--host`` times the host work of one
photograph (scikit-image's astronaut, upscaled to 1024x1024) per encoding, plus signing its
Content Credentials and hashing it:

    python benchmarks/generate_speed.py --host
    python benchmarks/generate_speed.py --device cuda --size 512x512 --steps 30 \
        --model sdxl=stabilityai/stable-diffusion-xl-base-1.0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, os.environ.get("VHD_BENCH_SRC") or str(ROOT / "src"))


def child(args: argparse.Namespace) -> dict[str, object]:
    import torch

    from vhd.synth.generate import generate
    from vhd.synth.generators import GenerateSettings

    if args.threads:
        torch.set_num_threads(args.threads)

    width, height = (int(v) for v in args.size.split("x"))
    settings = GenerateSettings(
        device=args.device, size=(width, height), steps=args.steps, num_frames=args.frames,
        batch_size=args.batch, watermark=False,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "p.csv"
        csv.write_text("prompt\n" + "".join(f"scene number {i} of a street at night\n" for i in range(args.prompts)))
        warm = Path(tmp) / "warm.csv"
        warm.write_text("prompt\nwarm up\n")
        from vhd.synth.generators import create_generator

        gen = create_generator(args.spec, settings)
        generate(warm, gen, Path(tmp) / "warm")  # loads the pipeline and runs it once
        if args.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        result = generate(csv, gen, Path(tmp) / "out")
        wall = time.perf_counter() - start
    out: dict[str, object] = {
        "spec": args.spec.split(":")[0],
        "batch": args.batch,
        "outputs": len(result.written),
        "per_s": round(len(result.written) / wall, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "torch_threads": torch.get_num_threads(),
    }
    if args.device.startswith("cuda"):
        out["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
        out["gpu"] = torch.cuda.get_device_name()
    return out


def overlap(args: argparse.Namespace) -> dict[str, object]:
    """Wall vs pipeline time of one `generate` call with a store (one torch thread, tiny SDXL)."""
    import torch

    import vhd
    from vhd.store.sqlite import Store
    from vhd.synth.generate import generate
    from vhd.synth.generators import GenerateSettings, create_generator

    torch.set_num_threads(args.threads or 1)
    width, height = (int(v) for v in args.size.split("x"))
    settings = GenerateSettings(
        device=args.device, size=(width, height), steps=args.steps, batch_size=args.batch, watermark=False
    )
    with tempfile.TemporaryDirectory() as tmp:
        from tests.tiny_pipelines import BUILDERS

        path = BUILDERS["sdxl"](Path(tmp) / "sdxl")
        csv = Path(tmp) / "p.csv"
        csv.write_text("prompt\n" + "".join(f"scene number {i} of a street at night\n" for i in range(args.prompts)))
        warm = Path(tmp) / "warm.csv"
        warm.write_text("prompt\nwarm up\n")
        gen = create_generator(f"sdxl:{path}", settings)
        with Store(Path(tmp) / "run.db") as store:
            generate(warm, gen, Path(tmp) / "warm", store=store)  # loads the pipeline and runs it once
            start = time.perf_counter()
            result = generate(csv, gen, Path(tmp) / "out", store=store)
            wall = time.perf_counter() - start
        first = next(iter(sorted((Path(tmp) / "out").iterdir())))
        from vhd.synth.provenance import read_embedded

        prov = read_embedded(first)
    pipeline = result.generate_s
    return {
        "vhd": str(Path(vhd.__file__).parent.parent),
        "outputs": len(result.written),
        "size": args.size,
        "batch": args.batch,
        "torch_threads": torch.get_num_threads(),
        "encoding": getattr(prov, "encoding", "") or "png:6",
        "content_credentials": getattr(prov, "content_credentials", "off"),
        "wall_s": round(wall, 3),
        "pipeline_s": round(pipeline, 3),
        "host_s": round(getattr(result, "host_s", wall - pipeline), 3),
        "wall_over_pipeline": round(wall / pipeline, 3),
    }


def host_costs(repeat: int = 5) -> dict[str, object]:
    """Seconds per 1024x1024 image of each host step (best of ``repeat``)."""
    import hashlib

    import numpy as np
    from PIL import Image
    from skimage import data

    from vhd.synth.credentials import sign_output
    from vhd.synth.generators import GenerateSettings
    from vhd.synth.outputs import encode_png, encode_webp
    from vhd.synth.provenance import Provenance

    frame = np.asarray(Image.fromarray(data.astronaut()).resize((1024, 1024), Image.Resampling.BICUBIC))
    prov = Provenance(
        generator="sdxl", model="m", model_revision="main", prompt="p", full_prompt="p", template="{prompt}",
        prompt_id="0" * 16, keyword=None, negative_prompt=None, seed=1, steps=20, guidance=5.0, width=1024,
        height=1024, frames=None, fps=None, scheduler="Euler", device="cuda", dtype="float16", batch_size=4,
        torch_threads=1, safety_checker="none", watermark="on", encoding="png:1",
        content_credentials="test-certificate",
    )  # fmt: skip

    def best(fn: object) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter() - start)
        return round(min(times), 5)

    text = prov.to_json()
    png1 = encode_png(frame, text, 1)
    out: dict[str, object] = {
        "png_level_6_s": best(lambda: encode_png(frame, text, 6)),
        "png_level_1_s": best(lambda: encode_png(frame, text, 1)),
        "png_level_0_s": best(lambda: encode_png(frame, text, 0)),
        "webp_lossless_s": best(lambda: encode_webp(frame, text)),
        "sha256_s": best(lambda: hashlib.sha256(png1).hexdigest()),
        "bytes_png_6": len(encode_png(frame, text, 6)),
        "bytes_png_1": len(png1),
        "bytes_webp": len(encode_webp(frame, text)),
    }
    try:
        settings = GenerateSettings()
        sign_output(png1, ".png", prov, settings)  # the test certificate is made once
        out["c2pa_sign_s"] = best(lambda: sign_output(png1, ".png", prov, settings))
    except Exception as exc:  # c2pa not installed
        out["c2pa_sign_s"] = f"not measured: {exc}"
    return out


def expansion(requests: int) -> dict[str, object]:
    from tests.servers.chat_server import ChatServer

    from vhd.backends.openai import OpenAIBackend
    from vhd.synth.prompts import NearDuplicates, expand

    counter = {"n": 0}

    def reply(body: dict[str, object]) -> str:
        counter["n"] += 1
        base = counter["n"] * 100
        lines = [
            f"{i + 1}. A person number {base + (i % 15)} walks through scene {base + (i % 15)}." for i in range(20)
        ]
        return "\n".join(lines)

    with ChatServer(reply=reply, record=False) as srv, tempfile.TemporaryDirectory() as tmp:
        backend = OpenAIBackend("bench", {"base_url": srv.base_url})
        want = requests * 15
        start = time.perf_counter()
        result = asyncio.run(
            expand(
                backend,
                ["street"],
                want,
                Path(tmp) / "p.csv",
                batch=20,
                near=NearDuplicates(1.0),
                max_requests=requests,
            )
        )
        wall = time.perf_counter() - start
        report = result.keywords[0]
    return {
        "requests": report.requests,
        "distinct": report.added,
        "distinct_per_request": round(report.added / report.requests, 2),
        "distinct_per_s": round(report.added / wall, 1),
        "duplicates": report.exact_duplicates,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="64x64")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--model", action="append", default=[], metavar="NAME=PATH_OR_ID")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--out")
    parser.add_argument("--overlap", action="store_true", help="wall vs pipeline time (one torch thread)")
    parser.add_argument("--host", action="store_true", help="host seconds per 1024x1024 image, per step")
    parser.add_argument("--src", help="with --overlap: the vhd src folder to measure (default: this checkout's)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.overlap and args.src and os.environ.get("VHD_BENCH_SRC") != args.src:
        env = {**os.environ, "VHD_BENCH_SRC": os.path.abspath(args.src)}
        sys.exit(subprocess.run([sys.executable, *sys.argv], env=env, check=False).returncode)
    if args.overlap or args.host:
        report = overlap(args) if args.overlap else host_costs()
        print(json.dumps(report, indent=2))
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=2))
        return
    if args.child:
        print(json.dumps(child(args)))
        return
    models = dict(m.split("=", 1) for m in args.model)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        from tests.tiny_pipelines import BUILDERS

        for name in ("sd", "sdxl", "animatediff"):
            path = models.get(name) or str(BUILDERS[name](Path(tmp) / name))
            for batch in (1, 8):
                cmd = [sys.executable, __file__, "--child", "--spec", f"{name}:{path}", "--batch", str(batch)]
                cmd += ["--prompts", str(args.prompts), "--device", args.device, "--size", args.size]
                cmd += ["--steps", str(args.steps), "--frames", str(args.frames), "--threads", str(args.threads)]
                done = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ})
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(rows[-1], file=sys.stderr)
    report = {"generate": rows, "expand": expansion(args.requests), "device": args.device, "size": args.size,
              "steps": args.steps, "frames": args.frames}  # fmt: skip
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
