import pytest

from tests import optional


def test_need_passes_when_available() -> None:
    optional.need(True, "never shown")


def test_need_skips_without_require_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VHD_REQUIRE_ALL", raising=False)
    with pytest.raises(pytest.skip.Exception, match="frobnicator"):
        optional.need(False, "frobnicator is missing")


def test_need_fails_under_require_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VHD_REQUIRE_ALL", "1")
    with pytest.raises(pytest.fail.Exception, match="VHD_REQUIRE_ALL=1 but frobnicator"):
        optional.need_module("frobnicator_not_a_module", "pip install frobnicator")
