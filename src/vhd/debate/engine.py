"""One debate: affirmative and negative debaters over rounds, then the judge.

Turn order for R rounds: A1, N1, A2, N2, ..., AR, NR, judge. Every speaker sees the question,
the sample (the image, or the numbered frames) and every argument made before its turn. The
judge's messages start with a prefix that is identical for every sample of a kind (system
prompt, then the in-context examples) so that provider prompt caching applies.

Images are content, never instructions: every role's prompt says so, and each earlier argument
is quoted between ``<argument id=NONCE>`` and ``</argument id=NONCE>`` lines
(`vhd.debate.prompts.quote_argument`), with a nonce drawn from the debate seed and the sample,
so a debater repeating an instruction it read in the image cannot close its quote and forge the
judge's turn. The nonce is the same on every run of a configuration, so prompts are reproducible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from vhd.backends.base import Backend, GenerateConfig, Message, Output, Part, ask
from vhd.config import AnnotateConfig
from vhd.debate.icl import ICLExample
from vhd.debate.parse import is_refusal, parse_verdict, read_severity
from vhd.debate.prompts import Prompts, quote_argument
from vhd.debate.score import yes_probability
from vhd.errors import BackendError
from vhd.media.encoded import EncodedImage, EncodedVideo
from vhd.records import Kind, Role, Status, Turn, Usage, Verdict

_SIDE = {Role.AFFIRMATIVE: "affirmative", Role.NEGATIVE: "negative"}
_SPEAKER = {
    Role.AFFIRMATIVE: "Affirmative debater",
    Role.NEGATIVE: "Negative debater",
    Role.JUDGE: "Judge",
}
DECLINED = "(declined to answer)"


@dataclass
class DebateResult:
    """What one debate produced.

    Attributes:
        verdict: The decision (status error when a call failed).
        turns: Every turn made, in order (partial when a call failed).
        usage: Calls, tokens and cost spent.
        error: The failure, when status is error.
        retryable: Whether the failure may go away on a later try.
    """

    verdict: Verdict
    turns: list[Turn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    retryable: bool = True


def argument_nonce(seed: int | None, images: Sequence[EncodedImage | EncodedVideo]) -> str:
    """The id of a debate's argument delimiters: 16 hex digits from the debate seed and the sample.

    The same seed and sample always give the same id (prompts are reproducible, caches hit);
    another sample or seed gives another, so no id is known before its debate starts.
    """
    h = hashlib.sha256(f"vhd-argument-delimiter:{seed}".encode())
    for image in images:
        h.update(image.sha256.encode())
    return h.hexdigest()[:16]


def media_parts(kind: Kind, images: Sequence[EncodedImage]) -> list[Part]:
    """Content parts that show a sample: the image, or each frame after its number."""
    if kind is Kind.IMAGE:
        return ["The image:", *images]
    parts: list[Part] = [f"The video, as {len(images)} frames in chronological order:"]
    for i, image in enumerate(images, start=1):
        parts += [f"Frame {i}:", image]
    return parts


def clip_parts(clip: EncodedVideo) -> list[Part]:
    """Content parts that show a video as one clip (native video input)."""
    return [f"The video, as a clip of {clip.duration_s:.1f} seconds:", clip]


@dataclass
class DebateState:
    """One sample's debate in progress.

    Attributes:
        kind: image or video.
        images: The image, or the frames.
        shown: The content parts that show the sample.
        nonce: The argument delimiter id (`argument_nonce`).
        clip: The video as one clip, for the roles whose backend takes it (native video input).
        turns: Turns made so far.
        usage: Calls, tokens and cost so far.
        step: Calls answered so far (``2 * rounds`` means the judge is next).
        boost: Multiplier of the next call's token cap: above 1 while a call cut off by the
            token limit is asked again (`Debate` ``retry_budget``).
        result: Set when the debate is over (the judge answered, or a call failed).
    """

    kind: Kind
    images: Sequence[EncodedImage]
    shown: list[Part]
    nonce: str
    turns: list[Turn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    step: int = 0
    boost: int = 1
    result: DebateResult | None = None
    clip: EncodedVideo | None = None

    def shown_to(self, backend: Backend) -> tuple[list[Part], bool]:
        """The parts a role's backend is shown, and whether they are the clip."""
        if self.clip is not None and backend.video_input == "native":
            return clip_parts(self.clip), True
        return self.shown, False


@dataclass(frozen=True)
class Call:
    """One model call a debate needs next.

    Attributes:
        role: Who speaks.
        round: The round (the judge's is the last round).
        messages: The conversation to send.
        config: Decoding settings of the role.
        backend: The role's backend.
    """

    role: Role
    round: int
    messages: tuple[Message, ...]
    config: GenerateConfig
    backend: Backend


def cut_off_unusable(role: Role, out: Output) -> bool:
    """Whether a reply was cut off by the token limit before it said anything usable.

    A judge's reply cut off (``finish_reason`` ``length``) is never read as a verdict; a debater's
    counts only when it is empty (a long argument cut at ``debater_max_tokens`` is still an
    argument). A provider's refusal is a refusal whatever the finish reason.
    """
    if out.refused or out.finish_reason != "length":
        return False
    return role is Role.JUDGE or not out.text.strip()


def truncated_reason(turn: Turn, max_tokens: int) -> str:
    """The one-line reason of a ``truncated`` outcome: who was cut off, at which cap."""
    who = "the judge" if turn.role is Role.JUDGE else f"the {turn.role.value} debater in round {turn.round}"
    hidden = f", {turn.reasoning_tokens} of them reasoning" if turn.reasoning_tokens else ""
    empty = "" if turn.text.strip() else " with no text"
    return f"truncated: {who} hit the token limit of {max_tokens}{empty} ({turn.completion_tokens} tokens{hidden})"


class Debate:
    """Runs debates with fixed roles, prompts and in-context examples.

    Args:
        backends: The backend for each role (the same object may serve several roles).
        config: The annotation configuration (rounds, temperatures, token caps, prices).
        prompts: The templates.
        examples: In-context examples for the judge (each used for samples of its kind).
        on_call: Called with the usage of every answered call as it comes (a run's ledger).
        retry_budget: A call cut off by the token limit without a usable reply (the judge's, or an
            empty argument) is asked once more with its cap multiplied by this (1: not asked
            again; the debate ends ``truncated``).
    """

    def __init__(
        self,
        backends: Mapping[Role, Backend],
        config: AnnotateConfig,
        prompts: Prompts,
        examples: Sequence[ICLExample] = (),
        on_call: Callable[[Usage], None] | None = None,
        retry_budget: int = 1,
    ) -> None:
        self.backends = dict(backends)
        self.retry_budget = max(1, retry_budget)
        self.on_call = on_call
        self.config = config
        self.prompts = prompts
        self.rounds = config.debate.rounds
        self._gen: dict[Role, GenerateConfig] = {}
        for role in Role:
            temperature, max_tokens = config.role_settings(role.value)
            self._gen[role] = GenerateConfig(
                temperature=temperature,
                max_tokens=max_tokens,
                seed=config.debate.seed,
                logprobs=role is Role.JUDGE and config.debate.judge_logprobs and backends[role].supports_logprobs,
                tag=role.value,
            )
        self._system: dict[tuple[Role, Kind, int, float | None], str] = {}
        self._judge_prefix: dict[tuple[Kind, int, float | None], tuple[Message, ...]] = {}
        self.examples = list(examples)

    @property
    def video_mode(self) -> str:
        """What a video sample must carry for this debate's roles: ``frames``, ``native`` (a clip) or ``both``."""
        modes = {b.video_input for b in self.backends.values()}
        return modes.pop() if len(modes) == 1 else "both"

    def system_prompt(self, role: Role, kind: Kind, n_frames: int, clip_s: float | None = None) -> str:
        """The system prompt of a role for a kind of sample (cached); ``clip_s``: a clip of that length."""
        key = (role, kind, n_frames, clip_s)
        if key not in self._system:
            self._system[key] = self.prompts.system_prompt(
                role.value, kind.value, rounds=self.rounds, n_frames=n_frames, clip_s=clip_s
            )
        return self._system[key]

    def judge_prefix(self, kind: Kind, n_frames: int, clip_s: float | None = None) -> tuple[Message, ...]:
        """System prompt plus in-context examples: the same objects for every sample of a kind.

        In-context examples are shown as frames, also to a judge shown the sample as a clip.
        """
        key = (kind, n_frames, clip_s)
        if key not in self._judge_prefix:
            messages = [Message("system", self.system_prompt(Role.JUDGE, kind, n_frames, clip_s))]
            question = self.prompts.render("example_turn", medium=kind.value)
            for example in self.examples:
                if example.kind is kind:
                    content = (*media_parts(kind, example.images), question)
                    messages += [Message("user", content), Message("assistant", example.answer)]
            self._judge_prefix[key] = tuple(messages)
        return self._judge_prefix[key]

    def transcript(self, turns: Sequence[Turn], nonce: str = "") -> str:
        """Earlier arguments as the next speaker reads them, each quoted (`quote_argument`).

        Args:
            turns: The arguments so far.
            nonce: The delimiter id of this debate (`argument_nonce`).
        """
        if not turns:
            return self.prompts.render("transcript_empty")
        nonce = nonce or argument_nonce(self.config.debate.seed, ())
        blocks = [
            f"{_SPEAKER[t.role]}, round {t.round}:\n{quote_argument(DECLINED if t.refused else t.text, nonce)}"
            for t in turns
        ]
        return "\n\n".join(blocks)

    def _cost(self, spec: str, out: Output) -> float:
        price = self.config.prices.get(spec)
        if price is None:
            return 0.0
        return price.cost(out.prompt_tokens, out.completion_tokens, out.cached_tokens)

    def start(self, kind: Kind, images: Sequence[EncodedImage], clip: EncodedVideo | None = None) -> DebateState:
        """A debate of one sample, before its first call (drive it with `next_call` and `accept`).

        Args:
            kind: image or video.
            images: The image, or the video's frames (may be empty when every role takes the clip).
            clip: The video as one clip, shown to the roles whose backend has ``video_input = "native"``.
        """
        media: list[EncodedImage | EncodedVideo] = [*images, clip] if clip is not None else list(images)
        nonce = argument_nonce(self.config.debate.seed, media)
        return DebateState(kind, images, media_parts(kind, images), nonce, clip=clip)

    @property
    def calls_per_debate(self) -> int:
        """Calls in a debate that does not fail: two per round, then the judge."""
        return 2 * self.rounds + 1

    @property
    def most_calls(self) -> int:
        """The most calls one debate can make (what a call cap must reserve for it).

        `calls_per_debate`, each asked twice when ``retry_budget`` asks a cut-off reply again.
        """
        return self.calls_per_debate * (2 if self.retry_budget > 1 else 1)

    def next_call(self, state: DebateState) -> Call | None:
        """The next call of a debate (A1, N1, ..., AR, NR, judge), or None when it is over."""
        if state.result is not None:
            return None
        n = len(state.images)
        kind = state.kind
        if state.step < 2 * self.rounds:
            round_ = state.step // 2 + 1
            role = (Role.AFFIRMATIVE, Role.NEGATIVE)[state.step % 2]
            shown, native = state.shown_to(self.backends[role])
            clip_s = state.clip.duration_s if native and state.clip is not None else None
            text = self.prompts.render(
                "debater_turn",
                medium=kind.value,
                transcript=self.transcript(state.turns, state.nonce),
                round=round_,
                rounds=self.rounds,
                side=_SIDE[role],
            )
            messages: tuple[Message, ...] = (
                Message("system", self.system_prompt(role, kind, n, clip_s)),
                Message("user", (*shown, text)),
            )
            return Call(role, round_, messages, self._settings(role, state), self.backends[role])
        transcript = self.transcript(state.turns, state.nonce)
        final = self.prompts.render("judge_turn", medium=kind.value, transcript=transcript)
        shown, native = state.shown_to(self.backends[Role.JUDGE])
        clip_s = state.clip.duration_s if native and state.clip is not None else None
        messages = (*self.judge_prefix(kind, n, clip_s), Message("user", (*shown, final)))
        return Call(Role.JUDGE, self.rounds, messages, self._settings(Role.JUDGE, state), self.backends[Role.JUDGE])

    def _settings(self, role: Role, state: DebateState) -> GenerateConfig:
        gen = self._gen[role]
        return gen if state.boost == 1 else replace(gen, max_tokens=gen.max_tokens * state.boost)

    def accept(self, state: DebateState, call: Call, reply: Output | BackendError) -> None:
        """Record the answer (or the failure) of a debate's current call and move it on.

        A failure ends the debate with status error and the turns made so far; the judge's answer
        ends it with the verdict; a reply cut off by the token limit without anything usable
        (`cut_off_unusable`) ends it ``truncated``, after one more try with a larger cap when
        ``retry_budget`` says so (the debate then stays at the same step). When the debate is
        over, ``state.result`` is set.
        """
        if isinstance(reply, BackendError):
            verdict = Verdict(None, "", status=Status.ERROR)
            state.result = DebateResult(verdict, state.turns, state.usage, error=str(reply), retryable=reply.retryable)
            return
        role, out = call.role, reply
        usage = Usage(
            1,
            out.prompt_tokens,
            out.completion_tokens,
            self._cost(call.backend.spec, out),
            cached_tokens=out.cached_tokens,
        )
        state.usage.add(usage)
        if self.on_call is not None:
            self.on_call(usage)
        cut_off = cut_off_unusable(role, out)
        if cut_off and state.boost == 1 and self.retry_budget > 1:
            state.boost = self.retry_budget  # the same call again, with a larger budget
            return
        state.boost = 1
        refused = out.refused or (role is not Role.JUDGE and is_refusal(out.text))
        turn = Turn(
            role,
            call.round,
            out.text,
            out.prompt_tokens,
            out.completion_tokens,
            out.latency_s,
            refused,
            call.backend.spec,
            finish_reason=out.finish_reason,
            reasoning_tokens=out.reasoning_tokens,
        )
        state.turns.append(turn)
        state.step += 1
        if cut_off:  # neither a verdict nor a refusal: its own outcome, and no call is spent after it
            verdict = Verdict(None, truncated_reason(turn, call.config.max_tokens), status=Status.TRUNCATED)
            state.result = DebateResult(verdict, state.turns, state.usage)
        elif role is Role.JUDGE:
            state.result = DebateResult(self.decide(state.turns, out), state.turns, state.usage)

    async def run(self, kind: Kind, images: Sequence[EncodedImage], clip: EncodedVideo | None = None) -> DebateResult:
        """Debate one sample.

        Args:
            kind: image or video.
            images: The image, or the video's frames in chronological order.
            clip: The video as one clip (`vhd.media.clip.video_content`), shown to the roles whose
                backend takes videos natively; the others see ``images``.

        Returns:
            The verdict with every turn; a failed model call gives status error (with the turns
            made so far) rather than raising.
        """
        state = self.start(kind, images, clip)
        while (call := self.next_call(state)) is not None:
            reply = await ask(call.backend, call.messages, call.config)
            self.accept(state, call, reply)
        assert state.result is not None
        return state.result

    def decide(self, turns: Sequence[Turn], judge_out: Output) -> Verdict:
        """Turn the judge's answer and any refusals into a verdict.

        With a policy's severity scale, a harmful verdict carries the level the judge named
        (`Verdict.severity`); a level the scale lacks makes the verdict unparsed (the reply is
        kept in the judge's turn).
        """
        score = yes_probability(judge_out.first_token_logprobs)
        parsed = parse_verdict(judge_out.text)
        judge_refused = judge_out.refused or (parsed.harmful is None and is_refusal(judge_out.text))
        debater_refusals = [t for t in turns if t.role is not Role.JUDGE and t.refused]
        if parsed.harmful is True:
            policy = self.prompts.policy
            given = read_severity(judge_out.text) if policy is not None and policy.severity else None
            if policy is None or given is None:
                return Verdict(True, parsed.reason, score=score, refused=False)
            level = policy.severity_level(given)
            if level is None:  # a level the scale lacks: not guessed; the judge's reply stays in the turns
                scale = ", ".join(policy.severity_names)
                reason = f"unknown severity level {given!r} (the policy's scale: {scale})"
                return Verdict(None, reason, score=score, status=Status.UNPARSED)
            return Verdict(True, parsed.reason, score=score, refused=False, severity=level)
        if self.config.debate.refusal_is_harmful and (judge_refused or debater_refusals):
            if judge_refused:
                who = "the judge" if not judge_out.refused else "the provider (content policy, judge's call)"
            else:
                first = debater_refusals[0]
                who = f"the {first.role.value} debater in round {first.round}"
            turns[-1].refused = judge_refused
            return Verdict(True, f"refusal by {who}", score=score, status=Status.REFUSED, refused=True)
        if parsed.harmful is False:
            return Verdict(False, parsed.reason, score=score)
        if judge_refused:
            turns[-1].refused = True
            return Verdict(None, "refusal by the judge", score=score, status=Status.REFUSED, refused=True)
        return Verdict(None, "", score=score, status=Status.UNPARSED)
