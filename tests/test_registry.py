"""The registry helper (`vhd.registry`) and the registries built on it."""

from __future__ import annotations

import argparse
import importlib.metadata
import pickle
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vhd.errors import ConfigError, MissingDependencyError
from vhd.registry import Entry, Registry, RegistryNames

ROOT = Path(__file__).resolve().parent.parent


class Base:
    """A base class for a test registry."""


class Good(Base):
    pass


class Other:
    pass


def double(x: int) -> int:
    return 2 * x


NOT_CALLABLE = 42


def upside_down(tp: int, fp: int, tn: int, fn: int) -> float | None:
    """An ICL metric for the plugin tests: higher when there are more mistakes."""
    return float(fp + fn)


def _registries() -> dict[str, Registry[Any]]:
    from vhd.backends.registry import BACKENDS
    from vhd.bench.calibration import CALIBRATION_METHODS
    from vhd.categorize.assign import CATEGORIZE_METHODS
    from vhd.categorize.cluster import CLUSTERERS
    from vhd.categorize.discovery import DISCOVERY_METHODS
    from vhd.collect.crawl import CRAWL_SOURCES
    from vhd.detectors.registry import DETECTORS
    from vhd.export import EXPORT_FORMATS
    from vhd.icl.metrics import ICL_METRICS

    found: list[Registry[Any]] = [
        BACKENDS,
        DETECTORS,
        CRAWL_SOURCES,
        EXPORT_FORMATS,
        CATEGORIZE_METHODS,
        DISCOVERY_METHODS,
        CLUSTERERS,
        CALIBRATION_METHODS,
        ICL_METRICS,
    ]
    return {r.group: r for r in found}


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str, str], None]:
    """Add entry-point plugins: ``plugins(group, name, "module:attr")`` (importlib.metadata is faked)."""
    added: list[importlib.metadata.EntryPoint] = []
    real = importlib.metadata.entry_points

    def fake(**params: Any) -> Any:
        group = params.get("group")
        return [*real(**params), *(ep for ep in added if group is None or ep.group == group)]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    return lambda group, name, value: added.append(importlib.metadata.EntryPoint(name, value, group))


def _toy() -> Registry[type[Base]]:
    reg: Registry[type[Base]] = Registry("widget", "vhd.test_widgets", base=Base)
    reg.add("good", "tests.test_registry:Good", summary="a good one")
    reg.add("other", "tests.test_registry:Other")
    reg.add("missing", "tests.test_registry:Nope")
    return reg


# --- names, unknown names, wrong types -----------------------------------------------------------


def test_unknown_name_lists_every_valid_one(plugins: Callable[[str, str, str], None]) -> None:
    plugins("vhd.test_widgets", "from-plugin", "tests.test_registry:Good")
    reg = _toy()
    assert reg.names() == ["from-plugin", "good", "missing", "other"]
    with pytest.raises(ConfigError, match=r"unknown widget 'nope'; valid widgets: from-plugin, good, missing, other"):
        reg.load("nope")
    with pytest.raises(ConfigError, match="unknown widget"):
        reg.check("nope")
    from vhd.export import EXPORT_FORMATS

    with pytest.raises(
        ConfigError,
        match=r"unknown export format 'xml'; valid export formats: csv, fiftyone, hf, jsonl, parquet, vhd11k",
    ):
        EXPORT_FORMATS.load("xml")


def test_the_registry_is_the_collection_of_its_names() -> None:
    reg = _toy()
    assert "good" in reg and "nope" not in reg and 3 not in reg
    assert list(reg) == reg.names() and len(reg) == 3


def test_load_checks_the_type() -> None:
    reg = _toy()
    assert reg.load("good") is Good
    with pytest.raises(ConfigError, match=r"widget 'other' \(tests.test_registry:Other\) is not a vhd Base subclass"):
        reg.load("other")
    with pytest.raises(ConfigError, match="has no 'Nope'"):
        reg.load("missing")
    funcs: Registry[Callable[[int], int]] = Registry("doubler", "vhd.test_doublers")
    funcs.add("double", "tests.test_registry:double")
    funcs.add("number", "tests.test_registry:NOT_CALLABLE")
    assert funcs.load("double")(4) == 8
    with pytest.raises(ConfigError, match="is not callable"):
        funcs.load("number")


def test_a_plugin_of_the_wrong_type_is_refused(plugins: Callable[[str, str, str], None]) -> None:
    from vhd.detectors.registry import create_detector

    plugins("vhd.detectors", "notadetector", "tests.test_registry:Other")
    with pytest.raises(ConfigError, match="is not a vhd Detector subclass"):
        create_detector("notadetector")


def test_add_refuses_bad_entries() -> None:
    reg: Registry[Any] = Registry("thing", "vhd.test_things")
    with pytest.raises(ValueError, match="extra"):
        reg.add("a", "m:a", needs=["numpy"])
    with pytest.raises(ValueError, match="top-level"):
        reg.add("b", "m:b", extra="x", needs=["numpy.linalg"])
    with pytest.raises(ValueError, match="module:attr"):
        reg.add("c", "just_a_module")


def test_builtin_entries_take_bare_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    reg = _toy()
    monkeypatch.setitem(reg.builtin, "good", "tests.test_registry:Good")  # what tests do to swap an entry
    assert reg.builtin["good"] == Entry("good", "tests.test_registry:Good")
    monkeypatch.undo()
    assert reg.builtin["good"].summary == "a good one"


# --- plugins ----------------------------------------------------------------------------------------


def test_plugins_join_every_kind_and_builtins_win(plugins: Callable[[str, str, str], None]) -> None:
    for group in _registries():
        plugins(group, "zz-plugin", "tests.test_registry:upside_down")
    plugins("vhd.export_formats", "jsonl", "tests.test_registry:Other")  # shadowed by the built-in
    for group, reg in _registries().items():
        assert "zz-plugin" in reg.names(), group
        assert reg.entry("zz-plugin").plugin and reg.entry("zz-plugin").extra is None
    from vhd.export import EXPORT_FORMATS, JsonlFormat

    assert EXPORT_FORMATS.load("jsonl") is JsonlFormat


def test_a_plugin_metric_ranks_the_icl_search(plugins: Callable[[str, str, str], None]) -> None:
    from vhd.icl.metrics import rates
    from vhd.icl.result import Scored

    plugins("vhd.icl_metrics", "mistakes", "tests.test_registry:upside_down")
    counts = {"tp": 0, "fp": 0, "tn": 1, "fn": 1}
    scored = Scored(counts, rates(**counts), 2, 0)
    assert scored.value("mistakes") == 1.0 and scored.value("f1") == 0.0


def test_a_plugin_calibration_method(plugins: Callable[[str, str, str], None]) -> None:
    from vhd.bench.calibration import fit_calibration

    plugins("vhd.calibration_methods", "identity", "tests.test_registry:identity_fit")
    cal = fit_calibration([1, 0, 1, 0], [0.9, 0.2, 0.6, 0.4], method="identity")
    assert (cal.a, cal.b, cal.method) == (1.0, 0.0, "identity")
    assert cal(0.3) == pytest.approx(0.3)


def identity_fit(logits: list[float], labels: list[int]) -> tuple[float, float]:
    return 1.0, 0.0


# --- missing extras ------------------------------------------------------------------------------


def test_missing_extra_names_the_pip_line_before_importing_the_target(tmp_path: Path) -> None:
    (tmp_path / "vhd_probe_heavy.py").write_text("raise RuntimeError('imported')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        reg: Registry[Any] = Registry("thing", "vhd.test_things")
        reg.add("heavy", "vhd_probe_heavy:Thing", extra="local", needs={"vhd_no_such_module": "no-such-package"})
        with pytest.raises(MissingDependencyError) as err:
            reg.load("heavy")
        pip = f"{sys.executable} -m pip install"  # this interpreter's pip: right in an unactivated venv too
        assert str(err.value) == (
            f"no-such-package is not installed: run `{pip} 'vhd[local]'` (or `{pip} no-such-package`)"
        )
        assert "vhd_probe_heavy" not in sys.modules
        with pytest.raises(MissingDependencyError, match=r"pip install 'vhd\[local\]'"):
            reg.check("heavy")
        assert reg.entry("heavy").describe() == "heavy (pip install 'vhd[local]')"
        again = pickle.loads(pickle.dumps(err.value))  # workers raise it across processes
        assert isinstance(again, MissingDependencyError) and str(again) == str(err.value)
    finally:
        sys.path.remove(str(tmp_path))


def test_import_errors_of_a_need_become_the_pip_line(tmp_path: Path) -> None:
    (tmp_path / "vhd_probe_needy.py").write_text("import vhd_no_such_module\n")
    sys.path.insert(0, str(tmp_path))
    try:
        reg: Registry[Any] = Registry("thing", "vhd.test_things")
        reg.add("needy", "vhd_probe_needy:Thing", extra="embed", needs=["vhd_no_such_module"])
        with pytest.raises(MissingDependencyError, match=r"pip install 'vhd\[embed\]'"):
            reg.load("needy", check_needs=False)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("vhd_probe_needy", None)


def _export_parquet(tmp: Path) -> None:
    from vhd.export import export

    export(None, "parquet", tmp / "a.parquet")  # type: ignore[arg-type]  # the format fails first


def _categorize_embed(tmp: Path) -> None:
    from vhd.categorize.assign import categorize

    categorize(tmp / "no.db", method="embed")


def _discover_cluster(tmp: Path) -> None:
    from vhd.categorize.discovery import discover

    discover(tmp / "no.db", method="cluster")


@pytest.mark.parametrize(
    ("hidden", "call", "pip"),
    [
        ("pyarrow", _export_parquet, "parquet"),
        ("sentence_transformers", _categorize_embed, "embed"),
        ("sentence_transformers", _discover_cluster, "embed"),
    ],
)
def test_a_missing_extra_fails_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hidden: str, call: Callable[[Path], None], pip: str
) -> None:
    # The store does not even exist: the extra is checked first.
    monkeypatch.setitem(sys.modules, hidden, None)
    with pytest.raises(MissingDependencyError, match=rf"pip install 'vhd\[{pip}\]'"):
        call(tmp_path)
    assert not any(tmp_path.iterdir())


def test_checks_import_nothing() -> None:
    code = (
        "import sys\n"
        "from vhd.backends.registry import BACKENDS\n"
        "from vhd.export import EXPORT_FORMATS\n"
        "from vhd.categorize.assign import CATEGORIZE_METHODS\n"
        "from vhd.categorize.cluster import CLUSTERERS\n"
        "BACKENDS.check('hf'); EXPORT_FORMATS.check('parquet'); CATEGORIZE_METHODS.check('embed')\n"
        "CLUSTERERS.check('hdbscan')\n"
        "heavy = ('torch', 'transformers', 'pyarrow', 'sentence_transformers', 'sklearn', 'httpx')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- every registry ------------------------------------------------------------------------------


def test_every_builtin_entry_resolves() -> None:
    for group, reg in _registries().items():
        for name, entry in reg.builtin.items():
            assert reg.load(name, check_needs=False) is not None, (group, name)
            assert entry.summary, (group, name)
            assert not entry.needs or entry.extra, (group, name)


def test_every_group_is_declared_in_pyproject() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert set(_registries()) <= set(declared)


def test_extras_named_by_entries_exist() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for reg in _registries().values():
        for entry in reg.builtin.values():
            assert entry.extra is None or entry.extra in extras, entry


# --- the command line -----------------------------------------------------------------------------


def _action(parser: argparse.ArgumentParser, command: str, option: str) -> argparse.Action:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.Action = next(a for a in sub.choices[command]._actions if option in a.option_strings)
    return found


@pytest.mark.parametrize(
    ("command", "option", "group"),
    [
        ("export", "--format", "vhd.export_formats"),
        ("bench", "--calibration-method", "vhd.calibration_methods"),
        ("categorize", "--clusterer", "vhd.clusterers"),
        ("icl", "--metric", "vhd.icl_metrics"),
    ],
)
def test_cli_choices_come_from_the_registries(
    plugins: Callable[[str, str, str], None], command: str, option: str, group: str
) -> None:
    from vhd.cli.main import build_parser

    plugins(group, "zz-plugin", "tests.test_registry:upside_down")
    action = _action(build_parser(), command, option)
    assert isinstance(action.choices, RegistryNames)
    assert list(action.choices) == _registries()[group].names() and "zz-plugin" in action.choices
    if command == "export":  # the dataset folder is a registered format like the files
        assert "hf" in action.choices


def test_cli_help_lists_come_from_the_registries(plugins: Callable[[str, str, str], None]) -> None:
    from vhd.cli.main import build_parser

    plugins("vhd.categorize_methods", "zz-method", "tests.test_registry:upside_down")
    plugins("vhd.crawl_sources", "zz-source", "tests.test_registry:Other")
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    categorize_help = " ".join(sub.choices["categorize"].format_help().split())
    assert "categorize: embed (default), llm or zz-method; --discover: cluster (default) or llm-only" in categorize_help
    crawl_help = " ".join(sub.choices["crawl"].format_help().split())
    for name in ("icrawler:", "pexels:", "ytdlp:", "zz-source (from tests.test_registry)", "pip install 'vhd[ytdlp]'"):
        assert name in crawl_help


def test_cli_refuses_a_name_no_registry_has(capsys: pytest.CaptureFixture[str]) -> None:
    from vhd.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["export", "x.db", "--format", "xml", "-o", "x"])
    assert exit_.value.code == 2
    formats = "'csv', 'fiftyone', 'hf', 'jsonl', 'parquet', 'vhd11k-csv'"
    assert f"invalid choice: 'xml' (choose from {formats})" in capsys.readouterr().err
    assert main(["categorize", "--method", "cluster"]) == 2
    assert "categorize takes embed or llm" in capsys.readouterr().err


def test_building_the_parser_imports_no_registry() -> None:
    code = (
        "import sys\n"
        "from vhd.cli.main import build_parser\n"
        "build_parser()\n"
        "mods = ('vhd.store', 'vhd.collect.crawl', 'vhd.categorize.assign', 'vhd.categorize.cluster',\n"
        "        'vhd.bench.calibration', 'vhd.icl.metrics', 'vhd.backends.registry')\n"
        "print(sorted(m for m in mods if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
