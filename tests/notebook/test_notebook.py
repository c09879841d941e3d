"""The library in a real notebook (nbclient runs an ipykernel): progress bars and reprs show as cell outputs.

Before issue 34 a notebook got no progress at all (rich draws only on a terminal) and a bench
report's value was a 12.7k-character dataclass repr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.annotate.test_api import make_images
from tests.notebook.conftest import html_of

pytestmark = pytest.mark.slow  # starts a Jupyter kernel


def test_progress_bar_and_annotate_progress_show_in_the_notebook(notebook: Any, tmp_path: Path) -> None:
    make_images(tmp_path / "m", 3)
    outputs = notebook(
        [
            "import vhd, vhd.progress\n"
            "assert vhd.progress.in_notebook()\n"
            "with vhd.progress.bar('hashing', unit='files') as report:\n"
            "    for i in range(40):\n"
            "        report(i + 1, 40, info='ok')\n",
            "summary = vhd.annotate(['m'], model='scripted:demo', store='s.db', progress=True)\nsummary.annotated",
            "summary",
            "vhd.export.to_pandas('s.db')[['path', 'harmful', 'status']]",
        ],
        tmp_path,
    )
    bar_page = html_of(outputs[0])
    assert "hashing" in bar_page and "40/40" in bar_page and "files/s" in bar_page and "<pre" in bar_page
    assert [o["output_type"] for o in outputs[0]] == ["display_data"]  # one output, updated in place
    assert "40/40" in outputs[0][0]["data"]["text/plain"]
    run_page = html_of(outputs[1])
    assert "annotating" in run_page and "3/3" in run_page  # drawn from the worker thread the sync API runs on
    assert outputs[1][-1]["data"]["text/plain"] == "3"
    summary = html_of(outputs[2])
    assert summary.startswith('<table class="vhd-run">') and "<th>annotated</th><td>3</td>" in summary
    assert outputs[2][0]["data"]["text/plain"].startswith("RunSummary: run ")
    frame = html_of(outputs[3])  # the store's verdicts as a DataFrame, no export file
    assert "<table" in frame and "<th>harmful</th>" in frame and frame.count("<td>ok</td>") == 3


def test_the_terminal_bar_stays_off_outside_a_notebook(capsys: pytest.CaptureFixture[str]) -> None:
    import vhd.progress

    assert not vhd.progress.in_notebook()
    with vhd.progress.bar("hashing") as report:  # stderr is captured, not a terminal: nothing drawn
        report(1, 1)
    assert capsys.readouterr().err == ""
