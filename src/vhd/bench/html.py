"""The report's ``index.html``: tables, plots, counts, and thumbnails of misclassified samples.

Thumbnails are blurred (Pillow's Gaussian blur) so the report can be opened without seeing
harmful media; with ``unblurred=True`` a clear thumbnail is also written and shown when the
blurred one is clicked.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vhd.bench.metrics import fmt
from vhd.fileio import atomic_write

if TYPE_CHECKING:
    from vhd.bench.data import BenchItem
    from vhd.bench.evaluate import DetectorResult

THUMB_SIDE = 160
"""Longest side of a thumbnail, in pixels."""

BLUR_RADIUS = 12
"""Gaussian blur radius of the default thumbnails."""

MAX_THUMBS = 24
"""Misclassified samples shown per detector."""


def _first_frame(item: BenchItem) -> object | None:
    from vhd.media.discover import frame_folder_frames
    from vhd.media.image import open_image

    try:
        if Path(item.path).is_dir():
            frames = frame_folder_frames(item.path)
            return open_image(frames[0]) if frames else None
        if item.kind.value == "image":
            return open_image(item.path)  # the same checks as the benchmark's own loading
        from vhd.media.video import read_frames

        return read_frames(item.path, 1, 1).images[0].convert("RGB")
    except Exception:  # a thumbnail is never worth failing the report for
        return None


def write_thumbnails(item: BenchItem, folder: Path, *, unblurred: bool) -> tuple[str, str | None] | None:
    """Write a blurred (and optionally a clear) JPEG thumbnail; relative names, or None when unreadable."""
    from PIL import Image, ImageFilter

    blurred = folder / f"{item.id[:16]}_blur.jpg"
    clear = folder / f"{item.id[:16]}.jpg"
    if blurred.exists() and (not unblurred or clear.exists()):
        return f"thumbs/{blurred.name}", f"thumbs/{clear.name}" if unblurred else None
    img = _first_frame(item)
    if not isinstance(img, Image.Image):
        return None
    img.thumbnail((THUMB_SIDE, THUMB_SIDE))
    soft = img.filter(ImageFilter.GaussianBlur(BLUR_RADIUS))
    atomic_write(blurred, lambda fh: soft.save(fh, format="JPEG", quality=80), binary=True)
    if unblurred:
        atomic_write(clear, lambda fh: img.save(fh, format="JPEG", quality=85), binary=True)
    return f"thumbs/{blurred.name}", f"thumbs/{clear.name}" if unblurred else None


_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child{text-align:left}
img.plot{max-width:100%;margin:.5em 0}.thumbs{display:flex;flex-wrap:wrap;gap:8px}
.thumbs figure{margin:0;font-size:12px;width:170px}"""


def _markdown_table_html(md: str) -> str:
    lines = [ln for ln in md.strip().splitlines() if ln.startswith("|")]
    if len(lines) < 2:
        return ""
    out = ["<table>"]
    for k, line in enumerate([lines[0], *lines[2:]]):
        cells = [c.strip() for c in line.strip("|").split("|")]
        tag = "th" if k == 0 else "td"
        row = "".join(
            f"<{tag}><b>{html.escape(c[2:-2])}</b></{tag}>"
            if c.startswith("**")
            else f"<{tag}>{html.escape(c)}</{tag}>"
            for c in cells
        )
        out.append(f"<tr>{row}</tr>")
    return "\n".join([*out, "</table>"])


def write_index(
    out: Path,
    results: Sequence[DetectorResult],
    items: Sequence[BenchItem],
    *,
    table_md: str,
    plots: Sequence[Path],
    problems: Sequence[str],
    unblurred: bool = False,
    segments_md: str | None = None,
) -> Path:
    """Write ``index.html`` tying the report's files together (with the segment table, when there is one)."""
    shown = {sid for r in results for sid in r.misclassified[:MAX_THUMBS]}
    by_id = {i.id: i for i in items if i.id in shown}  # only the samples shown: no dict of the whole set
    thumbs = out / "thumbs"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>vhd bench</title><style>{_STYLE}</style>",
        "</head><body><h1>vhd bench report</h1>",
        f"<p>{len(items)} samples; {len(problems)} row(s) with problems. Every number: "
        "<a href='results.json'>results.json</a>, <a href='metrics.csv'>metrics.csv</a>; Table 1 as "
        "<a href='table1.md'>Markdown</a>, <a href='table1.csv'>CSV</a>, <a href='table1.tex'>LaTeX</a>.</p>",
        "<h2>Table 1</h2>",
        "<p>Answered: samples the detector gave a decision for, of all samples. A sample it failed on "
        "counts as wrong in every number (see results.json's failures).</p>",
        _markdown_table_html(table_md),
    ]
    if segments_md is not None:
        parts += [
            "<h2>Where in the video</h2>",
            "<p>Against the human spans of the videos whose labels have them (<a href='segments.md'>Markdown</a>, "
            "<a href='segments.csv'>CSV</a>): segment-level precision, recall and F1 (a predicted span matches "
            "one human span at an intersection over union of at least the threshold), duration-weighted "
            "precision, recall and F1 (seconds of overlap), and the median boundary error of matched spans; "
            "95% bootstrap intervals over videos in brackets. Videos: answered in time / compared.</p>",
            _markdown_table_html(segments_md),
        ]
    parts += [
        "<h2>Detectors</h2><table>",
        "<tr><th>detector</th><th>answered</th><th>failed</th><th>cached</th><th>run now</th><th>samples/s</th></tr>",
    ]
    for r in results:
        run = r.run
        sps = fmt(run.get("samples_per_s"), 2)
        answered, total = r.coverage
        parts.append(
            f"<tr><td>{html.escape(r.label)}</td><td>{answered}/{total}</td><td>{run['failed']}</td>"
            f"<td>{run['cached']}</td><td>{run['computed']}</td><td>{sps}</td></tr>"
        )
    parts.append("</table><h2>Plots</h2>")
    parts += [f"<img class='plot' src='plots/{html.escape(p.name)}' alt='{html.escape(p.stem)}'>" for p in plots]
    parts.append("<h2>Misclassified samples (blurred)</h2>")
    for r in results:
        parts.append(f"<h3>{html.escape(r.label)}: {len(r.misclassified)} wrong</h3><div class='thumbs'>")
        for sid in r.misclassified[:MAX_THUMBS]:
            item = by_id[sid]
            names = write_thumbnails(item, thumbs, unblurred=unblurred)
            truth = "harmful" if item.harmful else "unharmful"
            caption = f"{html.escape(Path(item.path).name)}<br>truth: {truth} {','.join(item.categories)}"
            if names is None:
                parts.append(f"<figure>(no preview)<figcaption>{caption}</figcaption></figure>")
                continue
            blur, clear = names
            img = f"<img src='{blur}' alt='blurred preview'>"
            if clear:
                img = (
                    f"<img src='{blur}' alt='blurred preview; click to reveal' style='cursor:pointer' "
                    f"onclick=\"this.src=this.src.endsWith('_blur.jpg')?'{clear}':'{blur}'\">"
                )
            parts.append(f"<figure>{img}<figcaption>{caption}</figcaption></figure>")
        parts.append("</div>")
    if problems:
        parts.append("<h2>Rows with problems</h2><ul>")
        parts += [f"<li>{html.escape(p)}</li>" for p in problems]
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return atomic_write(out / "index.html", "\n".join(parts))
