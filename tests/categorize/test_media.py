"""The llm method with the sample shown to the model (``with_media``), on scripted and tiny real models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

import vhd
from vhd.categorize import categorize
from vhd.errors import ConfigError
from vhd.store import Store
from vhd.store.categories import Categorization, load_categorizations

JUDGE_SAYS_YES = {"rules": [{"when": {"tag": "judge"}, "reply": "Yes, violence."}], "default": "1. An argument."}


def llm_results(db: Path) -> list[Categorization]:
    with Store(db) as store:
        return [c for cats in load_categorizations(store, method="llm").values() for c in cats]


def annotated_store(tmp_path: Path, n: int = 2) -> Path:
    media = tmp_path / "media"
    media.mkdir()
    for i in range(n):
        Image.new("RGB", (40, 40), (60 * i, 20, 200)).save(media / f"p{i}.png")
    script = tmp_path / "debate.json"
    script.write_text(json.dumps(JUDGE_SAYS_YES))
    db = tmp_path / "run.db"
    summary = vhd.annotate([media], model=f"scripted:{script}", store=db)
    assert summary.harmful == n
    return db


def test_with_media_shows_the_image_and_records_it(tmp_path: Path) -> None:
    db = annotated_store(tmp_path)
    rules = {"rules": [{"when": {"tag": "categorize", "images": 1}, "reply": "A"}], "default": "no idea"}
    script = tmp_path / "cat.json"
    script.write_text(json.dumps(rules))
    text_only = categorize(db, method="llm", model=f"scripted:{script}")
    assert text_only.unparsed == 2  # without the image the rule does not match
    shown = categorize(db, method="llm", model=f"scripted:{script}", with_media=True, redo=True)
    assert shown.categorized == 2 and shown.counts == {"Violence and Threats": 2}
    assert {c.params["media"] for c in llm_results(db)} == {"shown"}
    # a file that changed since it was annotated is not shown (asked about in text only)
    Image.new("RGB", (40, 40), (1, 2, 3)).save(tmp_path / "media" / "p0.png")
    again = categorize(db, method="llm", model=f"scripted:{script}", with_media=True, redo=True)
    assert again.categorized == 1 and again.unparsed == 1
    notes = sorted(c.params["media"] for c in llm_results(db))
    assert notes[0].startswith("not shown:") and "changed" in notes[0] and notes[1] == "shown"


def test_with_media_needs_the_llm_method(tmp_path: Path) -> None:
    db = annotated_store(tmp_path, 1)
    with pytest.raises(ConfigError, match="--with-media needs --method llm"):
        categorize(db, method="embed", with_media=True)


@pytest.mark.slow
def test_llm_method_on_a_tiny_real_model_is_recorded_and_resumable(tmp_path: Path, tiny_llava_dir: Path) -> None:
    db = annotated_store(tmp_path)
    first = categorize(db, method="llm", model=f"hf:{tiny_llava_dir}", with_media=True)
    # a random-weight model answers noise: every annotation gets a stored result, ok or unparsed
    assert first.errors == 0 and first.categorized + first.unparsed == 2
    cats = llm_results(db)
    assert len(cats) == 2 and all(c.model == f"hf:{tiny_llava_dir}" and c.params["media"] == "shown" for c in cats)
    assert all(c.completion_tokens > 0 for c in cats)
    second = categorize(db, method="llm", model=f"hf:{tiny_llava_dir}", with_media=True)
    assert second.already_done == 2 and second.categorized + second.unparsed == 0
