"""`vhd bench --executor ray`: the same predictions as a local run; the cache is written by the driver."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import tests.bench.fake_detector as fake
from tests.bench.conftest import make_images, write_labels
from vhd.bench.cache import CACHE_FILE, PredictionCache
from vhd.bench.data import load_bench_set
from vhd.bench.pipeline import build_detectors
from vhd.bench.runner import run_bench
from vhd.detectors import registry
from vhd.execution import ExecutorOptions

pytestmark = pytest.mark.slow


def same(pred: Any) -> dict[str, Any]:
    """A prediction minus its timing."""
    return {k: v for k, v in dataclasses.asdict(pred).items() if k != "latency_s"}


def test_detectors_on_ray_match_local_and_fill_the_drivers_cache(
    ray_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ray_session.cloudpickle.register_pickle_by_value(fake)  # the test detector is not importable on workers
    monkeypatch.setitem(registry.BUILTIN, "red", "tests.bench.fake_detector:RedDetector")
    make_images(tmp_path / "media")
    bench = load_bench_set(write_labels(tmp_path / "labels.csv"), media=tmp_path / "media")
    specs = ["red", "vlm:scripted:demo"]  # a test detector and a real one over the scripted backend
    local = run_bench(bench, build_detectors(specs), concurrency=4)
    options = ExecutorOptions(workers=2, num_cpus=0.5)
    with PredictionCache(tmp_path / CACHE_FILE) as cache:
        remote = run_bench(bench, build_detectors(specs), cache=cache, executor="ray", executor_options=options)
    for here, there in zip(local.detectors, remote.detectors, strict=True):
        assert there.computed == 10 and here.failed == there.failed
        for sid, pred in here.predictions.items():
            assert same(pred) == same(there.predictions[sid]), (here.label, sid)
    assert "green confuses me" in (remote.detectors[0].predictions[bench.items[7].id].error or "")
    with PredictionCache(tmp_path / CACHE_FILE) as cache:  # the driver cached what the workers found
        again = run_bench(bench, build_detectors(specs), cache=cache, executor="ray", executor_options=options)
    assert [(r.cached, r.computed) for r in again.detectors] == [(9, 1), (10, 0)]  # only the failure is retried
