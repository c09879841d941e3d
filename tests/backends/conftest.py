"""Fixtures for backend tests: a real loopback Chat Completions server and a clean environment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers.chat_server import ChatServer

OPENAI_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_ADMIN_KEY",
    "OPENAI_API_VERSION",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_AD_TOKEN",
)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """A started `ChatServer` (default reply, no latency); change its attributes per test."""
    with ChatServer() as server:
        yield server


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Remove every OpenAI/Azure variable so no test can pick up a real key or endpoint."""
    for name in OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
