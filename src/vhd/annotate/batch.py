"""``vhd annotate --batch-api``: the debate's calls through OpenAI-compatible batch APIs.

Every role's ``openai`` backend is wrapped in a `vhd.backends.openai_batch.BatchRunner` whose
batch ids are kept in the store (`vhd.store.batches`), keyed by the run's configuration hash. The
annotation loop is unchanged: while every debate in flight waits for its next answer, their
requests go out as one batch, so the debate runs stage by stage (all first turns, then the next).
A run stopped while batches are processed (Ctrl-C, a closed laptop, the next day) is resumed by
the same command: the replayed debates ask the same questions, and the requests already in a
batch are answered from it instead of being sent again. Raise ``--concurrency`` (samples in
flight, hence requests per batch) for large runs; OpenAI takes up to 50,000 requests a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from vhd.backends.base import Backend
from vhd.errors import ConfigError

if TYPE_CHECKING:
    from vhd.backends.openai_batch import BatchInfo, BatchRunner
    from vhd.records import Role
    from vhd.store.sqlite import Store


class StoreLedger:
    """Batch ids in the store, for one run key (the configuration hash)."""

    def __init__(self, db: Store, run_key: str) -> None:
        self.db = db
        self.run_key = run_key

    def sent(self, custom_ids: Sequence[str]) -> dict[str, str]:
        """Requests already in a live or completed batch, with its id."""
        from vhd.backends.openai_batch import LIVE

        return self.db.batches_for(custom_ids, usable=LIVE)

    def created(self, info: BatchInfo, custom_ids: Sequence[str]) -> None:
        """Record a new batch and its requests."""
        from vhd.store.batches import BatchJob

        job = BatchJob(info.batch_id, self.run_key, "debate", info.input_file_id, info.status)
        self.db.record_batch(job, custom_ids)

    def updated(self, info: BatchInfo, *, collected: bool) -> None:
        """Record a batch's status and files."""
        self.db.update_batch(info.batch_id, info.status, info.output_file_id, info.error_file_id, collected=collected)


def check_batchable(backends: Mapping[Role, Backend]) -> None:
    """Every role must use the ``openai`` backend (batch APIs are an endpoint feature).

    Raises:
        ConfigError: A role uses another backend.
    """
    from vhd.backends.openai import OpenAIBackend

    for role, backend in backends.items():
        if not isinstance(backend, OpenAIBackend):
            raise ConfigError(
                f"--batch-api needs the openai backend for every role; the {role.value} uses {backend.spec}: "
                "point it at an OpenAI-compatible endpoint with batch support, or leave out --batch-api"
            )


def batch_backends(
    backends: Mapping[Role, Backend],
    db: Store,
    run_key: str,
    *,
    poll_s: float,
    quiet_s: float,
    on_event: Callable[[str], None],
) -> tuple[dict[Role, Backend], list[BatchRunner]]:
    """The roles' backends wrapped to answer through batches (one runner per distinct backend)."""
    from vhd.backends.openai import OpenAIBackend
    from vhd.backends.openai_batch import BatchRunner

    check_batchable(backends)
    runners: dict[int, BatchRunner] = {}
    wrapped: dict[Role, Backend] = {}
    for role, backend in backends.items():
        assert isinstance(backend, OpenAIBackend)
        runner = runners.get(id(backend))
        if runner is None:
            ledger = StoreLedger(db, run_key)
            runner = BatchRunner(backend, ledger, poll_s=poll_s, quiet_s=quiet_s, on_event=on_event)
            runners[id(backend)] = runner
        wrapped[role] = runner.wrap()
    return wrapped, list(runners.values())
