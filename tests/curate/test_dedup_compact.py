"""Compact duplicate search: numpy pair search, clustering and reports against plain references."""

from __future__ import annotations

import functools
import io
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vhd.curate import clusters as clusters_module
from vhd.curate.clusters import cluster
from vhd.curate.fingerprint import Fingerprint
from vhd.curate.hashindex import pairs_within, popcount64, popcount64_by_bytes
from vhd.curate.jsonstream import write_object
from vhd.errors import ConfigError
from vhd.store.scratch import ScratchTable


def brute_pairs(codes: list[int], radius: int) -> set[tuple[int, int]]:
    return {
        (i, j)
        for i in range(len(codes))
        for j in range(i + 1, len(codes))
        if (codes[i] ^ codes[j]).bit_count() <= radius
    }


def found_pairs(codes: list[int], radius: int, **kw: object) -> set[tuple[int, int]]:
    out: set[tuple[int, int]] = set()
    for i, j in pairs_within(np.array(codes, dtype=np.uint64), radius, **kw):  # type: ignore[arg-type]
        for a, b in zip(i.tolist(), j.tolist(), strict=True):
            assert a != b
            out.add((min(a, b), max(a, b)))
    return out


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=0, max_size=80),
    radius=st.integers(min_value=0, max_value=24),
    seed=st.integers(min_value=0, max_value=1000),
    batch=st.sampled_from([5, 64, 1 << 20]),
)
def test_pairs_within_equals_brute_force(keys: list[int], radius: int, seed: int, batch: int) -> None:
    rng = random.Random(seed)
    planted = [k ^ sum(1 << b for b in rng.sample(range(64), rng.randint(0, 16))) for k in keys]
    codes = keys + planted + keys[:2]  # exact repeats too
    expected = brute_pairs(codes, radius)
    assert found_pairs(codes, radius, method="index", batch=batch) == expected
    assert found_pairs(codes, radius, method="all", batch=batch) == expected
    assert found_pairs(codes, radius, batch=batch) == expected


@pytest.mark.parametrize("chunks", [2, 3, 5, 7])
def test_pairs_within_any_chunk_count(chunks: int) -> None:
    rng = random.Random(chunks)
    base = [rng.getrandbits(64) for _ in range(150)]
    codes = base + [b ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) for b in base]
    assert found_pairs(codes, 8, method="index", chunks=chunks) == brute_pairs(codes, 8)


def test_pairs_within_errors_and_popcount_fallback() -> None:
    with pytest.raises(ConfigError, match="0 or more"):
        list(pairs_within(np.zeros(3, dtype=np.uint64), -1))
    with pytest.raises(ConfigError, match="unknown pair search"):
        list(pairs_within(np.zeros(3, dtype=np.uint64), 1, method="fast"))
    with pytest.raises(ConfigError, match="lookups a hash"):
        list(pairs_within(np.zeros(3, dtype=np.uint64), 40, method="index", chunks=1))
    values = np.array([0, 1, 2**64 - 1, 0xF0F0, 2**63], dtype=np.uint64)
    assert popcount64_by_bytes(values).tolist() == [0, 1, 64, 8, 1] == popcount64(values).tolist()


def reference(fps: list[Fingerprint], threshold: int, keep: str) -> list[tuple[object, ...]]:
    """The clustering as specified, by comparing every pair (no index, no arrays)."""
    usable = [fp for fp in fps if fp.error is None]
    parent = list(range(len(usable)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    def distance(a: Fingerprint, b: Fingerprint) -> int:
        if len(a.phashes) != len(b.phashes) or not a.phashes:
            return 65
        return max((x ^ y).bit_count() for x, y in zip(a.phashes, b.phashes, strict=True))

    for i, a in enumerate(usable):
        for j in range(i):
            b = usable[j]
            if a.kind != b.kind:
                continue
            linked = a.pixels == b.pixels
            if not linked and a.phashes and len(a.phashes) == len(b.phashes):
                if a.kind == "image":
                    mid = len(a.phashes) // 2
                    linked = (a.phashes[mid] ^ b.phashes[mid]).bit_count() <= threshold
                else:
                    linked = distance(a, b) <= threshold
            if linked:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(usable)):
        groups.setdefault(find(i), []).append(i)
    score = {
        "first": lambda i: (-i,),
        "largest": lambda i: (usable[i].area, usable[i].size, -i),
        "quality": lambda i: (usable[i].area * usable[i].fidelity // 100, usable[i].area, usable[i].size, -i),
    }[keep]
    rows: list[tuple[object, ...]] = []
    for members in sorted(groups.values()):
        kept = max(members, key=score)
        for i in [kept, *(m for m in members if m != kept)]:
            fp, k = usable[i], usable[kept]
            match = "kept" if i == kept else ("exact" if fp.pixels == k.pixels else "near")
            rows.append((fp.path, k.sha256, i == kept, match, 0 if i == kept else distance(fp, k), len(members)))
    return rows


def synthetic(seed: int, n: int = 300) -> list[Fingerprint]:
    """Images and videos with exact copies, near copies, chains, collisions, errors and no-frame videos."""
    rng = random.Random(seed)
    fps: list[Fingerprint] = []

    def add(kind: str, pixels: str, phashes: tuple[int, ...], **kw: int) -> None:
        i = len(fps)
        fps.append(
            Fingerprint(
                i,
                f"f{i:04d}.{'png' if kind == 'image' else 'mp4'}",
                kind,
                f"{rng.getrandbits(256):064x}",
                pixels,
                phashes,
                kw.get("width", rng.choice([32, 64, 64, 128])),
                kw.get("height", 64),
                kw.get("size", rng.choice([1000, 2000, 2000, 5000])),
                kw.get("fidelity", rng.choice([40, 90, 100])),
            )
        )

    def flip(h: int, bits: int) -> int:
        return h ^ sum(1 << b for b in rng.sample(range(64), bits))

    bases = [rng.getrandbits(64) for _ in range(40)]
    while len(fps) < n:
        roll = rng.random()
        if roll < 0.05:
            fps.append(Fingerprint(len(fps), f"bad{len(fps)}.png", "image", error="damaged"))
        elif roll < 0.2 and fps:
            src = rng.choice([fp for fp in fps if fp.error is None] or [None])
            if src is not None:  # an exact copy (same pixels), sometimes of another size on disk
                add(src.kind, src.pixels, src.phashes, size=rng.choice([src.size, 7000]))
        elif roll < 0.7:
            add(
                "image",
                f"{rng.getrandbits(64):016x}{rng.getrandbits(192):048x}",
                (flip(rng.choice(bases), rng.randint(0, 14)),),
            )
        elif roll < 0.75:  # same prefix, other pixels: a prefix collision, not an exact copy
            add("image", "00000000000000ab" + f"{rng.getrandbits(192):048x}", (rng.getrandbits(64),))
        elif roll < 0.97:
            frames = rng.choice([3, 5, 5])
            base = [rng.choice(bases) for _ in range(frames)]
            add("video", f"{rng.getrandbits(256):064x}", tuple(flip(h, rng.randint(0, 12)) for h in base))
        else:
            add("video", f"{rng.getrandbits(256):064x}", ())
    return fps


def view(members: list[object]) -> list[tuple[object, ...]]:
    return [(m.fp.path, m.cluster, m.kept, m.match, m.distance, m.size) for m in members]  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("keep", ["largest", "first", "quality"])
@pytest.mark.parametrize("threshold", [0, 6, 10, 40])
def test_cluster_equals_pairwise_reference(seed: int, keep: str, threshold: int) -> None:
    fps = synthetic(seed)
    expected = reference(fps, threshold, keep)
    assert sum(size > 1 for *_, size in expected) > 20  # there are clusters to get wrong
    assert view(cluster(fps, threshold=threshold, keep=keep)) == expected


def test_cluster_through_the_multi_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Few files make `pairs_within` compare every pair; force the index (and tiny batches) too."""
    monkeypatch.setattr(clusters_module, "pairs_within", functools.partial(pairs_within, method="index", batch=7))
    for seed, threshold in ((4, 10), (5, 3), (6, 17)):
        fps = synthetic(seed, 400)
        assert view(cluster(fps, threshold=threshold, keep="largest")) == reference(fps, threshold, "largest")


def test_fingerprints_come_back_whole_and_repeated_keys_are_refused() -> None:
    fps = synthetic(7, 60)
    members = cluster(fps, threshold=10)
    by_path = {fp.path: fp for fp in fps}
    assert all(m.fp == by_path[m.fp.path] for m in members)
    from vhd.curate.clusters import link
    from vhd.curate.fptable import FingerprintTable

    table = FingerprintTable()
    try:
        table.add(fps[0], key=1)
        table.add(fps[1], key=1)
        with pytest.raises(ConfigError, match="same key"):
            link(table)
    finally:
        table.close()


def test_unordered_keys_give_the_same_clusters() -> None:
    """Fingerprints arriving in any order (an executor) cluster as in input order."""
    from vhd.curate.clusters import link
    from vhd.curate.fptable import FingerprintTable

    fps = synthetic(8, 200)
    shuffled = fps[:]
    random.Random(0).shuffle(shuffled)
    table = FingerprintTable()
    for fp in shuffled:
        table.add(fp)
    members = link(table, threshold=10, keep="quality")
    try:
        assert view(list(members)) == reference(fps, 10, "quality")
        assert view([members[0], *members[1:3]]) == view(list(members))[:3]
        counts = members.counts()
        assert counts["files"] == len(members) == sum(fp.error is None for fp in fps)
    finally:
        members.close()


def test_scratch_table() -> None:
    table = ScratchTable(["path", "blob"], cache_kib=64)
    for k in range(2500, -1, -1):
        table.put(k, (f"p{k}", bytes([k % 256])))
    table.put(7, ("again", b""))
    assert len(table) == 2501
    assert table.get([7, 3, 3, 9999]) == {7: ("again", b""), 3: ("p3", b"\x03")}
    keys = [k for k, _ in table.scan(batch=100)]
    assert keys == list(range(2501))
    with pytest.raises(ConfigError, match="needs 2 values"):
        table.put(1, ("x",))
    table.close()
    with pytest.raises(ConfigError, match="plain names"):
        ScratchTable(["a; DROP"])


@settings(max_examples=80, deadline=None)
@given(
    obj=st.dictionaries(
        st.text(max_size=4),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
            max_leaves=8,
        ),
        max_size=4,
    ),
    stream=st.booleans(),
)
def test_json_stream_matches_json_dump(obj: dict[str, object], stream: bool) -> None:
    fh = io.StringIO()
    write_object(fh, [(k, iter(v) if stream and isinstance(v, list) else v) for k, v in obj.items()])
    expected = io.StringIO()
    json.dump(obj, expected, indent=2, ensure_ascii=False)
    assert fh.getvalue() == expected.getvalue() + "\n"


def test_dedup_report_is_the_json_dump_of_its_rows(tmp_path: Path) -> None:
    from vhd.curate.dedup import DedupResult, report_rows, write_dedup_report

    result = DedupResult(threshold=3, keep="first")
    result.members = cluster(synthetic(9, 80), threshold=3, keep="first")
    result.unreadable = [("x é.png", "damaged")]
    data = {
        "threshold": 3,
        "keep": "first",
        "counts": result.counts(),
        "clusters": [
            {
                "id": cid,
                "kept": ms[0].fp.path,
                "members": [{"path": m.fp.path, "match": m.match, "distance": m.distance} for m in ms],
            }
            for cid, ms in result.clusters.items()
        ],
        "leaks": [],
        "unreadable": [{"path": "x é.png", "reason": "damaged"}],
        "files": report_rows(result),
    }
    assert data["clusters"]
    text = write_dedup_report(result, tmp_path / "r.json").read_text(encoding="utf-8")
    assert text == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
