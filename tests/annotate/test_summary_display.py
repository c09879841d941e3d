"""A run summary as a notebook shows it: a short repr, an HTML table, a one-row DataFrame."""

from __future__ import annotations

from dataclasses import fields

import pytest

import vhd
from tests.annotate.test_api import make_images
from vhd.annotate import RunSummary


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> RunSummary:
    root = tmp_path_factory.mktemp("summary")
    make_images(root / "m", 3)
    return vhd.annotate([root / "m"], model="scripted:demo", store=root / "s.db", progress=False)


def test_the_repr_is_a_few_lines_with_the_counts(summary: RunSummary) -> None:
    text = repr(summary)
    assert text.startswith(f"RunSummary: run {summary.run_id[:12]} on ") and "exit code 0" in text  # type: ignore[index]
    assert "3 found, 0 already done, 3 annotated: 0 harmful (0 refused), 3 not harmful" in text
    assert len(text.splitlines()) == 3 and len(text) < 400
    assert "endpoints=" not in text and "skip_reasons" not in text  # not the dataclass dump


def test_the_html_repr_is_an_escaped_table(summary: RunSummary) -> None:
    page = RunSummary(run_id=None, store="<x>.db", found=2)._repr_html_()
    assert page.startswith('<table class="vhd-run">') and "&lt;x&gt;.db" in page and "<x>" not in page
    assert "<th>found</th><td>2</td>" in page
    assert "<th>annotated</th><td>3</td>" in summary._repr_html_()


def test_to_pandas_is_one_row_by_run_id_with_the_usage_flat(summary: RunSummary) -> None:
    import pandas as pd

    df = summary.to_pandas()
    assert list(df.index) == [summary.run_id] and df.loc[summary.run_id, "annotated"] == 3
    assert df.loc[summary.run_id, "calls"] == summary.usage.calls > 0
    assert {"found", "harmful", "refused", "elapsed_s", "cost", "config_hash"} <= set(df.columns)
    assert not {"usage", "endpoints", "skip_reasons", "estimate"} & set(df.columns)
    both = pd.concat([df, RunSummary(run_id="other", store="x.db").to_pandas()])
    assert list(both.index) == [summary.run_id, "other"]
    scalar = {f.name for f in fields(RunSummary)} - {"usage", "endpoints", "local", "decided_by", "skip_reasons"}
    assert scalar - {"estimate", "budget_fix", "run_id"} <= set(df.columns)
