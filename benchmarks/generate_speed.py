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

``--standin`` measures what a GPU sees, on the CPU: vhd's real generator (`vhd.synth`) with its
diffusers pipeline replaced by a stand-in that sleeps ``--per-output-s`` per image or clip (0.85 s:
SDXL at 1024x1024, 20 steps, on an H200) in ``--steps`` slices (a late wake-up, from the GIL or the
load, delays the rest, as a GPU waits for its next kernels) and returns photo-like float frames
(scikit-image's photos, resized, with per-output noise and a stamped counter so that encoding costs
what a real output costs and no two outputs are equal). The defaults of `vhd generate` apply (the
invisible watermark, Content Credentials when ``c2pa`` is installed, PNG level 1) and a store
registers every output. Reported: sleeps / wall for vhd and for a bare loop calling the same
stand-in (1.0 = the stand-in never waits for the host), and, from the stand-in's own timestamps,
where vhd's pipeline thread stood idle: before the first call, between calls, and after the last
(the tail: the last batch's host work, which nothing follows). ``--profile FILE`` writes a cProfile
of one vhd run (the calling thread; the pipeline thread only sleeps):

    python benchmarks/generate_speed.py --standin --size 1024x1024 --prompts 48 --batch 4 --repeats 3
    python benchmarks/generate_speed.py --standin --size 512x512 --prompts 48 --batch 4 --repeats 3 \
        --per-output-s 0.25
    python benchmarks/generate_speed.py --standin --clips --size 512x512 --frames 16 --prompts 12 \
        --batch 1 --steps 25 --per-output-s 4.0 --repeats 3

The script is long (about 500 lines) because each mode is one self-contained measurement (tiny
pipelines, overlap, host costs, the stand-in, prompt expansion) with its own report.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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


STANDIN_PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry")
"""The colour photographs of scikit-image (no download) the stand-in's outputs are made from."""


def standin_pool(size: tuple[int, int], frames: int, clips: bool, count: int = 6) -> list[object]:
    """Photo-like float32 outputs in [0, 1] (diffusers' ``output_type="np"``): ``H x W x 3`` or ``F x H x W x 3``.

    Each is a scikit-image photo resized to ``size`` with its own Gaussian noise (sigma 3/255: the
    fine texture of a generated image, which zlib and x264 pay for); a clip pans across its photo.
    """
    import numpy as np
    from PIL import Image
    from skimage import data

    width, height = size
    rng = np.random.default_rng(7)
    pool: list[object] = []
    for k in range(count):
        photo = Image.fromarray(getattr(data, STANDIN_PHOTOS[k % len(STANDIN_PHOTOS)])())
        if not clips:
            base = np.asarray(photo.resize((width, height), Image.Resampling.BICUBIC), dtype=np.float32)
            pool.append(((base + rng.normal(0, 3, base.shape)).clip(0, 255) / 255).astype(np.float32))
            continue
        wide = photo.resize((width + 4 * frames, height + 2 * frames), Image.Resampling.BICUBIC)
        shots = [
            np.asarray(wide.crop((4 * f, 2 * f, 4 * f + width, 2 * f + height)), dtype=np.float32)
            for f in range(frames)
        ]
        clip = np.stack(shots)
        pool.append(((clip + rng.normal(0, 3, clip.shape)).clip(0, 255) / 255).astype(np.float32))
    return pool


class StandInScheduler:
    """Named in provenance as the stand-in's scheduler."""


class StandInPipe:
    """A diffusers pipeline as a GPU runs it, seen from the host: it sleeps and returns frames.

    Args:
        per_output_s: Seconds per image or clip.
        pool: `standin_pool` outputs, returned in turn (copied, with a counter stamped in).
        clips: Return ``.frames`` (``B x F x H x W x 3``) instead of ``.images``.
    """

    def __init__(self, per_output_s: float, pool: list[object], clips: bool) -> None:
        self.per_output_s = per_output_s
        self.pool = pool
        self.clips = clips
        self.scheduler = StandInScheduler()
        self.calls: list[tuple[float, float]] = []  # (start, end) of every call, perf_counter
        self.slept = 0.0
        self.made = 0

    def set_progress_bar_config(self, **kwargs: object) -> None:
        """As a pipeline has."""

    def __call__(self, prompt: list[str], num_inference_steps: int = 20, **kwargs: object) -> object:
        """Sleep ``per_output_s`` per prompt in ``num_inference_steps`` slices; return outputs as diffusers does."""
        import types

        import numpy as np

        start = time.perf_counter()
        n = len(prompt)
        out = np.stack([self.pool[(self.made + k) % len(self.pool)] for k in range(n)])  # type: ignore[call-overload]
        for k in range(n):  # a counter in the first pixels: no two outputs are equal
            bits = [(self.made + k) >> b & 1 for b in range(24)]
            out[k, ..., 0, :24, 0] = np.asarray(bits, dtype=np.float32)
        self.made += n
        want = self.per_output_s * n
        step = want / max(1, num_inference_steps)
        due = start
        for _ in range(max(1, num_inference_steps)):
            due += step
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            due = max(due, time.perf_counter())  # woken late: the rest of the call starts late
        self.slept += want
        self.calls.append((start, time.perf_counter()))
        return types.SimpleNamespace(frames=out) if self.clips else types.SimpleNamespace(images=out)


def idle_profile(calls: list[tuple[float, float]], start: float, end: float) -> dict[str, float]:
    """Seconds the pipeline stood idle before its first call, between calls and after its last."""
    between = sum(b[0] - a[1] for a, b in itertools.pairwise(calls))
    return {
        "idle_before_first_s": round(calls[0][0] - start, 3),
        "idle_between_s": round(between, 3),
        "idle_tail_s": round(end - calls[-1][1], 3),
        "in_calls_s": round(sum(b - a for a, b in calls), 3),
    }


def standin(args: argparse.Namespace) -> dict[str, object]:
    """vhd's generate with a sleeping stand-in pipeline against a bare loop over the same stand-in."""
    import statistics

    import vhd
    import vhd.synth.overlap
    from vhd.store.sqlite import Store
    from vhd.synth.generate import generate
    from vhd.synth.generators import GenerateSettings, create_generator

    if args.host_threads:
        vhd.synth.overlap.HOST_THREADS = args.host_threads
    if args.host_nice is not None:
        vhd.synth.overlap.HOST_NICE = args.host_nice  # type: ignore[attr-defined,unused-ignore]
    width, height = (int(v) for v in args.size.split("x"))
    frames = args.frames if args.clips else None
    pool = standin_pool((width, height), args.frames, args.clips)
    settings = GenerateSettings(
        device="cuda", dtype="float16", size=(width, height), steps=args.steps, num_frames=frames,
        batch_size=args.batch, template="{prompt}", png_level=args.png_level, watermark=not args.no_watermark,
        content_credentials="off" if args.no_c2pa else "auto",
    )  # fmt: skip
    spec = "animatediff:standin" if args.clips else "sdxl:standin"
    runs: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        csv = work / "p.csv"
        csv.write_text("prompt\n" + "".join(f"scene number {i} of a street at night\n" for i in range(args.prompts)))
        warm = work / "warm.csv"
        warm.write_text("prompt\n" + "".join(f"warm up {i}\n" for i in range(args.batch)))
        for r in range(args.repeats):  # alternating: a shared machine's load moves between runs
            pipe = StandInPipe(args.per_output_s, pool, args.clips)
            gen = create_generator(spec, settings)
            gen.pipe, gen.device, gen.dtype = pipe, "cuda", "float16"
            with Store(work / f"run{r}.db") as store:
                generate(warm, gen, work / f"warm{r}", store=store)  # the signer, the watermark, imports
                pipe.calls.clear()
                pipe.slept = 0.0
                load = os.getloadavg()[0]
                profiler = None
                if args.profile and r == 0:
                    import cProfile

                    profiler = cProfile.Profile()
                    profiler.enable()
                start = time.perf_counter()
                result = generate(csv, gen, work / f"out{r}", store=store)
                end = time.perf_counter()
                if profiler is not None:
                    profiler.disable()
                    profiler.dump_stats(args.profile)
            if len(result.samples) != args.prompts:
                raise SystemExit(f"vhd registered {len(result.samples)} of {args.prompts}: {result.to_dict()}")
            vhd_run = {
                "wall_s": round(end - start, 3), "sleeps_s": round(pipe.slept, 3),
                "sleeps_over_wall": round(pipe.slept / (end - start), 4), "host_s": round(result.host_s, 3),
                **idle_profile(pipe.calls, start, end),
            }  # fmt: skip
            bare_pipe = StandInPipe(args.per_output_s, pool, args.clips)
            start = time.perf_counter()
            for begin in range(0, args.prompts, args.batch):
                prompts = [f"scene number {i}" for i in range(begin, min(begin + args.batch, args.prompts))]
                bare_pipe(prompt=prompts, num_inference_steps=args.steps)
            bare_wall = time.perf_counter() - start
            runs.append({
                "vhd": vhd_run,
                "bare": {"wall_s": round(bare_wall, 3), "sleeps_over_wall": round(bare_pipe.slept / bare_wall, 4)},
                "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2),
            })  # fmt: skip
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    ratios = [float(r["vhd"]["sleeps_over_wall"]) for r in runs]  # type: ignore[index]
    bare = [float(r["bare"]["sleeps_over_wall"]) for r in runs]  # type: ignore[index]
    return {
        "vhd_src": str(Path(vhd.__file__).parent.parent),
        "kind": "clips" if args.clips else "images",
        "size": args.size, "frames": frames, "outputs": args.prompts, "batch": args.batch, "steps": args.steps,
        "per_output_s": args.per_output_s, "watermark": not args.no_watermark,
        "content_credentials": "off" if args.no_c2pa else "auto", "png_level": args.png_level,
        "host_threads": getattr(sys.modules.get("vhd.synth.overlap"), "HOST_THREADS", None),
        "host_nice": getattr(sys.modules.get("vhd.synth.overlap"), "HOST_NICE", None),
        "load_avg_1min": [r["load_before"] for r in runs],
        "vhd_sleeps_over_wall_median": statistics.median(ratios),
        "bare_sleeps_over_wall_median": statistics.median(bare),
        "runs": runs,
    }  # fmt: skip


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
    parser.add_argument(
        "--src", help="with --overlap or --standin: the vhd src folder to measure (default: this checkout's)"
    )
    parser.add_argument("--standin", action="store_true", help="vhd's generator with a sleeping stand-in pipeline")
    parser.add_argument("--clips", action="store_true", help="with --standin: AnimateDiff-size clips (--frames)")
    parser.add_argument("--per-output-s", type=float, default=0.85, help="with --standin: seconds per image or clip")
    parser.add_argument("--repeats", type=int, default=3, help="with --standin: runs of each side")
    parser.add_argument("--png-level", type=int, default=1)
    parser.add_argument("--no-watermark", action="store_true")
    parser.add_argument("--no-c2pa", action="store_true")
    parser.add_argument("--profile", help="with --standin: write a cProfile of the first vhd run here")
    parser.add_argument(
        "--host-threads", type=int, default=0, help="with --standin: vhd's host threads (0: its default)"
    )
    parser.add_argument(
        "--host-nice", type=int, default=None, help="with --standin: the host threads' nice increment (vhd's default)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if (args.overlap or args.standin) and args.src and os.environ.get("VHD_BENCH_SRC") != os.path.abspath(args.src):
        env = {**os.environ, "VHD_BENCH_SRC": os.path.abspath(args.src)}
        sys.exit(subprocess.run([sys.executable, *sys.argv], env=env, check=False).returncode)
    if args.overlap or args.host or args.standin:
        report = overlap(args) if args.overlap else standin(args) if args.standin else host_costs()
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
