"""`PredictionLog`: one detector's predictions over a set, by sample id, kept on disk.

A benchmark holds a prediction for every sample and every detector until its numbers are
computed. Kept as a dict of `Prediction` objects that is over a kilobyte per sample; the log
keeps each as JSON in a private temporary SQLite file (`vhd.store.statindex.ScratchMap`, whose
page cache is capped) and decodes one when it is read, so a run's memory does not grow with
the set. It is a read-only `Mapping` (``log[sid]``, ``get``, ``in``, ``items()`` in the order
predictions were first put, as a dict keeps them) plus `put`; the counts the run summary needs
(failed, mean latency of the answered) are kept as predictions are put.
"""

from __future__ import annotations

import json
from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from typing import Any

from vhd.detectors.base import Prediction
from vhd.store.statindex import ScratchMap


def _plain(value: Any) -> Any:
    """A numpy scalar as its Python value (a detector may answer with ``numpy.float32``); else text."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def _encode(pred: Prediction) -> str:
    return json.dumps(pred.to_dict(), default=_plain)


def _decode(text: str) -> Prediction:
    return Prediction.from_dict(json.loads(text))


class PredictionLog(Mapping[str, Prediction]):
    """Predictions by sample id in a temporary file; a `Mapping` with `put`.

    Args:
        predictions: Predictions to start with (a mapping, or ``(sample id, prediction)`` pairs).

    Attributes:
        failed: Predictions without a decision (``harmful`` None).
        answered: Predictions with one.
        latency_s: Sum of the answered predictions' ``latency_s``.
    """

    def __init__(self, predictions: Mapping[str, Prediction] | Iterable[tuple[str, Prediction]] = ()) -> None:
        self._map = ScratchMap()
        self.failed = 0
        self.answered = 0
        self.latency_s = 0.0
        pairs = predictions.items() if isinstance(predictions, Mapping) else predictions
        for sid, pred in pairs:
            self.put(sid, pred)

    def _count(self, pred: Prediction, sign: int) -> None:
        if pred.harmful is None:
            self.failed += sign
        else:
            self.answered += sign
            self.latency_s += sign * pred.latency_s

    def put(self, sid: str, pred: Prediction) -> None:
        """Set a sample's prediction (replacing an earlier one in place)."""
        old = self._map.put(sid, _encode(pred))
        if old is not None:
            self._count(_decode(old), -1)
        self._count(pred, 1)

    def __getitem__(self, sid: str) -> Prediction:
        text = self._map.get(sid)
        if text is None:
            raise KeyError(sid)
        return _decode(text)

    def get(self, sid: str, default: Any = None) -> Any:
        """The prediction of a sample, or ``default``."""
        text = self._map.get(sid)
        return default if text is None else _decode(text)

    def __contains__(self, sid: object) -> bool:
        return sid in self._map

    def __iter__(self) -> Iterator[str]:
        return (sid for sid, _ in self._map.items())

    def __len__(self) -> int:
        return len(self._map)

    def items(self) -> ItemsView[str, Prediction]:
        """``(sample id, prediction)`` pairs, streamed from the file in first-put order."""
        return _Items(self)

    def values(self) -> ValuesView[Prediction]:
        """The predictions, streamed from the file in first-put order."""
        return _Values(self)

    def pairs(self) -> Iterator[tuple[str, Prediction]]:
        """``(sample id, prediction)`` pairs read a page at a time (what `items` iterates)."""
        for sid, text in self._map.items():
            yield sid, _decode(text)

    def close(self) -> None:
        """Drop the file (the log is empty and unusable afterwards)."""
        self._map.close()


class _Items(ItemsView[str, Prediction]):
    _mapping: PredictionLog

    def __iter__(self) -> Iterator[tuple[str, Prediction]]:
        return self._mapping.pairs()


class _Values(ValuesView[Prediction]):
    _mapping: PredictionLog

    def __iter__(self) -> Iterator[Prediction]:
        return (pred for _, pred in self._mapping.pairs())
