"""`SharedCalls`: identical calls answered once while active; failures and other calls go through."""

from __future__ import annotations

import asyncio

from vhd.backends.base import GenerateConfig, Message, ask
from vhd.backends.scripted import ScriptedBackend
from vhd.compare.shared_calls import SharedCalls


def test_identical_calls_are_sent_once_and_failures_are_not_kept() -> None:
    script = {"default": "No.", "rules": [{"when": {"text": "flaky"}, "fail": 1, "reply": "Yes, after all."}]}
    backend = ScriptedBackend("inline", {"script": script})
    other = ScriptedBackend("inline", {"script": {**script, "default": "Maybe."}})
    hello = [Message("system", "Be brief."), Message("user", "hello")]
    config = GenerateConfig(temperature=0.7, tag="judge")
    shared = SharedCalls()

    async def go() -> list[object]:
        with shared.active():
            first, second = await asyncio.gather(ask(backend, hello, config), ask(backend, hello, config))
            third = await ask(backend, hello, config)
            hotter = await ask(backend, hello, GenerateConfig(temperature=0.9, tag="judge"))
            elsewhere = await ask(other, hello, config)
            flaky = [await ask(backend, [Message("user", "flaky")], config) for _ in range(3)]
        outside = await ask(backend, hello, config)
        return [first, second, third, hotter, elsewhere, *flaky, outside]

    first, second, third, hotter, elsewhere, fail, ok, again, outside = asyncio.run(go())
    assert getattr(outside, "extra", {}).get("shared_call") is None  # no memo outside the block
    assert [getattr(o, "text", None) for o in (first, second, third, hotter, elsewhere)] == ["No."] * 4 + ["Maybe."]
    assert getattr(third, "extra", {}).get("shared_call") is True and getattr(third, "latency_s", 1) == 0.0
    assert type(fail).__name__ == "BackendError"  # the scripted failure: not kept, so asked again
    assert getattr(ok, "text", None) == getattr(again, "text", None) == "Yes, after all."
    # sent: hello, hotter, elsewhere, flaky x2 (the failure, then the answer kept for the third); outside: no memo
    assert (shared.made, shared.shared) == (5, 3)
    assert len(backend.calls) == 1 + 1 + 2 + 1 and len(other.calls) == 1
    shared.close()
