"""The tune data path: each sample decoded once a run, the earlier pixels and crops, batches built in workers."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.optional import need_module
from tests.tune.test_tune import Sets, config
from vhd.records import Kind, LabelledSample


@pytest.fixture(autouse=True)
def _needs_torch() -> None:
    need_module("torch", "pip install 'vhd[tune]'")
    need_module("transformers", "pip install 'vhd[tune]'")


def old_path(item: LabelledSample, side: int, crop: str, rng: random.Random) -> list[object]:
    """What `vhd tune` fed the processor before: load_sample with a PNG round trip, then prepare_image."""
    from vhd.backends.soft_prompt import prepare_image
    from vhd.media.load import MediaSettings, load_sample
    from vhd.records import MediaItem

    settings = MediaSettings(max_side=max(64, 2 * side), fmt="png", n_frames=3)
    path = Path(item.path)
    loaded = load_sample(MediaItem(path=path, kind=item.kind, is_frame_folder=path.is_dir()), settings)
    return [prepare_image(im.to_pil(), side, crop, rng) for im in loaded.images]  # type: ignore[arg-type]


def test_decoded_crops_are_the_pixels_and_crops_of_the_png_path(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    from vhd.tune.loader import DecodedSet

    rng = np.random.default_rng(0)
    items = []
    for k, (w, h) in enumerate([(300, 200), (97, 410), (40, 48)]):  # downscaled, tall, enlarged
        arr = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
        path = tmp_path / f"im{k}.{'jpg' if k == 0 else 'png'}"
        Image.fromarray(arr).save(path)
        items.append(LabelledSample(id=str(k), path=path, kind=Kind.IMAGE, harmful=bool(k % 2)))
    folder = tmp_path / "clip"
    folder.mkdir()
    for f in range(5):
        Image.fromarray(rng.integers(0, 255, (90, 120, 3), dtype=np.uint8)).save(folder / f"clip_{f:04d}.png")
    items.append(LabelledSample(id="v", path=folder, kind=Kind.VIDEO, harmful=True))
    side = 32
    data = DecodedSet.decode(items, frames=3, side=side, threads=2)
    assert not data.errors
    for crop in ("random", "center"):
        old_rng, new_rng = random.Random(7), random.Random(7)
        for k, item in enumerate(items):
            before = old_path(item, side, crop, old_rng)
            ((index, boxes),) = data.plan([k], crop, new_rng)  # type: ignore[arg-type]
            after = [im.crop(box) for im, box in zip(data.frames[index], boxes, strict=True)]
            assert [np.asarray(a).tolist() for a in after] == [np.asarray(b).tolist() for b in before]
        assert old_rng.random() == new_rng.random()  # the same draws, in the same order


def test_an_unreadable_sample_is_decoded_never_and_planned_out(tmp_path: Path) -> None:
    from vhd.tune.loader import DecodedSet

    good = tmp_path / "good.png"
    from PIL import Image

    Image.new("RGB", (40, 40), (200, 10, 10)).save(good)
    bad = tmp_path / "bad.png"
    bad.write_bytes(good.read_bytes()[:50])
    items = [LabelledSample(id=n, path=p, kind=Kind.IMAGE, harmful=True) for n, p in (("g", good), ("b", bad))]
    data = DecodedSet.decode(items, frames=1, side=16)
    assert list(data.frames) == [0] and "truncated" in data.errors[1]
    assert [k for k, _ in data.plan([1, 0], "random", random.Random(0))] == [0]


def test_each_image_is_decoded_once_a_run_and_never_re_encoded(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PIL import Image

    from vhd.tune.train import train

    opened: list[str] = []
    saved: list[str] = []
    real_open, real_save = Image.open, Image.Image.save

    def counting_open(fp, *a, **kw):  # type: ignore[no-untyped-def]
        opened.append(str(fp))
        return real_open(fp, *a, **kw)

    def counting_save(self, fp, *a, **kw):  # type: ignore[no-untyped-def]
        saved.append(str(fp))
        return real_save(self, fp, *a, **kw)

    monkeypatch.setattr(Image, "open", counting_open)
    monkeypatch.setattr(Image.Image, "save", counting_save)
    train_set, val_set = bright_dark[0][:8], bright_dark[1][:4]
    result = train(config(tiny_instructblip_dir, epochs=3, lr=1e-2, workers=0), train_set, tmp_path / "ck", val=val_set)
    assert result.epochs == 3 and len(result.val_losses) == 3
    assert len(opened) == len(train_set) + len(val_set)  # once a run, not once an epoch (3 x 12 before)
    assert saved == []  # no PNG round trip
    assert result.prepare_s > 0 and result.steps_s > result.data_wait_s > 0


def test_workers_build_the_same_batches_as_the_training_process(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path
) -> None:
    import torch

    from vhd.backends.soft_prompt_ckpt import read_checkpoint
    from vhd.tune.train import train

    runs = {}
    for workers in (0, 2):
        cfg = config(tiny_instructblip_dir, epochs=2, lr=1e-2, workers=workers, log_every=1)
        runs[workers] = train(cfg, bright_dark[0][:12], tmp_path / str(workers))
    assert runs[0].losses == runs[2].losses
    a, meta = read_checkpoint(tmp_path / "0")
    b, _ = read_checkpoint(tmp_path / "2")
    assert torch.equal(a, b)
    assert meta.config["workers"] == 0 and meta.config["compile"] == "off"
    # workers and log_every do not change what is trained: a run may resume with others
    more = train(config(tiny_instructblip_dir, epochs=2, lr=1e-2, workers=1), bright_dark[0][:12], tmp_path / "0")
    assert more.steps == 0 and more.resumed_from == 2


def test_the_step_reads_nothing_back_from_the_device_but_every_log_every_steps(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host syncs made by the training loop itself (the model's own are the library's)."""
    import sys

    import torch

    from vhd.tune.train import train

    reads: list[str] = []

    def counted(name: str):  # type: ignore[no-untyped-def]
        real = getattr(torch.Tensor, name)

        def read(self, *a, **kw):  # type: ignore[no-untyped-def]
            caller = sys._getframe(1)
            if caller.f_code.co_filename.endswith(("tune/train.py", "tune/loader.py")):
                reads.append(f"{name}:{caller.f_lineno}")
            return real(self, *a, **kw)

        return read

    for name in ("__float__", "item", "tolist", "__bool__", "cpu", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, counted(name))
    cfg = config(tiny_instructblip_dir, epochs=2, lr=1e-2, workers=0, log_every=3)
    result = train(cfg, bright_dark[0][:16], tmp_path / "ck")  # 4 steps an epoch, 8 in all
    assert result.steps == 8
    # the progress text's loss at steps 1, 3, 6 and 8 (the last), the epoch's losses at each epoch's end
    assert len(reads) == 4 + 2, reads


@pytest.mark.slow
def test_a_compiled_model_trains_like_the_eager_one_and_the_checkpoint_says_so(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dynamo captures the model with the S* hook, forward and backward (AOTAutograd, eager kernels: no C++ build)."""
    import torch

    from vhd.backends.soft_prompt_ckpt import read_checkpoint
    from vhd.tune.train import train

    real_compile = torch.compile
    modes: list[object] = []

    def aot_eager(*args, **kwargs):  # type: ignore[no-untyped-def]
        modes.append(kwargs.pop("mode", None))
        return real_compile(*args, backend="aot_eager", **kwargs)

    monkeypatch.setattr(torch, "compile", aot_eager)
    losses = {}
    for mode in ("off", "reduce-overhead"):
        cfg = config(tiny_instructblip_dir, epochs=2, lr=1e-2, workers=0, compile=mode)
        losses[mode] = train(cfg, bright_dark[0][:8], tmp_path / mode).losses
    assert modes == ["reduce-overhead"]
    assert losses["reduce-overhead"] == pytest.approx(losses["off"], rel=1e-5)
    _, meta = read_checkpoint(tmp_path / "reduce-overhead")
    assert meta.config["compile"] == "reduce-overhead"


def test_bad_loader_settings_are_refused_in_one_line(tiny_instructblip_dir: Path, bright_dark: Sets) -> None:
    from vhd.errors import ConfigError
    from vhd.tune.train import train

    for bad, match in (
        ({"compile": "fast"}, "--compile"),
        ({"workers": -1}, "--workers"),
        ({"log_every": 0}, "log-every"),
    ):
        with pytest.raises(ConfigError, match=match):
            train(config(tiny_instructblip_dir, **bad), bright_dark[0][:4], "unused")


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["off", "reduce-overhead"])
def test_on_a_gpu_workers_pinned_copies_and_cuda_graphs_train_like_the_plain_loop(
    tiny_instructblip_dir: Path, bright_dark: Sets, tmp_path: Path, mode: str
) -> None:
    import torch

    from vhd.tune.train import TuneConfig, train

    if not torch.cuda.is_available():
        pytest.fail("the gpu marker needs a CUDA device", pytrace=False)
    hf = {"device": "cuda", "dtype": "float32"}
    runs = {}
    for workers, compile_mode in ((0, "off"), (2, mode)):
        kw = {"epochs": 2, "lr": 1e-2, "workers": workers, "compile": compile_mode, "hf": hf}
        cfg = TuneConfig(model=str(tiny_instructblip_dir), **kw)  # type: ignore[arg-type]
        runs[(workers, compile_mode)] = train(cfg, bright_dark[0][:8], tmp_path / f"{workers}{compile_mode}").losses
    plain, fast = runs[(0, "off")], runs[(2, mode)]
    assert fast == pytest.approx(plain, rel=1e-3 if mode != "off" else 1e-6)


def test_default_workers_build_in_process_on_the_cpu_and_in_workers_beside_an_accelerator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from vhd.tune.config import TuneConfig

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert TuneConfig(model="m").loader_workers("cpu") == 0  # the model's threads have every core
    assert TuneConfig(model="m").loader_workers("cuda:1") == 4
    assert TuneConfig(model="m", workers=3).loader_workers("cpu") == 3  # asked for: kept
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert TuneConfig(model="m").loader_workers("cuda") == 1


def test_decoding_uses_a_thread_per_cpu_up_to_8_whatever_the_workers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os
    from concurrent.futures import ThreadPoolExecutor

    from PIL import Image

    import vhd.tune.loader as loader
    from vhd.tune.loader import DecodedSet

    sizes: list[int] = []

    class Counting(ThreadPoolExecutor):
        def __init__(self, max_workers: int, **kwargs: object) -> None:
            sizes.append(max_workers)
            super().__init__(max_workers, **kwargs)  # type: ignore[arg-type]

    path = tmp_path / "a.png"
    Image.new("RGB", (40, 30), (200, 10, 10)).save(path)
    items = [LabelledSample(id="a", path=path, kind=Kind.IMAGE, harmful=True)]
    monkeypatch.setattr(loader, "ThreadPoolExecutor", Counting)
    for cpus, expected in ((16, 8), (3, 3), (None, 1)):
        monkeypatch.setattr(os, "cpu_count", lambda cpus=cpus: cpus)
        assert DecodedSet.decode(items, frames=1, side=16).frames[0][0].size[1] == 16
        assert sizes[-1] == expected
    DecodedSet.decode(items, frames=1, side=16, threads=2)
    assert sizes[-1] == 2
