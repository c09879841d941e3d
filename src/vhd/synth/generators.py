"""Generators: text-to-image, text-to-video and image-to-video pipelines behind one interface.

Each generator wraps one diffusers pipeline class and is registered by name in `GENERATORS`
(third-party packages add theirs through the ``vhd.generators`` entry-point group). A generator is
built from ``NAME[:PATH_OR_ID]``: a complete saved pipeline of its class is loaded as is; a base
model gets the parts it lacks (the motion adapter, the SparseCtrl model) from ``--component
NAME=ID_OR_PATH`` or the defaults below. The pipeline loads once per process.

=================  =================================  =========  ======  ==========================
name               pipeline                           size       frames  default model
=================  =================================  =========  ======  ==========================
sdxl               StableDiffusionXLPipeline          512x512    -       SDXL 1.0 base
sd                 StableDiffusionPipeline            model's    -       SD 1.5
animatediff        AnimateDiffPipeline                512x512    16      SD 1.5 + motion adapter v3
animatediff-sdxl   AnimateDiffSDXLPipeline            1024x1024  16      SDXL + SDXL motion adapter
animatediff-i2v    AnimateDiffSparseControlNetPipeline 512x512   16      SD 1.5 + v3 + RGB SparseCtrl
i2vgen-xl          I2VGenXLPipeline                   512x512    16      ali-vilab/i2vgen-xl
=================  =================================  =========  ======  ==========================

The module is long (about 460 lines) because the base class holds the one loading path every
pipeline shares (components, speed options, offline and hub errors) next to the settings it reads.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from vhd.errors import ConfigError, MissingDependencyError
from vhd.records import Kind
from vhd.registry import Registry
from vhd.synth.speed import VAES, attention_context, cache_signatures, prepare, speed_record

PAPER_PHOTO_TEMPLATE = (
    "A professional photograph of {prompt}, photorealistic, vivid, high resolution, 8k, highly detailed, "
    "Canon R6 Mark II, 35 mm lens"
)
"""The paper's SDXL prefix and suffix (§3.1.3), verbatim, as the ``paper-photo`` preset."""

TEMPLATES: dict[str, str] = {"paper-photo": PAPER_PHOTO_TEMPLATE, "plain": "{prompt}"}
"""Named prompt templates ``--template`` accepts besides a literal containing ``{prompt}``."""

DEFAULT_MOTION_ADAPTER = "guoyww/animatediff-motion-adapter-v1-5-3"
DEFAULT_SDXL_MOTION_ADAPTER = "guoyww/animatediff-motion-adapter-sdxl-beta"
DEFAULT_SPARSECTRL = "guoyww/animatediff-sparsectrl-rgb"
SD15 = "stable-diffusion-v1-5/stable-diffusion-v1-5"
SDXL_BASE = "stabilityai/stable-diffusion-xl-base-1.0"


def resolve_template(template: str | None, default: str) -> str:
    """A preset name or a literal template (must contain ``{prompt}``); None gives ``default``."""
    if template is None:
        return default
    text = TEMPLATES.get(template, template)
    if "{prompt}" not in text:
        raise ConfigError(f"--template {template!r} must contain {{prompt}} or name a preset ({', '.join(TEMPLATES)})")
    return text


def apply_template(template: str, prompt: str) -> str:
    """Put a prompt into a template; a leading capital is lowered and a final period dropped after a prefix."""
    text = prompt.strip()
    if not template.startswith("{prompt}"):
        first = text.split()[0] if text.split() else ""
        if first[:1].isupper() and (len(first) == 1 or first[1:].islower()) and first != "I":
            text = text[0].lower() + text[1:]
        text = text.rstrip(".")
    return template.replace("{prompt}", text)


def resolve_device(device: str | None) -> str:
    """The torch device to generate on; without one given, a GPU or a one-line error.

    Raises:
        ConfigError: No CUDA or MPS device and no explicit device.
    """
    from vhd.backends.hf import accelerator

    if device:
        return device
    found = accelerator()
    if found is None:
        raise ConfigError("no GPU found: pass --device cpu to generate on the CPU (slow)")
    return found


def resolve_dtype(dtype: str, device: str) -> str:
    """``auto``: bfloat16 on CUDA (float16 where unsupported), float16 on MPS, float32 on the CPU."""
    from vhd.backends.hf import resolve_dtype as model_dtype

    return model_dtype(dtype, device, mps_dtype="float16")


@dataclass(frozen=True)
class GenerateSettings:
    """How to generate (every generator understands these).

    Attributes:
        steps: Inference steps (None: the generator's default).
        guidance: Guidance scale (None: the generator's default).
        size: ``(width, height)`` (None: the generator's default, or the model's for ``sd``).
        num_frames: Frames of a video (None: the generator's default).
        negative_prompt: For rows without their own.
        template: Preset name or literal with ``{prompt}`` (None: the generator's default).
        device: ``cuda``, ``cuda:N``, ``mps`` or ``cpu`` (None: a GPU, else an error).
        dtype: ``auto``, ``float32``, ``float16`` or ``bfloat16``.
        batch_size: Prompts per pipeline call (image-to-video runs one at a time).
        watermark: Apply the invisible watermark.
        safety_checker: Keep a pipeline's safety checker (off only with ``--no-safety-checker``).
        components: Parts to load beside the model: name -> hub id or local path.
        revision: Hub revision of the model.
        compile: ``torch.compile`` the denoiser.
        attention_slicing: Slice attention (less memory, slower).
        vae_tiling: Decode in tiles (large sizes on small GPUs).
        cpu_offload: Keep parts on the CPU until used (needs accelerate).
        local_files_only: Never reach the hub.
        image_format: ``png`` or ``webp`` (lossless) for images.
        png_level: zlib level of PNGs (0-9; 1 by default: fast, the pixels do not depend on it).
        content_credentials: Sign a C2PA manifest into every output: ``auto`` (when ``vhd[c2pa]``
            is installed), ``on`` (an error without it) or ``off``.
        signing: The C2PA signing certificate: `vhd.synth.credentials.SigningConfig` fields
            (``cert``, ``key``, ``alg``, ``tsa_url``); empty: the self-signed test certificate.
        channels_last, attention, vae, unet_weights, scheduler, preset: Speed options, each
            described in `vhd.synth.speed` (``vae="fp16-fix"``: the fp16-safe SDXL VAE, no upcast;
            ``preset``: the name `vhd.synth.speed.apply_preset` recorded).
    """

    steps: int | None = None
    guidance: float | None = None
    size: tuple[int, int] | None = None
    num_frames: int | None = None
    negative_prompt: str | None = None
    template: str | None = None
    device: str | None = None
    dtype: str = "auto"
    batch_size: int = 1
    watermark: bool = True
    safety_checker: bool = True
    components: Mapping[str, str] = field(default_factory=dict)
    revision: str | None = None
    compile: bool = False
    attention_slicing: bool = False
    vae_tiling: bool = False
    cpu_offload: bool = False
    local_files_only: bool = False
    image_format: str = "png"
    png_level: int = 1
    content_credentials: str = "auto"
    signing: Mapping[str, str] = field(default_factory=dict)
    channels_last: bool = False
    attention: str | None = None
    vae: str | None = None
    unet_weights: str | None = None
    scheduler: Mapping[str, Any] = field(default_factory=dict)
    preset: str | None = None


@dataclass
class Job:
    """One prompt to generate.

    Attributes:
        prompt_id: The prompt's id.
        full_prompt: The text given to the pipeline (template applied).
        negative_prompt: Negative prompt, or None.
        seed: The derived per-prompt seed.
        first_frame: For image-to-video: the first frame (a PIL image).
    """

    prompt_id: str
    full_prompt: str
    negative_prompt: str | None
    seed: int
    first_frame: Any = None


@dataclass
class Frames:
    """What the pipeline made for one job.

    Attributes:
        frames: ``N x H x W x 3`` uint8 (N = 1 for an image), or floats in [0, 1] as diffusers
            returns them (`as_uint8` converts them on the host's threads, not the pipeline's).
        blacked_out: The safety checker flagged it (or, once converted, it is all zeros): not a sample.
    """

    frames: Any
    blacked_out: bool = False

    def as_uint8(self) -> Frames:
        """These frames as uint8 (rounded as diffusers does); float frames all zero once converted are blacked out."""
        import numpy as np

        if self.frames.dtype == np.uint8:
            return self
        from vhd.synth.outputs import to_uint8

        pixels = to_uint8(self.frames)
        return Frames(pixels, self.blacked_out or not pixels.any())


class Generator:
    """One diffusers pipeline class behind vhd's generate interface.

    Subclasses set the class attributes and may override `call_kwargs`.

    Args:
        model: Hub id or local folder (None: `default_model`).
        settings: How to generate.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[Kind] = Kind.IMAGE
    pipeline_class: ClassVar[str] = ""
    default_model: ClassVar[str] = ""
    default_size: ClassVar[tuple[int, int] | None] = (512, 512)
    default_frames: ClassVar[int | None] = None
    fps: ClassVar[int | None] = None
    default_steps: ClassVar[int] = 30
    default_guidance: ClassVar[float] = 7.5
    default_template: ClassVar[str] = "{prompt}"
    extra_components: ClassVar[dict[str, tuple[str, str]]] = {}
    """Parts a base model lacks: name -> (diffusers class, default hub id)."""
    needs_first_frame: ClassVar[bool] = False
    batchable: ClassVar[bool] = True
    has_safety_checker: ClassVar[bool] = False

    def __init__(self, model: str | None, settings: GenerateSettings) -> None:
        self.model = model or self.default_model
        self.settings = settings
        self.template = resolve_template(settings.template, self.default_template)
        self.pipe: Any = None
        self.device = ""
        self.dtype = ""
        self.loaded_components: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def spec(self) -> str:
        """``name:model`` as stored in a sample's ``generator`` field."""
        return f"{self.name}:{self.model}"

    @property
    def steps(self) -> int:
        """Inference steps used."""
        return self.settings.steps or self.default_steps

    @property
    def guidance(self) -> float:
        """Guidance scale used."""
        return self.default_guidance if self.settings.guidance is None else self.settings.guidance

    @property
    def num_frames(self) -> int | None:
        """Frames per video (None for images)."""
        return None if self.kind is Kind.IMAGE else (self.settings.num_frames or self.default_frames)

    @property
    def size(self) -> tuple[int, int] | None:
        """``(width, height)`` asked for (None: the model's own)."""
        return self.settings.size or self.default_size

    def load(self) -> Any:
        """Load the pipeline once (thread-safe) and return it.

        Raises:
            MissingDependencyError: torch or diffusers is not installed.
            ConfigError: The model or a component cannot be loaded (one line with the fix).
        """
        with self._lock:
            if self.pipe is None:
                self.pipe = self._load()
            return self.pipe

    def _load(self) -> Any:
        try:
            import diffusers
            import torch
        except ImportError as exc:
            raise MissingDependencyError(exc.name or "diffusers", "gen") from exc
        from vhd.backends.hub import local_only

        self.device = resolve_device(self.settings.device)
        self.dtype = resolve_dtype(self.settings.dtype, self.device)
        torch_dtype = getattr(torch, self.dtype)
        model = str(Path(self.model).expanduser()) if self.model.startswith("~") else self.model
        offline = local_only(model, self.settings.local_files_only)
        cls = getattr(diffusers, self.pipeline_class)
        common: dict[str, Any] = {"local_files_only": offline}
        config = self._fail_to(lambda: cls.load_config(model, revision=self.settings.revision, **common), model)
        kwargs: dict[str, Any] = {"dtype": torch_dtype, "revision": self.settings.revision, **common}
        wanted = dict(self.settings.components)
        for name, (part_class, default) in self.extra_components.items():
            if name in wanted or not isinstance(config.get(name), list | tuple) or config[name][0] is None:
                ident = wanted.pop(name, default)
                part = getattr(diffusers, part_class)
                kwargs[name] = self._fail_to(
                    lambda p=part, i=ident: p.from_pretrained(i, dtype=torch_dtype, **self._where(i)), ident
                )
                self.loaded_components[name] = ident
        for name, ident in wanted.items():
            entry = config.get(name)
            if not isinstance(entry, list | tuple) or entry[0] is None:
                valid = sorted(k for k, v in config.items() if isinstance(v, list | tuple) and not k.startswith("_"))
                raise ConfigError(f"--component {name}: {self.name} has no such part; valid parts: {', '.join(valid)}")
            library = __import__(entry[0], fromlist=[entry[1]])
            part = getattr(library, entry[1])
            kwargs[name] = self._fail_to(lambda p=part, i=ident: p.from_pretrained(i, **self._where(i)), ident)
            self.loaded_components[name] = ident
        if self.settings.vae is not None:
            vae = VAES.get(self.settings.vae, self.settings.vae)  # the fp16-safe VAE is loaded in half precision
            kwargs["vae"] = self._fail_to(
                lambda: diffusers.AutoencoderKL.from_pretrained(vae, dtype=torch_dtype, **self._where(vae)),  # type: ignore[no-untyped-call]
                vae,
            )
            self.loaded_components["vae"] = vae
        if self.has_safety_checker and not self.settings.safety_checker:
            kwargs.update(safety_checker=None, requires_safety_checker=False)
        pipe = self._fail_to(lambda: cls.from_pretrained(model, **kwargs), model)
        pipe.set_progress_bar_config(disable=True)
        cache_signatures(pipe)
        self.loaded_components.update(prepare(pipe, self.settings, self.device, self._fail_to))
        if self.settings.attention_slicing:
            pipe.enable_attention_slicing()
        if self.settings.vae_tiling:
            pipe.vae.enable_tiling()
        if self.settings.cpu_offload:
            pipe.enable_model_cpu_offload(device=self.device)
        else:
            pipe.to(self.device)
        if self.settings.channels_last:
            for part in ("unet", "transformer", "vae"):
                if getattr(pipe, part, None) is not None:
                    getattr(pipe, part).to(memory_format=torch.channels_last)
        if self.settings.compile:
            denoiser = "unet" if hasattr(pipe, "unet") else "transformer"
            setattr(pipe, denoiser, torch.compile(getattr(pipe, denoiser)))
        return pipe

    def _where(self, ident: str) -> dict[str, Any]:
        """``local_files_only`` for one part: a local folder needs no hub; a hub id is probed once."""
        from vhd.backends.hub import local_only

        return {"local_files_only": local_only(ident, self.settings.local_files_only)}

    def _fail_to(self, load: Any, ident: str) -> Any:
        from vhd.backends.hub import brief, hub_failure

        try:
            return load()
        except ImportError as exc:
            raise MissingDependencyError(getattr(exc, "name", None) or "diffusers", "gen") from exc
        except Exception as exc:
            if Path(ident).expanduser().is_dir():
                raise ConfigError(
                    f"cannot load {self.name} from {ident!r}: {brief(exc)}; pass a folder saved with "
                    f"{self.pipeline_class}.save_pretrained, or a base model with --component for missing parts"
                ) from exc
            message = hub_failure(
                f"{self.name} model",
                ident,
                exc,
                offline=self.settings.local_files_only,
                alternatives=f"pass a local folder ({self.name}:/path/to/pipeline)",
            )
            raise ConfigError(message or f"cannot load {self.name} model {ident!r}: {brief(exc)}") from exc

    def speed_options(self) -> dict[str, Any]:
        """The speed options in effect (recorded in provenance; several change outputs slightly)."""
        return speed_record(self.settings, self.load() if self.settings.vae is not None else None)

    def scheduler_name(self) -> str:
        """The loaded pipeline's scheduler class."""
        return type(self.load().scheduler).__name__

    def safety_state(self) -> str:
        """``on``, ``off`` or ``none`` (this pipeline carries no checker)."""
        if not self.has_safety_checker:
            return "none"
        if not self.settings.safety_checker:
            return "off"
        return "on" if getattr(self.load(), "safety_checker", None) is not None else "none"

    def call_kwargs(self, jobs: Sequence[Job]) -> dict[str, Any]:
        """Pipeline keyword arguments for a batch (subclasses add theirs)."""
        import torch

        kwargs: dict[str, Any] = {
            "prompt": [j.full_prompt for j in jobs],
            "num_inference_steps": self.steps,
            "guidance_scale": self.guidance,
            "generator": [torch.Generator("cpu").manual_seed(j.seed) for j in jobs],
            "output_type": "np",
        }
        if any(j.negative_prompt for j in jobs):
            kwargs["negative_prompt"] = [j.negative_prompt or "" for j in jobs]
        if self.size is not None:
            kwargs["width"], kwargs["height"] = self.size
        if self.num_frames is not None:
            kwargs["num_frames"] = self.num_frames
        return kwargs

    def run(self, jobs: Sequence[Job]) -> list[Frames]:
        """Generate a batch: a pure function of the jobs, the model and the settings.

        Returns:
            One `Frames` per job, in order (float frames: `Frames.as_uint8` converts them).
        """
        import numpy as np
        import torch

        pipe = self.load()
        if not self.batchable and len(jobs) > 1:
            return [f for j in jobs for f in self.run([j])]
        torch.manual_seed(jobs[0].seed)  # pipelines that draw noise without the generator (I2VGen-XL)
        with torch.inference_mode(), attention_context(self.settings.attention):
            out = pipe(**self.call_kwargs(jobs))
        # float frames as diffusers returns them: converting them is host work (`Frames.as_uint8`)
        if self.kind is Kind.VIDEO:
            raw = out.frames
            return [Frames(np.asarray(raw[i])) for i in range(len(jobs))]
        flags = getattr(out, "nsfw_content_detected", None) or [False] * len(jobs)
        images = np.asarray(out.images)
        return [Frames(images[i : i + 1], bool(flags[i])) for i in range(len(jobs))]


GENERATORS: Registry[type[Generator]] = Registry("generator", "vhd.generators", base=Generator)
"""Every generator: built-ins below, plugins from the ``vhd.generators`` entry-point group."""

_NEEDS = {"torch": "torch", "diffusers": "diffusers", "transformers": "transformers"}
for _name, _cls, _summary in [
    ("sdxl", "SDXLGenerator", "text to image, StableDiffusionXLPipeline (the paper's images)"),
    ("sd", "SDGenerator", "text to image, StableDiffusionPipeline (SD 1.x/2.x)"),
    ("animatediff", "AnimateDiffGenerator", "text to video, AnimateDiffPipeline"),
    ("animatediff-sdxl", "AnimateDiffSDXLGenerator", "text to video, AnimateDiffSDXLPipeline (the paper's T2V)"),
    ("animatediff-i2v", "SparseCtrlI2VGenerator", "prompt + first frame to video, AnimateDiff v3 SparseCtrl"),
    ("i2vgen-xl", "I2VGenXLGenerator", "prompt + first frame to video, I2VGenXLPipeline"),
]:
    GENERATORS.add(_name, f"vhd.synth.builtin:{_cls}", extra="gen", needs=_NEEDS, summary=_summary)


def split_generator_spec(spec: str) -> tuple[str, str | None]:
    """``NAME[:PATH_OR_ID]`` -> ``(name, model or None)`` (split at the first colon)."""
    name, sep, model = spec.partition(":")
    name = name.strip()
    if not name:
        raise ConfigError(f"--generator {spec!r} must be NAME[:PATH_OR_ID]; generators: {', '.join(GENERATORS)}")
    return name, (model.strip() or None) if sep else None


def create_generator(spec: str, settings: GenerateSettings) -> Generator:
    """Build (not load) the generator a ``NAME[:PATH_OR_ID]`` spec names.

    Raises:
        ConfigError: Unknown name (the valid ones listed) or bad settings.
        MissingDependencyError: torch or diffusers is missing (the pip line).
    """
    name, model = split_generator_spec(spec)
    cls = GENERATORS.load(name)
    return cls(model, settings)
