"""The ``hf`` backend: a local Hugging Face vision-language model run with transformers.

``hf:MODEL`` names a hub id (``hf:HuggingFaceTB/SmolVLM-256M-Instruct``) or a local directory
saved with ``save_pretrained`` (``hf:/models/my-vlm``). The model loads once, in a worker thread,
on the first call or in `HFBackend.check`; concurrent calls are gathered into left-padded
batches (see `vhd.backends.hf_worker`). Options (``[backends.hf]`` in the config file)::

    device = "auto"          # auto | cpu | cuda | cuda:N | mps (auto: cuda, then mps, then cpu)
    dtype = "auto"           # auto | float32 | float16 | bfloat16
    max_batch_size = 8       # most calls in one forward batch (default by device: see HFOptions)
    batch_wait_ms = 10       # how long the first call of a batch waits for company
    trust_remote_code = false
    revision = "main"        # hub revision (branch, tag or commit)
    local_files_only = true  # default: true when HF_HUB_OFFLINE=1
    attn_implementation = "sdpa"
    generate_kwargs = { repetition_penalty = 1.1 }   # passed to model.generate
    preprocess_cache_mb = 2048  # each sample's images preprocessed once, kept up to this size

Each sample's images are decoded and run through the image processor once, whatever the number
of calls that show them (`vhd.backends.hf_preprocess`); a torchvision-based ("fast") image
processor, which transformers picks when torchvision is installed, runs on the model's device.
`HFBackend.local_stats` reports the time spent preprocessing and generating, and which image
processor ran.

With ``video_input = "native"`` a video is passed as one clip: its decoded frames go to the
processor's ``videos=`` (models whose processor has a video processor: LLaVA-NeXT-Video,
LLaVA-OneVision, Qwen2-VL...), or are the video of an InstructBLIP-Video model; any other model
is refused when the backend is checked, before any work.

A processor without a chat template is refused, except InstructBLIP-family processors (no
template by design): their prompt is the conversation's text as it is, one image per prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vhd.backends.base import Backend, GenerateConfig, Message, Output
from vhd.backends.hf_batch import PLAIN_TEMPLATE, LoadedModel, single_image, video_support
from vhd.backends.hf_worker import BatchWorker
from vhd.backends.hub import brief, hub_failure, local_only, looks_local, offline_env
from vhd.backends.hub import hub_reachable as hub_reachable  # re-exported: its home was here
from vhd.errors import BackendUnavailableError, ConfigError, MissingDependencyError

log = logging.getLogger(__name__)

DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


class HFOptions(BaseModel):
    """Options of the ``hf`` backend (the config file's ``[backends.hf]`` table)."""

    model_config = ConfigDict(extra="forbid")

    device: str = "auto"
    """``auto`` (cuda, then mps, then cpu), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``."""
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    """Weight dtype; ``auto`` is bfloat16 on CUDA (float16 where unsupported), else float32."""
    max_batch_size: int | None = Field(default=None, ge=1)
    """Most concurrent calls run as one batch; default by device (`default_batch_size`)."""
    batch_wait_ms: float = Field(default=10.0, ge=0)
    """How long a batch waits for more calls after the first arrives."""
    trust_remote_code: bool = False
    """Allow model repositories to run their own code."""
    revision: str | None = None
    """Hub revision (branch, tag or commit hash)."""
    local_files_only: bool = Field(default_factory=offline_env)
    """Never reach the hub; defaults to true when ``HF_HUB_OFFLINE=1``."""
    attn_implementation: str | None = None
    """``eager``, ``sdpa``, ``flash_attention_2``...; the model's default when unset."""
    generate_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments for ``model.generate`` (e.g. ``repetition_penalty``)."""
    preprocess_cache_mb: int = Field(default=2048, ge=0)
    """Megabytes of preprocessed images kept (in the model's dtype, in RAM) so a sample's calls share
    them; 0 keeps none. Enough for every sample in flight: a 640x480 image is 13 tiles of 512 px for
    SmolVLM, 39 MB in float32 (20 in bfloat16), so ``--concurrency 64`` needs about 1.3-2.5 GB."""

    @field_validator("device")
    @classmethod
    def _check_device(cls, value: str) -> str:
        if not DEVICE_PATTERN.match(value):
            raise ValueError("must be auto, cpu, cuda, cuda:N or mps")
        return value


def parse_options(options: Mapping[str, Any]) -> HFOptions:
    """Validate ``[backends.hf]`` options.

    Raises:
        ConfigError: Unknown key or bad value, in one line.
    """
    try:
        return HFOptions.model_validate(dict(options))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'options'}: {err['msg']}" for err in exc.errors()
        )
        valid = ", ".join(HFOptions.model_fields)
        raise ConfigError(f"bad [backends.hf] options: {problems} (valid keys: {valid})") from exc


def accelerator() -> str | None:
    """The best GPU torch sees here: ``cuda``, then ``mps``; None where there is neither."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return None


def resolve_device(device: str) -> str:
    """Turn ``auto`` into the best available device: cuda, then mps, then cpu."""
    if device != "auto":
        return device
    return accelerator() or "cpu"


def default_batch_size(device: str) -> int:
    """The ``max_batch_size`` a device gets by default.

    8 on CPU and MPS; on CUDA one per 2 GiB of the GPU's memory, from 8 to 64 (a batch that runs
    out of memory is halved and tried again).
    """
    if not device.startswith("cuda"):
        return 8
    import torch

    index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
    gib = torch.cuda.get_device_properties(index).total_memory / 2**30
    return max(8, min(64, int(gib // 2)))


def resolve_dtype(dtype: str, device: str, *, mps_dtype: str = "float32") -> str:
    """Turn ``auto`` into bfloat16 on CUDA (float16 where unsupported), ``mps_dtype`` on MPS, float32 elsewhere."""
    if dtype != "auto":
        return dtype
    if device.startswith("cuda"):
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return mps_dtype if device.startswith("mps") else "float32"


def unavailable_message(model: str, exc: BaseException, *, offline: bool) -> str:
    """One line telling the user why ``model`` did not load and what to do."""
    raw = brief(exc)
    if Path(model).expanduser().is_dir():
        return (
            f"cannot load hf model {model!r}: the directory is not a loadable vision-language model "
            f"({raw}); save one with save_pretrained (model and processor) or use a hub id"
        )
    if looks_local(model):
        return (
            f"cannot load hf model {model!r}: no such directory; pass an existing local directory "
            f"(--model hf:/path/to/model) or a hub id"
        )
    alternatives = (
        "pass a local directory (--model hf:/path/to/model), or use an endpoint (--model openai:MODEL with "
        "[backends.openai] base_url); to try vhd with no model at all: --model scripted:demo"
    )
    message = hub_failure("hf model", model, exc, offline=offline, alternatives=alternatives)
    if message is not None:
        return message
    return (
        f"cannot load hf model {model!r} ({raw}); use a vision-language model that "
        f"transformers' AutoModelForImageTextToText can load"
    )


def check_model_path(model: str, revision: str | None = None) -> None:
    """Fail at once (before torch is imported) when ``model`` cannot be there.

    A path (``/...``, ``./...``, ``~/...``) where no directory is; or, with ``HF_HUB_OFFLINE``
    set, a hub id the local cache does not hold (its ``config.json`` is looked up, nothing is
    downloaded).

    Raises:
        BackendUnavailableError: One line with the fix.
    """
    if looks_local(model):
        if not Path(model).expanduser().is_dir():
            raise BackendUnavailableError(unavailable_message(model, FileNotFoundError(model), offline=True))
        return
    if offline_env() and not Path(model).expanduser().exists() and not _cached(model, revision):
        raise BackendUnavailableError(unavailable_message(model, OSError("not in the local cache"), offline=True))


def _cached(model: str, revision: str | None) -> bool:
    """Whether the local hub cache holds ``model``'s ``config.json`` (True when that cannot be told)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return True  # the load itself names the missing dependency
    try:
        return isinstance(try_to_load_from_cache(model, "config.json", revision=revision), str)
    except ValueError:  # not a valid repository id: the load says so
        return True


def load_model(model: str, options: Mapping[str, Any] | None = None) -> LoadedModel:
    """Load a vision-language model and its processor exactly as the ``hf`` backend does.

    The one loading path of the project: ``vhd tune`` and the ``tuned-vlm`` detector use it too.

    Args:
        model: Hub id or local directory.
        options: ``[backends.hf]`` options (`HFOptions`): device, dtype, revision...

    Raises:
        BackendUnavailableError: The model cannot be found or loaded (one line with the fix).
        MissingDependencyError: torch/transformers are not installed.
        ConfigError: Bad options.
    """
    return HFBackend(model, options)._load()


class HFBackend(Backend):
    """A local transformers vision-language model with batched generation.

    Args:
        model: Hub id or local directory.
        options: See `HFOptions`.
    """

    name = "hf"
    supports_logprobs = True
    takes_video = True  # where the model's processor does (`video_support`, known once loaded)

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, options)
        self.opts = parse_options(self.options)
        self._worker: BatchWorker | None = None
        self._lock = threading.Lock()
        self.batch_size = self.opts.max_batch_size or 0
        self._last_stats: dict[str, Any] = {}

    def precheck(self) -> None:
        """Fail here, before torch loads, on what would stop the model from loading.

        Missing torch/transformers first (nothing runs without the extra), then a missing local
        model directory or, offline, an uncached hub id.
        """
        from importlib.util import find_spec

        for module in ("torch", "transformers"):
            if find_spec(module) is None:  # looked up, not imported
                raise MissingDependencyError(module, "local")
        check_model_path(self.model, self.opts.revision)

    def identity(self) -> dict[str, Any]:
        """Spec, resolved dtype, revision and extra generate arguments."""
        dtype: str = self.opts.dtype
        if dtype == "auto":
            with contextlib.suppress(ImportError):
                dtype = resolve_dtype("auto", resolve_device(self.opts.device))
        ident: dict[str, Any] = {"spec": self.spec, "dtype": dtype, "revision": self.opts.revision}
        if self.opts.generate_kwargs:
            ident["generate_kwargs"] = dict(sorted(self.opts.generate_kwargs.items()))
        return ident

    def _load(self) -> LoadedModel:
        try:
            import torch

            transformers: Any = importlib.import_module("transformers")
        except ImportError as exc:
            raise MissingDependencyError(exc.name or "transformers", "local") from exc

        device = resolve_device(self.opts.device)
        dtype = getattr(torch, resolve_dtype(self.opts.dtype, device))
        common: dict[str, Any] = {
            "revision": self.opts.revision,
            "trust_remote_code": self.opts.trust_remote_code,
        }
        path = str(Path(self.model).expanduser()) if self.model.startswith("~") else self.model
        common["local_files_only"] = local_only(path, self.opts.local_files_only)  # offline or hub unreachable
        extra: dict[str, Any] = {}
        if self.opts.attn_implementation:
            extra["attn_implementation"] = self.opts.attn_implementation
        from vhd.backends.hf_text import is_text_only, load_text_model

        try:
            if is_text_only(path, common):  # a text-only chat model (e.g. for `vhd prompts`)
                processor, model = load_text_model(path, common, dtype, device, extra)
            else:
                from vhd.backends.blip_video import is_video_blip, load_processor

                if is_video_blip(path, common):  # its own processor needs torchvision and 4 frames
                    processor = load_processor(path, common)
                else:
                    processor = transformers.AutoProcessor.from_pretrained(path, **common)
                model = transformers.AutoModelForImageTextToText.from_pretrained(
                    path, dtype=dtype, device_map=device, **common, **extra
                )
        except ImportError as exc:
            name = getattr(exc, "name", None)
            if name:
                raise MissingDependencyError(name, "local") from exc
            raise BackendUnavailableError(f"cannot load hf model {self.model!r}: {brief(exc)}") from exc
        except Exception as exc:
            offline = bool(common["local_files_only"]) or offline_env()
            raise BackendUnavailableError(unavailable_message(self.model, exc, offline=offline)) from exc
        tokenizer: Any = getattr(processor, "tokenizer", None)
        if not getattr(processor, "chat_template", None) and getattr(tokenizer, "chat_template", None):
            processor.chat_template = tokenizer.chat_template  # some processors drop it (InstructBLIP)
        if not getattr(processor, "chat_template", None) and single_image(processor):
            processor.chat_template = PLAIN_TEMPLATE  # InstructBLIP-family: the prompt is the question itself
        if tokenizer is None or not getattr(processor, "chat_template", None):
            raise BackendUnavailableError(
                f"hf model {self.model!r} has no processor chat template; pick an instruction-tuned "
                f"vision-language model (one whose processor ships a chat template)"
            )
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.eval()
        return LoadedModel(model, processor, model.device, dtype, dict(self.opts.generate_kwargs))

    def _load_served(self) -> LoadedModel:
        """`_load`, with the image cache in front of the processor (only the batch worker's copy)."""
        loaded = self._load()
        image_processor = getattr(loaded.processor, "image_processor", None)
        loaded.image_processor = "" if image_processor is None else type(image_processor).__name__
        if self.opts.preprocess_cache_mb and image_processor is not None:
            from vhd.backends.hf_preprocess import PreprocessCache, install

            loaded.cache = PreprocessCache(self.opts.preprocess_cache_mb << 20, stats=loaded.stats)
            install(loaded.processor, loaded.cache, loaded.device, loaded.dtype)
        return loaded

    def _ensure_worker(self) -> BatchWorker:
        with self._lock:
            if self._worker is None:
                self.batch_size = self.opts.max_batch_size or default_batch_size(resolve_device(self.opts.device))
                self._worker = BatchWorker(
                    self._load_served,
                    max_batch_size=self.batch_size,
                    wait_s=self.opts.batch_wait_ms / 1000,
                    name=f"vhd-hf-{self.model}",
                )
            return self._worker

    async def check(self) -> None:
        """Load the model now, so a missing model fails before any work.

        Raises:
            BackendUnavailableError: The model cannot be found or loaded (one line with the fix).
            MissingDependencyError: torch/transformers are not installed.
        """
        self.precheck()
        await asyncio.wrap_future(self._ensure_worker().ready)

    def video_support(self) -> str | None:
        """None when the loaded model's processor takes a video (`vhd.backends.hf_batch.video_support`).

        Before `check` has loaded the model nothing is known and None is returned.
        """
        worker = self._worker
        loaded = worker.loaded if worker is not None else None
        if loaded is None:
            return None
        why = video_support(loaded.processor)
        return None if why is None else f"hf model {self.model!r}: {why}"

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        """Answer one conversation; concurrent calls share batches.

        Raises:
            BackendUnavailableError: The model cannot be loaded.
            BackendError: Generation failed for this call.
        """
        worker = self._ensure_worker()
        await asyncio.wrap_future(worker.ready)
        output = await asyncio.wrap_future(worker.submit(list(messages), config))
        output.model = self.model
        return output

    def local_stats(self) -> dict[str, Any]:
        """Seconds preprocessing and generating, image passes, which image processor, batch sizes.

        Kept after `aclose` (the figures of the model's last load). Image passes are counted only
        with the image cache (None when ``preprocess_cache_mb = 0``).
        """
        from vhd.backends.hf_preprocess import is_fast

        worker = self._worker
        loaded = worker.loaded if worker is not None else None
        if loaded is None:
            return dict(self._last_stats)
        st, cached = loaded.stats, loaded.cache is not None

        self._last_stats = {
            "preprocess_s": round(st.preprocess_s, 3),
            "generate_s": round(st.generate_s, 3),
            "image_processor": loaded.image_processor,
            "torchvision": is_fast(getattr(loaded.processor, "image_processor", None)),
            "image_passes": st.passes if cached else None,
            "images_reused": st.reused if cached else None,
            "calls": st.calls,
            "batches": st.batches,
            "max_batch_size": self.batch_size,
        }
        return dict(self._last_stats)

    async def aclose(self) -> None:
        """Stop the worker thread and free the model; a later call loads it again."""
        self.local_stats()  # keep the figures of this load
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is None:
            return
        device = str(worker.loaded.device) if worker.loaded is not None else ""
        await asyncio.to_thread(worker.stop)
        import gc

        gc.collect()
        if device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()
