"""What an HF export wrote (`vhd.export.hf.export_hf`); its dataset card is `vhd.export.hf_card`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class HfExport:
    """What an HF export wrote.

    Attributes:
        out: The dataset folder (``load_from_disk`` opens it).
        splits: Rows per split.
        kinds: Rows per kind.
        harmful: Rows whose ``harmful`` is 1 (refusals counted as harmful included).
        refused: Rows whose status is ``refused`` (a model declined), whatever their ``harmful``.
        refused_harmful: Refused rows counted as harmful (the rule ``refusal_is_harmful``).
        refusal_is_harmful: Each configuration's rule: whether a refusal made the sample harmful.
        categories: Rows per category.
        models: Model specs of the runs behind the rows, by role.
        config_hashes: Configurations behind the rows.
        left_out: ``(sample id, why)`` for each annotation not written (undecided, unless asked).
        media_problems: ``(sample id, why)`` for rows written without their media.
        pushed_to: The hub repository, when pushed.
        root: The folder ``path`` / ``video_path`` are relative to (None: written as stored).
    """

    out: Path
    splits: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)
    harmful: int = 0
    refused: int = 0
    refused_harmful: int = 0
    refusal_is_harmful: dict[str, bool] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)
    models: dict[str, list[str]] = field(default_factory=dict)
    config_hashes: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    media_problems: list[tuple[str, str]] = field(default_factory=list)
    pushed_to: str | None = None
    root: Path | None = None

    @property
    def written(self) -> int:
        """Rows written in all splits."""
        return sum(self.splits.values())
