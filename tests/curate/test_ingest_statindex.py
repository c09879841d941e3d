"""`vhd ingest` through the stat index: unchanged files are not read again; ``rehash`` reads them."""

from __future__ import annotations

import os
import time
from pathlib import Path

from PIL import Image

from vhd.curate.ingest import ingest
from vhd.store.sqlite import Store


def test_ingest_again_reads_only_what_changed(tmp_path: Path, reads: list[str]) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    then = time.time() - 60
    for i in range(4):
        Image.new("RGB", (8, 8), (i, 9, 9)).save(folder / f"p{i}.png")
        os.utime(folder / f"p{i}.png", (then, then))
    with Store(tmp_path / "s.db") as store:
        assert len(ingest([folder], store).added) == 4 and len(reads) == 4
        reads.clear()
        assert len(ingest([folder], store).unchanged) == 4 and reads == []
        os.utime(folder / "p1.png", (then - 5, then - 5))
        assert len(ingest([folder], store).unchanged) == 4 and reads == [str(folder / "p1.png")]
        reads.clear()
        ingest([folder], store, rehash=True)
        assert len(reads) == 4
