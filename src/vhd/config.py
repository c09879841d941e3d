"""Annotation configuration: defaults (the paper's), config files (TOML or YAML), flags.

Precedence, highest first: command-line flags / keyword arguments; the ``VHD_*`` environment
variables (``VHD_MODEL`` for the model of every role, ``VHD_CONCURRENCY``; ``VHD_STORE`` and
``VHD_CONFIG`` give the ``--store`` / ``--config`` flags their defaults); the ``--config`` file;
the user config file (``config.toml`` in the platform's config folder, see `user_config_path`;
ignored when ``VHD_NO_USER_CONFIG=1``); the defaults below. The two files are merged table by
table, key by key. `config_sources` says where each value came from (``vhd config show``).
Endpoints, API-key variable names and per-role options live in the config files, never on argv.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vhd.defaults import DEFAULT_MODEL as DEFAULT_MODEL  # re-exported: the help needs it without pydantic
from vhd.defaults import MODEL_ENV as MODEL_ENV
from vhd.errors import ConfigError

CONCURRENCY_ENV = "VHD_CONCURRENCY"
"""Environment variable for ``concurrency`` (below flags, above the files)."""

NO_USER_CONFIG_ENV = "VHD_NO_USER_CONFIG"
"""Set to 1 to ignore the user config file (tests and CI do)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoleConfig(_Strict):
    """Per-role settings (``[roles.affirmative]``, ``[roles.negative]``, ``[roles.judge]``)."""

    model: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1)


class DebateConfig(_Strict):
    """How the debate runs (``[debate]``). Defaults follow the paper and the authors' code."""

    rounds: int = Field(default=2, ge=1, le=10)
    temperature: float = Field(default=0.5, ge=0.0, le=2.0)
    debater_max_tokens: int = Field(default=500, ge=1)
    judge_max_tokens: int = Field(default=100, ge=1)
    refusal_is_harmful: bool = True
    """A refusal by a debater, by the judge, or by the provider makes the sample harmful."""
    judge_logprobs: bool = True
    """Ask the judge's backend for first-token log-probabilities (the score)."""
    seed: int | None = None


class MediaConfig(_Strict):
    """What the models see (``[media]``)."""

    max_side: int = Field(default=1024, ge=32)
    format: Literal["jpeg", "png", "webp"] = "jpeg"
    quality: int = Field(default=90, ge=1, le=100)
    frames: int = Field(default=5, ge=1, le=64)
    first_frames: int = Field(default=4000, ge=1)
    max_pixels: int = Field(default=64_000_000, ge=1)
    max_file_mb: float = Field(default=50.0, gt=0)
    max_frame_pixels: int = Field(default=7680 * 4320, ge=1)
    """Largest width x height of a video or animation frame (8K UHD by default), checked before decoding."""
    decode_memory_mb: float = Field(default=2048.0, gt=0)
    """Memory the decodes of one process may hold at once, shared by all its workers (`vhd.media.budget`)."""
    video_input: Literal["frames", "native"] = "frames"
    """How videos are shown to the models: ``frames`` (``frames`` still frames of the first
    ``first_frames``, the VHD11K protocol) or ``native`` (one MP4 clip of the first ``clip_seconds``,
    to backends that take a video). A ``[backends.NAME]`` table's own ``video_input`` beats it;
    ``--video-input`` beats both."""
    clip_seconds: float = Field(default=30.0, gt=0, le=3600)
    """Longest span one clip covers (native video input): a whole video is shown as its first this-many seconds."""
    clip_fps: float = Field(default=2.0, gt=0, le=60)
    """Most frames a second a clip keeps."""
    clip_max_side: int = Field(default=448, ge=16)
    """Longest side of a clip's frames, in pixels."""
    clip_max_mb: float = Field(default=8.0, gt=0)
    """Largest clip sent; a clip over it is that video's error (lower ``clip_fps`` or ``clip_max_side``)."""


VIDEO_KEYS = frozenset({"video_input", "clip_seconds", "clip_fps", "clip_max_side", "clip_max_mb"})
"""The ``[media]`` keys of native video input: left out of a configuration's identity while every
role is shown frames, so the VHD11K protocol keeps its configuration hash."""


class VideoConfig(_Strict):
    """How videos are looked at (``[video]``): one verdict from a few frames, or segments in time."""

    segments: bool = False
    """Split every video into segments and judge each (`vhd annotate --segments`); off: the VHD11K
    protocol (a few frames of the first ``[media] first_frames``, one verdict)."""
    detect: Literal["shots", "windows"] = "shots"
    """``shots``: cut at hard cuts, bounded by the lengths below; ``windows``: fixed windows."""
    min_segment_s: float = Field(default=1.0, ge=0)
    max_segment_s: float = Field(default=20.0, gt=0)
    window_s: float = Field(default=10.0, gt=0)
    cut_threshold: float = Field(default=0.3, gt=0, le=1)
    """Colour-histogram difference between two frames that counts as a hard cut."""
    frames_per_segment: int = Field(default=3, ge=1, le=64)
    min_harmful_segments: int = Field(default=1, ge=1)
    """The video is harmful when at least this many segments are (and they last ``min_harmful_s``)."""
    min_harmful_s: float = Field(default=0.0, ge=0)
    """...and when its harmful segments last at least this many seconds together."""
    max_calls_per_video: int | None = Field(default=None, ge=1)
    """Model calls one video may spend, screens and the cascade's stage calls included: a flagged
    segment whose debate would pass it keeps its screen verdict, and once not even a screen fits,
    the rest of the video is not judged (the verdict says so)."""
    max_segments_per_video: int | None = Field(default=500, ge=1)
    """Most segments one video is cut into (None: no bound but its length's, one segment per second
    on average). Past half of it the segments' lengths double, and again past each half of what
    is left, so a long video is covered to its end with coarser segments (`vhd.media.segments`)."""


class Price(_Strict):
    """USD per million tokens for one model spec (``[prices."openai:gpt-4o"]``)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    """Price of prompt tokens the endpoint served from its prompt cache (OpenAI bills them at a
    discount); without it they cost ``input``."""

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """Dollars for one call's tokens (cached prompt tokens at ``cached_input`` when set)."""
        cached = min(max(cached_tokens, 0), prompt_tokens) if self.cached_input is not None else 0
        fresh = prompt_tokens - cached
        return (fresh * self.input + cached * (self.cached_input or 0.0) + completion_tokens * self.output) / 1e6


class AnnotateConfig(_Strict):
    """Everything `vhd.annotate` needs besides the inputs and the store."""

    model: str | None = None
    affirmative: str | None = None
    negative: str | None = None
    debaters: str | None = None
    judge: str | None = None
    roles: dict[Literal["affirmative", "negative", "judge"], RoleConfig] = Field(default_factory=dict)
    debate: DebateConfig = DebateConfig()
    media: MediaConfig = MediaConfig()
    video: VideoConfig = VideoConfig()
    prompts: dict[str, str] = Field(default_factory=dict)
    icl: str | None = None
    """In-context examples: a CSV/YAML file or a folder holding one (see `vhd.debate.icl`)."""
    policy: str | None = None
    """The moderation policy file (YAML or TOML, `vhd.policy`); None: the packaged default (VHD11K)."""
    backends: dict[str, dict[str, Any] | list[dict[str, Any]]] = Field(default_factory=dict)
    """``[backends.NAME]`` tables, or lists of tables (``[[backends.NAME]]``: one per endpoint)."""
    prices: dict[str, Price] = Field(default_factory=dict)
    concurrency: int = Field(default=16, ge=1, le=4096)
    lease_seconds: float = Field(default=60.0, gt=0, le=86400)
    """How long a sample stays leased to a run after the run last renewed it (every quarter of
    this while it works): another run on the same store skips it meanwhile. A run that died
    leaves its samples to others after this long (at once to a run on the same machine)."""
    c2pa: dict[Literal["cert", "key", "alg", "tsa_url", "trust_anchors", "user_anchors"], str] = Field(
        default_factory=dict
    )
    """``[c2pa]``: the certificate `vhd generate` signs Content Credentials with (``cert``: PEM chain,
    ``key``: PEM private key, ``alg``: es256 by default, ``tsa_url``); none: a self-signed test one.
    ``trust_anchors`` (the C2PA trust list: a PEM file or folder) and ``user_anchors`` (your own CAs):
    what a manifest's signer must chain to before `vhd ingest` and ``vhd fetch --store`` act on its
    claims (`vhd.media.credentials`)."""
    base_dir: str | None = None
    """Folder that relative paths in the config file resolve against (set when loading)."""

    def role_model(self, role: str) -> str:
        """The model spec a role uses, after every override."""
        debater = role in ("affirmative", "negative")
        explicit = getattr(self, role)
        role_cfg = self.roles.get(role)  # type: ignore[call-overload]
        for candidate in (
            explicit,
            self.debaters if debater else None,
            role_cfg.model if role_cfg else None,
            self.model,
            os.environ.get(MODEL_ENV) or None,
        ):
            if candidate:
                return str(candidate)
        return DEFAULT_MODEL

    def role_settings(self, role: str) -> tuple[float, int]:
        """``(temperature, max_tokens)`` for a role."""
        role_cfg = self.roles.get(role) or RoleConfig()  # type: ignore[call-overload]
        default_tokens = self.debate.judge_max_tokens if role == "judge" else self.debate.debater_max_tokens
        temperature = role_cfg.temperature if role_cfg.temperature is not None else self.debate.temperature
        return temperature, role_cfg.max_tokens or default_tokens

    def check_max_cost(self, max_cost: float | None) -> None:
        """Refuse a budget that could not be kept, before any work.

        Args:
            max_cost: The ``--max-cost`` in dollars, or None for no budget.

        Raises:
            ConfigError: Not a positive finite amount, or a role's model has no ``[prices]``
                entry (its calls would count as $0 and the budget would never stop the run).
        """
        if max_cost is None:
            return
        if not (math.isfinite(max_cost) and max_cost > 0):
            raise ConfigError(f"--max-cost {max_cost:g} must be a positive number of dollars, e.g. --max-cost 5")
        roles = ("affirmative", "negative", "judge")
        missing = [spec for spec in dict.fromkeys(self.role_model(r) for r in roles) if spec not in self.prices]
        if missing:
            raise ConfigError(
                f"--max-cost needs a price for every model, and {', '.join(missing)} has none: add "
                f'[prices."{missing[0]}"] with input = ... and output = ... (USD per million tokens) '
                "to a TOML config file and pass it with --config"
            )

    def resolve_path(self, value: str) -> Path:
        """Resolve a path from the config file against its folder."""
        path = Path(value).expanduser()
        if not path.is_absolute() and self.base_dir:
            path = Path(self.base_dir) / path
        return path

    def with_overrides(self, **values: Any) -> AnnotateConfig:
        """Return a copy with the non-None values replaced (flags beat the file)."""
        changes = {k: v for k, v in values.items() if v is not None}
        if not changes:
            return self
        data = self.model_dump()
        if "model" in changes:  # a --model flag beats the file's per-role models as well
            data["roles"] = {role: {**cfg, "model": None} for role, cfg in data["roles"].items()}
        try:
            return AnnotateConfig.model_validate(data | changes)
        except ValidationError as exc:
            raise ConfigError(_first_error(exc)) from None


class ModelOverrides(TypedDict, total=False):
    """Which models play which role, for one call: the keys every judging entry point takes.

    ``vhd.annotate(..., model="openai:gpt-4o")``, ``vhd.compare.compare(..., judge=...)`` and the
    rest take these as keyword arguments (``**overrides: Unpack[ModelOverrides]``); None leaves
    the configuration's value. Each changes the configuration hash.
    """

    model: str | None
    """``BACKEND:MODEL`` for every role (it also clears the file's per-role models)."""
    affirmative: str | None
    """The affirmative debater's model."""
    negative: str | None
    """The negative debater's model."""
    debaters: str | None
    """Both debaters' model."""
    judge: str | None
    """The judge's model."""
    icl: str | os.PathLike[str] | None
    """In-context examples for the judge (a file or folder)."""
    concurrency: int | None
    """Samples in flight at once."""


class ConfigOverrides(ModelOverrides, total=False):
    """`ModelOverrides`, the round count, the video settings and the policy: ``vhd.annotate``'s keywords."""

    rounds: int | None
    """Debate rounds."""
    segments: bool | None
    """Judge videos segment by segment (``[video] segments``)."""
    max_calls_per_video: int | None
    """Model calls one segmented video may spend (``[video] max_calls_per_video``)."""
    video_input: Literal["frames", "native"] | None
    """How every backend is shown a video (``--video-input``): beats ``[media]`` and each
    ``[backends.NAME]`` table's ``video_input``."""
    policy: str | os.PathLike[str] | None
    """The moderation policy file (`vhd.policy`)."""


def apply_overrides(
    config: AnnotateConfig | str | os.PathLike[str] | None, overrides: ConfigOverrides | ModelOverrides
) -> AnnotateConfig:
    """The configuration a call runs with: the file (or object, or the default) with ``overrides`` applied.

    Raises:
        ConfigError: An unreadable config file or a bad value.
        TypeError: A key that is no override (a misspelt keyword argument).
    """
    unknown = sorted(set(overrides) - set(ConfigOverrides.__annotations__))
    if unknown:
        valid = ", ".join(ConfigOverrides.__annotations__)
        raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}: the model settings are {valid}")
    path = None if config is None or isinstance(config, AnnotateConfig) else os.fspath(config)
    cfg = config if isinstance(config, AnnotateConfig) else load_config(path)
    values: dict[str, Any] = dict(overrides)
    rounds = values.pop("rounds", None)
    video_input = values.pop("video_input", None)
    if video_input is not None:
        cfg = with_video_input(cfg, video_input)
    if values.get("icl") is not None:
        values["icl"] = str(values["icl"])
    if values.get("policy") is not None:  # a flag's path is the caller's, not the config file's
        values["policy"] = str(Path(values["policy"]).expanduser().resolve())
    if rounds is not None:
        values["debate"] = cfg.debate.model_copy(update={"rounds": rounds}).model_dump()
    video = {k: values.pop(k) for k in ("segments", "max_calls_per_video") if values.get(k) is not None}
    for key in ("segments", "max_calls_per_video"):
        values.pop(key, None)
    if video:
        values["video"] = {**cfg.video.model_dump(), **video}
    return cfg.with_overrides(**values)


def with_video_input(config: AnnotateConfig, mode: str) -> AnnotateConfig:
    """``config`` with every backend shown videos as ``mode`` (``frames`` or ``native``).

    ``[media] video_input`` is set and each ``[backends.NAME]`` table's own ``video_input`` removed.

    Raises:
        ConfigError: Unknown mode.
    """
    if mode not in ("frames", "native"):
        raise ConfigError(f"unknown video input {mode!r}: choose frames or native")
    tables: dict[str, Any] = {}
    for name, table in config.backends.items():
        if isinstance(table, list):
            tables[name] = [{k: v for k, v in t.items() if k != "video_input"} for t in table]
        else:
            tables[name] = {k: v for k, v in table.items() if k != "video_input"}
    media = config.media.model_copy(update={"video_input": mode})
    return config.model_copy(update={"media": media, "backends": tables})


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "config"
    return f"invalid configuration at {where}: {err['msg']}"


def user_config_path() -> Path:
    """Where the user config file lives.

    ``config.toml`` in the platform's config folder for vhd (``~/.config/vhd/config.toml`` on Linux,
    honouring ``XDG_CONFIG_HOME``).
    """
    import platformdirs

    return Path(platformdirs.user_config_dir("vhd", appauthor=False)) / "config.toml"


def _user_config_active() -> Path | None:
    if os.environ.get(NO_USER_CONFIG_ENV, "") not in ("", "0"):
        return None
    try:
        path = user_config_path()
    except ImportError:  # platformdirs missing: no user file, as if it did not exist
        return None
    return path if path.is_file() else None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a TOML or YAML config file into a mapping (not validated), with its ``base_dir``.

    Raises:
        ConfigError: Missing or unreadable file, syntax error, or not a table at the top level.
    """
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror or exc}") from None
    try:
        if p.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            import tomllib

            data = tomllib.loads(text)
    except Exception as exc:
        raise ConfigError(f"cannot parse config file {p}: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a table/mapping at the top level")
    data.setdefault("base_dir", str(p.resolve().parent))
    return data


def merge_tables(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    """``high`` over ``low``, tables merged key by key (a value that is not a table replaces)."""
    out = dict(low)
    for key, value in high.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_tables(out[key], value)
        else:
            out[key] = value
    return out


def _env_layer() -> dict[str, Any]:
    raw = os.environ.get(CONCURRENCY_ENV, "").strip()
    if not raw:
        return {}
    try:
        return {"concurrency": int(raw)}
    except ValueError:
        raise ConfigError(f"{CONCURRENCY_ENV}={raw!r} must be a whole number, e.g. {CONCURRENCY_ENV}=8") from None


def config_layers(path: str | Path | None) -> list[tuple[str, dict[str, Any]]]:
    """The configuration's layers, lowest first, as ``(source name, mapping)``.

    The user file, the ``--config`` file and the environment, each present only when it gives something.
    """
    layers: list[tuple[str, dict[str, Any]]] = []
    user = _user_config_active()
    if user is not None:
        layers.append((f"user config {user}", read_config_file(user)))
    if path is not None:
        layers.append((f"--config {Path(path).expanduser()}", read_config_file(path)))
    env = _env_layer()
    if env:
        layers.append((f"env {CONCURRENCY_ENV}", env))
    return layers


def load_config(path: str | Path | None) -> AnnotateConfig:
    """Read the configuration: defaults, user file, ``--config`` file, ``VHD_CONCURRENCY``.

    Each layer is merged over the one before it, tables key by key; ``path`` is TOML or YAML.

    Raises:
        ConfigError: Missing or unreadable file, syntax error, unknown key or bad value; the
            message names the file and the key.
    """
    data: dict[str, Any] = {}
    for source, layer in config_layers(path):
        data = merge_tables(data, layer)
        try:
            AnnotateConfig.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"{source}: {_first_error(exc)}") from None
    return AnnotateConfig.model_validate(data)


def config_sources(path: str | Path | None) -> list[tuple[str, Any, str]]:
    """Every setting as ``(dotted key, value, where it came from)`` (``vhd config show``).

    The source is ``default``, ``user config FILE``, ``--config FILE`` or ``env VHD_...``; the
    model of the roles reports ``env VHD_MODEL`` when that variable decides it.
    """
    layers = config_layers(path)
    final = load_config(path).model_dump(mode="json")
    final.pop("base_dir", None)
    flat = flatten_keys(final)
    origin: dict[str, str] = {}
    for source, layer in layers:
        for key in flatten_keys({k: v for k, v in layer.items() if k != "base_dir"}):
            origin[key] = source
    rows = [(key, value, _origin_of(key, origin)) for key, value in sorted(flat.items())]
    if final.get("model") is None:  # what every role falls back to
        env_model = os.environ.get(MODEL_ENV)
        model = (env_model, f"env {MODEL_ENV}") if env_model else (DEFAULT_MODEL, "default")
        rows = [(k, *model) if k == "model" else (k, v, s) for k, v, s in rows]
    return rows


def _origin_of(key: str, origin: dict[str, str]) -> str:
    while key:
        if key in origin:
            return origin[key]
        key = key.rpartition(".")[0]
    return "default"


def flatten_keys(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one mapping of dotted keys (``debate.rounds``); other values as they are."""
    if not isinstance(data, dict) or (prefix and not data):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(flatten_keys(value, f"{prefix}.{key}" if prefix else str(key)))
    return out
