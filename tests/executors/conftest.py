"""One local Ray session for every Ray test (Ray takes seconds to start), on 127.0.0.1 only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.optional import need_module


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """``ray`` with a 2-CPU local session started; shut down at the end of the test session."""
    need_module("ray", "pip install 'vhd[ray]'")
    import ray

    import tests.executors.works as works

    # The test works are not importable on the workers (tests/ is not on their path): by value.
    ray.cloudpickle.register_pickle_by_value(works)
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
            configure_logging=False,
        )
    yield ray
    if started:
        ray.shutdown()
