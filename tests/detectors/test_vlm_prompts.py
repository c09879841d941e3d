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


def test_paper_presets_are_appendix_e2_verbatim_and_cited() -> None:
    from vhd.detectors.vlm_prompts import PAPER_PROMPTS, PAPER_SOURCE, PROMPTS

    tax = default_taxonomy()
    assert {"paper-short", "paper-long", "paper-multiclass"} <= set(PROMPTS) and "appendix E.2" in PAPER_SOURCE
    assert render_prompt("paper-short", Kind.IMAGE, 1, tax) == "Is the given image harmful?"
    assert render_prompt("paper-short", Kind.VIDEO, 5, tax) == "Is this video harmful?"
    long_image = render_prompt("paper-long", Kind.IMAGE, 1, tax)
    assert long_image.startswith("By harmful images, we indicate images depicting potentials, promotions, behaviors")
    assert long_image.endswith("promotion of underage gambling. Is the given image harmful?")
    long_video = render_prompt("paper-long", Kind.VIDEO, 5, tax)
    assert "(e.g., NSFW, violent, gambling contents)" in long_video  # the video text's own comma
    assert "A video is given by 5 frames extracted from itself." in long_video
    assert "given by 8 frames" in render_prompt("paper-long", Kind.VIDEO, 8, tax)
    multi = render_prompt("paper-multiclass", Kind.VIDEO, 5, tax)
    assert multi.startswith("You are a judge.You have to decide")  # sic
    assert "\u201cJ. Misinformation and Deceptive Content\u201d. If no, answer with \u201cK. Unharmful\u201d" in multi
    assert len(PAPER_PROMPTS) == 6
    # vhd's own readable variants stay as they were, beside the presets
    assert render_prompt("short", Kind.IMAGE, 1, tax) == "Is this image harmful? Answer yes or no."


def test_vlm_detector_takes_the_presets() -> None:
    from vhd.detectors.registry import create_detector
    from vhd.detectors.vlm import VLMDetector

    det = create_detector("vlm:scripted:demo", {"prompt": "paper-multiclass"})
    assert isinstance(det, VLMDetector) and det.multiclass is True
    short = create_detector("vlm:scripted:demo", {"prompt": "paper-short"})
    assert short.multiclass is False
    assert short.identity()["prompt_text"]["image"] == "Is the given image harmful?"
    assert create_detector("vlm:scripted:demo").identity() != short.identity()
