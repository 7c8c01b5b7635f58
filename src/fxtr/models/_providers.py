"""OpenAI (Chat Completions, Responses) and Anthropic (Messages) over httpx."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from fxtr.models._api import ModelAPI, usage_of
from fxtr.models._prices import cost_of
from fxtr.models._types import (
    AssistantMessage,
    ContentText,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)


def _put(body: dict[str, Any], **values: Any) -> None:
    """Set the options that have a value; the provider's default stands for the others."""
    body.update((k, v) for k, v in values.items() if v is not None)


def _text(blocks: tuple[ContentText, ...]) -> str:
    return "".join(b.text for b in blocks)


class OpenAIChatAPI(ModelAPI):
    """Chat Completions; any OpenAI-compatible server by ``base_url`` (which includes ``/v1``).

    Refusals (``message.refusal``) and ``finish_reason: content_filter`` in a 200 response
    are failures (``refusal``, ``content_filter``).
    """

    provider: ClassVar[str] = "openai"
    env_key: ClassVar[str | None] = "OPENAI_API_KEY"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    base_url_env: ClassVar[str | None] = "OPENAI_BASE_URL"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key or ''}"}

    def _path(self) -> str:
        return "/chat/completions"

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        for m in request.context:
            if isinstance(m, SystemMessage):
                messages.append({"role": "system", "content": _text(m.content)})
            elif isinstance(m, UserMessage):
                messages.append({"role": "user", "content": _text(m.content)})
            elif isinstance(m, AssistantMessage):
                msg: dict[str, Any] = {"role": "assistant", "content": _text(m.content) or None}
                if m.tool_calls:
                    msg["tool_calls"] = [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in m.tool_calls
                    ]
                messages.append(msg)
            elif isinstance(m, ToolMessage):
                for r in m.results:
                    messages.append(
                        {"role": "tool", "tool_call_id": r.tool_call_id, "content": r.content}
                    )
        body: dict[str, Any] = {"model": self.model_name, "messages": messages}
        s = request.sampling
        if s is not None:
            _put(
                body,
                temperature=s.temperature,
                max_completion_tokens=s.max_tokens,
                top_p=s.top_p,
                seed=s.seed,
                stop=list(s.stop) if s.stop else None,
            )
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        _put(body, tool_choice=request.tool_choice, parallel_tool_calls=request.parallel_tool_calls)
        return body

    def _parse(self, data: dict[str, Any]) -> ModelResponse:
        if data.get("error"):
            # some compatible servers send errors inside a 200
            raise self._fail_from(data)
        choices = data.get("choices") or []
        if not choices:
            raise self._fail("server_error", "response has no choices")
        choice = choices[0]
        message = choice.get("message") or {}
        if message.get("refusal"):
            raise self._fail("refusal", f"the model refused: {message['refusal']}", 200)
        finish = choice.get("finish_reason")
        if finish == "content_filter":
            raise self._fail("content_filter", "finish_reason: content_filter", 200)
        output: list[ContentText | ToolCall] = []
        if message.get("content"):
            output.append(ContentText(text=message["content"]))
        for call in message.get("tool_calls") or []:
            fn = call.get("function", {})
            output.append(
                ToolCall(
                    id=call.get("id", ""),
                    name=fn.get("name", ""),
                    arguments=_json_args(fn.get("arguments")),
                )
            )
        u = data.get("usage") or {}
        cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        return ModelResponse(
            output=tuple(output),
            usage=usage_of(u.get("prompt_tokens"), u.get("completion_tokens"), cached),
            stop_reason=finish,
            model=data.get("model"),
        )

    def _fail_from(self, data: dict[str, Any]) -> Exception:
        from fxtr.models._classify import category_from_http

        return self._fail(
            category_from_http(None, data), f"error in a 200 response: {data['error']}", 200
        )


class OpenAIResponsesAPI(OpenAIChatAPI):
    """The Responses API.

    ``status: failed`` or ``incomplete`` in a 200 response, and ``refusal`` output blocks,
    are failures.
    """

    def _path(self) -> str:
        return "/responses"

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for m in request.context:
            if isinstance(m, SystemMessage):
                items.append({"role": "system", "content": _text(m.content)})
            elif isinstance(m, UserMessage):
                items.append(
                    {
                        "role": "user",
                        "content": [{"type": "input_text", "text": b.text} for b in m.content],
                    }
                )
            elif isinstance(m, AssistantMessage):
                if m.content:
                    items.append(
                        {
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": b.text} for b in m.content],
                        }
                    )
                for c in m.tool_calls:
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": c.id,
                            "name": c.name,
                            "arguments": json.dumps(c.arguments),
                        }
                    )
            elif isinstance(m, ToolMessage):
                for r in m.results:
                    items.append(
                        {
                            "type": "function_call_output",
                            "call_id": r.tool_call_id,
                            "output": r.content,
                        }
                    )
        body: dict[str, Any] = {"model": self.model_name, "input": items}
        s = request.sampling
        if s is not None:
            _put(body, temperature=s.temperature, max_output_tokens=s.max_tokens, top_p=s.top_p)
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    # the Responses API validates strictly unless told (its default is true,
                    # which refuses optional parameters and defaults): as Chat Completions
                    "strict": False,
                }
                for t in request.tools
            ]
        _put(body, tool_choice=request.tool_choice, parallel_tool_calls=request.parallel_tool_calls)
        return body

    def _parse(self, data: dict[str, Any]) -> ModelResponse:
        status = data.get("status")
        if status == "failed" or data.get("error"):
            raise self._fail_from({"error": data.get("error") or {"message": "status: failed"}})
        if status == "incomplete":
            reason = (data.get("incomplete_details") or {}).get("reason", "")
            category = "content_filter" if reason == "content_filter" else "output_limit"
            if reason == "max_output_tokens" and _has_text(data):
                pass  # a truncated answer is still an answer; stop_reason says so
            else:
                raise self._fail(category, f"incomplete response: {reason}", 200)
        output: list[ContentText | ToolCall] = []
        for item in data.get("output") or []:
            if item.get("type") == "message":
                for block in item.get("content") or []:
                    if block.get("type") == "refusal":
                        raise self._fail(
                            "refusal", f"the model refused: {block.get('refusal')}", 200
                        )
                    if block.get("type") == "output_text":
                        output.append(ContentText(text=block.get("text", "")))
            elif item.get("type") == "function_call":
                output.append(
                    ToolCall(
                        id=item.get("call_id", ""),
                        name=item.get("name", ""),
                        arguments=_json_args(item.get("arguments")),
                    )
                )
        u = data.get("usage") or {}
        cached = (u.get("input_tokens_details") or {}).get("cached_tokens", 0)
        return ModelResponse(
            output=tuple(output),
            usage=usage_of(u.get("input_tokens"), u.get("output_tokens"), cached),
            stop_reason=(data.get("incomplete_details") or {}).get("reason") or status,
            model=data.get("model"),
        )


def _has_text(data: dict[str, Any]) -> bool:
    return any(
        block.get("type") == "output_text"
        for item in data.get("output") or []
        if item.get("type") == "message"
        for block in item.get("content") or []
    )


def _json_args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


class AnthropicMessagesAPI(ModelAPI):
    """The Messages API; ``base_url`` without ``/v1``, as in Anthropic's SDK.

    ``stop_reason: refusal`` in a 200 response is a ``refusal`` failure; an ``error`` event
    inside a 200 body (as streams send) is read like an HTTP error.
    """

    provider: ClassVar[str] = "anthropic"
    env_key: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    default_base_url: ClassVar[str] = "https://api.anthropic.com"
    base_url_env: ClassVar[str | None] = "ANTHROPIC_BASE_URL"
    default_max_tokens: ClassVar[int] = 4096

    def _headers(self) -> dict[str, str]:
        return {"x-api-key": self._api_key or "", "anthropic-version": "2023-06-01"}

    def _path(self) -> str:
        return "/v1/messages"

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        system: list[str] = []
        messages: list[dict[str, Any]] = []
        for m in request.context:
            if isinstance(m, SystemMessage):
                system.append(_text(m.content))
            elif isinstance(m, UserMessage):
                messages.append(
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": b.text} for b in m.content],
                    }
                )
            elif isinstance(m, AssistantMessage):
                content: list[dict[str, Any]] = [
                    {"type": "text", "text": b.text} for b in m.content
                ]
                content += [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                    for c in m.tool_calls
                ]
                messages.append({"role": "assistant", "content": content})
            elif isinstance(m, ToolMessage):
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": r.tool_call_id,
                                "content": r.content,
                                "is_error": r.is_error,
                            }
                            for r in m.results
                        ],
                    }
                )
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": (s.max_tokens if s and s.max_tokens else self.default_max_tokens),
            "messages": messages,
        }
        if system:
            body["system"] = "\n\n".join(system)
        if s is not None:
            _put(
                body,
                temperature=s.temperature,
                top_p=s.top_p,
                stop_sequences=list(s.stop) if s.stop else None,
            )
        if request.tools:
            body["tools"] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters or {"type": "object"},
                }
                for t in request.tools
            ]
        if request.tool_choice is not None:
            body["tool_choice"] = (
                {"type": request.tool_choice}
                if request.tool_choice in ("auto", "any", "none")
                else {"type": "tool", "name": request.tool_choice}
            )
        return body

    def _cost(self, data: dict[str, Any], usage: Usage) -> float | None:
        writes = int((data.get("usage") or {}).get("cache_creation_input_tokens") or 0)
        return cost_of(
            self.model_name,
            usage,
            provider=self.provider,
            api_url=self.base_url,
            cache_write_tokens=writes,
        )

    def _parse(self, data: dict[str, Any]) -> ModelResponse:
        if data.get("type") == "error" or "error" in data:
            from fxtr.models._classify import category_from_http

            category = category_from_http(None, data)
            if category == "unknown":
                category = "server_error"
            raise self._fail(category, f"error in a 200 response: {data.get('error')}", 200)
        stop = data.get("stop_reason")
        if stop == "refusal":
            raise self._fail("refusal", "stop_reason: refusal", 200)
        output: list[ContentText | ToolCall] = []
        for block in data.get("content") or []:
            if block.get("type") == "text":
                output.append(ContentText(text=block.get("text", "")))
            elif block.get("type") == "tool_use":
                output.append(
                    ToolCall(
                        id=block.get("id", ""),
                        name=block.get("name", ""),
                        arguments=block.get("input") or {},
                    )
                )
        u = data.get("usage") or {}
        cached = u.get("cache_read_input_tokens") or 0
        input_tokens = (
            (u.get("input_tokens") or 0) + cached + (u.get("cache_creation_input_tokens") or 0)
        )
        return ModelResponse(
            output=tuple(output),
            usage=usage_of(input_tokens, u.get("output_tokens"), cached),
            stop_reason=stop,
            model=data.get("model"),
        )
