"""Harm taxonomies: categories with codes, names, definitions and example reasons.

A taxonomy file (YAML, JSON or TOML) looks like this::

    name: my-policy            # optional, default: the file's stem
    version: "2"               # required; bump it whenever the categories change
    description: ...           # optional
    unharmful: {code: K, name: Unharmful}   # optional: the class for "not harmful"
    categories:
      - code: A                # one letter A-Z, unique
        name: Violence and Threats          # unique (case-insensitive)
        definition: Physical harm shown or implied ...
        examples: [bloody scene, gun pointed at a person]   # optional reasons

The packaged default is VHD11K's ten categories (`default_taxonomy`). Loading validates the
file and fails with a one-line `TaxonomyError` that names the file, the entry and the fix.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError

DEFAULT_TAXONOMY = "vhd11k"
"""Name of the packaged taxonomy used when none is given."""

_TOP_KEYS = {"name", "version", "description", "unharmful", "categories"}
_CATEGORY_KEYS = {"code", "name", "definition", "examples"}
_UNHARMFUL_KEYS = {"code", "name", "definition"}
_CODE = re.compile(r"[A-Z]")
_CODED_NAME = re.compile(r"([A-Za-z])\s*[.):\-]\s*(.+)")
_DEFAULT_UNHARMFUL_DEFINITION = "Nothing in the sample falls under any harm category."


class TaxonomyError(ConfigError):
    """A taxonomy file is missing, unreadable or invalid (one line, says what to fix)."""


@dataclass(frozen=True)
class Category:
    """One harm category.

    Attributes:
        code: One capital letter, unique in its taxonomy (``A``).
        name: Unique human-readable name (``Violence and Threats``).
        definition: What belongs in it, in a few sentences.
        examples: Short reasons that belong in it (used by the ``embed`` method and prompts).
    """

    code: str
    name: str
    definition: str
    examples: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``"A. Violence and Threats"``: how prompts and tables show it."""
        return f"{self.code}. {self.name}"


@dataclass(frozen=True)
class Taxonomy:
    """An ordered set of harm categories with a version.

    Attributes:
        name: The taxonomy's name (``vhd11k``).
        version: Its version; categorisations are stored per name and version.
        categories: The categories in order.
        unharmful: The class that means "not harmful" (code ``K``, name ``Unharmful`` by
            default), kept apart from `categories`; multi-class scoring adds it as one more class.
        description: Free text.
        source: The file it came from (None for one built in code).
    """

    name: str
    version: str
    categories: tuple[Category, ...]
    unharmful: Category = field(default_factory=lambda: Category("K", "Unharmful", _DEFAULT_UNHARMFUL_DEFINITION))
    description: str = ""
    source: str | None = None

    def __iter__(self) -> Iterator[Category]:
        return iter(self.categories)

    def __len__(self) -> int:
        return len(self.categories)

    @property
    def key(self) -> str:
        """``name@version``, how stored results refer to this taxonomy."""
        return f"{self.name}@{self.version}"

    @property
    def codes(self) -> list[str]:
        """Category codes in order."""
        return [c.code for c in self.categories]

    @property
    def names(self) -> list[str]:
        """Category names in order."""
        return [c.name for c in self.categories]

    @property
    def classes(self) -> list[Category]:
        """The categories followed by the unharmful class (for multi-class scoring)."""
        return [*self.categories, self.unharmful]

    @functools.cached_property
    def digest(self) -> str:
        """sha256 of the taxonomy's content (names, codes, definitions, examples)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    @functools.cached_property
    def _index(self) -> dict[str, Category]:
        index: dict[str, Category] = {}
        for cat in self.classes:
            index[cat.code.lower()] = cat
            index[name_key(cat.name)] = cat
        return index

    def find(self, value: str, *, unharmful: bool = False) -> Category | None:
        """Look a category up by code, name or ``"CODE. Name"``, ignoring case.

        Args:
            value: ``"f"``, ``"Explicit and Sexual Content"``, ``"F. Explicit and sexual content"``.
            unharmful: Also match the unharmful class (its code or name).

        Returns:
            The category, or None when nothing matches.
        """
        text = value.strip()
        cat = self._index.get(text.lower()) or self._index.get(name_key(text))
        if cat is None:
            m = _CODED_NAME.fullmatch(text)
            if m:
                by_code = self._index.get(m.group(1).lower())
                if by_code is not None and self._index.get(name_key(m.group(2))) is by_code:
                    cat = by_code
        if cat is self.unharmful and not unharmful:
            return None
        return cat

    def get(self, value: str) -> Category:
        """Like `find`, but an unknown value is an error.

        Raises:
            TaxonomyError: No category matches (the message lists the codes).
        """
        cat = self.find(value)
        if cat is None:
            raise TaxonomyError(
                f"unknown category {value!r} in taxonomy {self.key}: use a code ({self.code_range}) or a name"
            )
        return cat

    def is_unharmful(self, value: str) -> bool:
        """Whether a value names the unharmful class (its code or name, any case)."""
        return self.find(value, unharmful=True) is self.unharmful

    @property
    def code_range(self) -> str:
        """The codes as ``"A-J"`` when consecutive, else comma-separated."""
        codes = self.codes
        consecutive = all(ord(b) - ord(a) == 1 for a, b in itertools.pairwise(codes))
        if consecutive and len(codes) > 2:
            return f"{codes[0]}-{codes[-1]}"
        return ", ".join(codes)

    def normalize(self, value: str, *, unharmful: bool = False) -> str:
        """Map a code, ``"CODE. Name"`` or a name to the canonical name; keep other text stripped.

        Args:
            value: The text to normalise.
            unharmful: Also accept the unharmful class (else its code is an unknown code).

        Raises:
            ValueError: A single letter that is no code of this taxonomy.
        """
        text = value.strip()
        cat = self.find(text, unharmful=unharmful)
        if cat is not None:
            return cat.name
        if len(text) == 1 and text.isalpha():
            raise ValueError(f"unknown category code {text!r} (codes are {self.code_range})")
        return text

    def to_dict(self) -> dict[str, Any]:
        """The taxonomy as plain data, in the file format."""
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "unharmful": {
                "code": self.unharmful.code,
                "name": self.unharmful.name,
                "definition": self.unharmful.definition,
            },
            "categories": [
                {"code": c.code, "name": c.name, "definition": c.definition, "examples": list(c.examples)}
                for c in self.categories
            ],
        }

    def to_yaml(self) -> str:
        """The taxonomy as a YAML document that `load_taxonomy` reads back."""
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=100)


def name_key(name: str) -> str:
    """Normalise a category name for matching: lower case, ``&`` as ``and``, punctuation as spaces."""
    text = name.lower().replace("&", " and ")
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text).split())


@functools.lru_cache(maxsize=4)
def default_taxonomy() -> Taxonomy:
    """The packaged VHD11K taxonomy (ten categories A-J, unharmful K)."""
    from importlib.resources import files

    resource = files("vhd.taxonomy").joinpath("data", f"{DEFAULT_TAXONOMY}.yaml")
    return parse_taxonomy(
        _parse_text(resource.read_text(encoding="utf-8"), ".yaml", DEFAULT_TAXONOMY), DEFAULT_TAXONOMY
    )


def load_taxonomy(path: str | os.PathLike[str] | Taxonomy | None = None) -> Taxonomy:
    """Load and validate a taxonomy file (YAML, JSON or TOML), or the packaged default.

    Args:
        path: The file; None (or ``"vhd11k"``) for the packaged VHD11K taxonomy; a `Taxonomy`
            is returned as is.

    Returns:
        The validated taxonomy.

    Raises:
        TaxonomyError: Missing or unreadable file, syntax error, or invalid content.
    """
    if isinstance(path, Taxonomy):
        return path
    if path is None or str(path) == DEFAULT_TAXONOMY:
        return default_taxonomy()
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaxonomyError(
            f"cannot read taxonomy file {p}: {exc.strerror or exc}; check the path (or leave out --taxonomy)"
        ) from None
    return parse_taxonomy(_parse_text(text, p.suffix.lower(), str(p)), str(p), default_name=p.stem)


def _parse_text(text: str, suffix: str, label: str) -> Any:
    try:
        if suffix == ".toml":
            import tomllib

            return tomllib.loads(text)
        import yaml

        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TaxonomyError(f"cannot parse taxonomy file {label}: {first}; fix the syntax") from None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def parse_taxonomy(data: Any, source: str = "taxonomy", *, default_name: str | None = None) -> Taxonomy:
    """Validate parsed taxonomy data (a mapping in the file format) and build a `Taxonomy`.

    Args:
        data: The parsed file.
        source: How to name it in error messages (the file path).
        default_name: Name to use when the data has none.

    Raises:
        TaxonomyError: The first problem found, in one line.
    """

    def fail(message: str) -> TaxonomyError:
        return TaxonomyError(f"{source}: {message}")

    if not isinstance(data, Mapping):
        raise fail("must hold a mapping with 'version' and 'categories' at the top level")
    unknown = sorted(set(map(str, data)) - _TOP_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}; valid keys: {', '.join(sorted(_TOP_KEYS))}")
    version = _text(data.get("version"))
    if not version:
        raise fail("'version' is missing or empty: add one, e.g. version: \"1\"")
    name = _text(data.get("name")) or default_name or "custom"
    raw = data.get("categories")
    if not isinstance(raw, list) or not raw:
        raise fail("'categories' must be a non-empty list of {code, name, definition, examples}")
    categories: list[Category] = []
    by_code: dict[str, str] = {}
    by_name: dict[str, str] = {}
    for i, entry in enumerate(raw):
        cat = _category(entry, f"categories[{i}]", fail, _CATEGORY_KEYS)
        if cat.code in by_code:
            raise fail(
                f"categories[{i}]: duplicate code {cat.code!r} (also {by_code[cat.code]!r}): give each its own letter"
            )
        key = name_key(cat.name)
        if key in by_name:
            raise fail(f"categories[{i}]: duplicate name {cat.name!r} (also code {by_name[key]}): rename one")
        by_code[cat.code], by_name[key] = cat.name, cat.code
        categories.append(cat)
    unharmful = _unharmful(data.get("unharmful"), by_code, fail)
    if name_key(unharmful.name) in by_name:
        raise fail(f"unharmful: name {unharmful.name!r} is also a category name: rename one")
    return Taxonomy(
        name=name,
        version=version,
        categories=tuple(categories),
        unharmful=unharmful,
        description=_text(data.get("description")),
        source=source,
    )


def _category(entry: Any, where: str, fail: Any, keys: set[str], *, need_definition: bool = True) -> Category:
    if not isinstance(entry, Mapping):
        raise fail(f"{where} must be a mapping with code, name and definition")
    unknown = sorted(set(map(str, entry)) - keys)
    if unknown:
        raise fail(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(sorted(keys))}")
    code = _text(entry.get("code")).upper()
    if not _CODE.fullmatch(code):
        raise fail(f"{where}: code {entry.get('code')!r} must be one letter A-Z")
    name = _text(entry.get("name"))
    if not name:
        raise fail(f"{where} (code {code}): 'name' is missing or empty")
    if len(name) == 1:
        raise fail(f"{where} (code {code}): name {name!r} is one character and would read as a code: spell it out")
    definition = _text(entry.get("definition"))
    if not definition and need_definition:
        raise fail(f"{where} ({code}. {name}): 'definition' is missing or empty: say what belongs in it")
    raw_examples = entry.get("examples", [])
    if raw_examples is None:
        raw_examples = []
    if not isinstance(raw_examples, list) or not all(isinstance(e, str) and e.strip() for e in raw_examples):
        raise fail(f"{where} ({code}. {name}): 'examples' must be a list of non-empty strings")
    return Category(code, name, definition, tuple(e.strip() for e in raw_examples))


def _unharmful(raw: Any, by_code: Mapping[str, str], fail: Any) -> Category:
    if raw is None:
        free = [c for c in "KLMNOPQRSTUVWXYZABCDEFGHIJ" if c not in by_code]
        if not free:
            raise fail("all 26 codes are categories: add an 'unharmful' entry sharing none of them")
        return Category(free[0], "Unharmful", _DEFAULT_UNHARMFUL_DEFINITION)
    cat = _category(raw, "unharmful", fail, _UNHARMFUL_KEYS, need_definition=False)
    if cat.code in by_code:
        raise fail(f"unharmful: code {cat.code!r} is also the code of {by_code[cat.code]!r}: pick a free letter")
    return Category(cat.code, cat.name, cat.definition or _DEFAULT_UNHARMFUL_DEFINITION)
