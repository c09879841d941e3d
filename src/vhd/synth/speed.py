"""Speed options of `vhd generate` beyond the bare pipeline, each optional and recorded in provenance.

- ``channels_last``: the denoiser and VAE in channels-last memory format (faster convolutions on
  recent GPUs; may change outputs in the last bits).
- ``compile``: ``torch.compile`` the denoiser (a slow first batch; outputs may differ slightly).
- ``attention``: force one scaled-dot-product attention kernel (`ATTENTION`) around each pipeline
  call; without it torch chooses (SDPA is diffusers' default processor).
- ``vae``: another VAE, e.g. ``fp16-fix`` (`SDXL_FP16_VAE`): the SDXL VAE fine-tuned so it does not
  overflow in float16; its config says ``force_upcast: false``, so the pipeline decodes in half
  precision instead of upcasting the VAE to float32 at every decode.
- ``unet_weights`` / ``scheduler`` / `PRESETS`: a distilled UNet over SDXL base with the scheduler
  settings it was distilled for (SDXL-Lightning: 2, 4 or 8 steps, no guidance, trailing timesteps).

Also here: `cache_signatures`, which stops diffusers' per-call ``inspect.signature`` lookups.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from vhd.errors import ConfigError

T = TypeVar("T")

SDXL_FP16_VAE = "madebyollin/sdxl-vae-fp16-fix"
"""The SDXL VAE fine-tuned to run in float16 without overflow (its config: ``force_upcast: false``)."""

VAES = {"fp16-fix": SDXL_FP16_VAE}
"""Names ``--vae`` accepts besides a hub id or folder."""

PRESETS: dict[str, dict[str, Any]] = {
    f"lightning-{n}step": {
        "unet_weights": f"ByteDance/SDXL-Lightning/sdxl_lightning_{n}step_unet.safetensors",
        "steps": n,
        "guidance": 0.0,
        "scheduler": {"timestep_spacing": "trailing"},
    }
    for n in (2, 4, 8)
}
"""Fast presets for ``sdxl``: SDXL-Lightning's distilled UNet (ByteDance, by hub id) over SDXL base,
its step count, no classifier-free guidance (one UNet pass per step instead of two) and the Euler
scheduler with trailing timesteps, as its model card prescribes. Fewer steps, lower fidelity."""

ATTENTION = ("sdpa", "flash", "efficient", "math", "cudnn")
"""``--attention`` backends: ``sdpa`` lets torch choose among its kernels; the others force one
(``flash`` and ``efficient`` need CUDA)."""


def apply_preset(settings: T, name: str | None) -> T:
    """``settings`` with a preset's values where they are still at their defaults (flags win).

    Raises:
        ConfigError: Unknown preset (the valid names listed).
    """
    if name is None:
        return settings
    if name not in PRESETS:
        raise ConfigError(f"--preset {name!r}: choose {', '.join(PRESETS)}")
    defaults = type(settings)()
    changes = {k: v for k, v in PRESETS[name].items() if getattr(settings, k) == getattr(defaults, k)}
    return replace(settings, preset=name, **changes)  # type: ignore[type-var]


class _CachedInspect(types.ModuleType):
    """The `inspect` module, with `signature` remembered per function (diffusers asks per attention call)."""

    def __init__(self) -> None:
        import inspect

        super().__init__("inspect")
        self.__dict__.update(inspect.__dict__)
        self._signature = inspect.signature
        self._known: dict[tuple[Any, bool], Any] = {}
        self.signature = self._cached

    def _cached(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        """`inspect.signature`; for plain functions and bound methods, computed once per function."""
        func = getattr(obj, "__func__", None)
        if args or kwargs or not isinstance(obj, types.FunctionType | types.MethodType):
            return self._signature(obj, *args, **kwargs)
        key = (func if func is not None else obj, func is not None)  # a bound method's depends on its function only
        found = self._known.get(key)
        if found is None:
            found = self._known[key] = self._signature(obj)
        return found


_INSPECT: _CachedInspect | None = None


def cache_signatures(pipe: Any) -> None:
    """Stop diffusers' per-call ``inspect.signature`` (every attention call, every pipeline call).

    Diffusers looks up the attention processor's signature in each ``Attention.forward`` and the
    pipeline's in ``components``/``device``: thousands of calls per image on SDXL. Signatures of
    functions do not change, so the modules that ask get an `inspect` whose `signature` remembers
    them (bound methods: the function's signature without its first parameter, as `inspect` gives).
    """
    global _INSPECT
    _INSPECT = _INSPECT or _CachedInspect()
    names = ["diffusers.models.attention_processor", "diffusers.pipelines.pipeline_utils", type(pipe).__module__]
    for name in names:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "inspect", None) is not None:
            module.inspect = _INSPECT  # type: ignore[attr-defined]


def prepare(pipe: Any, settings: Any, device: str, fail_to: Callable[[Any, str], Any]) -> dict[str, str]:
    """Apply the attention check, distilled UNet weights and scheduler overrides to a loaded pipeline.

    Args:
        pipe: The pipeline (before it moves to its device).
        settings: The `vhd.synth.generators.GenerateSettings`.
        device: The device it will run on.
        fail_to: Runs a load, turning its failure into a one-line `ConfigError`.

    Returns:
        Parts loaded (``unet_weights`` -> where from), for provenance.

    Raises:
        ConfigError: Unknown backend, a CUDA-only one elsewhere, weights of another model.
    """
    loaded: dict[str, str] = {}
    if settings.attention is not None:
        if settings.attention not in ATTENTION:
            raise ConfigError(f"--attention {settings.attention!r}: choose {', '.join(ATTENTION)}")
        if settings.attention in ("flash", "efficient", "cudnn") and not device.startswith("cuda"):
            raise ConfigError(f"--attention {settings.attention} needs a CUDA GPU: use sdpa or math here")
    if settings.unet_weights is not None:
        denoiser = getattr(pipe, "unet", None)
        if denoiser is None:
            raise ConfigError("--unet-weights: this pipeline has no UNet")
        where = weights_file(settings.unet_weights, settings.local_files_only, fail_to)
        from safetensors.torch import load_file

        try:
            denoiser.load_state_dict(load_file(where), strict=True)
        except (RuntimeError, OSError, ValueError) as exc:
            raise ConfigError(
                f"--unet-weights {settings.unet_weights}: not weights of this model's UNet "
                f"({str(exc).splitlines()[0][:160]})"
            ) from None
        loaded["unet_weights"] = settings.unet_weights
    if settings.scheduler:
        scheduler = pipe.scheduler
        pipe.scheduler = type(scheduler).from_config(scheduler.config, **dict(settings.scheduler))
    return loaded


def weights_file(ident: str, local_files_only: bool, fail_to: Callable[[Any, str], Any]) -> str:
    """A local ``.safetensors`` file, or ``HUB_ID/FILE`` fetched (or found in the hub cache).

    Raises:
        ConfigError: Neither a file here nor ``HUB_ID/FILE``; the hub cannot give it.
    """
    local = Path(ident).expanduser()
    if local.is_file():
        return str(local)
    parts = ident.split("/")
    if len(parts) < 3:
        raise ConfigError(f"--unet-weights {ident!r}: give a .safetensors file or HUB_ID/FILE (no such file here)")
    from huggingface_hub import hf_hub_download

    repo, name = "/".join(parts[:2]), "/".join(parts[2:])
    return str(fail_to(lambda: hf_hub_download(repo, name, local_files_only=local_files_only), ident))


def speed_record(settings: Any, pipe: Any = None) -> dict[str, Any]:
    """The speed options in effect, for provenance (``pipe``: the loaded pipeline, for the VAE's upcast flag)."""
    found: dict[str, Any] = {}
    if settings.channels_last:
        found["channels_last"] = True
    if settings.compile:
        found["compile"] = True
    if settings.attention is not None:
        found["attention"] = settings.attention
    if settings.vae is not None:
        found["vae"] = VAES.get(settings.vae, settings.vae)
        config = getattr(getattr(pipe, "vae", None), "config", None)
        found["vae_force_upcast"] = bool(getattr(config, "force_upcast", False))
    if settings.unet_weights is not None:
        found["unet_weights"] = settings.unet_weights
    if settings.scheduler:
        found["scheduler"] = dict(sorted(settings.scheduler.items()))
    if settings.preset is not None:
        found["preset"] = settings.preset
    return found


@contextlib.contextmanager
def attention_context(attention: str | None) -> Iterator[None]:
    """Force the chosen scaled-dot-product attention kernel for a pipeline call (None, ``sdpa``: torch chooses)."""
    if attention in (None, "sdpa"):
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kernels = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "math": SDPBackend.MATH,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
    }
    with sdpa_kernel([kernels[str(attention)]]):
        yield
