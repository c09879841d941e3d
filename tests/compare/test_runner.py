"""`vhd compare` against the scripted backend: numbers checked by hand on four samples.

The scripted backend counts tokens as words: a prompt is the words of every message plus 85 per
image, a completion the words of the reply. Single calls carry the tag ``compare:<config>``, so a
rule per configuration and image fixes every answer.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from vhd.cli.main import main
from vhd.compare.runner import compare, parse_int_list
from vhd.compare.single import vote
from vhd.config import AnnotateConfig
from vhd.detectors.vlm_prompts import render_prompt
from vhd.records import Kind
from vhd.store.sqlite import Store
from vhd.taxonomy.taxonomy import load_taxonomy

NAMES = ["h0", "h1", "u0", "u1"]
# a message's text parts are joined without a space: "The image:" + the question
SHORT = len(("The image:" + render_prompt("short", Kind.IMAGE, 1, load_taxonomy(None))).split()) + 85
LONG = len(("The image:" + render_prompt("long", Kind.IMAGE, 1, load_taxonomy(None))).split()) + 85


def _draw(path: Path, i: int) -> None:
    im = Image.new("RGB", (40, 40), ((i * 61) % 256, (i * 97) % 256, (i * 13) % 256))
    ImageDraw.Draw(im).ellipse((i, i, i + 14, i + 9), fill=(250, 240 - i * 20, 10))
    im.save(path)


def make_labels(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(NAMES):
        _draw(folder / f"{name}.png", i)
    labels = folder / "labels.csv"
    with labels.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "harmful"])
        w.writerows([f"{n}.png", "yes" if n[0] == "h" else "no"] for n in NAMES)
    return labels


def make_icl(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    _draw(folder / "ex.png", 9)
    (folder / "examples.csv").write_text('path,answer\nex.png,"No, a calm scene."\n')
    return folder


def sha_of(path: Path, cfg: AnnotateConfig) -> str:
    from vhd.media.discover import discover
    from vhd.media.load import load_sample, media_settings

    return load_sample(discover([path]).items[0], media_settings(cfg.media)).images[0].sha256[:16]


def config_for(folder: Path) -> AnnotateConfig:
    """single-short: "Yes." everywhere; single-long: right but u1 unreadable; everything else right."""
    base = AnnotateConfig(debate={"rounds": 1}, prices={"scripted:x": {"input": 1.0, "output": 2.0}})
    rules: list[dict[str, Any]] = [{"when": {"tag": "compare:single-short"}, "reply": "Yes."}]
    for name in NAMES:
        sha = sha_of(folder / f"{name}.png", base)
        right = "Yes, harm shown." if name[0] == "h" else "No, calm."
        long_reply = "Maybe so." if name == "u1" else right
        rules += [
            {"when": {"tag": "compare:single-long", "image": sha}, "reply": long_reply},
            {"when": {"tag": "judge", "image": sha}, "reply": right},
            {"when": {"text": "Answer yes or no", "image": sha, "images": 2}, "reply": right},  # icl: example + sample
            {"when": {"tag": "compare:sc-k3", "image": sha}, "reply": right},
            {"when": {"tag": "compare:sc-k1", "image": sha}, "reply": right},
        ]
    script = {"default": "1. A point.", "rules": rules}
    return base.model_copy(update={"backends": {"scripted": {"script": script}}, "concurrency": 2})


def by_name(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


def test_vote_majority_ties_and_unreadable() -> None:
    assert vote([True, False, True]) == (True, 2 / 3)
    assert vote([False, False, True]) == (False, 1 / 3)
    assert vote([True, False]) == (True, 0.5)  # a tie goes to harmful
    assert vote([None, False, None]) == (False, 0.0)
    assert vote([None, None]) == (None, 0.0)
    assert vote([]) == (None, None)


def test_compare_numbers_by_hand(tmp_path: Path) -> None:
    labels = make_labels(tmp_path / "data")
    icl = make_icl(tmp_path / "icl")
    cfg = config_for(tmp_path / "data")
    out = tmp_path / "out"
    events: list[str] = []
    kwargs: dict[str, Any] = {"out": out, "model": "scripted:x", "config": cfg, "icl": icl, "resamples": 200}
    res = compare(labels, k="1,3", rounds="1", repeats=2, judge="scripted:y", on_event=events.append, **kwargs)
    c = by_name(res)
    assert list(c) == [
        "single-short",
        "single-long",
        "single-long-icl",
        "sc-k1",
        "sc-k3",
        "debate-r1",
        "debate-mixed-r1",
    ]
    # single-short: "Yes." for all: 2 of 4 right; prompt = "The image:" + question + 85 per image; reply 1 word
    short = c["single-short"]
    assert short.metrics["accuracy"].value == 0.5 and short.metrics["tpr"].value == 1.0
    assert short.metrics["tnr"].value == 0.0 and short.metrics["kappa"].value == 0.0
    assert short.tokens_per_sample == SHORT + 1
    assert short.cost_per_sample == pytest.approx((SHORT * 1.0 + 1 * 2.0) / 1e6)
    assert short.run_kappa is None and short.run_agreement == 1.0  # constant answers: kappa undefined
    # single-long: u1 unreadable counts as wrong and is counted (in each of the two repeats)
    long = c["single-long"]
    assert long.metrics["accuracy"].value == 0.75 and long.unparsed == 2 and long.errors == 0
    assert (long.answered, long.asked) == (6, 8) and long.metrics["coverage"].value == 0.75
    assert long.metrics["f1"].value == pytest.approx(2 * 2 / (2 * 2 + 1))  # u1 read as a false positive
    assert long.tokens_per_sample == pytest.approx(LONG + (3 * 2 + 2 + 2) / 4)
    assert long.run_kappa == 1.0  # deterministic: repeats agree wherever both answered
    # the same examples as the debate, as a user/assistant turn before the question
    with_icl = c["single-long-icl"]
    assert with_icl.metrics["accuracy"].value == 1.0
    assert with_icl.tokens_per_sample == pytest.approx(2 * LONG + 4 + (3 * 2 + 2 * 2) / 4)
    # self-consistency: k calls of the long prompt, tokens k times one call, score = share of yes votes
    k1, k3 = c["sc-k1"], c["sc-k3"]
    assert k3.tokens_per_sample == 3 * k1.tokens_per_sample and k3.calls_per_sample == 3
    assert k3.metrics["accuracy"].value == 1.0 and k3.run_kappa == 1.0
    assert [o.score for o in k3.runs[0]] == [1.0, 1.0, 0.0, 0.0]
    # the debate's tokens are what the store holds per sample; repeats are distinct configurations
    deb = c["debate-r1"]
    assert deb.metrics["accuracy"].value == 1.0 and deb.run_kappa == 1.0 and deb.calls_per_sample == 3
    hashes = deb.params["config_hashes"]
    assert len(set(hashes)) == 2
    with Store(out / "compare.db") as db:
        stored = [
            sum(t.prompt_tokens + t.completion_tokens for t in a.turns) for _, a in db.iter_annotations(hashes[0])
        ]
        assert len(stored) == 4 and set(db.config_hashes()) >= set(hashes)
    assert deb.tokens_per_sample == pytest.approx(sum(stored) / 4)
    assert (
        c["debate-mixed-r1"].params["judge"] == "scripted:y" and c["debate-mixed-r1"].params["negative"] == "scripted:x"
    )
    # budget matching: the debate is paired with the closest self-consistency
    closest = min((k1, k3), key=lambda x: abs(x.tokens_per_sample - deb.tokens_per_sample))
    assert res.matched[0]["debate"] == "debate-r1" and res.matched[0]["sc"] == closest.name
    # the files
    rows = list(csv.DictReader((out / "compare.csv").open()))
    assert [r["config"] for r in rows] == list(c) and rows[1]["accuracy"] == "0.75" and rows[1]["unparsed"] == "2"
    data = json.loads((out / "compare.json").read_text())
    assert data["configs"][0]["outcomes"][0][res.items[0].id]["prompt_tokens"] == SHORT
    md = (out / "compare.md").read_text()
    assert "| single-long | 4 | 6/8 | 0.750 [" in md and "## Matched token budgets" in md
    assert (out / "compare.png").stat().st_size > 1000
    # run again: everything comes from the cache and the store
    events.clear()
    again = compare(labels, k="1,3", rounds="1", repeats=2, judge="scripted:y", on_event=events.append, **kwargs)
    assert not any("to ask" in e for e in events)
    assert all(e.endswith("0 annotated, 4 already done") for e in events)
    assert [x.to_dict() for x in again.configs] == [x.to_dict() for x in res.configs]


def test_parse_int_list() -> None:
    assert parse_int_list("1, 3,5,3", "--k") == [1, 3, 5]
    for bad in ("", "0", "a,b", "2,-1"):
        with pytest.raises(Exception, match="--k"):
            parse_int_list(bad, "--k")


def test_cli_compare_writes_files_and_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = make_labels(tmp_path / "data")
    cfg = config_for(tmp_path / "data")
    cfg_file = tmp_path / "vhd.yaml"
    cfg_file.write_text(json.dumps(cfg.model_dump(exclude_none=True)))
    out = tmp_path / "out"
    argv = ["compare", "--labels", str(labels), "--model", "scripted:x", "--config", str(cfg_file)]
    code = main([*argv, "--k", "1", "--rounds", "1", "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "single-long" in captured.out and "matched: debate-r1" in captured.out
    assert "single-long-icl left out" in captured.err
    for name in ("compare.md", "compare.csv", "compare.json", "compare.png"):
        assert (out / name).is_file()
    assert len(list(csv.DictReader((out / "compare.csv").open()))) == 4
    for bad in (["--k", "0"], ["--repeats", "0"], ["--rounds", "x"]):
        assert main([*argv, *bad, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("vhd: error:")
    assert main(["compare", "--labels", str(tmp_path / "none.csv"), "--model", "scripted:x", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not found" in err


def test_failed_calls_count_as_errors_and_are_retried(tmp_path: Path) -> None:
    labels = make_labels(tmp_path / "data")
    cfg = config_for(tmp_path / "data")
    script = cfg.backends["scripted"]["script"]
    h0 = {"tag": "compare:single-short", "image": sha_of(tmp_path / "data" / "h0.png", cfg)}

    def with_rule(rule: dict[str, Any]) -> AnnotateConfig:
        rules = [rule, *script["rules"]]
        return cfg.model_copy(update={"backends": {"scripted": {"script": {**script, "rules": rules}}}})

    events: list[str] = []
    kwargs: dict[str, Any] = {"out": tmp_path / "out", "model": "scripted:x", "k": "1", "rounds": "1", "resamples": 0}
    first = compare(labels, config=with_rule({"when": h0, "fail": 1, "reply": "Yes."}), **kwargs)
    short = by_name(first)["single-short"]
    assert short.errors == 1 and first.exit_code() == 1
    assert short.metrics["accuracy"].value == 0.25  # the failed harmful sample counts as wrong
    # the same rule without the failure: same configuration, only the failed answer is asked again
    again = compare(labels, config=with_rule({"when": h0, "reply": "Yes."}), on_event=events.append, **kwargs)
    assert "single-short: 1 answer(s) to ask (3 cached)" in events
    assert again.exit_code() == 0 and by_name(again)["single-short"].metrics["accuracy"].value == 0.5
