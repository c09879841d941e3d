"""``vhd policy``: check a policy file and show the prompts it renders.

A command group: each subcommand is one entry of `SUBCOMMANDS` (its ``add_parser`` and ``run``),
so another subcommand (``vhd policy diff``) is one more entry.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from vhd.cli.habits import add_habits, examples
from vhd.cli.policy_diff import add_diff_parser
from vhd.fileio import printable

ROLES = ("affirmative", "negative", "judge")


def _add_check(sub: Any, name: str) -> None:
    p = sub.add_parser(
        name,
        help="validate a policy file (exit 1 with FILE:LINE: what is wrong)",
        description="Validate a policy file (YAML or TOML) against vhd's policy schema: unknown keys, "
        "duplicate category ids, an empty severity scale, values of the wrong type, a file over 2 MB, "
        "example media that are not there. "
        "Errors name the line; the exit status is 1 on error, 0 when the policy is valid.",
        epilog=examples("vhd policy check acme-policy.yaml", "vhd policy check acme-policy.toml --json"),
    )
    p.add_argument("file", metavar="FILE", help="the policy file (.yaml/.yml or .toml)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    p.set_defaults(handler=run_check)


def _add_show(sub: Any, name: str) -> None:
    p = sub.add_parser(
        name,
        help="print the prompts a policy renders (debaters' and judge's system prompts)",
        description="Print the system prompts the debaters and the judge read under a policy, as "
        "`vhd annotate --policy FILE` sends them: the definition, categories, exceptions and the severity "
        "request rendered into the templates (with a config file's [prompts] overrides, when --config names one).",
        epilog=examples(
            "vhd policy show acme-policy.yaml",
            "vhd policy show acme-policy.yaml --kind video --role judge",
            "vhd policy show vhd11k --json",
        ),
    )
    p.add_argument("file", metavar="FILE", help="the policy file, or vhd11k for the packaged default")
    p.add_argument("--kind", choices=("image", "video"), help="only this kind of sample (default: both)")
    p.add_argument("--role", choices=ROLES, help="only this role (default: all three)")
    p.add_argument("--config", metavar="FILE", help="a config file whose [prompts] and [debate] rounds apply")
    p.add_argument("--frames", type=int, default=5, metavar="N", help="frames a video is shown as (default 5)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    p.set_defaults(handler=run_show)


SUBCOMMANDS: dict[str, Callable[[Any, str], object]] = {"check": _add_check, "show": _add_show, "diff": add_diff_parser}
"""Subcommand name to the function that registers it on the group's subparsers."""


def add_parser(sub: Any, name: str) -> None:
    """Register the command group."""
    p = sub.add_parser(
        name,
        help="check a moderation policy file and show the prompts it renders",
        description="Work with a moderation policy file: one YAML or TOML file with categories (what each "
        "forbids and allows), an ordered severity scale and example media, which `vhd annotate --policy FILE` "
        "renders into every prompt. See docs: Writing a policy.",
        epilog=examples("vhd policy check acme-policy.yaml", "vhd policy show acme-policy.yaml --role judge"),
    )
    group = p.add_subparsers(dest="policy_command", metavar="SUBCOMMAND", required=True)
    for sub_name, register in SUBCOMMANDS.items():
        register(group, sub_name)
    for command in group.choices.values():
        add_habits(command)


def run_check(args: argparse.Namespace) -> int:
    """``vhd policy check FILE``: 0 when valid, 1 with the error (FILE:LINE: ...) when not."""
    from vhd.policy import PolicyError, load_policy
    from vhd.policy.load import DEFAULT_POLICY, missing_examples

    try:
        policy = load_policy(args.file)
        missing = [] if args.file == DEFAULT_POLICY else missing_examples(args.file)
        if missing:  # every missing file, the first as the error
            raise PolicyError(missing[0] + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    except PolicyError as exc:
        if args.json:
            print(json.dumps({"valid": False, "error": str(exc)}))
        else:
            print(f"vhd: error: {printable(str(exc))}", file=sys.stderr)
        return 1
    summary: dict[str, Any] = {
        "valid": True,
        "name": policy.name,
        "version": policy.version,
        "hash": policy.content_hash,
        "categories": [c.id for c in policy.categories],
        "exceptions": sum(len(c.allows) for c in policy.categories) + len(policy.allows),
        "severity": policy.severity_names,
        "examples": sum(len(c.examples) for c in policy.categories),
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    scale = ", ".join(summary["severity"]) or "none"
    print(
        printable(
            f"{args.file}: valid policy {policy.key} ({len(policy.categories)} categories, "
            f"{summary['exceptions']} exceptions, severity scale: {scale}, {summary['examples']} examples); "
            f"hash {policy.content_hash[:16]}"
        )
    )
    return 0


def run_show(args: argparse.Namespace) -> int:
    """``vhd policy show FILE``: every role's system prompt under the policy."""
    from pathlib import Path

    from vhd.config import load_config
    from vhd.debate.prompts import Prompts
    from vhd.policy import load_policy

    policy = load_policy(args.file)
    cfg = load_config(args.config)
    prompts = Prompts(cfg.prompts, Path(cfg.base_dir) if cfg.base_dir else None, policy=policy)
    kinds = [args.kind] if args.kind else ["image", "video"]
    roles = [args.role] if args.role else list(ROLES)
    shown = {
        f"{role}_{kind}": prompts.system_prompt(
            role, kind, rounds=cfg.debate.rounds, n_frames=1 if kind == "image" else args.frames
        )
        for kind in kinds
        for role in roles
    }
    if args.json:
        print(json.dumps({"policy": policy.key, "hash": policy.content_hash, "prompts": shown}, indent=2))
        return 0
    for name, text in shown.items():
        print(f"== {name} ({policy.key}) ==")
        print(text)
        print()
    return 0
