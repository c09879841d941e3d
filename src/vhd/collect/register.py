"""Register fetched files as samples in a store, after validating them like the annotator does.

Content Credentials (C2PA) are read as `vhd ingest` reads them: a trusted manifest declaring AI
generation makes a sample whose row declares no source synthetic, with the claimed generator;
any other manifest is only recorded (`vhd.media.credentials`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from vhd.boundary import ItemFailure, guarded
from vhd.collect.fetch_settings import FetchOutcome, FetchSettings
from vhd.records import Kind, MediaItem, UrlRow

_DECODERS = 2


class Registrar:
    """Validates fetched files (decoding them, in worker threads) and upserts their samples.

    Args:
        store: A `vhd.store.Store`.
        settings: The fetch settings (the image size limit applies to validation too).
        anchors: `vhd.media.credentials.TrustAnchors` for Content Credentials; default: the
            user config's ``[c2pa]`` ``trust_anchors`` / ``user_anchors``.
    """

    def __init__(self, store: Any, settings: FetchSettings, anchors: Any = None) -> None:
        from vhd.media.credentials import TrustAnchors, c2pa_available
        from vhd.media.image import ImageLimits
        from vhd.media.load import MediaSettings

        self.store = store
        self.anchors = anchors if anchors is not None or not c2pa_available() else TrustAnchors.from_config()
        self.media = MediaSettings(limits=ImageLimits(max_bytes=settings.max_image_bytes))
        self._slots = asyncio.Semaphore(_DECODERS)

    def has(self, sample_id: str) -> bool:
        """Whether the store already holds this sample."""
        return self.store.get_sample(sample_id) is not None

    def _register(self, path: Path, row: UrlRow, outcome: FetchOutcome) -> str | None:
        from vhd.media.credentials import mark_from_credentials
        from vhd.media.load import load_sample

        meta: dict[str, Any] = dict(row.meta)
        meta["url"] = row.url
        if outcome.final_url and outcome.final_url != row.url:
            meta["final_url"] = outcome.final_url
        item = MediaItem(
            path=path,
            kind=Kind(outcome.kind or "image"),
            source=row.source,
            keyword=row.keyword,
            id=row.id,
            meta=meta,
        )
        loaded = guarded(load_sample, item, self.media)  # damaged, a missing extra (named), or a surprise
        if isinstance(loaded, ItemFailure):
            return f"not a valid {item.kind.value}: {loaded.reason}"
        self.store.upsert_sample(mark_from_credentials(loaded.sample, path, self.anchors))
        return None

    async def register(self, path: Path, row: UrlRow, outcome: FetchOutcome) -> str | None:
        """Validate ``path`` and upsert its sample; return why it is invalid, or None.

        A video that needs PyAV when it is missing is invalid here, its reason naming the extra.
        """
        async with self._slots:
            return await asyncio.to_thread(self._register, path, row, outcome)
