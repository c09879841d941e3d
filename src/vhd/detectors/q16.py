"""Q16 (Schramowski et al., 2022): CLIP image features against two learned prompt embeddings.

``q16`` or ``q16:CLIP_MODEL`` (hub id or local directory; default
``openai/clip-vit-large-patch14``, the ViT-L/14 Q16 was tuned for). The image is embedded with
transformers' ``CLIPModel.get_image_features`` (no torchvision needed), compared by cosine
similarity with Q16's two learned embeddings (non-inappropriate, inappropriate), and the two
similarities, times the logit scale (Q16's code uses 100), go through a softmax. The score is
P(inappropriate); the image is harmful when it reaches the threshold. Videos are judged frame
by frame. Needs the ``local`` extra.

Options (``--set LABEL.key=value`` or ``[detectors.LABEL]``):
    prompts: The learned embeddings, shape [2, D] (D = the CLIP projection size, 768 for
        ViT-L/14): a ``.p``/``.pkl`` pickle as Q16's repository ships it (``prompts.p``), a
        ``.pt`` tensor or a ``.npy`` array; a local path or ``hf://OWNER/REPO/PATH`` on the hub.
        Required.
    threshold: Lowest P(inappropriate) that counts as harmful (default 0.5).
    logit_scale: Multiplier of the cosine similarities before the softmax (default 100).
    device, dtype, revision, local_files_only: As for the ``hf`` backend.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import pickle
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from vhd.backends.hub import hub_failure
from vhd.detectors.base import Detector, Prediction, first_line, judge_one_image
from vhd.detectors.local_models import (
    LocalModelOptions,
    device_and_dtype,
    hub_kwargs,
    import_torch_transformers,
    load_failure,
    model_path,
)
from vhd.detectors.vlm import parse_options
from vhd.errors import ConfigError, MissingDependencyError, VhdError
from vhd.media.encoded import EncodedImage
from vhd.records import Kind

DEFAULT_CLIP = "openai/clip-vit-large-patch14"
"""The CLIP model Q16's published prompts were tuned on (ViT-L/14)."""

Q16_LOGIT_SCALE = 100.0
"""The scale Q16's code multiplies cosine similarities by before the softmax."""

_PROMPTS_HINT = "download prompts.p for ViT-L/14 from github.com/ml-research/Q16 and set LABEL.prompts=/path/prompts.p"


class Q16Options(LocalModelOptions):
    """Options of the ``q16`` detector."""

    prompts: str | None = None
    logit_scale: float = Field(default=Q16_LOGIT_SCALE, gt=0.0)


class _SafeUnpickler(pickle.Unpickler):
    """Unpickles numbers, lists and numpy arrays only (a prompt file must not run code)."""

    _ALLOWED: ClassVar[frozenset[tuple[str, str]]] = frozenset(
        {
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a prompt file (only numpy arrays)")


def resolve_prompts_file(spec: str, opts: LocalModelOptions) -> Path:
    """A local path for the prompts option (``hf://OWNER/REPO/PATH`` is downloaded to the hub cache).

    Raises:
        ConfigError: The file does not exist or cannot be fetched.
    """
    if spec.startswith("hf://"):
        parts = spec.removeprefix("hf://").split("/", 2)
        if len(parts) < 3 or not all(parts):
            raise ConfigError(f"q16 prompts {spec!r} must be hf://OWNER/REPO/PATH or a local file")
        repo = f"{parts[0]}/{parts[1]}"
        hub = hub_kwargs(opts, repo)
        try:
            from huggingface_hub import hf_hub_download

            return Path(hf_hub_download(repo, parts[2], **hub))
        except ImportError as exc:
            raise MissingDependencyError("huggingface_hub", "local") from exc
        except Exception as exc:
            alternatives = _PROMPTS_HINT
            message = hub_failure(
                "q16 prompts from",
                repo,
                exc,
                offline=hub["local_files_only"],
                alternatives=alternatives,
                files=(parts[2],),
            )
            raise ConfigError(
                message or f"cannot fetch q16 prompts {spec!r} ({first_line(exc)}); {_PROMPTS_HINT}"
            ) from None
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ConfigError(f"q16 prompts file {str(path)!r} does not exist; {_PROMPTS_HINT}")
    return path


def load_prompts(path: Path) -> Any:
    """Read Q16 prompt embeddings as a float32 numpy array of shape [2, D].

    Accepts a pickle (``.p``/``.pkl``: a numpy array or nested lists, as Q16 ships), a torch
    tensor (``.pt``/``.pth``) or a numpy file (``.npy``).

    Raises:
        ConfigError: Unreadable file or wrong shape.
    """
    import numpy as np

    data = path.read_bytes()
    try:
        if path.suffix.lower() == ".npy":
            array = np.load(io.BytesIO(data), allow_pickle=False)
        elif path.suffix.lower() in {".pt", ".pth"}:
            torch, _ = import_torch_transformers()
            array = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            array = array.detach().float().numpy() if hasattr(array, "detach") else np.asarray(array)
        else:
            array = _SafeUnpickler(io.BytesIO(data)).load()
            if hasattr(array, "detach"):
                array = array.detach().float().numpy()
        array = np.asarray(array, dtype=np.float32)
    except MissingDependencyError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot read q16 prompts {str(path)!r}: {first_line(exc)}; {_PROMPTS_HINT}") from None
    if array.ndim != 2 or array.shape[0] != 2 or not np.isfinite(array).all():
        raise ConfigError(
            f"q16 prompts {str(path)!r} have shape {list(array.shape)}; expected [2, D] finite numbers "
            "(non-inappropriate, inappropriate)"
        )
    return array


class Q16Detector(Detector):
    """Q16's prompt-tuned CLIP classifier of inappropriate images.

    ``labels`` holds ``{"inappropriate": P}``; the prediction names no taxonomy category
    (Q16 is binary).
    """

    name = "q16"
    video_native = False
    multiclass = False

    def __init__(self, label: str, model: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(label, model or DEFAULT_CLIP, options)
        self.opts: Q16Options = parse_options(label, self.options, Q16Options)
        if not self.opts.prompts:
            raise ConfigError(f"detector {label}: q16 needs its learned prompts; {_PROMPTS_HINT}")
        self._prompts_spec: str = self.opts.prompts
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any, Any] | None = None  # model, processor, prompt matrix
        self._prompts_digest: str | None = None

    def _prompts_path(self) -> Path:
        return resolve_prompts_file(self._prompts_spec, self.opts)

    def identity(self) -> dict[str, Any]:
        """CLIP model, prompt file contents (digest), threshold, scale and dtype."""
        if self._prompts_digest is None:
            try:
                self._prompts_digest = hashlib.sha256(self._prompts_path().read_bytes()).hexdigest()
            except (OSError, VhdError):
                self._prompts_digest = f"unreadable:{self.opts.prompts}"
        return {
            "name": self.name,
            "model": self.model,
            "revision": self.opts.revision,
            "prompts": self._prompts_digest,
            "threshold": self.opts.threshold,
            "logit_scale": self.opts.logit_scale,
            "dtype": self.opts.dtype,
        }

    def _load(self) -> tuple[Any, Any, Any]:
        with self._lock:
            if self._loaded is not None:
                return self._loaded
            prompts = load_prompts(self._prompts_path())
            torch, transformers = import_torch_transformers()
            device, dtype = device_and_dtype(self.opts)
            path = model_path(str(self.model))
            hub = hub_kwargs(self.opts, path)
            try:
                # The Pillow variant resizes as CLIP's own preprocessing does, and needs no torchvision.
                processor_cls = getattr(transformers.models.clip, "CLIPImageProcessorPil", None)
                processor_cls = processor_cls or transformers.CLIPImageProcessor
                processor = processor_cls.from_pretrained(path, **hub)
                model = transformers.CLIPModel.from_pretrained(path, dtype=dtype, **hub)
            except Exception as exc:
                raise load_failure("q16", path, exc, offline=hub["local_files_only"]) from exc
            model = model.to(device).eval()
            dim = int(model.config.projection_dim)
            if prompts.shape[1] != dim:
                raise ConfigError(
                    f"q16 prompts have {prompts.shape[1]} dimensions but {self.model!r} embeds images in {dim}; "
                    "use the prompts tuned for this CLIP model"
                )
            matrix = torch.from_numpy(prompts).to(device=device, dtype=torch.float32)
            matrix = matrix / matrix.norm(dim=-1, keepdim=True)
            self._loaded = (model, processor, matrix)
            return self._loaded

    async def check(self) -> None:
        """Read the prompts and load CLIP (fails with the pip line when the extra is missing)."""
        await asyncio.to_thread(self._load)

    async def aclose(self) -> None:
        """Drop the model."""
        self._loaded = None

    def probabilities(self, images: Sequence[EncodedImage]) -> list[float]:
        """P(inappropriate) for each image, in order."""
        import torch

        model, processor, matrix = self._load()
        pixels = processor(images=[im.to_pil().convert("RGB") for im in images], return_tensors="pt")["pixel_values"]
        with torch.inference_mode():
            out = model.get_image_features(pixel_values=pixels.to(device=model.device, dtype=model.dtype))
            feats = out if isinstance(out, torch.Tensor) else out.pooler_output
            feats = feats.float()
            feats = feats / feats.norm(dim=-1, keepdim=True)
            logits = self.opts.logit_scale * feats @ matrix.T
            probs = logits.softmax(dim=-1)[:, 1]
        return [float(p) for p in probs.cpu()]

    def judge(self, probability: float) -> Prediction:
        """A prediction from P(inappropriate)."""
        return Prediction(
            harmful=probability >= self.opts.threshold,
            score=probability,
            labels={"inappropriate": probability},
        )

    def probability(self, image: EncodedImage) -> float:
        """P(inappropriate) for one image."""
        (probability,) = self.probabilities([image])
        return probability

    async def predict_images(self, kind: Kind, images: Sequence[EncodedImage]) -> Prediction:
        """Judge one image (videos arrive frame by frame through `Detector.predict`)."""
        return await judge_one_image("q16", images, self.probability, self.judge, fatal=(VhdError,))
