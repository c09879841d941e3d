"""``vhd table2``: the paper's Table 2 layout, detectors (base model, tuned checkpoints) x test sets."""

from __future__ import annotations

import argparse
import json
from typing import Any

EXAMPLES = """examples:
  vhd table2 --test SMID=smid.csv --test VHD11K-I=vhd_img.csv --detector base=vlm:hf:/m/iblip --detector i=tuned-vlm:ck/
  vhd table2 --test Images=test.csv --detector base=vlm:hf:/m/llava --detector tuned=tuned-vlm:ckpt/ --json
  vhd table2 --test Videos=vhd_videos.csv --detector v=tuned-vlm:ckpt-v/ --set v.threshold=0.4 --out t2v/
"""


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="Table 2: accuracy of base and prompt-tuned models on several test sets",
        description=(
            "Benchmark every --detector on every --test set (each in OUT/NAME with its own prediction cache) and "
            "write OUT/table2.md, .csv, .tex and .json: per test set Harm., Unharm., Avg. (accuracy over the whole "
            "set, as in the paper) and Bal. (balanced accuracy), with 95%% bootstrap intervals; '-' where a "
            "checkpoint's training modality does not match the test set's."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--test", action="append", default=[], metavar="NAME=LABELS", help="a test set, repeatable")
    p.add_argument("--detector", action="append", default=[], metavar="SPEC", help="[LABEL=]NAME[:MODEL], repeatable")
    p.add_argument("--set", action="append", default=[], metavar="LABEL.KEY=VALUE", help="detector option, repeatable")
    p.add_argument("--config", metavar="FILE", help="TOML file with [detectors.LABEL] option tables")
    p.add_argument("--out", default="table2", metavar="DIR", help="output folder (default table2)")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="bootstrap resamples (default 1000)")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.bench.table2 import run_table2, to_markdown
    from vhd.errors import ConfigError

    tests: dict[str, str] = {}
    for spec in args.test:
        name, eq, path = spec.partition("=")
        if not eq or not name.strip() or not path.strip():
            raise ConfigError(f"--test {spec!r} must be NAME=LABELS, e.g. --test SMID=smid_test.csv")
        tests[name.strip()] = path.strip()
    if not tests:
        raise ConfigError("give at least one --test NAME=LABELS")
    table = run_table2(tests, args.detector, args.out, sets=args.set, config=args.config, resamples=args.bootstrap)
    print(json.dumps(table.to_dict(), indent=2) if args.json else to_markdown(table), end="" if not args.json else "\n")
    return 0
