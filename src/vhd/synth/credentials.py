"""C2PA Content Credentials signed into every generated file (``vhd[c2pa]``).

Each output gets a C2PA manifest (``c2pa-python``) beside the PNG/WebP/MP4 provenance tags and
the invisible watermark: a ``c2pa.created`` action with the IPTC digital source type
``trainedAlgorithmicMedia`` and the generator and model as its software agent, vhd as the claim
generator, and vhd's provenance record as the custom assertion ``org.vhd.provenance``. This is
the machine-readable marking the EU AI Act (Art. 50) asks of AI-generated media.

The signing certificate comes from the user config (``[c2pa]`` ``cert`` = a PEM chain, ``key`` =
its PEM private key, ``alg``, ``tsa_url``) or `GenerateSettings.signing`. Without one, vhd makes a
**self-signed test certificate** in memory with ``cryptography`` (a test root CA and an Ed25519
signer, both named "vhd TEST ... not trusted"): readers show the manifest as valid but its signer
as untrusted (``signingCredential.untrusted``); it marks media for tooling, it proves nothing
about who made them. C2PA rejects a certificate that signs itself as the signer, hence the
two-certificate chain.

Bytes: a manifest carries random salts and a random manifest id, so signed files differ in bytes
between runs with the same seed and settings (their pixels and vhd provenance do not);
``--no-c2pa`` restores byte-identical outputs.
"""

from __future__ import annotations

import datetime
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.errors import ConfigError
from vhd.media.credentials import PROVENANCE_ASSERTION, TRAINED_ALGORITHMIC_MEDIA, c2pa_available

if TYPE_CHECKING:
    from vhd.synth.generators import GenerateSettings
    from vhd.synth.provenance import Provenance

TEST_CERTIFICATE_NAME = "vhd TEST signer - self-signed, not trusted, for testing only"
"""Common name of the test certificate's signer (shown by every C2PA reader)."""

MODES = ("auto", "on", "off")
"""``--c2pa`` values: ``auto`` signs when ``vhd[c2pa]`` is installed."""

_MIME = {".png": "image/png", ".webp": "image/webp", ".mp4": "video/mp4"}


@dataclass(frozen=True)
class SigningConfig:
    """A C2PA signing certificate.

    Attributes:
        cert: PEM file with the signer's certificate chain (signer first, root last).
        key: PEM file with the signer's private key.
        alg: ``es256``, ``es384``, ``es512``, ``ps256``, ``ps384``, ``ps512`` or ``ed25519``.
        tsa_url: A time-stamping authority (none: the manifest carries no trusted time).
    """

    cert: str
    key: str
    alg: str = "es256"
    tsa_url: str | None = None

    @classmethod
    def of(cls, values: Any) -> SigningConfig | None:
        """From a mapping (``[c2pa]`` of the user config, `GenerateSettings.signing`); None when empty.

        Raises:
            ConfigError: ``cert`` without ``key`` or the reverse, or an unknown key.
        """
        data = dict(values or {})
        if not data:
            return None
        unknown = set(data) - {"cert", "key", "alg", "tsa_url"}
        if unknown or not data.get("cert") or not data.get("key"):
            raise ConfigError(
                "[c2pa] needs cert = PEM certificate chain and key = PEM private key "
                f"(optional alg, tsa_url){'; unknown: ' + ', '.join(sorted(unknown)) if unknown else ''}"
            )
        return cls(str(data["cert"]), str(data["key"]), str(data.get("alg") or "es256"), data.get("tsa_url"))


def credentials_state(settings: GenerateSettings) -> str:
    """What signs the outputs: ``off``, ``config`` (the user's certificate) or ``test-certificate``.

    Raises:
        ConfigError: ``on`` without ``vhd[c2pa]`` installed, an unknown mode, or a bad ``[c2pa]``.
    """
    mode = settings.content_credentials
    if mode not in MODES:
        raise ConfigError(f"--c2pa {mode!r}: choose {', '.join(MODES)}")
    if mode == "off" or (mode == "auto" and not c2pa_available()):
        return "off"
    if not c2pa_available():
        raise ConfigError("Content Credentials need c2pa-python: run `pip install 'vhd[c2pa]'`, or pass --no-c2pa")
    return "config" if SigningConfig.of(settings.signing) else "test-certificate"


_SIGNERS: dict[Any, Any] = {}
_LOCK = threading.Lock()


def _signer(config: SigningConfig | None) -> tuple[Any, Any]:
    """The c2pa signer and context for a certificate (made once per process)."""
    import c2pa

    key = config or "test"
    with _LOCK:
        if key not in _SIGNERS:
            if config is None:
                cert, private, alg = test_certificate()
                info = c2pa.C2paSignerInfo(alg, cert, private, None)
            else:
                try:
                    cert = Path(config.cert).expanduser().read_bytes()
                    private = Path(config.key).expanduser().read_bytes()
                except OSError as exc:
                    raise ConfigError(f"cannot read the C2PA certificate or key: {exc}") from None
                info = c2pa.C2paSignerInfo(config.alg.lower(), cert, private, config.tsa_url)
            try:
                signer = c2pa.Signer.from_info(info)
            except c2pa.C2paError as exc:
                raise ConfigError(f"the C2PA certificate cannot sign: {exc}") from None
            context = c2pa.Context.from_dict({"builder": {"thumbnail": {"enabled": False}}})
            _SIGNERS[key] = (signer, context)
        return _SIGNERS[key]  # type: ignore[no-any-return]


def test_certificate() -> tuple[bytes, bytes, str]:
    """A fresh self-signed test chain: ``(PEM chain, PEM private key, alg)``, clearly named untrusted.

    A root CA signs an Ed25519 signer certificate (digital signature, email-protection usage,
    valid one year); both names say "vhd TEST ... not trusted".
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(common: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, common),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "vhd TEST certificate (untrusted)"),
            ]
        )

    def usage(*, sign: bool) -> x509.KeyUsage:
        return x509.KeyUsage(
            digital_signature=not sign, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=sign, crl_sign=sign, encipher_only=False, decipher_only=False,
        )  # fmt: skip

    now = datetime.datetime.now(datetime.UTC)
    root_key = ed25519.Ed25519PrivateKey.generate()
    root_name = name("vhd TEST root CA - self-signed, not trusted")
    root = (
        x509.CertificateBuilder()
        .subject_name(root_name)
        .issuer_name(root_name)
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage(sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()), critical=False)
        .sign(root_key, None)
    )
    key = ed25519.Ed25519PrivateKey.generate()
    leaf = (
        x509.CertificateBuilder()
        .subject_name(name(TEST_CERTIFICATE_NAME))
        .issuer_name(root_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage(sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(root_key.public_key()), critical=False)
        .sign(root_key, None)
    )
    chain = leaf.public_bytes(serialization.Encoding.PEM) + root.public_bytes(serialization.Encoding.PEM)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return chain, private, "ed25519"


def manifest(provenance: Provenance, suffix: str) -> dict[str, Any]:
    """The manifest definition vhd signs into one output."""
    from vhd.version import version

    shared = provenance.shared_dict()  # no local folder or user name leaves in the manifest
    agent = f"{provenance.generator}:{shared['model']}"
    return {
        "claim_generator_info": [{"name": "vhd", "version": version()}],
        "title": f"vhd generate {provenance.prompt_id}{suffix}",
        "format": _MIME[suffix],
        "assertions": [
            {
                "label": "c2pa.actions",
                "data": {
                    "actions": [
                        {
                            "action": "c2pa.created",
                            "digitalSourceType": TRAINED_ALGORITHMIC_MEDIA,
                            "softwareAgent": {"name": agent},
                        }
                    ]
                },
            },
            {"label": PROVENANCE_ASSERTION, "data": shared},
        ],
    }


def sign_output(data: bytes, suffix: str, provenance: Provenance, settings: GenerateSettings) -> bytes:
    """The file's bytes with a signed C2PA manifest embedded (unchanged when Content Credentials are off).

    Raises:
        ConfigError: The certificate cannot be read or cannot sign (one line with the cause).
    """
    if provenance.content_credentials == "off":
        return data
    import io

    import c2pa

    signer, context = _signer(SigningConfig.of(settings.signing))
    out = io.BytesIO()
    try:
        with c2pa.Builder(manifest(provenance, suffix), context=context) as builder:
            builder.sign(signer, _MIME[suffix], io.BytesIO(data), out)
    except c2pa.C2paError as exc:
        raise ConfigError(f"cannot sign Content Credentials: {exc}") from None
    return out.getvalue()
