"""The failure classifier's rule tables and its reading of a provider body.

Called by ``fxtr.models._classify`` only: ``category_from_http`` there reads a body with
``body_signals(body, headers)`` (its structured codes, its message text, a status embedded in
it) and tries the tables below in the order its module docstring gives (``CODE_RULES`` on the
codes; ``OUTPUT_LIMIT``, ``MESSAGE_RULES`` and ``WIDER_FAMILIES`` on the text, with links
removed by ``URL``; ``SERVER_ERROR_CODE`` last). This module decides no category itself and
imports nothing of fxtr.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# -- rules on structured fields (codes, types, exception names), lower-cased -----------------
CODE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("refusal", re.compile(r"\brefusal\b")),
    (
        "content_filter",
        re.compile(
            r"content_?filter|content_?policy|responsibleaipolicyviolation|"
            r"data_?inspection_?failed|unsafe|moderation|\bsafety\b|prohibited_content|"
            r"blocklist|blocked_prompt|sensitive|\bspii\b|image_safety|recitation|guardrail"
        ),
    ),
    (
        "context_overflow",
        re.compile(
            r"context_?length_?exceeded|exceed_context_size|context_exceeded|"
            r"context_window_exceeded|request_too_large_for_model|prompt_too_long|"
            r"max_tokens_per_request|input_too_large|tokens?_limit_(reached|exceeded)"
        ),
    ),
    (
        "billing",
        re.compile(
            r"billing|insufficient_?(funds|balance|credits?)|credits?_?error|budget|arrearage|"
            r"payment_required|spend_limit|overdue"
        ),
    ),
    ("quota", re.compile(r"quota")),
    (
        "rate_limit",
        re.compile(r"rate_?limit|throttl|too_?many_?requests|resource_exhausted"),
    ),
    ("overloaded", re.compile(r"overloaded|unavailable|capacity")),
    ("timeout", re.compile(r"timeout|timed_?out|deadline_exceeded")),
)

SERVER_ERROR_CODE = re.compile(r"\bapi_error\b|\bserver_error\b|\binternal_(server_)?error\b")
"""A code that says the provider failed (``api_error``, ``server_error``): the stand-in status
of an error event inside a 200 stream, tried only after the message, which may say more
(llama.cpp sends its context overflows as ``server_error``). Where the response has a real
status it decides (Ollama types every error ``api_error``, a 400 included)."""

# -- rules on message text, lower-cased -------------------------------------------------------
OUTPUT_LIMIT = re.compile(
    r"supports at most \d+ (completion|output) tokens|"
    r"max_(completion_|output_|new_)?tokens[`']? is too large: \d+\.? this model supports at most|"
    r"valid range of max_(completion_|output_|new_)?tokens|"
    r"max_(completion_|output_|new_)?tokens[`']? (value )?(range|must be in|should be in) |"
    r"max_(completion_|output_|new_)?tokens[`']? (\(\d+\) )?cannot exceed \d+|"
    r"maximum allowed number of output tokens|"
    r"max_(completion_|output_|new_)?tokens`?'?:? integer above maximum|"
    r"max_tokens`? must be less than or equal to|"
    r"maximum tokens you requested exceeds? the model limit|"
    r"maxoutputtokens value of \d+ but the supported range|"
    r"does not support max[ _]tokens > \d+|"
    r"error: `max_new_tokens` must be <=|"
    r"max(imum)? output tokens? (is|are|of) \d+|"
    r"exceeds? the (model's )?maximum (number of )?output tokens"
)
"""Asking for more output than the model can produce: not a context overflow."""


class Phrases:
    """One rule's phrasings, ASCII and other (Chinese, Japanese).

    The others are tried only on text that is not all ASCII, so English bodies do not pay
    for them.
    """

    __slots__ = ("ascii", "other")

    def __init__(self, ascii_phrases: str, other_phrases: str | None = None) -> None:
        self.ascii = re.compile(ascii_phrases)
        self.other = re.compile(other_phrases) if other_phrases else None

    def search(self, text: str) -> bool:
        if self.ascii.search(text):
            return True
        return self.other is not None and not text.isascii() and bool(self.other.search(text))


MESSAGE_RULES: tuple[tuple[str, Phrases], ...] = (
    (
        "context_overflow",
        Phrases(
            r"context[ _]?(length|window|size|limit)|"
            r"maximum context|maximum prompt length|n_ctx\b|prompt( tokens?)? (is |are )?too long|"
            r"input( tokens?)? (is |are )?too long|too long and exceeds|maximum model length|"
            r"max_model_len|max_seq(uence)?_len(gth)?\b|maximum sequence length|context shift|"
            r"input length|too many input tokens|"
            r"input token count|`inputs` must have less than \d+ tokens|"
            r"too many (input |prompt )?tokens(?!,? please wait| per )|"
            r"max(imum)? size:? \d+ tokens|input_too_large|"
            r"exceeds? (the |its )?(token )?budget \(\d+ tokens?\)|"
            r"reduce the length of the (messages|prompt)|"
            r"exceeds? the (model'?s? )?(maximum )?token limit|size limit exceeded by \d+ tokens|"
            r"exceeded model token limit|request_too_large_for_model|"
            r"prompt token count of \d+ exceeds|tokens? exceeds? the limit|"
            r"prompt exceeds? (the )?max(imum)? (context |token )?length|"
            r"input exceeds? (the )?max(imum)? (context |token )?length|"
            r"exceeds? (the )?max(imum)? (message |input |prompt )tokens|"
            r"when context the overflows|tokens to keep from the initial prompt|"
            r"`inputs` tokens \+ `max_new_tokens`|input tokens exceed|"
            r"requested \d+ tokens, max \d+ tokens per request|"
            r"total number of tokens.{0,40}cannot exceed|"
            r"current length is \d+ while limit is \d+|maximum number of tokens allowed|"
            r"longitud (máxima )?del contexto|longueur (maximale )?du contexte",
            r"上下文(长度|窗口)|超出(模型)?上下文|超过(模型)?上下文|输入长度|超出最大长度|超过最大长度|"
            r"长度超(过|出)|超长|(输入|内容|文本|提示|消息|上下文|prompt|token)[^\uff0c\u3002,.]{0,6}过长|"
            r"コンテキスト長",
        ),
    ),
    (
        "content_filter",
        Phrases(
            r"content[ _]?filter|content[ _]?policy|content management policy|"
            r"guardrail\w* (checks? .{0,40}failed|intervened|blocked|denied)|"
            r"(violated|blocked by|denied by) (a |the |your )?guardrail|"
            r"responsibleaipolicyviolation|moderation|flagged|safety system|"
            r"violat\w* (our |the )?(usage|content) polic|inappropriate content|"
            r"data ?inspection ?failed|unsafe content|content exists risk|sensitive content|"
            r"considered high risk|policy violation|safety (filter|reasons|polic)",
            r"不安全|敏感|违规|违禁|审核未通过|内容安全|不適切",
        ),
    ),
    (
        "quota",
        Phrases(
            r"quota\b(?! project)|quota_exceeded|servicequotaexceeded|resource has been exhausted|"
            r"free allocation|used up your|daily (api |request |token )*limit|"
            r"weekly (api |request |token )*limit|monthly (api |request |token )*limit|"
            r"hours? usage limit|cuota\b",
            r"额度|配额|クォータ",
        ),
    ),
    (
        "billing",
        Phrases(
            r"credit balance|billing|payment required|payment_required|"
            r"insufficient[_ ](account )?(funds|balance|credits?)|balance is insufficient|"
            r"budget has been exceeded|exceeded ?budget|over budget|budget[_ ]?exceeded|"
            r"spend(ing)? limit|maximum (monthly )?spend|credit limit|payment method|"
            r"purchase (more )?credits|more credits|add credits|"
            r"run out of credits|ran out of credits|credits? (are|is) required|usage limits?\b|"
            r"account is not active|in good standing|top up|recharge|arrears|overdue|"
            r"saldo insuficiente|solde insuffisant",
            r"余额|欠费|充值|账户.{0,6}(不足|用完)|残高",
        ),
    ),
    (
        "rate_limit",
        Phrases(
            r"rate[ _-]?limit|throttl|too many requests|too_many_requests|"
            r"tokens per (min|minute|day|hour)|requests per (min|minute|day|hour)|"
            r"per[- ]minute limit|"
            r"tpm\b|rpm\b|tpd\b|rpd\b|too many tokens,? please wait|qps\b",
            r"过于频繁|频率(过高|超|限制)|速率(达到|超|限制)|限流|并发(数)?(过高|超|限制|上限)",
        ),
    ),
    (
        "overloaded",
        Phrases(
            r"overloaded|server is busy|no capacity|capacity exceeded|at capacity|"
            r"temporarily unavailable|service ?unavailable|high demand",
            r"繁忙|过载",
        ),
    ),
)

WIDER_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "context_overflow",
        re.compile(
            r"\b(prompt|input|context|conversation|messages?|request|history)"
            r"[^.:;'\"`]{0,40}?\b(is |are )?(too long|exceeds?|exceeded|longer than)\b"
            r"[^.:;'\"`]{0,40}?\b(tokens?\b(?! rate| per)|context|window)|"
            r"\b(prompt|input|context|conversation|messages?) (length )?(is |are )?too long|"
            r"\bprompt length\b[^.:;]{0,30}\bexceeds?|"
            r"\btoken limit (exceeded|reached)|exceeds? (the )?(model'?s? )?token limit"
        ),
    ),
    (
        "output_limit",
        re.compile(
            r"\b(output|completion|max_(completion_|output_|new_)?tokens)\b[^.:;]{0,40}?"
            r"\b(exceeds?|larger than|greater than|too large)\b"
            r"[^.:;]{0,30}?\b(maximum|max|limit|allowed)\b"
        ),
    ),
    (
        "content_filter",
        re.compile(
            r"\bblocked\b[^.:;]{0,40}?\b(safety|harmful|prohibited|unsafe|inappropriate|"
            r"(content|usage|safety) polic)|"
            r"\b(prohibited|harmful|disallowed) content\b"
        ),
    ),
    (
        "billing",
        re.compile(
            r"\b(subscription|free trial|trial period)\b[^.:;]{0,20}\b(expired|ended|lapsed|over)\b"
        ),
    ),
)
"""Wider phrasing families, tried only when no rule above named anything: a window, an
output cap, a content block or a lapsed subscription said in words of their own (a subject,
a verb of excess and a unit). A rate named in the text ("token rate limit") keeps them out."""

URL = re.compile(r"https?://\S+")
"""Links in messages (``.../settings/billing``, ``.../rate-limits``) say nothing of the error."""

_CODE_KEYS = frozenset(
    (
        "code",
        "type",
        "status",
        "__type",
        "error_type",
        "errortype",
        "reason",
        "name",
        "error_code",
        "finish_reason",
        "finishreason",
        "stop_reason",
        "blockreason",
    )
)
_TEXT_KEYS = frozenset(
    (
        "message",
        "detail",
        "error",
        "msg",
        "error_message",
        "errormessage",
        "description",
        "details",
        "title",
        "error_msg",
        "raw",
        "param",
        "exception",
    )
)
"""Fields holding message text; ``raw`` is OpenRouter's copy of the upstream provider's error,
``param`` where a gateway puts the upstream message (new-api's ``upstream_error``),
``exception`` where an agent server keeps the upstream failure behind its own 500."""
_STATUS_KEYS = frozenset(
    ("code", "status", "statuscode", "status_code", "http_status", "raw_status_code")
)


_NESTED_START = frozenset(("{", "[", "e", "d"))
"""First characters of a string that may hold a nested document: JSON, or an SSE stream
(``event:``/``data:``) that a gateway logged as a string (Helicone's ``streamed_data``)."""


class Signals:
    """What a body says: its structured codes, its message text, an embedded status."""

    __slots__ = ("codes", "embedded_status", "text")

    def __init__(self) -> None:
        self.codes: list[str] = []
        self.text: list[str] = []
        self.embedded_status: int | None = None


def _as_status(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and 400 <= value <= 599 else None


def _parse_text(text: str) -> Any:
    """A JSON body sent as text, an SSE stream's events, else the text itself.

    The events are the ``data:`` lines, and a bare JSON document after them (Gemini ends a
    stream that way when the model is overloaded mid-answer).
    """
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    if "data:" in stripped:
        events, rest = [], []
        for line in stripped.splitlines():
            if line.startswith("data:"):
                try:
                    events.append(json.loads(line[5:].strip()))
                except ValueError:
                    continue
            elif not line.startswith(_SSE_FIELDS):
                rest.append(line)
        tail = "\n".join(rest).strip()
        if tail[:1] == "{":  # a bare JSON error after the events (Gemini's 503 mid-stream)
            try:
                events.append(json.loads(tail))
            except ValueError:
                pass
        if events:
            return events
    return text


_SSE_FIELDS = ("event:", "id:", "retry:", ":")


def _walk(node: Any, out: Signals, depth: int) -> None:
    if depth > 6:
        return
    if isinstance(node, Mapping):
        for key, value in node.items():
            name = str(key).lower()
            if isinstance(value, str):
                if name in _STATUS_KEYS and out.embedded_status is None:
                    out.embedded_status = _as_status(value)
                if name in _CODE_KEYS:
                    out.codes.append(value.lower())
                if name == "blockreason" and value:  # Gemini: a prompt blocked, any reason
                    out.codes.append("blocked_prompt")
                elif "guardrail" in name and value.upper().endswith("INTERVENED"):
                    out.codes.append("guardrail")  # Bedrock: amazon-bedrock-guardrailAction
                parsed = _parse_text(value) if value[:1] in _NESTED_START else value
                if parsed is not value:  # a JSON document or an SSE stream kept as a string
                    _walk(parsed, out, depth + 1)
                elif name in _TEXT_KEYS:
                    out.text.append(value.lower())
            elif isinstance(value, int) and name in _STATUS_KEYS:
                if out.embedded_status is None:
                    out.embedded_status = _as_status(value)
            elif isinstance(value, (Mapping, list)):
                if name.endswith("exception"):  # an event-stream exception event
                    out.codes.append(name)
                _walk(value, out, depth + 1)
    elif isinstance(node, list):
        for item in node[:8]:
            if isinstance(item, str):
                out.text.append(item.lower())
            else:
                _walk(item, out, depth + 1)


def body_signals(body: Any, headers: Mapping[str, str] | None = None) -> Signals:
    """The structured codes and the message text of a provider body (and its headers)."""
    out = Signals()
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        body = _parse_text(body)
        if isinstance(body, str):
            out.text.append(body.lower())
            body = None
    if body is not None:
        _walk(body, out, 0)
    if headers:
        for key in ("x-amzn-errortype", "x-amzn-error-type"):
            value = _header(headers, key)
            if value:
                out.codes.append(value.split(":", 1)[0].lower())
    return out


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        for key, item in headers.items():
            if key.lower() == name:
                return item
    return value
