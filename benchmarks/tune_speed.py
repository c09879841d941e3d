"""Speed and peak memory of `vhd tune`'s training step at batch 4, with and without cached vision features.

Setup: the tiny random InstructBLIP and LLaVA of the test suite (tests/tiny_models.py, built in a
temporary folder), 32 drawn 40x48 PNG images (bright vs dark), batch size 4. Each configuration
trains ``--steps`` optimizer steps after a warm-up epoch that is not timed (so the cached run's
cache is filled, as it is from the second epoch on in a real run). Reported: optimizer steps per
second and samples per second (median of ``--repeats``), and peak memory: the process's peak RSS
on CPU (``ru_maxrss``; a high-water mark, so measured in a fresh child process per configuration)
or ``torch.cuda.max_memory_allocated`` on a GPU (``--device cuda``).

``uncached`` uses random crops (the paper's setting); ``cached`` uses center crops with
``cache_vision`` (the only combination in which cached features are valid).

Usage: python benchmarks/tune_speed.py [--steps 40] [--repeats 3] [--device cpu] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))


def child(model: str, cached: bool, steps: int, device: str, data: str) -> dict[str, Any]:
    """One configuration in this process: warm-up epoch, then ``steps`` timed steps."""
    import torch
    from tests.tune.conftest import draw_set

    from vhd.tune.train import TuneConfig, load_tuning_model, train

    items = draw_set(Path(data), 32, seed=1)
    crop = "center" if cached else "random"
    base = {"model": model, "lr": 1e-3, "batch_size": 4, "train_crop": crop, "cache_vision": cached}
    hf = {"device": device, "dtype": "float32"}
    cfg = TuneConfig(**base, epochs=1, hf=hf)  # type: ignore[arg-type]
    soft = load_tuning_model(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        train(cfg, items, Path(tmp) / "warm", soft=soft)  # fills the cache (when on); not timed
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        timed = TuneConfig(**base, epochs=100, max_steps=steps, hf=hf)  # type: ignore[arg-type]
        start = time.perf_counter()
        result = train(timed, items, Path(tmp) / "timed", soft=soft)
        elapsed = time.perf_counter() - start
    peak = (
        torch.cuda.max_memory_allocated() / 2**20
        if device.startswith("cuda")
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    return {"steps_per_s": result.steps / elapsed, "samples_per_s": 4 * result.steps / elapsed, "peak_mib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "CACHED", "DATA"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        model, cached, data = args.child
        print(json.dumps(child(model, cached == "1", args.steps, args.device, data)))
        return

    import torch
    from tests.tiny_models import build_tiny_instructblip, build_tiny_llava

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            "instructblip": build_tiny_instructblip(Path(tmp) / "instructblip"),
            "llava": build_tiny_llava(Path(tmp) / "llava", text_init=0.2),
        }
        for name, path in models.items():
            for cached in (False, True):
                runs = []
                for _ in range(args.repeats):
                    cmd = [sys.executable, __file__, "--steps", str(args.steps), "--device", args.device]
                    cmd += ["--child", str(path), "1" if cached else "0", str(Path(tmp) / "data")]
                    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
                    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
                    runs.append(json.loads(out.strip().splitlines()[-1]))
                row = {
                    "model": name,
                    "vision": "cached (center crop)" if cached else "uncached (random crop)",
                    "steps_per_s": statistics.median(r["steps_per_s"] for r in runs),
                    "samples_per_s": statistics.median(r["samples_per_s"] for r in runs),
                    "peak_mib": max(r["peak_mib"] for r in runs),
                }
                rows.append(row)
                print(
                    f"{name:13s} {row['vision']:24s} {row['steps_per_s']:7.2f} steps/s "
                    f"{row['samples_per_s']:7.1f} samples/s peak {row['peak_mib']:.0f} MiB",
                    flush=True,
                )
    info = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "device": args.device,
        "torch_threads": torch.get_num_threads(),
        "steps": args.steps,
        "repeats": args.repeats,
    }
    if args.out:
        Path(args.out).write_text(json.dumps({"info": info, "rows": rows}, indent=2) + "\n")
    print(json.dumps(info))


if __name__ == "__main__":
    main()
