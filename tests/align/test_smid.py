"""`vhd align`: ratings to labels, reading SMID-style files, kappa, and the whole loop on scripted models."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw
from sklearn.metrics import cohen_kappa_score

from vhd.align.smid import align_ratings, human_label, read_ratings
from vhd.bench.metrics.agreement import cohen_kappa, kappa_value
from vhd.cli.main import main
from vhd.errors import ConfigError
from vhd.store.sqlite import Store


@pytest.mark.parametrize(
    ("rating", "expected"),
    [(1.0, True), (2.4999, True), (2.5, None), (3.0, None), (3.5, None), (3.5001, False), (5.0, False), (None, None)],
)
def test_thresholds_are_strict(rating: float | None, expected: bool | None) -> None:
    assert human_label(rating) is expected


def test_thresholds_configurable() -> None:
    assert human_label(2.5, harmful_below=3.0, unharmful_above=3.0) is True
    assert human_label(3.0, harmful_below=3.0, unharmful_above=3.0) is None
    assert human_label(3.01, harmful_below=3.0, unharmful_above=3.0) is False


def test_read_published_norms(tmp_path: Path) -> None:
    f = tmp_path / "norms.csv"
    f.write_text(
        "\ufeffimg_name,valence_mean,moral_mean,moral_sd\n"
        "H001,1.2,1.5,0.4\nN002,3,,0.1\nP003,4,NA,0.2\nB004,4,4.2,0.5\n\n",
        encoding="utf-8",
    )
    rows = read_ratings(f)
    assert [(r.name, r.rating, r.line) for r in rows] == [
        ("H001", 1.5, 2),
        ("N002", None, 3),
        ("P003", None, 4),
        ("B004", 4.2, 5),
    ]


def test_read_unnamed_first_column(tmp_path: Path) -> None:
    f = tmp_path / "norms.csv"
    f.write_text(",moral_mean,moral_sd\nH001,2.0,1\nB004,3.9,1\n")
    assert [(r.name, r.rating) for r in read_ratings(f)] == [("H001", 2.0), ("B004", 3.9)]


def test_read_any_csv_by_flags(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("file,score\na.png,1\nb.png,5\n")
    with pytest.raises(ConfigError, match="--id-column"):
        read_ratings(f)
    rows = read_ratings(f, id_column="file", rating_column="score")
    assert [(r.name, r.rating) for r in rows] == [("a.png", 1.0), ("b.png", 5.0)]
    with pytest.raises(ConfigError, match=r"no column 'nope'.*--rating-column"):
        read_ratings(f, id_column="file", rating_column="nope")


def test_read_rejects_bad_rating(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("img_name,moral_mean\na,low\n")
    with pytest.raises(ConfigError, match="line 2: rating 'low' is not a number"):
        read_ratings(f)


def test_kappa_equals_scikit_learn() -> None:
    rng = np.random.default_rng(3)
    for n in (2, 5, 17, 200):
        for bias in (0.1, 0.5, 0.9):
            a = (rng.random(n) < bias).astype(int).tolist()
            b = [x if rng.random() < 0.7 else 1 - x for x in a]
            if len(set(a)) == 1 and len(set(b)) == 1 and a[0] == b[0]:
                continue
            assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    assert cohen_kappa([1, 1], [1, 1]) is None and cohen_kappa([], []) is None


def test_kappa_interval_brackets_point() -> None:
    rng = np.random.default_rng(0)
    a = (rng.random(100) < 0.4).tolist()
    b = [x if rng.random() < 0.8 else not x for x in a]
    v = kappa_value(a, b, resamples=500)
    assert v.low is not None and v.high is not None and v.value is not None
    assert v.low < v.value < v.high and v.n == 100
    assert kappa_value(a, b, resamples=0).low is None


def _draw(folder: Path, names: dict[str, tuple[int, int, int]]) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    shas = {}
    for i, (name, colour) in enumerate(names.items()):
        img = Image.new("RGB", (48, 40), colour)
        ImageDraw.Draw(img).ellipse((4 + i, 4, 30 + i, 30), fill=(255 - colour[0], 90, 30 * i % 255))
        ext = ".jpeg" if i % 2 else ".JPG"  # JPEGs go to the model as they are, so rules can match file hashes
        path = folder / f"{name}{ext}"
        img.save(path)
        shas[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return shas


def _script(tmp_path: Path, harmful_shas: list[str]) -> str:
    rules = [{"when": {"tag": "judge", "image": sha[:16]}, "reply": "Yes, violence."} for sha in harmful_shas]
    rules.append({"when": {"tag": "judge"}, "reply": "No, an ordinary scene."})
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"default": "1. A point.\n2. Another.", "rules": rules}))
    return f"scripted:{path}"


def test_align_end_to_end(tmp_path: Path) -> None:
    colours = {
        "H1": (200, 0, 0),
        "H2": (180, 20, 0),
        "U1": (0, 0, 200),
        "U2": (0, 160, 40),
        "N1": (90, 90, 90),
        "N2": (60, 60, 60),
        "M1": (10, 200, 200),
    }
    shas = _draw(tmp_path / "smid" / "sub", colours)
    ratings = tmp_path / "norms.csv"
    ratings.write_text(
        "img_name,moral_mean\nH1,1.2\nH2,2.4\nU1,3.51\nU2,4.8\nN1,2.5\nN2,3.5\nM1,\nGONE,1.0\n", encoding="utf-8"
    )
    # the judge gets H1, H2 right, calls U1 harmful (a false positive), U2 right
    model = _script(tmp_path, [shas["H1"], shas["H2"], shas["U1"]])
    store = tmp_path / "run.db"
    r = align_ratings(ratings, tmp_path / "smid", model=model, store=store, resamples=200)
    assert r.exit_code == 0 and r.rows == 8
    assert (r.neutral, r.missing_rating, r.missing_media) == (["N1", "N2"], ["M1"], ["GONE"])
    assert {s.name: (s.human, s.model) for s in r.samples} == {
        "H1": (True, True),
        "H2": (True, True),
        "U1": (False, True),
        "U2": (False, False),
    }
    assert r.confusion == [[1, 1], [0, 2]]
    m = r.metrics
    assert m["accuracy"].value == pytest.approx(0.75)
    assert (m["tpr"].value, m["tnr"].value) == (1.0, 0.5)
    assert m["kappa"].value == pytest.approx(cohen_kappa_score([1, 1, 0, 0], [1, 1, 1, 0]))
    assert r.run["annotated"] == 4 and r.run["usage"]["calls"] == 20
    with Store(store) as db:
        assert r.config_hash in db.config_hashes()
    # resumable: the same call again asks no model and gives the same numbers
    again = align_ratings(ratings, tmp_path / "smid", model=model, store=store, resamples=200)
    assert again.run["usage"]["calls"] == 0 and again.run["already_done"] == 4
    assert again.to_dict()["metrics"] == r.to_dict()["metrics"]


def test_align_cli_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shas = _draw(tmp_path / "m", {"a": (250, 0, 0), "b": (0, 0, 250), "c": (0, 250, 0)})
    ratings = tmp_path / "r.csv"
    ratings.write_text(",rating\na,1.0\nb,4.0\nc,3.0\n")
    out = tmp_path / "out" / "align.json"
    argv = ["align", "--ratings", str(ratings), "--media", str(tmp_path / "m"), "--model"]
    argv += [_script(tmp_path, [shas["a"]]), "--store", str(tmp_path / "s.db"), "--out", str(out)]
    argv += ["--rating-column", "rating", "--no-progress", "--resamples", "50"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "1 neutral" in text and "accuracy         1.000" in text
    data = json.loads(out.read_text())
    assert data["counts"]["scored"] == 2 and data["excluded"]["neutral"] == ["c"]
    assert data["metrics"]["kappa"]["value"] == 1.0


def test_align_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m").mkdir()
    ratings = tmp_path / "r.csv"
    ratings.write_text("img_name,moral_mean\na,3.0\n")
    base = ["align", "--ratings", str(ratings), "--model", "scripted:demo", "--store", str(tmp_path / "s.db")]
    assert main([*base, "--media", str(tmp_path / "m")]) == 2
    assert "no rated image" in capsys.readouterr().err
    assert main([*base, "--media", str(tmp_path / "nowhere")]) == 2
    assert "--media" in capsys.readouterr().err
    assert main([*base, "--media", str(tmp_path / "m"), "--harmful-below", "4", "--unharmful-above", "3"]) == 2
    assert "swap" in capsys.readouterr().err
