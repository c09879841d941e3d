from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from tests.optional import need_module
from vhd.backends.base import GenerateConfig, Message
from vhd.errors import BackendError


@pytest.mark.slow
def test_hf_loads_a_text_only_model_for_text_requests(tmp_path: Path) -> None:
    need_module("transformers", "pip install 'vhd[local]'")
    from PIL import Image

    from tests.tiny_models import build_tiny_text_llm
    from vhd.backends.registry import create_backend
    from vhd.media.encoded import EncodedImage

    folder = build_tiny_text_llm(tmp_path / "llm")
    backend = create_backend(f"hf:{folder}", {"hf": {"device": "cpu"}})

    async def run() -> None:
        cfg = GenerateConfig(max_tokens=6, temperature=0)
        try:
            a, b = await asyncio.gather(
                backend.generate([Message("user", "Write scenes about a toy")], cfg),
                backend.generate([Message("system", "Be brief."), Message("user", "A cat")], cfg),
            )
            assert a.completion_tokens > 0 and b.completion_tokens > 0
            assert a.text == (await backend.generate([Message("user", "Write scenes about a toy")], cfg)).text
            buf = io.BytesIO()
            Image.new("RGB", (8, 8)).save(buf, format="PNG")
            image = EncodedImage(buf.getvalue(), "image/png", 8, 8)
            with pytest.raises(BackendError, match="reads text only"):
                await backend.generate([Message("user", ("What is this?", image))], cfg)
        finally:
            await backend.aclose()

    asyncio.run(run())
