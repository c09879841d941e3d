from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from PIL import Image

from tests.media.conftest import jpeg_bytes, photo, png_header_only
from vhd.errors import ConfigError, MediaError
from vhd.media.image import (
    ImageLimits,
    encode_image,
    encode_image_bytes,
    load_image_encoded,
    open_image,
)

WriteBytes = Callable[[str, bytes], Path]


def png_bytes(image: Image.Image, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG", **kwargs)
    return buf.getvalue()


# --- refusing bad files -------------------------------------------------------------------


def test_zero_byte_file(write_bytes: WriteBytes) -> None:
    with pytest.raises(MediaError, match="empty file"):
        open_image(write_bytes("empty.jpg", b""))


def test_garbage_file(write_bytes: WriteBytes) -> None:
    with pytest.raises(MediaError, match="not a recognised image format"):
        open_image(write_bytes("garbage.png", b"this is not an image\n" * 20))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="cannot read file"):
        open_image(tmp_path / "nope.jpg")


def test_truncated_jpeg(write_bytes: WriteBytes) -> None:
    data = jpeg_bytes(photo((400, 300)))
    path = write_bytes("cut.jpg", data[: len(data) // 2])
    with pytest.raises(MediaError, match=r"^truncated or corrupt image \(OSError: "):
        open_image(path)
    with pytest.raises(MediaError, match="truncated or corrupt"):
        load_image_encoded(path)  # the fast path must validate too
    with pytest.raises(MediaError, match="truncated or corrupt"):
        load_image_encoded(path, max_side=100)  # and the reduced-scale (draft) path


def test_truncated_png(write_bytes: WriteBytes) -> None:
    data = png_bytes(photo((300, 200)))
    with pytest.raises(MediaError, match="truncated or corrupt"):
        open_image(write_bytes("cut.png", data[: len(data) // 2]))


def test_error_messages_are_one_line(write_bytes: WriteBytes) -> None:
    data = jpeg_bytes(photo((400, 300)))
    with pytest.raises(MediaError) as info:
        open_image(write_bytes("cut.jpg", data[:1000]))
    assert "\n" not in str(info.value)


def test_wrong_extension_is_read_by_content(write_bytes: WriteBytes) -> None:
    img = open_image(write_bytes("really_a_jpeg.png", jpeg_bytes(photo((80, 60)))))
    assert img.size == (80, 60)
    with pytest.raises(MediaError, match="not a recognised image format"):
        open_image(write_bytes("text.jpg", b"<html>not a photo</html>"))


def test_bomb_header_far_over_the_limit(write_bytes: WriteBytes) -> None:
    data = png_header_only(50_000, 50_000)
    assert len(data) < 100
    with pytest.raises(MediaError, match="decompression bomb"):
        open_image(write_bytes("bomb.png", data))


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_between_one_and_two_times_the_default_limit(write_bytes: WriteBytes) -> None:
    # 100 MP: 1.56x the default 64 MP limit, and inside Pillow's own warn-only band.
    with pytest.raises(MediaError, match="over the limit of 64,000,000"):
        open_image(write_bytes("big.png", png_header_only(10_000, 10_000)))


@pytest.mark.filterwarnings("error::PIL.Image.DecompressionBombWarning")
def test_pillow_warning_as_error_still_gives_media_error(write_bytes: WriteBytes) -> None:
    with pytest.raises(MediaError, match="decompression bomb"):
        open_image(write_bytes("big.png", png_header_only(10_000, 10_000)))


def test_custom_pixel_limit_between_one_and_two_times(write_bytes: WriteBytes) -> None:
    limits = ImageLimits(max_pixels=1_000_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Pillow warning is involved at this size
        with pytest.raises(MediaError, match="1,200,000 pixels, over the limit of 1,000,000"):
            open_image(write_bytes("a.png", png_header_only(1200, 1000)), limits)
    ok = write_bytes("ok.png", png_bytes(Image.new("RGB", (1000, 1000), (1, 2, 3))))
    assert open_image(ok, limits).size == (1000, 1000)


def test_limits_do_not_touch_pillow_globals(write_bytes: WriteBytes) -> None:
    before = Image.MAX_IMAGE_PIXELS
    with pytest.raises(MediaError):
        open_image(write_bytes("a.png", png_header_only(200, 200)), ImageLimits(max_pixels=100))
    assert before == Image.MAX_IMAGE_PIXELS


def test_byte_limit(write_bytes: WriteBytes) -> None:
    path = write_bytes("p.jpg", jpeg_bytes(photo((200, 150))))
    with pytest.raises(MediaError, match="MiB limit"):
        open_image(path, ImageLimits(max_bytes=1000))
    with pytest.raises(MediaError, match="MiB limit"):
        load_image_encoded(path, limits=ImageLimits(max_bytes=1000))


def test_limits_validation() -> None:
    with pytest.raises(ConfigError):
        ImageLimits(max_pixels=0)
    with pytest.raises(ConfigError):
        ImageLimits(max_bytes=-1)


# --- normalising what is read -------------------------------------------------------------


def _split_image(size: tuple[int, int]) -> Image.Image:
    """Left half red, right half blue."""
    img = Image.new("RGB", size, (0, 0, 255))
    img.paste((255, 0, 0), (0, 0, size[0] // 2, size[1]))
    return img


def _near(rgb: object, expected: tuple[int, int, int], tol: int = 40) -> bool:
    assert isinstance(rgb, tuple)
    return all(abs(int(a) - b) <= tol for a, b in zip(rgb, expected, strict=True))


def test_exif_orientation_is_applied(write_bytes: WriteBytes) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # display after rotating 90 degrees clockwise
    path = write_bytes("rot.jpg", jpeg_bytes(_split_image((80, 40)), exif=exif.tobytes()))
    img = open_image(path)
    assert img.size == (40, 80)
    assert _near(img.getpixel((20, 10)), (255, 0, 0))  # the left (red) half is now on top
    assert _near(img.getpixel((20, 70)), (0, 0, 255))
    encoded = load_image_encoded(path)
    assert (encoded.width, encoded.height) == (40, 80)
    assert encoded.data != path.read_bytes()  # rotated, so not the original bytes
    assert _near(encoded.to_pil().getpixel((20, 10)), (255, 0, 0))


def test_animated_gif_gives_first_frame(write_bytes: WriteBytes) -> None:
    frames = [Image.new("RGB", (32, 32), c) for c in [(255, 0, 0), (0, 255, 0), (0, 0, 255)]]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    path = write_bytes("anim.gif", buf.getvalue())
    with Image.open(path) as check:
        assert getattr(check, "n_frames", 1) == 3
    img = open_image(path)
    assert img.mode == "RGB"
    assert _near(img.getpixel((16, 16)), (255, 0, 0), tol=10)


def test_rgba_is_composited_on_white(write_bytes: WriteBytes) -> None:
    rgba = Image.new("RGBA", (20, 10), (0, 0, 0, 0))
    rgba.paste((0, 128, 0, 255), (0, 0, 10, 10))
    img = open_image(write_bytes("a.png", png_bytes(rgba)))
    assert img.mode == "RGB"
    assert img.getpixel((15, 5)) == (255, 255, 255)
    assert img.getpixel((5, 5)) == (0, 128, 0)


def test_palette_transparency_and_other_modes(write_bytes: WriteBytes) -> None:
    pal = Image.new("P", (10, 10), 0)
    pal.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    pal.paste(1, (0, 0, 5, 10))
    path = write_bytes("p.png", png_bytes(pal, transparency=0))
    img = open_image(path)
    assert img.getpixel((2, 2)) == (255, 0, 0)
    assert img.getpixel((8, 2)) == (255, 255, 255)

    gray16 = Image.new("I;16", (8, 8), 65535)
    assert open_image(write_bytes("g16.png", png_bytes(gray16))).getpixel((1, 1)) == (
        255,
        255,
        255,
    )
    cmyk = Image.new("CMYK", (8, 8), (0, 255, 255, 0))
    assert _near(open_image(write_bytes("c.jpg", jpeg_bytes(cmyk))).getpixel((1, 1)), (255, 0, 0))
    gray = Image.new("L", (8, 8), 77)
    assert open_image(write_bytes("l.png", png_bytes(gray))).getpixel((1, 1)) == (77, 77, 77)


# --- encoding -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "max_side", "expected"),
    [
        ((3000, 2000), 1024, (1024, 683)),
        ((2000, 3000), 1024, (683, 1024)),
        ((500, 300), 1024, (500, 300)),
        ((1024, 10), 512, (512, 5)),
        ((5000, 2), 100, (100, 1)),
    ],
)
def test_encode_sizes(size: tuple[int, int], max_side: int, expected: tuple[int, int]) -> None:
    encoded = encode_image(Image.new("RGB", size, (10, 20, 30)), max_side=max_side)
    assert (encoded.width, encoded.height) == expected
    assert encoded.to_pil().size == expected
    assert encoded.mime == "image/jpeg"


@pytest.mark.parametrize(("fmt", "mime"), [("png", "image/png"), ("webp", "image/webp")])
def test_encode_formats(fmt: str, mime: str) -> None:
    encoded = encode_image(photo((300, 200)), max_side=128, fmt=fmt)
    assert encoded.mime == mime
    with Image.open(io.BytesIO(encoded.data)) as back:
        assert back.format == fmt.upper()
        assert back.size == (128, 85)


def test_encode_rejects_bad_settings() -> None:
    img = Image.new("RGB", (10, 10))
    with pytest.raises(ConfigError, match="unknown image format"):
        encode_image(img, fmt="tiff")
    with pytest.raises(ConfigError, match="quality"):
        encode_image(img, quality=0)
    with pytest.raises(ConfigError, match="max_side"):
        encode_image(img, max_side=0)


def test_fast_path_sends_original_jpeg_bytes(write_bytes: WriteBytes) -> None:
    data = jpeg_bytes(photo((800, 600)), quality=75)
    encoded = load_image_encoded(write_bytes("p.jpg", data))
    assert encoded.data == data
    assert (encoded.width, encoded.height, encoded.mime) == (800, 600, "image/jpeg")


def test_jpeg_sent_as_is_is_checked_at_one_eighth_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its pixels are never used: the check decodes every byte of the file but not at full size.
    from PIL import JpegImagePlugin

    decoded: list[tuple[int, int]] = []
    real_load = JpegImagePlugin.JpegImageFile.load

    def load(self: JpegImagePlugin.JpegImageFile) -> object:
        decoded.append(self.size)
        return real_load(self)

    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "load", load)
    for progressive in (False, True):
        data = jpeg_bytes(photo((800, 600)), progressive=progressive)
        decoded.clear()
        encoded = encode_image_bytes(data)
        assert encoded.data == data
        assert (encoded.width, encoded.height) == (800, 600)
        assert decoded == [(100, 75)]


def test_jpeg_decoded_down_to_exactly_max_side_is_still_re_encoded() -> None:
    # 2048 px is drafted to 1024 px at half scale: the declared size, not the decoded one, decides.
    data = jpeg_bytes(photo((2048, 1536)))
    encoded = encode_image_bytes(data, max_side=1024)
    assert (encoded.width, encoded.height) == (1024, 768)
    assert encoded.data != data


def test_scaled_check_refuses_what_a_full_decode_refuses() -> None:
    # Cut or corrupted copies of a JPEG that would be sent as is: the 1/8-scale check (with the
    # damage check) refuses exactly those that a full decode (open_image_bytes) refuses.
    import random

    from vhd.media.image import open_image_bytes

    rng = random.Random(5)
    bases = [jpeg_bytes(photo((640, 480))), jpeg_bytes(photo((500, 400)), progressive=True)]
    refused = 0
    for i in range(80):
        data = bytearray(bases[i % 2])
        if i % 4 < 2:
            data = data[: rng.randint(2, len(data) - 1)]
        else:
            for _ in range(3):
                at = rng.randrange(200, len(data))
                data[at] ^= 1 << rng.randrange(8)
        outcomes = []
        for decode in (open_image_bytes, encode_image_bytes):
            try:
                decode(bytes(data))
                outcomes.append("read")
            except MediaError as exc:
                outcomes.append(str(exc).split(" (")[0])
        assert outcomes[0] == outcomes[1], (i, outcomes)
        refused += outcomes[0] != "read"
    assert 40 <= refused < 80  # every cut and some of the corrupted copies


def test_no_fast_path_when_change_is_needed(write_bytes: WriteBytes) -> None:
    data = jpeg_bytes(photo((800, 600)), quality=75)
    path = write_bytes("p.jpg", data)
    smaller = load_image_encoded(path, max_side=400)
    assert (smaller.width, smaller.height) == (400, 300)
    assert smaller.data != data
    as_png = load_image_encoded(path, fmt="png")
    assert as_png.mime == "image/png"
    gray = jpeg_bytes(photo((200, 100)).convert("L"))
    from_gray = load_image_encoded(write_bytes("g.jpg", gray))
    assert from_gray.data != gray
    assert from_gray.to_pil().mode == "RGB"


def test_large_jpeg_reduced_decode_matches_full_decode(write_bytes: WriteBytes) -> None:
    source = photo((3000, 2000))
    path = write_bytes("big.jpg", jpeg_bytes(source, quality=95))
    fast = load_image_encoded(path).to_pil()
    assert fast.size == (1024, 683)
    reference = source.resize((1024, 683), Image.Resampling.LANCZOS)
    import numpy as np

    diff = np.abs(np.asarray(fast, dtype=float) - np.asarray(reference, dtype=float)).mean()
    assert diff < 6.0


def test_encode_image_bytes_equals_file_loader(write_bytes: WriteBytes) -> None:
    data = png_bytes(photo((640, 480)))
    path = write_bytes("p.png", data)
    assert encode_image_bytes(data, max_side=256) == load_image_encoded(path, max_side=256)


def test_concurrent_loads_match_sequential(write_bytes: WriteBytes) -> None:
    paths = [
        write_bytes("a.jpg", jpeg_bytes(photo((1500, 1000)))),
        write_bytes("b.png", png_bytes(photo((300, 300)))),
        write_bytes("c.jpg", jpeg_bytes(photo((640, 480)))),
        write_bytes("d.webp", png_bytes(photo((700, 100)))),
    ] * 4
    sequential = [load_image_encoded(p, max_side=512) for p in paths]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda p: load_image_encoded(p, max_side=512), paths))
    assert [e.data for e in parallel] == [e.data for e in sequential]
