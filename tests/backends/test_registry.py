import asyncio
import sys
from pathlib import Path

import pytest

from vhd.backends import GenerateConfig, Message, available, create_backend, split_spec
from vhd.backends.scripted import ScriptedBackend
from vhd.errors import ConfigError


def test_split_at_first_colon_only() -> None:
    assert split_spec("openai:llama3.2-vision:11b") == ("openai", "llama3.2-vision:11b")
    assert split_spec("hf:/models/qwen:v2") == ("hf", "/models/qwen:v2")
    for bad in ("gpt-4o", ":model", "openai:", ""):
        with pytest.raises(ConfigError, match="BACKEND:MODEL"):
            split_spec(bad)


def test_unknown_backend_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as err:
        create_backend("nope:model")
    assert "hf" in str(err.value) and "openai" in str(err.value) and "scripted" in str(err.value)


def test_alias_table_reaches_a_second_endpoint() -> None:
    backend = create_backend("vllm:some-model", {"vllm": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"}})
    assert backend.name == "openai" and backend.spec == "vllm:some-model"


def test_builtin_imports_are_lazy() -> None:
    import subprocess

    heavy = "('torch', 'transformers', 'openai', 'av', 'sklearn', 'matplotlib', 'sentence_transformers')"
    code = f"import sys, vhd, vhd.backends, vhd.cli.main; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_plugin_backend_through_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "vhd_echo_plugin.py"
    pkg.write_text(
        "from vhd.backends.scripted import ScriptedBackend\n"
        "class Echo(ScriptedBackend):\n"
        "    name = 'echo'\n"
        "    def __init__(self, model, options=None):\n"
        "        super().__init__(model, {'script': {'default': 'No, echo ' + model + '.'}})\n"
    )
    dist = tmp_path / "vhd_echo_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vhd-echo-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[vhd.backends]\necho = vhd_echo_plugin:Echo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "echo" in available()
    backend = create_backend("echo:hello")
    assert isinstance(backend, ScriptedBackend)
    out = asyncio.run(backend.generate([Message("user", "hi")], GenerateConfig()))
    assert out.text == "No, echo hello."
