"""``vhd policy diff A B INPUTS... --model M``: what changes when the policy does (a sub-command of ``vhd policy``).

The group's module (`vhd.cli.policy`) registers it with `add_diff_parser` and runs it with
`run_diff`; the work is `vhd.compare.policy_diff.policy_diff`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.cli.habits import add_json_flag, examples, print_json
from vhd.cli.model_flags import add_model_flags, model_overrides

if TYPE_CHECKING:
    from vhd.compare.policy_diff import PolicyDiff, Side


def add_diff_parser(sub: Any, name: str = "diff") -> argparse.ArgumentParser:
    """Register ``diff`` on the ``vhd policy`` group's sub-parsers; returns its parser."""
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        help="annotate the same samples under two policies and list what changes",
        description=(
            "A policy regression test: annotate INPUTS under policy A, then under policy B (identical model "
            "calls are sent once and shared), and list every sample whose decision, category or severity "
            "changes, with both judges' reasons. A is usually the policy in use (vhd11k: the packaged "
            "default), B the candidate. --store keeps both runs' annotations (and reuses them on the next "
            'diff); without it a temporary store is used. --json prints {"flips": N, "samples": [...]}. '
            "Exit status: 0 done (flips are a result, not a failure); 2 usage, policy or configuration error."
        ),
        epilog=examples(
            "vhd policy diff policy-2026-05.yaml policy-2026-11.yaml photos/ --model openai:gpt-4o",
            "vhd policy diff vhd11k acme.yaml media/ --model scripted:demo --json",
            "vhd policy diff a.yaml b.yaml media/ --model openai:gpt-4o --store diff.db --config run.toml",
        ),
    )
    p.add_argument("policy_a", metavar="A", help="the current policy file (vhd11k: the packaged default)")
    p.add_argument("policy_b", metavar="B", help="the candidate policy file")
    p.add_argument("inputs", nargs="+", metavar="INPUTS", help="media files, folders or manifests")
    p.add_argument("--store", metavar="FILE", help="store for both runs' annotations (default: a temporary one)")
    p.add_argument("--config", metavar="FILE", help="annotate configuration (TOML/YAML); its policy is replaced")
    p.add_argument("--rounds", type=int, metavar="N", help="debate rounds (default 2)")
    p.add_argument("--frame-folders", action="store_true", help="treat folders of numbered frames as videos")
    add_model_flags(p)
    add_json_flag(p)
    p.set_defaults(handler=run_diff)
    return p


def _decision(side: Side) -> str:
    return {True: "harmful", False: "unharmful"}.get(side.harmful, side.status)  # type: ignore[arg-type]


def _side_line(label: str, key: str, side: Side) -> str:
    detail = [f"category {side.category}"] if side.category else []
    detail += [f"severity {side.severity}"] if side.severity else []
    extra = f" ({', '.join(detail)})" if detail else ""
    return f"  {label} {key}: {_decision(side)}{extra}: {side.reason or '(no reason)'}"


def render(diff: PolicyDiff) -> str:
    """The diff for people: one block per flip, then the counts."""
    lines: list[str] = []
    for flip in diff.samples:
        what = []
        if "decision" in flip.changes:
            what.append(f"decision {_decision(flip.a)} -> {_decision(flip.b)}")
        if "category" in flip.changes:
            what.append(f"category {flip.a.category or '(none)'} -> {flip.b.category or '(none)'}")
        if "severity" in flip.changes:
            what.append(f"severity {flip.a.severity or '(none)'} -> {flip.b.severity or '(none)'}")
        lines.append(f"{Path(flip.path).name or flip.sample_id[:12]}: {'; '.join(what)}")
        lines.append(_side_line("A", diff.policy_a, flip.a))
        lines.append(_side_line("B", diff.policy_b, flip.b))
    lines.append(
        f"{diff.flips} of {diff.compared} sample(s) changed from {diff.policy_a} to {diff.policy_b}; "
        f"model calls: {diff.calls_made} made, {diff.calls_shared} shared"
        + (f"; both runs kept in {diff.store}" if diff.store else "")
    )
    return "\n".join(lines)


def run_diff(args: argparse.Namespace) -> int:
    """Run ``vhd policy diff``."""
    from vhd.annotate.options import RunOptions
    from vhd.compare.policy_diff import policy_diff

    diff = policy_diff(
        args.policy_a,
        args.policy_b,
        args.inputs,
        store=args.store,
        config=args.config,
        options=RunOptions(frame_folders=args.frame_folders),
        rounds=args.rounds,
        **model_overrides(args),
    )
    if args.json:
        print_json(diff.to_dict())
    else:
        print(render(diff))
    return 0
