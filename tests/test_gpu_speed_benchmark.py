"""`benchmarks/gpu_speed.py --tiny` still runs against today's API and prints one row per workload.

Only the mechanics are checked (the script finishes, each side measured something, the CPU proxies are
reported); its figures are in BENCHMARKS.md, never asserted here.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need_module

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_gpu_benchmark_runs_its_cpu_mode(tmp_path: Path) -> None:
    for module in ("torch", "transformers", "diffusers"):
        need_module(module, "pip install 'vhd[tune,gen]'")
    out = tmp_path / "rows.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_speed.py"), "--tiny", "--only", "tune,sdxl"]
    cmd += ["--tune-steps", "2", "--steps", "1", "--rounds", "1", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=280, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    rows = {row["workload"]: row for row in report["rows"]}
    assert set(rows) == {
        "tune InstructBLIP (tiny), vhd workers 0 (default)",  # the CPU default: batches built in process
        "tune InstructBLIP (tiny), vhd workers 1",
        "SDXL 64",
    }
    for row in rows.values():
        assert row["bare"] > 0 and row["vhd"] > 0 and math.isfinite(row["ratio"]), row
    assert all("data s/step bare" in rows[w]["note"] for w in rows if w.startswith("tune"))
    sdxl = rows["SDXL 64"]["note"]
    assert "wall/pipeline" in sdxl and "16 outputs (16 files), batch 4, 1 steps, best of 1" in sdxl
    assert report["info"]["device"] == "cpu (no GPU lent)" and report["info"]["torch_threads"] == 1
    assert "| SDXL 64 | s/image |" in done.stdout  # the table a user pastes into BENCHMARKS.md
