"""Start-up cost: `import vhd` and `vhd --help`, each in a fresh Python process.

`import vhd` is timed inside the child (``time.perf_counter`` around the import, so the
interpreter's own start-up is excluded); `vhd --help` is timed from outside as the whole process
(interpreter start, parser built from every command's module, help printed), which is what a user
waits for. Each is run ``--repeats`` times; the median and the fastest are reported with the
heavy libraries each loaded (there must be none).

Targets (issue 9): `import vhd` under 50 ms; `vhd --help` about as fast as before the house
refactor (0.18 s was measured then).

Usage: python benchmarks/import_speed.py [--repeats 15] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("torch", "transformers", "numpy", "PIL", "av", "httpx", "openai", "pydantic", "rich", "pyarrow")

IMPORT_PROBE = """
import sys, time, json
t = time.perf_counter()
import vhd
elapsed = time.perf_counter() - t
print(json.dumps({"s": elapsed, "heavy": sorted({m.split('.')[0] for m in sys.modules} & set(%r))}))
""" % (HEAVY,)  # noqa: UP031


def time_import(repeats: int) -> dict[str, object]:
    runs = []
    heavy: list[str] = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], check=True, capture_output=True, text=True)
        data = json.loads(out.stdout)
        runs.append(data["s"])
        heavy = data["heavy"]
    return {"median_ms": statistics.median(runs) * 1000, "min_ms": min(runs) * 1000, "heavy": heavy}


def time_help(repeats: int) -> dict[str, object]:
    vhd = shutil.which("vhd", path=str(Path(sys.executable).parent)) or "vhd"
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([vhd, "--help"], check=True, capture_output=True)
        runs.append(time.perf_counter() - start)
    return {"median_s": statistics.median(runs), "min_s": min(runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = {
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "import_vhd": time_import(args.repeats),
        "vhd_help": time_help(args.repeats),
    }
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
