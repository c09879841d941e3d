"""The q16 detector on a tiny random CLIP built offline, with random prompt embeddings."""

from __future__ import annotations

import asyncio
import pickle
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.detectors.conftest import drawn
from vhd.detectors.q16 import Q16Detector, load_prompts
from vhd.detectors.registry import create_detector
from vhd.errors import BackendUnavailableError, ConfigError, MissingDependencyError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind


def _prompts(tmp_path: Path, dim: int = 16, seed: int = 0, fmt: str = "p") -> Path:
    array = np.random.default_rng(seed).normal(size=(2, dim)).astype(np.float32)
    path = tmp_path / f"prompts.{fmt}"
    if fmt == "npy":
        np.save(path, array)
    elif fmt == "pt":
        import torch

        torch.save(torch.from_numpy(array), path)
    else:
        path.write_bytes(pickle.dumps(array))
    return path


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@pytest.mark.parametrize("fmt", ["p", "npy", "pt"])
def test_load_prompts_formats(tmp_path: Path, fmt: str) -> None:
    array = load_prompts(_prompts(tmp_path, fmt=fmt))
    assert array.shape == (2, 16) and array.dtype == np.float32


def test_load_prompts_rejects_bad_shape_and_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((3, 16), np.float32))
    with pytest.raises(ConfigError, match=r"shape \[3, 16\]"):
        load_prompts(bad)
    evil = tmp_path / "evil.p"
    evil.write_bytes(pickle.dumps(Path("/")))  # any non-numpy global is refused
    with pytest.raises(ConfigError, match="refusing to load"):
        load_prompts(evil)


def test_options_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs its learned prompts"):
        Q16Detector("q16")
    with pytest.raises(ConfigError, match="does not exist"):
        _run(Q16Detector("q16", None, {"prompts": str(tmp_path / "none.p")}).check())
    with pytest.raises(ConfigError, match="bad option threshold"):
        Q16Detector("q16", None, {"prompts": "x.p", "threshold": 2})
    det = create_detector("q16", {"prompts": "x.p"})
    assert isinstance(det, Q16Detector) and det.model == "openai/clip-vit-large-patch14"


def test_missing_extra_names_the_pip_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now fails
    det = Q16Detector("q16", None, {"prompts": str(_prompts(tmp_path))})
    with pytest.raises(MissingDependencyError, match=r"pip install 'vhd\[local\]'"):
        _run(det.check())


@pytest.mark.slow
def test_predicts_probabilities_from_local_clip(
    tiny_clip_dir: Path, tmp_path: Path, photo: Callable[[str], EncodedImage]
) -> None:
    prompts = _prompts(tmp_path)
    det = create_detector(f"q16:{tiny_clip_dir}", {"prompts": str(prompts), "device": "cpu"})
    assert isinstance(det, Q16Detector)
    _run(det.check())
    model, processor, matrix = det._loaded or (None, None, None)
    assert type(model).__name__ == "CLIPModel" and str(model.name_or_path) == str(tiny_clip_dir)
    assert tuple(matrix.shape) == (2, 16)

    images = [photo("astronaut"), photo("coffee"), drawn("red"), drawn("blue", text="hi")]
    probs = det.probabilities(images)
    assert len(probs) == 4 and all(0.0 <= p <= 1.0 for p in probs)
    gentle = Q16Detector("q16", str(tiny_clip_dir), {"prompts": str(prompts), "logit_scale": 1.0})
    assert len({round(p, 6) for p in gentle.probabilities(images)}) == 4  # the image matters

    # Same number through predict(), and the threshold decides.
    pred = _run(det.predict(Kind.IMAGE, [images[0]]))
    assert pred.score == pytest.approx(probs[0], abs=1e-5) and pred.labels == {"inappropriate": pred.score}
    assert pred.harmful is (probs[0] >= 0.5) and pred.categories == [] and pred.error is None
    low = Q16Detector("q16", str(tiny_clip_dir), {"prompts": str(prompts), "threshold": 0.0})
    high = Q16Detector("q16", str(tiny_clip_dir), {"prompts": str(prompts), "threshold": 1.0})
    assert _run(low.predict(Kind.IMAGE, [images[0]])).harmful is True
    assert _run(high.predict(Kind.IMAGE, [images[0]])).harmful is (probs[0] >= 1.0)

    # The reference computation: cosine similarity x 100, softmax, class 1.
    import torch

    pixels = processor(images=[images[1].to_pil()], return_tensors="pt")["pixel_values"]
    with torch.inference_mode():
        out = model.get_image_features(pixel_values=pixels)
        feats = out if isinstance(out, torch.Tensor) else out.pooler_output
    raw = torch.from_numpy(load_prompts(prompts))
    cos = torch.nn.functional.cosine_similarity(feats[:, None, :], raw[None, :, :], dim=-1)
    expected = (100 * cos).softmax(-1)[0, 1].item()
    assert probs[1] == pytest.approx(expected, abs=1e-5)

    # A video is judged frame by frame: harmful when any frame is; score = the highest.
    video = _run(low.predict(Kind.VIDEO, images[:3]))
    assert video.harmful is True and video.score == pytest.approx(max(probs[:3]), abs=1e-5)


@pytest.mark.slow
def test_identity_and_load_errors(tiny_clip_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = Q16Detector("q16", str(tiny_clip_dir), {"prompts": str(_prompts(tmp_path / "a", seed=0))})
    b = Q16Detector("q16", str(tiny_clip_dir), {"prompts": str(_prompts(tmp_path / "b", seed=1))})
    c = Q16Detector("q16", str(tiny_clip_dir), {"prompts": str(_prompts(tmp_path / "a", seed=0)), "threshold": 0.7})
    assert a.identity() != b.identity() and a.identity() != c.identity()
    assert a.identity() == Q16Detector("q16", str(tiny_clip_dir), {"prompts": a.opts.prompts}).identity()

    wrong_dim = Q16Detector("q16", str(tiny_clip_dir), {"prompts": str(_prompts(tmp_path, dim=8))})
    with pytest.raises(ConfigError, match="8 dimensions"):
        _run(wrong_dim.check())
    missing = Q16Detector("q16", str(tmp_path / "nope"), {"prompts": str(_prompts(tmp_path))})
    with pytest.raises(BackendUnavailableError, match="no such model directory"):
        _run(missing.check())
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BackendUnavailableError, match="save_pretrained"):
        _run(Q16Detector("q16", str(empty), {"prompts": str(_prompts(tmp_path))}).check())
