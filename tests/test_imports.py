"""`import vhd` and `vhd --help` stay light: no heavy library is imported (timings: benchmarks/)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = {
    "torch", "transformers", "diffusers", "numpy", "PIL", "av", "httpx", "httpx2", "aiohttp", "openai", "pyarrow",
    "sklearn", "matplotlib", "sentence_transformers", "onnxruntime", "nudenet", "ray", "cv2", "rich", "yaml",
}  # fmt: skip


def _imported_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_vhd_loads_nothing_heavy() -> None:
    loaded = _imported_after("import vhd")
    assert not loaded & (HEAVY | {"pydantic"}), sorted(loaded & HEAVY)


def test_building_the_cli_parser_loads_nothing_heavy() -> None:
    loaded = _imported_after("from vhd.cli.main import build_parser\nbuild_parser()")
    # pydantic too: `vhd.config` builds its models at import (hundreds of ms); help text takes
    # defaults from `vhd.defaults`, and each command imports the config inside `run`
    light = {"pydantic", "logging", "datasets", "shtab", "platformdirs"}
    assert not loaded & (HEAVY | light), sorted(loaded & (HEAVY | light))


def test_vhd_annotate_is_callable_after_its_package_is_imported() -> None:
    """`vhd.annotate(...)` (the README's API) survives `import vhd.annotate.loop` binding the package."""
    code = (
        "import vhd\nimport vhd.annotate.loop\nfrom vhd import annotate\n"
        "print(callable(vhd.annotate), callable(annotate))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["True", "True"]
