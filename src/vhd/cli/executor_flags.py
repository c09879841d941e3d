"""The flags of every command that can run its per-item work on an executor (annotate, dedup, ...).

``--executor``, ``--ray-address``, ``--workers``, ``--ship-media``, ``--cpus-per-worker``,
``--gpus-per-worker`` and ``--ray-runtime-env``, read into a name and one
`vhd.execution.ExecutorOptions`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.errors import ConfigError
from vhd.registry import Registry, RegistryNames

if TYPE_CHECKING:
    from vhd.execution import ExecutorOptions


def _executors() -> Registry[Any]:
    from vhd.execution import EXECUTORS

    return EXECUTORS


def add_executor_flags(p: Any, *, ship_media: bool = True) -> None:
    """Add the executor flags to a parser (``--ship-media`` only where media are sent to workers)."""
    g = p.add_argument_group("executor (where the work runs)")
    choice = g.add_argument(
        "--executor", default="local", metavar="NAME", help="local (this process, the default) or ray (Ray actors)"
    )
    choice.choices = RegistryNames(_executors, default="local")  # set after add_argument: read only when used
    g.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster to join: auto (the one `ray start --head` runs here) or ray://HOST:10001; "
        "default: a Ray session on this machine",
    )
    g.add_argument(
        "--workers", type=int, default=2, metavar="N", help="Ray workers (actors), each with its own backend"
    )
    if ship_media:
        g.add_argument(
            "--ship-media",
            action="store_true",
            help="send media bytes to the workers (no shared filesystem) instead of paths",
        )
    g.add_argument("--cpus-per-worker", type=float, default=1.0, metavar="C", help="CPUs each worker reserves")
    g.add_argument(
        "--gpus-per-worker", type=float, default=0.0, metavar="G", help="GPUs each worker reserves (hf models)"
    )
    g.add_argument(
        "--ray-runtime-env",
        metavar="JSON|FILE",
        help='extra Ray runtime_env for the job, e.g. \'{"pip": ["vhd[ray]"]}\' (secrets: api_key_env in the config)',
    )


def executor_options(args: argparse.Namespace) -> ExecutorOptions:
    """The `vhd.execution.ExecutorOptions` the flags ask for.

    Raises:
        ConfigError: A bad number of workers or an unreadable ``--ray-runtime-env``.
    """
    from vhd.execution import ExecutorOptions

    if args.workers < 1:
        raise ConfigError(f"--workers {args.workers}: give at least 1")
    if args.executor == "local" and (args.ray_address or getattr(args, "ship_media", False)):
        raise ConfigError("--ray-address and --ship-media need --executor ray")
    env: dict[str, Any] = {}
    if args.ray_runtime_env:
        text = args.ray_runtime_env
        if not text.lstrip().startswith("{"):
            try:
                text = Path(text).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read --ray-runtime-env {args.ray_runtime_env}: {exc.strerror}") from None
        try:
            env = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"--ray-runtime-env is not valid JSON: {exc}") from None
        if not isinstance(env, dict):
            raise ConfigError('--ray-runtime-env must be a JSON object, e.g. {"pip": ["vhd[ray]"]}')
        if "env_vars" in env:
            raise ConfigError(
                "--ray-runtime-env must not carry env_vars (they would show in the command line): "
                "name keys with api_key_env in the config file and export them"
            )
    return ExecutorOptions(
        workers=args.workers,
        address=args.ray_address,
        ship_media=bool(getattr(args, "ship_media", False)),
        num_cpus=args.cpus_per_worker,
        num_gpus=args.gpus_per_worker,
        runtime_env=env,
    )
