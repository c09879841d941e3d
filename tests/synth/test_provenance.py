from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vhd.errors import ConfigError
from vhd.synth.generators import PAPER_PHOTO_TEMPLATE, apply_template, resolve_template
from vhd.synth.provenance import Provenance, derive_seed, prompt_id, read_embedded
from vhd.synth.rows import read_prompt_csv


def provenance(**changes: Any) -> Provenance:
    """An 8x8 SD image's provenance on the CPU, with ``changes``."""
    fields: dict[str, Any] = dict(
        generator="sd", model="m", model_revision="main", prompt="p", full_prompt="p", template="{prompt}",
        prompt_id="abc", keyword=None, negative_prompt=None, seed=1, steps=2, guidance=5.0, width=8, height=8,
        frames=None, fps=None, scheduler="DDIMScheduler", device="cpu", dtype="float32", batch_size=1,
        torch_threads=1, safety_checker="none", watermark="off",
    )  # fmt: skip
    return Provenance(**{**fields, **changes})


def test_prompt_id_and_seed_are_stable_and_order_free() -> None:
    pid = prompt_id("knife in hand", " A man holds a knife. ")
    assert pid == prompt_id("knife in hand", "A man holds a knife.") and len(pid) == 16
    assert pid != prompt_id("toy", "A man holds a knife.")
    assert derive_seed(7, pid) == derive_seed(7, pid) != derive_seed(8, pid)
    assert 0 <= derive_seed(7, pid) < 2**63


def test_paper_template_wraps_a_prompt() -> None:
    text = apply_template(resolve_template(None, PAPER_PHOTO_TEMPLATE), "A man holds a knife.")
    assert text.startswith("A professional photograph of a man holds a knife, photorealistic")
    assert text.endswith("Canon R6 Mark II, 35 mm lens")
    assert apply_template("{prompt}", "A man.") == "A man."
    with pytest.raises(ConfigError, match=r"\{prompt\}"):
        resolve_template("no placeholder", "{prompt}")


def test_png_provenance_round_trip(tmp_path: Path) -> None:
    import numpy as np

    from vhd.synth.outputs import encode_png

    prov = provenance()
    data = encode_png(np.zeros((8, 8, 3), dtype=np.uint8), prov.to_json())
    assert data == encode_png(np.zeros((8, 8, 3), dtype=np.uint8), prov.to_json())
    (tmp_path / "a.png").write_bytes(data)
    assert read_embedded(tmp_path / "a.png") == prov
    (tmp_path / "b.png").write_bytes(b"not a png")
    assert read_embedded(tmp_path / "b.png") is None


def test_prompt_csv_rows_and_per_row_reasons(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("Prompt,keyword,seed,extra\na cat,toy,5,x\n,toy,,\na dog,toy,many,\na cat,toy,,\n")
    rows, problems = read_prompt_csv(path)
    assert [(r.prompt, r.seed, r.line) for r in rows] == [("a cat", 5, 2)]
    assert rows[0].id == prompt_id("toy", "a cat")
    assert [n for n, _ in problems] == [3, 4, 5]
    (tmp_path / "bad.csv").write_text("text\nhello\n")
    with pytest.raises(ConfigError, match="no 'prompt' column"):
        read_prompt_csv(tmp_path / "bad.csv")


def test_first_frame_found_by_png_provenance_in_a_folder(tmp_path: Path) -> None:
    import numpy as np

    from vhd.synth.outputs import encode_png, write_output
    from vhd.synth.rows import FirstFrames, file_sha256

    prov = provenance(generator="sdxl", prompt="a cat", full_prompt="a cat", prompt_id="p1", seed=42)
    path = write_output(
        tmp_path / "imgs" / "sub", encode_png(np.full((8, 8, 3), 9, dtype=np.uint8), prov.to_json()), ".png"
    )
    (tmp_path / "imgs" / "notes.png").write_bytes(b"junk")
    finder = FirstFrames(None, tmp_path / "imgs")
    assert finder.find("p1", 42) == path and finder.find("p1", 43) is None
    image, digest = finder.load("p1", 42)  # type: ignore[misc]
    assert image.size == (8, 8) and digest == file_sha256(path) == path.stem
    missing = finder.load("p2", 1)
    assert isinstance(missing, str) and "p2" in missing


def test_size_and_component_flags() -> None:
    from vhd.cli.generate import parse_components, parse_size

    assert parse_size("512x768") == (512, 768) and parse_size(None) is None
    for bad in ("512", "510x512", "0x0"):
        with pytest.raises(ConfigError, match="multiples of 8"):
            parse_size(bad)
    assert parse_components(["motion_adapter=/m"]) == {"motion_adapter": "/m"}
    with pytest.raises(ConfigError, match="NAME=ID_OR_PATH"):
        parse_components(["oops"])


def test_a_first_frame_that_is_no_longer_an_accepted_image_gives_a_reason(tmp_path: Path) -> None:
    from PIL import Image

    from vhd.curate.ingest import ingest
    from vhd.store import Store
    from vhd.store.provenance import record_provenance
    from vhd.synth.rows import FirstFrames

    media = tmp_path / "media"
    media.mkdir()
    first = media / "first.png"
    Image.new("RGB", (16, 16), (200, 30, 30)).save(first)
    with Store(tmp_path / "run.db") as store:
        result = ingest([media], store)
        sample = store.get_sample(result.added[0])
        assert sample is not None
        data = {"prompt_id": "p-1", "seed": 5, "prompt": "a red square", "keyword": "red", "model": "tiny"}
        record_provenance(store, sample_id=sample.id, path=str(first), data=data, generator="sdxl:tiny")
        frames = FirstFrames(store=store)
        image, digest = frames.load("p-1", 5)  # type: ignore[misc]
        assert image.size == (16, 16) and len(digest) == 64
        Image.new("RGB", (16, 16)).save(first, format="TIFF")  # swapped for a format vhd refuses
        reason = frames.load("p-1", 5)
        assert isinstance(reason, str) and reason.startswith("first frame for prompt p-1 (seed 5) unusable: first.png")
        assert frames.load("p-2", 5) == (
            "no first frame for prompt p-2 (seed 5): generate its image first with the same --seed "
            "(e.g. --generator sdxl), into the same --store or under --first-frames DIR"
        )


def test_embedded_provenance_names_local_models_without_their_path(tmp_path: Path) -> None:
    import numpy as np

    from vhd.synth.outputs import encode_png

    local = "/home/alice/models/sd-tiny"
    prov = provenance(model=local, components={"motion_adapter": f"{local}-adapter@sha256:ab"})
    data = encode_png(np.zeros((8, 8, 3), dtype=np.uint8), prov.to_json())
    assert b"/home/alice" not in data and b"alice" not in data
    (tmp_path / "a.png").write_bytes(data)
    back = read_embedded(tmp_path / "a.png")
    assert back is not None and back.model == "local:sd-tiny"
    assert back.components == {"motion_adapter": "local:sd-tiny-adapter@sha256:ab"}
    assert back.same_model("sd", local) and prov.same_model("sd", local) and not back.same_model("sd", "/other/x")
    hub = provenance(model="stabilityai/sd-turbo")
    assert '"model":"stabilityai/sd-turbo"' in hub.to_json()  # hub ids are kept
