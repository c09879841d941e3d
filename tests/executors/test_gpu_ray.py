"""On a machine with a GPU: Ray gives each worker the GPU it asked for, and an `hf` model runs there."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.annotate.test_api import make_images
from tests.executors.works import GpuProbe
from vhd.annotate.api import annotate
from vhd.annotate.options import RunOptions
from vhd.execution import ExecutorOptions
from vhd.executors.ray_pool import RayExecutor

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_a_worker_with_num_gpus_runs_its_hf_model_on_the_gpu(
    ray_session: Any, tmp_path: Path, tiny_llava_dir: Path
) -> None:
    options = ExecutorOptions(workers=1, num_cpus=0.5, num_gpus=1)

    async def probe() -> str:
        async with RayExecutor(options).pool(GpuProbe()) as pool:
            return await pool.run(0)

    assert asyncio.run(probe()) != ""
    make_images(tmp_path / "m", 4)
    cfg = tmp_path / "hf.toml"
    cfg.write_text("[debate]\nrounds = 1\ndebater_max_tokens = 6\njudge_max_tokens = 4\n[media]\nmax_side = 32\n")
    summary = annotate(
        [tmp_path / "m"],
        model=f"hf:{tiny_llava_dir}",
        store=tmp_path / "g.db",
        config=cfg,
        options=RunOptions(executor="ray", executor_options=options),
    )
    assert summary.annotated == 4 and summary.usage.calls == 12
