"""Labels written from the review app are a validation set `vhd icl --validation review --store STORE` uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.optional import need_module
from tests.serve.conftest import csrf_of, sample_ids
from vhd.cli.main import main


def test_icl_reads_the_labelled_set_the_app_wrote(store_copy: Path, client_for: Any, tmp_path: Path) -> None:
    need_module("starlette", "pip install 'vhd[serve]'")
    from vhd.serve import ServeSettings

    client = client_for(ServeSettings(store=store_copy, reviewer="alice"))
    ids = sample_ids(client.get("/").text)
    decisions = ["yes", "no", "yes", "no", "yes", "no", "yes"]
    for sid, decision in zip(ids, decisions, strict=True):
        page = client.get(f"/sample/{sid}")
        client.post(f"/sample/{sid}/label", data={"csrf": csrf_of(page.text), "harmful": decision})
    out = tmp_path / "icl"
    flags = ["--model", "scripted:demo", "--out", str(out), "--max-rounds", "1", "--holdout", "0", "--no-progress"]
    code = main(["icl", "--validation", "review", "--store", str(store_copy), *flags])
    assert code == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    # scripted:demo calls everything not harmful: the 4 "yes" labels are its misses, the 3 "no" its hits
    assert "| none | 0.0 | 100.0 | 0.0 | 50.0 | 7 | 0/0/3/4 |" in text
