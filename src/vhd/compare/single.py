"""Single-call configurations of ``vhd compare``: one VLM call, and self-consistency.

One call uses the short or the long prompt, with or without the in-context examples before it;
self-consistency makes k calls and takes the majority vote.

Answers are cached in a small SQLite file under the output folder, keyed by (configuration
digest, sample id, repeat), so a re-run asks the model only for what is missing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.backends.base import Backend, GenerateConfig, Message, Output, ask
from vhd.errors import BackendError
from vhd.store.cache import CacheTable, JsonCache

if TYPE_CHECKING:
    from vhd.config import AnnotateConfig
    from vhd.debate.icl import ICLExample
    from vhd.media.load import LoadedSample

_ANSWERS = CacheTable("answers", (("config", "TEXT"), ("sample_id", "TEXT"), ("repeat", "INTEGER")), "outcome")


@dataclass(frozen=True)
class SampleOutcome:
    """One configuration's answer for one sample in one repeat.

    Attributes:
        harmful: The decision (None: no readable answer).
        score: P(harmful): first-token probability for one call, share of yes votes for
            self-consistency, the judge's score for the debate (None where there is none).
        prompt_tokens: Prompt tokens over every call made for the sample.
        completion_tokens: Completion tokens over every call.
        calls: Model calls made.
        cost: Dollars (0 without prices).
        error: Why there is no answer, when a call failed (not cached; retried on the next run).
    """

    harmful: bool | None
    score: float | None
    prompt_tokens: int
    completion_tokens: int
    calls: int
    cost: float = 0.0
    error: str | None = None

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "harmful": self.harmful,
            "score": self.score,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "calls": self.calls,
            "cost": self.cost,
            "error": self.error,
        }


class AnswerCache:
    """(configuration digest, sample id, repeat) -> `SampleOutcome`, in SQLite; each answer committed at once.

    The file is a `vhd.store.cache.JsonCache` with one table, ``answers``.
    """

    def __init__(self, path: Path) -> None:
        self._cache = JsonCache(path, [_ANSWERS], what="the answer cache")

    def get(self, config: str, sample_id: str, repeat: int) -> SampleOutcome | None:
        """A cached answer, or None."""
        data = self._cache.get(_ANSWERS.name, (config, sample_id, repeat))
        return None if data is None else SampleOutcome(**data)

    def put(self, config: str, sample_id: str, repeat: int, outcome: SampleOutcome) -> None:
        """Store an answer (one transaction: atomic)."""
        self._cache.put(_ANSWERS.name, (config, sample_id, repeat), outcome.to_dict())

    def close(self) -> None:
        """Close the file."""
        self._cache.close()


@dataclass(frozen=True)
class SingleSpec:
    """A single-call configuration.

    Attributes:
        name: Its row name (``single-short``, ``sc-k5``...).
        prompt: ``short`` or ``long``.
        k: Calls per sample (1: one call; more: self-consistency by majority vote).
        temperature: Sampling temperature.
        icl: Show the in-context examples before the question.
    """

    name: str
    prompt: str
    k: int
    temperature: float
    icl: bool = False


def question(prompt: str, loaded_kind: Any, n_frames: int) -> str:
    """The question text of a prompt for a kind of sample."""
    from vhd.detectors.vlm_prompts import render_prompt
    from vhd.taxonomy.taxonomy import load_taxonomy

    return render_prompt(prompt, loaded_kind, n_frames, load_taxonomy(None))  # type: ignore[arg-type]


def build_messages(spec: SingleSpec, loaded: LoadedSample, examples: Sequence[ICLExample]) -> list[Message]:
    """The conversation for one sample: the examples (as user/assistant turns) when asked, then the question."""
    from vhd.debate.engine import media_parts

    kind, images = loaded.sample.kind, loaded.images
    messages: list[Message] = []
    if spec.icl:
        for ex in examples:
            if ex.kind is kind:
                text = question(spec.prompt, ex.kind, len(ex.images))
                messages += [Message("user", (*media_parts(ex.kind, ex.images), text)), Message("assistant", ex.answer)]
    messages.append(Message("user", (*media_parts(kind, images), question(spec.prompt, kind, len(images)))))
    return messages


def vote(answers: Sequence[bool | None]) -> tuple[bool | None, float | None]:
    """Majority vote of k answers: (decision, share of yes votes among all k).

    Unreadable answers do not vote; a tie among the readable votes counts as harmful (the safe
    side, as the debate treats refusals); no readable vote gives None.
    """
    if not answers:
        return None, None
    yes = sum(a is True for a in answers)
    no = sum(a is False for a in answers)
    share = yes / len(answers)
    if yes + no == 0:
        return None, share
    return yes >= no, share


class SingleRunner:
    """Asks one backend for every (sample, repeat) of a single-call configuration, with the cache.

    Args:
        backend: The model.
        config: Annotation configuration (judge's max tokens, prices, concurrency, seed).
        examples: In-context examples (used by specs with ``icl``).
        cache: Where answers are kept.
        identity: Extra data in each configuration's cache digest (backend, prompts, examples).
    """

    def __init__(
        self,
        backend: Backend,
        config: AnnotateConfig,
        examples: Sequence[ICLExample],
        cache: AnswerCache,
        identity: dict[str, Any],
    ) -> None:
        self.backend, self.config, self.examples, self.cache = backend, config, list(examples), cache
        self.identity = identity
        self.max_tokens = config.role_settings("judge")[1]
        self.base_seed = config.debate.seed or 0

    def digest(self, spec: SingleSpec) -> str:
        """The cache key of a configuration: everything that changes its messages or decoding."""
        from vhd.debate.icl import examples_identity
        from vhd.debate.identity import digest

        icl = examples_identity(self.examples) if spec.icl else None
        data = {"spec": spec.__dict__, "max_tokens": self.max_tokens, "seed": self.base_seed, "icl": icl}
        return digest(data | self.identity)

    def _cost(self, out: Output) -> float:
        price = self.config.prices.get(self.backend.spec)
        return 0.0 if price is None else price.cost(out.prompt_tokens, out.completion_tokens, out.cached_tokens)

    async def ask(self, spec: SingleSpec, loaded: LoadedSample, repeat: int) -> SampleOutcome:
        """Answer one sample once (k calls for self-consistency); a failed call gives an error outcome."""
        from vhd.debate.score import yes_probability
        from vhd.detectors.vlm_prompts import read_binary

        messages = build_messages(spec, loaded, self.examples)
        answers: list[bool | None] = []
        prompt = completion = calls = 0
        cost = 0.0
        first_score: float | None = None
        for j in range(spec.k):
            gen = GenerateConfig(
                temperature=spec.temperature,
                max_tokens=self.max_tokens,
                seed=self.base_seed + 1000 * repeat + j,
                logprobs=spec.k == 1 and self.backend.supports_logprobs,
                tag=f"compare:{spec.name}",
            )
            out = await ask(self.backend, messages, gen)
            if isinstance(out, BackendError):
                return SampleOutcome(None, None, prompt, completion, calls, cost, error=str(out))
            calls += 1
            prompt, completion, cost = (
                prompt + out.prompt_tokens,
                completion + out.completion_tokens,
                cost + self._cost(out),
            )
            answers.append(None if out.refused else read_binary(out.text).harmful)
            if j == 0:
                first_score = yes_probability(out.first_token_logprobs)
        if spec.k == 1:
            return SampleOutcome(answers[0], first_score, prompt, completion, calls, cost)
        decision, share = vote(answers)
        return SampleOutcome(decision, share, prompt, completion, calls, cost)

    async def run(
        self,
        spec: SingleSpec,
        samples: Sequence[LoadedSample],
        repeats: int,
        on_event: Callable[[str], None],
    ) -> list[list[SampleOutcome]]:
        """Every repeat of a configuration: ``[repeat][sample]`` outcomes, cached ones reused."""
        key = self.digest(spec)
        gate = asyncio.Semaphore(self.config.concurrency)
        results: list[list[SampleOutcome | None]] = [[None] * len(samples) for _ in range(repeats)]
        todo: list[tuple[int, int]] = []
        for r in range(repeats):
            for i, loaded in enumerate(samples):
                hit = self.cache.get(key, loaded.sample.id, r)
                if hit is None:
                    todo.append((r, i))
                else:
                    results[r][i] = hit

        async def one(r: int, i: int) -> None:
            async with gate:
                outcome = await self.ask(spec, samples[i], r)
            if outcome.error is None:
                self.cache.put(key, samples[i].sample.id, r, outcome)
            results[r][i] = outcome

        if todo:
            on_event(f"{spec.name}: {len(todo)} answer(s) to ask ({repeats * len(samples) - len(todo)} cached)")
            await asyncio.gather(*(one(r, i) for r, i in todo))
        return [[o for o in row if o is not None] for row in results]
