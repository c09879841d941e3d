"""C2PA Content Credentials: vhd signs them (test certificate or the user's), ingest and fetch read them."""

from __future__ import annotations

import datetime
import io
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.optional import need_module
from vhd.errors import ConfigError
from vhd.records import Source
from vhd.store.sqlite import Store


@pytest.fixture(autouse=True)
def _c2pa() -> None:
    need_module("c2pa", "pip install 'vhd[c2pa]'")
    need_module("cryptography", "pip install 'vhd[c2pa]'")


def provenance(**changes: Any) -> Any:
    from vhd.synth.provenance import Provenance

    base = dict(
        generator="sdxl", model="stabilityai/stable-diffusion-xl-base-1.0", model_revision="main", prompt="a cat",
        full_prompt="a cat", template="{prompt}", prompt_id="0123456789abcdef", keyword="cat", negative_prompt=None,
        seed=7, steps=4, guidance=0.0, width=64, height=48, frames=None, fps=None, scheduler="Euler", device="cpu",
        dtype="float32", batch_size=1, torch_threads=1, safety_checker="none", watermark="off",
        encoding="png:1", content_credentials="test-certificate",
    )  # fmt: skip
    return Provenance(**{**base, **changes})


def drawn() -> Any:
    y, x = np.mgrid[0:48, 0:64]
    return np.stack([x * 4 % 256, y * 5 % 256, (x + y) % 256], -1).astype(np.uint8)


def signed(suffix: str = ".png", settings: Any = None) -> bytes:
    from vhd.synth.credentials import sign_output
    from vhd.synth.generators import GenerateSettings
    from vhd.synth.outputs import encode_image

    prov = provenance()
    data = encode_image(drawn(), prov.to_json(), "webp" if suffix == ".webp" else "png")
    return sign_output(data, suffix, prov, settings or GenerateSettings())


def sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def pixels(data: bytes) -> Any:
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


@pytest.mark.parametrize("suffix", [".png", ".webp"])
def test_signed_with_the_test_certificate_reads_back_as_ai_generated(tmp_path: Path, suffix: str) -> None:
    from vhd.media.credentials import read_credentials
    from vhd.synth.credentials import TEST_CERTIFICATE_NAME
    from vhd.synth.provenance import read_embedded

    path = tmp_path / f"x{suffix}"
    path.write_bytes(signed(suffix))
    found = read_credentials(path)
    assert found is not None and found.state == "Valid" and found.valid and found.ai_generated
    assert found.claimed_generator == "sdxl:stabilityai/stable-diffusion-xl-base-1.0"
    assert found.claim_generator is not None and found.claim_generator.startswith("vhd ")
    assert found.signer is not None and TEST_CERTIFICATE_NAME in found.signer
    assert "signingCredential.untrusted" in found.failures  # a test certificate chains to no trust list
    assert found.vhd_provenance == provenance().to_dict()
    assert (pixels(path.read_bytes()) == drawn()).all()  # the manifest changes bytes, never pixels
    assert read_embedded(path) == provenance()  # the vhd provenance tag is still there


def test_a_plain_file_has_no_credentials(tmp_path: Path) -> None:
    from vhd.media.credentials import read_credentials

    path = tmp_path / "plain.png"
    Image.fromarray(drawn()).save(path)
    assert read_credentials(path) is None
    assert read_credentials(tmp_path / "notes.txt") is None


def tamper(data: bytes) -> bytes:
    """Change one character of the PNG's vhd text chunk (a valid PNG whose content no longer matches its hash)."""
    out, pos = bytearray(data[:8]), 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"tEXt":
            body = body.replace(b'"seed":7', b'"seed":8')
        out += struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
        pos += 12 + length
    return bytes(out)


def test_ingest_records_untrusted_and_invalid_claims_without_acting_on_them(tmp_path: Path) -> None:
    """vhd's own test certificate chains to no anchor: its AI claim is recorded, the declared source stays."""
    from vhd.curate.ingest import IngestDefaults, ingest
    from vhd.media.credentials import TrustAnchors

    folder = tmp_path / "crawl"
    folder.mkdir()
    (folder / "good.png").write_bytes(signed())
    (folder / "bad.png").write_bytes(tamper(signed()))
    Image.fromarray(drawn()[::-1]).save(folder / "photo.png")
    with Store(tmp_path / "run.db") as store:
        result = ingest([folder], store, defaults=IngestDefaults(source=Source.REAL), anchors=TrustAnchors())
        assert result.count("added") == 3
        by_name = {f.name: store.get_sample(sha256(f)) for f in folder.iterdir()}
    good, bad, photo = by_name["good.png"], by_name["bad.png"], by_name["photo.png"]
    assert good is not None and bad is not None and photo is not None
    assert good.source is Source.REAL and good.generator is None
    record = good.meta["content_credentials"]
    assert record["trust"] == "untrusted" and record["state"] == "Valid" and record["ai_generated"]
    assert "overrode_source" not in record and "source_from_credentials" not in record
    assert bad.source is Source.REAL and bad.generator is None
    assert bad.meta["content_credentials"]["trust"] == "invalid" and bad.meta["content_credentials"]["ai_generated"]
    assert photo.source is Source.REAL and "content_credentials" not in photo.meta


def test_fetch_store_reads_credentials(tmp_path: Path) -> None:
    import asyncio

    from vhd.collect.fetch_settings import FetchOutcome, FetchSettings
    from vhd.collect.register import Registrar
    from vhd.media.credentials import TrustAnchors
    from vhd.records import UrlRow

    path = tmp_path / "f.png"
    path.write_bytes(signed())
    row = UrlRow(url="https://example.invalid/f.png", source=Source.REAL, keyword="cat", line=2)
    with Store(tmp_path / "run.db") as store:
        registrar = Registrar(store, FetchSettings(), anchors=TrustAnchors())
        outcome = FetchOutcome(row.url, "fetched", path=str(path), kind="image")
        assert asyncio.run(registrar.register(path, row, outcome)) is None
        sample = store.get_sample(sha256(path))
    assert sample is not None and sample.source is Source.REAL  # the URL list's word, not the manifest's
    assert sample.meta["content_credentials"]["trust"] == "untrusted"
    assert sample.meta["url"] == row.url


def user_chain(
    tmp_path: Path, signer: str = "Example Lab signer", ca_common_name: str = "Example Lab CA"
) -> tuple[Path, Path]:
    """An ES256 CA and signer written as PEM files, as a user would configure them (``ca.pem``: the CA alone)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_common_name)])

    def usage(ca: bool) -> x509.KeyUsage:
        return x509.KeyUsage(not ca, False, False, False, False, ca, ca, False, False)

    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage(True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, signer)]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage(False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    cert, pem = tmp_path / "chain.pem", tmp_path / "key.pem"
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert, pem


def test_the_users_certificate_signs_and_bad_configs_fail_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vhd.media.credentials import read_credentials
    from vhd.synth.credentials import credentials_state, sign_output
    from vhd.synth.generators import GenerateSettings

    cert, key = user_chain(tmp_path)
    settings = GenerateSettings(signing={"cert": str(cert), "key": str(key), "alg": "es256"})
    assert credentials_state(settings) == "config"
    path = tmp_path / "x.png"
    path.write_bytes(signed(settings=settings))
    found = read_credentials(path)
    assert found is not None and found.valid and found.signer is not None and "Example Lab signer" in found.signer

    with pytest.raises(ConfigError, match=r"\[c2pa\] needs cert"):
        credentials_state(GenerateSettings(signing={"cert": str(cert)}))
    wrong = GenerateSettings(signing={"cert": str(cert), "key": str(tmp_path / "missing.pem")})
    with pytest.raises(ConfigError, match="cannot read the C2PA certificate"):
        sign_output(b"x", ".png", provenance(content_credentials="config"), wrong)
    assert credentials_state(GenerateSettings(content_credentials="off")) == "off"
    import vhd.synth.credentials as credentials

    monkeypatch.setattr(credentials, "c2pa_available", lambda: False)
    assert credentials_state(GenerateSettings()) == "off"  # auto: nothing to sign with
    with pytest.raises(ConfigError, match=r"pip install 'vhd\[c2pa\]'"):
        credentials_state(GenerateSettings(content_credentials="on"))


ADOBE = "Adobe Content Authenticity Signer"
HOSTILE_GENERATOR = "\x1b[31mDALL-E\x1b[0m 3\r\nX-Forged: yes <script>alert(1)</script>\u202e" + "A" * 60_000


def forged(tmp_path: Path, generator: str = "OpenAI DALL-E 3") -> bytes:
    """A drawn PNG signed by a self-made chain named after Adobe, claiming a model made it."""
    import c2pa

    from vhd.media.credentials import TRAINED_ALGORITHMIC_MEDIA

    cert, key = user_chain(tmp_path, signer=ADOBE, ca_common_name="Adobe Root CA")
    manifest = {
        "claim_generator_info": [{"name": "Adobe Photoshop", "version": "25.0"}],
        "title": "photo.png",
        "format": "image/png",
        "assertions": [
            {
                "label": "c2pa.actions",
                "data": {
                    "actions": [
                        {
                            "action": "c2pa.created",
                            "digitalSourceType": TRAINED_ALGORITHMIC_MEDIA,
                            "softwareAgent": {"name": generator},
                        }
                    ]
                },
            }
        ],
    }
    buf = io.BytesIO()
    Image.fromarray(drawn()).save(buf, format="PNG")
    signer = c2pa.Signer.from_info(c2pa.C2paSignerInfo("es256", cert.read_bytes(), key.read_bytes(), None))
    out = io.BytesIO()
    context = c2pa.Context.from_dict({"builder": {"thumbnail": {"enabled": False}}})
    with c2pa.Builder(manifest, context=context) as builder:
        builder.sign(signer, "image/png", io.BytesIO(buf.getvalue()), out)
    return out.getvalue()


def ingest_one(tmp_path: Path, data: bytes, source: Source | None, anchors: Any) -> Any:
    from vhd.curate.ingest import IngestDefaults, ingest

    folder = tmp_path / "in"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "photo.png"
    path.write_bytes(data)
    with Store(tmp_path / "run.db") as store:
        ingest([path], store, defaults=IngestDefaults(source=source), anchors=anchors)
        return store.get_sample(sha256(path))


def test_a_forged_adobe_signed_ai_claim_leaves_a_real_photo_real_and_is_recorded_untrusted(tmp_path: Path) -> None:
    from vhd.media.credentials import TrustAnchors, credentials_summary, read_credentials

    data = forged(tmp_path)
    (tmp_path / "x.png").write_bytes(data)
    found = read_credentials(tmp_path / "x.png")
    assert found is not None and found.valid and found.trust == "untrusted" and found.ai_generated
    assert found.signer is not None and ADOBE in found.signer  # the name is the forger's choice

    for declared in (Source.REAL, None):  # declared by the user, or not at all: no untrusted claim sets it
        sample = ingest_one(tmp_path / str(declared), data, declared, TrustAnchors())
        assert sample.source is declared and sample.generator is None
        record = sample.meta["content_credentials"]
        assert record["trust"] == "untrusted" and record["claimed_generator"] == "OpenAI DALL-E 3"
        summary = credentials_summary(sample.meta)
        assert summary is not None and summary.startswith("UNTRUSTED C2PA manifest") and "not acted on" in summary


def test_the_same_chain_configured_as_an_anchor_is_trusted_but_never_overrides_a_declared_source(
    tmp_path: Path,
) -> None:
    from vhd.config import load_config
    from vhd.media.credentials import TrustAnchors

    data = forged(tmp_path)
    config = tmp_path / "vhd.toml"
    config.write_text('[c2pa]\nuser_anchors = "ca.pem"\n')  # relative: beside the config file
    anchors = TrustAnchors.from_config(load_config(config))
    assert anchors.configured

    real = ingest_one(tmp_path / "real", data, Source.REAL, anchors)
    assert real.source is Source.REAL and real.generator is None
    record = real.meta["content_credentials"]
    assert record["trust"] == "trusted" and record["state"] == "Trusted" and record["disagrees_with_source"] == "real"

    open_ = ingest_one(tmp_path / "open", data, None, anchors)
    assert open_.source is Source.SYNTHETIC and open_.generator == "claimed:OpenAI DALL-E 3"
    assert open_.meta["content_credentials"]["source_from_credentials"] is True

    # a folder of PEM files works as well; the CA as the trust list rather than a user anchor too
    listed = TrustAnchors.load(trust_anchors=tmp_path / "ca.pem")
    assert ingest_one(tmp_path / "list", data, None, listed).meta["content_credentials"]["trust"] == "trusted"


def test_manifest_strings_are_stored_printable_and_bounded(tmp_path: Path) -> None:
    from vhd.media.credentials import TrustAnchors

    data = forged(tmp_path, HOSTILE_GENERATOR)
    sample = ingest_one(tmp_path, data, None, TrustAnchors.load(user_anchors=tmp_path / "ca.pem"))
    assert sample.source is Source.SYNTHETIC  # trusted, so its (cleaned) generator is used
    record = sample.meta["content_credentials"]
    for text in (sample.generator, record["claimed_generator"], record["claim_generator"], record["signer"]):
        assert isinstance(text, str) and len(text) <= 256
        assert text.isprintable() and "\x1b" not in text and "\r" not in text and "\n" not in text
        assert "\u202e" not in text and "[31m" not in text
    assert record["claimed_generator"].startswith("DALL-E 3 X-Forged: yes <script>alert(1)</script>AAA")
    assert record["claimed_generator"].endswith("\u2026")  # cut, and says so
    assert sample.generator.startswith("claimed:DALL-E 3 X-Forged")


def test_trust_anchor_files_that_cannot_be_used_fail_in_one_line(tmp_path: Path) -> None:
    from vhd.media.credentials import TrustAnchors

    with pytest.raises(ConfigError, match="cannot read the C2PA trust anchors"):
        TrustAnchors.load(trust_anchors=tmp_path / "missing.pem")
    (tmp_path / "notes.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match="no PEM certificate"):
        TrustAnchors.load(user_anchors=tmp_path / "notes.pem")
    assert not TrustAnchors().configured
