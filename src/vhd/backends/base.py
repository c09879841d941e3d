"""The one interface every model backend implements.

A backend turns a list of chat messages (text and images) into an `Output`. Backends are
registered by name (see `vhd.backends.registry`) and resolved from ``BACKEND:MODEL`` specs.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from vhd.boundary import ItemFailure, is_run_fault
from vhd.errors import BackendError, BackendUnavailableError, ConfigError
from vhd.media.encoded import EncodedImage, EncodedVideo

if TYPE_CHECKING:
    from pydantic import BaseModel

OptionsT = TypeVar("OptionsT", bound="BaseModel")

Part = str | EncodedImage | EncodedVideo
"""A piece of message content: text, an encoded image, or a video clip (native video input)."""

VIDEO_INPUTS = ("frames", "native")
"""How a backend is shown videos: still frames, or one clip (``video_input`` in its table)."""


def validate_table(model: type[OptionsT], options: Mapping[str, Any], table: str) -> OptionsT:
    """A backend's ``[backends.TABLE]`` options validated with the pydantic ``model``.

    Raises:
        ConfigError: Unknown key (listing the valid ones) or a bad value, in one line.
    """
    from pydantic import ValidationError

    valid = sorted(model.model_fields)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(f"[backends.{table}] has unknown option(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "options"
        raise ConfigError(f"[backends.{table}] {where}: {err['msg']}") from None


@dataclass(frozen=True)
class Message:
    """One chat message.

    Attributes:
        role: ``system``, ``user`` or ``assistant``.
        content: Text, or a sequence of text, image and video parts in order.
    """

    role: Literal["system", "user", "assistant"]
    content: str | tuple[Part, ...]

    @property
    def parts(self) -> tuple[Part, ...]:
        """The content as a tuple of parts."""
        return (self.content,) if isinstance(self.content, str) else self.content

    @property
    def images(self) -> list[EncodedImage]:
        """The images in this message, in order."""
        return [p for p in self.parts if isinstance(p, EncodedImage)]

    @property
    def videos(self) -> list[EncodedVideo]:
        """The video clips in this message, in order."""
        return [p for p in self.parts if isinstance(p, EncodedVideo)]

    @property
    def text(self) -> str:
        """All text parts joined (images left out)."""
        return "".join(p for p in self.parts if isinstance(p, str))


@dataclass(frozen=True)
class GenerateConfig:
    """Decoding settings for one call.

    Attributes:
        temperature: Sampling temperature (0 = greedy).
        max_tokens: Cap on generated tokens.
        top_p: Nucleus sampling, when set.
        seed: Sampling seed, for backends that take one.
        logprobs: Ask for the first generated token's top log-probabilities.
        top_logprobs: How many alternatives to return with ``logprobs``.
        stop: Stop sequences.
        tag: A label for the call (the debate role); used in logs and by the scripted
            backend's rules, never sent to a model.
    """

    temperature: float = 0.5
    max_tokens: int = 500
    top_p: float | None = None
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 10
    stop: tuple[str, ...] = ()
    tag: str = ""


@dataclass
class Output:
    """What a backend returns for one call.

    Attributes:
        text: The generated text ("" when the request was rejected).
        prompt_tokens: Prompt tokens as reported (or counted) by the backend.
        completion_tokens: Generated tokens.
        latency_s: Wall time of the call, retries included.
        first_token_logprobs: Top alternatives for the first generated token as
            ``{token: logprob}``, when the backend returns them (``openai`` skips leading
            whitespace-only tokens, as Llama Guard answers with a blank line first).
        refused: The provider rejected the request or the answer on content policy.
        finish_reason: Why generation stopped, as reported: ``stop`` (the model ended its answer
            or hit a stop sequence), ``length`` (cut off by ``max_tokens``; local backends report
            it when generation reached the cap without an end-of-sequence token),
            ``content_filter``...; None when the backend does not say.
        model: The model name the backend reports.
        cached_tokens: Prompt tokens the endpoint served from its prompt cache
            (``usage.prompt_tokens_details.cached_tokens``), part of ``prompt_tokens``.
        reasoning_tokens: Hidden reasoning tokens the endpoint reported
            (``usage.completion_tokens_details.reasoning_tokens``), part of ``completion_tokens``;
            None when not reported.
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    first_token_logprobs: dict[str, float] | None = None
    refused: bool = False
    finish_reason: str | None = None
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    cached_tokens: int = 0
    reasoning_tokens: int | None = None


class Backend(abc.ABC):
    """A model that answers chat messages with text.

    Subclasses set `name` and implement `generate`. They are built as
    ``Backend(model, options)`` by the registry.

    Attributes:
        name: Registry name (``openai``, ``hf``, ``scripted``...).
        model: The model id or path after the ``BACKEND:`` prefix.
        options: Backend options from the config file (validated by the subclass).
        supports_logprobs: Whether `Output.first_token_logprobs` can be filled.
        multi_endpoint: Whether a list of config tables (``[[backends.NAME]]``, one per endpoint)
            may configure it; it then gets ``{"endpoints": [table, ...]}`` as options.
        takes_video: Whether it can send a video part (`EncodedVideo`) at all; `video_support`
            may still refuse a model that cannot.
        video_input: ``frames`` or ``native``: how this backend is shown videos (set by the registry
            from the config; `check_video_input` refuses ``native`` where it cannot work).
    """

    name: ClassVar[str] = ""
    supports_logprobs: ClassVar[bool] = False
    multi_endpoint: ClassVar[bool] = False
    takes_video: ClassVar[bool] = False

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self.options = dict(options or {})
        self.alias: str | None = None
        self.video_input = "frames"

    def video_support(self) -> str | None:
        """Why this backend (and its model) cannot take a video part, or None when it can.

        Backends that know only after loading their model (``hf``) answer after `check`.
        """
        return None if self.takes_video else f"the {self.name} backend cannot send a video to its model"

    @property
    def spec(self) -> str:
        """``backend:model`` as a user would write it."""
        return f"{self.alias or self.name}:{self.model}"

    @abc.abstractmethod
    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        """Answer one conversation.

        Args:
            messages: The conversation, system message first if any.
            config: Decoding settings.

        Returns:
            The answer with usage and timing.

        Raises:
            BackendError: The call failed; ``retryable`` tells whether to try again later.
        """

    async def check(self) -> None:  # noqa: B027 - optional hook
        """Fail fast, before any work, when the backend cannot run at all.

        Raises:
            BackendUnavailableError: With a one-line message that says how to fix it.
        """

    def precheck(self) -> None:  # noqa: B027 - optional hook
        """Fail at once on what costs nothing to check (a missing local model directory).

        Called before anything heavy is imported or loaded (the configuration's identity
        included); `check` does the full check later.

        Raises:
            BackendUnavailableError: With a one-line message that says how to fix it.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections, models and threads."""

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """Figures per endpoint this backend sent requests to (requests, errors, latency, tokens).

        Keyed by a display name without credentials; empty for backends without endpoints.
        """
        return {}

    def local_stats(self) -> dict[str, Any]:
        """Figures of a model run in this process (time preprocessing vs generating...); empty otherwise."""
        return {}

    def identity(self) -> dict[str, Any]:
        """What identifies this backend's behaviour for the configuration hash.

        Returns the spec and the options that change answers; never secrets.
        """
        return {"spec": self.spec}


def check_video_input(backend: Backend) -> None:
    """Refuse native video input, before any work, on a backend or model that cannot take a video.

    Raises:
        BackendUnavailableError: One line naming ``--video-input frames`` as the fix.
    """
    if backend.video_input != "native":
        return
    why = backend.video_support()
    if why is not None:
        table = backend.alias or backend.name
        raise BackendUnavailableError(
            f"{backend.spec}: native video input is not possible: {why}; "
            f'use --video-input frames (or video_input = "frames" in [backends.{table}])'
        )


Ask = Callable[[Backend, Sequence[Message], GenerateConfig], Awaitable["Output | BackendError"]]
"""The shape of `ask`: one call whose failure is a value."""

CallHook = Callable[[Backend, Sequence[Message], GenerateConfig, Ask], Awaitable["Output | BackendError"]]
"""A function every `ask` goes through while it is set in `CALL_HOOK`: given the call and the plain `ask`."""

CALL_HOOK: ContextVar[CallHook | None] = ContextVar("vhd_call_hook", default=None)
"""A hook around every `ask` in this context (and the tasks it starts), e.g. answering identical
calls once across two runs (`vhd.compare.policy_diff`); None (the default): calls go straight through."""


async def ask(backend: Backend, messages: Sequence[Message], config: GenerateConfig) -> Output | BackendError:
    """One call of ``backend.generate`` whose failure is a value, so one sample's failure stays its own.

    A `BackendError` is returned as it is. Anything else a backend raises for this call (a
    `RecursionError` or `KeyError` from reading a hostile reply, a bug) becomes a `BackendError`
    naming it (not retryable), the item boundary's rule (`vhd.boundary`); run faults (an
    interrupt, memory, a full disk, an unavailable backend) pass. While `CALL_HOOK` holds a hook,
    the call goes through it.
    """
    hook = CALL_HOOK.get()
    if hook is not None:
        return await hook(backend, messages, config, _ask)
    return await _ask(backend, messages, config)


async def _ask(backend: Backend, messages: Sequence[Message], config: GenerateConfig) -> Output | BackendError:
    try:
        return await backend.generate(messages, config)
    except BackendError as exc:
        return exc
    except Exception as exc:
        if is_run_fault(exc):
            raise
        return BackendError(f"{backend.spec}: {ItemFailure.of(exc).reason}", retryable=False)
