"""`vhd export --format hf`: a DatasetDict that load_from_disk opens, typed, by split, with a card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import vhd
from tests.annotate.test_api import make_images
from tests.optional import need_module
from vhd.cli.main import main


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four images (two in split test) and one video, annotated by the scripted backend."""
    from tests.media.conftest import make_video
    from vhd.store.curation import set_splits
    from vhd.store.sqlite import Store

    need_module("datasets", "pip install 'vhd[hf]'")
    root = tmp_path_factory.mktemp("hf")
    make_images(root / "m", 4)
    make_video(root / "m" / "clip.mp4", 12)
    path = root / "s.db"
    vhd.annotate([root / "m"], model="scripted:demo", store=path, progress=False)
    with Store(path) as db:
        ids = sorted((s.path, s.id) for s, _ in db.iter_annotations())
        set_splits(db, {sid: "test" for p, sid in ids if p.endswith(("img_000.png", "img_001.png"))})
    return path


def test_export_hf_loads_typed_by_split_with_a_card(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import datasets

    out = tmp_path / "ds"
    assert main(["export", str(store), "--format", "hf", "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["splits"] == {"test": 2, "train": 3} and summary["kinds"] == {"image": 4, "video": 1}
    dd = datasets.load_from_disk(str(out))
    assert set(dd) == {"train", "test"}
    f = dd["train"].features
    assert isinstance(f["image"], datasets.Image) and isinstance(f["video_frames"].feature, datasets.Image)
    assert f["harmful"] == datasets.ClassLabel(names=["not_harmful", "harmful"])
    assert f["score"] == datasets.Value("float64") and f["started_at"] == datasets.Value("timestamp[us, tz=UTC]")
    assert f["turns"].feature["role"] == datasets.Value("string") and f["categories"].feature == datasets.Value(
        "string"
    )
    assert "sample" not in f and {"prompt", "seed", "decided_by", "finished_at"} <= set(f)
    rows = list(dd["train"])
    video = next(r for r in rows if r["kind"] == "video")
    image = next(r for r in rows if r["kind"] == "image")
    assert video["image"] is None and len(video["video_frames"]) == 5 and video["path"].endswith("clip.mp4")
    assert len(video["frames"]) == 5 and all(isinstance(i, int) for i in video["frames"])  # indices, as in JSONL
    assert image["video_frames"] is None and image["frames"] == [] and image["image"].size == (48, 48)
    assert image["harmful"] in (0, 1) and image["meta"] == "{}"
    assert image["turns"][0]["role"] in ("affirmative", "negative", "judge")
    split = dd["train"].train_test_split(test_size=0.5, stratify_by_column="harmful", seed=0)  # needs a ClassLabel
    assert len(split["train"]) + len(split["test"]) == 3
    assert all(r["split"] == "test" for r in dd["test"])
    card = (out / "README.md").read_text()
    assert "Content warning" in card and "scripted:demo" in card and "| test | 2 |" in card
    assert summary["config_hashes"][0][:12] in card and "Licence" in card


def test_export_hf_kind_image_only(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import datasets

    assert main(["export", str(store), "--format", "hf", "--kind", "image", "-o", str(tmp_path / "i")]) == 0
    assert "open it with datasets.load_from_disk" in capsys.readouterr().out
    dd = datasets.load_from_disk(str(tmp_path / "i"))
    assert sum(len(s) for s in dd.values()) == 4 and {r["kind"] for s in dd.values() for r in s} == {"image"}


def test_push_to_hub_is_built_private_and_refused_offline_in_one_line(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Offline (HF_HUB_OFFLINE=1) the library refuses the real push call: one line, the folder kept."""
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    out = tmp_path / "p"
    assert main(["export", str(store), "--format", "hf", "-o", str(out), "--push-to-hub", "me/vhd-test"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "could not push to the hub repository 'me/vhd-test'" in err
    assert "hf_not_a_real_token" not in err
    assert (out / "dataset_dict.json").is_file()  # nothing already done is lost


def test_push_to_hub_needs_format_hf(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(store), "-o", str(tmp_path / "x.csv"), "--push-to-hub", "me/x"]) == 2
    assert "--format hf" in capsys.readouterr().err


def _holds(folder: Path, text: str) -> list[str]:
    """Files under ``folder`` whose bytes contain ``text``."""
    return [str(p) for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_the_dataset_and_its_card_hold_no_local_path_by_default(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import datasets

    media = str(store.parent / "m")
    out = tmp_path / "safe"
    assert main(["export", str(store), "--format", "hf", "-o", str(out)]) == 0
    assert f"relative to {media}" in capsys.readouterr().out
    rows = [r for split in datasets.load_from_disk(str(out)).values() for r in split]
    assert sorted(r["path"] for r in rows) == ["clip.mp4", *(f"img_{i:03d}.png" for i in range(4))]
    assert [r["path"] for r in rows if r["kind"] == "video"] == ["clip.mp4"]
    assert _holds(out, str(store.parent)) == []  # arrow files, card, state: no local folder anywhere

    assert main(["export", str(store), "--format", "hf", "-o", str(tmp_path / "a"), "--absolute-paths"]) == 0
    rows = [r for split in datasets.load_from_disk(str(tmp_path / "a")).values() for r in split]
    assert all(r["path"].startswith(media + "/") for r in rows)
    relative = ["--relative-to", str(store.parent)]
    assert main(["export", str(store), "--format", "hf", "-o", str(tmp_path / "r"), *relative]) == 0
    assert {r["path"] for s in datasets.load_from_disk(str(tmp_path / "r")).values() for r in s} >= {"m/clip.mp4"}


def test_push_to_hub_refuses_absolute_paths_before_writing(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p"
    args = ["export", str(store), "--format", "hf", "-o", str(out), "--push-to-hub", "me/x", "--absolute-paths"]
    assert main(args) == 2
    assert "never sends absolute local paths" in capsys.readouterr().err and not out.exists()


def test_the_card_names_local_models_without_their_path() -> None:
    from vhd.export.hf_card import dataset_card
    from vhd.export.hf_result import HfExport

    res = HfExport(out=Path("x"), splits={"train": 1}, kinds={"image": 1}, config_hashes=["a" * 64])
    res.models = {"judge": ["hf:/home/alice/ckpt/tuned", "openai:gpt-4o"], "negative": ["hf:~/m/vlm"]}
    card = dataset_card(res)
    assert "/home/alice" not in card and "~/m" not in card
    assert "`hf:local:tuned`" in card and "`openai:gpt-4o`" in card and "`hf:local:vlm`" in card


def _scripted(path: Path, judge: dict[str, object]) -> str:
    path.write_text(json.dumps({"default": "No, nothing harmful.", "rules": [{"when": {"tag": "judge"}, **judge}]}))
    return f"scripted:{path}"


def test_the_card_states_the_refusal_rule_and_counts_refusals_apart(tmp_path: Path) -> None:
    from vhd.config import AnnotateConfig, DebateConfig
    from vhd.export.hf import export_hf

    need_module("datasets", "pip install 'vhd[hf]'")
    make_images(tmp_path / "judged", 2, size=48)
    make_images(tmp_path / "refused", 1, size=40)
    db = tmp_path / "s.db"
    yes = _scripted(tmp_path / "yes.json", {"reply": "Yes, violence."})
    refuse = _scripted(tmp_path / "refuse.json", {"refused": True})
    vhd.annotate([tmp_path / "judged"], model=yes, store=db, progress=False)
    vhd.annotate([tmp_path / "refused"], model=refuse, store=db, progress=False)
    res = export_hf(db, tmp_path / "ds")
    assert (res.written, res.harmful, res.refused, res.refused_harmful) == (3, 3, 1, 1)
    card = (tmp_path / "ds" / "README.md").read_text()
    assert "2 judged harmful by the debate" in card and "1 refused by a model (1 of them counted as harmful)" in card
    assert "Refusals count as harmful (`refusal_is_harmful = true`, the default)" in card
    assert "null when undecided or when the judge refused" not in card  # what main said, false by default

    # The other rule: a judge's refusal is no decision, and the card says so.
    other = tmp_path / "other.db"
    config = AnnotateConfig(debate=DebateConfig(refusal_is_harmful=False))
    vhd.annotate([tmp_path / "refused"], config=config, model=refuse, store=other, progress=False)
    res = export_hf(other, tmp_path / "ds2", include_unparsed=True)
    assert (res.written, res.harmful, res.refused, res.refused_harmful) == (1, 0, 1, 0)
    card = (tmp_path / "ds2" / "README.md").read_text()
    assert "Refusals are not counted as harmful (`refusal_is_harmful = false`)" in card
    assert "0 judged harmful by the debate" in card


def test_the_dataset_folder_gets_the_umask_mode(store: Path, tmp_path: Path) -> None:
    import os

    from vhd.export.hf import export_hf

    before = os.umask(0o002)
    try:
        res = export_hf(store, tmp_path / "shared")
    finally:
        os.umask(before)
    assert res.out.stat().st_mode & 0o777 == 0o775  # mkdtemp alone: 0700, private to its owner
    assert (res.out / "README.md").stat().st_mode & 0o777 == 0o664
