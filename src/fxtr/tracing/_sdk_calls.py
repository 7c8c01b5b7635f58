"""What a call made with the official ``openai`` / ``anthropic`` SDK sent and got back.

Three APIs: OpenAI Chat Completions (``/chat/completions``), OpenAI Responses
(``/responses``) and Anthropic Messages (``/messages``). Requests are read from the JSON body
the SDK sends; replies from the SDK's parsed objects, from a raw response's JSON, or from the
events of a stream (whose final events carry the usage). Objects and dicts are read alike.
"""

from __future__ import annotations

import json
from typing import Any

from fxtr.tracing._recorder import clip

API_OF_PATH = {"chat/completions": "chat", "responses": "responses", "messages": "messages"}


def api_of(method: str, url: str) -> str | None:
    """``chat``, ``responses`` or ``messages`` for a model-call request, else ``None``."""
    if method.lower() != "post":
        return None
    path = url.split("?", 1)[0].rstrip("/")
    for suffix, api in API_OF_PATH.items():
        if path == suffix or path.endswith("/" + suffix):
            return api
    return None


def _g(obj: Any, key: str, default: Any = None) -> Any:
    """A field of a dict or an attribute of an SDK object (``default`` when absent)."""
    if type(obj) is dict:
        return obj.get(key, default)
    return getattr(obj, key, default)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


# requests -------------------------------------------------------------------------------


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    kind = _g(part, "type")
    text = _g(part, "text")
    if isinstance(text, str):
        return text
    if kind in ("tool_result", "function_call_output"):
        return _content_text(_g(part, "content") or _g(part, "output"))
    if kind in ("tool_use", "function_call"):
        return f"[tool call {_g(part, 'name')}]"
    return f"[{kind or 'part'}]"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(_part_text(p) for p in content)
    return _part_text(content)


def _message(role: Any, content: Any) -> dict[str, Any]:
    return {"role": str(role or "user"), "content": clip(_content_text(content))}


def request_messages(api: str, body: Any) -> list[dict[str, Any]]:
    """The request's messages as ``{"role", "content"}`` (text only, each clipped)."""
    if not isinstance(body, dict):
        return []
    out: list[dict[str, Any]] = []
    if api == "chat":
        for m in body.get("messages") or ():
            content = _g(m, "content")
            calls = _g(m, "tool_calls") or ()
            text = _content_text(content) + "".join(
                f"[tool call {_g(_g(c, 'function'), 'name')}]" for c in calls
            )
            out.append({"role": str(_g(m, "role") or "user"), "content": clip(text)})
    elif api == "responses":
        if body.get("instructions"):
            out.append(_message("system", body["instructions"]))
        items = body.get("input")
        if isinstance(items, str):
            out.append(_message("user", items))
        else:
            for item in items or ():
                kind = _g(item, "type")
                if kind == "function_call_output":
                    out.append(_message("tool", _g(item, "output")))
                elif kind == "function_call":
                    out.append(_message("assistant", [item]))
                else:
                    out.append(_message(_g(item, "role"), _g(item, "content")))
    elif api == "messages":
        if body.get("system"):
            out.append(_message("system", body["system"]))
        for m in body.get("messages") or ():
            out.append(_message(_g(m, "role"), _g(m, "content")))
    return out


# replies --------------------------------------------------------------------------------


class Reply:
    """What a call got back: tokens, the reply text, the stop reason; filled as events come."""

    __slots__ = (
        "cache_writes",
        "cached",
        "error",
        "finished",
        "input_tokens",
        "output_tokens",
        "parts",
        "refused",
        "stop_reason",
        "usage_seen",
    )

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached = 0
        self.cache_writes = 0
        self.parts: list[str] = []
        self.stop_reason: str | None = None
        self.refused = False
        """The model sent a refusal (OpenAI's ``refusal`` field or block)."""
        self.usage_seen = False
        self.finished = False
        """The stream's final event was seen."""
        self.error: str | None = None
        """An error reported inside a 200 stream (a ``response.failed`` event)."""

    @property
    def text(self) -> str | None:
        return "".join(self.parts) if self.parts else None

    @property
    def declined(self) -> str | None:
        """``refusal`` or ``content_filter`` when the model declined inside a 200 response."""
        if self.refused or self.stop_reason == "refusal":
            return "refusal"
        if self.stop_reason == "content_filter":
            return "content_filter"
        return None

    # usage of each API ------------------------------------------------------------------

    def chat_usage(self, usage: Any) -> None:
        if usage is None:
            return
        self.usage_seen = True
        self.input_tokens = _int(_g(usage, "prompt_tokens"))
        self.output_tokens = _int(_g(usage, "completion_tokens"))
        self.cached = _int(_g(_g(usage, "prompt_tokens_details"), "cached_tokens"))

    def responses_usage(self, usage: Any) -> None:
        if usage is None:
            return
        self.usage_seen = True
        self.input_tokens = _int(_g(usage, "input_tokens"))
        self.output_tokens = _int(_g(usage, "output_tokens"))
        self.cached = _int(_g(_g(usage, "input_tokens_details"), "cached_tokens"))

    def messages_usage(self, usage: Any) -> None:
        """Anthropic's ``input_tokens`` leaves out cache reads and writes; ours counts them."""
        if usage is None:
            return
        self.usage_seen = True
        fresh = _g(usage, "input_tokens")
        reads = _g(usage, "cache_read_input_tokens")
        writes = _g(usage, "cache_creation_input_tokens")
        if isinstance(reads, int):
            self.cached = reads
        if isinstance(writes, int):
            self.cache_writes = writes
        if isinstance(fresh, int):
            self.input_tokens = fresh + self.cached + self.cache_writes
        out = _g(usage, "output_tokens")
        if isinstance(out, int):
            self.output_tokens = out

    # whole responses --------------------------------------------------------------------

    def read(self, api: str, data: Any) -> None:
        """Read a complete (non-streamed) response: an SDK object or its JSON."""
        self.finished = True
        if api == "chat":
            self.chat_usage(_g(data, "usage"))
            for choice in (_g(data, "choices") or ())[:1]:
                message = _g(choice, "message")
                refusal = _g(message, "refusal")
                text = _g(message, "content") or refusal
                if isinstance(text, str):
                    self.parts.append(text)
                self.refused = isinstance(refusal, str) and bool(refusal)
                self.stop_reason = _g(choice, "finish_reason")
        elif api == "responses":
            self.responses_usage(_g(data, "usage"))
            self.parts.extend(_responses_text(data, self))
            self.stop_reason = _responses_stop(data)
        elif api == "messages":
            self.messages_usage(_g(data, "usage"))
            for block in _g(data, "content") or ():
                if _g(block, "type") == "text" and isinstance(_g(block, "text"), str):
                    self.parts.append(_g(block, "text"))
            self.stop_reason = _g(data, "stop_reason")

    def read_json(self, api: str, content: bytes) -> None:
        """Read a raw response's body."""
        try:
            data = json.loads(content)
        except ValueError:
            return
        self.read(api, data)

    # stream events ----------------------------------------------------------------------

    def event(self, api: str, event: Any) -> None:
        """Read one event of a stream (a chunk, or a typed event)."""
        if api == "chat":  # per chunk of every chat stream: attribute reads kept few
            g = _g if type(event) is dict else getattr
            usage = g(event, "usage", None)
            if usage is not None:
                self.chat_usage(usage)
            for choice in g(event, "choices", None) or ():
                if g(choice, "index", None) not in (0, None):
                    continue
                delta = g(choice, "delta", None)
                refusal = _g(delta, "refusal")
                text = _g(delta, "content") or refusal
                if type(text) is str:
                    self.parts.append(text)
                if refusal and isinstance(refusal, str):
                    self.refused = True
                reason = g(choice, "finish_reason", None)
                if reason:
                    self.stop_reason = reason
                    self.finished = True
            return
        kind = _g(event, "type")
        if api == "responses":
            if kind in ("response.output_text.delta", "response.refusal.delta"):
                delta = _g(event, "delta")
                if isinstance(delta, str):
                    self.parts.append(delta)
                self.refused = self.refused or kind == "response.refusal.delta"
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                response = _g(event, "response")
                self.responses_usage(_g(response, "usage"))
                self.stop_reason = _responses_stop(response)
                self.finished = True
                if kind == "response.failed":
                    error = _g(response, "error")
                    self.error = f"{_g(error, 'code')}: {_g(error, 'message')}"
            elif kind == "error":
                self.error = f"{_g(event, 'code')}: {_g(event, 'message')}"
        elif api == "messages":
            if kind == "content_block_delta":
                delta = _g(event, "delta")
                if _g(delta, "type") == "text_delta" and isinstance(_g(delta, "text"), str):
                    self.parts.append(_g(delta, "text"))
            elif kind == "message_start":
                self.messages_usage(_g(_g(event, "message"), "usage"))
            elif kind == "message_delta":
                self.messages_usage(_g(event, "usage"))
                reason = _g(_g(event, "delta"), "stop_reason")
                if reason:
                    self.stop_reason = reason
            elif kind == "message_stop":
                self.finished = True


def _responses_stop(data: Any) -> Any:
    """The response's status, or ``content_filter`` when it stopped on one."""
    if _g(_g(data, "incomplete_details"), "reason") == "content_filter":
        return "content_filter"
    return _g(data, "status")


def _responses_text(data: Any, reply: Reply) -> list[str]:
    parts: list[str] = []
    for item in _g(data, "output") or ():
        if _g(item, "type") != "message":
            continue
        for block in _g(item, "content") or ():
            kind = _g(block, "type")
            if kind == "output_text" and isinstance(_g(block, "text"), str):
                parts.append(_g(block, "text"))
            elif kind == "refusal" and isinstance(_g(block, "refusal"), str):
                parts.append(_g(block, "refusal"))
                reply.refused = True
    return parts


class BodyReader:
    """Reads a raw response's body as its caller reads it (``with_streaming_response``).

    The bytes the caller pulls through ``iter_bytes`` (``iter_lines``, ``iter_text`` and
    ``read`` go through it) are fed here: server-sent events line by line (each ``data:``
    JSON is a stream event for ``Reply.event``), a plain body as JSON once it ends. Reading
    stops when the caller parses the response instead (the SDK object is read then).
    """

    __slots__ = ("api", "buffer", "on", "reply", "streamed")

    def __init__(self, reply: Reply, api: str, streamed: bool) -> None:
        self.reply = reply
        self.api = api
        self.streamed = streamed
        self.buffer = bytearray()
        self.on = True

    def feed(self, chunk: bytes) -> None:
        """Take the next decoded bytes of the body."""
        if not self.on:
            return
        self.buffer += chunk
        if self.streamed and b"\n" in chunk:
            *lines, rest = self.buffer.split(b"\n")
            self.buffer = bytearray(rest)
            for line in lines:
                self._line(bytes(line))

    def end(self) -> None:
        """Read what is left (the body ended, or its response was closed)."""
        if not self.on:
            return
        self.on = False
        if self.streamed:
            self._line(bytes(self.buffer))
        elif self.buffer:
            self.reply.read_json(self.api, bytes(self.buffer))
        self.buffer = bytearray()

    def _line(self, line: bytes) -> None:
        line = line.strip()
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if not data or data == b"[DONE]":
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if isinstance(event, dict):
            self.reply.event(self.api, event)
