"""docs/python-api.md: its example runs as written (annotate, pandas, bench, HF export)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.optional import need_module

PAGE = Path(__file__).resolve().parent.parent / "docs" / "python-api.md"


def test_the_python_api_page_example_runs(tmp_path: Path) -> None:
    for module, extra in (("skimage", "examples"), ("av", "video"), ("pyarrow", "parquet"), ("datasets", "hf")):
        need_module(module, f"pip install 'vhd[{extra}]'")
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "the page has one runnable example"
    (tmp_path / "example.py").write_text(blocks[0], encoding="utf-8")
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "7 annotated, 0 harmful" in out  # six example photos and one drawn video
    assert "accuracy 1.000" in out  # the scripted detector agrees with the scripted annotator (report's repr)
    assert "RunSummary: run " in out and "BenchReport: 1 detector(s) on 7 sample(s)" in out
    assert "{'train': 7} {'image': 6, 'video': 1}" in out
    assert "ClassLabel(names=['not_harmful', 'harmful'])" in out
    assert (tmp_path / "vhd_dataset" / "README.md").is_file() and (tmp_path / "bench_report").is_dir()
