"""``vhd config``: the settings in force and where each came from; where the user file lives."""

from __future__ import annotations

import argparse
import json
from typing import Any

from vhd.cli.habits import examples
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="show the configuration in force and where each value came from",
        description="Show every annotation setting after merging the defaults, the user config file, the "
        "--config file and the VHD_* environment variables (flag > VHD_* > --config > user config > "
        "defaults; tables merged key by key), with the source of each value. Secrets are shown as <redacted> "
        "or *** (values of key/token/secret/password entries such as extra_body.api_key, and user info, "
        "key-like path segments and key-like query values of URLs) unless --show-secrets. `path` prints where "
        "the user config file is read from (VHD_NO_USER_CONFIG=1 ignores it).",
        epilog=examples(
            "vhd config show",
            "vhd config show --config vhd.toml --json",
            "vhd config show --show-secrets",
            "vhd config path",
        ),
    )
    p.add_argument("action", choices=("show", "path"), help="show: the settings; path: the user config file")
    p.add_argument("--config", metavar="FILE", help="TOML or YAML config file, as `vhd annotate --config` takes")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--show-secrets", action="store_true", help="show keys, tokens and URL credentials in clear")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    import os

    from vhd.config import NO_USER_CONFIG_ENV, config_sources, user_config_path

    if args.action == "path":
        path = user_config_path()
        ignored = os.environ.get(NO_USER_CONFIG_ENV, "") not in ("", "0")
        if args.json:
            print(json.dumps({"path": str(path), "exists": path.is_file(), "ignored": ignored}))
        else:
            state = "exists" if path.is_file() else "does not exist yet"
            print(printable(f"{path} ({state}{'; ignored: ' + NO_USER_CONFIG_ENV + ' is set' if ignored else ''})"))
        return 0
    rows = config_sources(args.config)
    if not args.show_secrets:
        from vhd.redaction import redact

        # each row's key names its value: redact it as the value of that key in a table
        rows = [(k, redact({k.rsplit(".", 1)[-1]: v})[k.rsplit(".", 1)[-1]], s) for k, v, s in rows]
    if args.json:
        print(json.dumps([{"key": k, "value": v, "source": s} for k, v, s in rows], indent=2, default=str))
        return 0
    width = max(len(k) for k, _, _ in rows)
    for key, value, source in rows:
        print(printable(f"{key:<{width}}  {json.dumps(value, default=str):<24}  {source}"))
    return 0
