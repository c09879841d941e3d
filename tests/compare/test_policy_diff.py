"""`policy_diff`: both policies on the same samples, shared calls sent once, flips with both reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vhd.backends.scripted import ScriptedBackend
from vhd.compare.policy_diff import category_of, policy_diff
from vhd.config import AnnotateConfig
from vhd.errors import ConfigError
from vhd.policy import parse_policy

BASE = """\
name: acme-moderation
version: "{version}"
categories:
  - id: violence
    name: Violence
    description: Physical harm to people or animals.
    forbids: ["graphic injury", "threats with a weapon"]{allows}
  - id: nudity
    description: Exposed bodies shown for arousal.
{severity}"""

EXCEPTION = "educational medical imagery such as X-rays"
SCALE = "severity:\n  - {name: low, meaning: mild}\n  - {name: high, meaning: graphic}\n"

SCRIPT: dict[str, Any] = {
    "default": "1. An argument.",
    "rules": [
        # the exception sentence reaches the judge under policy B only: it then lets the X-ray through
        {"when": {"tag": "judge", "system": "X-rays", "image": "{xray}"}, "reply": "No, an educational X-ray."},
        {"when": {"tag": "judge", "image": "{xray}"}, "reply": "Yes, violence.\nSeverity: high"},
        {"when": {"tag": "judge", "system": "Severity:"}, "reply": "Yes, nudity.\nSeverity: low"},
        {"when": {"tag": "judge"}, "reply": "No, nothing harmful."},
    ],
}


def _policy(folder: Path, name: str, *, version: str = "1", allows: bool = False, scale: bool = True) -> Path:
    text = BASE.format(
        version=version, allows=f"\n    allows: [{EXCEPTION!r}]" if allows else "", severity=SCALE if scale else ""
    )
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def media(tmp_path: Path) -> tuple[Path, str, str]:
    folder = tmp_path / "media"
    folder.mkdir()
    Image.new("RGB", (16, 16), (230, 230, 230)).save(folder / "xray.png")
    Image.new("RGB", (16, 16), (0, 0, 200)).save(folder / "blue.png")
    Image.new("RGB", (16, 16), (0, 200, 0)).save(folder / "green.png")
    from vhd.config import MediaConfig
    from vhd.media.load import load_sample, media_settings
    from vhd.records import Kind, MediaItem

    loaded = load_sample(MediaItem(path=folder / "xray.png", kind=Kind.IMAGE), media_settings(MediaConfig()))
    return folder, loaded.sample.id, loaded.images[0].sha256  # the file's id; the image the models see


def _config(seen: str) -> AnnotateConfig:
    rules = [
        {**r, "when": {k: (v.format(xray=seen[:16]) if isinstance(v, str) else v) for k, v in r["when"].items()}}
        for r in SCRIPT["rules"]
    ]
    return AnnotateConfig(model="scripted:diff", backends={"scripted": {"script": {**SCRIPT, "rules": rules}}})


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call that reaches a scripted backend, by its role tag."""
    seen: list[str] = []
    real = ScriptedBackend.generate

    async def counted(self: ScriptedBackend, messages: Any, config: Any) -> Any:
        seen.append(config.tag)
        return await real(self, messages, config)

    monkeypatch.setattr(ScriptedBackend, "generate", counted)
    return seen


def test_an_exception_flips_the_decision_under_b_only(
    tmp_path: Path, media: tuple[Path, str, str], calls: list[str]
) -> None:
    folder, xray, seen = media
    a = _policy(tmp_path, "a.yaml", scale=False)
    b = _policy(tmp_path, "b.yaml", version="2", allows=True, scale=False)
    diff = policy_diff(a, b, [folder], config=_config(seen), rounds=1)
    assert diff.compared == 3 and diff.flips == 1
    (flip,) = diff.samples
    assert flip.sample_id == xray and Path(flip.path).name == "xray.png" and flip.changes == ("decision",)
    assert (flip.a.harmful, flip.a.category, flip.a.reason) == (True, "violence", "violence")
    assert (flip.b.harmful, flip.b.category, flip.b.reason) == (False, None, "an educational X-ray")
    data = diff.to_dict()
    assert data["flips"] == 1 and data["samples"][0]["b"]["reason"] == "an educational X-ray"
    assert data["policy_a"] == "acme-moderation@1" and data["policy_b"] == "acme-moderation@2"
    # the exception reaches every role's prompt, so nothing is identical: every call is made, none shared
    assert diff.calls_made == len(calls) == 2 * 3 * 3 and diff.calls_shared == 0
    assert diff.store is None  # a temporary store, removed


def test_calls_the_two_policies_share_are_made_once(
    tmp_path: Path, media: tuple[Path, str, str], calls: list[str]
) -> None:
    folder, _, seen = media
    a = _policy(tmp_path, "a.yaml", scale=False)
    b = _policy(tmp_path, "b.yaml", version="2")  # the same text, plus a severity scale: only the judge reads it
    store = tmp_path / "diff.db"
    diff = policy_diff(a, b, [folder], config=_config(seen), store=store, rounds=1)
    # A: 3 samples x (affirmative, negative, judge); B: only its 3 judges are new
    assert sorted(calls) == sorted(["affirmative", "negative", "judge"] * 3 + ["judge"] * 3)
    assert (diff.calls_made, diff.calls_shared) == (12, 6)
    flips = {Path(f.path).name: f for f in diff.samples}
    assert set(flips) == {"blue.png", "green.png", "xray.png"}
    xray_flip = flips["xray.png"]  # violence under both; B's scale gives it a level
    assert xray_flip.changes == ("severity",) and (xray_flip.a.severity, xray_flip.b.severity) == (None, "high")
    blue = flips["blue.png"]  # B's judge reads the scale and calls it nudity
    assert blue.changes == ("decision",) and (blue.b.category, blue.b.severity) == ("nudity", "low")
    assert diff.store == str(store)

    calls.clear()  # again on the same store: every verdict is stored under both configuration hashes
    again = policy_diff(a, b, [folder], config=_config(seen), store=store, rounds=1)
    assert calls == [] and again.calls_made == 0 and again.flips == 3


def test_severity_and_category_changes(tmp_path: Path, media: tuple[Path, str, str]) -> None:
    folder, _, seen = media
    a = _policy(tmp_path, "a.yaml")
    # identical policies but for the version: nothing flips, and B sends no call at all
    same = policy_diff(a, _policy(tmp_path, "a2.yaml", version="2"), [folder], config=_config(seen), rounds=1)
    assert same.flips == 0 and same.calls_shared == same.calls_made == 9

    script = {
        "default": "1. An argument.",
        "rules": [
            {"when": {"tag": "judge", "system": "X-rays"}, "reply": "Yes, B.\nSeverity: low"},
            {"when": {"tag": "judge"}, "reply": "Yes, Violence.\nSeverity: 2"},
        ],
    }
    cfg = AnnotateConfig(model="scripted:cat", backends={"scripted": {"script": script}})
    b = _policy(tmp_path, "b.yaml", version="2", allows=True)
    diff = policy_diff(a, b, [folder / "blue.png"], config=cfg, rounds=1)
    (flip,) = diff.samples
    assert flip.changes == ("category", "severity")
    assert (flip.a.category, flip.a.severity, flip.b.category, flip.b.severity) == ("violence", "high", "nudity", "low")

    pol = parse_policy(a.read_text())
    assert category_of("Violence", pol) == "violence" and category_of("B", pol) == "nudity"
    assert category_of("graphic injury to a person", pol) is None and category_of("", pol) is None


def test_bad_arguments(tmp_path: Path, media: tuple[Path, str, str]) -> None:
    from vhd.annotate.options import RunOptions

    folder, _, seen = media
    a = _policy(tmp_path, "a.yaml")
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        policy_diff(a, tmp_path / "missing.yaml", [folder], config=_config(seen))
    with pytest.raises(ConfigError, match="drop --batch-api"):
        policy_diff(a, a, [folder], config=_config(seen), options=RunOptions(batch_api=True))
    with pytest.raises(ConfigError, match="drop policy="):
        policy_diff(a, a, [folder], config=_config(seen), policy=str(a))


def test_vhd11k_means_the_packaged_default_even_over_a_config_files_policy(
    tmp_path: Path, media: tuple[Path, str, str]
) -> None:
    folder, _, seen = media
    b = _policy(tmp_path, "b.yaml", allows=True, scale=False)
    cfg = _config(seen).with_overrides(policy=str(b))  # the configuration names B; A is the default
    diff = policy_diff("vhd11k", b, [folder / "xray.png"], config=cfg, rounds=1)
    assert diff.policy_a == "vhd11k@1.0" and diff.config_hash_a != diff.config_hash_b
    (flip,) = diff.samples  # the default has no X-ray exception: the judge says violence; B lets it through
    assert (flip.a.harmful, flip.b.harmful, flip.a.category) == (True, False, "violence")  # vhd11k has it too
