"""Routes of the review app, through Starlette's test client, on a store made from the example media."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import pytest

from tests.optional import need_module
from tests.serve.conftest import EVIL, csrf_of, sample_ids
from vhd.records import Kind
from vhd.store.gallery import GalleryFilter
from vhd.store.sqlite import Store

need_module("starlette", "pip install 'vhd[serve]'")
need_module("jinja2", "pip install 'vhd[serve]'")

from vhd.serve import ServeSettings  # noqa: E402
from vhd.serve.thumbs import MAX_EDGE_RATIO, edge_energy, sample_frames  # noqa: E402

HTML = {"accept": "text/html"}


def _settings(store: Path, **kw: Any) -> ServeSettings:
    return ServeSettings(store=store, reviewer=kw.pop("reviewer", "alice"), **kw)


def _label(client: Any, sample_id: str, decision: str, query: str = "", **extra: str) -> Any:
    page = client.get(f"/sample/{sample_id}{query}")
    assert page.status_code == 200
    data = {"csrf": csrf_of(page.text), "harmful": decision, **extra}
    return client.post(f"/sample/{sample_id}/label{query}", data=data, follow_redirects=False)


def test_gallery_is_the_root_with_root_relative_previews_and_links(store_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(store_copy))
    page = client.get("/", headers=HTML)
    assert page.status_code == 200
    ids = sample_ids(page.text)
    assert len(ids) == 7  # six photos and one video
    for sid in ids:
        assert f'<img src="/thumb/{sid}"' in page.text
        assert f'href="/sample/{sid}"' in page.text
    video = [sid for sid in ids if f'src="/thumb/{sid}?frame=4"' in page.text]
    assert len(video) == 1  # the video is shown as its 5 frames
    assert "<script>" not in page.text.split("</head>")[1]  # no inline script in the body
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert client.get("/static/app.js").status_code == 200


def test_every_preview_leaving_the_server_hides_shape(store_copy: Path, client_for: Any) -> None:
    from PIL import Image

    client = client_for(_settings(store_copy))
    with Store(store_copy) as store:
        samples = [store.get_sample(sid) for sid in sample_ids(client.get("/").text)]
    checked = 0
    for sample in samples:
        assert sample is not None
        originals = sample_frames(sample)
        assert len(originals) == (5 if sample.kind is Kind.VIDEO else 1)
        for k, original in enumerate(originals):
            for query in ("", "&level=2", "&colour=1", "&level=3"):
                r = client.get(f"/thumb/{sample.id}?frame={k}{query}")
                assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
                served = Image.open(io.BytesIO(r.content))
                assert edge_energy(served) <= MAX_EDGE_RATIO * edge_energy(original), (sample.path, k, query)
                checked += 1
    assert checked == (6 + 5) * 4
    assert client.get(f"/thumb/{samples[0].id}?level=0").status_code == 404  # nothing weaker than the default


def test_reveal_needs_a_click_and_never_happens_with_no_reveal(store_copy: Path, client_for: Any) -> None:
    from PIL import Image

    client = client_for(_settings(store_copy))
    sid = sample_ids(client.get("/").text)[0]
    page = client.get(f"/sample/{sid}")
    assert "clear=" not in page.text and 'id="reveal"' in page.text
    assert client.get(f"/thumb/{sid}?clear=1").status_code == 403  # not without the click
    revealed = client.get(f"/sample/{sid}?reveal=1")
    match = re.search(rf'src="(/thumb/{sid}\?clear=[0-9a-f]+)"', revealed.text)
    assert match, "the revealed page shows the clear image"
    other = sample_ids(client.get("/").text)[1]
    assert client.get(match.group(1).replace(sid, other)).status_code == 403  # that sample only
    clear = Image.open(io.BytesIO(client.get(match.group(1)).content))
    blurred = Image.open(io.BytesIO(client.get(f"/thumb/{sid}").content))
    assert edge_energy(clear) > 2 * edge_energy(blurred)

    strict = client_for(_settings(store_copy, no_reveal=True))
    page = strict.get(f"/sample/{sid}?reveal=1")
    assert "clear=" not in page.text and 'id="reveal"' not in page.text
    assert strict.get(match.group(1)).status_code == 403


def test_labels_are_saved_at_once_with_reviewer_and_time_and_undo_works(store_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(store_copy))
    ids = sample_ids(client.get("/").text)
    r = _label(client, ids[0], "yes", categories="Violence and Threats", note="a <b>note</b>")
    assert r.status_code == 303 and r.headers["location"] == f"/sample/{ids[1]}"  # on to the next sample
    _label(client, ids[1], "no")
    _label(client, ids[2], "yes")
    with Store(store_copy) as store:
        labels = {item.id: item for item in store.labelled_set("review")}
        assert set(labels) == set(ids[:3])
        assert labels[ids[0]].harmful and labels[ids[0]].categories == ["Violence and Threats"]
        assert labels[ids[0]].reason == "a <b>note</b>"
        assert store.labelled_set_reviewers("review")[ids[0]] == "alice"
        last = store.last_review("review", "alice")
        assert last is not None and last.sample_id == ids[2] and last.at > 0
    page = client.get("/")
    assert "reviewed 3 / 7" in page.text
    undo = client.post("/undo", data={"csrf": csrf_of(page.text), "back": "/"}, follow_redirects=False)
    assert undo.status_code == 303 and undo.headers["location"] == f"/sample/{ids[2]}"  # back to the undone one
    with Store(store_copy) as store:
        assert {item.id for item in store.labelled_set("review")} == set(ids[:2])
    assert "reviewed 2 / 7" in client.get("/").text


def test_two_browsers_do_not_lose_each_others_labels(store_copy: Path, client_for: Any) -> None:
    a = client_for(_settings(store_copy))
    b = client_for(_settings(store_copy, reviewer="bob"))
    ids = sample_ids(a.get("/").text)
    page_a, page_b = a.get(f"/sample/{ids[0]}"), b.get(f"/sample/{ids[1]}")  # both forms open at once
    a.post(f"/sample/{ids[0]}/label", data={"csrf": csrf_of(page_a.text), "harmful": "yes"})
    b.post(f"/sample/{ids[1]}/label", data={"csrf": csrf_of(page_b.text), "harmful": "no"})
    with Store(store_copy) as store:
        assert {i.id: i.harmful for i in store.labelled_set("review")} == {ids[0]: True, ids[1]: False}


def test_k_reviewers_agreement_and_adjudication(store_copy: Path, client_for: Any) -> None:
    settings = _settings(store_copy, reviews_per_sample=2)
    alice = client_for(settings)
    bob = client_for(settings)
    page = bob.get("/settings")
    bob.post("/settings", data={"csrf": csrf_of(page.text), "reviewer": "bob", "level": "2", "colour": "1"})
    assert 'id="reviewer">bob<' in bob.get("/").text
    assert "level=2" in bob.get("/").text and "colour=1" in bob.get("/").text
    ids = sample_ids(alice.get("/").text)
    for client, decisions in ((alice, "yyn"), (bob, "yny")):
        for sid, d in zip(ids[:3], decisions, strict=True):
            _label(client, sid, "yes" if d == "y" else "no")
    with Store(store_copy) as store:
        assert {i.id for i in store.labelled_set("review")} == {ids[0]}  # only the sample both agree on
    report = alice.get("/agreement")
    assert 'id="kappa">' in report.text
    disputed = sample_ids(report.text)
    assert set(disputed) == {ids[1], ids[2]}
    assert alice.get("/?review=disputed").text.count('class="card') == 2
    r = _label(alice, ids[1], "no", query="?review=disputed", adjudicate="1")
    assert r.status_code == 303
    with Store(store_copy) as store:
        labels = {i.id: i.harmful for i in store.labelled_set("review")}
        assert labels == {ids[0]: True, ids[1]: False}
        assert store.labelled_set_reviewers("review")[ids[1]] == "adjudicator:alice"


def test_filters_and_keyset_pages(store_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(store_copy))
    with Store(store_copy) as store:
        configs = store.config_hashes()
    assert len(configs) == 2
    evil, demo = configs  # newest first: the second run's script calls the astronaut harmful
    harmful = sample_ids(client.get(f"/?config={evil}&decision=harmful").text)
    assert len(harmful) == 1
    assert sample_ids(client.get(f"/?config={demo}&decision=harmful").text) == []
    assert sample_ids(client.get(f"/?config={demo}&disagreement=configs").text) == harmful
    assert len(sample_ids(client.get("/?source=real").text)) == 6
    synthetic = sample_ids(client.get("/?source=synthetic&generator=vhd.examples").text)
    assert len(synthetic) == 1
    assert "vhd.examples" in client.get(f"/sample/{synthetic[0]}").text  # provenance on the sample page
    assert len(sample_ids(client.get("/?keyword=pet+cat").text)) == 1
    assert sample_ids(client.get("/?status=error").text) == []
    with Store(store_copy) as store:
        scored = [row for row in store.gallery_page(GalleryFilter(config_hash=demo)) if row.score is not None]
    assert len(sample_ids(client.get(f"/?config={demo}&score_min=0&score_max=1").text)) == len(scored) > 0
    assert sample_ids(client.get(f"/?config={demo}&score_min=0.99").text) == []
    bad = client.get("/?decision=maybe&sort=nope")
    assert bad.status_code == 200 and "ignored decision=" in bad.text and "ignored sort=" in bad.text
    _label(client, harmful[0], "yes")
    assert harmful[0] not in sample_ids(client.get("/?review=unreviewed").text)
    assert sample_ids(client.get("/?review=mine").text) == harmful
    assert sample_ids(client.get(f"/?config={demo}&disagreement=human").text) == harmful

    with Store(store_copy) as store:
        for sort in ("ingest", "path"):
            seen: list[str] = []
            after = None
            while True:
                page = store.gallery_page(GalleryFilter(config_hash=demo), sort=sort, after=after, limit=2)
                seen += [row.sample_id for row in page]
                if len(page) < 2:
                    break
                after = page[-1].sample_id
            assert len(seen) == len(set(seen)) == 7


def test_the_review_queue_gives_the_order(store_copy: Path, queue_file: Path, client_for: Any) -> None:
    client = client_for(_settings(store_copy, queue=queue_file))
    with queue_file.open(encoding="utf-8") as f:
        expected = [row["sample_id"] for row in csv.DictReader(f)]
    assert expected and sample_ids(client.get("/").text) == expected
    assert f"reviewed 0 / {len(expected)}" in client.get("/").text


def test_takedown_needs_confirmation(store_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(store_copy))
    sid = sample_ids(client.get("/").text)[0]
    page = client.get(f"/sample/{sid}/remove")
    assert page.status_code == 200
    token = csrf_of(page.text)
    refused = client.post(f"/sample/{sid}/remove", data={"csrf": token, "reason": "test"})
    assert refused.status_code == 400
    done = client.post(f"/sample/{sid}/remove", data={"csrf": token, "reason": "request #1", "confirm": "yes"})
    assert done.status_code == 200 and "removed" in done.text
    assert sid not in sample_ids(client.get("/").text)
    assert client.get(f"/sample/{sid}").status_code == 404
    assert client.get(f"/thumb/{sid}").status_code == 404
    from vhd.store.curation import removals

    with Store(store_copy) as store:
        assert [(r.sample_id, r.reason, r.requested_by) for r in removals(store)] == [(sid, "request #1", "alice")]


def test_export_is_a_labels_csv_vhd_label_reads(store_copy: Path, client_for: Any, tmp_path: Path) -> None:
    from vhd.labels.files import read_labels

    client = client_for(_settings(store_copy))
    ids = sample_ids(client.get("/").text)
    _label(client, ids[0], "yes", categories="Mental Health and Self-Harm")
    _label(client, ids[1], "no", note="=cmd|' /C calc'!A0")
    r = client.get("/export.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    out = tmp_path / "labels.csv"
    out.write_bytes(r.content)
    with Store(store_copy) as store:  # its paths lead outside the CSV's folder: the store vouches for them
        rows = {row.id: row for row in read_labels(out, store=store)}
    assert len(rows) == 2
    assert rows[ids[0]].harmful is True and rows[ids[0]].categories == ["Mental Health and Self-Harm"]
    assert rows[ids[1]].harmful is False and rows[ids[1]].reason == "=cmd|' /C calc'!A0"  # escaped in the file
    assert "'=cmd" in r.text


def test_model_text_is_escaped(store_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(store_copy))
    with Store(store_copy) as store:
        evil = store.config_hashes()[0]
    sid = sample_ids(client.get("/").text)[0]
    page = client.get(f"/sample/{sid}?config={evil}")
    assert "&lt;script&gt;document.title=" in page.text
    assert EVIL not in page.text and "<b>bold</b>" not in page.text


@pytest.mark.parametrize(
    "url",
    [
        "/thumb/..%2F..%2F..%2Fetc%2Fpasswd",
        "/thumb/../../etc/passwd",
        "/thumb/%2Fetc%2Fpasswd",
        "/thumb/" + "0" * 64,
        "/sample/..%2Frun.db",
        "/static/..%2F..%2Fsettings.py",
    ],
)
def test_media_only_by_sample_id(store_copy: Path, client_for: Any, url: str) -> None:
    client = client_for(_settings(store_copy))
    r = client.get(url)
    assert r.status_code == 404
    assert b"root:" not in r.content and b"import" not in r.content


def test_token_on_every_request(store_copy: Path, client_for: Any) -> None:
    token = "t0k3n-for-tests-0123456789"
    client = client_for(_settings(store_copy, host="0.0.0.0", token=token), base_url="http://203.0.113.5:8765")
    assert client.get("/", headers=HTML, follow_redirects=False).headers["location"] == "/login"
    assert client.get("/thumb/" + "a" * 64).status_code == 401
    assert client.get("/", headers={"authorization": "Bearer wrong-token-123456789"}).status_code == 401
    assert client.get("/export.csv", headers={"authorization": f"Bearer {token}"}).status_code == 200
    login = client.get("/login")
    assert login.status_code == 200 and "reviewed" not in login.text
    wrong = client.post("/login", data={"csrf": csrf_of(login.text), "token": "nope"})
    assert wrong.status_code == 401
    ok = client.post("/login", data={"csrf": csrf_of(login.text), "token": token}, follow_redirects=False)
    assert ok.status_code == 303 and token not in ok.headers["set-cookie"]
    assert len(sample_ids(client.get("/").text)) == 7  # the cookie now carries the login


def test_loopback_app_answers_only_loopback_host_names(store_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(store_copy), base_url="http://evil.example:8765")
    assert client.get("/").status_code == 421


def test_cross_site_writes_are_refused(store_copy: Path, client_for: Any) -> None:
    client = client_for(_settings(store_copy))
    sid = sample_ids(client.get("/").text)[0]
    token = csrf_of(client.get(f"/sample/{sid}").text)
    url = f"/sample/{sid}/label"
    assert client.post(url, data={"harmful": "yes"}).status_code == 403  # no CSRF field
    assert client.post(url, data={"csrf": "x" * 32, "harmful": "yes"}).status_code == 403
    foreign = {"origin": "http://evil.example"}
    assert client.post(url, data={"csrf": token, "harmful": "yes"}, headers=foreign).status_code == 403
    site = {"sec-fetch-site": "cross-site"}
    assert client.post(url, data={"csrf": token, "harmful": "yes"}, headers=site).status_code == 403
    assert client.post("/undo", data={"back": "/"}).status_code == 403
    with Store(store_copy) as store:
        assert "review" not in store.labelled_sets()
    good = client.post(url, data={"csrf": token, "harmful": "yes"}, headers={"origin": "http://127.0.0.1"})
    assert good.status_code == 200  # followed to the next sample
    back = client.post("/undo", data={"csrf": token, "back": "//evil.example/?x=1"}, follow_redirects=False)
    assert back.headers["location"] == f"/sample/{sid}"  # the undone sample, nothing taken from a foreign back
    back = client.post("/undo", data={"csrf": token, "back": "//evil.example/"}, follow_redirects=False)
    assert back.headers["location"] == "/"  # nothing left to undo: no open redirect


def test_detector_disagreement_comes_from_the_queue(store_copy: Path, tmp_path: Path, client_for: Any) -> None:
    base = client_for(_settings(store_copy))
    ids = sample_ids(base.get("/").text)
    queue = tmp_path / "queue.csv"
    rows = [
        "rank,sample_id,judge,votes",
        f"2,{ids[0]},no,judge=no; detector:nudenet=yes",
        f"1,{ids[1]},no,judge=no; detector:nudenet=no",
        "3,not-a-sha,no,judge=no",
        f"4,{ids[2]},yes,judge=yes; config:abc=no",
    ]
    queue.write_text("\n".join(rows) + "\n", encoding="utf-8")
    client = client_for(_settings(store_copy, queue=queue))
    assert sample_ids(client.get("/").text) == [ids[1], ids[0], ids[2]]  # the queue's order
    assert sample_ids(client.get("/?disagreement=detector").text) == [ids[0]]
    assert "reviewed 0 / 3" in client.get("/").text
