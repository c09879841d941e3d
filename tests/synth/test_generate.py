from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.synth.conftest import TINY
from vhd.cli.main import main
from vhd.store.sqlite import Store
from vhd.synth.provenance import derive_seed, prompt_id, read_embedded


def files(folder: Path, suffix: str) -> list[Path]:
    return sorted(folder.glob(f"*{suffix}"))


def pixels(path: Path) -> bytes:
    from PIL import Image

    with Image.open(path) as im:
        return im.convert("RGB").tobytes()


def run_cli(*args: str) -> int:
    return main(["generate", *args])


def test_sd_images_registered_with_provenance_deterministic_and_resumable(
    tiny_pipes: dict[str, Path], prompts_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, db = tmp_path / "synth", tmp_path / "run.db"
    spec = f"sd:{tiny_pipes['sd']}"
    assert (
        run_cli(
            str(prompts_csv), "--generator", spec, "--out", str(out), "--store", str(db), "--seed", "7", *TINY, "--json"
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["written"] == 2 and summary["samples"] == 2
    pngs = files(out, ".png")
    assert len(pngs) == 2
    prov = read_embedded(pngs[0])
    assert prov is not None and prov.generator == "sd" and prov.source == "synthetic"
    pid = prompt_id(prov.keyword, prov.prompt)
    assert prov.prompt_id == pid and prov.seed == derive_seed(7, pid)
    assert prov.width == prov.height == 32 and prov.steps == 2 and prov.safety_checker == "none"
    assert prov.model_revision.startswith("sha256:") and prov.torch_threads >= 1 and prov.versions["diffusers"]
    assert str(tmp_path) not in json.dumps({k: v for k, v in prov.to_dict().items() if k != "model"})

    with Store(db) as store:
        sample = store.get_sample(pngs[0].stem)
        assert sample is not None and sample.source is not None and sample.source.value == "synthetic"
        public = f"sd:local:{tiny_pipes['sd'].name}"  # the exported generator names no local folder
        assert sample.generator == public and sample.meta["seed"] == prov.seed and sample.meta["prompt"] == prov.prompt
        from vhd.store.provenance import sample_provenance

        row = sample_provenance(store, sample.id)
        assert row is not None and row.data["prompt_id"] == pid

    # a rerun generates nothing and writes no file
    before = sorted(p.name for p in out.rglob("*"))
    assert (
        run_cli(
            str(prompts_csv), "--generator", spec, "--out", str(out), "--store", str(db), "--seed", "7", *TINY, "--json"
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["done_before"] == 2
    assert sorted(p.name for p in out.rglob("*")) == before

    # same seed elsewhere: the same pixels (a C2PA manifest carries random salts: other bytes), and
    # without Content Credentials the same bytes; another seed: other files
    other = tmp_path / "again"
    assert run_cli(str(prompts_csv), "--generator", spec, "--out", str(other), "--seed", "7", *TINY) == 0
    assert sorted(map(pixels, files(other, ".png"))) == sorted(map(pixels, pngs))
    plain = [tmp_path / "plain1", tmp_path / "plain2"]
    for folder in plain:
        args = [str(prompts_csv), "--generator", spec, "--out", str(folder), "--seed", "7", *TINY, "--no-c2pa"]
        assert run_cli(*args) == 0
    assert [p.read_bytes() for p in files(plain[0], ".png")] == [p.read_bytes() for p in files(plain[1], ".png")]
    assert sorted(map(pixels, files(plain[0], ".png"))) == sorted(map(pixels, pngs))
    third = tmp_path / "seed8"
    assert run_cli(str(prompts_csv), "--generator", spec, "--out", str(third), "--seed", "8", *TINY) == 0
    assert {p.name for p in files(third, ".png")}.isdisjoint(p.name for p in pngs)

    # annotated by the scripted backend and exported with the synthetic keys
    import vhd
    from vhd.export import export

    vhd.annotate([out], model="scripted:demo", store=db)
    with Store(db) as store:
        export(store, "jsonl", tmp_path / "a.jsonl")
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for rec in records:
        assert rec["source"] == "synthetic" and rec["generator"] == f"sd:local:{tiny_pipes['sd'].name}"
        assert str(tiny_pipes["sd"]) not in json.dumps(rec)
        assert json.loads(rec["meta"])["provenance"]["model"] == f"local:{tiny_pipes['sd'].name}"
        assert rec["prompt"] in prompts_csv.read_text() and rec["seed"] == derive_seed(
            7, prompt_id(rec["keyword"], rec["prompt"])
        )


def test_videos_sdxl_and_image_to_video_from_the_store(
    tiny_pipes: dict[str, Path], prompts_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, db, kept = tmp_path / "synth", tmp_path / "run.db", tmp_path / "frames"
    common = ["--out", str(out), "--store", str(db), "--limit", "1", *TINY, "--num-frames", "2"]
    assert run_cli(str(prompts_csv), "--generator", f"sdxl:{tiny_pipes['sdxl']}", *common) == 0
    png = files(out, ".png")[0]
    sdxl = read_embedded(png)
    assert sdxl is not None and sdxl.full_prompt.startswith("A professional photograph of a man holding")
    assert sdxl.model == f"local:{tiny_pipes['sdxl'].name}" and str(tiny_pipes["sdxl"]).encode() not in png.read_bytes()

    assert (
        run_cli(
            str(prompts_csv),
            "--generator",
            f"animatediff:{tiny_pipes['animatediff']}",
            *common,
            "--keep-frames",
            str(kept),
        )
        == 0
    )
    mp4 = files(out, ".mp4")[0]
    prov = read_embedded(mp4)
    assert prov is not None and prov.frames == 2 and prov.fps == 8 and prov.generator == "animatediff"
    assert sorted(p.name for p in (kept / mp4.stem).iterdir()) == [f"{mp4.stem}_0000.png", f"{mp4.stem}_0001.png"]

    assert run_cli(str(prompts_csv), "--generator", f"animatediff-i2v:{tiny_pipes['animatediff-i2v']}", *common) == 0
    clips = [p for p in files(out, ".mp4") if p != mp4]
    i2v = read_embedded(clips[0])
    assert i2v is not None and i2v.generator == "animatediff-i2v"
    import hashlib

    assert i2v.first_frame_sha256 == hashlib.sha256(png.read_bytes()).hexdigest()
    capsys.readouterr()
    # the second prompt has no image: a per-prompt reason naming its id
    code = run_cli(
        str(prompts_csv),
        "--generator",
        f"animatediff-i2v:{tiny_pipes['animatediff-i2v']}",
        "--out",
        str(out),
        "--store",
        str(db),
        *TINY,
        "--num-frames",
        "2",
        "--json",
    )
    summary = json.loads(capsys.readouterr().out)
    pid = prompt_id("toy", "A toy robot on a wooden table")
    assert code == 1 and summary["failed"][0]["id"] == pid and pid in summary["failed"][0]["reason"]
    with Store(db) as store:
        kinds = [store.get_sample(p.stem).kind.value for p in files(out, ".mp4")]  # type: ignore[union-attr]
    assert kinds == ["video", "video"]


@pytest.mark.slow
def test_first_frame_decides_the_clip_and_sdxl_video(tiny_pipes: dict[str, Path], tmp_path: Path) -> None:
    from PIL import Image

    from vhd.synth.generate import generate_one
    from vhd.synth.generators import GenerateSettings, create_generator
    from vhd.synth.rows import PromptRow

    settings = GenerateSettings(
        device="cpu", size=(32, 32), steps=2, num_frames=2, watermark=False, content_credentials="off"
    )  # without Content Credentials equal outputs are equal bytes
    gen = create_generator(f"animatediff-i2v:{tiny_pipes['animatediff-i2v']}", settings)
    row = PromptRow("a dog runs", "dog", prompt_id("dog", "a dog runs"))
    red, blue = Image.new("RGB", (32, 32), (200, 20, 20)), Image.new("RGB", (32, 32), (20, 20, 200))
    a = generate_one(gen, row, base_seed=1, first_frame=(red, "r"))
    b = generate_one(gen, row, base_seed=1, first_frame=(red, "r"))
    c = generate_one(gen, row, base_seed=1, first_frame=(blue, "b"))
    assert a.data == b.data and a.data is not None and c.data is not None
    assert (a.frames != c.frames).any()

    i2vgen = create_generator(f"i2vgen-xl:{tiny_pipes['i2vgen-xl']}", settings)
    x = generate_one(i2vgen, row, base_seed=1, first_frame=(red, "r"))
    y = generate_one(i2vgen, row, base_seed=1, first_frame=(red, "r"))
    assert x.data == y.data and x.provenance.generator == "i2vgen-xl"

    sdxl_video = create_generator(f"animatediff-sdxl:{tiny_pipes['animatediff-sdxl']}", settings)
    v = generate_one(sdxl_video, row, base_seed=1)
    assert v.data is not None and v.frames.shape == (2, 32, 32, 3)


def test_safety_checker_rule_and_safety_floor(
    tiny_pipes: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = tmp_path / "p.csv"
    csv_path.write_text("prompt,keyword\na knife on a table,knife\na naked child in a bedroom,x\n")
    spec = f"sd:{tiny_pipes['sd-checked']}"
    out, db = tmp_path / "out", tmp_path / "run.db"
    code = run_cli(str(csv_path), "--generator", spec, "--out", str(out), "--store", str(db), *TINY, "--json")
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["written"] == 0 and len(summary["blacked_out"]) == 1
    assert len(summary["refused"]) == 1 and summary["refused"][0]["reason"].startswith("safety floor")
    assert not files(out, ".png")
    code = run_cli(
        str(csv_path),
        "--generator",
        spec,
        "--out",
        str(out),
        "--store",
        str(db),
        *TINY,
        "--no-safety-checker",
        "--json",
    )
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["written"] == 1 and len(summary["refused"]) == 1
    prov = read_embedded(files(out, ".png")[0])
    assert prov is not None and prov.safety_checker == "off"


def test_one_line_errors(tiny_pipes: dict[str, Path], prompts_csv: Path, tmp_path: Path,
                         monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    import sys

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    spec = f"sd:{tiny_pipes['sd']}"
    assert run_cli(str(prompts_csv), "--generator", spec, "--out", str(tmp_path / "o")) == 2
    assert (
        capsys.readouterr().err.strip() == "vhd: error: no GPU found: pass --device cpu to generate on the CPU (slow)"
    )
    monkeypatch.setitem(sys.modules, "imwatermark", None)
    assert run_cli(str(prompts_csv), "--generator", spec, "--out", str(tmp_path / "o"), "--device", "cpu") == 2
    assert "--no-watermark" in capsys.readouterr().err
    args = [str(prompts_csv), "--generator", spec, "--out", str(tmp_path / "o"), *TINY]
    assert run_cli(*args, "--keep-frames", str(tmp_path / "o" / "f")) == 2
    assert run_cli(str(prompts_csv), "--generator", "nope", "--out", str(tmp_path / "o"), *TINY) == 2
    assert "valid generators: animatediff" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_base_model_with_a_component(
    tiny_pipes: dict[str, Path],
    prompts_csv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the default adapter is a hub id: never reach the network
    from tests.tiny_pipelines import motion_adapter

    adapter = tmp_path / "adapter"
    motion_adapter((8, 8)).save_pretrained(adapter)
    spec = f"animatediff:{tiny_pipes['sd']}"  # an SD folder: the motion adapter comes from --component
    args = [
        str(prompts_csv),
        "--generator",
        spec,
        "--out",
        str(tmp_path / "o"),
        "--limit",
        "1",
        *TINY,
        "--num-frames",
        "2",
    ]
    assert run_cli(*args, "--component", f"motion_adapter={adapter}", "--json") == 0
    assert json.loads(capsys.readouterr().out)["written"] == 1
    prov = read_embedded(files(tmp_path / "o", ".mp4")[0])
    # a local folder is named without its path in the file (the sha256 revision still identifies it)
    assert prov is not None and prov.components["motion_adapter"].startswith(f"local:{Path(adapter).name}@sha256:")
    assert str(Path(adapter).parent).encode() not in files(tmp_path / "o", ".mp4")[0].read_bytes()
    # without it, the default adapter is a hub id: offline, one line naming it
    assert run_cli(*[a if a != str(tmp_path / "o") else str(tmp_path / "o2") for a in args]) == 2
    assert "guoyww/animatediff-motion-adapter-v1-5-3" in capsys.readouterr().err


@pytest.mark.slow
def test_sigint_finishes_the_batch_in_flight(tiny_pipes: dict[str, Path], tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    csv_path = tmp_path / "p.csv"
    csv_path.write_text("prompt\n" + "".join(f"a quiet street number {i}\n" for i in range(40)))
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "vhd", "generate", str(csv_path), "--generator", f"sd:{tiny_pipes['sd']}"]
    cmd += ["--out", str(out), "--store", str(tmp_path / "run.db"), "--batch-size", "2", *TINY]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not list(out.glob("*.png")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=240)
    written = list(out.glob("*.png"))
    assert proc.returncode == 130 and "run the same command again" in err
    assert 0 < len(written) < 40 and len(written) % 2 == 0  # whole batches only
    with Store(tmp_path / "run.db") as store:
        assert all(store.get_sample(p.stem) is not None for p in written)
