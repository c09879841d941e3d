from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.optional import need_module


@pytest.mark.slow
def test_watermark_is_the_sdxl_message_and_recorded(tiny_pipes: dict[str, Path], tmp_path: Path) -> None:
    need_module("imwatermark", "pip install 'vhd[watermark]' (or pip install --no-deps invisible-watermark PyWavelets)")
    from imwatermark import WatermarkDecoder
    from skimage import data

    from vhd.synth.generate import generate_one
    from vhd.synth.generators import GenerateSettings, create_generator
    from vhd.synth.outputs import WATERMARK_MESSAGE, Watermarker
    from vhd.synth.rows import PromptRow

    bits = [int(b) for b in bin(WATERMARK_MESSAGE)[2:]]
    photo = np.ascontiguousarray(data.astronaut())
    marked = Watermarker().apply(photo[None])[0]
    decoded = WatermarkDecoder("bits", len(bits)).decode(np.ascontiguousarray(marked[:, :, ::-1]), "dwtDct")
    assert list(decoded) == bits and np.abs(marked.astype(int) - photo).mean() < 3
    small = np.zeros((1, 32, 32, 3), dtype=np.uint8)
    assert Watermarker().apply(small) is small

    gen = create_generator(f"sd:{tiny_pipes['sd']}", GenerateSettings(device="cpu", size=(256, 256), steps=1))
    made = generate_one(gen, PromptRow("a cup of tea", None, "t"), base_seed=3)
    assert made.provenance.watermark == "on" and made.data is not None
    off = create_generator(
        f"sd:{tiny_pipes['sd']}", GenerateSettings(device="cpu", size=(256, 256), steps=1, watermark=False)
    )
    plain = generate_one(off, PromptRow("a cup of tea", None, "t"), base_seed=3)
    assert plain.provenance.watermark == "off" and (plain.frames != made.frames).any()
