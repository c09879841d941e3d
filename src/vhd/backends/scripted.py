"""A deterministic backend that answers from rules: for tests, demos and dry runs.

It never calls a model. The model part of the spec names a script: ``scripted:demo`` (built in)
or ``scripted:path/to/script.yaml`` (YAML or JSON)::

    default: "No, nothing harmful is shown."
    rules:
      - when: {tag: judge, image: "3fa9"}      # every condition must hold
        reply: "Yes, violence."
        logprobs: {"Yes": -0.05, "No": -3.0}
      - when: {tag: affirmative, text: "round 2"}
        reply: "1. The knife is pointed at a person."
      - when: {tag: judge}
        fail: 2                                 # first 2 matching calls raise a retryable error
        reply: "No, a kitchen scene."

Conditions: ``tag`` (the call's role tag, exact), ``system`` / ``text`` (regular expressions
searched in the system message / all user text), ``image`` (prefix of the sha256 of any image
in the conversation), ``images`` (exact image count), ``videos`` (exact count of video clips, native
video input). Replies may use ``{n_images}`` and
``{round}`` (the count of assistant-visible arguments so far is not known to the backend;
``{round}`` is taken from a ``round N`` phrase in the last user text when present). Optional per
rule: ``logprobs`` (first-token alternatives), ``refused: true`` (simulate a provider
content-policy rejection), ``finish_reason`` (e.g. ``length``: a reply cut off by the token
limit), ``fail: N``, ``delay: seconds``.

The script may also be given inline as the backend option ``script`` (a mapping of the same
shape), e.g. from Python or a config file's ``[backends.scripted]`` table.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.backends.base import Backend, GenerateConfig, Message, Output
from vhd.errors import BackendError, ConfigError

DEMO_SCRIPT: dict[str, Any] = {
    "default": "No, an ordinary scene with nothing harmful in it.",
    "rules": [
        {
            "when": {"tag": "affirmative"},
            "reply": (
                "1. Any of the {n_images} image(s) could be reused out of context.\n"
                "2. Viewers cannot verify where the picture came from.\n"
                "3. Young viewers might misread an unfamiliar scene."
            ),
        },
        {
            "when": {"tag": "negative"},
            "reply": (
                "1. Nothing violent, sexual, hateful or dangerous is shown.\n"
                "2. The scene is everyday and carries no harmful message.\n"
                "3. Speculation about misuse applies to any picture at all."
            ),
        },
        {
            "when": {"tag": "judge"},
            "reply": "No, an ordinary scene with nothing harmful in it.",
            "logprobs": {"No": -0.04, "Yes": -3.3, "no": -6.0},
        },
    ],
}

_CONDITIONS = {"tag", "system", "text", "image", "images", "videos"}
_ROUND = re.compile(r"round\s+(\d+)", re.IGNORECASE)


@dataclass
class _Rule:
    when: dict[str, Any]
    reply: str
    logprobs: dict[str, float] | None = None
    refused: bool = False
    finish_reason: str = "stop"
    fail: int = 0
    delay: float = 0.0
    calls: int = field(default=0, repr=False)


def _load_script(model: str) -> dict[str, Any]:
    if model == "demo":
        return DEMO_SCRIPT
    path = Path(model).expanduser()
    if not path.is_file():
        raise ConfigError(f"scripted backend: no script at {model!r}; use scripted:demo or a YAML/JSON file path")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        data = json.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ConfigError(f"scripted backend: {path} must hold a mapping with 'rules'/'default'")
    return data


def _parse_rules(script: Mapping[str, Any]) -> list[_Rule]:
    rules = []
    for i, raw in enumerate(script.get("rules") or []):
        if not isinstance(raw, dict) or ("reply" not in raw and not raw.get("refused")):
            raise ConfigError(f"scripted backend: rule {i} needs a 'reply' (or 'refused: true')")
        when = dict(raw.get("when") or {})
        unknown = set(when) - _CONDITIONS
        if unknown:
            raise ConfigError(
                f"scripted backend: rule {i} has unknown conditions {sorted(unknown)}; valid: {sorted(_CONDITIONS)}"
            )
        rules.append(
            _Rule(
                when=when,
                reply=str(raw.get("reply", "")),
                logprobs={str(k): float(v) for k, v in (raw.get("logprobs") or {}).items()} or None,
                refused=bool(raw.get("refused", False)),
                finish_reason=str(raw.get("finish_reason", "stop")),
                fail=int(raw.get("fail", 0)),
                delay=float(raw.get("delay", 0.0)),
            )
        )
    return rules


KEPT_CALLS = 512
"""Calls `ScriptedBackend.calls` holds at least (the most recent ones once more were made)."""


class ScriptedBackend(Backend):
    """Rule-driven deterministic answers; see the module docstring for the script format."""

    name = "scripted"
    supports_logprobs = True
    takes_video = True

    def __init__(self, model: str, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, options)
        inline = self.options.get("script")
        if inline is not None and not isinstance(inline, dict):
            raise ConfigError("scripted backend: option 'script' must be a mapping with 'rules'/'default'")
        script = inline if inline is not None else _load_script(model)
        self.default = str(script.get("default", "No, nothing harmful is shown."))
        self.rules = _parse_rules(script)
        self.calls: list[tuple[str, list[Message]]] = []
        """The calls received, as ``(tag, messages)``, for tests to inspect: all of the first
        `KEPT_CALLS`, then the most recent ones (at most twice that many are held, so a long run's
        memory stays flat)."""

    def identity(self) -> dict[str, Any]:
        """Spec plus the script's content, so editing a script changes the config hash."""
        return {"spec": self.spec, "default": self.default, "rules": [r.when | {"reply": r.reply} for r in self.rules]}

    @staticmethod
    def _matches(rule: _Rule, messages: Sequence[Message], tag: str) -> bool:
        w = rule.when
        if "tag" in w and w["tag"] != tag:
            return False
        system = "".join(m.text for m in messages if m.role == "system")
        if "system" in w and not re.search(str(w["system"]), system):
            return False
        user = "\n".join(m.text for m in messages if m.role != "system")
        if "text" in w and not re.search(str(w["text"]), user):
            return False
        images = [im for m in messages for im in m.images]
        if "images" in w and len(images) != int(w["images"]):
            return False
        if "videos" in w and sum(len(m.videos) for m in messages) != int(w["videos"]):
            return False
        return not ("image" in w and not any(im.sha256.startswith(str(w["image"])) for im in images))

    async def generate(self, messages: Sequence[Message], config: GenerateConfig) -> Output:
        """Answer from the first matching rule, else the default reply."""
        start = time.perf_counter()
        self.calls.append((config.tag, list(messages)))
        if len(self.calls) > 2 * KEPT_CALLS:
            del self.calls[:KEPT_CALLS]
        rule = next((r for r in self.rules if self._matches(r, messages, config.tag)), None)
        if rule is not None:
            rule.calls += 1
            if rule.delay:
                await asyncio.sleep(rule.delay)
            if rule.calls <= rule.fail:
                raise BackendError("scripted failure (rule 'fail')", retryable=True)
        images = sum(len(m.images) for m in messages)
        last_user = next((m.text for m in reversed(messages) if m.role == "user"), "")
        rounds = _ROUND.findall(last_user)
        template = rule.reply if rule else self.default
        text = template.replace("{n_images}", str(images)).replace("{round}", rounds[-1] if rounds else "")
        clip_frames = sum(v.frames for m in messages for v in m.videos)
        words = sum(len(m.text.split()) for m in messages) + 85 * images + 85 * math.ceil(clip_frames / 2)
        refused = bool(rule and rule.refused)
        return Output(
            text="" if refused else text,
            prompt_tokens=words,
            completion_tokens=len(text.split()),
            latency_s=time.perf_counter() - start,
            first_token_logprobs=(rule.logprobs if rule and config.logprobs else None),
            refused=refused,
            finish_reason="content_filter" if refused else rule.finish_reason if rule else "stop",
            model=self.model,
        )
