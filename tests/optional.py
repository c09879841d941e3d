"""One rule for tests that need an optional tool (chromium, Ray, diffusers, Label Studio, ...).

Where the tool is absent the test skips with a reason, except when ``VHD_REQUIRE_ALL=1`` (which
``.ci/run`` sets): then the absence is a failure, so CI cannot go green by skipping.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest


def require_all() -> bool:
    """True when every optional tool must be present (``VHD_REQUIRE_ALL=1``)."""
    return os.environ.get("VHD_REQUIRE_ALL", "") == "1"


def need(available: bool, reason: str) -> None:
    """Skip (or fail under ``VHD_REQUIRE_ALL=1``) unless ``available``.

    Args:
        available: whether the tool can be used here.
        reason: what is missing and how to install it, shown in the skip or failure.
    """
    if available:
        return
    if require_all():
        pytest.fail(f"VHD_REQUIRE_ALL=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def need_module(name: str, install: str) -> None:
    """Skip (or fail under ``VHD_REQUIRE_ALL=1``) unless the Python module ``name`` is importable."""
    need(importlib.util.find_spec(name) is not None, f"{name} is not installed ({install})")


def need_executable(name: str, install: str) -> str:
    """Return the path of executable ``name``, or skip (fail under ``VHD_REQUIRE_ALL=1``)."""
    path = shutil.which(name)
    need(path is not None, f"{name} is not on PATH ({install})")
    assert path is not None
    return path
