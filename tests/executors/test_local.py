"""The executor registry and the local executor (no Ray needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.executors.works import Broken, Square
from vhd.annotate.options import RunOptions
from vhd.errors import BackendUnavailableError, ConfigError, MissingDependencyError
from vhd.execution import EXECUTORS, ExecutorOptions, executor, map_unordered
from vhd.executors.local import LocalExecutor


def test_registry_names_and_lookup() -> None:
    assert {"local", "ray"} <= set(EXECUTORS.names())
    assert isinstance(executor("local"), LocalExecutor)
    given = LocalExecutor()
    assert executor(given) is given
    with pytest.raises(ConfigError, match="valid executors: local, ray"):
        executor("dask")


def test_ray_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"vhd\[ray\]"):
        executor("ray", ExecutorOptions(workers=2))


def test_local_map_streams_results_and_keeps_one_items_error() -> None:
    seen: list[int] = []
    results = dict(
        map_unordered(LocalExecutor(), Square(), range(20), in_flight=4, on_result=lambda i, _r: seen.append(i))
    )
    assert sorted(results) == list(range(20)) and sorted(seen) == list(range(20))
    assert isinstance(results[13], ValueError)
    assert all(results[i] == (i, i * i) for i in range(20) if i != 13)


def test_local_map_pulls_items_lazily() -> None:
    pulled: list[int] = []

    def items() -> object:
        for i in range(100):
            pulled.append(i)
            yield i

    it = map_unordered(LocalExecutor(), Square(), items(), in_flight=3)  # type: ignore[arg-type]
    next(it)
    assert len(pulled) <= 4  # three in flight, one refill
    it.close()


def test_setup_failure_surfaces_before_any_item() -> None:
    with pytest.raises(BackendUnavailableError, match="VHD_NO_SUCH_KEY"):
        list(map_unordered(LocalExecutor(), Broken(), range(3)))


def test_named_env_finds_every_variable_a_config_names() -> None:
    from vhd.execution import DEFAULT_ENV, named_env

    tables = {
        "openai": {"base_url": "http://x", "api_key_env": "MY_KEY"},
        "fleet": {"endpoints": [{"api_key_env": "KEY_A"}, {"api_key_env": "KEY_B"}], "timeout_env": "T"},
        "hf": {"device": "cpu"},
    }
    assert named_env(tables) == ["MY_KEY", "KEY_A", "KEY_B", "T", *DEFAULT_ENV]


@pytest.mark.parametrize(
    "bad", [{"workers": 0}, {"max_attempts": 0}, {"num_cpus": -1.0}, {"num_gpus": -0.5}, {"in_flight": 0}]
)
def test_options_refuse_impossible_values(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ExecutorOptions(**bad)  # type: ignore[arg-type]


def test_stage_wise_refuses_an_out_of_process_executor(tmp_path: Path) -> None:
    import vhd
    from vhd.errors import ConfigError
    from vhd.execution import Executor

    class Elsewhere(Executor):
        name = "elsewhere"

        async def start(self, work):  # type: ignore[no-untyped-def]
            raise AssertionError("never started: the options are refused first")

    with pytest.raises(ConfigError, match="--stage-wise runs the debate in this process"):
        vhd.annotate(
            [tmp_path],
            model="scripted",
            store=tmp_path / "run.db",
            options=RunOptions(stage_wise=True, executor=Elsewhere()),
        )
