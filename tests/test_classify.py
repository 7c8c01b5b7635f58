"""The failure classifier, from real-shaped provider bodies through respx and from exceptions."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st

from fxtr.models import (
    AnthropicMessagesAPI,
    ContentText,
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    OpenAIChatAPI,
    UserMessage,
)
from fxtr.models._classify import category_from_http
from fxtr.tracing import REASONS, classify, failure_category

REQUEST = ModelRequest(context=(UserMessage(content=(ContentText(text="hi"),)),))


def oai(message, type_=None, code=None, param=None):
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def ant(type_, message):
    return {
        "type": "error",
        "error": {"type": type_, "message": message},
        "request_id": "req_011CbrFTcXhtiMzr3s6EocF7",
    }


# (provider, status, body, category, reason): bodies as providers and proxies send them
CASES = [
    (
        "openai",
        429,
        oai(
            "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29500.",
            "tokens",
            "rate_limit_exceeded",
        ),
        "rate_limit",
        "budget",
    ),
    (
        "openai",
        429,
        oai(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        ),
        "quota",
        "budget",
    ),
    (
        "openai",
        400,
        oai(
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        ),
        "context_overflow",
        "context_overflow",
    ),
    (
        "openai",
        400,
        oai(
            "max_tokens is too large: 10000. This model supports at most 4096 completion tokens, whereas you provided 10000.",
            "invalid_request_error",
            None,
            "max_tokens",
        ),
        "output_limit",
        "unknown",
    ),
    (
        "openai",
        400,
        oai(
            "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
            None,
            "content_filter",
            "prompt",
        ),
        "content_filter",
        "refusal",
    ),
    (
        "openai",
        400,
        oai(
            "Your request was rejected as a result of our safety system.",
            "invalid_request_error",
            "content_policy_violation",
        ),
        "content_filter",
        "refusal",
    ),
    (
        "openai",
        401,
        oai(
            "Incorrect API key provided: sk-abc12***************************wxyz.",
            "invalid_request_error",
            "invalid_api_key",
        ),
        "auth",
        "unknown",
    ),
    (
        "openai",
        404,
        oai(
            "The model `gpt-4-32k-0314` has been deprecated.",
            "invalid_request_error",
            "model_not_found",
        ),
        "not_found",
        "unknown",
    ),
    (
        "openai",
        500,
        oai(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
        ),
        "server_error",
        "unknown",
    ),
    (
        "openai",
        503,
        oai("The engine is currently overloaded, please try again later", "server_error"),
        "overloaded",
        "unknown",
    ),
    (
        "openai",
        403,
        oai(
            "You are not allowed to generate content with this model: your account is suspended for billing reasons.",
            "billing_error",
        ),
        "billing",
        "budget",
    ),
    ("openai", 402, {"detail": "Payment Required"}, "billing", "budget"),
    (
        "openai",
        400,
        {
            "error": {
                "message": "litellm.BadRequestError: OpenAIException - Budget has been exceeded! Current cost: 14.2, Max budget: 10.0",
                "type": None,
                "param": None,
                "code": "400",
            }
        },
        "billing",
        "budget",
    ),
    (
        "openai",
        422,
        {
            "error": {
                "message": "Budget has been exceeded! Current cost: 1000.3, Max budget: 1000.0",
                "type": "budget_exceeded",
                "code": "422",
            }
        },
        "billing",
        "budget",
    ),
    (
        "openai",
        400,
        {
            "error": {
                "message": "Upstream provider error: error code 429 returned by upstream, please retry",
                "type": "upstream_error",
                "code": 400,
            }
        },
        "invalid_request",
        "unknown",
    ),
    (
        "openai",
        413,
        {"error": {"message": "Request Entity Too Large"}},
        "payload_too_large",
        "unknown",
    ),
    (
        "openai",
        401,
        {
            "error": {
                "message": "Authentication Error, ExceededBudget: User=alice over budget. Spend=2.1, Budget=2.0",
                "type": "auth_error",
                "code": "401",
            }
        },
        "billing",
        "budget",
    ),
    (
        "openai",
        400,
        {
            "__type": "ServiceQuotaExceededException",
            "message": "Your request exceeds the service quota for your account.",
        },
        "quota",
        "budget",
    ),
    (
        "openai",
        429,
        {
            "__type": "ThrottlingException",
            "message": "Too many requests, please wait before trying again.",
        },
        "rate_limit",
        "budget",
    ),
    (
        "openai",
        429,
        {
            "error": {
                "code": 429,
                "message": "Resource has been exhausted (e.g. check quota).",
                "status": "RESOURCE_EXHAUSTED",
            }
        },
        "quota",
        "budget",
    ),
    ("openai", 504, "<html><body>504 Gateway Time-out</body></html>", "timeout", "unknown"),
    ("anthropic", 529, ant("overloaded_error", "Overloaded"), "overloaded", "unknown"),
    (
        "anthropic",
        429,
        ant("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
        "rate_limit",
        "budget",
    ),
    (
        "anthropic",
        400,
        ant(
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
        ),
        "billing",
        "budget",
    ),
    (
        "anthropic",
        400,
        ant("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"),
        "context_overflow",
        "context_overflow",
    ),
    (
        "anthropic",
        400,
        ant(
            "invalid_request_error",
            "max_tokens: 128001 > 64000, which is the maximum allowed number of output tokens for claude-opus-4-5-20251101",
        ),
        "output_limit",
        "unknown",
    ),
    (
        "anthropic",
        413,
        ant("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        "payload_too_large",
        "unknown",
    ),
    ("anthropic", 401, ant("authentication_error", "invalid x-api-key"), "auth", "unknown"),
    (
        "anthropic",
        403,
        ant(
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        "permission",
        "unknown",
    ),
    ("anthropic", 404, ant("not_found_error", "model: claude-2.0"), "not_found", "unknown"),
    ("anthropic", 500, ant("api_error", "Internal server error"), "server_error", "unknown"),
    (
        "anthropic",
        403,
        ant(
            "invalid_request_error",
            "This request would exceed your organization's monthly usage limit; contact sales or raise your spend limit.",
        ),
        "billing",
        "budget",
    ),
]


@pytest.mark.parametrize(
    ("provider", "status", "body", "category", "reason"),
    CASES,
    ids=[f"{c[0]}-{c[1]}-{c[3]}-{i}" for i, c in enumerate(CASES)],
)
def test_provider_bodies_through_respx(provider, status, body, category, reason):
    """Each real-shaped failure body gets its category and reason through the client."""

    async def call():
        with respx.mock(assert_all_called=True) as mock:
            content = body if isinstance(body, str) else json.dumps(body)
            if provider == "openai":
                mock.post("https://api.openai.com/v1/chat/completions").respond(
                    status, text=content
                )
                api = OpenAIChatAPI("gpt-4o-mini", api_key="sk-test-key-123456")
            else:
                mock.post("https://api.anthropic.com/v1/messages").respond(status, text=content)
                api = AnthropicMessagesAPI("claude-sonnet-4-5", api_key="sk-ant-test-123456")
            try:
                with pytest.raises(ModelCallError) as info:
                    await api.generate(REQUEST)
            finally:
                await api.aclose()
            return info.value

    error = asyncio.run(call())
    assert error.failure.category == category
    assert error.failure.status_code == status
    assert classify(error) == reason
    assert classify(error.failure) == reason


def test_httpx_status_error_is_read_from_its_response():
    """An httpx.HTTPStatusError raised by user code is classified by status and body."""
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    response = httpx.Response(
        429, json=oai("Rate limit reached", "requests", "rate_limit_exceeded"), request=request
    )
    error = httpx.HTTPStatusError("429", request=request, response=response)
    assert failure_category(error) == "rate_limit"
    assert classify(error) == "budget"


class SDKError(Exception):
    """Shaped like openai.APIStatusError / anthropic.APIStatusError."""

    def __init__(self, status_code, body):
        super().__init__(f"Error code: {status_code}")
        self.status_code = status_code
        self.body = body


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            SDKError(400, oai("...", "invalid_request_error", "context_length_exceeded")),
            "context_overflow",
        ),
        (
            SDKError(
                400,
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "Your credit balance is too low",
                    },
                },
            ),
            "budget",
        ),
        (SDKError(429, None), "budget"),
        (SDKError(529, None), "unknown"),
        (TimeoutError("pricing API timed out"), "tool_error"),
        (ConnectionError("refused"), "tool_error"),
        (ValueError("bad"), "tool_error"),
        (httpx.ConnectTimeout("timed out"), "tool_error"),
        (httpx.ConnectError("refused"), "tool_error"),
        (ModelCallFailure(category="timeout", description="model call timed out"), "unknown"),
        (ModelCallFailure(category="connection", description="refused"), "unknown"),
        (ModelCallFailure(category="refusal", description="no"), "refusal"),
        (ModelCallFailure(category="content_filter", description="no"), "refusal"),
        (ModelCallFailure(category="quota", description="no"), "budget"),
        (ModelCallFailure(category="overloaded", description="no"), "unknown"),
    ],
)
def test_exceptions_and_failures(error, reason):
    """User exceptions are tool_error; SDK errors and failures by their status and category."""
    assert classify(error) == reason


def test_transport_categories():
    """httpx's and httpx2's timeouts and connection errors keep their category (raised by
    user code, they are still the step's tool_error)."""
    import importlib.util

    libraries = [httpx]
    if importlib.util.find_spec("httpx2") is not None:  # openai >= 3's transport
        import httpx2

        libraries.append(httpx2)
    for http in libraries:
        assert failure_category(http.ReadTimeout("t")) == "timeout"
        assert failure_category(http.ConnectError("c")) == "connection"
        assert failure_category(http.RemoteProtocolError("p")) == "connection"
        assert classify(http.ConnectError("c")) == "tool_error"
    assert failure_category(ValueError()) is None


@given(
    st.integers(100, 599),
    st.one_of(
        st.none(),
        st.text(max_size=200),
        st.dictionaries(st.text(max_size=8), st.text(max_size=30), max_size=4),
    ),
)
def test_classifier_is_total(status, body):
    """Any status and body give one of the six reasons, and every 429 is budget."""
    reason = classify(SDKError(status, body))
    assert reason in REASONS
    if status == 429:
        assert reason == "budget"
    if status == 402:
        assert reason == "budget"


class BotocoreClientError(Exception):
    """Shaped like botocore.exceptions.ClientError: the parsed response is a dict."""

    def __init__(self, code, message, status):
        super().__init__(f"An error occurred ({code}): {message}")
        self.response = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }


@pytest.mark.parametrize(
    ("code", "message", "status", "category", "reason"),
    [
        (
            "ThrottlingException",
            "Too many tokens, please wait before trying again.",
            429,
            "rate_limit",
            "budget",
        ),
        (
            "ServiceQuotaExceededException",
            "Your request exceeds the service quota for your account.",
            400,
            "quota",
            "budget",
        ),
        (
            "ValidationException",
            "Input is too long for requested model.",
            400,
            "context_overflow",
            "context_overflow",
        ),
        (
            "ValidationException",
            "Malformed input request, please reformat your input.",
            400,
            "invalid_request",
            "unknown",
        ),
        (
            "ModelTimeoutException",
            "Model has timed out in processing the request.",
            408,
            "timeout",
            "unknown",
        ),
        (
            "ServiceUnavailableException",
            "Service temporarily unavailable.",
            503,
            "overloaded",
            "unknown",
        ),
    ],
)
def test_botocore_client_errors(code, message, status, category, reason):
    """Bedrock through boto3: the exception name, its message and the status decide."""
    error = BotocoreClientError(code, message, status)
    assert failure_category(error) == category
    assert classify(error) == reason


def _http_error(status, content, headers=None):
    request = httpx.Request("POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/x")
    response = httpx.Response(status, content=content, headers=headers or {}, request=request)
    return httpx.HTTPStatusError(str(status), request=request, response=response)


def test_exception_name_in_an_aws_header():
    """AWS puts the exception name in x-amzn-ErrorType; the body may say nothing more."""
    error = _http_error(
        400,
        b'{"message":"Operation not allowed"}',
        {"x-amzn-ErrorType": "ServiceQuotaExceededException:http://internal.amazon.com/"},
    )
    assert (failure_category(error), classify(error)) == ("quota", "budget")
    plain = _http_error(400, b'{"message":"Operation not allowed"}')
    assert (failure_category(plain), classify(plain)) == ("invalid_request", "unknown")


def test_an_sse_stream_is_read_for_its_error_event():
    """A streamed error (Anthropic's `event: error`) is read from its data line."""
    stream = (
        'event: message_start\ndata: {"type":"message_start"}\n\n'
        'event: error\ndata: {"type":"error","error":'
        '{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    assert category_from_http(200, stream) == "overloaded"
    assert category_from_http(None, stream.encode()) == "overloaded"
    # a stream that ends in a bare JSON error document, outside any data: line
    tail = 'data: {"candidates": []}\n\n{\n "error": {"code": 429, "message": "slow down"}\n}\n'
    assert category_from_http(200, tail) == "rate_limit"


def test_an_embedded_status_stands_in_only_where_there_is_none():
    """A 200 stream event's own code 429 is budget; the same code quoted in a 400 is not."""
    event = {"error": {"code": 429, "message": "Resource exhausted, try later."}}
    assert category_from_http(None, event) == "rate_limit"
    assert category_from_http(200, event) == "rate_limit"
    assert category_from_http(400, event) == "invalid_request"


@given(st.integers(400, 599), st.sampled_from(["code", "status", "http_status"]))
def test_a_quoted_status_never_makes_a_400_budget(quoted, field):
    """ "error code 429 returned by upstream" inside a 400: the number is not the status."""
    body = {
        "error": {
            "message": f"Upstream provider error: error code {quoted} returned by upstream",
            field: quoted,
        }
    }
    assert classify(SDKError(400, body)) == "unknown"


def test_links_in_a_message_say_nothing():
    """Words inside URLs (settings/billing, docs/rate-limits) are not signals."""
    body = {"error": {"message": "Bad request. See https://console.example.com/settings/billing"}}
    assert classify(SDKError(400, body)) == "unknown"
    groq = (
        "Rate limit reached for model `llama-3.3-70b-versatile` on tokens per day (TPD). "
        "Upgrade to Dev Tier today at https://console.groq.com/settings/billing"
    )
    assert failure_category(SDKError(429, groq)) == "rate_limit"


def test_a_guardrail_that_blocked_is_a_refusal_and_one_that_routes_is_not():
    """A guardrail that judged the content refuses; "no endpoints match your guardrail
    restrictions" is a routing answer (OpenRouter), whatever word it uses."""
    blocked = {"error": {"message": "Request blocked by the guardrail: PII detected"}}
    assert category_from_http(400, blocked) == "content_filter"
    routing = {"error": {"message": "No endpoints match your guardrail restrictions"}}
    assert category_from_http(404, routing) == "not_found"


def test_a_provider_failure_code_does_not_override_a_client_status():
    """Ollama types every error `api_error`; in a 400 the status says what happened."""
    body = {"error": {"message": "model does not support tools", "type": "api_error"}}
    assert category_from_http(400, body) == "invalid_request"
    assert category_from_http(200, body) == "server_error"


def test_an_agent_servers_exception_field_is_read():
    """A 500 from an agent server that keeps the upstream failure in `exception`."""
    body = {"detail": "Internal Server Error", "exception": "prompt is too long: 9 > 8 maximum"}
    assert category_from_http(500, body) == "context_overflow"


@pytest.mark.parametrize(
    ("status", "message", "category"),
    [
        # a window, a cap, a block said in words of their own: subject, excess, unit
        (400, "Request exceeds model's token limit", "context_overflow"),
        (400, "The conversation is too long, please start a new one", "context_overflow"),
        (400, "Requested output tokens exceed the maximum allowed (8192)", "output_limit"),
        (400, "The response was blocked because it contains prohibited content", "content_filter"),
        (403, "Your free trial has ended", "billing"),
        # the same words where they mean something else
        (413, "Request exceeds the maximum size", "payload_too_large"),
        (400, "Invalid 'messages[0].content': string too long.", "invalid_request"),
        (400, "Requests have exceeded token rate limit of your tier", "rate_limit"),
        (403, "Access blocked by policy: your organization disabled this model", "permission"),
    ],
)
def test_wider_families_only_where_no_rule_named_anything(status, message, category):
    """The last-resort families catch new wordings without taking bytes, rates or access."""
    assert category_from_http(status, {"error": {"message": message}}) == category


def test_a_window_in_tokens_is_not_a_byte_limit():
    """A 413 that states its limit in tokens is the token window; one in bytes is not."""
    tokens = {"error": {"code": "tokens_limit_reached", "message": "Max size: 8000 tokens."}}
    assert category_from_http(413, tokens) == "context_overflow"
    nbytes = {"error": {"message": "Maximum request body size 1048576 exceeded"}}
    assert category_from_http(413, nbytes) == "payload_too_large"


def test_a_rolling_plan_window_is_a_quota_and_a_spend_cap_is_billing():
    """ "5-hour usage limit" of a plan is a quota; a monthly spend limit is billing."""
    plan = {"error": {"type": "rate_limit_error", "message": "5-hour usage limit reached"}}
    assert category_from_http(429, plan) == "quota"
    spend = {"error": {"message": "monthly usage limit reached; raise your spend limit"}}
    assert category_from_http(400, spend) == "billing"


def test_capacity_words_do_not_override_a_client_error_status():
    """ "Service unavailable for account" in a 403 is a permission problem, not an overload."""
    body = {"errors": [{"message": "Service unavailable for this account", "code": 3023}]}
    assert category_from_http(403, body) == "permission"
    assert category_from_http(400, {"error": {"message": "at capacity"}}) == "invalid_request"
    assert category_from_http(503, {"error": {"message": "Service unavailable"}}) == "overloaded"
    assert category_from_http(200, {"error": {"message": "Engine overloaded"}}) == "overloaded"


def test_a_server_error_code_counts_after_the_message():
    """`api_error`/`server_error` name a provider failure unless the message says more."""
    event = 'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"boom"}}\n'
    assert category_from_http(200, event) == "server_error"
    assert classify(SDKError(200, {"error": {"code": "server_error", "message": "x"}})) == "unknown"
    overflow = {"error": {"type": "server_error", "message": "the prompt exceeds the context size"}}
    assert category_from_http(500, overflow) == "context_overflow"


def test_a_document_kept_as_a_string_is_read():
    """A gateway that logs the upstream body as a string (JSON or SSE) under its own key."""
    sse = 'event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"x"}}'
    assert category_from_http(200, {"streamed_data": sse}) == "rate_limit"
    inner = json.dumps({"error": {"code": "context_length_exceeded", "message": "too long"}})
    assert category_from_http(400, {"upstream_body": inner}) == "context_overflow"
    assert category_from_http(400, {"note": "default settings"}) == "invalid_request"


@pytest.mark.parametrize(
    ("message", "category"),
    [
        # the request as a whole over the window: an overflow, whatever max_tokens says
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 32000. This model's maximum"
            " context length is 32768 tokens and your request has 1200 input tokens"
            " (32000 > 32768 - 1200).",
            "context_overflow",
        ),
        (
            "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000,"
            " decrease input length or `max_tokens` and try again",
            "context_overflow",
        ),
        # more output than the model can produce: its cap, not the window
        (
            "max_tokens is too large: 10000. This model supports at most 4096 completion"
            " tokens, whereas you provided 10000.",
            "output_limit",
        ),
        (
            "Unable to submit request because it has a maxOutputTokens value of 100117 but the"
            " supported range is from 1 (inclusive) to 65537 (exclusive).",
            "output_limit",
        ),
        (
            "max_completion_tokens is too large: 200000. This model supports at most 65536",
            "output_limit",
        ),
        ("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]", "output_limit"),
        # windows named by other servers: sequence-length caps, llama.cpp's context shift
        ("prompt length 9000 must be less than max_seq_len (8192)", "context_overflow"),
        ("Input exceeds the maximum sequence length of the model", "context_overflow"),
        ("context shift is disabled", "context_overflow"),
        ("Too many input tokens in this request: 40000 > 32768", "context_overflow"),
        ("max_completion_tokens range is [1, 8192]", "output_limit"),
        ("max_tokens (10000) cannot exceed 8192", "output_limit"),
        # a limit stated in tokens is a window, whatever the status says (GitHub Models: 413)
        ("Request body too large for this model. Max size: 4000 tokens.", "context_overflow"),
        ("Current message (90000 tokens) exceeds budget (65536 tokens)", "context_overflow"),
        ("输入内容过长\uff0c请减少 token 数量", "context_overflow"),
    ],
)
def test_output_cap_and_context_window_are_told_apart(message, category):
    """The rule DESIGN §3 asks for: max_tokens over its cap is unknown, not an overflow."""
    assert category_from_http(400, {"error": {"message": message}}) == category


@pytest.mark.parametrize(
    ("status", "body", "category"),
    [
        (
            400,
            {
                "error": {
                    "code": "1301",
                    "message": "系统检测到输入或生成内容可能包含不安全或敏感内容",
                }
            },
            "content_filter",
        ),
        (429, {"error": {"code": "1113", "message": "余额不足或无可用资源包,请充值。"}}, "billing"),
        (400, {"error": {"message": "请求的上下文长度超出模型限制"}}, "context_overflow"),
        (503, {"error": {"message": "服务器繁忙"}}, "overloaded"),
    ],
)
def test_messages_in_chinese(status, body, category):
    """Providers that answer in Chinese (Zhipu, DeepSeek, Qwen) are read too."""
    assert category_from_http(status, body) == category


# the official SDKs' transport errors ------------------------------------------------------

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")

SDK_URL = {
    "openai": "https://api.openai.com/v1/chat/completions",
    "anthropic": "https://api.anthropic.com/v1/messages",
}
SDK_TRANSPORT = [
    (sdk, name, category)
    for sdk in ("openai", "anthropic")
    for name, category in (("APITimeoutError", "timeout"), ("APIConnectionError", "connection"))
]


def _sdk_error(sdk_name, class_name):
    """A real SDK transport error, built as the SDK builds it (from the request it sent)."""
    sdk = {"openai": openai, "anthropic": anthropic}[sdk_name]
    request = httpx2.Request("POST", SDK_URL[sdk_name])
    if class_name == "APITimeoutError":
        return sdk.APITimeoutError(request=request)
    return sdk.APIConnectionError(request=request)


@pytest.mark.parametrize(("sdk", "name", "category"), SDK_TRANSPORT)
def test_sdk_transport_errors_keep_their_category_and_are_tool_error(sdk, name, category):
    """openai/anthropic APITimeoutError and APIConnectionError: category timeout/connection;
    raised by user code they are the user's tool failing (DESIGN §3), like httpx's."""
    error = _sdk_error(sdk, name)
    assert type(error).__module__.partition(".")[0] == sdk  # the SDK's own class
    assert failure_category(error) == category
    assert classify(error) == "tool_error"


def _raised_by_sdk(sdk_name, raised):
    """The exception the real SDK client raises when its transport raises ``raised``."""

    def handler(request):
        raise raised

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    try:
        if sdk_name == "openai":
            client = openai.OpenAI(api_key="sk-test", max_retries=0, http_client=http)
            call = lambda: client.chat.completions.create(  # noqa: E731
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
            )
        else:
            client = anthropic.Anthropic(api_key="sk-ant-test", max_retries=0, http_client=http)
            call = lambda: client.messages.create(  # noqa: E731
                model="claude-sonnet-4-6",
                max_tokens=16,
                messages=[{"role": "user", "content": "hi"}],
            )
        sdk = {"openai": openai, "anthropic": anthropic}[sdk_name]
        with pytest.raises(sdk.APIConnectionError) as info:
            call()
        return info.value
    finally:
        http.close()


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_sdk_transport_errors_as_the_sdk_raises_them(sdk):
    """Through the SDK client over a MockTransport: a read timeout and a refused connection."""
    timeout = _raised_by_sdk(sdk, httpx2.ReadTimeout("timed out"))
    refused = _raised_by_sdk(sdk, httpx2.ConnectError("refused"))
    assert type(timeout).__name__ == "APITimeoutError"
    assert type(refused).__name__ == "APIConnectionError"
    assert (failure_category(timeout), classify(timeout)) == ("timeout", "tool_error")
    assert (failure_category(refused), classify(refused)) == ("connection", "tool_error")


class APITimeoutError(Exception):
    """User code's own class that happens to share the SDK's name."""


class GatewayDown(openai.APIConnectionError):
    """User code's subclass of an SDK error: the SDK's class is in its MRO."""


def test_sdk_transport_errors_are_matched_by_name_and_package():
    """A same-named class outside the SDKs is not taken; a subclass of the SDK's class is."""
    request = httpx2.Request("POST", SDK_URL["openai"])
    assert failure_category(APITimeoutError("slow")) is None
    assert failure_category(GatewayDown(request=request)) == "connection"
    assert classify(GatewayDown(request=request)) == "tool_error"
    status_error = openai.APIStatusError(
        "Error code: 429",
        response=httpx2.Response(429, request=request, json=oai("Rate limit reached", code="x")),
        body=oai("Rate limit reached", code="rate_limit_exceeded"),
    )
    assert (failure_category(status_error), classify(status_error)) == ("rate_limit", "budget")


@pytest.mark.parametrize(("sdk", "name", "category"), SDK_TRANSPORT)
def test_a_step_raising_an_sdk_transport_error_is_tool_error_with_its_category(sdk, name, category):
    """Raised inside ``client.step``: the step node fails with tool_error, category kept."""
    from fxtr.models import MockModelAPI
    from fxtr.tracing import Client

    client = Client({"m": MockModelAPI("gpt-4o-mini", "x")})
    with client.task("t") as t:
        with pytest.raises(Exception, match="(?i)timed out|connection error"):
            with client.step("fetch-pricing"):
                raise _sdk_error(sdk, name)
    (node,) = t.graph.find(kind="step")
    assert (node.status, node.reason, node.category) == ("failed", "tool_error", category)
