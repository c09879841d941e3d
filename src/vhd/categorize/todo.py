"""`Todo`: the harmful annotations a categorisation run works through, read a page at a time."""

from __future__ import annotations

from collections.abc import Iterator

from vhd.store import categories as cstore
from vhd.store.sqlite import Store

BATCH = 256
"""Annotations read (and checked against the results stored) per page."""


class Todo:
    """The harmful annotations a run categorises, read from the store a page at a time.

    Iterable (each pass reads the store again) and sized (counted by SQL up front), so a
    method can say how many it will do and go through them without a list of every one.
    Annotations with a final result under the run's method and taxonomy version are left
    out (unless ``redo``), as is everything after the first ``limit``.

    Args:
        store: The store.
        config_hash: Only annotations under this configuration (default: each sample's latest).
        done: ``(method, taxonomy, version)`` whose final results mean done; None (``redo``):
            nothing is done.
        retry_unparsed: An ``unparsed`` result is not final.
        limit: At most this many.
    """

    def __init__(
        self,
        store: Store,
        *,
        config_hash: str | None = None,
        done: tuple[str, str, str] | None = None,
        retry_unparsed: bool = False,
        limit: int | None = None,
    ) -> None:
        self.store, self.config_hash, self.done, self.retry_unparsed = store, config_hash, done, retry_unparsed
        self.harmful = cstore.count_harmful(store, config_hash=config_hash)
        self.already_done = (
            0
            if done is None
            else cstore.count_harmful(store, config_hash=config_hash, done=done, retry_unparsed=retry_unparsed)
        )
        left = self.harmful - self.already_done
        self.count = left if limit is None else min(left, max(0, limit))

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __iter__(self) -> Iterator[cstore.HarmfulAnnotation]:
        given = 0
        page: list[cstore.HarmfulAnnotation] = []
        stream = cstore.iter_harmful_annotations(self.store, config_hash=self.config_hash)
        while given < self.count:
            page.clear()
            for item in stream:
                page.append(item)
                if len(page) >= BATCH:
                    break
            if not page:
                return
            finished: set[int] = set()
            if self.done is not None:
                method, taxonomy, version = self.done
                ids = [it.annotation_id for it in page]
                finished = cstore.done_ids(
                    self.store, method, taxonomy, version, retry_unparsed=self.retry_unparsed, among=ids
                )
            for item in page:
                if item.annotation_id not in finished and given < self.count:
                    given += 1
                    yield item

    def batches(self, size: int = BATCH) -> Iterator[list[cstore.HarmfulAnnotation]]:
        """The annotations in lists of at most ``size``."""
        chunk: list[cstore.HarmfulAnnotation] = []
        for item in self:
            chunk.append(item)
            if len(chunk) >= size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk
