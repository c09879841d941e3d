"""The policy model: what a deployer calls harmful, by category, with exceptions and severity.

A policy file (YAML or TOML, `vhd.policy.load.load_policy`) holds one `Policy`: a name and a
version, a general definition of harmful, categories (each with what it forbids and what it
allows: the exceptions, in plain sentences), an optional ordered severity scale, and optional
example media per category. Its `Policy.content_hash` (sha256 of a canonical JSON form, so
comments, key order and quoting do not count) names it in the configuration hash and the store.
"""

from __future__ import annotations

import functools
import hashlib
import json
import string
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from vhd.taxonomy import Taxonomy

Medium = Literal["image", "video"]

_ID_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
_CODE_LETTERS = string.ascii_uppercase


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class MediumText(_Strict):
    """One text per medium, for a definition that reads differently for images and videos."""

    image: str = Field(min_length=1, description="The text for images.")
    video: str = Field(min_length=1, description="The text for videos.")


class PolicyExample(_Strict):
    """A sample with the decision the policy expects for it (an in-context example).

    Attributes:
        path: An image, a video or a frame folder, relative to the policy file's folder.
        harmful: The expected decision.
        reason: The short reason the judge should give (the category's name when harmful and empty).
        severity: The expected severity level's name (harmful examples, with a scale only).
    """

    path: str = Field(min_length=1, description="An image, video or frame folder, relative to the policy file.")
    harmful: bool = Field(description="The decision the policy expects for this sample.")
    reason: str = Field(default="", description="The short reason the judge should give.")
    severity: str | None = Field(default=None, description="The expected severity level (harmful examples only).")


class PolicyCategory(_Strict):
    """One category of harm.

    Attributes:
        id: A short identifier, unique in the policy (lower case letters, digits, ``_ . -``).
        name: The human-readable name (the id when not given).
        code: One capital letter for tables and multi-class prompts (the next free letter when not given).
        description: What the category covers, in a sentence or two.
        forbids: What must not be shown, one plain phrase each.
        allows: The exceptions: what may be shown although it touches this category.
        examples: Example media with their expected decisions.
    """

    id: str = Field(pattern=_ID_PATTERN, description="Unique id: lower case letters, digits, '_', '.', '-'.")
    name: str = Field(default="", description="Human-readable name; the id when empty.")
    code: str | None = Field(
        default=None, pattern=r"^[A-Z]$", description="One capital letter; the next free one when absent."
    )
    description: str = Field(min_length=1, description="What the category covers.")
    forbids: list[str] = Field(default_factory=list, description="What must not be shown, one phrase each.")
    allows: list[str] = Field(default_factory=list, description="Exceptions: what may be shown, one sentence each.")
    examples: list[PolicyExample] = Field(default_factory=list, description="Example media with expected decisions.")

    @field_validator("forbids", "allows")
    @classmethod
    def _non_empty_items(cls, value: list[str]) -> list[str]:
        if any(not item for item in value):
            raise ValueError("every entry must be a non-empty sentence")
        return value

    @property
    def title(self) -> str:
        """The name, or the id when the policy gives none."""
        return self.name or self.id


class SeverityLevel(_Strict):
    """One level of the severity scale.

    Attributes:
        name: The level's name, as the judge says it and exports write it (``high``).
        meaning: What the level means.
    """

    name: str = Field(min_length=1, max_length=64, description="The level's name (what the judge answers).")
    meaning: str = Field(min_length=1, description="What the level means.")

    @field_validator("name")
    @classmethod
    def _not_a_number(cls, value: str) -> str:
        if value.isdigit():
            raise ValueError("a level's name cannot be a number (numbers pick a level by its position)")
        return value


class Policy(_Strict):
    """A moderation policy: categories with exceptions, and an ordered severity scale.

    Attributes:
        name: The policy's name.
        version: Its version; bump it whenever the policy changes.
        description: Free text about the policy.
        definition: What counts as harmful in general: one text, or one per medium (``image``,
            ``video``). Empty: the categories alone define it.
        allows: Exceptions that hold across every category.
        categories: The categories of harm, in order (at least one).
        severity: The ordered severity scale, mildest first; None: the policy has no scale.
    """

    name: str = Field(min_length=1, description="The policy's name.")
    version: str = Field(min_length=1, description='Its version, as a string (quote it: version: "2").')
    description: str = Field(default="", description="Free text about the policy.")
    definition: str | MediumText = Field(
        default="", description="What counts as harmful in general: one text, or {image, video}."
    )
    allows: list[str] = Field(default_factory=list, description="Exceptions that hold across every category.")
    categories: list[PolicyCategory] = Field(min_length=1, description="The categories of harm, in order.")
    severity: list[SeverityLevel] | None = Field(
        default=None, min_length=1, description="The ordered severity scale, mildest first (omit for none)."
    )

    @model_validator(mode="after")
    def _unique(self) -> Policy:
        seen_ids: dict[str, int] = {}
        for i, cat in enumerate(self.categories):
            if cat.id in seen_ids:
                raise ValueError(f"duplicate category id {cat.id!r} (categories {seen_ids[cat.id]} and {i})")
            seen_ids[cat.id] = i
        codes = [c.code for c in self.categories if c.code]
        if len(set(codes)) != len(codes):
            raise ValueError("two categories share a code: give each its own letter")
        levels = [level.name.lower() for level in self.severity or ()]
        if len(set(levels)) != len(levels):
            raise ValueError("two severity levels share a name")
        for cat in self.categories:
            for ex in cat.examples:
                if ex.severity is not None and ex.severity.lower() not in levels:
                    raise ValueError(
                        f"example {ex.path!r} of {cat.id!r} has severity {ex.severity!r}, which the scale lacks"
                    )
        return self

    def to_data(self) -> dict[str, Any]:
        """The policy as plain data in the file format (every key, defaults included)."""
        return self.model_dump(mode="json")

    def to_yaml(self) -> str:
        """The policy as a YAML document in the file format (what the store keeps); it loads back to the same hash."""
        import yaml

        return str(yaml.safe_dump(self.to_data(), sort_keys=False, allow_unicode=True, width=100))

    @functools.cached_property
    def content_hash(self) -> str:
        """sha256 of the canonical form: sorted-key compact JSON of `to_data` (comments and layout do not count)."""
        blob = json.dumps(self.to_data(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    @property
    def key(self) -> str:
        """``name@version``: how exports and messages name the policy."""
        return f"{self.name}@{self.version}"

    @property
    def severity_names(self) -> list[str]:
        """The scale's level names, mildest first (empty without a scale)."""
        return [level.name for level in self.severity or ()]

    def severity_level(self, value: str) -> str | None:
        """The scale's level named by ``value`` (any case) or by its 1-based position, else None."""
        text = value.strip()
        names = self.severity_names
        if text.isdigit():
            index = int(text)
            return names[index - 1] if 1 <= index <= len(names) else None
        for name in names:
            if name.lower() == text.lower():
                return name
        return None

    def codes(self) -> list[str]:
        """Each category's code: its own, or the next letter no category uses, in order."""
        used = {c.code for c in self.categories if c.code}
        free = iter(c for c in _CODE_LETTERS if c not in used)
        out: list[str] = []
        for cat in self.categories:
            code = cat.code or next(free, None)
            if code is None:
                raise ValueError("more than 26 categories: vhd gives each a letter code, so at most 26")
            out.append(code)
        return out

    def definition_for(self, medium: Medium) -> str:
        """The general definition for one medium (the shared text when there is one)."""
        return self.definition if isinstance(self.definition, str) else getattr(self.definition, medium)

    def to_taxonomy(self) -> Taxonomy:
        """The policy's categories as a `vhd.taxonomy.Taxonomy` (for `vhd categorize` and bench).

        Codes, names and descriptions carry over; a category's ``forbids`` become the taxonomy's
        example reasons; the taxonomy is named and versioned like the policy.
        """
        from vhd.taxonomy import Category, Taxonomy

        codes = self.codes()
        categories = tuple(
            Category(code, cat.title, cat.description, tuple(cat.forbids))
            for code, cat in zip(codes, self.categories, strict=True)
        )
        free = next(c for c in "KLMNOPQRSTUVWXYZABCDEFGHIJ" if c not in codes) if len(codes) < 26 else None
        if free is None:
            raise ValueError("26 categories leave no letter for the unharmful class: at most 25 categories")
        unharmful = Category(free, "Unharmful", "Nothing in the sample falls under any harm category.")
        return Taxonomy(
            name=self.name,
            version=self.version,
            categories=categories,
            unharmful=unharmful,
            description=self.description,
        )
