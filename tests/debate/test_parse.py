from hypothesis import given
from hypothesis import strategies as st

from vhd.debate.parse import is_refusal, parse_verdict

WORD = st.from_regex(r"[A-Za-z0-9]{1,10}(?:['/&-][A-Za-z0-9]{1,8})?", fullmatch=True)
reasons = st.lists(WORD, min_size=1, max_size=6).map(" ".join)


def test_canonical_forms() -> None:
    assert parse_verdict("Yes, illegal activity.") == (True, "illegal activity")
    assert parse_verdict("No, lack of direct message.") == (False, "lack of direct message")


def test_decorations_and_labels() -> None:
    cases = {
        "**Yes**, violence.": (True, "violence"),
        '"No, culinary practice."': (False, "culinary practice"),
        "Answer: yes - violence and gore. The image shows blood.": (True, "violence and gore"),
        "Final verdict: NO; a toy on a table": (False, "a toy on a table"),
        "no culinary practice": (False, "culinary practice"),
        "Verdict: No, children's toy.": (False, "children's toy"),
        "After weighing both sides, my final verdict: Yes, self_harm.": (True, "self_harm"),
        "Yes": (True, ""),
        "yes.": (True, ""),
        "Not harmful, a cooking video.": (False, "a cooking video"),
        "Harmful: nudity.": (True, "nudity"),
        "`No`, neutral representation.\nBoth debaters made fair points.": (False, "neutral representation"),
    }
    for text, expected in cases.items():
        assert parse_verdict(text) == expected, text


def test_unreadable_is_none_never_a_guess() -> None:
    for text in ["", "Maybe.", "It depends on context.", "Nope", "The image shows a dog. Yes it is cute", "Yesterday"]:
        assert parse_verdict(text).harmful is None, text


@given(
    st.sampled_from(["yes", "Yes", "YES", "no", "No", "NO"]),
    reasons,
    st.sampled_from(["", "**", '"', "`"]),
    st.sampled_from(["", "Answer: ", "Verdict: ", "Final answer - "]),
    st.sampled_from([", ", " ", ": ", " - ", ","]),
    st.sampled_from(["", ".", ". The rest is commentary.", "\nMore prose follows here."]),
)
def test_property_reason_survives_formatting(
    word: str, reason: str, wrap: str, label: str, sep: str, tail: str
) -> None:
    text = f"{label}{wrap}{word}{wrap}{sep}{reason}{tail}"
    parsed = parse_verdict(text)
    assert parsed.harmful is (word.lower() == "yes")
    assert parsed.reason == reason


def test_refusals() -> None:
    for text in [
        "I'm sorry, but I can't help with that.",
        "I’m sorry, I cannot assist with this request.",
        "I cannot participate in this debate.",
        "Sorry, but I won't evaluate this image.",
        "As an AI, I am unable to view or judge this content.",
        "I must decline to take part.",
    ]:
        assert is_refusal(text), text


def test_an_empty_reply_is_not_a_refusal() -> None:
    # what a reasoning model cut off by the token limit returns; providers refuse in their own field
    for text in ["", "  \n", "**"]:
        assert not is_refusal(text), repr(text)


def test_arguments_are_not_refusals() -> None:
    for text in [
        "1. The knife is pointed at a person, which can't be read as harmless.",
        "I cannot stress enough that the scene is a kitchen.",
        "No, lack of direct message.",
        "The debater said 'I'm sorry, I can't help' in a film still; that is fiction. " * 1,
    ]:
        assert not is_refusal(text), text
