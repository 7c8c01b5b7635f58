"""Tool calls through each provider client, at the network boundary (respx): tool
definitions, the model's (parallel) calls read back, and the results sent on the next turn in
each provider's documented shape (OpenAI Chat ``tool_calls``/``tool`` messages, Responses
``function_call``/``function_call_output`` items, Anthropic ``tool_use``/``tool_result``)."""

from __future__ import annotations

import json

import httpx
import respx

import fxtr
from fxtr.agents import Agent, Trajectory, scorer
from fxtr.evals import Case, Model, Score, evaluate
from fxtr.experiment.arrays import Array
from tests import agent_examples as ex

CASE = Case(id="sum", input="What are 2+3 and 4+5?")


def _facts(case: Case, trajectory: Trajectory) -> Score:
    return Score(
        value=1.0,
        answer=trajectory.answer,
        explanation=json.dumps([[c.id, c.name, c.arguments] for c in trajectory.calls]),
    )


def _run(model: Model, store) -> tuple[Score, list[dict]]:
    result = fxtr.run(
        evaluate,
        {
            "model": Array.from_mapping({model.name: model}, dims=["model"]),
            "case": Array.from_mapping({CASE.id: CASE}, dims=["case"]),
            "scorer": scorer(_facts),
            "agent": Agent(tools=(ex.add,), system="Use the tool."),
        },
        store=store,
    )
    assert result.status == "succeeded", [i.error for i in result.invocations if i.error]
    return result.output.to_dict()[model.name][CASE.id][0]


def _bodies(route: respx.Route) -> list[dict]:
    return [json.loads(call.request.content) for call in route.calls]


ADD_SCHEMA = ex.add.spec.parameters


@respx.mock
def test_openai_chat_completions_tool_calls_round_trip(tmp_path, monkeypatch):
    """Chat: tools as functions, parallel tool_calls read, results as role 'tool' messages."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    replies = iter(
        [
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_a",
                                    "type": "function",
                                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                                },
                                {
                                    "id": "call_b",
                                    "type": "function",
                                    "function": {"name": "add", "arguments": '{"a": 4, "b": 5}'},
                                },
                            ],
                        },
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
            },
            {
                "id": "chatcmpl-2",
                "object": "chat.completion",
                "created": 2,
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "5 and 9"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 90, "completion_tokens": 4, "total_tokens": 94},
            },
        ]
    )
    route = respx.post("http://llm.test/v1/chat/completions").mock(
        side_effect=lambda request: httpx.Response(200, json=next(replies))
    )
    model = Model("openai-compatible/gpt-4o-mini", base_url="http://llm.test/v1")
    score = _run(model, tmp_path)
    assert score.answer == "5 and 9"
    assert json.loads(score.explanation) == [
        ["call_a", "add", {"a": 2, "b": 3}],
        ["call_b", "add", {"a": 4, "b": 5}],
    ]
    first, second = _bodies(route)
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two numbers.",
                "parameters": ADD_SCHEMA,
            },
        }
    ]
    assert first["messages"] == [
        {"role": "system", "content": "Use the tool."},
        {"role": "user", "content": CASE.input},
    ]
    assert second["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 4, "b": 5}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "5"},
        {"role": "tool", "tool_call_id": "call_b", "content": "9"},
    ]


@respx.mock
def test_openai_responses_function_call_items_round_trip(tmp_path, monkeypatch):
    """Responses: function tools (strict off), function_call items, function_call_output."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    replies = iter(
        [
            {
                "id": "resp_1",
                "object": "response",
                "status": "completed",
                "model": "gpt-5-mini",
                "output": [
                    {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "add",
                        "arguments": '{"a":2,"b":3}',
                        "status": "completed",
                    },
                    {
                        "type": "function_call",
                        "id": "fc_2",
                        "call_id": "call_2",
                        "name": "add",
                        "arguments": '{"a":4,"b":5}',
                        "status": "completed",
                    },
                ],
                "usage": {"input_tokens": 60, "output_tokens": 30, "total_tokens": 90},
            },
            {
                "id": "resp_2",
                "object": "response",
                "status": "completed",
                "model": "gpt-5-mini",
                "output": [
                    {
                        "type": "message",
                        "id": "msg_1",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "5 and 9", "annotations": []}],
                    }
                ],
                "usage": {"input_tokens": 100, "output_tokens": 5, "total_tokens": 105},
            },
        ]
    )
    route = respx.post("https://api.openai.com/v1/responses").mock(
        side_effect=lambda request: httpx.Response(200, json=next(replies))
    )
    score = _run(Model("openai/gpt-5-mini"), tmp_path)
    assert score.answer == "5 and 9"
    assert [c[0] for c in json.loads(score.explanation)] == ["call_1", "call_2"]
    first, second = _bodies(route)
    assert first["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add two numbers.",
            "parameters": ADD_SCHEMA,
            "strict": False,
        }
    ]
    assert second["input"][2:] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "add",
            "arguments": '{"a": 2, "b": 3}',
        },
        {
            "type": "function_call",
            "call_id": "call_2",
            "name": "add",
            "arguments": '{"a": 4, "b": 5}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "5"},
        {"type": "function_call_output", "call_id": "call_2", "output": "9"},
    ]


@respx.mock
def test_anthropic_tool_use_and_tool_result_blocks_round_trip(tmp_path, monkeypatch):
    """Messages: input_schema tools, text + parallel tool_use, tool_results in one user turn."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    replies = iter(
        [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": [
                    {"type": "text", "text": "I'll add both."},
                    {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
                    {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {"a": 4, "b": 5}},
                ],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 400, "output_tokens": 80},
            },
            {
                "id": "msg_2",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": [{"type": "text", "text": "5 and 9"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 520, "output_tokens": 6},
            },
        ]
    )
    route = respx.post("https://api.anthropic.com/v1/messages").mock(
        side_effect=lambda request: httpx.Response(200, json=next(replies))
    )
    score = _run(Model("anthropic/claude-haiku-4-5"), tmp_path)
    assert score.answer == "5 and 9"
    first, second = _bodies(route)
    assert first["system"] == "Use the tool."
    assert first["tools"] == [
        {"name": "add", "description": "Add two numbers.", "input_schema": ADD_SCHEMA}
    ]
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll add both."},
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
                {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {"a": 4, "b": 5}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "5",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "9",
                    "is_error": False,
                },
            ],
        },
    ]
