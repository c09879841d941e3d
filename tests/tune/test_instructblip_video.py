"""Soft-prompt tuning of a tiny random InstructBLIP-Video: one video input per clip, no torchvision."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import need_module
from tests.tune.test_tune import config, tuned_scores
from vhd.backends.soft_prompt_ckpt import META_FILE, read_checkpoint
from vhd.records import LabelledSample


@pytest.fixture(autouse=True)
def _needs_torch() -> None:
    need_module("torch", "pip install 'vhd[tune]'")
    need_module("transformers", "pip install 'vhd[tune]'")


@pytest.fixture(scope="session")
def tiny_video_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random InstructBLIP-Video saved with its tokenizers and per-frame image processor."""
    need_module("torch", "pip install 'vhd[tune]'")
    from tests.tiny_models import build_tiny_instructblip_video

    return build_tiny_instructblip_video(tmp_path_factory.mktemp("tiny_ib_video"))


@pytest.fixture(scope="session")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[LabelledSample]]:
    """Eight 3-frame clips as frame folders, alternating bright (harmful) and dark, with a labels CSV."""
    import numpy as np
    from PIL import Image

    from vhd.tune.data import load_items

    root = tmp_path_factory.mktemp("clips")
    rng = np.random.default_rng(3)
    lines = ["path,harmful"]
    for k in range(8):
        folder = root / f"clip{k}"
        folder.mkdir()
        for f in range(3):
            arr = np.clip(rng.normal(200 if k % 2 else 50, 25, (40, 48, 3)), 0, 255).astype("uint8")
            Image.fromarray(arr).save(folder / f"clip{k}_{f:04d}.png")
        lines.append(f"clip{k},{'yes' if k % 2 else 'no'}")
    labels = root / "labels.csv"
    labels.write_text("\n".join(lines) + "\n")
    return labels, load_items(labels)


def test_a_clip_is_one_video_input(tiny_video_dir: Path, clips: tuple[Path, list[LabelledSample]]) -> None:
    from vhd.backends.blip_video import VideoBlipProcessor
    from vhd.backends.soft_prompt import encode, input_side, prepare_image
    from vhd.tune.train import load_tuning_model

    soft = load_tuning_model(config(tiny_video_dir, frames=3))
    processor = soft.loaded.processor
    assert isinstance(processor, VideoBlipProcessor) and input_side(processor) == 32
    from PIL import Image

    frames = [prepare_image(Image.open(p), 32, "center") for p in sorted(Path(clips[1][0].path).iterdir())]
    batch = encode(soft, ["Is this video harmful <S*>?"] * 2, [frames, frames[:3]])
    assert tuple(batch["pixel_values"].shape) == (2, 3, 3, 32, 32)
    video_id = soft.loaded.model.config.video_token_id
    assert int((batch["input_ids"][0] == video_id).sum()) == 4 * 3  # query tokens x frames
    assert int((batch["input_ids"][0] == soft.token_id).sum()) == 1


@pytest.mark.slow
def test_instructblip_video_tunes_on_clips_and_scores_through_vhd_bench(
    tiny_video_dir: Path, clips: tuple[Path, list[LabelledSample]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vhd.cli.main import main
    from vhd.tune.train import load_tuning_model, train

    labels, items = clips
    cfg = config(tiny_video_dir, epochs=6, lr=1e-2, frames=3, batch_size=4)
    soft = load_tuning_model(cfg)
    before = {k: v.detach().clone() for k, v in soft.loaded.model.state_dict().items()}
    result = train(cfg, items, tmp_path / "ck", soft=soft)
    assert result.losses[-1] < 0.9 * result.losses[0]  # the loss falls on bright vs dark clips
    soft.bake()
    after = soft.loaded.model.state_dict()
    table = soft.loaded.model.get_input_embeddings().weight
    emb_key = next(k for k, v in after.items() if v.data_ptr() == table.data_ptr())
    assert [k for k in before if not bool((before[k] == after[k]).all())] == [emb_key]
    rows = (before[emb_key] != after[emb_key]).any(dim=1).nonzero().flatten().tolist()
    assert rows == [soft.token_id]  # only S* changed
    _, meta = read_checkpoint(tmp_path / "ck")
    assert meta.modality == "video" and meta.question("video") == "Is this video harmful <S*>?"
    first = tuned_scores(tmp_path / "ck", items[:4])
    assert all(0 <= s <= 1 for s in first)
    assert tuned_scores(tmp_path / "ck", items[:4]) == first  # a reloaded checkpoint scores the same
    bench = ["bench", "--labels", str(labels), "--detector", f"tuned=tuned-vlm:{tmp_path / 'ck'}"]
    bench += ["--set", "tuned.device=cpu", "--set", "tuned.dtype=float32"]
    bench += ["--out", str(tmp_path / "report"), "--no-plots", "--no-progress"]
    capsys.readouterr()
    assert main(bench) == 0
    out = capsys.readouterr().out
    assert "| tuned | 8/8 |" in out and "0 failed" in out  # every clip scored as one video


def test_a_video_processor_config_alone_is_applied_per_frame(tiny_video_dir: Path, tmp_path: Path) -> None:
    import json
    import shutil

    from vhd.backends.blip_video import load_processor

    only_video = tmp_path / "only_video"
    shutil.copytree(tiny_video_dir, only_video)
    settings = json.loads((only_video / "preprocessor_config.json").read_text())
    (only_video / "preprocessor_config.json").unlink()
    settings["size"] = {"height": 24, "width": 24}
    (only_video / "video_preprocessor_config.json").write_text(json.dumps(settings))
    processor = load_processor(str(only_video), {"local_files_only": True})
    assert processor.image_processor.size["height"] == 24
    (only_video / "video_preprocessor_config.json").unlink()
    from vhd.errors import BackendUnavailableError

    with pytest.raises(BackendUnavailableError, match=r"video_preprocessor_config\.json"):
        load_processor(str(only_video), {"local_files_only": True})


def test_the_hf_backend_generates_over_a_clip(tiny_video_dir: Path) -> None:
    import asyncio
    import io

    from PIL import Image

    from vhd.backends.base import GenerateConfig, Message
    from vhd.backends.hf import HFBackend
    from vhd.media.encoded import EncodedImage

    def frame(color: str) -> EncodedImage:
        buf = io.BytesIO()
        Image.new("RGB", (40, 40), color).save(buf, "PNG")
        return EncodedImage(buf.getvalue(), "image/png", 40, 40)

    async def go() -> tuple[int, int]:
        backend = HFBackend(str(tiny_video_dir), {"device": "cpu", "dtype": "float32"})
        try:
            clip = (frame("red"), frame("blue"), frame("green"), "Is this video harmful?")
            out = await backend.generate([Message("user", clip)], GenerateConfig(max_tokens=3, temperature=0))
        finally:
            await backend.aclose()
        return out.prompt_tokens, out.completion_tokens

    prompt_tokens, completion_tokens = asyncio.run(go())
    assert prompt_tokens > 4 * 3  # the 3 frames' video tokens lead the prompt
    assert 1 <= completion_tokens <= 3


def test_cache_vision_is_refused_for_the_video_class(
    tiny_video_dir: Path, clips: tuple[Path, list[LabelledSample]], tmp_path: Path
) -> None:
    from vhd.errors import ConfigError
    from vhd.tune.train import train

    cfg = config(tiny_video_dir, frames=3, train_crop="center", cache_vision=True)
    with pytest.raises(ConfigError, match="cache-vision is not supported for InstructBlipVideo"):
        train(cfg, clips[1], tmp_path / "ck")
    assert not (tmp_path / "ck" / META_FILE).exists()
