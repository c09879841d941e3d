"""The paper's figure 3: harmful samples per category, real against synthetic, images and videos side by side.

Drawn with matplotlib's object API (no pyplot state) on the Agg canvas. The counts that were
drawn, read back from the bars, are stored in the PNG's ``vhd:counts`` text chunk so a test (or a
reader) can check the picture against the tables.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.errors import MissingDependencyError
from vhd.fileio import atomic_write

if TYPE_CHECKING:
    from vhd.categorize.stats import Stats

_COLORS = {"real": "#3b75af", "synthetic": "#ef8636", "unknown": "#9e9e9e"}
METADATA_KEY = "vhd:counts"
"""PNG text chunk holding ``{"image/real": [count per category], ...}`` as drawn."""


def require_matplotlib() -> None:
    """Fail with the pip line when matplotlib is missing.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("matplotlib", "plot") from exc


def plot_categories(stats: Stats, path: str | Path, *, dpi: int = 150) -> dict[str, list[int]]:
    """Draw the category chart and write it as a PNG.

    Args:
        stats: The counts.
        path: Where to write the PNG.
        dpi: Resolution.

    Returns:
        The counts drawn, read back from the bars, per ``kind/source`` column.
    """
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    labels = [f"{r.code}. {r.name}" if r.code != "-" else r.name for r in stats.categories]
    kinds = [k for k in ("image", "video") if any(c.startswith(f"{k}/") for c in stats.columns)]
    height = max(3.0, 0.45 * len(labels) + 1.5)
    fig = Figure(figsize=(6.5 * max(1, len(kinds)), height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(1, len(kinds)), sharey=True, squeeze=False)[0]
    drawn: dict[str, list[int]] = {}
    for ax, kind in zip(axes, kinds, strict=False):
        columns = [c for c in stats.columns if c.startswith(f"{kind}/")]
        bar_h = 0.8 / max(1, len(columns))
        for j, column in enumerate(columns):
            source = column.split("/", 1)[1]
            values = [r.counts[column] for r in stats.categories]
            positions = [i - 0.4 + bar_h * (j + 0.5) for i in range(len(labels))]
            bars = ax.barh(positions, values, height=bar_h, color=_COLORS.get(source, "#777777"), label=source)
            ax.bar_label(bars, padding=2, fontsize=7)
            drawn[column] = [round(float(b.get_width())) for b in bars]
        ax.set_title(f"{kind.capitalize()}s", fontsize=11)
        ax.set_xlabel("harmful samples")
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.margins(x=0.12)
        ax.grid(axis="x", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    axes[0].invert_yaxis()  # the axes share y: invert once, so category A is at the top
    fig.suptitle(f"Harmful samples per category ({stats.taxonomy})", fontsize=12)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={METADATA_KEY: json.dumps(drawn), "Software": "vhd"})
    atomic_write(path, buf.getvalue())
    return drawn


def read_drawn_counts(path: str | Path) -> dict[str, Any]:
    """Read the ``vhd:counts`` chunk of a PNG written by `plot_categories`."""
    from vhd.media.image import open_untrusted

    with open_untrusted(path) as im:
        return dict(json.loads(im.info[METADATA_KEY]))
