"""Sample leases (who is annotating what) and per-run usage counters in the store."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.store.conftest import Builder, sample_id
from vhd.records import Status, Usage
from vhd.store import Store
from vhd.store.leases import LeaseOwner

IDS = [sample_id(n) for n in range(5)]


def owner(run_id: str, host: str = "elsewhere", pid: int = 4242) -> LeaseOwner:
    return LeaseOwner(run_id=run_id, pid=pid, host=host)


def test_claims_split_work_between_runs(store: Store, build: Builder) -> None:
    a, b = store.start_run({}, "cfgA", {}, "p"), store.start_run({}, "cfgA", {}, "p")
    first = store.claim(LeaseOwner.here(a), "cfgA", IDS[:3], ttl=60)
    assert (first.claimed, first.leased, first.done) == (IDS[:3], [], [])
    second = store.claim(LeaseOwner.here(b), "cfgA", IDS, ttl=60)
    assert (second.claimed, second.leased, second.done) == (IDS[3:], IDS[:3], [])
    # another configuration is other work: no lease stands in its way
    assert store.claim(LeaseOwner.here(b), "cfgB", IDS[:1], ttl=60).claimed == IDS[:1]
    # a run that asks again for its own leases keeps them
    assert store.claim(LeaseOwner.here(a), "cfgA", IDS[:3], ttl=60).claimed == IDS[:3]


def test_a_saved_final_verdict_releases_the_lease_and_counts_as_done(store: Store, build: Builder) -> None:
    a, b = store.start_run({}, "cfgA", {}, "p"), store.start_run({}, "cfgA", {}, "p")
    store.claim(LeaseOwner.here(a), "cfgA", [sample_id(0), sample_id(1)], ttl=60)
    store.save_annotation(build.annotation(build.sample(0), a), build.sample(0))
    error = build.annotation(build.sample(1), a, status=Status.ERROR, harmful=None, error="boom")
    store.save_annotation(error, build.sample(1))
    assert store.leased_samples(a) == []
    claim = store.claim(LeaseOwner.here(b), "cfgA", [sample_id(0), sample_id(1)], ttl=60)
    assert claim.done == [sample_id(0)] and claim.claimed == [sample_id(1)]  # an error is retried


def test_unparsed_is_done_unless_retried(store: Store, build: Builder) -> None:
    a = store.start_run({}, "cfgA", {}, "p")
    ann = build.annotation(build.sample(0), a, status=Status.UNPARSED, harmful=None)
    store.save_annotation(ann, build.sample(0))
    assert store.claim(LeaseOwner.here(a), "cfgA", IDS[:1], ttl=60).done == IDS[:1]
    assert store.claim(LeaseOwner.here(a), "cfgA", IDS[:1], ttl=60, retry_unparsed=True).claimed == IDS[:1]


def test_an_expired_lease_is_retaken_and_a_renewed_one_is_not(store: Store) -> None:
    a, b = store.start_run({}, "cfgA", {}, "p"), store.start_run({}, "cfgA", {}, "p")
    store.claim(owner(a), "cfgA", IDS[:2], ttl=0.5)
    assert store.claim(LeaseOwner.here(b), "cfgA", IDS[:2], ttl=60).leased == IDS[:2]
    assert store.renew_leases(a, ttl=600) == 2
    expires = [r[0] for r in store.conn.execute("SELECT expires_at FROM leases WHERE run_id = ?", (a,))]
    assert min(expires) > time.time() + 590
    # ten minutes on, nobody renewed them: expired, taken by the next claim
    store.conn.execute("UPDATE leases SET expires_at = expires_at - 601 WHERE run_id = ?", (a,))
    assert store.claim(LeaseOwner.here(b), "cfgA", IDS[:2], ttl=60).claimed == IDS[:2]
    assert store.leased_samples(b) == sorted(IDS[:2]) and store.leased_samples(a) == []


def test_a_dead_process_on_this_machine_holds_nothing(store: Store) -> None:
    a, b = store.start_run({}, "cfgA", {}, "p"), store.start_run({}, "cfgA", {}, "p")
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(child.stdout)
    here = LeaseOwner.here(a)
    store.claim(LeaseOwner(run_id=a, pid=dead, host=here.host), "cfgA", IDS[:1], ttl=600)
    store.claim(owner(a), "cfgA", IDS[1:2], ttl=600)  # same pid number, another machine: alive as far as we know
    claim = store.claim(LeaseOwner.here(b), "cfgA", IDS[:2], ttl=60)
    assert claim.claimed == IDS[:1] and claim.leased == IDS[1:2]


def test_release_and_unfinished(store: Store, build: Builder) -> None:
    a = store.start_run({}, "cfgA", {}, "p")
    store.claim(LeaseOwner.here(a), "cfgA", IDS, ttl=60)
    store.release_leases(a, IDS[:2])
    assert store.leased_samples(a) == sorted(IDS[2:])
    store.release_leases(a)
    assert store.leased_samples(a) == []
    store.save_annotation(build.annotation(build.sample(0), a), build.sample(0))
    assert store.unfinished("cfgA", IDS[:3]) == IDS[1:3]


def test_claims_are_batched_in_one_transaction(store: Store) -> None:
    a = store.start_run({}, "cfgA", {}, "p")
    many = [sample_id(n) for n in range(500)]
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    assert len(store.claim(LeaseOwner.here(a), "cfgA", many, ttl=60).claimed) == 500
    store.conn.set_trace_callback(None)
    assert sum(s.startswith("BEGIN") for s in statements) == 1


def test_run_usage_is_kept_per_run(store: Store) -> None:
    a = store.start_run({}, "cfgA", {}, "p")
    assert store.run_usage(a) is None
    store.record_usage(a, Usage(3, 300, 30, 0.5))
    store.record_usage(a, Usage(5, 500, 50, 0.75))  # totals so far, not increments
    assert store.run_usage(a) == Usage(5, 500, 50, 0.75)
    with pytest.raises(Exception, match="not in store"):
        store.record_usage("nope", Usage(1, 1, 1, 0.0))
