"""`ScratchMap`: strings to strings in a temporary file, dict-like order, safe from threads."""

from __future__ import annotations

import threading

from vhd.store.statindex import ScratchMap


def test_put_get_replace_and_order() -> None:
    m = ScratchMap()
    assert m.put("b", "1") is None and m.put("a", "2") is None
    assert m.put("b", "3") == "1"  # replaced in place: "b" stays first
    assert (m.get("b"), m.get("zz"), len(m), "a" in m, "zz" in m) == ("3", None, 2, True, False)
    assert list(m.items(page=1)) == [("b", "3"), ("a", "2")]
    seen = []
    for key, _ in m.items(page=1):  # putting while iterating: new keys come at the end
        seen.append(key)
        if key == "b":
            m.put("c", "4")
    assert seen == ["b", "a", "c"]
    m.close()


def test_many_keys_and_threads() -> None:
    m = ScratchMap()

    def fill(k: int) -> None:
        for i in range(3000):
            m.put(f"{k}-{i}", str(i))

    threads = [threading.Thread(target=fill, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(m) == 12_000 and m.get("3-2999") == "2999"
    assert sum(1 for _ in m.items()) == 12_000
    m.close()
