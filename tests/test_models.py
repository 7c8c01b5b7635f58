"""Model clients over httpx (tested with respx), the mock, retries, prices and secrets."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import anyio
import httpx
import pytest
import respx

from fxtr import (
    Array,
    ArrayHandle,
    BoundID,
    Entity,
    StepContext,
    WorkflowContext,
    run,
    step,
    workflow,
)
from fxtr.experiment._encoding import encode_text
from fxtr.models import (
    DEFAULT_FAILURE_CATEGORIES_TO_RETRY,
    AnthropicMessagesAPI,
    ContentText,
    MockModelAPI,
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    ModelResponse,
    OpenAIChatAPI,
    OpenAIResponsesAPI,
    RetryConfig,
    Sampling,
    SystemMessage,
    ToolCall,
    UnknownPriceWarning,
    Usage,
    UserMessage,
    cost_of,
    generate_with_retries,
    set_price,
)
from fxtr.models._limiter import adaptive

KEY = "sk-proj-SECRETSECRETSECRET1234"
REQUEST = ModelRequest(
    context=(
        SystemMessage(content=(ContentText(text="be brief"),)),
        UserMessage(content=(ContentText(text="capital of France?"),)),
    ),
    sampling=Sampling(temperature=0.0, max_tokens=50),
)

CHAT_OK = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Paris.", "refusal": None},
        }
    ],
    "usage": {
        "prompt_tokens": 1000,
        "completion_tokens": 200,
        "total_tokens": 1200,
        "prompt_tokens_details": {"cached_tokens": 400},
    },
}
RESPONSES_OK = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "gpt-4o-2024-08-06",
    "output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Paris.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "lookup",
            "arguments": '{"city": "Paris"}',
        },
    ],
    "usage": {
        "input_tokens": 100,
        "output_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
    },
}
ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "text", "text": "Paris."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use",
    "usage": {
        "input_tokens": 50,
        "output_tokens": 20,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 0,
    },
}


async def _call(api, route_url, status=200, body=None, headers=None):
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(route_url).respond(status, json=body, headers=headers)
        try:
            return await api.generate(REQUEST), route
        finally:
            await api.aclose()


def test_openai_chat_success_usage_and_cost():
    """Chat Completions: text, usage with cached tokens, cost from the price table."""
    api = OpenAIChatAPI("gpt-4o-mini", api_key=KEY)
    response, route = asyncio.run(
        _call(api, "https://api.openai.com/v1/chat/completions", body=CHAT_OK)
    )
    assert response.text == "Paris."
    assert response.usage == Usage(input_tokens=1000, output_tokens=200, cached_input_tokens=400)
    assert response.cost == pytest.approx((600 * 0.15 + 400 * 0.075 + 200 * 0.6) / 1e6)
    sent = json.loads(route.calls.last.request.content)
    assert sent["messages"][0] == {"role": "system", "content": "be brief"}
    assert sent["max_completion_tokens"] == 50 and sent["temperature"] == 0.0
    assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"


def test_openai_compatible_server_by_base_url():
    """base_url includes /v1, as in OpenAI's SDK; any compatible server works."""
    api = OpenAIChatAPI("llama-3", base_url="http://localhost:8000/v1", api_key="x")
    with pytest.warns(UnknownPriceWarning, match="No price for model 'llama-3'"):
        response, _ = asyncio.run(
            _call(api, "http://localhost:8000/v1/chat/completions", body=CHAT_OK)
        )
    assert response.cost is None


def test_openai_responses_success_with_tool_call():
    """Responses API: output text and function calls, usage, cost."""
    api = OpenAIResponsesAPI("gpt-4o", api_key=KEY)
    response, route = asyncio.run(
        _call(api, "https://api.openai.com/v1/responses", body=RESPONSES_OK)
    )
    assert response.text == "Paris."
    assert response.output[1] == ToolCall(id="call_1", name="lookup", arguments={"city": "Paris"})
    assert response.cost == pytest.approx((100 * 2.5 + 10 * 10.0) / 1e6)
    sent = json.loads(route.calls.last.request.content)
    assert sent["input"][1]["content"] == [{"type": "input_text", "text": "capital of France?"}]
    assert sent["max_output_tokens"] == 50


def test_anthropic_success_tool_use_and_cache_reads():
    """Messages API: base_url without /v1, version header, tool_use, cache reads priced."""
    api = AnthropicMessagesAPI("claude-sonnet-4-5", api_key=KEY)
    response, route = asyncio.run(
        _call(api, "https://api.anthropic.com/v1/messages", body=ANTHROPIC_OK)
    )
    assert response.text == "Paris."
    assert response.usage == Usage(input_tokens=150, output_tokens=20, cached_input_tokens=100)
    assert response.cost == pytest.approx((50 * 3 + 100 * 0.3 + 20 * 15) / 1e6)
    request = route.calls.last.request
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    sent = json.loads(request.content)
    assert sent["system"] == "be brief" and sent["max_tokens"] == 50


@pytest.mark.parametrize(
    ("api_cls", "url", "body", "category"),
    [
        (
            OpenAIChatAPI,
            "https://api.openai.com/v1/chat/completions",
            {
                **CHAT_OK,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "refusal": "I'm sorry, I can't help with that.",
                        },
                    }
                ],
            },
            "refusal",
        ),
        (
            OpenAIChatAPI,
            "https://api.openai.com/v1/chat/completions",
            {
                **CHAT_OK,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "content_filter",
                        "message": {"role": "assistant", "content": ""},
                    }
                ],
            },
            "content_filter",
        ),
        (
            OpenAIResponsesAPI,
            "https://api.openai.com/v1/responses",
            {
                **RESPONSES_OK,
                "output": [
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "refusal", "refusal": "I can't assist with that."}],
                    }
                ],
            },
            "refusal",
        ),
        (
            OpenAIResponsesAPI,
            "https://api.openai.com/v1/responses",
            {
                **RESPONSES_OK,
                "status": "failed",
                "output": [],
                "error": {"code": "rate_limit_exceeded", "message": "Rate limit reached"},
            },
            "rate_limit",
        ),
        (
            OpenAIResponsesAPI,
            "https://api.openai.com/v1/responses",
            {
                **RESPONSES_OK,
                "status": "incomplete",
                "output": [],
                "incomplete_details": {"reason": "content_filter"},
            },
            "content_filter",
        ),
        (
            AnthropicMessagesAPI,
            "https://api.anthropic.com/v1/messages",
            {**ANTHROPIC_OK, "content": [], "stop_reason": "refusal"},
            "refusal",
        ),
        (
            AnthropicMessagesAPI,
            "https://api.anthropic.com/v1/messages",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "overloaded",
        ),
    ],
)
def test_failures_inside_200_responses(api_cls, url, body, category):
    """Refusals, content filters and errors inside a 200 body fail the call."""
    api = api_cls(
        "gpt-4o" if api_cls is not AnthropicMessagesAPI else "claude-sonnet-4-5", api_key=KEY
    )
    with pytest.raises(ModelCallError) as info:
        asyncio.run(_call(api, url, body=body))
    assert info.value.failure.category == category


def test_transport_failures_are_categorized():
    """A timeout and a refused connection become timeout and connection failures."""

    async def go(exc):
        with respx.mock() as mock:
            mock.post("https://api.openai.com/v1/chat/completions").mock(side_effect=exc)
            api = OpenAIChatAPI("gpt-4o", api_key=KEY)
            try:
                with pytest.raises(ModelCallError) as info:
                    await api.generate(REQUEST)
            finally:
                await api.aclose()
            return info.value.failure.category

    assert asyncio.run(go(httpx.ReadTimeout("slow"))) == "timeout"
    assert asyncio.run(go(httpx.ConnectError("refused"))) == "connection"


def test_retries_honour_retry_after_with_time_mocked():
    """429s with Retry-After are waited out (sleep mocked), then the call succeeds."""
    slept: list[float] = []

    async def fake_sleep(seconds):
        slept.append(seconds)

    async def go():
        # a static limiter: the adaptive one would also pause the model for the Retry-After
        # seconds, in real time (tests/test_cost_limiter.py tests that pause)
        adaptive.set(False)
        with respx.mock() as mock:
            mock.post("https://api.openai.com/v1/chat/completions").mock(
                side_effect=[
                    httpx.Response(
                        429,
                        json={"error": {"code": "rate_limit_exceeded", "message": "slow down"}},
                        headers={"retry-after": "7"},
                    ),
                    httpx.Response(
                        503,
                        json={"error": {"message": "overloaded", "type": "server_error"}},
                        headers={"retry-after-ms": "1500"},
                    ),
                    httpx.Response(
                        500, json={"error": {"message": "oops", "type": "server_error"}}
                    ),
                    httpx.Response(200, json=CHAT_OK),
                ]
            )
            api = OpenAIChatAPI("gpt-4o-mini", api_key=KEY)
            try:
                return await generate_with_retries(
                    api,
                    REQUEST,
                    retry=RetryConfig(initial_delay=2.0, jitter=0.5),
                    failure_categories_to_retry=DEFAULT_FAILURE_CATEGORIES_TO_RETRY,
                    sleep=fake_sleep,
                    rng=lambda: 1.0,
                )
            finally:
                await api.aclose()

    response = asyncio.run(go())
    assert isinstance(response, ModelResponse)
    assert slept == [7.0, 1.5, 2.0 * 4 * 1.5]


def test_retries_give_up_and_return_the_failure():
    """Non-retryable categories return at once; retryable ones stop at max_attempts."""

    async def go(status, body, attempts):
        with respx.mock() as mock:
            route = mock.post("https://api.openai.com/v1/chat/completions").respond(
                status, json=body
            )
            api = OpenAIChatAPI("gpt-4o-mini", api_key=KEY)

            async def no_sleep(_):
                return None

            try:
                result = await generate_with_retries(
                    api, REQUEST, retry=RetryConfig(max_attempts=attempts), sleep=no_sleep
                )
            finally:
                await api.aclose()
            return result, route.call_count

    failure, calls = asyncio.run(
        go(429, {"error": {"code": "insufficient_quota", "message": "quota"}}, 5)
    )
    assert isinstance(failure, ModelCallFailure) and failure.category == "quota" and calls == 1
    failure, calls = asyncio.run(go(500, {"error": {"message": "x", "type": "server_error"}}, 3))
    assert failure.category == "server_error" and calls == 3


def test_total_time_budget_stops_retrying():
    """A wait past the total budget returns the failure instead of sleeping."""
    api = MockModelAPI(
        "gpt-4o-mini",
        lambda r: ModelCallFailure(category="rate_limit", description="x", retry_after=100.0),
    )

    async def never(_):
        raise AssertionError("should not sleep past the budget")

    result = asyncio.run(
        generate_with_retries(api, REQUEST, retry=RetryConfig(total_budget=10), sleep=never)
    )
    assert isinstance(result, ModelCallFailure) and result.category == "rate_limit"


def test_api_key_never_appears_in_repr_errors_or_encodings():
    """The key is in the request header only: not in repr, failures, or encoded requests."""
    api = OpenAIChatAPI("gpt-4o", api_key=KEY)
    assert KEY not in repr(api) and KEY not in repr(vars(api))
    body = {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}
    with pytest.raises(ModelCallError) as info:
        asyncio.run(_call(api, "https://api.openai.com/v1/chat/completions", 401, body))
    assert KEY not in str(info.value) and KEY not in repr(info.value.failure)
    assert "[redacted]" in info.value.failure.description
    assert KEY not in encode_text(REQUEST) and KEY not in encode_text(info.value.failure)


def test_key_comes_from_the_environment(monkeypatch):
    """Without api_key=, the provider's usual variable is used."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-0000")
    api = AnthropicMessagesAPI("claude-sonnet-4-5")
    _, route = asyncio.run(_call(api, "https://api.anthropic.com/v1/messages", body=ANTHROPIC_OK))
    assert route.calls.last.request.headers["x-api-key"] == "sk-ant-from-env-0000"


def _reference(model, provider, *, input_tokens, output_tokens, cached=0, writes=0):
    """genai-prices' own calculation, the independent figure our costs are checked against."""
    import genai_prices

    usage = genai_prices.Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cached,
        cache_write_tokens=writes,
    )
    ref = {"provider_id": provider} if provider else {}
    return float(genai_prices.calc_price(usage, model, **ref).total_price)


def test_prices_come_from_genai_prices_and_can_be_overridden():
    """Current models are priced by genai-prices (tiers included); dated ids resolve to their
    family; overrides win; an unknown model is None with a warning."""
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    for model, provider in [
        ("gpt-4o-mini", "openai"),
        ("gpt-4o", "openai"),
        ("gpt-5", "openai"),
        ("claude-sonnet-4-5", "anthropic"),
        ("claude-opus-4-5", "anthropic"),
    ]:
        expected = _reference(model, provider, input_tokens=10**6, output_tokens=10**6)
        assert cost_of(model, usage, provider=provider) == pytest.approx(expected, rel=1e-12)
    # one million input tokens is past Sonnet 4.5's 200k tier: $6 + $22.50, not $3 + $15
    assert cost_of("claude-sonnet-4-5", usage) == pytest.approx(28.5)
    assert cost_of("claude-sonnet-4-5-20250929", usage) == cost_of("claude-sonnet-4-5", usage)
    assert cost_of("gpt-4o-2024-08-06", usage) == cost_of("gpt-4o", usage)
    set_price("my-finetune", input=1.0, output=2.0)
    assert cost_of("my-finetune", usage) == pytest.approx(3.0)
    set_price("gpt-4o-mini", input=1.0, output=1.0, cached_input=0.5)
    try:
        cached = Usage(input_tokens=10**6, output_tokens=10**6, cached_input_tokens=10**6)
        assert cost_of("gpt-4o-mini-2024-07-18", cached, provider="openai") == pytest.approx(1.5)
    finally:
        from fxtr.models._prices import PRICES

        del PRICES["gpt-4o-mini"], PRICES["my-finetune"]
    with pytest.warns(UnknownPriceWarning, match="mystery-model-x"):
        assert cost_of("mystery-model-x", usage) is None


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(
    model=st.sampled_from(
        [
            ("gpt-4o-mini", "openai"),
            ("gpt-4.1", "openai"),
            ("gpt-5-mini", "openai"),
            ("claude-sonnet-4-5", "anthropic"),
            ("claude-haiku-4-5", "anthropic"),
            ("claude-opus-4-1", "anthropic"),
            ("gemini-2.5-pro", None),
        ]
    ),
    input_tokens=st.integers(0, 1_500_000),
    output_tokens=st.integers(0, 200_000),
    cached_share=st.floats(0, 1),
    write_share=st.floats(0, 1),
)
def test_costs_equal_genai_prices_own_calculation(
    model, input_tokens, output_tokens, cached_share, write_share
):
    """Whatever the usage (cache reads and writes, either side of a tier), cost_of is what
    genai_prices.calc_price computes."""
    name, provider = model
    cached = int(input_tokens * cached_share)
    writes = int((input_tokens - cached) * write_share)
    usage = Usage(
        input_tokens=input_tokens, output_tokens=output_tokens, cached_input_tokens=cached
    )
    expected = _reference(
        name,
        provider,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached=cached,
        writes=writes,
    )
    got = cost_of(name, usage, provider=provider, cache_write_tokens=writes)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_provider_urls_select_the_provider_and_unknown_servers_fall_back():
    """A known provider's URL prices at that provider; a private server's URL falls back to
    the SDK's provider, and a model no provider has is None (never a guess)."""
    usage = Usage(input_tokens=1000, output_tokens=1000)
    openai_cost = cost_of("gpt-4o", usage, provider="openai")
    assert cost_of("gpt-4o", usage, provider="openai", api_url="http://127.0.0.1:8000/v1") == (
        openai_cost
    )
    with pytest.warns(UnknownPriceWarning):
        assert (
            cost_of("my-local-llama", usage, provider="openai", api_url="http://127.0.0.1:1/v1")
            is None
        )


def test_mock_replies_in_turn_with_usage_and_cost():
    """A list of replies is used in turn (the last repeats), with usage and a real price."""
    api = MockModelAPI("gpt-4o-mini", ["one", "two"])

    async def go():
        return [(await api.generate(REQUEST)).text for _ in range(3)]

    assert asyncio.run(go()) == ["one", "two", "two"]
    response = asyncio.run(api.generate(REQUEST))
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.cost is not None and response.cost > 0
    assert len(api.requests) == 4


def test_mock_callable_can_fail():
    """A callable reply can return a failure or raise."""
    api = MockModelAPI(
        "m", lambda r: ModelCallFailure(category="context_overflow", description="too long")
    )
    with pytest.raises(ModelCallError) as info:
        asyncio.run(api.generate(REQUEST))
    assert info.value.failure.category == "context_overflow"
    assert asyncio.run(MockModelAPI("m", "x", price_as="gpt-4o").generate(REQUEST)).cost > 0
    assert asyncio.run(MockModelAPI("m", "x").generate(REQUEST)).cost is None


# The seed's qa.answer step, with fxtr.models imports, against respx.
class ModelConfig(Entity):
    model_name: str
    sampling: Sampling | None = None


class Answer(Entity):
    question: str
    text: str


def answer_text(output) -> str:
    return "".join(block.text for block in output if isinstance(block, ContentText))


@step(name="qa.answer")
async def answer(context: StepContext, config: ModelConfig, question: str) -> Answer:
    """Ask the model one question and keep its reply."""
    request = ModelRequest(
        context=(UserMessage(content=(ContentText(text=question),)),),
        tools=(),
        tool_choice=None,
        parallel_tool_calls=None,
        sampling=config.sampling,
    )
    api = OpenAIResponsesAPI(config.model_name)
    try:
        response = await generate_with_retries(
            api,
            request,
            retry=RetryConfig(),
            failure_categories_to_retry=DEFAULT_FAILURE_CATEGORIES_TO_RETRY,
        )
    finally:
        with anyio.CancelScope(shield=True):
            await api.aclose()
    if isinstance(response, ModelCallFailure):
        raise RuntimeError(f"model call failed ({response.category}): {response.description}")
    return Answer(question=question, text=answer_text(response.output))


@workflow(name="qa.ask")
async def ask(
    context: WorkflowContext,
    questions: Annotated[ArrayHandle[str], "[q: str]"],
    config: Annotated[ArrayHandle[BoundID[ModelConfig]], "[]"],
) -> Annotated[ArrayHandle[Answer], "[q: str]"]:
    return context.run_step(
        "answer", answer, {"config": config, "question": questions}, map_over=["q"]
    )


def test_seed_answer_step_with_openai_responses_against_respx(monkeypatch):
    """The seed's step runs as written; its tokens and cost land on the invocation."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with respx.mock() as mock:
        mock.post("https://api.openai.com/v1/responses").respond(200, json=RESPONSES_OK)
        result = run(
            ask,
            {
                "questions": Array.from_mapping({"fr": "capital of France?"}, dims=["q"]),
                "config": ModelConfig(model_name="gpt-4o"),
            },
        )
    assert result.status == "succeeded"
    assert result.output["fr"] == Answer(question="capital of France?", text="Paris.")
    inv = result.invocations[0]
    assert (inv.calls, inv.input_tokens, inv.output_tokens) == (1, 100, 10)
    assert inv.cost_usd == pytest.approx((100 * 2.5 + 10 * 10.0) / 1e6)
    for path in __import__("pathlib").Path(".fxtr").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes()


def test_an_unparsable_retry_after_falls_back_to_the_backoff():
    """``Retry-After: soon`` is ignored (issue 36 item 12): the normal backoff, no ValueError."""
    slept: list[float] = []

    async def fake_sleep(seconds):
        slept.append(seconds)

    async def go():
        adaptive.set(False)
        with respx.mock() as mock:
            mock.post("https://api.openai.com/v1/chat/completions").mock(
                side_effect=[
                    httpx.Response(
                        429,
                        json={"error": {"code": "rate_limit_exceeded", "message": "slow down"}},
                        headers={"retry-after": value},
                    )
                    for value in ("soon", "inf", "nan")
                ]
                + [httpx.Response(200, json=CHAT_OK)]
            )
            api = OpenAIChatAPI("gpt-4o-mini", api_key=KEY)
            try:
                return await generate_with_retries(
                    api, REQUEST, retry=RetryConfig(initial_delay=2.0, jitter=0.0), sleep=fake_sleep
                )
            finally:
                await api.aclose()

    response = asyncio.run(go())
    assert isinstance(response, ModelResponse)
    assert slept == [2.0, 4.0, 8.0]


def test_retry_after_as_an_http_date_in_each_of_the_rfc_forms():
    import time
    from email.utils import formatdate

    from fxtr.models._api import retry_after_seconds

    when = time.time() + 30
    gmt = time.gmtime(when)
    forms = {
        "IMF-fixdate": formatdate(when, usegmt=True),
        "RFC 850": time.strftime("%A, %d-%b-%y %H:%M:%S GMT", gmt),
        "asctime": time.strftime("%a %b ", gmt)
        + f"{gmt.tm_mday:>2}"
        + time.strftime(" %H:%M:%S %Y", gmt),
    }
    for form, value in forms.items():
        seconds = retry_after_seconds(httpx.Headers({"retry-after": value}))
        assert seconds is not None and 28 <= seconds <= 31, (form, value, seconds)
    past = formatdate(time.time() - 100, usegmt=True)
    assert retry_after_seconds(httpx.Headers({"retry-after": past})) == 0.0
    assert retry_after_seconds(httpx.Headers({"retry-after": " 12 "})) == 12.0
    for junk in ("soon", "-", "Sun, 99 Foo 1994", "1e999"):
        assert retry_after_seconds(httpx.Headers({"retry-after": junk})) is None, junk
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "x", "retry-after": "3"})) == 3.0
