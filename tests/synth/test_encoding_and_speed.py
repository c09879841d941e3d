"""Output encoding (PNG level, lossless WebP), the speed options, and provenance recording each."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from vhd.errors import ConfigError
from vhd.store.sqlite import Store
from vhd.synth.generate import generate
from vhd.synth.generators import GenerateSettings, create_generator
from vhd.synth.provenance import folder_fingerprint, read_embedded

SETTINGS = GenerateSettings(device="cpu", size=(32, 32), steps=2, watermark=False, content_credentials="off")


def prompts(tmp_path: Path, n: int = 2) -> Path:
    path = tmp_path / "p.csv"
    path.write_text("prompt\n" + "".join(f"a red bicycle number {i}\n" for i in range(n)))
    return path


def pixels(path: str | Path) -> Any:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def by_prompt(paths: list[str]) -> dict[str, Any]:
    found = {}
    for p in paths:
        prov = read_embedded(p)
        assert prov is not None
        found[prov.prompt_id] = p
    return found


def test_png_level_and_webp_change_bytes_not_pixels(tiny_pipes: dict[str, Path], tmp_path: Path) -> None:
    csv = prompts(tmp_path)
    spec = f"sd:{tiny_pipes['sd']}"
    runs = {}
    for name, changes in {"fast": {}, "six": {"png_level": 6}, "webp": {"image_format": "webp"}}.items():
        gen = create_generator(spec, replace(SETTINGS, **changes))
        with Store(tmp_path / f"{name}.db") as store:
            result = generate(csv, gen, tmp_path / name, store=store)
            assert len(result.samples) == 2 and not result.failed
        runs[name] = by_prompt(result.written)
    for pid, fast in runs["fast"].items():
        six, webp = runs["six"][pid], runs["webp"][pid]
        assert Path(fast).read_bytes() != Path(six).read_bytes() and Path(webp).suffix == ".webp"
        assert (pixels(fast) == pixels(six)).all() and (pixels(fast) == pixels(webp)).all()
        assert [read_embedded(p).encoding for p in (fast, six, webp)] == ["png:1", "png:6", "webp-lossless:0"]  # type: ignore[union-attr]
    # a WebP run resumes from its files like a PNG run
    gen = create_generator(spec, replace(SETTINGS, image_format="webp"))
    with Store(tmp_path / "webp.db") as store:
        again = generate(csv, gen, tmp_path / "webp", store=store)
    assert again.done_before == 2 and again.written == []
    assert generate(csv, gen, tmp_path / "webp").done_before == 2  # found on disk by their embedded provenance


def test_bad_encoding_settings_fail_in_one_line() -> None:
    from vhd.synth.outputs import encoding_name

    with pytest.raises(ConfigError, match="--png-level 12 must be 0"):
        encoding_name("png", 12)
    with pytest.raises(ConfigError, match="--image-format 'gif'"):
        encoding_name("gif")


def test_register_from_bytes_in_hand_reads_and_decodes_nothing(
    tiny_pipes: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vhd.media.load as load

    def no_decode(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the generated file was decoded again")

    monkeypatch.setattr(load, "load_sample", no_decode)
    gen = create_generator(f"sd:{tiny_pipes['sd']}", SETTINGS)
    with Store(tmp_path / "run.db") as store:
        result = generate(prompts(tmp_path), gen, tmp_path / "o", store=store)
        assert len(result.samples) == 2 and not result.failed
        sample = store.get_sample(result.samples[0])
        assert sample is not None and sample.source is not None and sample.source.value == "synthetic"
        assert sample.id == Path(result.written[0]).stem and sample.generator == "sd:local:sd"  # no local folder


def test_model_identity_is_remembered_by_file_stat(tiny_pipes: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    import vhd.synth.provenance as provenance

    folder = shutil.copytree(tiny_pipes["sd"], tmp_path / "model")
    opened: list[Path] = []
    real_open = Path.open

    def counting(self: Path, *args: Any, **kwargs: Any) -> Any:
        opened.append(self)
        return real_open(self, *args, **kwargs)

    first = provenance.folder_fingerprint(folder)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "open", counting)
        assert provenance.folder_fingerprint(folder) == first
        assert opened == []  # unchanged stats: nothing read
        config = folder / "model_index.json"
        config.write_text(config.read_text() + " ")
        changed = provenance.folder_fingerprint(folder)
    assert changed != first and opened  # a changed file is hashed again


def test_speed_options_are_applied_and_recorded(tiny_pipes: dict[str, Path], tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    spec = f"sd:{tiny_pipes['sd']}"
    csv = prompts(tmp_path, 1)
    base = generate(csv, create_generator(spec, SETTINGS), tmp_path / "base")
    unet = create_generator(spec, SETTINGS).load().unet
    weights = tmp_path / "unet.safetensors"
    save_file({k: v.contiguous() for k, v in unet.state_dict().items()}, str(weights))
    settings = replace(
        SETTINGS, channels_last=True, attention="math", vae=str(tiny_pipes["sd"] / "vae"),
        unet_weights=str(weights), scheduler={"timestep_spacing": "trailing"},
    )  # fmt: skip
    gen = create_generator(spec, settings)
    fast = generate(csv, gen, tmp_path / "fast")
    pipe = gen.load()
    assert pipe.unet.conv_in.weight.is_contiguous(memory_format=torch.channels_last)
    assert pipe.scheduler.config.timestep_spacing == "trailing"
    prov = read_embedded(fast.written[0])
    assert prov is not None and prov.speed == {
        "channels_last": True,
        "attention": "math",
        "vae": "local:vae",
        "vae_force_upcast": True,
        "unet_weights": "local:unet.safetensors",
        "scheduler": {"timestep_spacing": "trailing"},
    }  # fmt: skip  (the file names no local folder: i22)
    assert prov.components["unet_weights"] == f"local:unet.safetensors@{folder_fingerprint(weights)}"
    assert folder_fingerprint(weights).startswith("sha256:")  # the weights file's content, not "main"
    assert read_embedded(base.written[0]).speed == {}  # type: ignore[union-attr]
    assert pixels(fast.written[0]).shape == pixels(base.written[0]).shape


def test_speed_options_fail_in_one_line(tiny_pipes: dict[str, Path], tmp_path: Path) -> None:
    from safetensors.torch import save_file

    spec = f"sd:{tiny_pipes['sd']}"
    with pytest.raises(ConfigError, match="--attention flash needs a CUDA GPU"):
        create_generator(spec, replace(SETTINGS, attention="flash")).load()
    vae = create_generator(spec, SETTINGS).load().vae
    wrong = tmp_path / "vae.safetensors"
    save_file({k: v.contiguous() for k, v in vae.state_dict().items()}, str(wrong))
    with pytest.raises(ConfigError, match="not weights of this model's UNet"):
        create_generator(spec, replace(SETTINGS, unet_weights=str(wrong))).load()
    with pytest.raises(ConfigError, match="HUB_ID/FILE"):
        create_generator(spec, replace(SETTINGS, unet_weights="nowhere.safetensors")).load()


def test_fast_preset_fills_what_flags_left_open() -> None:
    from vhd.synth.speed import PRESETS, apply_preset, speed_record

    settings = apply_preset(GenerateSettings(steps=6), "lightning-4step")
    assert settings.steps == 6 and settings.guidance == 0.0 and settings.preset == "lightning-4step"
    assert settings.unet_weights == "ByteDance/SDXL-Lightning/sdxl_lightning_4step_unet.safetensors"
    assert settings.scheduler == {"timestep_spacing": "trailing"} and set(PRESETS) >= {"lightning-2step"}
    with pytest.raises(ConfigError, match="--preset 'turbo'"):
        apply_preset(GenerateSettings(), "turbo")
    assert speed_record(settings) == {
        "unet_weights": settings.unet_weights, "scheduler": {"timestep_spacing": "trailing"},
        "preset": "lightning-4step",
    }  # fmt: skip
    assert speed_record(GenerateSettings(compile=True)) == {"compile": True}


def test_signatures_are_looked_up_once_per_function(tiny_pipes: dict[str, Path], tmp_path: Path) -> None:
    import vhd.synth.speed as speed

    gen = create_generator(f"sd:{tiny_pipes['sd']}", SETTINGS)
    csv = prompts(tmp_path, 1)
    generate(csv, gen, tmp_path / "a")
    cached = speed._INSPECT
    assert cached is not None
    computed: list[Any] = []
    real = cached._signature

    def counting(obj: Any, *args: Any, **kwargs: Any) -> Any:
        computed.append(obj)
        return real(obj, *args, **kwargs)

    cached._signature = counting
    try:
        import diffusers.models.attention_processor as attention

        assert attention.inspect is cached
        generate(prompts(tmp_path, 2), gen, tmp_path / "b")  # every attention call asks again
    finally:
        cached._signature = real
    assert computed == []


def test_cli_signs_content_credentials_into_images_and_videos(
    tiny_pipes: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.optional import need_module
    from tests.synth.conftest import TINY
    from vhd.cli.main import main
    from vhd.media.credentials import read_credentials

    need_module("c2pa", "pip install 'vhd[c2pa]'")
    csv = prompts(tmp_path, 1)
    for name, extra in (("sd", []), ("animatediff", ["--num-frames", "2"])):
        out = tmp_path / name
        args = ["generate", str(csv), "--generator", f"{name}:{tiny_pipes[name]}", "--out", str(out), *TINY, *extra]
        assert main([*args, "--store", str(tmp_path / f"{name}.db")]) == 0
        (made,) = [p for p in out.iterdir() if p.suffix in (".png", ".mp4")]
        found, prov = read_credentials(made), read_embedded(made)
        assert prov is not None and prov.content_credentials == "test-certificate"
        assert found is not None and found.valid and found.ai_generated
        assert (
            found.claimed_generator == f"{name}:local:{tiny_pipes[name].name}"
            and found.vhd_provenance == prov.shared_dict()
        )
        with Store(tmp_path / f"{name}.db") as store:
            sample = store.get_sample(made.stem)
        assert (
            sample is not None and sample.generator == f"{name}:local:{tiny_pipes[name].name}"
        )  # its own, not "claimed:"
    capsys.readouterr()


def test_mp4_encoding_uses_a_fixed_thread_count_and_repeats_its_bytes() -> None:
    """x264 writes its settings into the stream: a fixed count of 4 threads, the same bytes twice.

    (x264 itself uses fewer on short frames, by their height alone: 64 px rows get one.)
    """
    from vhd.synth.outputs import X264_THREADS, encode_mp4

    pytest.importorskip("av")
    frames = np.random.default_rng(0).integers(0, 256, (8, 256, 96, 3), dtype=np.uint8)
    first = encode_mp4(frames, 8, '{"k": 1}')
    assert first == encode_mp4(frames, 8, '{"k": 1}')
    assert X264_THREADS == 4
    assert b"threads=4 " in first  # one per CPU would make the bytes depend on the machine
