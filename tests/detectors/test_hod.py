"""HOD: letterbox, YOLOv5 decoding, NMS and label mapping, through a tiny YOLO-shaped ONNX graph.

The graph takes ``images`` (1, 3, 64, 64) like an exported YOLOv5 and returns fixed rows
``(cx, cy, w, h, obj, 6 class scores)`` whose objectness is the mean of the input pixels, so the
expected boxes and confidences below are computed by hand from the letterbox geometry.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PIL import Image

from tests.detectors.conftest import encode
from tests.optional import need_module
from vhd.detectors.base import Prediction, combine_frames
from vhd.detectors.hod import HOD_CLASSES, HodDetector, HodOptions, decode, letterbox, nms
from vhd.detectors.registry import create_detector
from vhd.errors import BackendUnavailableError, ConfigError
from vhd.records import Kind

SIZE = 64
# Rows in the 64x64 input's pixels; objectness comes from the image (column 4 is ignored).
ROWS = [
    [32, 32, 32, 16, 0, 0, 0, 0, 0, 0.8, 0],  # gun: the reference box
    [33, 32, 32, 16, 0, 0, 0, 0, 0, 0.7, 0],  # gun, IoU ~0.94 with the first: suppressed by NMS
    [32, 32, 32, 16, 0, 0.0, 0, 0, 0.6, 0, 0],  # cigarette on the same spot: another class, kept
    [10, 30, 8, 8, 0, 0.1, 0, 0, 0, 0, 0],  # alcohol at 0.1 x obj: under the threshold
]


def _graph(path: Path) -> Path:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rows = np.asarray(ROWS, dtype=np.float32)[None]
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["mean4"], keepdims=1),
        helper.make_node("Reshape", ["mean4", "shape3"], ["mean"]),
        helper.make_node("Mul", ["ones", "mean"], ["obj"]),
        helper.make_node("Concat", ["xywh", "obj", "cls"], ["output0"], axis=2),
    ]
    inits = [
        numpy_helper.from_array(np.asarray([1, 1, 1], dtype=np.int64), "shape3"),
        numpy_helper.from_array(np.ones((1, len(ROWS), 1), dtype=np.float32), "ones"),
        numpy_helper.from_array(rows[:, :, :4], "xywh"),
        numpy_helper.from_array(rows[:, :, 5:], "cls"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny-yolov5",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, len(ROWS), 11])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_module("onnx", "pip install onnx")
    need_module("onnxruntime", "pip install 'vhd[hod]'")
    return _graph(tmp_path_factory.mktemp("hod") / "best.onnx")


def white(w: int = 100, h: int = 50) -> Image.Image:
    return Image.new("RGB", (w, h), "white")


def test_letterbox_geometry_by_hand() -> None:
    array, fit = letterbox(white(), SIZE)
    # gain = min(64/50, 64/100) = 0.64 -> 64 x 32, centred: 16 rows of padding above and below.
    assert fit.gain == pytest.approx(0.64) and fit.pad_x == 0 and fit.pad_y == 16
    assert array.shape == (3, SIZE, SIZE) and array.dtype.name == "float32"
    assert array[:, :16].max() == pytest.approx(114 / 255) and array[:, 48:].min() == pytest.approx(114 / 255)
    assert array[:, 16:48].min() == pytest.approx(1.0)
    small, up = letterbox(white(16, 32), SIZE)  # upscaled: gain 2 -> 32 x 64, 16 columns each side
    assert up.gain == 2 and up.pad_x == 16 and up.pad_y == 0
    assert small[:, :, :16].max() == pytest.approx(114 / 255) and small[:, :, 16:48].min() == pytest.approx(1.0)


def test_decode_boxes_nms_and_mapping_by_hand() -> None:
    import numpy as np

    rows = np.asarray(ROWS, dtype=np.float32)
    rows[:, 4] = 0.5
    _, fit = letterbox(white(), SIZE)
    dets = decode(rows[None], HodOptions(), fit, 100, 50)
    # conf = 0.5 x 0.8; box (16, 24)-(48, 40) in the input -> ((16-0)/0.64, (24-16)/0.64, ...) in the image.
    assert dets == [
        {"label": "gun", "score": pytest.approx(0.4), "box": [25.0, 12.5, 75.0, 37.5]},
        {"label": "cigarette", "score": pytest.approx(0.3), "box": [25.0, 12.5, 75.0, 37.5]},
    ]
    loose = decode(rows[None], HodOptions(iou_threshold=0.99, conf_threshold=0.01), fit, 100, 50)
    assert [d["label"] for d in loose] == ["gun", "gun", "cigarette", "alcohol"]
    with pytest.raises(ValueError, match="classes option"):
        decode(rows[:, :9], HodOptions(), fit, 100, 50)


def test_nms_keeps_the_best_of_each_overlapping_group() -> None:
    import numpy as np

    boxes = np.asarray([[0, 0, 10, 10], [1, 0, 11, 10], [20, 20, 30, 30], [0, 0, 10, 10.5]], dtype=np.float32)
    assert nms(boxes, np.asarray([0.5, 0.9, 0.8, 0.1]), 0.45) == [1, 2]
    assert nms(boxes, np.asarray([0.5, 0.9, 0.8, 0.1]), 0.95) == [1, 2, 0]


def test_onnx_end_to_end(weights: Path) -> None:
    det = create_detector(f"hod:{weights}")
    assert isinstance(det, HodDetector) and det.runtime == "onnxruntime"
    pred = asyncio.run(det.predict(Kind.IMAGE, [encode(white(), "PNG")]))
    # objectness = the input's mean: half white, half grey 114 -> (1 + 114/255) / 2.
    obj = (1 + 114 / 255) / 2
    assert pred.error is None and pred.harmful is True
    assert pred.score == pytest.approx(obj * 0.8, abs=1e-5)
    assert pred.labels == {"gun": pytest.approx(obj * 0.8, abs=1e-5), "cigarette": pytest.approx(obj * 0.6, abs=1e-5)}
    assert [b["box"] for b in pred.boxes] == [[25.0, 12.5, 75.0, 37.5]] * 2
    assert pred.categories == ["A", "B"]  # gun -> violence, cigarette -> substance misuse
    assert Prediction.from_dict(pred.to_dict()).boxes == pred.boxes


def test_harmful_subset_and_class_names_are_configurable(weights: Path) -> None:
    only_knives = create_detector(f"hod:{weights}", {"harmful": "knife"})
    pred = asyncio.run(only_knives.predict(Kind.IMAGE, [encode(white(), "PNG")]))
    assert pred.harmful is False and pred.score == 0.0 and "gun" in pred.labels and pred.categories == []
    renamed = create_detector(f"hod:{weights}", {"classes": "a,b,c,d,pistol,f", "harmful": ["pistol"]})
    pred = asyncio.run(renamed.predict(Kind.IMAGE, [encode(white(), "PNG")]))
    assert pred.harmful is True and set(pred.labels) == {"pistol", "d"}
    wrong = create_detector(f"hod:{weights}", {"classes": "a,b"})
    bad = asyncio.run(wrong.predict(Kind.IMAGE, [encode(white(), "PNG")]))
    assert bad.harmful is None and "classes option" in (bad.error or "")


def test_video_frame_by_frame_keeps_boxes_per_frame(weights: Path) -> None:
    det = create_detector(f"hod:{weights}")
    frames = [encode(white(), "PNG"), encode(white(50, 100), "PNG")]
    pred = asyncio.run(det.predict(Kind.VIDEO, frames))
    assert pred.harmful is True and {b["frame"] for b in pred.boxes} == {0, 1}
    assert combine_frames([Prediction(False), Prediction(None, error="x")]).boxes == []


def test_bad_options_and_missing_weights(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs its weights"):
        create_detector("hod")
    with pytest.raises(ConfigError, match="harmful class 'bomb'"):
        create_detector("hod:x.onnx", {"harmful": "bomb"})
    with pytest.raises(ConfigError, match="valid options"):
        create_detector("hod:x.onnx", {"colour": 1})
    assert HodOptions().harmful_set == frozenset(HOD_CLASSES)
    det = create_detector(f"hod:{tmp_path / 'missing.onnx'}")
    with pytest.raises(BackendUnavailableError, match="train and export"):
        asyncio.run(det.check())
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(BackendUnavailableError, match=r"export\.py"):
        asyncio.run(create_detector(f"hod:{junk}").check())
    assert create_detector("hod:best.pt").runtime == "ultralytics"  # type: ignore[attr-defined]


def test_runs_through_vhd_bench_into_table_1(weights: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from vhd.cli.main import main

    media = tmp_path / "media"
    media.mkdir()
    white().save(media / "a.png")
    Image.new("RGB", (40, 40), "black").save(media / "b.png")
    labels = tmp_path / "labels.csv"
    labels.write_text("path,harmful\nmedia/a.png,yes\nmedia/b.png,no\n")
    out = tmp_path / "out"
    argv = ["bench", "--labels", str(labels), "--detector", f"hod:{weights}", "--out", str(out)]
    assert main([*argv, "--no-plots", "--bootstrap", "0", "--no-progress"]) == 0
    assert "| hod |" in (out / "table1.md").read_text()
    data = json.loads((out / "results.json").read_text())
    assert data["detectors"][0]["run"]["identity"]["name"] == "hod"
    capsys.readouterr()
    assert main([*argv[:-4], "--detector", "nosuch", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in ("hod", "llamaguard", "llavaguard", "nudenet"))
