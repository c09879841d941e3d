"""Secrets in URLs (userinfo, key-like query parameters) never reach a store, a screen or an export."""

import base64
import json
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from tests.annotate.test_api import judge_reply, make_images
from tests.servers.chat_server import ChatServer
from vhd.cli.main import main
from vhd.redaction import (
    forget_secrets,
    known_secrets,
    redact,
    redact_command,
    redact_text,
    redact_url,
    remember_secret,
    remember_secrets_in,
    url_secrets,
)
from vhd.store.sqlite import Store

SECRET = "Zq7abc123SECRETvalue"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"https://user:{SECRET}@api.example.com/v1", "https://***@api.example.com/v1"),
        (f"https://{SECRET}@api.example.com/v1", "https://***@api.example.com/v1"),
        (f"https://h.example.com/v1?api-key={SECRET}", "https://h.example.com/v1?api-key=***"),
        (f"https://h/v1?api-version=2024-10-21&key={SECRET}", "https://h/v1?api-version=2024-10-21&key=***"),
        (f"https://h/v1?token={SECRET}&x=1", "https://h/v1?token=***&x=1"),
        (f"https://h/b/c.jpg?sv=2022&sig={SECRET}&se=2030", "https://h/b/c.jpg?sv=2022&sig=***&se=2030"),
        (
            f"https://s3/o?X-Amz-Credential=AK%2F1&X-Amz-Signature={SECRET}",
            "https://s3/o?X-Amz-Credential=***&X-Amz-Signature=***",
        ),
        (f"https://h/v1?access_token={SECRET}#top", "https://h/v1?access_token=***#top"),
        (f"https://h/v1?subscription-key={SECRET}", "https://h/v1?subscription-key=***"),
        (f"https://h/v1?client_secret={SECRET}", "https://h/v1?client_secret=***"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://h/v1?api-version=2024-10-21&page=2", "https://h/v1?api-version=2024-10-21&page=2"),
        ("https://user@h/v1", "https://***@h/v1"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert redact({"backends": {"openai": {"base_url": url}}}) == {"backends": {"openai": {"base_url": expected}}}


def test_redact_reaches_every_string_of_a_config() -> None:
    config = {
        "backends": {"openai": {"base_url": f"https://u:{SECRET}@h/v1", "extra_headers": [f"https://h/?sig={SECRET}"]}},
        "prompts": {"judge_image": "@prompt.txt"},
        "concurrency": 16,
        "api_key": "x",
    }
    out = redact(config)
    assert SECRET not in json.dumps(out)
    assert out["prompts"] == {"judge_image": "@prompt.txt"} and out["concurrency"] == 16
    assert out["api_key"] == "<redacted>"


def test_redact_text_and_command_hide_url_secrets() -> None:
    text = f"POST https://u:{SECRET}@api.example.com/v1/chat?key={SECRET} failed"
    assert SECRET not in redact_text(text)
    assert "https://***@api.example.com/v1/chat?key=***" in redact_text(text)
    command = f"vhd fetch https://cdn.example.com/a.jpg?sig={SECRET} --out m/"
    assert redact_command(command) == "vhd fetch https://cdn.example.com/a.jpg?sig=*** --out m/"
    assert redact_command(f"vhd crawl --setting base_url=https://u:{SECRET}@h/v1") == (
        "vhd crawl --setting base_url=https://***@h/v1"
    )


@pytest.mark.parametrize("where", ["userinfo", "query"])
def test_base_url_secret_never_reaches_store_show_or_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    make_images(tmp_path / "m", 2)
    db = tmp_path / "s.db"
    with ChatServer(reply=judge_reply) as srv:
        if where == "userinfo":
            base_url = f"http://user:{SECRET}@127.0.0.1:{srv.port}/v1"
        else:
            base_url = f"http://127.0.0.1:{srv.port}/v1?api-key={SECRET}"
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[backends.openai]\nbase_url = "{base_url}"\nbackoff_base = 0.01\nmax_retries = 0\n')
        code = main(
            [
                "annotate",
                str(tmp_path / "m"),
                "--model",
                "openai:m",
                "--store",
                str(db),
                "--config",
                str(cfg),
                "--no-progress",
            ]
        )
        assert code in (0, 1)
        assert srv.log, "the backend reached the loopback server"
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err
    with Store(db) as st:
        [run] = st.runs()
        assert "127.0.0.1" in json.dumps(run.config)
    for f in tmp_path.glob("s.db*"):
        assert SECRET.encode() not in f.read_bytes(), f
    for fmt in ("jsonl", "vhd11k-csv"):
        target = tmp_path / f"a.{fmt}"
        assert main(["export", str(db), "--format", fmt, "--include-unparsed", "-o", str(target)]) == 0
        assert SECRET not in target.read_text()
    assert main(["show", str(db), str(tmp_path / "m" / "img_000.png"), "--json"]) in (0, 1, 2)
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err


def test_detector_identities_hide_url_secrets() -> None:
    from vhd.detectors.base import Detector

    class Plain(Detector):
        name = "plain"

        async def predict_images(self, kind, images):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    ident = Plain("p", None, {"base_url": f"https://u:{SECRET}@h/v1?token={SECRET}", "threshold": 0.5}).identity()
    assert SECRET not in json.dumps(ident)
    assert ident["options"]["threshold"] == 0.5


KEY = "sk-test-SECRET123"


def _b64(text: str, urlsafe: bool = False) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(text.encode()).decode()


def test_a_basic_credential_is_hidden_by_shape_and_as_a_known_secret() -> None:
    echoed = f"Incorrect API key provided: Basic {_b64('user:' + KEY)}"
    assert redact_text(echoed) == "Incorrect API key provided: Basic ***"  # base64 of user:password
    assert redact_text("basic information, Basic Training, a basic dXNlcg== value") == (
        "basic information, Basic Training, a basic dXNlcg== value"  # words, and base64 without a colon
    )
    remember_secret(KEY)
    # the key inside a longer base64 text, whatever comes before it (each byte alignment)
    for prefix in ("user:", "me:", "x:", "a-longer-user-name:"):
        for urlsafe in (False, True):
            wrapped = _b64(prefix + KEY + "&more", urlsafe)
            assert redact_text(f"echo [{wrapped}] end") == "echo [***] end", (prefix, urlsafe)


@pytest.mark.parametrize(
    "form",
    [
        KEY,
        quote(KEY, safe=""),
        quote("pa ss/wo+rd=1", safe=""),
        quote("pa ss/wo+rd=1", safe="").lower(),
        quote_plus("pa ss/wo+rd=1"),
        _b64(KEY),
        _b64(KEY).rstrip("="),
        _b64(KEY, urlsafe=True),
        _b64("pa ss/wo+rd=1"),
    ],
)
def test_every_known_secret_form_is_hidden(form: str) -> None:
    remember_secret(KEY, "pa ss/wo+rd=1")
    assert redact_text(f"the reply said {form}, then more") == "the reply said ***, then more"
    assert redact({"reason": f"x {form}"}) == {"reason": "x ***"}


def test_short_values_and_unknown_text_are_left_alone() -> None:
    remember_secret("abc", 12345, None)  # too short, not text
    assert known_secrets() == ()
    text = "No, plain colours: 3 squares, a basic shape. Bearer of good news."
    assert redact_text(text) == text
    forget_secrets()
    remember_secret(KEY)
    assert known_secrets() == (KEY,)
    forget_secrets()
    assert redact_text(f"key {KEY}") == "key ***"  # still caught by shape (sk-...)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://gw.example.com/sk-path-SECRET99/v1", "https://gw.example.com/***/v1"),
        ("https://gw.example.com/key-abcdefgh12345/v1/chat", "https://gw.example.com/***/v1/chat"),
        ("https://gw/v1/0123456789abcdef0123456789abcdef/chat", "https://gw/v1/***/chat"),
        ("https://gw/Zq7abc123SECRETvalueXYZ12/v1?x=1", "https://gw/***/v1?x=1"),
        ("http://127.0.0.1:8000/v1/chat/completions", "http://127.0.0.1:8000/v1/chat/completions"),
        (
            "https://n.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18/chat",
            "https://n.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18/chat",
        ),
        (
            "https://hf.co/Qwen/Qwen2-VL-2B-Instruct/resolve/main",
            "https://hf.co/Qwen/Qwen2-VL-2B-Instruct/resolve/main",
        ),
    ],
)
def test_keys_in_url_paths(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert redact_text(f"POST {url} failed") == f"POST {expected} failed"


def test_url_and_config_secrets_are_remembered() -> None:
    url = "http://me:pa55word%21@h:9/sk-path-SECRET22222/v1?api-version=1&api-key=q-SECRET3"
    assert url_secrets(url) == [
        "me:pa55word%21",
        "me:pa55word!",
        "pa55word%21",
        "pa55word!",
        "sk-path-SECRET22222",
        "q-SECRET3",
    ]
    remember_secrets_in(
        {"base_url": url, "extra_body": {"api_key": "body-SECRET44", "top_k": 20}, "max_tokens_field": "max_tokens"}
    )
    assert set(known_secrets()) == {*url_secrets(url), "body-SECRET44"}  # not "max_tokens"
    assert redact_text(f"Basic {_b64('me:pa55word!')} {_b64('body-SECRET44')}") == "Basic *** ***"


def test_config_show_hides_secrets_unless_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secrets = ["userinfo-SECRET1", "sk-path-SECRET22222", "query-SECRET3", "body-SECRET44"]
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        "[backends.openai]\n"
        f'base_url = "http://user:{secrets[0]}@127.0.0.1:9/{secrets[1]}/v1?api-key={secrets[2]}"\n'
        f'extra_body = {{ api_key = "{secrets[3]}", top_k = 20 }}\n'
        'max_tokens_field = "max_completion_tokens"\n'
    )
    for extra in ([], ["--json"]):
        assert main(["config", "show", "--config", str(cfg), *extra]) == 0
        out = capsys.readouterr().out
        assert not [s for s in secrets if s in out], out
        assert "127.0.0.1:9" in out and "max_completion_tokens" in out and "top_k" in out
    assert main(["config", "show", "--config", str(cfg), "--show-secrets"]) == 0
    out = capsys.readouterr().out
    assert all(s in out for s in secrets)


def test_the_store_redacts_replies_reasons_errors_and_summaries(tmp_path: Path) -> None:
    from tests.store.conftest import Builder
    from vhd.records import Role, Turn

    remember_secret(KEY)
    build = Builder(tmp_path)
    with Store(tmp_path / "s.db") as st:
        run = st.start_run({"base_url": f"http://h/{KEY}/v1"}, "cfg", {}, "p", command=f"vhd annotate --x {KEY}")
        s = build.sample(1)
        turns = [Turn(Role.AFFIRMATIVE, 1, f"key was Bearer {KEY}"), Turn(Role.JUDGE, 1, f"Yes, {_b64(KEY)}")]
        ann = build.annotation(s, run, reason=f"because {quote(KEY)}", turns=turns, error=f"Basic {_b64('u:' + KEY)}")
        st.save_annotation(ann, s)
        st.finish_run(run, {"stopped": f"failed with: {KEY}", "prompt_tokens": 3})
        [(_, got)] = list(st.iter_annotations())
        assert [t.text for t in got.turns] == ["key was Bearer ***", "Yes, ***"]
        assert got.verdict.reason == "because ***" and got.error == "Basic ***"
        [info] = st.runs()
        assert info.summary == {"stopped": "failed with: ***", "prompt_tokens": 3}
    for f in tmp_path.glob("s.db*"):
        assert KEY.encode() not in f.read_bytes()
