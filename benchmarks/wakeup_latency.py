"""How late a sleeping thread wakes beside host threads: the GIL's switch interval or a busy CPU?

`vhd generate`'s pipeline thread sleeps in its kernels (and the `generate_speed.py --standin`
stand-in sleeps per step); each time it wakes, it needs a CPU and the GIL. This script runs that
thread (20 ms sleeps, for ``--seconds``) beside host threads doing work shaped like an output's
host work (a 1024x1024 PNG at level 1, JSON of a provenance-sized dict, a pure-Python loop) and
reports how late each wake-up came, for several set-ups, alternated ``--rounds`` times:

- ``N threads``: N host threads, Python's 5 ms switch interval;
- ``N threads, 0.5 ms switch``: the same with ``sys.setswitchinterval(0.0005)``;
- ``N threads, nice 10``: the host threads at a lower OS priority.

Usage: python benchmarks/wakeup_latency.py [--seconds 4] [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import threading
import time
from typing import Any


def photo() -> Any:
    import numpy as np
    from PIL import Image
    from skimage import data

    base = Image.fromarray(data.astronaut()).resize((1024, 1024), Image.Resampling.BICUBIC)
    rng = np.random.default_rng(7)
    arr = np.asarray(base, dtype=np.float32) + rng.normal(0, 3, (1024, 1024, 3))
    return Image.fromarray(arr.clip(0, 255).astype(np.uint8))


def host_work(stop: threading.Event, image: Any, nice: int) -> None:
    if nice:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    provenance = {f"field{i}": ["value" * 4] * 5 for i in range(200)}
    while not stop.is_set():
        image.save(io.BytesIO(), "PNG", compress_level=1)  # C; zlib lets the GIL go
        for _ in range(20):
            json.dumps(provenance)  # C with the GIL held
        sum(i * i for i in range(20000))  # bytecode


def trial(image: Any, seconds: float, threads: int, switch: float, nice: int) -> list[float]:
    """Milliseconds late of every 20 ms sleep of this thread beside ``threads`` host threads."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(switch)
    stop = threading.Event()
    hosts = [threading.Thread(target=host_work, args=(stop, image, nice)) for _ in range(threads)]
    for h in hosts:
        h.start()
    late: list[float] = []
    end = time.perf_counter() + seconds
    try:
        while time.perf_counter() < end:
            began = time.perf_counter()
            time.sleep(0.02)
            late.append(1000 * (time.perf_counter() - began - 0.02))
    finally:
        stop.set()
        for h in hosts:
            h.join()
        sys.setswitchinterval(before)
    return late


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="host threads (vhd's default on 2 cores: 2)")
    args = ap.parse_args()
    image = photo()
    n = args.threads
    setups = {
        f"{n} threads": (n, 0.005, 0),
        f"{n} threads, 0.5 ms switch": (n, 0.0005, 0),
        f"{n} threads, nice 10": (n, 0.005, 10),
        f"{n - 1} thread(s)": (n - 1, 0.005, 0),
    }
    means: dict[str, list[float]] = {name: [] for name in setups}
    medians: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(args.rounds):
        for name, (threads, switch, nice) in setups.items():
            late = trial(image, args.seconds, threads, switch, nice)
            means[name].append(statistics.mean(late))
            medians[name].append(statistics.median(late))
            print(
                f"{name}: late {statistics.mean(late):.2f} ms mean, {statistics.median(late):.2f} ms median "
                f"({len(late)} wake-ups), load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    for name in setups:
        print(
            f"{name}: median of means {statistics.median(means[name]):.2f} ms, "
            f"median of medians {statistics.median(medians[name]):.2f} ms"
        )


if __name__ == "__main__":
    main()
