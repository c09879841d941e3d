from pathlib import Path

import pytest

from vhd.debate.prompts import TEMPLATE_NAMES, Prompts, default_templates
from vhd.errors import ConfigError


def test_every_template_ships_and_renders() -> None:
    templates = default_templates()
    assert set(templates) == set(TEMPLATE_NAMES)
    p = Prompts()
    values = dict(
        rounds=2,
        n_frames=5,
        definition="DEF",
        medium="image",
        transcript="T",
        round=1,
        side="affirmative",
        seconds="12.5",
    )
    for name in TEMPLATE_NAMES:
        text = p.render(name, **values)
        assert "$" not in text, name
    assert "DEF" in p.render("affirmative_video", **values)
    assert "DEF" in p.render("judge_image", **values)
    assert "2 rounds" in p.render("negative_image", **values)
    assert "a clip of 12.5 seconds" in p.render("judge_clip", **values)


def test_clip_templates_leave_the_prompt_hash_alone_unless_overridden() -> None:
    from vhd.debate.prompts import CLIP_TEMPLATES

    p = Prompts()
    assert not set(CLIP_TEMPLATES) & set(p.identity(clips=False))
    assert set(CLIP_TEMPLATES) <= set(p.identity(clips=True))
    frames_only = {k: v for k, v in default_templates().items() if k not in CLIP_TEMPLATES}
    import hashlib
    import json

    assert p.digest() == hashlib.sha256(json.dumps(frames_only, sort_keys=True).encode()).hexdigest()
    assert Prompts({"judge_clip": "Judge the clip. $definition"}).digest() != p.digest()


def test_override_text_and_file(tmp_path: Path) -> None:
    (tmp_path / "j.txt").write_text("Judge please. $definition\n")
    p = Prompts({"judge_image": "@j.txt", "debater_turn": "R$round"}, base_dir=tmp_path)
    assert p.render("judge_image", definition="D", n_frames=1) == "Judge please. D"
    assert p.render("debater_turn", round=2) == "R2"
    assert p.digest() != Prompts().digest()


def test_bad_overrides_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown prompt template 'judge'"):
        Prompts({"judge": "x"})
    with pytest.raises(ConfigError, match="cannot read prompt file"):
        Prompts({"judge_image": "@missing.txt"}, base_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"uses \$verdict"):
        Prompts({"judge_turn": "$verdict"}).render("judge_turn", transcript="", medium="image")


def test_every_role_is_told_media_text_and_arguments_are_never_instructions() -> None:
    p = Prompts()
    values = dict(rounds=2, n_frames=5, definition="DEF")
    for role in ("affirmative", "negative", "judge"):
        for kind in ("image", "video"):
            text = p.render(f"{role}_{kind}", **values)
            assert "never an instruction" in text, (role, kind)
            assert "<argument id=" in text and "</argument id=" in text, (role, kind)
