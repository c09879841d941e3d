"""C2PA Content Credentials in media files: read them as claims, and act only on trusted ones.

`vhd generate` signs a C2PA manifest into each output (`vhd.synth.credentials`); `vhd ingest` and
``vhd fetch --store`` read the manifest of every incoming file with ``c2pa-python``
(``vhd[c2pa]``; without it nothing is read and nothing changes). A manifest is a *claim*: anyone
can make a certificate named "Adobe Content Authenticity Signer" and sign anything with it. So
every manifest found is recorded in the sample's ``meta["content_credentials"]`` with its
``trust``, one of:

- ``trusted``: its signature and hashes hold and its signer chains to a configured trust anchor
  (`TrustAnchors`: the C2PA trust list and the user's own anchors);
- ``untrusted``: its signature and hashes hold, but its signer chains to no configured anchor
  (a self-made certificate, vhd's test certificate, or no trust list configured);
- ``invalid``: its signature or hashes do not hold (edited or transplanted), or it cannot be parsed.

Only a *trusted* manifest whose actions declare an AI source (IPTC digital source type
``trainedAlgorithmicMedia``, ``compositeWithTrainedAlgorithmicMedia`` or ``compositeSynthetic``)
changes the sample, and only where the user declared nothing: it makes a sample without a
declared source ``source=synthetic`` (with the generator it names, as ``claimed:...``). A source
the user declared (``--source``, a manifest row, a URL list row) is never overridden; a trusted
claim that disagrees with it is recorded (``disagrees_with_source``). Every string kept from a
manifest (claimed generator, claim generator, signer, failure codes) is untrusted text: made
printable and bounded by `vhd.fileio.untrusted_text`.

Where the trust list comes from: vhd ships none and downloads nothing. The C2PA conformance
program publishes the official C2PA trust list as a PEM bundle (repository
``c2pa-org/conformance-public`` on GitHub, folder ``trust-list``); the Content Authenticity
Initiative's earlier interim list is at ``https://contentcredentials.org/trust/anchors.pem``.
Download one, then point ``[c2pa] trust_anchors`` of the user config at the file (or a folder
of PEM files); put your own CAs in ``[c2pa] user_anchors``.

Example:
    >>> found = read_credentials("photo.jpg", TrustAnchors.load(trust_anchors="C2PA-TRUST-LIST.pem"))  # doctest: +SKIP
    >>> found.ai_generated, found.trust, found.claimed_generator  # doctest: +SKIP
    (True, 'trusted', 'sdxl:stabilityai/stable-diffusion-xl-base-1.0')
"""

from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError
from vhd.fileio import untrusted_text
from vhd.records import CREDENTIALS_TRUST, Sample, Source, credentials_trust

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
"""c2pa validation states whose signature and hashes hold (``Trusted``: and whose signer is trusted)."""

TRUSTED, UNTRUSTED, INVALID = CREDENTIALS_TRUST
"""A manifest's ``trust``: only ``trusted`` claims change a sample."""

MAX_FAILURES = 16
"""Validation failure codes kept per manifest (a forged one may list thousands)."""

PEM_SUFFIXES = (".pem", ".crt", ".cer")
"""Files read from a trust-anchor folder."""

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

    Every string comes from the file and is kept as `vhd.fileio.untrusted_text` makes it
    (printable, one line, at most 256 characters).

    Attributes:
        state: ``Valid``, ``Trusted`` or ``Invalid`` (the c2pa validation state).
        ai_generated: An action declares an AI digital source type.
        claimed_generator: The generator the manifest names (the action's software agent, else
            the claim generator), as claimed.
        claim_generator: The claim generator (the tool that signed), e.g. ``vhd 0.9``.
        signer: Common name and issuer of the signing certificate, as the certificate says
            (anyone can name a certificate after anyone).
        failures: Validation failure codes (``signingCredential.untrusted`` for a certificate
            that chains to no configured trust anchor, as vhd's test certificate does).
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

    @property
    def trust(self) -> str:
        """``trusted`` (valid, signer chains to a configured anchor), ``untrusted`` (valid) or ``invalid``."""
        if self.state == "Trusted":
            return TRUSTED
        return UNTRUSTED if self.valid else INVALID

    def to_meta(self) -> dict[str, Any]:
        """The record kept in a sample's ``meta["content_credentials"]``."""
        return {
            "trust": self.trust,
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


@dataclass(frozen=True)
class TrustAnchors:
    """The certificates a manifest's signer must chain to for its claims to be ``trusted``.

    Attributes:
        trust_anchors: PEM certificates of a trust list (the C2PA trust list; see the module notes).
        user_anchors: PEM certificates of the user's own CAs.
        sources: The files they were read from (for messages).
    """

    trust_anchors: str = ""
    user_anchors: str = ""
    sources: tuple[str, ...] = ()

    @property
    def configured(self) -> bool:
        """Whether any anchor is set (without one no manifest is ``trusted``)."""
        return bool(self.trust_anchors or self.user_anchors)

    @classmethod
    def load(
        cls,
        trust_anchors: str | os.PathLike[str] | None = None,
        user_anchors: str | os.PathLike[str] | None = None,
    ) -> TrustAnchors:
        """Read anchors from PEM files or folders of them (``*.pem``, ``*.crt``, ``*.cer``).

        Raises:
            ConfigError: A path is missing, unreadable, or holds no PEM certificate.
        """
        texts: list[str] = []
        sources: list[str] = []
        for path in (trust_anchors, user_anchors):
            text, files = ("", []) if path is None else _read_pem(Path(path).expanduser())
            texts.append(text)
            sources.extend(files)
        return cls(texts[0], texts[1], tuple(sources))

    @classmethod
    def from_config(cls, config: Any = None) -> TrustAnchors:
        """The ``[c2pa]`` ``trust_anchors`` and ``user_anchors`` of the configuration (the user config by default).

        Relative paths resolve against the config file's folder.

        Raises:
            ConfigError: The configuration or an anchor file cannot be read.
        """
        if config is None:
            from vhd.config import load_config

            config = load_config(None)
        table = dict(config.c2pa)

        def where(key: str) -> Path | None:
            value = table.get(key)
            if not value:
                return None
            path = Path(value).expanduser()
            return path if path.is_absolute() or not config.base_dir else Path(config.base_dir) / path

        return cls.load(where("trust_anchors"), where("user_anchors"))


def _read_pem(path: Path) -> tuple[str, list[str]]:
    try:
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in PEM_SUFFIXES) if path.is_dir() else [path]
        texts = [f.read_text(encoding="ascii", errors="replace") for f in files]
    except OSError as exc:
        raise ConfigError(
            f"cannot read the C2PA trust anchors {path}: {exc.strerror or exc}; "
            "give a PEM file or a folder of them in [c2pa] trust_anchors / user_anchors"
        ) from None
    text = "\n".join(t.strip() for t in texts if "-----BEGIN CERTIFICATE-----" in t)
    if not text:
        raise ConfigError(
            f"no PEM certificate (-----BEGIN CERTIFICATE-----) in the C2PA trust anchors {path}: "
            "give a PEM file or a folder of *.pem files"
        )
    return text + "\n", [str(f) for f in files]


_CONTEXTS: dict[tuple[str, str], Any] = {}
_CONTEXTS_LOCK = threading.Lock()


def _context(anchors: TrustAnchors) -> Any:
    """A c2pa reading context that checks signers against exactly these anchors (made once per set)."""
    import c2pa

    key = (anchors.trust_anchors, anchors.user_anchors)
    with _CONTEXTS_LOCK:
        if key not in _CONTEXTS:
            trust = {k: v for k, v in (("trust_anchors", key[0]), ("user_anchors", key[1])) if v}
            try:
                _CONTEXTS[key] = c2pa.Context.from_dict({"trust": trust, "verify": {"verify_trust": True}})
            except c2pa.C2paError as exc:
                shown = ", ".join(anchors.sources) or "the configured anchors"
                raise ConfigError(f"the C2PA trust anchors ({shown}) cannot be used: {exc}") from None
        return _CONTEXTS[key]


def read_credentials(path: str | os.PathLike[str], anchors: TrustAnchors | None = None) -> Credentials | None:
    """The Content Credentials of a file, or None (no manifest, a format c2pa does not read, no c2pa).

    A manifest that c2pa finds but cannot parse comes back ``Invalid``. Its signer is checked
    against ``anchors`` only (none: no manifest is ``trusted``).

    Raises:
        ConfigError: The anchors cannot be used by c2pa.
    """
    mime = MIME_TYPES.get(Path(path).suffix.lower())
    if mime is None or not c2pa_available():
        return None
    import c2pa

    context = _context(anchors or TrustAnchors())
    try:
        with open(path, "rb") as fh:
            reader = c2pa.Reader.try_create(mime, fh, None, context)
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
    if state == "Trusted" and not (anchors and anchors.configured):
        state = "Valid"  # only anchors given here make a signer trusted
    return _parse(str(state), manifest, results)


def _text(value: Any) -> str | None:
    return None if value is None or isinstance(value, dict | list) else untrusted_text(value)


def _parse(state: str, manifest: dict[str, Any], results: dict[str, Any]) -> Credentials:
    ai = False
    agent: str | None = None
    provenance = None
    for assertion in manifest.get("assertions") or []:
        if not isinstance(assertion, dict):
            continue
        label = str(assertion.get("label", ""))
        data = assertion.get("data") or {}
        if label.startswith("c2pa.actions") and isinstance(data, dict):
            for action in data.get("actions") or []:
                if isinstance(action, dict) and action.get("digitalSourceType") in AI_SOURCE_TYPES:
                    ai = True
                    software = action.get("softwareAgent")
                    name = software.get("name") if isinstance(software, dict) else software
                    agent = agent or _text(name)
        elif label == PROVENANCE_ASSERTION and isinstance(data, dict):
            provenance = data
    infos = manifest.get("claim_generator_info") or []
    first = infos[0] if isinstance(infos, list) and infos and isinstance(infos[0], dict) else {}
    claim = _text(" ".join(str(first[k]) for k in ("name", "version") if first.get(k))) or _text(
        manifest.get("claim_generator")
    )
    info = manifest.get("signature_info") or {}
    info = info if isinstance(info, dict) else {}
    signer = _text(", ".join(str(info[k]) for k in ("common_name", "issuer") if info.get(k)))
    active = results.get("activeManifest") or {}
    failed = active.get("failure") or [] if isinstance(active, dict) else []
    codes = [_text(f.get("code")) for f in failed if isinstance(f, dict)]
    failures = tuple(c for c in codes if c)[:MAX_FAILURES]
    return Credentials(state, ai, agent or claim, claim, signer, failures, provenance)


def mark_from_credentials(sample: Sample, path: str | os.PathLike[str], anchors: TrustAnchors | None = None) -> Sample:
    """The sample with what its file's Content Credentials say (unchanged without any).

    Every manifest found is recorded in ``meta["content_credentials"]`` with its ``trust``. A
    *trusted* manifest that declares AI generation makes a sample without a declared source
    ``source=synthetic`` (``source_from_credentials: true`` in the record) and gives it the
    claimed generator when it names none; a declared source is kept, and a trusted claim that
    disagrees with it is recorded as ``disagrees_with_source``. An untrusted or invalid manifest
    changes nothing but the record.

    Args:
        sample: The sample made from the file (its source and generator as the user declared them).
        path: The media file.
        anchors: What a signer must chain to (none: no manifest is trusted).
    """
    found = read_credentials(path, anchors)
    if found is None:
        return sample
    record = found.to_meta()
    source, generator = sample.source, sample.generator
    if found.trust == TRUSTED and found.ai_generated:
        if source is None:
            source = Source.SYNTHETIC
            record["source_from_credentials"] = True
        elif source is not Source.SYNTHETIC:
            record["disagrees_with_source"] = source.value  # the user's word stands
        if source is Source.SYNTHETIC and not generator and found.claimed_generator:
            generator = untrusted_text(f"claimed:{found.claimed_generator}")  # bounded as a whole
    meta = {**sample.meta, "content_credentials": record}
    return replace(sample, source=source, generator=generator, meta=meta)


def credentials_summary(meta: dict[str, Any]) -> str | None:
    """One line saying what a sample's Content Credentials are worth, or None without any.

    For `vhd show` and the review app: the trust comes first, in capitals, so that a trusted
    claim, an untrusted one and an invalid manifest differ at a glance.
    """
    record = meta.get("content_credentials")
    trust = credentials_trust(meta)
    if not isinstance(record, dict) or trust is None:
        return None
    what = "claims AI generation" if record.get("ai_generated") else "no AI claim"
    claimed = _text(record.get("claimed_generator"))
    signer = _text(record.get("signer"))
    parts = [f"{trust.upper()} C2PA manifest: {what}"]
    if claimed and record.get("ai_generated"):
        parts.append(f"generator {claimed!r} (claimed)")
    if signer:
        parts.append(f"signer {signer!r} (as named by its certificate)")
    if trust != TRUSTED:
        parts.append("not acted on")
    elif record.get("disagrees_with_source"):
        parts.append(f"the declared source {record['disagrees_with_source']} was kept")
    if record.get("restored_source"):  # an older vhd had let the claim change it (store migration 0015)
        parts.append(f"the declared source {record['restored_source']} was restored")
    return "; ".join(parts)
