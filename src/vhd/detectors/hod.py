"""HOD, the harmful object detector of the paper's Table 1 (a YOLOv5 model trained on HOD's data).

HOD's authors publish training code and data, not weights: train YOLOv5 on their set, export
the checkpoint to ONNX (docs/detectors.md#hod-weights-you-train), then ``hod:/path/to/best.onnx`` runs it with
onnxruntime (``vhd[hod]``). ``hod:/path/to/best.pt`` runs a checkpoint through ``ultralytics``
when it is installed (it needs torchvision; not exercised by vhd's tests). As in the paper's
appendix E.1 an image is harmful when any harmful class is detected; all six HOD classes are
harmful by default. Videos are judged frame by frame. Boxes and scores stay in the prediction.

Pre- and post-processing follow YOLOv5's ``detect.py`` for an exported model: letterbox to the
model's square input (grey 114 padding, centred), RGB scaled to [0, 1], output rows
``(cx, cy, w, h, objectness, class scores...)`` in input pixels, confidence = objectness x
class score, per-class non-maximum suppression, boxes mapped back to the original image.

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    classes: Class names in the model's order (default HOD's six).
    harmful: The harmful subset (default: every class).
    conf_threshold: Lowest confidence kept (default 0.25, YOLOv5's).
    iou_threshold: Overlap above which NMS drops the weaker box (default 0.45).
    img_size: Square input side when the ONNX input shape is dynamic (default 640).
    runtime: ``auto`` (by file suffix), ``onnxruntime`` or ``ultralytics``.
    max_detections: Boxes kept per image after NMS (default 300).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vhd.detectors.base import Detector, Prediction, best_scores, judge_one_image
from vhd.detectors.vlm import parse_options
from vhd.errors import BackendUnavailableError, ConfigError, MissingDependencyError, require
from vhd.media.encoded import EncodedImage
from vhd.records import Kind

HOD_CLASSES: tuple[str, ...] = ("alcohol", "insulting_gesture", "blood", "cigarette", "gun", "knife")
"""HOD's six classes in its data files' order (appendix E.1: all of them count as harmful)."""

SCHEME = "hod"
"""The crosswalk scheme of HOD's class names."""

PAD_VALUE = 114
"""YOLOv5's letterbox padding grey."""


class HodOptions(BaseModel):
    """Options of the ``hod`` detector."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    classes: tuple[str, ...] = HOD_CLASSES
    harmful: tuple[str, ...] | None = None
    conf_threshold: float = Field(default=0.25, ge=0.0, le=1.0)
    iou_threshold: float = Field(default=0.45, gt=0.0, le=1.0)
    img_size: int = Field(default=640, ge=32, le=4096)
    runtime: Literal["auto", "onnxruntime", "ultralytics"] = "auto"
    max_detections: int = Field(default=300, ge=1)

    @field_validator("classes", "harmful", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if isinstance(value, list | tuple):
            names = [str(v).strip() for v in value]
            if not names:
                raise ValueError("needs at least one class")
            return tuple(dict.fromkeys(names))
        return value

    @model_validator(mode="after")
    def _subset(self) -> HodOptions:
        unknown = [n for n in self.harmful or () if n not in self.classes]
        if unknown:
            raise ValueError(f"harmful class {unknown[0]!r} is not one of the classes ({', '.join(self.classes)})")
        return self

    @property
    def harmful_set(self) -> frozenset[str]:
        """The harmful classes (every class when ``harmful`` is unset)."""
        return frozenset(self.harmful if self.harmful is not None else self.classes)


@dataclass(frozen=True)
class Letterbox:
    """How an image was fitted into the model's input.

    Attributes:
        gain: Scale applied to the original image.
        pad_x: Left padding in input pixels (may be fractional, as in YOLOv5).
        pad_y: Top padding in input pixels.
    """

    gain: float
    pad_x: float
    pad_y: float


def letterbox(image: Any, size: int) -> tuple[Any, Letterbox]:
    """Fit an RGB PIL image into a ``size`` x ``size`` float32 CHW array as YOLOv5 does.

    The image is scaled by ``min(size / h, size / w)`` (up or down), resized bilinearly to
    ``round(w * gain)`` x ``round(h * gain)`` and centred on grey (114) padding; values are
    scaled to [0, 1].

    Returns:
        The array of shape (3, size, size) and the `Letterbox` to map boxes back.
    """
    import numpy as np
    from PIL import Image

    w, h = image.size
    gain = min(size / h, size / w)
    new_w, new_h = round(w * gain), round(h * gain)
    dw, dh = (size - new_w) / 2, (size - new_h) / 2
    if (new_w, new_h) != (w, h):
        image = image.resize((new_w, new_h), Image.Resampling.BILINEAR)
    canvas = np.full((size, size, 3), PAD_VALUE, dtype=np.uint8)
    top, left = round(dh - 0.1), round(dw - 0.1)
    canvas[top : top + new_h, left : left + new_w] = np.asarray(image.convert("RGB"), dtype=np.uint8)
    array = canvas.transpose(2, 0, 1).astype(np.float32) / 255.0
    return array, Letterbox(gain, dw, dh)


def box_iou(box: Any, boxes: Any) -> Any:
    """IoU of one ``(x1, y1, x2, y2)`` box with each row of ``boxes``."""
    import numpy as np

    x1 = np.maximum(box[0], boxes[:, 0])
    y1 = np.maximum(box[1], boxes[:, 1])
    x2 = np.minimum(box[2], boxes[:, 2])
    y2 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return inter / np.maximum(area + areas - inter, 1e-9)


def nms(boxes: Any, scores: Any, iou_threshold: float) -> list[int]:
    """Greedy non-maximum suppression: indices kept, best score first."""
    import numpy as np

    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        best = int(order[0])
        keep.append(best)
        rest = order[1:]
        order = rest[box_iou(boxes[best], boxes[rest]) <= iou_threshold]
    return keep


def decode(output: Any, opts: HodOptions, fit: Letterbox, width: int, height: int) -> list[dict[str, Any]]:
    """Detections from one image's YOLOv5 output rows ``(cx, cy, w, h, obj, cls...)``.

    Returns:
        ``{"label", "score", "box": [x1, y1, x2, y2]}`` in original-image pixels, best first,
        after the confidence threshold and per-class NMS.

    Raises:
        ValueError: The output's width does not match ``5 + len(classes)``.
    """
    import numpy as np

    rows = np.asarray(output, dtype=np.float32)
    if rows.ndim == 3:
        rows = rows[0]
    if rows.ndim != 2 or rows.shape[1] != 5 + len(opts.classes):
        raise ValueError(
            f"model output {tuple(rows.shape)} does not fit {len(opts.classes)} classes "
            f"(rows of 5 + {len(opts.classes)}); set the classes option to the model's class names"
        )
    class_ids = rows[:, 5:].argmax(axis=1)
    conf = rows[:, 4] * rows[np.arange(len(rows)), 5 + class_ids]
    mask = conf > opts.conf_threshold
    rows, class_ids, conf = rows[mask], class_ids[mask], conf[mask]
    half = rows[:, 2:4] / 2
    xyxy = np.concatenate([rows[:, 0:2] - half, rows[:, 0:2] + half], axis=1)
    kept: list[tuple[float, int, Any]] = []
    for cls in np.unique(class_ids):
        idx = np.flatnonzero(class_ids == cls)
        kept.extend((float(conf[i]), int(cls), xyxy[i]) for i in idx[nms(xyxy[idx], conf[idx], opts.iou_threshold)])
    kept.sort(key=lambda t: -t[0])
    detections = []
    for score, cls, box in kept[: opts.max_detections]:
        x1, x2 = ((box[[0, 2]] - fit.pad_x) / fit.gain).clip(0, width)
        y1, y2 = ((box[[1, 3]] - fit.pad_y) / fit.gain).clip(0, height)
        corners = [round(float(v), 2) for v in (x1, y1, x2, y2)]
        detections.append({"label": opts.classes[cls], "score": round(score, 6), "box": corners})
    return detections


class HodDetector(Detector):
    """A YOLOv5 harmful-object detector; harmful when a harmful class is found.

    The score is the highest confidence among harmful detections (0 when there is none);
    ``labels`` holds every detected class with its highest confidence and ``boxes`` every box.
    """

    name = "hod"
    wants_original = True
    video_native = False
    multiclass = True

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model, options)
        if not model:
            raise ConfigError(
                f"detector {label}: hod needs its weights, e.g. hod:/path/to/best.onnx "
                "(HOD publishes no weights: docs/detectors.md#hod-weights-you-train says how to train and export them)"
            )
        self.path = Path(model).expanduser()
        self.opts: HodOptions = parse_options(label, self.options, HodOptions)
        runtime = self.opts.runtime
        if runtime == "auto":
            runtime = "ultralytics" if self.path.suffix.lower() in {".pt", ".pth"} else "onnxruntime"
        self.runtime: str = runtime
        from vhd.taxonomy.crosswalk import load_crosswalk

        self.crosswalk = load_crosswalk()
        self._session: Any = None
        self._lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        """Weights (path, size, modification time), runtime and every option."""
        try:
            stat = self.path.stat()
            weights: dict[str, Any] = {"path": str(self.path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        except OSError:
            weights = {"path": str(self.path)}
        return {"name": self.name, "weights": weights, "runtime": self.runtime, **self.opts.model_dump(mode="json")}

    def _load(self) -> Any:
        with self._lock:
            if self._session is not None:
                return self._session
            if not self.path.is_file():
                raise BackendUnavailableError(
                    f"hod: no weights file {str(self.path)!r}; train and export HOD's YOLOv5 "
                    "(docs/detectors.md#hod-weights-you-train)"
                )
            if self.runtime == "ultralytics":
                ultralytics: Any = require("ultralytics", "hod", "ultralytics")
                self._session = ultralytics.YOLO(str(self.path))
            else:
                require("numpy", "hod")
                ort: Any = require("onnxruntime", "hod")
                try:
                    self._session = ort.InferenceSession(str(self.path), providers=["CPUExecutionProvider"])
                except Exception as exc:
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise BackendUnavailableError(
                        f"hod: cannot load {str(self.path)!r} as ONNX ({first[:200]}); export it with YOLOv5's "
                        "export.py --include onnx"
                    ) from None
            return self._session

    async def check(self) -> None:
        """Load the model (fails with the pip line when the extra is missing)."""
        await asyncio.to_thread(self._load)

    async def aclose(self) -> None:
        """Drop the model."""
        self._session = None

    def input_size(self, session: Any) -> int:
        """The square input side: the ONNX input's static height, else ``img_size``."""
        shape = session.get_inputs()[0].shape
        side = shape[2] if len(shape) == 4 else None
        return side if isinstance(side, int) and side > 0 else self.opts.img_size

    def detect(self, image: EncodedImage) -> list[dict[str, Any]]:
        """Run the model on one image; detections in original-image pixels."""
        from vhd.media.image import open_image_bytes, to_rgb

        session = self._load()
        picture = to_rgb(open_image_bytes(image.data))
        if self.runtime == "ultralytics":
            return self._detect_ultralytics(session, picture)
        size = self.input_size(session)
        array, fit = letterbox(picture, size)
        outputs = session.run(None, {session.get_inputs()[0].name: array[None]})
        return decode(outputs[0], self.opts, fit, picture.width, picture.height)

    def _detect_ultralytics(self, model: Any, picture: Any) -> list[dict[str, Any]]:
        """The ``ultralytics`` path: its own letterbox and NMS, class names from the checkpoint."""
        result = model.predict(
            picture, imgsz=self.opts.img_size, conf=self.opts.conf_threshold, iou=self.opts.iou_threshold, verbose=False
        )[0]
        names = result.names
        detections: list[dict[str, Any]] = []
        for xyxy, conf, cls in zip(
            result.boxes.xyxy.tolist(), result.boxes.conf.tolist(), result.boxes.cls.tolist(), strict=True
        ):
            detections.append(
                {"label": str(names[int(cls)]), "score": round(float(conf), 6), "box": [round(v, 2) for v in xyxy]}
            )
        detections.sort(key=lambda d: -float(d["score"]))
        return detections[: self.opts.max_detections]

    def judge(self, detections: Sequence[Mapping[str, Any]]) -> Prediction:
        """Turn detections into a prediction (harmful when a harmful class is present)."""
        labels = best_scores(detections, "label")
        harmful_labels = {n: s for n, s in labels.items() if n in self.opts.harmful_set}
        harmful = bool(harmful_labels)
        mapped = harmful and SCHEME in self.crosswalk.schemes
        categories = self.crosswalk.to_vhd(SCHEME, harmful_labels) if mapped else []
        return Prediction(
            harmful=harmful,
            score=max(harmful_labels.values(), default=0.0),
            labels=labels,
            categories=categories,
            boxes=[dict(d) for d in detections],
        )

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Judge one image (videos arrive frame by frame through `Detector.predict`)."""
        fatal = (MissingDependencyError, BackendUnavailableError)
        return await judge_one_image("hod", images, self.detect, self.judge, fatal=fatal)
