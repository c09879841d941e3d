"""The 0.1 module paths and names that moved in 0.2 still import, each with a DeprecationWarning."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import vhd
from vhd.lazy import REMOVAL_RELEASE


@pytest.mark.parametrize("old", sorted(vhd._MOVED))
def test_every_moved_module_imports_with_a_warning_and_serves_the_new_names(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to .*goes in vhd {REMOVAL_RELEASE}"):
        proxy = importlib.import_module(old)
    targets = [importlib.import_module(t) for t in vhd._MOVED[old]]
    public = {n for t in targets for n in dir(t) if not n.startswith("_")}
    assert public, old
    for name in public:
        owner = next(t for t in targets if hasattr(t, name))
        assert getattr(proxy, name) is getattr(owner, name), (old, name)
    with pytest.raises(AttributeError, match="no attribute 'surely_not_here'"):
        _ = proxy.surely_not_here


@pytest.mark.parametrize(
    ("statement", "new"),
    [
        ("from vhd.store import export", "vhd.export.base.export"),
        ("from vhd.store import read_labels", "vhd.labels.files.read_labels"),
        ("from vhd.align import compare", "vhd.compare.runner.compare"),
        ("from vhd.align import import_labels", "vhd.labels.sets.import_labels"),
        ("from vhd.align.cascade import cascade_from_flags", "vhd.cli.cascade_flags.cascade_from_flags"),
        ("from vhd.hub.hf import export_hf", "vhd.export.hf.export_hf"),
        ("from vhd.store.export import ExportFormat", "vhd.export.base.ExportFormat"),
    ],
)
def test_old_imports_in_a_fresh_process_warn_at_the_importing_line(statement: str, new: str) -> None:
    module, _, name = new.rpartition(".")
    alias = statement.rsplit(" ", 1)[1]
    code = (
        "import warnings\nwarnings.simplefilter('always')\n"
        f"{statement}  # line 3\n"
        f"import importlib\nassert {alias} is getattr(importlib.import_module({module!r}), {name!r})\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "<string>:3: DeprecationWarning" in run.stderr and "goes in vhd" in run.stderr, run.stderr


def test_new_paths_warn_nothing() -> None:
    code = (
        "import warnings\nwarnings.simplefilter('error')\n"
        "from vhd.export import export, read_table, EXPORT_FORMATS\nfrom vhd.labels import import_labels, read_labels\n"
        "from vhd.compare import compare, build_queue\nfrom vhd.icl import search_icl\n"
        "from vhd.align import align_ratings\nfrom vhd.store import Store\nfrom vhd.bench.metrics import cohen_kappa\n"
        "import vhd\nvhd.progress, vhd.errors, vhd.annotate_async\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_a_name_that_moved_warns_once_then_is_cached() -> None:
    import vhd.store as store_pkg

    store_pkg.__dict__.pop("read_table", None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        from vhd.store import read_table  # noqa: F401
        from vhd.store import read_table as again  # noqa: F401
    assert [str(w.message) for w in seen] == [
        f"vhd.store.read_table moved to vhd.export.read_table; the old name goes in vhd {REMOVAL_RELEASE}"
    ]
