from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from tests.collect.conftest import jpeg_bytes, photo_bytes, png_bytes
from vhd.collect.blocklist import BlockList, Digests, file_digests, pdq_hash
from vhd.errors import ConfigError, MissingDependencyError

RED = png_bytes("red")
BLUE = jpeg_bytes("blue")


def test_text_format_prefixed_bare_labels_and_comments() -> None:
    sha = hashlib.sha256(RED).hexdigest()
    md5 = hashlib.md5(BLUE).hexdigest()
    text = "\n".join(
        [
            "# a list",
            "",
            f"sha256:{sha.upper()}  red square",
            f"{md5}, blue (bare md5)",
            f"sha1:{hashlib.sha1(b'x').hexdigest()}",
            f"{hashlib.sha256(b'other').hexdigest()}   # bare sha256 with a comment",
            "pdq:" + "f" * 64,
        ]
    )
    blocks = BlockList.parse(text)
    assert blocks.counts() == {"sha256": 2, "sha1": 1, "md5": 1, "pdq": 1}
    hit = blocks.match(RED)
    assert hit is not None and (hit.algorithm, hit.distance, hit.label, hit.line) == ("sha256", 0, "red square", 3)
    hit = blocks.match(BLUE)
    assert hit is not None and hit.algorithm == "md5" and hit.label == "blue (bare md5)"
    assert "md5" in hit.describe() and "line 4" in hit.describe()
    assert blocks.match(png_bytes("green")) is None


def test_csv_with_header() -> None:
    sha = hashlib.sha256(RED).hexdigest()
    blocks = BlockList.parse(f"hash,type,label\n{sha},sha256,known\n{hashlib.md5(b'q').hexdigest()},md5,\n")
    assert blocks.counts()["sha256"] == 1 and blocks.counts()["md5"] == 1
    hit = blocks.match(RED)
    assert hit is not None and hit.label == "known" and hit.line == 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("xyz", "not a hex hash"),
        ("abc123", "neither sha256"),
        ("pdq:abcd", "pdq hash has 64"),
        ("whirlpool:" + "a" * 64, "unknown hash type"),
        ("md5:" + "a" * 64, "md5 hash has 32"),
    ],
)
def test_bad_lines_stop_the_load_with_their_number(line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        BlockList.parse("# header\n" + "a" * 64 + "\n" + line, name="list.txt")
    assert "list.txt line 3" in str(info.value)


def test_match_a_file_and_precomputed_digests(tmp_path: Path) -> None:
    path = tmp_path / "red.png"
    path.write_bytes(RED)
    blocks = BlockList.parse(f"sha1:{hashlib.sha1(RED).hexdigest()}")
    assert blocks.exact_algorithms == ["sha256", "sha1"]
    hit = blocks.match(path)
    assert hit is not None and hit.algorithm == "sha1"
    digests = file_digests(path, blocks.exact_algorithms)
    assert digests.sha256 == hashlib.sha256(RED).hexdigest() and digests.md5 is None
    assert blocks.match_digests(digests) is not None
    assert blocks.match_digests(Digests(sha256="0" * 64)) is None


def test_pdq_catches_a_resized_reencoded_copy_not_another_photo(tmp_path: Path) -> None:
    listed, _ = pdq_hash(photo_bytes("astronaut", 512, "PNG"))
    blocks = BlockList.parse(f"pdq:{listed} known image")
    copy = tmp_path / "copy.jpg"
    copy.write_bytes(photo_bytes("astronaut", 300, "JPEG", quality=35))
    hit = blocks.match(copy)
    assert hit is not None and hit.algorithm == "pdq" and 0 < hit.distance <= 31
    assert blocks.match(photo_bytes("coffee", 300)) is None
    assert blocks.match(b"not an image at all") is None
    strict = BlockList.parse(f"pdq:{listed}", pdq_distance=0)
    assert strict.match(copy) is None


def test_pdq_ignores_flat_low_quality_images() -> None:
    flat = png_bytes("white", (64, 64))
    value, quality = pdq_hash(flat)
    assert quality < 50
    assert BlockList.parse(f"pdq:{value}").match(flat) is None
    assert BlockList.parse(f"pdq:{value}", pdq_min_quality=0).match(flat) is not None


def test_pdq_list_without_pdqhash_fails_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "list.txt"
    path.write_text("pdq:" + "0" * 64 + "\n")
    monkeypatch.setitem(sys.modules, "pdqhash", None)
    with pytest.raises(MissingDependencyError, match=r"vhd\[collect\]"):
        BlockList.load(path)
    path.write_text("a" * 64 + "\n")
    assert len(BlockList.load(path)) == 1


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read block list"):
        BlockList.load(tmp_path / "missing.txt")
