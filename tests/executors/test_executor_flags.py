"""The executor flags of the command line (no Ray needed: bad flags fail before any work)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vhd.cli.main import build_parser, main


def test_flags_build_options(tmp_path: Path) -> None:
    from vhd.cli.executor_flags import executor_options

    env = tmp_path / "env.json"
    env.write_text('{"pip": ["vhd[ray]"]}')
    argv = ["annotate", "x", "--executor", "ray", "--ray-address", "auto", "--workers", "4", "--ship-media",
            "--gpus-per-worker", "1", "--cpus-per-worker", "2", "--ray-runtime-env", str(env)]  # fmt: skip
    args = build_parser().parse_args(argv)
    opts = executor_options(args)
    assert (opts.workers, opts.address, opts.ship_media, opts.num_gpus, opts.num_cpus) == (4, "auto", True, 1.0, 2.0)
    assert opts.runtime_env == {"pip": ["vhd[ray]"]}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--executor", "ray", "--workers", "0"], "--workers 0: give at least 1"),
        (["--ray-address", "auto"], "need --executor ray"),
        (["--executor", "ray", "--ray-runtime-env", "{not json"], "not valid JSON"),
        (["--executor", "ray", "--ray-runtime-env", '{"env_vars": {"K": "v"}}'], "must not carry env_vars"),
        (["--executor", "ray", "--ray-runtime-env", "/no/such/env.json"], "cannot read --ray-runtime-env"),
    ],
)
def test_bad_flags_fail_with_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    db = tmp_path / "s.db"
    code = main(["annotate", str(tmp_path), "--model", "scripted:demo", "--store", str(db), *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not db.exists()


def test_unknown_executor_lists_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["annotate", "x", "--executor", "dask"])
    assert "'local', 'ray'" in capsys.readouterr().err
