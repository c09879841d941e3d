"""Label Studio's JSON-MIN export read as its JSON export (`json_min_tasks`)."""

from __future__ import annotations

from typing import Any

from vhd.labels.labelstudio.timeline import SPANS, TIMELINE_TYPE

_MIN_META = ("id", "annotator", "annotation_id", "created_at", "updated_at", "lead_time", "agreement")
_CONTROLS = {"harmful": ("choices", "choices"), "categories": ("choices", "choices"), "reason": ("textarea", "text")}
_REGIONS = {SPANS: TIMELINE_TYPE}
"""Controls whose JSON-MIN answer is a list of region values (one object per region)."""


def json_min_tasks(rows: list[Any]) -> list[Any]:
    """Label Studio's JSON-MIN export as JSON export tasks; any other list is returned as it is.

    JSON-MIN writes one flat object per submitted annotation: the task's data fields, ``id``,
    each control's answer under its name (a lone choice or text as a string, several as
    ``{"choices": [...]}`` / ``{"text": [...]}``), ``annotator``, ``annotation_id``,
    ``created_at`` and ``updated_at``. Rows of one task id become one task with several
    annotations, so the newest decides as in the JSON export.
    """
    dicts = [r for r in rows if isinstance(r, dict)]
    if not dicts or any("data" in r or "annotations" in r for r in dicts):
        return rows
    if not any("annotation_id" in r or "harmful" in r for r in dicts):
        return rows
    out: list[Any] = []
    by_id: dict[Any, dict[str, Any]] = {}
    for row in rows:
        if not isinstance(row, dict):
            out.append(row)  # left for the checks to name
            continue
        data = {k: v for k, v in row.items() if k not in _MIN_META and k not in _CONTROLS and k not in _REGIONS}
        result = []
        for control, (kind, key) in _CONTROLS.items():
            if control in row:
                value = row[control]
                values = value.get(key) if isinstance(value, dict) else [value] if isinstance(value, str) else value
                result.append({"from_name": control, "to_name": "media", "type": kind, "value": {key: values}})
        for control, kind in _REGIONS.items():
            regions = row.get(control)
            for value in regions if isinstance(regions, list) else [regions] if regions is not None else []:
                result.append({"from_name": control, "to_name": "media", "type": kind, "value": value})
        stamps = {"created_at": row.get("created_at"), "updated_at": row.get("updated_at")}
        annotation = [{"id": row.get("annotation_id"), "result": result} | stamps]
        if row.get("annotation_id") is None and not result:  # a task exported with nobody's decision
            annotation = []
        tid = row.get("id")
        hashable = isinstance(tid, int | str) and not isinstance(tid, bool)
        if hashable and tid in by_id:
            by_id[tid]["annotations"] += annotation
            continue
        task = {"data": data, "annotations": annotation} | ({"id": tid} if "id" in row else {})
        if hashable:
            by_id[tid] = task
        out.append(task)
    return out
