"""A forged C2PA claim is shown as what it is: untrusted, in `vhd show`, the exports and the review app.

The photo is declared real and carries a manifest signed by a self-made certificate named "Adobe
Content Authenticity Signer" that claims a model made it (`tests.media.test_credentials.forged`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_module
from vhd.cli.main import main
from vhd.records import Source

need_module("starlette", "pip install 'vhd[serve]'")
need_module("jinja2", "pip install 'vhd[serve]'")
need_module("c2pa", "pip install 'vhd[c2pa]'")
need_module("cryptography", "pip install 'vhd[c2pa]'")

from vhd.serve import ServeSettings  # noqa: E402


def test_an_untrusted_claim_is_shown_untrusted_everywhere(
    tmp_path: Path, client_for: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.media.test_credentials import HOSTILE_GENERATOR, forged, ingest_one
    from vhd.media.credentials import TrustAnchors

    sample = ingest_one(tmp_path, forged(tmp_path, HOSTILE_GENERATOR), Source.REAL, TrustAnchors())
    db = tmp_path / "run.db"
    argv = ["annotate", str(tmp_path / "in"), "--model", "scripted:demo", "--store", str(db), "--no-progress", "-q"]
    assert main(argv) == 0
    capsys.readouterr()

    assert main(["show", str(db), "photo.png"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "content credentials: UNTRUSTED C2PA manifest: claims AI generation" in shown
    assert "Adobe Content Authenticity Signer" in shown and "not acted on" in shown and "\x1b" not in shown

    assert main(["export", str(db), "--format", "jsonl", "-o", str(tmp_path / "out.jsonl")]) == 0
    (row,) = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert row["credentials"] == "untrusted" and row["source"] == "real" and row["generator"] is None

    page = client_for(ServeSettings(store=db, reviewer="alice")).get(f"/sample/{sample.id}").text
    found = re.search(r'<dd id="content-credentials" class="credentials-untrusted">(.*?)</dd>', page, re.S)
    assert found, "the sample page does not show the manifest's trust"
    assert found.group(1).startswith("UNTRUSTED C2PA manifest")
    assert "<script>alert" not in page and "&lt;script&gt;alert" in found.group(1)
