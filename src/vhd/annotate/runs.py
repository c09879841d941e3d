"""The runs a store holds and how two of their configurations differ (``vhd runs``).

A result type and two pure functions: `list_runs` reads `RunRow` s from a store, `diff_runs`
compares two runs' configurations key by key (nested tables flattened to dotted keys).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vhd.config import flatten_keys
from vhd.errors import ConfigError
from vhd.store.rows import RunInfo
from vhd.store.sqlite import StoreLike, using_store


@dataclass(frozen=True)
class RunRow:
    """One run, as ``vhd runs`` lists it.

    Attributes:
        id: The run id.
        config_hash: Its configuration's hash.
        models: Role to model spec.
        command: The command line (secrets redacted).
        started_at: Unix time it started.
        finished_at: Unix time it finished (None: still running, or it died).
        annotated: Samples it annotated, from its summary (None when it has none).
        vhd_version: The vhd version that ran it.
        policy: ``name@version`` of the policy it used (None: a run from before policies were recorded).
    """

    id: str
    config_hash: str
    models: dict[str, str]
    command: str
    started_at: float
    finished_at: float | None
    annotated: int | None
    vhd_version: str
    policy: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def _row(run: RunInfo, policy: str | None = None) -> RunRow:
    annotated = (run.summary or {}).get("annotated")
    return RunRow(
        id=run.id,
        config_hash=run.config_hash,
        models=dict(run.models),
        command=run.command,
        started_at=run.started_at,
        finished_at=run.finished_at,
        annotated=annotated if isinstance(annotated, int) else None,
        vhd_version=run.vhd_version,
        policy=policy,
    )


def list_runs(store: StoreLike) -> list[RunRow]:
    """Every run of a store, oldest first.

    Raises:
        ConfigError: No store at ``store``.
    """
    with using_store(store) as db:
        keys = {p.hash: p.key for p in db.policies()}
        return [_row(r, keys.get(r.policy_hash or "")) for r in db.runs()]


@dataclass(frozen=True)
class RunDiff:
    """How run ``b``'s configuration differs from run ``a``'s.

    Attributes:
        a: The first run's id.
        b: The second run's id.
        changed: Dotted key to ``(value in a, value in b)``; a key missing on one side is None there.
        same_config: Whether the two configuration hashes are equal.
    """

    a: str
    b: str
    changed: dict[str, tuple[Any, Any]]
    same_config: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "a": self.a,
            "b": self.b,
            "same_config": self.same_config,
            "changed": {k: {"a": va, "b": vb} for k, (va, vb) in self.changed.items()},
        }


def _pick(runs: list[RunInfo], ref: str) -> RunInfo:
    key = ref.strip().lower()
    if key.isdigit() and len(key) < 6:  # a number in the list; ids are named by 6+ characters
        if 1 <= int(key) <= len(runs):
            return runs[int(key) - 1]
        raise ConfigError(f"no run {ref!r} in the store: it holds runs 1 to {len(runs)} (see `vhd runs STORE`)")
    if len(key) < 6:
        raise ConfigError(f"run {ref!r}: give its number in `vhd runs STORE` or at least 6 characters of its id")
    found = [r for r in runs if r.id.startswith(key)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError(f"no run {ref!r} in the store: give a number or an id prefix from `vhd runs STORE`")
    raise ConfigError(f"run {ref!r} matches {len(found)} runs: give more characters of the id")


def diff_runs(store: StoreLike, a: str, b: str) -> RunDiff:
    """Compare two runs' configurations (and models, command aside).

    Args:
        store: The store.
        a: A run: its number in `list_runs` (1 = oldest) or an id prefix.
        b: Another run, the same way.

    Raises:
        ConfigError: No store, or a run that is not there or is ambiguous.
    """
    with using_store(store) as db:
        runs = db.runs()
    ra, rb = _pick(runs, a), _pick(runs, b)
    fa = flatten_keys({"config": ra.config, "models": ra.models, "prompt_hash": ra.prompt_hash})
    fb = flatten_keys({"config": rb.config, "models": rb.models, "prompt_hash": rb.prompt_hash})
    changed = {k: (fa.get(k), fb.get(k)) for k in sorted(fa.keys() | fb.keys()) if fa.get(k) != fb.get(k)}
    return RunDiff(a=ra.id, b=rb.id, changed=changed, same_config=ra.config_hash == rb.config_hash)
