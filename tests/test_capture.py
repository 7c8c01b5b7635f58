"""Capture of calls made with the official openai / anthropic SDKs (DESIGN §10).

The SDKs are real; only the network is fake: ``httpx2.MockTransport`` for openai 3.x and
anthropic >= 1 (httpx2 is their transport), ``httpx.MockTransport`` for openai 2.x and
anthropic 0.x. Bodies and SSE streams are shaped like the providers' own. Each test compares
what the SDK returns or raises under capture with what it returns or raises outside any step.
The tests skip when an SDK is not installed; ``tox -e capture-openai2`` runs them on the
older pair.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fxtr import StepContext, WorkflowContext, run, step, workflow
from fxtr.experiment.handles import ScalarHandle
from fxtr.models import MockModelAPI
from fxtr.tracing import Client, classify
from fxtr.tracing._recorder import call_role

KEY = "sk-proj-CAPTUREKEY0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-api03-CAPTUREKEY0123456789abcdef"


def _major(module: Any) -> int:
    return int(module.__version__.split(".")[0])


try:
    import openai
except ImportError:  # pragma: no cover - the default CI installs it
    openai = None
try:
    import anthropic
except ImportError:  # pragma: no cover
    anthropic = None

needs_openai = pytest.mark.skipif(openai is None, reason="the openai SDK is not installed")
needs_anthropic = pytest.mark.skipif(anthropic is None, reason="the anthropic SDK is not installed")


def transport_module(sdk: Any) -> Any:
    """The HTTP library the SDK version is built on."""
    name = sdk.__name__
    if (name == "openai" and _major(sdk) >= 3) or (name == "anthropic" and _major(sdk) >= 1):
        import httpx2

        return httpx2
    import httpx

    return httpx


# real-shaped bodies ---------------------------------------------------------------------

CHAT_OK = {
    "id": "chatcmpl-AbC123",
    "object": "chat.completion",
    "created": 1764547200,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Paris.", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 1200,
        "completion_tokens": 3,
        "total_tokens": 1203,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    },
    "system_fingerprint": "fp_0ba0d124f1",
}


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> dict:
    return {
        "id": "chatcmpl-AbC123",
        "object": "chat.completion.chunk",
        "created": 1764547200,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": usage,
    }


CHAT_STREAM = [
    _chunk({"role": "assistant", "content": ""}),
    _chunk({"content": "Par"}),
    _chunk({"content": "is."}),
    _chunk({}, finish="stop"),
    _chunk({}, usage={"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22}),
]

RESPONSE_OK = {
    "id": "resp_68af",
    "object": "response",
    "created_at": 1764547200,
    "status": "completed",
    "model": "gpt-5-mini-2025-08-07",
    "output": [
        {"id": "rs_1", "type": "reasoning", "summary": []},
        {
            "id": "msg_1",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Paris.", "annotations": []}],
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 50,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 70,
        "output_tokens_details": {"reasoning_tokens": 64},
        "total_tokens": 120,
    },
}

_MESSAGE_ITEM = RESPONSE_OK["output"][1]
_STREAMED = {**RESPONSE_OK, "output": [_MESSAGE_ITEM]}
_PART = {"type": "output_text", "text": "", "annotations": []}
_AT = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
RESPONSE_STREAM = [
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {**_STREAMED, "status": "in_progress", "output": [], "usage": None},
    },
    {
        "type": "response.output_item.added",
        "sequence_number": 1,
        "output_index": 0,
        "item": {**_MESSAGE_ITEM, "status": "in_progress", "content": []},
    },
    {"type": "response.content_part.added", "sequence_number": 2, **_AT, "part": _PART},
    {
        "type": "response.output_text.delta",
        "sequence_number": 3,
        **_AT,
        "delta": "Par",
        "logprobs": [],
    },
    {
        "type": "response.output_text.delta",
        "sequence_number": 4,
        **_AT,
        "delta": "is.",
        "logprobs": [],
    },
    {
        "type": "response.output_text.done",
        "sequence_number": 5,
        **_AT,
        "text": "Paris.",
        "logprobs": [],
    },
    {
        "type": "response.content_part.done",
        "sequence_number": 6,
        **_AT,
        "part": {**_PART, "text": "Paris."},
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 7,
        "output_index": 0,
        "item": _MESSAGE_ITEM,
    },
    {"type": "response.completed", "sequence_number": 8, "response": _STREAMED},
]

MESSAGE_OK = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [{"type": "text", "text": "Paris."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 30,
        "cache_creation_input_tokens": 2000,
        "cache_read_input_tokens": 10000,
        "output_tokens": 4,
    },
}

MESSAGE_STREAM = [
    {
        "type": "message_start",
        "message": {
            **MESSAGE_OK,
            "content": [],
            "stop_reason": None,
            "usage": {**MESSAGE_OK["usage"], "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Par"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "is."}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 4},
    },
    {"type": "message_stop"},
]

OPENAI_ERRORS = {
    429: {
        "error": {
            "message": "Rate limit reached for gpt-4o-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 200000.",
            "type": "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    },
    400: {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 210000 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    401: {
        "error": {
            "message": f"Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    },
}
ANTHROPIC_ERRORS = {
    429: {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed the rate limit for your organization of 50 requests per minute.",
        },
    },
    400: {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    },
    401: {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key {ANTHROPIC_KEY}"},
    },
}
REASONS = {429: "budget", 400: "context_overflow", 401: "unknown"}


def _sse(events: list[dict[str, Any]], *, named: bool, done: bool = False) -> bytes:
    out = []
    for event in events:
        if named:
            out.append(f"event: {event['type']}\n")
        out.append(f"data: {json.dumps(event)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def _handler(mod: Any, status: int = 200, *, api: str = "chat", stream: bool = False) -> Any:
    def handle(request: Any) -> Any:
        body = json.loads(request.content or b"{}")
        if status != 200:
            errors = ANTHROPIC_ERRORS if api == "messages" else OPENAI_ERRORS
            return mod.Response(status, json=errors[status], headers={"retry-after": "0"})
        if body.get("stream"):
            with_usage = (body.get("stream_options") or {}).get("include_usage")
            chat = CHAT_STREAM if with_usage else CHAT_STREAM[:-1]
            events, named, done = {
                "chat": (chat, False, True),
                "responses": (RESPONSE_STREAM, True, False),
                "messages": (MESSAGE_STREAM, True, False),
            }[api]
            return mod.Response(
                200,
                content=_sse(events, named=named, done=done),
                headers={"content-type": "text/event-stream"},
            )
        ok = {"chat": CHAT_OK, "responses": RESPONSE_OK, "messages": MESSAGE_OK}[api]
        return mod.Response(200, json=ok)

    return handle


def openai_client(status: int = 200, *, api: str = "chat", is_async: bool = False) -> Any:
    mod = transport_module(openai)
    transport = mod.MockTransport(_handler(mod, status, api=api))
    if is_async:
        return openai.AsyncOpenAI(
            api_key=KEY, max_retries=0, http_client=mod.AsyncClient(transport=transport)
        )
    return openai.OpenAI(api_key=KEY, max_retries=0, http_client=mod.Client(transport=transport))


def anthropic_client(status: int = 200, *, is_async: bool = False) -> Any:
    mod = transport_module(anthropic)
    transport = mod.MockTransport(_handler(mod, status, api="messages"))
    if is_async:
        return anthropic.AsyncAnthropic(
            api_key=ANTHROPIC_KEY, max_retries=0, http_client=mod.AsyncClient(transport=transport)
        )
    return anthropic.Anthropic(
        api_key=ANTHROPIC_KEY, max_retries=0, http_client=mod.Client(transport=transport)
    )


USER = [{"role": "user", "content": "What is the capital of France?"}]


def _calls(api: str) -> tuple[Any, dict[str, Any]]:
    """(client factory, keyword arguments of the create call) per API."""
    if api == "chat":
        return (lambda **k: openai_client(api="chat", **k)), {
            "model": "gpt-4o-mini",
            "messages": USER,
        }
    if api == "responses":
        return (lambda **k: openai_client(api="responses", **k)), {
            "model": "gpt-5-mini",
            "instructions": "Answer in one word.",
            "input": "What is the capital of France?",
        }
    return anthropic_client, {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": USER}


def _create(client: Any, api: str) -> Any:
    return {
        "chat": lambda: client.chat.completions,
        "responses": lambda: client.responses,
        "messages": lambda: client.messages,
    }[api]()


def _reference_cost(model: str, provider: str, *, input_tokens, output_tokens, cached=0, writes=0):
    import genai_prices

    usage = genai_prices.Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cached,
        cache_write_tokens=writes,
    )
    return float(genai_prices.calc_price(usage, model, provider_id=provider).total_price)


EXPECTED = {
    # api: (model sent, provider, input, output, cached, cache writes, reply)
    "chat": ("gpt-4o-mini", "openai", 1200, 3, 1024, 0, "Paris."),
    "responses": ("gpt-5-mini", "openai", 50, 70, 0, 0, "Paris."),
    "messages": ("claude-sonnet-4-6", "anthropic", 12030, 4, 10000, 2000, "Paris."),
}
EXPECTED_STREAM = {
    "chat": ("gpt-4o-mini", "openai", 20, 2, 0, 0, "Paris."),
    "responses": EXPECTED["responses"],
    "messages": EXPECTED["messages"],
}
APIS = [
    pytest.param("chat", marks=needs_openai),
    pytest.param("responses", marks=needs_openai),
    pytest.param("messages", marks=needs_anthropic),
]


def _check_node(node: Any, expected: tuple, *, status: str = "succeeded") -> None:
    model, provider, inp, out, cached, writes, reply = expected
    assert node.kind == "model_call" and node.name == model and node.status == status
    assert (node.input_tokens, node.output_tokens) == (inp, out)
    assert node.attrs["cached_input_tokens"] == cached
    assert node.attrs["reply"] == reply
    assert node.attrs["provider"] == provider and node.attrs["role"] == "subject"
    assert node.attrs["messages"][-1] == {
        "role": "user",
        "content": "What is the capital of France?",
    }
    reference = _reference_cost(
        model, provider, input_tokens=inp, output_tokens=out, cached=cached, writes=writes
    )
    assert node.cost_usd == pytest.approx(reference, rel=1e-9)


def _dump(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


def _task_client() -> Client:
    return Client({"m": MockModelAPI("gpt-4o-mini", "x")})


# plain calls ----------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_sync_call_is_a_node_and_returns_what_the_sdk_returns(api):
    """A sync create() inside a task: one model_call node with tokens, cost (genai-prices'
    own figure), messages and reply; the same object type and content as without capture."""
    factory, kwargs = _calls(api)
    plain = _create(factory(), api).create(**kwargs)
    tracing = _task_client()
    with tracing.task("t") as t:
        got = _create(factory(), api).create(**kwargs)
    assert type(got) is type(plain) and _dump(got) == _dump(plain)
    (node,) = t.graph.find(kind="model_call")
    assert node.parent_id == t.node.id
    _check_node(node, EXPECTED[api])


@pytest.mark.parametrize("api", APIS)
def test_async_call_is_a_node(api):
    """The async clients are captured the same way."""
    factory, kwargs = _calls(api)

    async def main() -> tuple[Any, Any]:
        plain = await _create(factory(is_async=True), api).create(**kwargs)
        tracing = _task_client()
        with tracing.task("t") as t:
            got = await _create(factory(is_async=True), api).create(**kwargs)
        return plain, got, t

    plain, got, t = asyncio.run(main())
    assert type(got) is type(plain) and _dump(got) == _dump(plain)
    (node,) = t.graph.find(kind="model_call")
    _check_node(node, EXPECTED[api])


def test_outside_any_step_or_task_nothing_is_recorded(monkeypatch):
    """With no step and no task running, the hook goes straight to the SDK."""
    if openai is None:
        pytest.skip("the openai SDK is not installed")
    from fxtr.tracing import _capture

    def never(*args, **kwargs):
        raise AssertionError("capture started outside any step")

    monkeypatch.setattr(_capture._Call, "start", classmethod(never))
    got = openai_client().chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert got.choices[0].message.content == "Paris."


def test_capture_off_with_fxtr_capture_0():
    """FXTR_CAPTURE=0: the SDKs' own request methods stay in place."""
    if openai is None:
        pytest.skip("the openai SDK is not installed")
    code = (
        "import fxtr.tracing, openai, openai._base_client as b;"
        "print(hasattr(b.SyncAPIClient.request, '__fxtr_original__'))"
    )
    import os

    for value, expected in (("0", "False"), ("1", "True")):
        env = {**os.environ, "FXTR_CAPTURE": value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.stdout.strip() == expected, out.stderr


# streams --------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_stream_true_is_iterated_unchanged_and_usage_comes_from_the_final_events(api):
    """stream=True: the caller sees the same events; the node's usage is the stream's."""
    factory, kwargs = _calls(api)
    extra = {"stream_options": {"include_usage": True}} if api == "chat" else {}
    plain_stream = _create(factory(), api).create(stream=True, **kwargs, **extra)
    plain = [_dump(e) for e in plain_stream]
    tracing = _task_client()
    with tracing.task("t") as t:
        stream = _create(factory(), api).create(stream=True, **kwargs, **extra)
        assert type(stream) is type(plain_stream)
        got = [_dump(e) for e in stream]
    assert got == plain
    (node,) = t.graph.find(kind="model_call")
    _check_node(node, EXPECTED_STREAM[api])


@pytest.mark.parametrize("api", APIS)
def test_async_stream(api):
    """An async stream is captured as it is iterated."""
    factory, kwargs = _calls(api)
    extra = {"stream_options": {"include_usage": True}} if api == "chat" else {}

    async def main() -> Any:
        tracing = _task_client()
        with tracing.task("t") as t:
            stream = await _create(factory(is_async=True), api).create(
                stream=True, **kwargs, **extra
            )
            events = [e async for e in stream]
        assert events
        return t

    t = asyncio.run(main())
    (node,) = t.graph.find(kind="model_call")
    _check_node(node, EXPECTED_STREAM[api])


@needs_openai
def test_chat_stream_without_usage_says_so():
    """A chat stream without include_usage reports no tokens: cost None, a note says why."""
    tracing = _task_client()
    with tracing.task("t") as t:
        for _ in openai_client().chat.completions.create(
            model="gpt-4o-mini", messages=USER, stream=True
        ):
            pass
    (node,) = t.graph.find(kind="model_call")
    assert node.status == "succeeded" and node.attrs["reply"] == "Paris."
    assert node.cost_usd is None and "include_usage" in node.attrs["note"]


@needs_openai
def test_a_stream_closed_early_is_cancelled_with_what_was_read():
    """Breaking out of a stream and closing it records the call once, as cancelled."""
    tracing = _task_client()
    with tracing.task("t") as t:
        with openai_client().chat.completions.create(
            model="gpt-4o-mini", messages=USER, stream=True
        ) as stream:
            next(iter(stream))
            stream._iterator.close()
    (node,) = t.graph.find(kind="model_call")
    assert node.status == "cancelled"


@pytest.mark.parametrize("api", APIS)
def test_a_stream_dropped_unread_is_recorded_as_cancelled(api):
    """A stream the caller never reads is recorded (cancelled) when it is garbage-collected,
    so no node stays running."""
    import gc

    factory, kwargs = _calls(api)
    tracing = _task_client()
    with tracing.task("t") as t:
        stream = _create(factory(), api).create(stream=True, **kwargs)
        (node,) = t.graph.find(kind="model_call")
        assert node.status == "running"
        del stream
        gc.collect()
    assert node.status == "cancelled" and "before its end" in node.attrs["note"]


@needs_openai
def test_openai_stream_helpers():
    """chat.completions.stream() and responses.stream(): events and final objects unchanged."""
    tracing = _task_client()
    with tracing.task("t") as t:
        with openai_client(api="chat").chat.completions.stream(
            model="gpt-4o-mini", messages=USER, stream_options={"include_usage": True}
        ) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_completion()
        with openai_client(api="responses").responses.stream(
            model="gpt-5-mini", instructions="Answer in one word.", input=USER[0]["content"]
        ) as rstream:
            rkinds = [event.type for event in rstream]
            rfinal = rstream.get_final_response()
    assert "content.delta" in kinds and final.choices[0].message.content == "Paris."
    assert "response.completed" in rkinds and rfinal.output_text == "Paris."
    chat, responses = t.graph.find(kind="model_call")
    _check_node(chat, EXPECTED_STREAM["chat"])
    _check_node(responses, EXPECTED["responses"])


@needs_anthropic
def test_anthropic_stream_helper_sync_and_async():
    """messages.stream(): text_stream and get_final_message() unchanged; usage captured."""
    tracing = _task_client()
    with tracing.task("t") as t:
        with anthropic_client().messages.stream(
            model="claude-sonnet-4-6", max_tokens=64, messages=USER
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()

    async def main() -> Any:
        with tracing.task("t2") as t2:
            async with anthropic_client(is_async=True).messages.stream(
                model="claude-sonnet-4-6", max_tokens=64, messages=USER
            ) as astream:
                atext = "".join([chunk async for chunk in astream.text_stream])
                await astream.get_final_message()
        return atext, t2

    atext, t2 = asyncio.run(main())
    assert text == atext == "Paris." and final.usage.output_tokens == 4
    for graph in (t.graph, t2.graph):
        (node,) = graph.find(kind="model_call")
        _check_node(node, EXPECTED["messages"])


# raw responses --------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_with_raw_response_is_recorded_once_and_parse_still_works(api):
    """.with_raw_response: one node; .parse() returns the same object as without capture."""
    factory, kwargs = _calls(api)
    plain = _create(factory(), api).with_raw_response.create(**kwargs)
    tracing = _task_client()
    with tracing.task("t") as t:
        raw = _create(factory(), api).with_raw_response.create(**kwargs)
        parsed = raw.parse()
        again = raw.parse()
    assert type(raw) is type(plain) and raw.http_response.status_code == 200
    assert _dump(parsed) == _dump(plain.parse()) and again is parsed
    (node,) = t.graph.find(kind="model_call")
    _check_node(node, EXPECTED[api])


@pytest.mark.parametrize("api", APIS)
def test_async_with_raw_response(api):
    """Async raw responses (anthropic's parse() is a coroutine, openai's is not), plain and
    streamed: one node each, parse() unchanged."""
    factory, kwargs = _calls(api)
    extra = {"stream_options": {"include_usage": True}} if api == "chat" else {}

    async def parse(raw: Any) -> Any:
        parsed = raw.parse()
        return await parsed if asyncio.iscoroutine(parsed) else parsed

    async def main() -> Any:
        tracing = _task_client()
        with tracing.task("t") as t:
            raw = await _create(factory(is_async=True), api).with_raw_response.create(**kwargs)
            parsed = await parse(raw)
            sraw = await _create(factory(is_async=True), api).with_raw_response.create(
                stream=True, **kwargs, **extra
            )
            events = [e async for e in await parse(sraw)]
        return parsed, events, t

    parsed, events, t = asyncio.run(main())
    plain = _create(factory(), api).create(**kwargs)
    assert _dump(parsed) == _dump(plain) and events
    whole, streamed = t.graph.find(kind="model_call")
    _check_node(whole, EXPECTED[api])
    _check_node(streamed, EXPECTED_STREAM[api])


@pytest.mark.parametrize("api", APIS)
def test_with_raw_response_streamed(api):
    """.with_raw_response with stream=True: the stream parse() returns is captured."""
    factory, kwargs = _calls(api)
    extra = {"stream_options": {"include_usage": True}} if api == "chat" else {}
    tracing = _task_client()
    with tracing.task("t") as t:
        raw = _create(factory(), api).with_raw_response.create(stream=True, **kwargs, **extra)
        events = list(raw.parse())
    assert events
    (node,) = t.graph.find(kind="model_call")
    _check_node(node, EXPECTED_STREAM[api])


@pytest.mark.parametrize("api", APIS)
def test_with_streaming_response_read_raw_is_recorded_with_its_usage(api):
    """.with_streaming_response read line by line (never parsed), plain and streamed: the
    lines are the SDK's own, and each call is recorded with its usage when its block ends."""
    factory, kwargs = _calls(api)
    extra = {"stream_options": {"include_usage": True}} if api == "chat" else {}

    def lines(**more: Any) -> list[str]:
        with _create(factory(), api).with_streaming_response.create(**kwargs, **more) as r:
            return list(r.iter_lines())

    plain, plain_streamed = lines(), lines(stream=True, **extra)
    tracing = _task_client()
    with tracing.task("t") as t:
        got, got_streamed = lines(), lines(stream=True, **extra)
    assert (got, got_streamed) == (plain, plain_streamed)
    whole, streamed = t.graph.find(kind="model_call")
    _check_node(whole, EXPECTED[api])
    _check_node(streamed, EXPECTED_STREAM[api])


@pytest.mark.parametrize("api", APIS)
def test_async_with_streaming_response_read_raw(api):
    """The async .with_streaming_response, read with aiter_lines(): recorded the same way."""
    factory, kwargs = _calls(api)
    extra = {"stream_options": {"include_usage": True}} if api == "chat" else {}

    async def main() -> Any:
        tracing = _task_client()
        with tracing.task("t") as t:
            create = _create(factory(is_async=True), api).with_streaming_response.create
            async with create(stream=True, **kwargs, **extra) as r:
                got = [line async for line in r.iter_lines()]
        return got, t

    got, t = asyncio.run(main())
    assert any("data:" in line for line in got)
    (node,) = t.graph.find(kind="model_call")
    _check_node(node, EXPECTED_STREAM[api])


@needs_openai
def test_with_streaming_response_closed_unread_is_cancelled():
    """A .with_streaming_response block left before its body is read: cancelled, saying so."""
    tracing = _task_client()
    with tracing.task("t") as t:
        with openai_client().chat.completions.with_streaming_response.create(
            model="gpt-4o-mini", messages=USER, stream=True
        ) as r:
            assert r.http_response.status_code == 200
    (node,) = t.graph.find(kind="model_call")
    assert node.status == "cancelled" and "closed before its body" in node.attrs["note"]


KEPT: list[Any] = []


@step(name="cap.leaves_open")
async def leaves_a_stream_open(context: StepContext, x: int) -> int:
    stream = openai_client().chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
    KEPT.append(stream)  # alive after the step: garbage collection cannot record it
    next(iter(stream))
    return x


@workflow(name="cap.open_wf")
async def open_wf(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[int]:
    return context.run_step("s", leaves_a_stream_open, {"x": x})


@needs_openai
def test_a_stream_a_step_leaves_open_is_recorded_when_the_step_ends(tmp_path):
    """A stream the step neither reads to its end nor closes, and keeps alive: its call is on
    the invocation (cancelled, with what was read), not lost with the record already written."""
    result = run(open_wf, {"x": 1}, store=tmp_path / "s")
    (inv,) = result.invocations
    assert inv.calls == 1, inv.model_calls
    (call,) = inv.model_calls
    assert call["status"] == "cancelled" and "step ended" in call["note"]
    KEPT.clear()


# failures -------------------------------------------------------------------------------


def _error_of(call: Any) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("the call did not raise")


@pytest.mark.parametrize("status", [429, 400, 401])
@pytest.mark.parametrize("api", APIS)
def test_failures_raise_what_the_sdk_raises_and_are_classified(api, status, tmp_path):
    """429 → budget, 400 context overflow → context_overflow, 401 → unknown; the exception
    is the SDK's own; the key the 401 echoes is in no file of the store."""
    kwargs = _calls(api)[1]
    if api == "messages":
        make = lambda: anthropic_client(status)  # noqa: E731
    else:
        make = lambda: openai_client(status, api=api)  # noqa: E731
    plain = _error_of(lambda: _create(make(), api).create(**kwargs))
    tracing = Client({"m": MockModelAPI("gpt-4o-mini", "x")}, store=tmp_path / "store")
    with tracing.task("t") as t:
        got = _error_of(lambda: _create(make(), api).create(**kwargs))
    assert type(got) is type(plain) and str(got) == str(plain)
    assert got.status_code == plain.status_code == status and got.body == plain.body
    (node,) = t.graph.find(kind="model_call")
    assert node.status == "failed" and node.reason == REASONS[status] == classify(got)
    if status == 401:
        key = ANTHROPIC_KEY if api == "messages" else KEY
        assert key in str(got)
        assert key not in node.error and "[redacted]" in node.error
        stored = tracing.get_task_graph(t.task_id)
        assert stored.nodes[-1].status == "failed"
        for path in (tmp_path / "store").rglob("*"):
            if path.is_file():
                assert key.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("api", APIS)
def test_the_sdks_own_transport_failures_are_unknown_with_their_category(api):
    """A timeout or a refused connection inside the SDK is the model call's own failure:
    reason unknown, category timeout / connection; the SDK's exception is raised unchanged."""
    sdk = anthropic if api == "messages" else openai
    mod = transport_module(sdk)
    kwargs = _calls(api)[1]
    for raised, category in (
        (mod.ReadTimeout("timed out"), "timeout"),
        (mod.ConnectError("refused"), "connection"),
    ):

        def handler(request: Any, raised: Exception = raised) -> Any:
            raise raised

        http = mod.Client(transport=mod.MockTransport(handler))
        if api == "messages":
            client = anthropic.Anthropic(api_key=ANTHROPIC_KEY, max_retries=0, http_client=http)
        else:
            client = openai.OpenAI(api_key=KEY, max_retries=0, http_client=http)
        tracing = _task_client()
        with tracing.task("t") as t:
            got = _error_of(lambda client=client: _create(client, api).create(**kwargs))
        assert isinstance(got, sdk.APIConnectionError)
        assert isinstance(got, sdk.APITimeoutError) == (category == "timeout")
        (node,) = t.graph.find(kind="model_call")
        assert (node.status, node.reason, node.category) == ("failed", "unknown", category)


def test_refusals_inside_a_200_are_failed_calls_with_reason_refusal():
    """A refusal (OpenAI's refusal field, Anthropic's stop_reason refusal) or a content filter
    is recorded as a failed call, reason refusal; the SDK's result is returned unchanged."""
    bodies = []
    if openai is not None:
        refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        chat = {**CHAT_OK, "choices": [{**CHAT_OK["choices"][0], "message": refusal}]}
        filtered = {
            **CHAT_OK,
            "choices": [{**CHAT_OK["choices"][0], "finish_reason": "content_filter"}],
        }
        bodies += [("chat", chat, "refusal"), ("chat", filtered, "content_filter")]
    if anthropic is not None:
        declined = {**MESSAGE_OK, "stop_reason": "refusal", "content": []}
        bodies.append(("messages", declined, "refusal"))
    if not bodies:
        pytest.skip("neither SDK is installed")
    for api, body, category in bodies:
        sdk = anthropic if api == "messages" else openai
        mod = transport_module(sdk)
        http = mod.Client(
            transport=mod.MockTransport(lambda r, body=body, mod=mod: mod.Response(200, json=body))
        )
        if api == "messages":
            client = anthropic.Anthropic(api_key=ANTHROPIC_KEY, max_retries=0, http_client=http)
        else:
            client = openai.OpenAI(api_key=KEY, max_retries=0, http_client=http)
        tracing = _task_client()
        with tracing.task("t") as t:
            got = _create(client, api).create(**_calls(api)[1])
        assert got.model_dump()["id"] == body["id"]
        (node,) = t.graph.find(kind="model_call")
        assert (node.status, node.reason, node.category) == ("failed", "refusal", category)
        assert node.input_tokens > 0 and node.cost_usd > 0  # a refusal is billed


# threads --------------------------------------------------------------------------------


@needs_openai
def test_calls_from_threads_started_in_a_task_are_attributed_to_it():
    """asyncio.to_thread copies the context; run_in_executor and executor.submit do not, and
    are attributed all the same."""
    from concurrent.futures import ThreadPoolExecutor

    client = openai_client()

    def call() -> str:
        return client.chat.completions.create(model="gpt-4o-mini", messages=USER).id

    async def main() -> Any:
        tracing = _task_client()
        with tracing.task("t") as t:
            with tracing.step("threads") as s:
                loop = asyncio.get_running_loop()
                await asyncio.to_thread(call)
                await loop.run_in_executor(None, call)
                with ThreadPoolExecutor(2) as pool:
                    await loop.run_in_executor(pool, call)
                    pool.submit(call).result()
        return t, s

    t, s = asyncio.run(main())
    calls = t.graph.find(kind="model_call")
    assert len(calls) == 4 and all(c.parent_id == s.id for c in calls)
    # outside the task, the pool carries nothing
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(call).result() == "chatcmpl-AbC123"


# inside engine jobs ---------------------------------------------------------------------

_JOB: dict[str, Any] = {}


@step(name="capture.ask")
async def ask(context: StepContext, question: str) -> str:
    client = _JOB["factory"]()
    kwargs = dict(_JOB["kwargs"])
    try:
        await _create(client, _JOB["api"]).create(**kwargs)
    except Exception as exc:
        if not _JOB.get("catch"):
            raise
        return f"failed: {classify(exc)}"
    return str(_JOB["api"])


@step(name="capture.judge")
async def judge(context: StepContext, answer: str) -> str:
    token = call_role.set("judge")
    try:
        await _create(_JOB["factory"](), _JOB["api"]).create(**_JOB["kwargs"])
    except Exception as exc:
        if not _JOB.get("catch"):
            raise
        return f"failed: {classify(exc)}"
    finally:
        call_role.reset(token)
    return "ok"


@workflow(name="capture.wf")
async def capture_wf(context: WorkflowContext, question: ScalarHandle[str]) -> ScalarHandle[str]:
    answer = context.run_step("ask", ask, {"question": question})
    return context.run_step("judge", judge, {"answer": answer})


@pytest.mark.parametrize("api", APIS)
def test_calls_in_a_step_count_on_the_invocation_and_in_the_job_graph(api):
    """An async SDK call inside a step: the invocation carries tokens, cost and the call's
    detail (messages, reply, role); the job graph shows it under the step; a rerun is served
    from the cache with the same usage."""
    factory, kwargs = _calls(api)
    _JOB.update(api=api, factory=lambda: factory(is_async=True), kwargs=kwargs, catch=False)
    result = run(capture_wf, {"question": "capital?"})
    assert result.status == "succeeded", [i.error for i in result.invocations]
    ask_inv = next(i for i in result.invocations if i.step == "capture.ask")
    judge_inv = next(i for i in result.invocations if i.step == "capture.judge")
    model, provider, inp, out, cached, writes, reply = EXPECTED[api]
    expected_cost = _reference_cost(
        model, provider, input_tokens=inp, output_tokens=out, cached=cached, writes=writes
    )
    for inv, role in ((ask_inv, "subject"), (judge_inv, "judge")):
        assert inv.calls == 1 and (inv.input_tokens, inv.output_tokens) == (inp, out)
        assert inv.cost_usd == pytest.approx(expected_cost)
        assert inv.cost_by_model[model]["usd"] == pytest.approx(expected_cost)
        (detail,) = inv.model_calls
        assert detail["role"] == role and detail["reply"] == reply
        assert detail["cached_input_tokens"] == cached and detail["provider"] == provider
        assert detail["messages"][-1]["content"] == "What is the capital of France?"
        by_role = getattr(inv, "cost_by_role", None)
        if by_role is not None:
            assert by_role[role]["usd"] == pytest.approx(expected_cost)
    nodes = result.graph.find(kind="model_call")
    assert [n.attrs["role"] for n in nodes] == ["subject", "judge"]
    assert nodes[0].parent_id == ask_inv.address and nodes[0].attrs["reply"] == reply
    again = run(capture_wf, {"question": "capital?"})
    cached_inv = next(i for i in again.invocations if i.step == "capture.ask")
    assert cached_inv.from_cache and cached_inv.cost_usd == pytest.approx(expected_cost)


@needs_openai
def test_a_failed_call_in_a_step_keeps_its_reason_and_no_key_reaches_the_store():
    """A 401 echoing the key inside a step: the call's detail is failed and classified, and the
    key is in no file of the store."""
    _JOB.update(
        api="chat",
        factory=lambda: openai_client(401, is_async=True),
        kwargs={"model": "gpt-4o-mini", "messages": USER},
        catch=True,
    )
    result = run(capture_wf, {"question": "capital?"}, store=".fxtr")
    assert result.status == "succeeded"
    ask_inv = next(i for i in result.invocations if i.step == "capture.ask")
    (detail,) = ask_inv.model_calls
    assert detail["status"] == "failed" and detail["reason"] == "unknown"
    assert detail["category"] and KEY not in detail["error"]
    for path in Path(".fxtr").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_fxtr_models_calls_carry_messages_reply_role_and_cached_tokens():
    """fxtr.models calls have the same detail shape as SDK calls."""
    from tests.model_jobs import chat_job

    result = chat_job()
    (detail,) = result.invocations[0].model_calls
    assert detail["messages"] == [{"role": "user", "content": "why is the sky blue?"}]
    assert detail["reply"] == "a fine answer" and detail["role"] == "subject"
    assert detail["cached_input_tokens"] == 0 and detail["provider"] == "mock"
