"""Each sample's images preprocessed once for all of its calls: the ``hf`` backend's image cache.

A debate sends the same image (or frames) in five calls; the in-context examples go with every
judge call. transformers' processors run the image processor on every call (for Idefics3 /
SmolVLM: a resize, 4x4 tiles of 512 and a global view, normalised, about 300 ms of CPU per
call), so without this cache most of a local run's wall time goes to preprocessing the same
pixels again.

`PreprocessCache` keeps, per conversation's list of images (identified by their content hash),
what the image processor returned for them, in a least-recently-used table bounded in bytes.
`CachingImageProcessor` stands in for ``processor.image_processor``: for a batch it looks each
conversation's images up, runs the real image processor only on the ones it has not seen, and
joins the per-conversation results as the image processor would have for the whole batch
(tensors concatenated on the batch axis, shorter ones zero-padded on the others, as processors
pad; lists concatenated). Images it cannot identify go through the real processor unchanged.

The decoded PIL images are kept too (by content hash) and tagged with that hash, so a sample's
image is decoded once as well.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vhd.media.encoded import EncodedImage

KEY = "vhd_sha256"
"""The ``PIL.Image.info`` entry that carries an image's content hash to the cache."""

TORCHVISION_BASES = ("TorchvisionBackend", "BaseImageProcessorFast")
"""Base classes of transformers' torchvision-based ("fast") image processors (5.x, 4.x names)."""


def is_fast(image_processor: Any) -> bool:
    """Whether an image processor is one of transformers' torchvision-based ("fast") ones."""
    real = getattr(image_processor, "inner", image_processor)
    return any(c.__name__ in TORCHVISION_BASES for c in type(real).__mro__)


def _nbytes(value: Any) -> int:
    if hasattr(value, "element_size") and hasattr(value, "nelement"):
        return int(value.element_size() * value.nelement())
    return int(getattr(value, "nbytes", 0))


@dataclass
class PreprocessStats:
    """What the image cache did.

    Attributes:
        passes: Images run through the real image processor.
        reused: Images served from the cache instead.
        decoded: Images decoded from their bytes.
        preprocess_s: Seconds in the processor (text and images, cache lookups included).
        generate_s: Seconds in ``model.generate``.
        calls: Conversations answered.
        batches: ``generate`` calls (one per batch group).
    """

    passes: int = 0
    reused: int = 0
    decoded: int = 0
    preprocess_s: float = 0.0
    generate_s: float = 0.0
    calls: int = 0
    batches: int = 0


class PreprocessCache:
    """Decoded images and image-processor outputs, by content hash, bounded in bytes.

    Args:
        max_bytes: Most bytes of processed tensors kept (least recently used dropped first).
        max_images: Most decoded PIL images kept.
        stats: Where to count passes, reuses and decodes (a new one when None).
    """

    def __init__(self, max_bytes: int, max_images: int = 256, stats: PreprocessStats | None = None) -> None:
        self.max_bytes = max_bytes
        self.max_images = max_images
        self.stats = stats if stats is not None else PreprocessStats()
        self._pil: OrderedDict[str, Any] = OrderedDict()
        self._processed: OrderedDict[tuple[Any, ...], tuple[dict[str, Any], int]] = OrderedDict()
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        """Bytes of processed tensors held now."""
        return self._bytes

    def pil(self, image: EncodedImage) -> Any:
        """The decoded image, tagged with its content hash (decoded once while it is kept)."""
        found = self._pil.get(image.sha256)
        if found is not None:
            self._pil.move_to_end(image.sha256)
            return found
        decoded = image.to_pil()
        decoded.info[KEY] = image.sha256
        self.stats.decoded += 1
        self._pil[image.sha256] = decoded
        while len(self._pil) > self.max_images:
            self._pil.popitem(last=False)
        return decoded

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        """A conversation's processed images, or None."""
        found = self._processed.get(key)
        if found is None:
            return None
        self._processed.move_to_end(key)
        return found[0]

    def put(self, key: tuple[Any, ...], value: dict[str, Any]) -> None:
        """Keep a conversation's processed images (nothing when one entry alone exceeds the bound)."""
        size = sum(_nbytes(v) for v in value.values())
        if size > self.max_bytes or key in self._processed:
            return
        self._processed[key] = (value, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, (_, dropped) = self._processed.popitem(last=False)
            self._bytes -= dropped


def _keys(images: Any) -> list[tuple[str, ...]] | None:
    """One key per conversation (its images' hashes), or None when an image is not identifiable."""
    if not isinstance(images, list | tuple) or not images:
        return None
    groups = [list(g) if isinstance(g, list | tuple) else [g] for g in images]
    keys = []
    for group in groups:
        hashes = [getattr(im, "info", {}).get(KEY) for im in group]
        if not group or not all(isinstance(h, str) for h in hashes):
            return None
        keys.append(tuple(str(h) for h in hashes))
    return keys


def _join(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-conversation outputs joined as the image processor returns a batch."""
    import torch

    joined: dict[str, Any] = {}
    for name in parts[0]:
        values = [p[name] for p in parts]
        first = values[0]
        if isinstance(first, torch.Tensor):
            if first.dim() == 0:
                joined[name] = torch.stack(values)
                continue
            target = [max(v.shape[d] for v in values) for d in range(1, first.dim())]
            padded = []
            for v in values:
                pad: list[int] = []
                for d in reversed(range(1, v.dim())):
                    pad += [0, target[d - 1] - v.shape[d]]
                padded.append(torch.nn.functional.pad(v, pad) if any(pad) else v)
            joined[name] = torch.cat(padded, dim=0)
        elif isinstance(first, list):
            joined[name] = [x for v in values for x in v]
        else:
            joined[name] = first
    return joined


class CachingImageProcessor:
    """Stands in for ``processor.image_processor`` and serves each conversation's images once.

    Args:
        inner: The real image processor.
        cache: Where processed images are kept.
        device: Where a torchvision-based image processor runs (the model's device); None leaves
            it on the CPU.
        dtype: The model's floating-point dtype: kept pixel values are cast to it (the model would
            cast them on every call anyway; bfloat16 halves what the cache holds).
    """

    def __init__(self, inner: Any, cache: PreprocessCache, device: Any = None, dtype: Any = None) -> None:
        self.inner = inner
        self.cache = cache
        self.device = device if is_fast(inner) else None
        self.dtype = dtype

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _run(self, images: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.device is not None and str(self.device) != "cpu":
            kwargs = {"device": str(self.device), **kwargs}
        return self.inner(images, *args, **kwargs)

    def _cast(self, value: Any) -> Any:
        if self.dtype is not None and getattr(value, "is_floating_point", None) and value.is_floating_point():
            return value.to(self.dtype)
        return value

    def __call__(self, images: Any, *args: Any, **kwargs: Any) -> Any:
        """Processed images of a batch: from the cache where seen, else from the real processor."""
        keys = _keys(images)
        if keys is None or kwargs.get("return_tensors") not in ("pt", None) or args:
            self.cache.stats.passes += len(_flat(images))
            return self._run(images, args, kwargs)
        settings = tuple(sorted((k, repr(v)) for k, v in kwargs.items()))
        parts: list[dict[str, Any] | None] = [self.cache.get((key, settings)) for key in keys]
        groups = [list(g) if isinstance(g, list | tuple) else [g] for g in images]
        for i, part in enumerate(parts):
            if part is not None:
                self.cache.stats.reused += len(groups[i])
                continue
            out = self._run([groups[i]], (), {**kwargs, "return_tensors": "pt"})
            self.cache.stats.passes += len(groups[i])
            part = {k: self._cast(v) for k, v in out.items()}
            self.cache.put((keys[i], settings), part)
            parts[i] = part
        from transformers import BatchFeature

        return BatchFeature(_join([p for p in parts if p is not None]))


def _flat(images: Any) -> list[Any]:
    if not isinstance(images, list | tuple):
        return [images]
    return [im for g in images for im in (g if isinstance(g, list | tuple) else [g])]


def install(processor: Any, cache: PreprocessCache, device: Any = None, dtype: Any = None) -> str:
    """Put a `CachingImageProcessor` in front of a processor's image processor.

    Returns:
        The real image processor's class name ("" when the processor has none).
    """
    inner = getattr(processor, "image_processor", None)
    if inner is None:
        return ""
    if isinstance(inner, CachingImageProcessor):
        inner = inner.inner
    processor.image_processor = CachingImageProcessor(inner, cache, device, dtype)
    return type(inner).__name__
