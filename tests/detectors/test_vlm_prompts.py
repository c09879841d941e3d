from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vhd.detectors.vlm_prompts import harmful_probability, read_binary, read_multiclass, render_prompt
from vhd.records import Kind
from vhd.taxonomy import default_taxonomy

TAX = default_taxonomy()


def test_prompts_carry_the_papers_content() -> None:
    short = render_prompt("short", Kind.IMAGE, 1, TAX)
    assert "Is this image harmful?" in short
    assert "Is this video harmful?" in render_prompt("short", Kind.VIDEO, 5, TAX)
    long_image = render_prompt("long", Kind.IMAGE, 1, TAX)
    for point in ("law", "social norms", "minors", "NSFW", "violen", "sexually explicit", "gambling", "distressing"):
        assert point in long_image
    long_video = render_prompt("long", Kind.VIDEO, 5, TAX)
    assert "5 frames" in long_video and "chronological" in long_video and "videos" in long_video
    multi = render_prompt("multiclass", Kind.VIDEO, 7, TAX)
    assert "7 frames" in multi
    for cat in TAX.classes:
        assert f'"{cat.label}"' in multi
    assert "frames" not in render_prompt("multiclass", Kind.IMAGE, 1, TAX)


@pytest.mark.parametrize(
    ("text", "harmful", "codes"),
    [
        ("Yes", True, ()),
        ("**Yes**, violence.", True, ()),
        ("yes, Explicit and Sexual Content", True, ("F",)),
        ("No.", False, ()),
        ("Answer: no, a kitchen.", False, ()),
        ("The picture shows a cat", None, ()),
        ("", None, ()),
    ],
)
def test_read_binary(text: str, harmful: bool | None, codes: tuple[str, ...]) -> None:
    reading = read_binary(text, TAX)
    assert reading.harmful is harmful and reading.categories == codes


@pytest.mark.parametrize(
    ("text", "harmful", "codes"),
    [
        ("F", True, ("F",)),
        ("F. Explicit and Sexual Content", True, ("F",)),
        ("**B. Substance Misuse**", True, ("B",)),
        ("Category: (A)", True, ("A",)),
        ("violence and threats", True, ("A",)),
        ("K. Unharmful", False, ()),
        ("K", False, ()),
        ("Unharmful.", False, ()),
        ("No.", False, ()),
        ("Yes.", True, ()),
        ("Yes, D. Mental Health and Self-Harm", True, ("D",)),
        ("I am not sure what this is", None, ()),
    ],
)
def test_read_multiclass(text: str, harmful: bool | None, codes: tuple[str, ...]) -> None:
    reading = read_multiclass(text, TAX)
    assert reading.harmful is harmful and reading.categories == codes


_DECOR = st.sampled_from(["{}", "**{}**", "`{}`", "{}.", " {} ", "Answer: {}", "- {}", "# {}", '"{}"'])


@given(st.sampled_from(TAX.categories), st.sampled_from(["code", "label", "name", "lower", "upper"]), _DECOR)
def test_any_spelling_of_a_category_reads_as_its_code(cat: object, form: str, decor: str) -> None:
    from vhd.taxonomy import Category

    assert isinstance(cat, Category)
    text = {
        "code": cat.code,
        "label": cat.label,
        "name": cat.name,
        "lower": cat.label.lower(),
        "upper": cat.name.upper(),
    }[form]
    reading = read_multiclass(decor.format(text), TAX)
    assert reading.harmful is True
    assert reading.categories == (cat.code,)


@given(st.sampled_from(["K", "K. Unharmful", "unharmful", "UNHARMFUL", "k. unharmful"]), _DECOR)
def test_any_spelling_of_unharmful_reads_as_not_harmful(text: str, decor: str) -> None:
    assert read_multiclass(decor.format(text), TAX).harmful is False


@given(st.text(max_size=40))
def test_reading_never_raises(text: str) -> None:
    reading = read_multiclass(text, TAX)
    assert reading.harmful in (True, False, None)
    assert set(reading.categories) <= set(TAX.codes)
    if reading.categories:
        assert reading.harmful is True


def test_harmful_probability() -> None:
    assert harmful_probability(None, TAX) is None
    assert harmful_probability({"hello": -0.1}, TAX) is None
    assert harmful_probability({"K": 0.0}, TAX) == pytest.approx(0.0)
    assert harmful_probability({"F": -0.693147, "ĠK": -0.693147, "x": -0.1}, TAX) == pytest.approx(0.5, abs=1e-5)
