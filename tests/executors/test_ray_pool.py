"""The Ray executor on a local Ray: streaming, a killed worker, secrets, runtime_env, set-up errors."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import vhd
from tests.executors.works import Broken, EnvDigest, Square
from tests.optional import need_module
from vhd.errors import BackendUnavailableError
from vhd.execution import ExecutorOptions, map_unordered
from vhd.executors.ray_pool import RayExecutor, RayPool

pytestmark = pytest.mark.slow

SMALL = {"workers": 2, "num_cpus": 0.5}


def test_map_returns_every_result_and_one_items_error(ray_session: Any) -> None:
    runner = RayExecutor(ExecutorOptions(**SMALL))  # type: ignore[arg-type]
    results = dict(map_unordered(runner, Square(), range(40), in_flight=8))
    assert sorted(results) == list(range(40))
    assert isinstance(results[13], ValueError) and "thirteen" in str(results[13])
    assert all(results[i] == (i, i * i) for i in range(40) if i != 13)
    assert runner.timings.calls == 40 and runner.timings.redone == 0
    assert ray_session.is_initialized()  # a session it did not start is left running


def test_killed_worker_loses_only_its_in_flight_items_which_are_redone(ray_session: Any) -> None:
    runner = RayExecutor(ExecutorOptions(**SMALL))  # type: ignore[arg-type]

    async def main() -> tuple[dict[int, Any], RayPool[int, Any]]:
        async with runner.pool(Square(delay=2.0)) as pool:
            assert isinstance(pool, RayPool)
            items = [i for i in range(30) if i != 13]
            tasks = {asyncio.ensure_future(pool.run(i)): i for i in items}
            # the items reach the actors and sleep there for 2 s: the kill lands while they run (after
            # the first result, the rest of an actor's items finished at the same moment: nothing to lose)
            await asyncio.sleep(0.5)
            first = pool.actors[0]
            assert pool.slots[0].in_flight > 0  # it holds items right now
            ray_session.kill(first)
            results = dict(await asyncio.gather(*tasks))
            assert pool.actors[0] is not first  # replaced
            return results, pool

    results, _ = asyncio.run(main())
    assert results == {i: i * i for i in range(30) if i != 13}
    assert 0 < runner.timings.redone <= 15  # at most what the dead actor held
    assert runner.timings.calls == 29 + runner.timings.redone


def test_keys_reach_workers_as_env_vars_only(ray_session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-" + os.urandom(8).hex()
    monkeypatch.setenv("VHD_TEST_KEY", secret)
    work = EnvDigest(("VHD_TEST_KEY", "VHD_UNSET_VAR"))
    assert secret.encode() not in ray_session.cloudpickle.dumps(work)

    async def main() -> tuple[str, str]:
        async with RayExecutor(ExecutorOptions(workers=1, num_cpus=0.5)).pool(work) as pool:
            return await pool.run("VHD_TEST_KEY"), await pool.run("VHD_UNSET_VAR")

    def digest(value: str) -> str:
        return hashlib.sha256(value.encode()).hexdigest()

    assert asyncio.run(main()) == (digest(secret), digest(""))


CLUSTER_DRIVER = """
import asyncio, json, sys
from pathlib import Path
from vhd.annotate.work import DebateItem, DebateWork
from vhd.config import AnnotateConfig
from vhd.debate.prompts import Prompts
from vhd.execution import ExecutorOptions
from vhd.executors.ray_pool import RayExecutor
from vhd.media.load import MediaSettings
from vhd.records import Kind, MediaItem

work = DebateWork(AnnotateConfig(model="scripted:demo"), Prompts(), [], MediaSettings())

async def main():
    async with RayExecutor(ExecutorOptions(address=sys.argv[1], num_cpus=0.5)).pool(work) as pool:
        out = await pool.run(DebateItem("x", item=MediaItem(path=Path(sys.argv[2]), kind=Kind.IMAGE)))
        return pool.slots[0].info, out.result.verdict.status.value

info, status = asyncio.run(main())
print(json.dumps({"vhd": info["vhd"], "status": status}))
"""


def test_a_driver_joining_a_cluster_ships_vhd_through_runtime_env(ray_session: Any, tmp_path: Path) -> None:
    """A second driver joins the running cluster by address (as `--ray-address` does)."""
    Image.new("RGB", (32, 32), (10, 20, 30)).save(tmp_path / "a.png")
    address = ray_session.get_runtime_context().gcs_address
    proc = subprocess.run(
        [sys.executable, "-c", CLUSTER_DRIVER, address, str(tmp_path / "a.png")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "ok"
    # The worker imported vhd from the package Ray uploaded (py_modules), not from this checkout.
    assert out["vhd"] != str(Path(vhd.__file__).parent) and "runtime_resources" in out["vhd"]


def test_setup_error_is_raised_with_its_own_message(ray_session: Any) -> None:
    with pytest.raises(BackendUnavailableError, match="VHD_NO_SUCH_KEY is not set"):
        list(map_unordered(RayExecutor(ExecutorOptions(**SMALL)), Broken(), range(3)))  # type: ignore[arg-type]


def test_dedup_hashing_on_ray_matches_local(ray_session: Any, tmp_path: Path) -> None:
    need_module("imagehash", "pip install 'vhd[dedup]'")
    from tests.annotate.test_api import make_images
    from vhd.curate.dedup import find_duplicates

    folder = tmp_path / "m"
    paths = make_images(folder, 12, size=64)
    Image.open(paths[0]).save(folder / "copy_of_0.png")  # exact duplicate (same pixels)
    Image.open(paths[1]).resize((48, 48)).save(folder / "small_1.png")  # near duplicate
    (folder / "broken.png").write_bytes(b"not an image")
    local = find_duplicates(folder, jobs=1)
    remote = find_duplicates(folder, jobs=1, executor="ray", executor_options=ExecutorOptions(**SMALL))  # type: ignore[arg-type]

    def view(result: Any) -> list[tuple[Any, ...]]:
        return [(Path(m.fp.path).name, m.cluster, m.kept, m.fp.sha256, m.fp.phashes) for m in result.members]

    assert view(remote) == view(local) and len(local.members) == 14
    assert remote.unreadable == local.unreadable and len(local.unreadable) == 1
