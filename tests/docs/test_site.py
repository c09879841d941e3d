"""The docs site builds strictly, README keeps its two commands, and every link into the docs holds.

`mkdocs build --strict` turns every warning (a page missing from the nav, a link to a missing page
or heading, a docstring mkdocstrings cannot read) into a failure; CI runs it through this test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import need_module

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

MAIN_JOB = (
    "python3.11 -m venv .venv && .venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu && "
    '.venv/bin/pip install -e ".[local,video,examples]" && '
    ".venv/bin/vhd examples examples/ && .venv/bin/vhd annotate examples/ --store run.db"
)
TEST_JOB = (
    'python3.11 -m venv .venv && .venv/bin/pip install -q -e ".[test]" -c constraints/test.txt && '
    '.venv/bin/pip install -q --no-deps "invisible-watermark>=0.2" "PyWavelets>=1.4" "rapidocr-onnxruntime>=1.4" && '
    ".venv/bin/lint-imports && .venv/bin/python -m pytest -n auto --dist loadfile"
)


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    need_module("mkdocs", "pip install -e '.[docs]'")
    need_module("material", "pip install -e '.[docs]'")
    need_module("mkdocstrings_handlers.python", "pip install -e '.[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240, check=False)


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "tutorial" / "index.html").is_file()
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    # the API reference is generated from the code: a real signature and a docstring's text
    assert "batch_api" in reference
    assert "Annotate images, videos, frame folders and manifests" in reference


@pytest.mark.slow
def test_a_broken_heading_link_fails_the_build(tmp_path: Path) -> None:
    """The strictness is real: a link to a heading that does not exist stops the build."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [there](other.md#no-such-heading).\n", encoding="utf-8")
    (docs / "other.md").write_text("# Other\n\n## A heading\n", encoding="utf-8")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[0]
    assert "paths: [src]" in config
    config = config.replace("paths: [src]", f"paths: [{json.dumps(str(ROOT / 'src'))}]")  # relative to the config
    (tmp_path / "mkdocs.yml").write_text(config + "\nnav:\n  - index.md\n  - other.md\n", encoding="utf-8")
    done = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-heading" in done.stdout + done.stderr


def test_readme_keeps_the_two_commands_and_ci_runs_the_second() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    assert MAIN_JOB in blocks
    assert TEST_JOB in blocks
    assert readme.index(MAIN_JOB) < readme.index(TEST_JOB)
    assert TEST_JOB in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()  # verbatim, as one line
    assert len(readme.splitlines()) < 120, "README stays a newcomer's page; the reference lives in docs/"


def _anchors(page: Path) -> set[str]:
    """The heading ids of a docs page, as the site's Markdown gives them."""
    need_module("markdown", "pip install -e '.[docs]'")
    from markdown.extensions.toc import slugify

    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    heads = re.findall(r"^#{1,6} (.+)$", text, flags=re.M)
    return {slugify(re.sub(r"[`*]", "", h).strip(), "-") for h in heads}


def _doc_links(text: str) -> list[str]:
    return re.findall(r"(?<![\w/])docs/[\w/.-]+\.md(?:#[\w-]+)?", text)


def test_links_into_the_docs_from_readme_and_src_lead_somewhere() -> None:
    """README and every message in src/ that names a docs page (and heading) name real ones."""
    texts = (p for p in sorted((ROOT / "src").rglob("*")) if p.suffix in {".py", ".yaml", ".txt", ".html", ".js"})
    sources = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *texts]
    links = [(src, link) for src in sources for link in _doc_links(src.read_text(encoding="utf-8"))]
    assert any(src.name == "README.md" for src, _ in links), "README links into the docs"
    for src, link in links:
        name, _, anchor = link.partition("#")
        page = ROOT / name
        assert page.is_file(), f"{src.relative_to(ROOT)}: {link}: no such page"
        if anchor:
            assert anchor in _anchors(page), f"{src.relative_to(ROOT)}: {link}: no such heading"


def test_no_message_in_src_sends_readers_to_the_readme() -> None:
    """The reference moved to docs/: src/ points there (a dataset card named README.md is not a pointer)."""
    offenders = []
    for path in sorted((ROOT / "src").rglob("*")):
        if path.suffix not in {".py", ".yaml", ".txt", ".html", ".js"}:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"README(?!\.md)|the README|README's", line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_every_command_has_an_example_in_the_docs() -> None:
    from vhd.cli.main import COMMANDS

    examples = "\n".join(
        block
        for page in sorted((DOCS / "commands").glob("*.md"))
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    )
    missing = [name for name in COMMANDS if not re.search(rf"(^|[\s$(]){re.escape('vhd ' + name)}\b", examples, re.M)]
    assert not missing, f"commands without an example in docs/commands/: {missing}"


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages == set(re.findall(r"[\w/-]+\.md", nav))
