"""The category crosswalk: other detectors' and benchmarks' labels to and from VHD11K's codes.

The mapping is a versioned data file (``taxonomy/data/crosswalk.yaml``) whose comments explain
each decision; a user may pass their own file of the same layout.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError


@dataclass(frozen=True)
class LabelMap:
    """One external label's mapping.

    Attributes:
        to: VHD11K codes it corresponds to (empty: none).
        images: Whether the label applies to images at all.
    """

    to: tuple[str, ...]
    images: bool


@dataclass(frozen=True)
class Crosswalk:
    """Schemes of external labels, each mapped to VHD11K codes.

    Attributes:
        version: The file's version.
        schemes: Scheme name -> label -> mapping.
        detectors: vhd detector name -> scheme name.
    """

    version: str
    schemes: dict[str, dict[str, LabelMap]]
    detectors: dict[str, str]

    def scheme_for(self, detector: str) -> str | None:
        """The scheme a detector's raw labels use, when the crosswalk has one."""
        return self.detectors.get(detector)

    def to_vhd(self, scheme: str, labels: Mapping[str, float] | list[str], *, images: bool = True) -> list[str]:
        """VHD11K codes of fired labels, the most confident label's first (labels matched ignoring case).

        Args:
            scheme: The scheme name (``hive``, ``nudenet``...).
            labels: Fired labels with confidences, or a list in order.
            images: Skip labels that do not apply to images.
        """
        table = {k.lower(): v for k, v in self.schemes.get(scheme, {}).items()}
        ordered = sorted(labels, key=lambda k: -labels[k]) if isinstance(labels, Mapping) else list(labels)
        out: list[str] = []
        for label in ordered:
            m = table.get(str(label).lower())
            if m is None or (images and not m.images):
                continue
            out.extend(c for c in m.to if c not in out)
        return out

    def to_scheme(self, scheme: str, code: str) -> list[str]:
        """The scheme's labels that map to a VHD11K code (the reverse direction)."""
        return [label for label, m in self.schemes.get(scheme, {}).items() if code.upper() in m.to]


@functools.lru_cache(maxsize=1)
def default_crosswalk() -> Crosswalk:
    """The packaged crosswalk, read once."""
    return load_crosswalk()


def load_crosswalk(path: str | os.PathLike[str] | None = None) -> Crosswalk:
    """Load the packaged crosswalk, or a file of the same layout.

    Raises:
        ConfigError: The file is missing or malformed (the message names the entry).
    """
    import yaml

    if path is None:
        text = resources.files("vhd.taxonomy").joinpath("data/crosswalk.yaml").read_text(encoding="utf-8")
        where = "crosswalk.yaml"
    else:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read crosswalk {path}: {exc.strerror}; check the path") from exc
    data: Any = yaml.safe_load(text)
    if not isinstance(data, dict) or not isinstance(data.get("schemes"), dict) or "version" not in data:
        raise ConfigError(f"{where}: expected 'version' and a 'schemes' mapping; see vhd's crosswalk.yaml")
    schemes: dict[str, dict[str, LabelMap]] = {}
    detectors: dict[str, str] = {}
    for name, body in data["schemes"].items():
        if not isinstance(body, dict) or not isinstance(body.get("labels"), dict):
            raise ConfigError(f"{where}: scheme {name!r} needs a 'labels' mapping")
        table: dict[str, LabelMap] = {}
        for label, entry in body["labels"].items():
            if not isinstance(entry, dict) or not isinstance(entry.get("to", []), list):
                raise ConfigError(f"{where}: {name}.{label} must be {{to: [codes], images: true|false}}")
            table[str(label)] = LabelMap(
                tuple(str(c).upper() for c in entry.get("to", [])), bool(entry.get("images", True))
            )
        schemes[str(name)] = table
        for det in body.get("detectors") or []:
            detectors[str(det)] = str(name)
    return Crosswalk(version=str(data["version"]), schemes=schemes, detectors=detectors)
