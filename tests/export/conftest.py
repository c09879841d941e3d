"""The store fixtures of tests/store (a fresh store, a run in it, a record builder), shared here."""

from tests.store.conftest import build, run_id, store

__all__ = ["build", "run_id", "store"]
