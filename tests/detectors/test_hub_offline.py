"""Hub loads outside ``vhd annotate`` fail fast, in one line, when the hub cannot be reached.

HF_HUB_OFFLINE is unset and the hub points at a closed local port: without the shared probe
(`vhd.backends.hub`), huggingface_hub retries every file for minutes and the error is cut
mid-URL. Each load must give the ``hf`` backend's one-line message naming ``hf download``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.servers import free_port
from vhd.errors import VhdError

FAST_S = 8.0  # seconds: one probe of a closed port and a cache lookup, not minutes of retries


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def one_line_failure(load: Callable[[], Any], capfd: pytest.CaptureFixture[str]) -> str:
    start = time.perf_counter()
    with pytest.raises(VhdError) as info:
        load()
    took = time.perf_counter() - start
    message = str(info.value)
    printed = capfd.readouterr()
    assert took < FAST_S, f"{took:.1f} s: retried instead of failing fast"
    assert "\n" not in message
    assert printed.err.strip() == "" and printed.out.strip() == "", printed  # no retry chatter: the error is all
    assert "huggingface-cli" not in message  # huggingface_hub 1.x and later ship `hf`, not huggingface-cli
    assert "http" not in message  # no URL, let alone one cut in the middle
    return message


def test_shieldgemma2(no_network: None, capfd: pytest.CaptureFixture[str]) -> None:
    from vhd.detectors.shieldgemma2 import ShieldGemma2Detector

    det = ShieldGemma2Detector("sg", "vhd-tests/not-cached-shieldgemma2")
    message = one_line_failure(lambda: asyncio.run(det.check()), capfd)
    assert "not in the local cache and the hub is unreachable" in message
    assert "hf download vhd-tests/not-cached-shieldgemma2" in message


def test_q16_model_and_prompts(no_network: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from vhd.detectors.q16 import Q16Detector

    prompts = tmp_path / "prompts.npy"
    np.save(prompts, np.ones((2, 8), dtype=np.float32))
    det = Q16Detector("q", "vhd-tests/not-cached-clip", {"prompts": str(prompts)})
    message = one_line_failure(lambda: asyncio.run(det.check()), capfd)
    assert "hf download vhd-tests/not-cached-clip" in message
    from_hub = Q16Detector("q", None, {"prompts": "hf://vhd-tests/q16-prompts/prompts.p"})
    message = one_line_failure(lambda: asyncio.run(from_hub.check()), capfd)
    assert "hf download vhd-tests/q16-prompts prompts.p" in message


def test_llavaguard_over_hf(no_network: None, capfd: pytest.CaptureFixture[str]) -> None:
    from vhd.detectors.registry import DetectorSpec, create_detector

    det = create_detector(DetectorSpec.parse("llavaguard:hf:vhd-tests/not-cached-llavaguard"), {})
    message = one_line_failure(lambda: asyncio.run(det.check()), capfd)
    assert "hf download vhd-tests/not-cached-llavaguard" in message
    asyncio.run(det.aclose())


def test_embedding_model(no_network: None, capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sentence_transformers")
    from vhd.categorize.embedding import Embedder

    message = one_line_failure(lambda: Embedder("vhd-tests/not-cached-embedder"), capfd)
    assert "hf download vhd-tests/not-cached-embedder" in message


def test_a_connection_error_after_the_probe_gives_the_same_line(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The probe passes (a proxy, say) but the download cannot connect: the same one line."""
    import transformers

    from vhd.backends import hub
    from vhd.detectors.shieldgemma2 import ShieldGemma2Detector

    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: True)

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(
            "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the "
            "cached files.\nCheck your internet connection or see how to run the library in offline mode at "
            "'https://huggingface.co/docs/transformers/installation#offline-mode'."
        )

    monkeypatch.setattr(transformers.AutoProcessor, "from_pretrained", refuse)
    det = ShieldGemma2Detector("sg", "vhd-tests/not-cached-shieldgemma2")
    message = one_line_failure(lambda: asyncio.run(det.check()), capfd)
    assert "not in the local cache and the hub is unreachable" in message
    assert "hf download vhd-tests/not-cached-shieldgemma2" in message
