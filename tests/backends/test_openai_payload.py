"""Pure parts of the openai backend: options, payloads, response parsing, retries, scrubbing."""

from __future__ import annotations

import base64
import email.utils
import io
import json
import random
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from vhd.backends.base import GenerateConfig, Message
from vhd.backends.openai_payload import (
    MAX_TOP_LOGPROBS,
    OpenAIOptions,
    backoff_delay,
    build_payload,
    encode_payload,
    is_content_policy_error,
    parse_options,
    parse_response,
    parse_retry_after,
)
from vhd.errors import BackendError, ConfigError
from vhd.media.encoded import EncodedImage
from vhd.redaction import redact_text as scrub


def make_image(color: str = "red", size: int = 24) -> EncodedImage:
    im = Image.new("RGB", (size, size), "white")
    ImageDraw.Draw(im).ellipse((2, 2, size - 3, size - 3), fill=color)
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return EncodedImage(buf.getvalue(), "image/png", size, size)


def completion(**choice: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "message": {"role": "assistant", "content": "No, a kitchen."},
        "finish_reason": "stop",
    }
    base.update(choice)
    return {
        "id": "c1",
        "model": "served-model",
        "choices": [base],
        "usage": {"prompt_tokens": 120, "completion_tokens": 4, "total_tokens": 124},
    }


OPTS = OpenAIOptions()


# -- options ---------------------------------------------------------------------------------


def test_options_defaults() -> None:
    o = parse_options({})
    assert (o.timeout, o.max_retries, o.backoff_base, o.backoff_max) == (120.0, 6, 0.5, 60.0)
    assert (o.max_in_flight, o.image_detail, o.key_env) == (64, "auto", "OPENAI_API_KEY")
    assert parse_options({"azure": True}).key_env == "AZURE_OPENAI_API_KEY"
    assert parse_options({"api_key_env": "MY_KEY"}).key_env == "MY_KEY"


def test_unknown_option_lists_valid_keys() -> None:
    with pytest.raises(ConfigError) as err:
        parse_options({"base_ur": "http://x", "timeout": 3})
    msg = str(err.value)
    assert "base_ur" in msg and "base_url" in msg and "max_in_flight" in msg and "\n" not in msg


def test_api_key_in_config_is_refused() -> None:
    with pytest.raises(ConfigError, match="api_key_env"):
        parse_options({"api_key": "sk-live-123"})


@pytest.mark.parametrize(
    ("options", "where"),
    [({"timeout": 0}, "timeout"), ({"image_detail": "huge"}, "image_detail"), ({"max_in_flight": 0}, "max_in_flight")],
)
def test_bad_option_value_is_one_line(options: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_options(options, table="vllm")
    assert str(err.value).startswith(f"[backends.vllm] {where}:") and "\n" not in str(err.value)


# -- payload ---------------------------------------------------------------------------------


def test_payload_text_only() -> None:
    msgs = [Message("system", "Be brief."), Message("user", "Hello?")]
    p = build_payload("gpt-x", msgs, GenerateConfig(temperature=0.0, max_tokens=50), OPTS)
    assert p == {
        "model": "gpt-x",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello?"}],
        "temperature": 0.0,
        "max_tokens": 50,
    }


def test_payload_images_in_order_with_detail() -> None:
    a, b = make_image("red"), make_image("blue")
    msgs = [Message("user", ("Frames:", a, b, "Harmful?", ""))]
    p = build_payload("m", msgs, GenerateConfig(), OpenAIOptions(image_detail="low"))
    parts = p["messages"][0]["content"]
    assert [x["type"] for x in parts] == ["text", "image_url", "image_url", "text"]
    assert parts[1]["image_url"] == {"url": a.data_url, "detail": "low"}
    assert parts[2]["image_url"]["url"].startswith("data:image/png;base64,")
    assert base64.b64decode(parts[2]["image_url"]["url"].split(",", 1)[1]) == b.data
    assert parts[3] == {"type": "text", "text": "Harmful?"}


def test_image_is_encoded_once_across_calls() -> None:
    img = make_image()
    msgs = [Message("user", ("x", img))]
    first = build_payload("m", msgs, GenerateConfig(), OPTS)
    second = build_payload("m", msgs, GenerateConfig(tag="judge"), OPTS)
    url1 = first["messages"][0]["content"][1]["image_url"]["url"]
    url2 = second["messages"][0]["content"][1]["image_url"]["url"]
    assert url1 is url2  # the cached string itself, not a re-encoding


def test_text_only_tuple_content_is_joined() -> None:
    p = build_payload("m", [Message("user", ("a", "b"))], GenerateConfig(), OPTS)
    assert p["messages"][0]["content"] == "ab"


def test_image_outside_user_message_is_rejected() -> None:
    with pytest.raises(BackendError, match="only allowed in user messages") as err:
        build_payload("m", [Message("system", ("x", make_image()))], GenerateConfig(), OPTS)
    assert err.value.retryable is False


def test_payload_sampling_fields() -> None:
    cfg = GenerateConfig(temperature=0.7, max_tokens=9, top_p=0.9, seed=7, stop=("\n\n",))
    p = build_payload("m", [Message("user", "q")], cfg, OPTS)
    assert (p["top_p"], p["seed"], p["stop"], p["max_tokens"]) == (0.9, 7, ["\n\n"], 9)
    assert "logprobs" not in p
    no_seed = build_payload("m", [Message("user", "q")], cfg, OpenAIOptions(send_seed=False))
    assert "seed" not in no_seed
    newer = build_payload("m", [Message("user", "q")], cfg, OpenAIOptions(max_tokens_field="max_completion_tokens"))
    assert newer["max_completion_tokens"] == 9 and "max_tokens" not in newer


def test_reasoning_model_settings_pass_through() -> None:
    cfg = GenerateConfig(max_tokens=2000)
    opts = OpenAIOptions(max_tokens_field="max_completion_tokens", reasoning_effort="low")
    p = build_payload("o4-mini", [Message("user", "q")], cfg, opts)
    assert (p["max_completion_tokens"], p["reasoning_effort"]) == (2000, "low") and "max_tokens" not in p
    assert "reasoning_effort" not in build_payload("m", [Message("user", "q")], cfg, OPTS)
    assert json.loads(encode_payload("o4-mini", [Message("user", "q")], cfg, opts))["reasoning_effort"] == "low"
    with pytest.raises(ConfigError, match="reasoning_effort"):
        parse_options({"reasoning_effort": "extreme"})


def test_payload_logprobs_clamped() -> None:
    p = build_payload("m", [Message("user", "q")], GenerateConfig(logprobs=True, top_logprobs=5), OPTS)
    assert (p["logprobs"], p["top_logprobs"]) == (True, 5)
    p = build_payload("m", [Message("user", "q")], GenerateConfig(logprobs=True, top_logprobs=50), OPTS)
    assert p["top_logprobs"] == MAX_TOP_LOGPROBS


def test_extra_body_passes_through_and_wins() -> None:
    opts = OpenAIOptions(extra_body={"top_k": 20, "temperature": 0.1, "chat_template_kwargs": {"x": 1}})
    p = build_payload("m", [Message("user", "q")], GenerateConfig(temperature=0.9), opts)
    assert p["top_k"] == 20 and p["temperature"] == 0.1 and p["chat_template_kwargs"] == {"x": 1}


# -- response --------------------------------------------------------------------------------


def test_parse_plain_answer() -> None:
    out = parse_response(completion())
    assert (out.text, out.prompt_tokens, out.completion_tokens) == ("No, a kitchen.", 120, 4)
    assert (out.finish_reason, out.model, out.refused) == ("stop", "served-model", False)
    assert out.first_token_logprobs is None


def test_parse_accepts_raw_bytes() -> None:
    import json

    assert parse_response(json.dumps(completion()).encode()).text == "No, a kitchen."


def test_parse_first_token_logprobs() -> None:
    lp = {
        "content": [
            {
                "token": "No",
                "logprob": -0.05,
                "top_logprobs": [
                    {"token": "No", "logprob": -0.05, "bytes": [78, 111]},
                    {"token": "Yes", "logprob": -3.1, "bytes": None},
                    {"token": "Yes", "logprob": -4.0},
                ],
            },
            {"token": ",", "logprob": -0.01, "top_logprobs": [{"token": ",", "logprob": -0.01}]},
        ]
    }
    assert parse_response(completion(logprobs=lp)).first_token_logprobs == {"No": -0.05, "Yes": -3.1}


def test_parse_first_token_chosen_token_without_alternatives() -> None:
    lp = {"content": [{"token": "Yes", "logprob": -0.2, "top_logprobs": []}]}
    assert parse_response(completion(logprobs=lp)).first_token_logprobs == {"Yes": -0.2}


def test_parse_logprobs_skip_leading_whitespace_tokens() -> None:
    # Llama Guard on vLLM answers "\n\nunsafe\nS1": the answer's alternatives are at the second token.
    lp = {
        "content": [
            {"token": "\n\n", "logprob": -0.001, "top_logprobs": [{"token": "\n\n", "logprob": -0.001}]},
            {"token": "unsafe", "logprob": -0.2, "top_logprobs": [{"token": "safe", "logprob": -1.7}]},
        ]
    }
    assert parse_response(completion(logprobs=lp)).first_token_logprobs == {"safe": -1.7, "unsafe": -0.2}
    blank = {"content": [{"token": " ", "logprob": -0.1, "top_logprobs": []}]}
    assert parse_response(completion(logprobs=blank)).first_token_logprobs == {" ": -0.1}
    legacy = {"tokens": ["\n", "Yes"], "top_logprobs": [{"\n": -0.01}, {"Yes": -0.1, "No": -2.5}]}
    assert parse_response(completion(logprobs=legacy)).first_token_logprobs == {"Yes": -0.1, "No": -2.5}


def test_parse_legacy_logprobs_shape() -> None:
    lp = {"tokens": ["Yes", "."], "top_logprobs": [{"Yes": -0.1, "No": -2.5}, {".": -0.01}]}
    assert parse_response(completion(logprobs=lp)).first_token_logprobs == {"Yes": -0.1, "No": -2.5}


def test_content_filter_finish_is_a_refusal() -> None:
    out = parse_response(completion(message={"role": "assistant", "content": None}, finish_reason="content_filter"))
    assert out.refused and out.text == "" and out.finish_reason == "content_filter"


def test_refusal_field_is_a_refusal() -> None:
    out = parse_response(completion(message={"role": "assistant", "content": None, "refusal": "I can't help."}))
    assert out.refused and out.extra["refusal"] == "I can't help."


def test_reasoning_tokens_are_read_where_reported() -> None:
    data = completion(message={"role": "assistant", "content": ""}, finish_reason="length")
    data["usage"] = {
        "prompt_tokens": 9,
        "completion_tokens": 100,
        "completion_tokens_details": {"reasoning_tokens": 100},
    }
    out = parse_response(data)
    assert (out.text, out.finish_reason, out.completion_tokens, out.reasoning_tokens) == ("", "length", 100, 100)
    assert not out.refused  # cut off is not refused
    data["usage"] = {"prompt_tokens": 9, "completion_tokens": 100, "reasoning_tokens": 60}  # top-level form
    assert parse_response(data).reasoning_tokens == 60
    assert parse_response(completion()).reasoning_tokens is None


def test_missing_usage_is_zero() -> None:
    data = completion()
    data["usage"] = None
    out = parse_response(data)
    assert (out.prompt_tokens, out.completion_tokens) == (0, 0)


@pytest.mark.parametrize(
    "data",
    [
        b"<html>bad gateway</html>",
        "",
        [1, 2],
        {"choices": []},
        {"id": "x"},
        {"choices": [{"finish_reason": "stop"}]},
        {"error": {"message": "upstream failed"}},
    ],
)
def test_malformed_responses_are_retryable(data: Any) -> None:
    with pytest.raises(BackendError, match="malformed response") as err:
        parse_response(data)
    assert err.value.retryable is True


# -- errors and retries ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"message": "Your request was rejected as a result of our safety system.", "code": "content_policy_violation"},
        {"message": "This request may violate our content policy.", "code": None},
        {"error": {"message": "filtered", "code": "content_filter"}},
        {"message": "x", "code": "invalid_prompt", "innererror": {"code": "ResponsibleAIPolicyViolation"}},
        "Request blocked by the safety system",
    ],
)
def test_content_policy_errors_recognised(body: Any) -> None:
    assert is_content_policy_error(400, body)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"message": "max_tokens is too large", "code": "invalid_value"}),
        (500, {"message": "content policy service down"}),
        (400, None),
    ],
)
def test_other_errors_are_not_content_policy(status: int, body: Any) -> None:
    assert not is_content_policy_error(status, body)


def test_retry_after_forms() -> None:
    now = 1_800_000_000.0
    assert parse_retry_after({"retry-after": "2"}, now) == 2.0
    assert parse_retry_after({"Retry-After": "1.5"}, now) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}, now) == 0.25
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now) == pytest.approx(30, abs=1)
    assert parse_retry_after({"retry-after": email.utils.formatdate(now - 30, usegmt=True)}, now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}, now) is None
    assert parse_retry_after({}, now) is None
    assert parse_retry_after({"retry-after": "-3"}, now) == 0.0


def test_backoff_is_full_jitter_and_capped() -> None:
    rng = random.Random(0)
    for attempt in range(12):
        ceiling = min(8.0, 0.5 * 2**attempt)
        delays = [backoff_delay(attempt, 0.5, 8.0, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > 0.8 * ceiling and min(delays) < 0.2 * ceiling  # spread over the range
    assert backoff_delay(10_000, 0.5, 8.0) <= 8.0


def test_scrub_known_forms() -> None:
    key = "sk-proj-AbC123xyz987"
    text = (
        f"Incorrect API key provided: {key}. headers={{'Authorization': 'Bearer {key}', "
        f"'api-key': 'azurekey42'}} Authorization: Bearer other-token-99"
    )
    out = scrub(text, [key])
    assert key not in out and "azurekey42" not in out and "other-token-99" not in out
    assert "Incorrect API key provided" in out
    assert scrub("leaked sk-abcdefghijkl here") == "leaked *** here"


@given(
    secret=st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=8, max_size=60),
    before=st.text(max_size=40),
    after=st.text(max_size=40),
)
def test_scrub_never_leaks_the_secret(secret: str, before: str, after: str) -> None:
    assert secret not in scrub(before + secret + after, [secret])


@given(st.lists(st.one_of(st.text(max_size=30), st.sampled_from(["red", "blue", "green"])), max_size=6))
def test_encode_payload_is_the_json_of_build_payload(pieces: list[str]) -> None:
    """Image splicing gives exactly the JSON of the dict payload, whatever the text holds."""
    images = {c: make_image(c) for c in ("red", "blue", "green")}
    parts = tuple(images.get(p, p) for p in pieces)  # colour names become images
    messages = [Message("system", 'Judge \x00 \u0000 "quoted"'), Message("user", parts or ("hi",))]
    for detail in ("auto", "high"):
        opts = OpenAIOptions(image_detail=detail)
        cfg = GenerateConfig(logprobs=True, seed=3, stop=("\n",))
        encoded = encode_payload("m", messages, cfg, opts)
        assert json.loads(encoded) == build_payload("m", messages, cfg, opts)


def test_encode_payload_placeholder_cannot_be_forged_by_text() -> None:
    forged = "\x000:0\x00"
    messages = [Message("user", (forged, make_image()))]
    body = json.loads(encode_payload("m", messages, GenerateConfig(), OPTS))
    assert body["messages"][0]["content"][0] == {"type": "text", "text": forged}
    assert body["messages"][0]["content"][1]["type"] == "image_url"
