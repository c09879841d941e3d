from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vhd.taxonomy import load_taxonomy, parse_answer

TAX = load_taxonomy()


@pytest.mark.parametrize(
    ("answer", "codes"),
    [
        ("A, F", ("A", "F")),
        ("F. Explicit and Sexual Content", ("F",)),
        ("Categories: B; D", ("B", "D")),
        ("**Categories:** B; D", ("B", "D")),
        ("explicit & sexual content and violence and threats", ("A", "F")),
        ("1. A. Violence and Threats\n2. E. Child Endangerment", ("A", "E")),
        ("- A\n- F", ("A", "F")),
        ("(A) and (F)", ("A", "F")),
        ("Category A", ("A",)),
        ("I", ("I",)),
        ("a, f", ("A", "F")),
        ("F, A, F", ("A", "F")),
        ("I think the answer is F.", ("F",)),
        ("categories A and F apply", ("A", "F")),
        ("`J`", ("J",)),
        ("Answer: **G. Discriminatory Content and Cultural Insensitivity**", ("G",)),
    ],
)
def test_answers_read_as_codes(answer: str, codes: tuple[str, ...]) -> None:
    parsed = parse_answer(answer, TAX)
    assert (parsed.codes, parsed.status, parsed.none) == (codes, "ok", False)


@pytest.mark.parametrize("answer", ["None", "none of the above", "Answer: None.", "K. Unharmful", "Unharmful", "N/A"])
def test_none_and_unharmful_are_ok_and_empty(answer: str) -> None:
    assert parse_answer(answer, TAX) == parse_answer("None", TAX)
    assert parse_answer(answer, TAX).status == "ok" and parse_answer(answer, TAX).none


@pytest.mark.parametrize("answer", ["", "   ", "garbage here", "The image shows violence.", "Z", "Q, R"])
def test_unreadable_answers_are_unparsed(answer: str) -> None:
    parsed = parse_answer(answer, TAX)
    assert parsed.status == "unparsed" and parsed.codes == () and not parsed.none


def render(code: str, style: int, lower: bool) -> str:
    name = TAX.get(code).name
    name = name.lower() if lower else name
    return [
        code,
        f"{code}.",
        f"({code})",
        f"{code})",
        f"{code}. {name}",
        name,
        f"**{name}**",
        f"{code} - {name}",
        f"Category {code}",
        f"**{code}. {name}**",
    ][style]


SEPARATORS = [", ", "; ", "\n", " and ", "/", "\n- ", " & ", ",", " | "]
PREFIXES = ["", "Categories: ", "Answer: ", "**Categories:** ", "Category: ", "- ", "Final answer: "]


@settings(max_examples=300, deadline=None)
@given(
    codes=st.lists(st.sampled_from(TAX.codes), min_size=1, max_size=4, unique=True),
    styles=st.lists(st.integers(0, 9), min_size=4, max_size=4),
    lower=st.booleans(),
    sep=st.sampled_from(SEPARATORS),
    prefix=st.sampled_from(PREFIXES),
    end=st.sampled_from(["", ".", "\n", " "]),
)
def test_property_rendered_lists_parse_back(
    codes: list[str], styles: list[int], lower: bool, sep: str, prefix: str, end: str
) -> None:
    text = prefix + sep.join(render(c, s, lower) for c, s in zip(codes, styles, strict=False)) + end
    parsed = parse_answer(text, TAX)
    assert parsed.status == "ok", text
    assert set(parsed.codes) == set(codes), text
    assert list(parsed.codes) == sorted(parsed.codes)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_property_any_text_never_raises_and_stays_in_taxonomy(text: str) -> None:
    parsed = parse_answer(text, TAX)
    assert set(parsed.codes) <= set(TAX.codes)
    assert parsed.status in ("ok", "unparsed")
    assert not (parsed.codes and parsed.none)
