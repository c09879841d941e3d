"""Reading policy files: YAML or TOML, validated, with errors that name the line.

Every problem is one `PolicyError` line of the form ``FILE:LINE: WHERE: WHAT; how to fix it``:
an unknown key, a duplicate category id or YAML key, an empty severity scale, a value of the
wrong type, a file over `MAX_POLICY_BYTES` (refused before it is parsed), YAML aliases (refused,
so a small file cannot expand into a huge one).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vhd.errors import ConfigError
from vhd.policy.model import Policy

MAX_POLICY_BYTES = 2 * 1024 * 1024
"""The largest policy file read (2 MiB); a larger one is refused before parsing."""

DEFAULT_POLICY = "vhd11k"
"""Name of the packaged default policy: the paper's definition of harmful and the VHD11K categories."""

SCHEMA_FILE = "policy.schema.json"
"""The shipped JSON Schema of a policy file, in ``vhd/policy/data/``."""

Path_ = tuple[str | int, ...]


class PolicyError(ConfigError):
    """A policy file is missing, too large, unparsable or invalid (one line, with the line number)."""


@functools.lru_cache(maxsize=1)
def default_policy() -> Policy:
    """The packaged default policy (``vhd11k``): the paper's definition and the VHD11K taxonomy."""
    from importlib.resources import files

    text = files("vhd.policy").joinpath("data", f"{DEFAULT_POLICY}.yaml").read_text(encoding="utf-8")
    return parse_policy(text, source=f"<packaged {DEFAULT_POLICY} policy>")


def is_default(policy: Policy | None) -> bool:
    """Whether ``policy`` is absent or has the packaged default's content (it then changes nothing)."""
    return policy is None or policy.content_hash == default_policy().content_hash


def load_policy(path: str | os.PathLike[str] | Policy | None = None) -> Policy:
    """Load and validate a policy file, or the packaged default.

    Args:
        path: A ``.yaml``/``.yml`` or ``.toml`` file; None or ``"vhd11k"`` for the default; a
            `Policy` is returned as it is.

    Returns:
        The validated policy.

    Raises:
        PolicyError: A missing file, one over `MAX_POLICY_BYTES`, a syntax error or invalid
            content (one line naming the file and line).
    """
    if isinstance(path, Policy):
        return path
    if path is None or str(path) == DEFAULT_POLICY:
        return default_policy()
    return parse_policy(read_policy_text(path), source=str(Path(path).expanduser()), toml=_is_toml(path))


def read_policy_text(path: str | os.PathLike[str]) -> str:
    """A policy file's text, refused when over `MAX_POLICY_BYTES` (checked before reading it whole).

    Raises:
        PolicyError: Missing, unreadable, too large or not UTF-8.
    """
    p = Path(path).expanduser()
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {p}: {exc.strerror or exc}; check the path") from None
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyError(
            f"{p}: the policy file is over {MAX_POLICY_BYTES // (1024 * 1024)} MB; a policy is a few pages of "
            "text: move example media out of it (examples name paths)"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{p}: not UTF-8 text (byte {exc.start}); save the policy as UTF-8") from None


def _is_toml(path: str | os.PathLike[str]) -> bool:
    return Path(path).suffix.lower() == ".toml"


def parse_policy(text: str, *, source: str = "policy", toml: bool = False) -> Policy:
    """Validate a policy's text (YAML, or TOML with ``toml=True``) and build the `Policy`.

    Args:
        text: The file's text.
        source: How errors name it (the path).
        toml: Parse as TOML instead of YAML.

    Raises:
        PolicyError: The first problem, as ``SOURCE:LINE: where: what; fix``.
    """
    if len(text.encode("utf-8")) > MAX_POLICY_BYTES:
        raise PolicyError(f"{source}: the policy is over {MAX_POLICY_BYTES // (1024 * 1024)} MB; shorten it")
    data, lines = _parse_toml(text, source) if toml else _parse_yaml(text, source)
    if not isinstance(data, Mapping):
        raise PolicyError(f"{source}:1: a policy is a mapping with name, version and categories at the top level")
    _check_duplicates(data, lines, source)
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(_first_error(exc, lines, source)) from None


def _where(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


def _line_of(path: Path_, lines: Mapping[Path_, int]) -> int:
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return 1


_HINTS = {
    "extra_forbidden": "remove it or check its spelling; the keys are in vhd/policy/data/policy.schema.json",
    "string_type": 'quote it, e.g. version: "2"',
    "too_short": "give at least one entry (leave the key out for none)",
    "list_type": "write a list, e.g. [a, b]",
    "missing": "add it",
    "string_pattern_mismatch": "ids are lower case letters, digits, '_', '.', '-'; codes one capital letter",
    "bool_parsing": "write true or false",
}


def _first_error(exc: ValidationError, lines: Mapping[Path_, int], source: str) -> str:
    errors = exc.errors()
    # an unknown key first: a misspelt key is also the reason a required one is missing
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc: Path_ = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in ("str", "MediumText")))
    kind = err["type"]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        msg = f"unknown key {loc[-1]!r}"
    if kind == "too_short" and loc and loc[-1] == "severity":
        msg = "the severity scale is empty"
        hint = "list its levels mildest first, e.g. - {name: low, meaning: mild}; or remove the key for no scale"
    else:
        hint = _HINTS.get(kind, "")
    where = _where(loc[:-1] if kind == "extra_forbidden" else loc)
    return f"{source}:{_line_of(loc, lines)}: {where}: {msg}" + (f"; {hint}" if hint else "")


def _check_duplicates(data: Mapping[str, Any], lines: Mapping[Path_, int], source: str) -> None:
    cats = data.get("categories")
    if not isinstance(cats, list):
        return
    seen: dict[str, int] = {}
    for i, cat in enumerate(cats):
        if not isinstance(cat, Mapping) or not isinstance(cat.get("id"), str):
            continue
        cid = cat["id"].strip()
        if cid in seen:
            line = _line_of(("categories", i, "id"), lines)
            first = _line_of(("categories", seen[cid], "id"), lines)
            raise PolicyError(
                f"{source}:{line}: categories[{i}].id: duplicate category id {cid!r} (first on line {first}); "
                "give each category its own id"
            )
        seen[cid] = i


def _parse_yaml(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise PolicyError(f"{source}:{line}: YAML syntax error: {exc.problem or exc.context}; fix the syntax") from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"{source}:1: YAML syntax error: {str(exc).splitlines()[0]}; fix the syntax") from None
    lines: dict[Path_, int] = {}
    if root is None:
        return None, lines
    _walk(root, (), lines, set(), source)
    try:
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:  # a tag or value the composer accepted but the constructor did not
        raise PolicyError(f"{source}:1: YAML error: {str(exc).splitlines()[0]}; fix the value") from None
    return data, lines


def _walk(node: Any, path: Path_, lines: dict[Path_, int], seen: set[int], source: str) -> None:
    import yaml

    if id(node) in seen:
        raise PolicyError(
            f"{source}:{node.start_mark.line + 1}: {_where(path)}: YAML aliases (*name) are not allowed in a "
            "policy; write the text out"
        )
    seen.add(id(node))
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        keys: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in keys:
                raise PolicyError(
                    f"{source}:{line}: {_where(path)}: duplicate key {key!r} (first on line {keys[key]}); keep one"
                )
            keys[key] = line
            lines[(*path, key)] = line
            _walk(value_node, (*path, key), lines, seen, source)
            lines[(*path, key)] = line  # the key's line, not its value's
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, seen, source)


_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"^\s*\"?([A-Za-z0-9_\-]+)\"?\s*=")


def _parse_toml(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"line (\d+)", msg)
        line = m.group(1) if m else "1"
        raise PolicyError(f"{source}:{line}: TOML syntax error: {msg.split(' (at')[0]}; fix the syntax") from None
    return data, _toml_lines(text)


def _toml_lines(text: str) -> dict[Path_, int]:
    """Where the top-level keys, ``[[categories]]`` / ``[[severity]]`` entries and their keys are.

    TOML parsers keep no positions; this reads the common layout (array-of-tables entries, one
    key per line), which is what errors need to point at.
    """
    lines: dict[Path_, int] = {}
    table: Path_ = ()
    counts: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        m = _TOML_TABLE.match(raw)
        if m:
            name = m.group(1).replace('"', "").strip()
            parts = name.split(".")
            if raw.strip().startswith("[["):
                head = ".".join(parts)
                index = counts.get(head, 0)
                counts[head] = index + 1
                if len(parts) == 1:
                    table = (parts[0], index)
                else:  # [[categories.examples]]: inside the latest category
                    parent = table[:2] if len(table) >= 2 else (parts[0], max(counts.get(parts[0], 1) - 1, 0))
                    sub = counts.get(f"{head}@{parent}", 0)
                    counts[f"{head}@{parent}"] = sub + 1
                    table = (*parent, parts[-1], sub)
            else:
                table = tuple(parts)
            lines.setdefault(table, n)
            continue
        k = _TOML_KEY.match(raw)
        if k:
            lines.setdefault((*table, k.group(1)), n)
    return lines


def missing_examples(path: str | os.PathLike[str]) -> list[str]:
    """One line per example media file of a policy file that is not there (``FILE:LINE: where: ...``).

    Example paths resolve against the policy file's folder, as `vhd annotate --policy` reads them.

    Raises:
        PolicyError: The policy itself is invalid.
    """
    p = Path(path).expanduser()
    text = read_policy_text(p)
    toml = _is_toml(p)
    policy = parse_policy(text, source=str(p), toml=toml)
    lines = (_parse_toml(text, str(p)) if toml else _parse_yaml(text, str(p)))[1]
    out: list[str] = []
    for i, cat in enumerate(policy.categories):
        for j, ex in enumerate(cat.examples):
            media = Path(ex.path).expanduser()
            if not (media if media.is_absolute() else p.parent / media).exists():
                where: Path_ = ("categories", i, "examples", j, "path")
                out.append(
                    f"{p}:{_line_of(where, lines)}: {_where(where)}: no such file {ex.path!r} "
                    f"(relative to {p.parent}); fix the path or remove the example"
                )
    return out


def policy_json_schema() -> dict[str, Any]:
    """The JSON Schema of a policy file, generated from `Policy` (what `SCHEMA_FILE` ships)."""
    schema = Policy.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
    }


def shipped_json_schema() -> dict[str, Any]:
    """The JSON Schema shipped in the package (`SCHEMA_FILE`)."""
    from importlib.resources import files

    data: dict[str, Any] = json.loads(files("vhd.policy").joinpath("data", SCHEMA_FILE).read_text(encoding="utf-8"))
    return data


def schema_text() -> str:
    """`policy_json_schema` as the text of `SCHEMA_FILE` (two-space indent, final newline)."""
    return json.dumps(policy_json_schema(), indent=2, ensure_ascii=False) + "\n"
