from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vhd.curate.hashindex import HammingIndex, default_chunks
from vhd.errors import ConfigError


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=1, max_size=60),
    radius=st.integers(min_value=0, max_value=16),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_query_equals_brute_force(keys: list[int], radius: int, seed: int) -> None:
    rng = random.Random(seed)
    # Plant near copies so that matches exist at every distance.
    planted = [k ^ sum(1 << b for b in rng.sample(range(64), rng.randint(0, 20))) for k in keys]
    everything = keys + planted
    index: HammingIndex[int] = HammingIndex(radius)
    for i, k in enumerate(everything):
        index.add(k, i)
    for q in [*everything[:20], rng.getrandbits(64)]:
        expected = [(i, (k ^ q).bit_count()) for i, k in enumerate(everything) if (k ^ q).bit_count() <= radius]
        assert index.query(q) == expected


@pytest.mark.parametrize("chunks", [3, 4, 5, 7, 11])
def test_any_chunk_count_is_exact(chunks: int) -> None:
    rng = random.Random(chunks)
    base = [rng.getrandbits(64) for _ in range(40)]
    keys = base + [b ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) for b in base]
    index: HammingIndex[int] = HammingIndex(10, chunks=chunks)
    for i, k in enumerate(keys):
        index.add(k, i)
    for q in keys:
        expected = [(i, (k ^ q).bit_count()) for i, k in enumerate(keys) if (k ^ q).bit_count() <= 10]
        assert index.query(q) == expected


def test_other_widths_and_duplicates() -> None:
    index: HammingIndex[str] = HammingIndex(radius=1, bits=8)
    index.add(0b1111_0000, "a")
    index.add(0b1111_0000, "b")
    index.add(0b1111_0001, "c")
    index.add(0b0000_1111, "d")
    assert index.query(0b1111_0000) == [("a", 0), ("b", 0), ("c", 1)]
    assert len(index) == 4


def test_defaults_and_errors() -> None:
    assert default_chunks(64, 10) == 4
    assert default_chunks(64, 0) == 1
    with pytest.raises(ConfigError):
        HammingIndex(-1)
    with pytest.raises(ConfigError):
        HammingIndex(3, bits=4, chunks=5)
    with pytest.raises(ConfigError, match="lookups a query"):
        HammingIndex(10, chunks=1)
