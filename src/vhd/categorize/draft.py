"""Render a discovered taxonomy as an editable YAML file with comments (sizes, left-out reasons)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vhd.categorize.discovery import DiscoverResult


def _indent(text: str, prefix: str) -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))


def render_draft(result: DiscoverResult, *, method: str, model: str | None, max_left_out: int = 40) -> str:
    """The draft as YAML that `vhd.taxonomy.load_taxonomy` reads back.

    Comments say how it was made, how many annotations each cluster holds, and which reasons
    joined no category, so a reviewer can merge, split, rename and redefine before using it.
    """
    import yaml

    tax = result.taxonomy
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Draft taxonomy written by `vhd categorize --discover --method {method}` on {when}",
        f"# from {result.reasons} distinct harm reason(s) of {result.annotations} harmful annotation(s)"
        + (f"; named by {model}" if model else "; names are the most typical reasons (pass --model to name them)"),
        "# Review it: rename, merge or split categories, rewrite definitions, then bump `version` and",
        "# use it with `vhd categorize --taxonomy THIS_FILE`.",
    ]
    head = {"name": tax.name, "version": tax.version, "description": tax.description or "Draft from discovered reasons"}
    lines.append(yaml.safe_dump(head, sort_keys=False, allow_unicode=True, width=100).rstrip())
    lines.append("categories:")
    for i, cat in enumerate(tax.categories):
        if i < len(result.clusters):
            c = result.clusters[i]
            lines.append(f"  # {c.size} annotation(s), {len(c.reasons)} distinct reason(s)")
        entry = {"code": cat.code, "name": cat.name, "definition": cat.definition, "examples": list(cat.examples)}
        dumped = yaml.safe_dump([entry], sort_keys=False, allow_unicode=True, width=100)
        lines.append(_indent(dumped, "  ").rstrip())
    if result.left_out:
        lines.append(f"# {len(result.left_out)} reason(s) joined no category (rare, or unlike every group):")
        lines.extend(f"#   - {r}" for r in result.left_out[:max_left_out])
        if len(result.left_out) > max_left_out:
            lines.append(f"#   ... and {len(result.left_out) - max_left_out} more")
    return "\n".join(lines) + "\n"
