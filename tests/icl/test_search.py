"""`vhd icl`: the in-context example search against scripted judges with known error patterns.

The scripted debaters name the sample they argue about (``SAMPLE_<name>``), so a judge rule can
tell the sample under judgement from the example images in its prefix, and a second phrase (an
example's expected answer, taken from the human reason) can flip its answer.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

import vhd
from vhd.cli.main import main
from vhd.config import AnnotateConfig
from vhd.icl.search import pick_mistakes, search_icl, split_holdout
from vhd.labels.sets import LabelledItem
from vhd.records import Kind, Verdict
from vhd.store.sqlite import Store

NAMES = [f"h{i}" for i in range(6)] + [f"u{i}" for i in range(6)]


def _lp(p_yes: float) -> dict[str, float]:
    return {"Yes": math.log(p_yes), "No": math.log(1 - p_yes)}


def make_validation(folder: Path, reasons: dict[str, str]) -> Path:
    """Twelve distinct drawn images and a labels CSV (h* harmful, u* unharmful)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, name in enumerate(NAMES):
        im = Image.new("RGB", (40, 40), ((i * 41) % 256, (i * 83) % 256, (i * 29) % 256))
        ImageDraw.Draw(im).rectangle((i, i, i + 10, i + 12), fill=(255, 255 - i * 9, 0))
        im.save(folder / f"{name}.png")
        rows.append(
            {"path": f"{name}.png", "harmful": "yes" if name[0] == "h" else "no", "reason": reasons.get(name, "")}
        )
    labels = folder / "labels.csv"
    with labels.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["path", "harmful", "reason"])
        writer.writeheader()
        writer.writerows(rows)
    return labels


def script(wrong: dict[str, float], fixes: dict[str, str]) -> dict[str, Any]:
    """Judge answers right except for ``wrong`` (name -> P(yes) of the wrong answer), unless the
    phrase ``fixes[name]`` appears in the conversation (an example's answer)."""
    judge: list[dict[str, Any]] = []
    for name in NAMES:
        harmful = name[0] == "h"
        right = {
            "reply": "Yes, harm shown." if harmful else "No, a calm scene.",
            "logprobs": _lp(0.9 if harmful else 0.1),
        }
        token = rf"\bSAMPLE_{name}\b"
        if name in fixes:
            judge.append({"when": {"tag": "judge", "text": rf"(?s)(?=.*{fixes[name]})(?=.*{token})"}, **right})
        if name in wrong:
            bad = "No, looks fine." if harmful else "Yes, looks risky."
            judge.append({"when": {"tag": "judge", "text": token}, "reply": bad, "logprobs": _lp(wrong[name])})
        judge.append({"when": {"tag": "judge", "text": token}, **right})
    return {"default": "1. Nothing to add.", "rules": judge}


def config_for(labels: Path, wrong: dict[str, float], fixes: dict[str, str]) -> AnnotateConfig:
    """Debaters name the sample (by its encoded image hash) so the judge rule can find it."""
    from vhd.media.discover import discover
    from vhd.media.load import load_sample, media_settings

    base = AnnotateConfig(debate={"rounds": 1})
    settings = media_settings(base.media)
    s = script(wrong, fixes)
    debaters = []
    for name in NAMES:
        item = discover([labels.parent / f"{name}.png"]).items[0]
        sha = load_sample(item, settings).images[0].sha256
        for tag in ("affirmative", "negative"):
            debaters.append({"when": {"tag": tag, "image": sha[:16]}, "reply": f"1. About SAMPLE_{name} only."})
    s["rules"] = debaters + s["rules"]
    return base.model_copy(update={"backends": {"scripted": {"script": s}}, "concurrency": 4})


def ids_by_name(store: Path) -> dict[str, str]:
    with Store(store) as db:
        return {Path(s.path).stem: s.id for s, _ in db.iter_annotations()}


def test_search_finds_the_examples_that_fix_the_errors(tmp_path: Path) -> None:
    labels = make_validation(tmp_path / "val", {"h0": "cue alpha", "u0": "cue beta", "h1": "plain look"})
    # h1 is a less confident miss than h0; u1 a less confident false alarm than u0
    wrong = {"h0": 0.02, "h1": 0.3, "h2": 0.35, "u0": 0.98, "u1": 0.7}
    cfg = config_for(labels, wrong, {"h1": "cue alpha", "h2": "cue alpha", "u1": "cue beta"})
    out = tmp_path / "out"
    res = search_icl(labels, out=out, model="scripted:x", config=cfg, max_rounds=4, per_round=2, holdout=0, seed=1)
    assert [r.round for r in res.rounds] == [0, 1]
    assert res.stopped == "no_mistakes" and res.best_round == 1 and res.exit_code() == 0
    ids = ids_by_name(out / "icl.db")
    best = res.rounds[1]
    assert [e["sample_id"] for e in best.examples] == [ids["h0"], ids["u0"]]  # FN first, most confident
    assert [e["answer"] for e in best.examples] == ["Yes, cue alpha.", "No, cue beta."]
    assert best.scored.metrics["f1"] == 1.0 and best.scored.n == 10
    assert res.baseline is not None and res.baseline.confusion == {"tp": 3, "fp": 1, "tn": 4, "fn": 2}
    # the best set is an examples folder that `vhd annotate --icl` reads, with its media
    rows = list(csv.DictReader((out / "best" / "examples.csv").open()))
    assert [r["answer"] for r in rows] == ["Yes, cue alpha.", "No, cue beta."]
    assert all((out / "best" / r["path"]).is_file() for r in rows)
    again = vhd.annotate(
        [labels.parent / "h1.png", labels.parent / "u1.png"],
        config=cfg,
        model="scripted:x",
        store=tmp_path / "check.db",
        icl=out / "best",
    )
    with Store(tmp_path / "check.db") as db:
        assert sorted(a.verdict.harmful for _, a in db.iter_annotations(run_id=again.run_id)) == [False, True]
    saved = json.loads((out / "search.json").read_text())
    assert saved["best_round"] == 1 and saved["rounds"][0]["scored"]["confusion"]["fn"] == 3
    report = (out / "report.md").read_text()
    assert "| none |" in report and "| 2 (round 1) | 100.0 | 100.0 | 100.0 |" in report
    # running it again resumes from the store: same path, no model calls
    rerun = search_icl(labels, out=out, model="scripted:x", config=cfg, max_rounds=4, per_round=2, holdout=0, seed=1)
    assert rerun.calls == 0 and [r.to_dict() for r in rerun.rounds] == [r.to_dict() for r in res.rounds]


def test_search_rejects_useless_sets_and_stops_on_patience(tmp_path: Path) -> None:
    labels = make_validation(tmp_path / "val", {})
    cfg = config_for(labels, {"h0": 0.1, "h1": 0.2, "h2": 0.3, "u0": 0.9, "u1": 0.8}, {})
    out = tmp_path / "out"
    res = search_icl(labels, out=out, model="scripted:x", config=cfg, max_rounds=5, per_round=2, patience=2, holdout=0)
    assert res.stopped == "patience" and [r.round for r in res.rounds] == [0, 1, 2]
    assert res.best_round == 0 and not any(r.accepted for r in res.rounds[1:])
    ids = ids_by_name(out / "icl.db")
    # round 2 builds on the best set (none) with the next mistakes, never retrying rejected ones
    assert res.rounds[1].added == [ids["h0"], ids["u0"]] and res.rounds[2].added == [ids["h1"], ids["u1"]]
    assert res.rounds[1].examples[0]["answer"] == "Yes, the content is harmful."  # template without a reason
    assert list(csv.DictReader((out / "best" / "examples.csv").open())) == []
    assert "No example set beat annotating without examples." in (out / "report.md").read_text()


def test_budget_stops_cleanly_and_resumes(tmp_path: Path) -> None:
    labels = make_validation(tmp_path / "val", {"h0": "cue alpha", "u0": "cue beta"})
    cfg = config_for(labels, {"h0": 0.02, "u0": 0.98, "h1": 0.3}, {"h1": "cue alpha"})
    out = tmp_path / "out"
    first = search_icl(labels, out=out, model="scripted:x", config=cfg, per_round=2, holdout=0, max_calls=30)
    assert first.stopped == "budget" and first.exit_code() == 1 and first.calls == 0 and first.rounds == []
    second = search_icl(labels, out=out, model="scripted:x", config=cfg, per_round=2, holdout=0, max_calls=40)
    assert second.stopped == "budget" and [r.round for r in second.rounds] == [0] and second.calls == 36
    third = search_icl(labels, out=out, model="scripted:x", config=cfg, per_round=2, holdout=0)
    assert third.calls == 30 and third.best_round == 1 and third.stopped == "no_mistakes"


def test_holdout_split_is_stratified_deterministic_and_untouched(tmp_path: Path) -> None:
    items = [
        LabelledItem(id=f"{i:064x}", path=Path(f"/m/{i}.png"), kind=Kind.IMAGE, harmful=i % 3 == 0) for i in range(30)
    ]
    search, held = split_holdout(items, 0.2, seed=7)
    assert (sum(i.harmful for i in held), len(held)) == (2, 6)
    assert split_holdout(items, 0.2, seed=7) == (search, held) and split_holdout(items, 0.2, seed=8) != (search, held)
    assert not {i.id for i in search} & {i.id for i in held}
    labels = make_validation(tmp_path / "val", {})
    cfg = config_for(labels, {"h0": 0.1, "u0": 0.9}, {})
    out = tmp_path / "out"
    res = search_icl(labels, out=out, model="scripted:x", config=cfg, max_rounds=1, per_round=2, holdout=0.34, seed=3)
    held_ids = {
        i.id
        for i in split_holdout(
            [
                LabelledItem(id=e, path=Path(), kind=Kind.IMAGE, harmful=n[0] == "h")
                for n, e in ids_by_name(out / "icl.db").items()
            ],
            0.34,
            3,
        )[1]
    }
    assert len(held_ids) == 4 and set(res.holdout) == {"without", "with"} and res.holdout["with"].n == 4
    assert not held_ids & {e["sample_id"] for r in res.rounds for e in r.examples}
    assert "Held-out samples" in (out / "report.md").read_text()


def test_pick_mistakes_alternates_and_orders_by_confidence() -> None:
    items = [
        LabelledItem(id=f"{n}", path=Path(), kind=Kind.IMAGE, harmful=n.startswith("h"))
        for n in ("h1", "h2", "h3", "u1", "u2")
    ]
    preds = {
        "h1": Verdict(False, "", score=0.4),
        "h2": Verdict(False, "", score=0.1),
        "h3": Verdict(None, "", score=None),
        "u1": Verdict(True, "", score=0.6),
        "u2": Verdict(False, "", score=0.2),
    }
    assert [i.id for i in pick_mistakes(items, preds, set(), 4, 0, 1)] == ["h2", "u1", "h1", "h3"]
    assert [i.id for i in pick_mistakes(items, preds, {"h2"}, 2, 0, 1)] == ["h1", "u1"]


def test_cli_icl_and_bad_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = make_validation(tmp_path / "val", {"h0": "cue alpha"})
    cfg = config_for(labels, {"h0": 0.02, "h1": 0.3, "h2": 0.3, "u0": 0.9}, {"h1": "cue alpha", "h2": "cue alpha"})
    cfg_file = tmp_path / "vhd.json"
    cfg_file.write_text(json.dumps(cfg.model_dump(exclude_none=True)))
    cfg_yaml = tmp_path / "vhd.yaml"
    cfg_yaml.write_text(cfg_file.read_text())  # JSON is YAML
    args = [
        "icl",
        "--validation",
        str(labels),
        "--model",
        "scripted:x",
        "--out",
        str(tmp_path / "o"),
        "--config",
        str(cfg_yaml),
        "--holdout",
        "0",
        "--per-round",
        "2",
        "--no-progress",
    ]
    assert main(args) == 0
    assert "best: round 1" in capsys.readouterr().out
    assert (tmp_path / "o" / "report.md").is_file()
    assert main([*args[:-3], "--per-round", "5"]) == 2
    assert "--per-round 5" in capsys.readouterr().err


@pytest.mark.slow
def test_search_end_to_end_on_a_tiny_random_vlm(tmp_path: Path, tiny_llava_dir: Path) -> None:
    """The whole loop through the real `hf` backend (random weights: verdicts are noise, often unreadable)."""
    labels = make_validation(tmp_path / "val", {"h0": "cue alpha"})
    cfg = AnnotateConfig(
        debate={"rounds": 1, "debater_max_tokens": 8, "judge_max_tokens": 6},
        media={"max_side": 32},
        backends={"hf": {"generate_kwargs": {"min_new_tokens": 2}}},
        concurrency=4,
    )
    out = tmp_path / "out"
    res = search_icl(
        labels, out=out, model=f"hf:{tiny_llava_dir}", config=cfg, max_rounds=1, per_round=2, holdout=0.25, seed=0
    )
    assert res.rounds[0].scored.n == 8 and len(res.rounds) == 2 and res.calls > 0
    assert len(res.rounds[1].examples) == 2 and res.rounds[1].scored.n == 6
    assert set(res.holdout) == {"without", "with"} and res.holdout["with"].n == 4
    assert (out / "best" / "examples.csv").is_file() and (out / "report.md").is_file()
    assert json.loads((out / "search.json").read_text())["rounds"][1]["round"] == 1
