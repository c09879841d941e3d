"""Balancing, cool-downs, rate limits and option parsing of several endpoints, on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from vhd.backends.base import GenerateConfig, Message
from vhd.backends.endpoints import (
    Endpoint,
    EndpointPool,
    EndpointState,
    RateLimiter,
    TokenBucket,
    endpoint_state,
    estimate_tokens,
    image_tokens,
    merge_stats,
)
from vhd.backends.openai_payload import endpoint_options
from vhd.errors import ConfigError
from vhd.media.encoded import EncodedImage


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def endpoints(n: int, cap: int = 4, clock: FakeClock | None = None) -> list[Endpoint]:
    limiter = RateLimiter(clock=clock) if clock else RateLimiter()
    return [Endpoint(f"http://e{i}", cap, EndpointState(f"e{i}-{id(limiter)}", limiter)) for i in range(n)]


# -- rate limits -------------------------------------------------------------------------------


def test_rpm_bucket_lets_a_minute_of_requests_through_then_spaces_them() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=60, clock=clock)
    assert [limiter.reserve(0) for _ in range(60)] == [0.0] * 60
    assert limiter.reserve(0) == pytest.approx(1.0)  # the 61st waits one refill (1 s at 60/min)
    assert limiter.reserve(0) == pytest.approx(2.0)  # and the next one after it: arrival order
    clock.advance(2.0)
    assert limiter.wait_for(0) == pytest.approx(1.0)  # debt repaid, one more token needs 1 s
    clock.advance(1.0)
    assert limiter.wait_for(0) == 0.0


def test_tpm_reserves_the_estimate_and_settles_to_reported_usage() -> None:
    clock = FakeClock()
    limiter = RateLimiter(tpm=1000, clock=clock)
    assert limiter.reserve(600) == 0.0
    assert limiter.reserve(600) == pytest.approx(200 / (1000 / 60))  # 200 tokens of debt: 12 s
    limiter.settle(600, 100)  # the first call used 100, not 600
    assert limiter.wait_for(300) == 0.0
    limiter.settle(600, 900)  # the second used more than estimated: charged the difference
    assert limiter.wait_for(1) > 0


def test_a_request_larger_than_the_bucket_waits_for_a_full_bucket_not_forever() -> None:
    clock = FakeClock()
    bucket = TokenBucket(100, clock)
    bucket.take(50)
    assert bucket.wait_for(5000) == pytest.approx(50 / (100 / 60))
    clock.advance(30)
    assert bucket.wait_for(5000) == 0.0


def test_limits_are_per_process_and_shared_by_every_user_of_an_endpoint() -> None:
    a = endpoint_state("http://shared.test/v1#KEY", rpm=10)
    b = endpoint_state("http://shared.test/v1#KEY", tpm=500)  # a second role adds its tpm
    assert a is b and a.limiter.requests is not None and a.limiter.tokens is not None
    assert endpoint_state("http://shared.test/v1#OTHER_KEY") is not a


def test_estimate_counts_text_images_and_the_completion_cap() -> None:
    img = EncodedImage(b"not decoded for an estimate", "image/jpeg", 1024, 768)
    messages = [Message("system", "x" * 400), Message("user", ("Judge:", img))]
    config = GenerateConfig(max_tokens=100)
    high = estimate_tokens(messages, config)
    assert high == -(-(400 + 16 + 6 + 16) // 4) + image_tokens(1024, 768) + 100
    assert image_tokens(1024, 768) == 85 + 170 * 4  # 1024x768 -> 768 short side -> 2x2 tiles
    assert estimate_tokens(messages, config, "low") == high - image_tokens(1024, 768) + 85


# -- balancing and cool-downs ----------------------------------------------------------------


def test_least_in_flight_wins_and_ties_go_round_robin() -> None:
    pool = EndpointPool(endpoints(3))
    e0, e1, e2 = pool.endpoints
    assert pool.choose([3, 1, 2], 0) is e1
    picks = [pool.choose([0, 0, 0], 0) for _ in range(6)]
    assert {p.name for p in picks} == {e0.name, e1.name, e2.name}
    assert pool.choose([4, 4, 4], 0) is None  # every endpoint at max_in_flight
    assert pool.choose([4, 4, 3], 0) is e2


def test_a_failed_endpoint_cools_down_and_comes_back_after_it() -> None:
    clock = FakeClock()
    pool = EndpointPool(endpoints(2, clock=clock), cooldown=5.0, cooldown_max=60.0, clock=clock)
    e0, e1 = pool.endpoints
    assert pool.failed(e0) == 5.0
    assert pool.choose([0, 3], 0) is e1  # e0 is idle but cooling
    clock.advance(4.9)
    assert pool.choose([0, 3], 0) is e1
    clock.advance(0.2)
    assert pool.choose([0, 3], 0) is e0  # cool-down over
    assert pool.failed(e0) == 10.0  # failed again before any success: doubled
    pool.succeeded(e0)
    clock.advance(11)
    assert pool.failed(e0) == 5.0  # the streak ended with the success
    assert pool.failed(e1, wait_hint=30.0) == 30.0  # Retry-After beats the cool-down
    assert pool.all_cooling() and pool.choose([0, 0], 0) is None
    assert e0.stats.cooldowns == 3 and e1.stats.cooldowns == 1


def test_a_single_endpoint_never_cools_down() -> None:
    clock = FakeClock()
    pool = EndpointPool(endpoints(1, clock=clock), clock=clock)
    assert pool.failed(pool.endpoints[0]) == 0.0
    assert pool.choose([0], 0) is pool.endpoints[0]


def test_the_endpoint_that_just_failed_a_request_is_its_last_choice() -> None:
    pool = EndpointPool(endpoints(2))
    e0, e1 = pool.endpoints
    assert pool.choose([0, 2], 0, avoid=e0) is e1
    assert pool.choose([0, 4], 0, avoid=e0) is e0  # nothing else free


def test_an_endpoint_whose_rate_limit_is_spent_is_passed_over() -> None:
    clock = FakeClock()
    limited = EndpointState("limited", RateLimiter(rpm=1, clock=clock))
    free = EndpointState("free", RateLimiter(clock=clock))
    pool = EndpointPool([Endpoint("a", 4, limited), Endpoint("b", 4, free)], clock=clock)
    assert pool.choose([0, 3], 0).name == "a"
    limited.limiter.reserve(0)
    assert pool.choose([0, 3], 0).name == "b"


def test_acquire_waits_for_a_slot_and_release_hands_it_over() -> None:
    async def main() -> list[str]:
        pool = EndpointPool(endpoints(2, cap=1))
        first = await pool.acquire(0)
        second = await pool.acquire(0)
        assert {first.name, second.name} == {"http://e0", "http://e1"}
        third = asyncio.create_task(pool.acquire(0))
        await asyncio.sleep(0.01)
        assert not third.done()
        await pool.release(second)
        got = await asyncio.wait_for(third, 1)
        return [second.name, got.name]

    before, after = asyncio.run(main())
    assert before == after


def test_merge_stats_adds_counts_and_weights_mean_latency() -> None:
    a = {"http://x": {"requests": 4, "errors": 0, "mean_latency_s": 0.1, "max_latency_s": 0.2, "prompt_tokens": 10}}
    b = {"http://x": {"requests": 3, "errors": 1, "mean_latency_s": 0.4, "max_latency_s": 0.5, "prompt_tokens": 5}}
    merged = merge_stats([a, b])["http://x"]
    assert merged["requests"] == 7 and merged["errors"] == 1 and merged["prompt_tokens"] == 15
    assert merged["mean_latency_s"] == pytest.approx((4 * 0.1 + 2 * 0.4) / 6, abs=1e-4)
    assert merged["max_latency_s"] == 0.5


# -- options -----------------------------------------------------------------------------------


def test_base_urls_gives_one_endpoint_each_with_the_same_options() -> None:
    opts = endpoint_options({"base_urls": ["http://a/v1", "http://b/v1"], "rpm": 100, "max_in_flight": 8})
    assert [o.base_url for o in opts] == ["http://a/v1", "http://b/v1"]
    assert all(o.rpm == 100 and o.max_in_flight == 8 and o.base_urls is None for o in opts)


def test_a_list_of_tables_sets_per_endpoint_options_and_shares_the_rest() -> None:
    tables = [
        {"base_url": "http://a/v1", "api_key_env": "A_KEY", "tpm": 1000, "image_detail": "low", "max_retries": 2},
        {"base_url": "http://b/v1", "api_key_env": "B_KEY", "max_in_flight": 4},
    ]
    a, b = endpoint_options({"endpoints": tables})
    assert (a.key_env, b.key_env, a.tpm, b.tpm, b.max_in_flight) == ("A_KEY", "B_KEY", 1000, None, 4)
    assert b.image_detail == "low" and b.max_retries == 2  # shared options come from the first table


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"base_url": "http://a/v1", "base_urls": ["http://b/v1"]}, "both base_url and base_urls"),
        ({"base_urls": ["http://a/v1", "http://a/v1"]}, "twice"),
        ({"base_urls": []}, "base_urls"),
        ({"endpoints": [{"base_url": "http://a"}, {"base_url": "http://b", "image_detail": "high"}]}, "differently"),
        ({"endpoints": [{"base_url": "http://a", "api_key": "sk-x"}]}, "must not hold an API key"),
        ({"endpoints": []}, "non-empty list"),
        ({"rpm": 0}, "rpm"),
    ],
)
def test_bad_endpoint_options_fail_in_one_line(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        endpoint_options(options)
    assert "\n" not in str(err.value)
