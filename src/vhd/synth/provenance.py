"""Provenance of generated media: prompt ids, derived seeds, and the record embedded in each file.

Every generated file carries a JSON provenance record (a PNG ``tEXt`` chunk named
``vhd:provenance``; a WebP's XMP packet; the MP4 container's ``comment`` tag) so a file found
later can be traced to its prompt, generator, model, seed and settings. The embedded record
holds no time, run id, output path or store path (those live in the store), so equal inputs give
equal bytes (a C2PA manifest, `vhd.synth.credentials`, adds random salts: equal pixels then, not
equal bytes); a model or component loaded from a local folder is named ``local:NAME`` there
(`vhd.redaction.hide_local_path`: no folder, no user name), its ``sha256:`` revision still
identifying it. The store keeps the path as given.

The per-prompt seed is a hash of the base seed and the prompt id: it does not move with
``--limit``, CSV order or sharding.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vhd.redaction import hide_local_path

PNG_KEY = "vhd:provenance"
"""Name of the PNG text chunk (and the JSON's marker) that holds the provenance record."""

SEED_BITS = 63
"""Derived seeds fit a signed 64-bit integer (SQLite, torch generators)."""


def prompt_id(keyword: str | None, prompt: str) -> str:
    """The id `vhd prompts` gives a prompt: 16 hex digits of sha256(keyword, newline, prompt).

    Whitespace at either end is ignored, so the id survives a spreadsheet round trip.
    """
    text = f"{(keyword or '').strip()}\n{prompt.strip()}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def derive_seed(base_seed: int, pid: str) -> int:
    """The seed of one prompt: a hash of (``--seed``, prompt id), independent of order and sharding."""
    digest = hashlib.sha256(f"{int(base_seed)}:{pid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


@dataclass
class Provenance:
    """What made one generated file (embedded in the file and kept in the store).

    Attributes:
        generator: Generator name (``sdxl``, ``animatediff-i2v``...).
        model: Model id or local path as given.
        model_revision: Hub revision, or ``sha256:<hex>`` of a local folder's files.
        prompt: The prompt as written in the prompt CSV.
        full_prompt: The text the pipeline was given (the template applied).
        template: The prompt template (``{prompt}`` marks the prompt).
        prompt_id: The prompt's id.
        keyword: The keyword the prompt came from, if known.
        negative_prompt: The negative prompt, if any.
        seed: The derived per-prompt seed.
        steps: Inference steps.
        guidance: Classifier-free guidance scale.
        width: Width in pixels.
        height: Height in pixels.
        frames: Frames of a video (None for images).
        fps: Frame rate of a video.
        scheduler: The scheduler's class name.
        device: Torch device the pipeline ran on.
        dtype: Weight dtype.
        batch_size: Prompts in the pipeline call that made it (changes pixels; fewer than the
            setting in a last or resumed batch).
        torch_threads: ``torch.get_num_threads()`` (changes bytes on CPU).
        safety_checker: ``on`` (kept), ``off`` (``--no-safety-checker``) or ``none`` (the pipeline has none).
        watermark: ``on``, ``off``, or ``skipped`` (smaller than 256 px).
        first_frame_sha256: For image-to-video, the sha256 of the first frame's file.
        components: Parts loaded beside the model (``motion_adapter`` -> id), with revisions.
        versions: vhd, torch, diffusers and transformers versions.
        encoding: How the file is encoded (``png:1``, ``webp-lossless:0``, ``h264:crf18``); the
            level changes the bytes, not the pixels. Empty in records older than the field.
        content_credentials: ``off``, or who signed the C2PA manifest: ``test-certificate`` (vhd's
            self-signed, untrusted one) or ``config`` (the user's certificate).
        speed: The speed options that were on (``channels_last``, ``compile``, ``attention``,
            ``vae``, ``preset``...); those that change outputs are listed here.
    """

    generator: str
    model: str
    model_revision: str
    prompt: str
    full_prompt: str
    template: str
    prompt_id: str
    keyword: str | None
    negative_prompt: str | None
    seed: int
    steps: int
    guidance: float
    width: int
    height: int
    frames: int | None
    fps: int | None
    scheduler: str
    device: str
    dtype: str
    batch_size: int
    torch_threads: int
    safety_checker: str
    watermark: str
    first_frame_sha256: str | None = None
    components: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    source: str = "synthetic"
    encoding: str = ""
    content_credentials: str = "off"
    speed: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (keys sorted when dumped by `to_json`)."""
        return asdict(self)

    def shared_dict(self) -> dict[str, Any]:
        """`to_dict` as it may leave the machine (in the file, in a C2PA manifest): local paths hidden."""
        data = self.to_dict()
        data["model"] = hide_local_path(self.model)
        data["components"] = {name: hide_local_path(ident) for name, ident in self.components.items()}
        data["speed"] = {k: hide_local_path(v) if isinstance(v, str) else v for k, v in self.speed.items()}
        return data

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces) of `shared_dict`: the bytes embedded in the file."""
        return json.dumps(self.shared_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def same_model(self, generator: str, model: str) -> bool:
        """Whether this record is of ``generator`` with ``model`` (as given, or as `to_json` wrote it)."""
        return self.generator == generator and self.model in (model, hide_local_path(model))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance:
        """Rebuild from `to_dict` output (unknown keys ignored, so newer files still read)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def versions() -> dict[str, str]:
    """Versions of vhd and the generation libraries (recorded in provenance)."""
    import importlib.metadata

    from vhd.version import version

    found = {"vhd": version()}
    for name in ("torch", "diffusers", "transformers"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = ""
    return found


_FINGERPRINTS: dict[tuple[str, tuple[tuple[str, int, int, int], ...]], str] = {}
"""Folder fingerprints already computed in this process, keyed by the folder and its files' stats."""


def _folder_files(root: Path) -> list[tuple[str, Path, os.stat_result]]:
    if root.is_file():  # a single weights file (``--unet-weights``): its name, size and content
        return [(root.name, root, root.stat())]
    found = []
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = file.relative_to(root).as_posix()
        if rel.startswith(".") or "/." in rel:
            continue
        found.append((rel, file, file.stat()))
    return found


def folder_fingerprint(path: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` over a local model folder (or one weights file): every file's relative path, size and content.

    Files over 256 MiB contribute their path, size and first and last MiB (hashing many GB of
    weights in full at every start would cost minutes). The result is remembered by the files'
    stats (path, size, mtime, inode), as the store's stat index remembers file hashes: a folder
    whose files are unchanged is not read again in this process.
    """
    root = Path(path)
    files = _folder_files(root)
    key = (str(root.resolve()), tuple((rel, st.st_size, st.st_mtime_ns, st.st_ino) for rel, _, st in files))
    known = _FINGERPRINTS.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    big = 256 << 20
    for rel, file, st in files:
        size = st.st_size
        digest.update(f"{rel}\0{size}\0".encode())
        with file.open("rb") as fh:
            if size <= big:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
            else:
                digest.update(fh.read(1 << 20))
                fh.seek(size - (1 << 20))
                digest.update(fh.read(1 << 20))
    found = f"sha256:{digest.hexdigest()}"
    _FINGERPRINTS[key] = found
    return found


XMP_TAG = "vhd:provenance"
"""The XMP property of a WebP's packet that holds the provenance JSON (XML-escaped)."""


def xmp_packet(provenance_json: str) -> bytes:
    """A minimal XMP packet carrying the provenance JSON (for formats without text chunks: WebP)."""
    from xml.sax.saxutils import escape

    body = escape(provenance_json, {'"': "&quot;"})
    return (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        f'<rdf:Description xmlns:vhd="https://vhd.invalid/ns/1.0/"><{XMP_TAG}>{body}</{XMP_TAG}>'
        "</rdf:Description></rdf:RDF></x:xmpmeta>"
    ).encode()


def _xmp_provenance(xmp: bytes | str) -> str | None:
    import re
    from xml.sax.saxutils import unescape

    text = xmp.decode("utf-8", "replace") if isinstance(xmp, bytes) else xmp
    match = re.search(f"<{XMP_TAG}>(.*?)</{XMP_TAG}>", text, re.DOTALL)
    return unescape(match.group(1), {"&quot;": '"'}) if match else None


def read_embedded(path: str | os.PathLike[str]) -> Provenance | None:
    """The provenance a vhd-generated PNG, WebP or MP4 carries, or None (not ours, or unreadable)."""
    name = str(path).lower()
    text = _png_text(path) if name.endswith((".png", ".webp")) else _mp4_comment(path)
    if not text:
        return None
    try:
        data = json.loads(text)
        return Provenance.from_dict(data) if isinstance(data, dict) else None
    except (ValueError, TypeError):
        return None


def _png_text(path: str | os.PathLike[str]) -> str | None:
    from vhd.errors import MediaError
    from vhd.media.untrusted import open_untrusted

    try:
        with open_untrusted(path) as im:
            value = getattr(im, "text", {}).get(PNG_KEY)
            if value is None and im.info.get("xmp"):
                value = _xmp_provenance(im.info["xmp"])
    except (MediaError, OSError, ValueError):
        return None
    return value if isinstance(value, str) else None


def _mp4_comment(path: str | os.PathLike[str]) -> str | None:
    from vhd.errors import MediaError, MissingDependencyError
    from vhd.media.videoopen import open_video

    try:
        with open_video(path) as container:  # the run's gate: only its video formats reach FFmpeg
            value = container.metadata.get("comment")
    except (MediaError, MissingDependencyError, OSError, ValueError):
        return None
    return value if isinstance(value, str) and value.startswith("{") else None
