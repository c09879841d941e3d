"""``--max-cost`` never runs unpriced, and an unknown cost is shown as unknown, never as $0."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images
from tests.compare.test_runner import config_for, make_labels
from vhd.annotate.options import RunOptions
from vhd.cli.main import main
from vhd.compare.runner import compare
from vhd.errors import ConfigError


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("vhd: error: ")
    return lines[0]


def test_annotate_max_cost_without_prices_refuses_to_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_images(tmp_path / "m", 2)
    db = tmp_path / "s.db"
    code = main(["annotate", str(tmp_path / "m"), "--model", "scripted:demo", "--store", str(db), "--max-cost", "1"])
    assert code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--max-cost" in line and '[prices."scripted:demo"]' in line and "--config" in line
    assert not db.exists()  # nothing ran


def test_max_cost_needs_a_price_for_every_role(tmp_path: Path) -> None:
    make_images(tmp_path / "m", 1)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[prices."scripted:demo"]\ninput = 1.0\noutput = 1.0\n')
    with pytest.raises(ConfigError, match=r'prices\."scripted:other"'):
        vhd.annotate(
            [tmp_path / "m"],
            model="scripted:demo",
            judge="scripted:other",
            config=cfg,
            store=tmp_path / "a.db",
            options=RunOptions(max_cost=1.0),
        )
    assert not (tmp_path / "a.db").exists()
    # priced for every role: it runs
    s = vhd.annotate(
        [tmp_path / "m"], model="scripted:demo", config=cfg, store=tmp_path / "b.db", options=RunOptions(max_cost=1.0)
    )
    assert s.annotated == 1


@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf])
def test_max_cost_must_be_a_finite_amount(tmp_path: Path, value: float) -> None:
    make_images(tmp_path / "m", 1)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[prices."scripted:demo"]\ninput = 1.0\noutput = 1.0\n')
    with pytest.raises(ConfigError, match="--max-cost"):
        vhd.annotate(
            [tmp_path / "m"],
            model="scripted:demo",
            config=cfg,
            store=tmp_path / "a.db",
            options=RunOptions(max_cost=value),
        )
    assert not (tmp_path / "a.db").exists()


def test_icl_max_cost_without_prices_refuses_to_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = make_labels(tmp_path / "data")
    out = tmp_path / "o"
    argv = ["icl", "--validation", str(labels), "--model", "scripted:demo", "--out", str(out), "--max-cost", "2"]
    assert main([*argv, "--no-progress"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--max-cost" in line and "[prices" in line
    assert not out.exists()  # nothing ran, not even the labels import


def test_align_max_cost_without_prices_refuses_to_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_images(tmp_path / "m", 2)
    ratings = tmp_path / "r.csv"
    ratings.write_text("img_name,moral_mean\nimg_000,1.0\nimg_001,4.0\n")
    db = tmp_path / "s.db"
    argv = ["align", "--ratings", str(ratings), "--media", str(tmp_path / "m"), "--model", "scripted:demo"]
    assert main([*argv, "--store", str(db), "--max-cost", "1", "--no-progress"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--max-cost" in line and "[prices" in line
    assert not db.exists()


def test_compare_shows_unknown_cost_without_prices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = make_labels(tmp_path / "data")
    priced = config_for(tmp_path / "data")
    unpriced = priced.model_copy(update={"prices": {}})
    out = tmp_path / "out"
    res = compare(labels, out=out, model="scripted:x", config=unpriced, k="1", rounds="1", resamples=0)
    assert all(c.cost_per_sample is None for c in res.configs)
    md = (out / "compare.md").read_text()
    assert "$0.000000" not in md and "| unknown |" in md
    data = json.loads((out / "compare.json").read_text())
    assert all(c["cost_per_sample"] is None for c in data["configs"])
    assert "cost_per_sample" in (out / "compare.csv").read_text().splitlines()[0]
    # priced: a number
    res2 = compare(labels, out=tmp_path / "out2", model="scripted:x", config=priced, k="1", rounds="1", resamples=0)
    assert all(c.cost_per_sample is not None and c.cost_per_sample > 0 for c in res2.configs)
    # the CLI prints "unknown" too
    cfg_file = tmp_path / "c.yaml"  # JSON is YAML
    cfg_file.write_text(json.dumps(unpriced.model_dump(exclude_none=True)))
    argv = [
        "compare",
        "--labels",
        str(labels),
        "--model",
        "scripted:x",
        "--out",
        str(tmp_path / "out3"),
        "--config",
        str(cfg_file),
    ]
    capsys.readouterr()
    assert main([*argv, "--k", "1", "--rounds", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "cost/sample unknown" in printed and "$0.000000" not in printed
