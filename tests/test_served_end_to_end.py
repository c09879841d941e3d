"""Whole commands against a real OpenAI-compatible server: `transformers serve` with a tiny LLaVA.

This is the path a user with a local endpoint (vLLM, Ollama, `transformers serve`) takes:
config file, SDK, HTTP, base64 images, the server's chat template and generation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

import vhd
from tests.servers.transformers_serve import Served
from vhd.records import Status
from vhd.store import Store

pytestmark = pytest.mark.slow


@pytest.fixture
def served(served_llava: Served, monkeypatch: pytest.MonkeyPatch) -> Served:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    return served_llava


def config(tmp_path: Path, served: Served) -> Path:
    path = tmp_path / "vhd.toml"
    path.write_text(
        f'[backends.openai]\nbase_url = "{served.base_url}"\nmax_retries = 1\n'
        "[debate]\ndebater_max_tokens = 8\njudge_max_tokens = 6\n"
    )
    return path


def images(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = folder / f"p{i}.jpg"
        Image.new("RGB", (48, 40), (40 * i, 90, 255 - 40 * i)).save(p, quality=90)
        out.append(p)
    return out


def test_annotate_through_transformers_serve(tmp_path: Path, served: Served) -> None:
    images(tmp_path / "m", 2)
    spec, cfg = f"openai:{served.model}", config(tmp_path, served)
    summary = vhd.annotate([tmp_path / "m"], model=spec, store=tmp_path / "s.db", config=cfg)
    assert summary.errors == 0 and summary.annotated == 2 and summary.usage.calls == 10
    with Store(tmp_path / "s.db") as db:
        for _, ann in db.iter_annotations():
            # a random model's judge rarely says yes or no: whatever it says is stored, never guessed
            assert ann.verdict.status in (Status.OK, Status.UNPARSED, Status.REFUSED, Status.TRUNCATED)
            assert len(ann.turns) == 5 and all(t.prompt_tokens > 16 for t in ann.turns)
    again = vhd.annotate([tmp_path / "m"], model=spec, store=tmp_path / "s.db", config=cfg)
    assert again.already_done == 2 and again.usage.calls == 0


def test_icl_search_through_transformers_serve(tmp_path: Path, served: Served) -> None:
    from vhd.icl.search import search_icl

    paths = images(tmp_path / "v", 4)
    labels = tmp_path / "labels.csv"
    rows = [f"v/{p.name},{'yes,shown violence' if i % 2 else 'no,plain colours'}" for i, p in enumerate(paths)]
    labels.write_text("path,harmful,reason\n" + "\n".join(rows) + "\n")
    result = search_icl(
        labels,
        out=tmp_path / "icl",
        model=f"openai:{served.model}",
        config=config(tmp_path, served),
        max_rounds=1,
        per_round=2,
        holdout=0.0,
    )
    assert result.rounds and result.rounds[0].examples == []  # round 0 has no examples
    assert (tmp_path / "icl" / "report.md").is_file()
    assert result.best_examples is not None and (result.best_examples / "examples.csv").is_file()
    assert result.calls > 0
