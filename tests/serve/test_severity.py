"""The review app under a policy with a severity scale: shown, and a reviewer sets it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.optional import need_module
from tests.serve.conftest import csrf_of, sample_ids
from vhd.cli.main import main
from vhd.store.sqlite import Store

need_module("starlette", "pip install 'vhd[serve]'")
need_module("jinja2", "pip install 'vhd[serve]'")

from vhd.serve import ServeSettings  # noqa: E402

POLICY = """\
name: acme-moderation
version: "2026-11"
categories:
  - id: violence
    description: Physical harm to people or animals.
    allows: ["educational medical imagery such as X-rays"]
severity:
  - {name: low, meaning: suggestive or mild}
  - {name: high, meaning: graphic or explicit}
"""


@pytest.fixture
def policy_store(tmp_path: Path) -> Path:
    from PIL import Image

    media = tmp_path / "media"
    media.mkdir()
    Image.new("RGB", (16, 16), (200, 0, 0)).save(media / "red.png")
    (tmp_path / "acme.yaml").write_text(POLICY, encoding="utf-8")
    script = {"default": "1. An argument.", "rules": [{"when": {"tag": "judge"}, "reply": "Yes, gore.\nSeverity: low"}]}
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    db = tmp_path / "run.db"
    args = ["annotate", str(media), "--model", f"scripted:{tmp_path / 'script.yaml'}", "--store", str(db)]
    assert main([*args, "--policy", str(tmp_path / "acme.yaml"), "--no-progress"]) == 0
    return db


def test_a_reviewer_sets_a_severity_from_the_policys_scale(policy_store: Path, client_for: Any) -> None:
    client = client_for(ServeSettings(store=policy_store, reviewer="alice"))
    (sid,) = sample_ids(client.get("/").text)
    page = client.get(f"/sample/{sid}").text
    assert '<dd id="severity-shown">low</dd>' in page and "acme-moderation@2026-11" in page
    assert '<option value="low">low</option><option value="high">high</option>' in page
    refused = client.post(f"/sample/{sid}/label", data={"csrf": csrf_of(page), "harmful": "yes", "severity": "extreme"})
    assert refused.status_code == 400 and "not on the policy&#39;s scale (low, high)" in refused.text
    r = client.post(
        f"/sample/{sid}/label",
        data={"csrf": csrf_of(page), "harmful": "yes", "severity": "high"},
        follow_redirects=False,
    )
    assert r.status_code == 303
    with Store(policy_store) as store:
        (review,) = store.sample_reviews("review", sid)
        assert review.severity == "high"
    assert "severity high" in client.get(f"/sample/{sid}").text


def test_no_scale_no_severity_field(store_copy: Path, client_for: Any) -> None:
    client = client_for(ServeSettings(store=store_copy, reviewer="alice"))
    sid = sample_ids(client.get("/").text)[0]
    assert 'name="severity"' not in client.get(f"/sample/{sid}").text
