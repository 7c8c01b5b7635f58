"""Credentials are redacted in every form they travel in (issue 15 item 9)."""

from __future__ import annotations

import base64
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fxtr import secrets

KEY = "sk-proj-Zq8v3LmN0pQrStUvWxYz1234567890abcd"


@pytest.fixture
def key_in_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    secrets._env_seen = (-1.0, frozenset())
    return KEY


def test_every_form_of_an_environment_key_is_redacted(key_in_env: str) -> None:
    bare = KEY.removeprefix("sk-proj-")
    b64 = base64.b64encode(KEY.encode()).decode()
    basic = base64.b64encode(f":{KEY}".encode()).decode()
    url = base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("=")
    text = f"key {KEY}; bare {bare}; b64 {b64}; basic {basic}; url {url}; end"
    out = secrets.redact(text)
    for form in (KEY, bare, b64, basic, url):
        assert form not in out
    assert out.startswith("key [redacted]; bare [redacted]; b64 [redacted]")
    assert out.endswith("; end")
    assert not secrets.contains_secret(out)


def test_registered_values_are_redacted_and_short_values_are_not() -> None:
    secrets.register("anthropic-custom-credential-9f8e7d")
    secrets.register("short")
    assert secrets.redact("x anthropic-custom-credential-9f8e7d y") == "x [redacted] y"
    assert secrets.redact("a short word") == "a short word"


def test_names_that_do_not_hold_secrets_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FXTR_DEMO_OUTAGE", "a-value-that-is-not-secret")
    secrets._env_seen = (-1.0, frozenset())
    assert "a-value-that-is-not-secret" in secrets.redact("a-value-that-is-not-secret")


def test_key_shaped_text_and_bearer_tokens(key_in_env: str) -> None:
    assert secrets.redact("Authorization: Bearer abc.def.ghi") == "Authorization: [redacted]"
    assert secrets.redact("other sk-ant-api03-QQQQQQQQQQ key") == "other [redacted] key"


def test_log_records_are_redacted(key_in_env: str, caplog: pytest.LogCaptureFixture) -> None:
    secrets.install_log_filter("fxtr.test-secrets")
    secrets.install_log_filter("fxtr.test-secrets")
    logger = logging.getLogger("fxtr.test-secrets")
    assert sum(isinstance(f, secrets.RedactingFilter) for f in logger.filters) == 1
    with caplog.at_level(logging.INFO, logger="fxtr.test-secrets"):
        try:
            raise RuntimeError(f"401 for {KEY}")
        except RuntimeError:
            logger.exception("call failed with key %s", KEY)
    text = caplog.text
    assert KEY not in text
    assert "call failed with key [redacted]" in text


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_redaction_removes_the_key_wherever_it_stands(filler: str) -> None:
    secrets.register(KEY)
    out = secrets.redact(filler + KEY + filler)
    assert KEY not in out
    assert not secrets.contains_secret(out)


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@given(
    before=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    after=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    glued=st.text(alphabet=_B64, max_size=7),
    urlsafe=st.booleans(),
    padded=st.booleans(),
    bare=st.booleans(),
)
def test_base64_of_a_key_is_redacted_at_any_alignment(
    before: str, after: str, glued: str, urlsafe: bool, padded: bool, bare: bool
) -> None:
    """Issue 28 item 7: ``user:KEY``, ``Bearer KEY``, a JSON body: any text around the key,
    base64-encoded (standard or URL-safe, padded or not) and glued to other base64 text."""
    secrets.register(KEY)
    key = KEY.removeprefix("sk-proj-") if bare else KEY
    data = (before + key + after).encode()
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    encoded = encoded if padded else encoded.rstrip("=")
    out = secrets.redact(f"Authorization: Basic {glued}{encoded} and more")
    assert out.startswith("Authorization: Basic ") and out.endswith(" and more"), out
    assert "[redacted]" in out
    assert not secrets.contains_secret(out)
    for run in secrets._B64_RUN.findall(out):
        for decoded in secrets._decodings(run):
            assert key.encode() not in decoded, (out, decoded)


def test_base64_of_a_bearer_header_is_redacted_without_knowing_the_key() -> None:
    """``Bearer <anything>`` is key-shaped: its base64 is redacted even for an unknown key."""
    token = base64.b64encode(b"Bearer not-a-known-key-0123456789").decode()
    assert secrets.redact(f"token={token};") == "token=[redacted];"


def test_digests_ids_and_words_are_left_alone(key_in_env: str) -> None:
    text = (
        "fingerprint 3f6da97e0c1b2a3d4e5f60718293a4b5, task 09123dc0-fb12-8e09-4a4f-7e430ea0ab83, "
        "address qa.evaluate/answer[model=a,prompt=p1], supercalifragilistic, SGVsbG8gd29ybGQh"
    )
    assert secrets.redact(text) == text


def test_a_key_given_to_a_client_is_redacted_without_its_prefix_too() -> None:
    """A key passed as ``api_key=`` (not from the environment) is a known credential."""
    from fxtr.models import OpenAIChatAPI

    key = "sk-proj-GivenNotFromEnv0123456789abcdef"
    OpenAIChatAPI("gpt-4o-mini", api_key=key)
    bare = key.removeprefix("sk-proj-")
    assert secrets.redact(f"echo {bare} end") == "echo [redacted] end"


def test_a_base64_run_judged_clean_is_redacted_once_its_credential_is_known() -> None:
    # each base64 run is decoded once and its verdict remembered: a verdict belongs to the
    # credentials known when it was made, never to the ones registered after it
    late = "late-registered-credential-5c4b3a"
    run = base64.b64encode(f"user:{late}".encode()).decode()
    text = f"Authorization: Basic {run}"
    assert secrets.redact(text) == text
    assert secrets.redact(text) == text  # the remembered verdict
    secrets.register(late)
    assert secrets.redact(text) == "Authorization: Basic [redacted]"


def _reference_redact(text: str) -> str:
    """``redact`` without its shortcuts: every base64 run decoded, every pattern applied."""
    pattern, decoded = secrets._patterns()
    text = secrets._B64_RUN.sub(
        lambda m: "[redacted]" if secrets._hides_secret(m.group(0), decoded) else m.group(0),
        text,
    )
    if pattern is not None:
        text = pattern.sub("[redacted]", text)
    return secrets._KEY_LIKE.sub("[redacted]", text)


@given(st.from_regex(secrets._KEY_LIKE, fullmatch=True))
def test_every_key_shaped_text_starts_as_the_shortcut_expects(text: str) -> None:
    # redact skips the key-shaped pattern where none of these is in the text
    assert text.startswith(secrets._KEY_LIKE_STARTS)


_ODD = "pw~~~???~~>>??zz"
"""A credential whose base64 holds ``+`` and ``/`` (``-`` and ``_`` in the URL-safe one)."""
_HIDDEN = st.sampled_from(
    [KEY, KEY.removeprefix("sk-proj-"), _ODD, "sk-abcdef123", "sk-ant-a*b-c_d9", "Bearer\tq", "x"]
)


def _encoded(before: str, hidden: str, after: str, urlsafe: bool, padded: bool) -> str:
    data = (before + hidden + after).encode()
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    return text if padded else text.rstrip("=")


_PIECE = st.one_of(
    # before: any alignment of what is hidden in the decoded text
    st.builds(
        _encoded,
        st.text('ab:{}" \n-_é', max_size=4),
        _HIDDEN,
        st.text('xy:"}', max_size=4),
        st.booleans(),
        st.booleans(),
    ),
    st.text("0123456789abcdef", min_size=12, max_size=70),  # digests
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=", max_size=30),
    st.sampled_from([" ", "\n", '"', ":", ",", "{}", "é", KEY[:12]]),
)


@given(st.lists(_PIECE, max_size=12).map("".join), st.booleans())
def test_redaction_with_its_shortcuts_is_redaction_without_them(text: str, known: bool) -> None:
    """The substring checks ``redact`` starts with (``_may_hide``, ``_KEY_LIKE_STARTS``)
    never let through what finding and decoding every base64 run would redact."""
    secrets._env_seen = (-1.0, frozenset())
    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in secrets.os.environ if secrets._SECRET_NAME.search(n.upper())]:
            mp.delenv(name)
        mp.setattr(secrets, "_registered", {_ODD} if known else set())
        if known:
            mp.setenv("OPENAI_API_KEY", KEY)
        secrets._env_seen = (-1.0, frozenset())
        assert secrets.redact(text) == _reference_redact(text)
    secrets._env_seen = (-1.0, frozenset())


def test_a_record_of_digests_and_words_is_cleared_without_decoding_a_run(
    key_in_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(secrets, "_registered", set())  # only the key in the environment
    record = (
        '{"address": "bench.grid/add[x=0,y=0]", "step": "bench.add", "status": "succeeded", '
        '"fingerprint": "5678bef0f73f17b79a45ea64b45105dece7d2279d2501cb0e619229f3ce62838", '
        '"input_fingerprints": {"a": "bc7ae12235cf5b0873a4d4587f19427c08345b78cfca253ef5"}}'
    )
    _, decoded = secrets._patterns()
    assert not secrets._may_hide(record, decoded)
    for before in ("", "u", "us"):  # the three byte alignments of the key in the decoding
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            run = encode(f"{before}:{KEY[8:]}".encode()).decode()
            assert secrets._may_hide(f"{record} {run}", decoded), run
