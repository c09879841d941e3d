"""C2PA Content Credentials in media files: read them, and mark AI-generated media as synthetic.

`vhd generate` signs a C2PA manifest into each output (`vhd.synth.credentials`); `vhd ingest` and
``vhd fetch --store`` read the manifest of every incoming file with ``c2pa-python``
(``vhd[c2pa]``; without it nothing is read and nothing changes). A manifest whose signature
validates (``Valid``, or ``Trusted`` when the signer chains to a trust list) and whose actions
declare an AI source (IPTC digital source type ``trainedAlgorithmicMedia``,
``compositeWithTrainedAlgorithmicMedia`` or ``compositeSynthetic``) makes the sample
``source=synthetic``; the generator it names is recorded as *claimed* (the manifest says so; the
signer vouches for it, vhd does not), with the validation state, in the sample's
``meta["content_credentials"]``. An invalid manifest is recorded too, and changes nothing else.

Example:
    >>> found = read_credentials("photo.jpg")  # doctest: +SKIP
    >>> found.ai_generated, found.state, found.claimed_generator  # doctest: +SKIP
    (True, 'Valid', 'sdxl:stabilityai/stable-diffusion-xl-base-1.0')
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vhd.records import Sample, Source

IPTC = "http://cv.iptc.org/newscodes/digitalsourcetype/"
"""The IPTC digital source type vocabulary C2PA actions use."""

TRAINED_ALGORITHMIC_MEDIA = IPTC + "trainedAlgorithmicMedia"
"""What `vhd generate` declares: media made by a model trained on sampled content."""

AI_SOURCE_TYPES = frozenset(
    IPTC + name for name in ("trainedAlgorithmicMedia", "compositeWithTrainedAlgorithmicMedia", "compositeSynthetic")
)
"""Digital source types that declare AI generation (in whole or in part)."""

PROVENANCE_ASSERTION = "org.vhd.provenance"
"""The custom assertion holding vhd's provenance record in the manifests it signs."""

VALID_STATES = frozenset({"Valid", "Trusted"})
"""Validation states whose claims vhd acts on (``Invalid`` is recorded, not acted on)."""

MIME_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    ".mp4": "video/mp4",
    ".m4v": "video/mp4",
    ".mov": "video/quicktime",
}
"""Suffixes whose Content Credentials are read, with their MIME types."""


@dataclass(frozen=True)
class Credentials:
    """What a file's active C2PA manifest says, and whether its signature holds.

    Attributes:
        state: ``Valid``, ``Trusted`` or ``Invalid`` (the c2pa validation state).
        ai_generated: An action declares an AI digital source type.
        claimed_generator: The generator the manifest names (the action's software agent, else
            the claim generator), as claimed.
        claim_generator: The claim generator (the tool that signed), e.g. ``vhd 0.9``.
        signer: Common name and issuer of the signing certificate.
        failures: Validation failure codes (``signingCredential.untrusted`` for a certificate
            that chains to no trust list, as vhd's test certificate does).
        vhd_provenance: vhd's provenance record, when the manifest carries one.
    """

    state: str
    ai_generated: bool
    claimed_generator: str | None
    claim_generator: str | None
    signer: str | None
    failures: tuple[str, ...] = ()
    vhd_provenance: dict[str, Any] | None = None

    @property
    def valid(self) -> bool:
        """The manifest validates (its signature and hashes hold), trusted or not."""
        return self.state in VALID_STATES

    def to_meta(self) -> dict[str, Any]:
        """The record kept in a sample's ``meta["content_credentials"]``."""
        return {
            "state": self.state,
            "ai_generated": self.ai_generated,
            "claimed_generator": self.claimed_generator,
            "claim_generator": self.claim_generator,
            "signer": self.signer,
            "failures": list(self.failures),
        }


def c2pa_available() -> bool:
    """Whether ``c2pa-python`` is installed (``vhd[c2pa]``)."""
    return importlib.util.find_spec("c2pa") is not None


def read_credentials(path: str | os.PathLike[str]) -> Credentials | None:
    """The Content Credentials of a file, or None (no manifest, a format c2pa does not read, no c2pa).

    A manifest that c2pa finds but cannot parse comes back ``Invalid``.
    """
    mime = MIME_TYPES.get(Path(path).suffix.lower())
    if mime is None or not c2pa_available():
        return None
    import c2pa

    try:
        with open(path, "rb") as fh:
            reader = c2pa.Reader.try_create(mime, fh)
            if reader is None:
                return None
            with reader:
                state = reader.get_validation_state() or "Invalid"
                manifest = reader.get_active_manifest() or {}
                results = reader.get_validation_results() or {}
    except OSError:
        return None
    except c2pa.C2paError as exc:
        return Credentials("Invalid", False, None, None, None, (type(exc).__name__,))
    return _parse(state, manifest, results)


def _parse(state: str, manifest: dict[str, Any], results: dict[str, Any]) -> Credentials:
    ai = False
    agent: str | None = None
    provenance = None
    for assertion in manifest.get("assertions") or []:
        label = str(assertion.get("label", ""))
        data = assertion.get("data") or {}
        if label.startswith("c2pa.actions"):
            for action in data.get("actions") or []:
                if action.get("digitalSourceType") in AI_SOURCE_TYPES:
                    ai = True
                    software = action.get("softwareAgent")
                    name = software.get("name") if isinstance(software, dict) else software
                    agent = agent or (str(name) if name else None)
        elif label == PROVENANCE_ASSERTION and isinstance(data, dict):
            provenance = data
    infos = manifest.get("claim_generator_info") or []
    first = infos[0] if infos and isinstance(infos[0], dict) else {}
    claim = " ".join(str(first[k]) for k in ("name", "version") if first.get(k)) or manifest.get("claim_generator")
    info = manifest.get("signature_info") or {}
    signer = ", ".join(str(info[k]) for k in ("common_name", "issuer") if info.get(k)) or None
    active = results.get("activeManifest") or {}
    failures = tuple(str(f.get("code")) for f in active.get("failure") or [] if isinstance(f, dict))
    return Credentials(state, ai, agent or (claim or None), claim or None, signer, failures, provenance)


def mark_from_credentials(sample: Sample, path: str | os.PathLike[str]) -> Sample:
    """The sample with what its file's Content Credentials say (unchanged without any).

    A valid manifest that declares AI generation sets ``source=synthetic`` and, when the sample
    names none, the claimed generator; every manifest found is recorded in
    ``meta["content_credentials"]`` (with the source it overrode, if any).
    """
    found = read_credentials(path)
    if found is None:
        return sample
    record = found.to_meta()
    source, generator = sample.source, sample.generator
    if found.valid and found.ai_generated:
        if source is not None and source is not Source.SYNTHETIC:
            record["overrode_source"] = source.value
        source = Source.SYNTHETIC
        generator = generator or (f"claimed:{found.claimed_generator}" if found.claimed_generator else None)
    meta = {**sample.meta, "content_credentials": record}
    return replace(sample, source=source, generator=generator, meta=meta)
