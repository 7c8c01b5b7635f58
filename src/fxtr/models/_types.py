"""Model request and response types: entities, so every request can be recorded and hashed."""

from __future__ import annotations

import dataclasses
from typing import Any

from fxtr.experiment._entity import Entity


class ContentText(Entity):
    """A block of text in a message or a reply."""

    text: str


class ToolCall(Entity):
    """A call the model asks for: tool name and JSON arguments."""

    id: str
    name: str
    arguments: dict[str, Any]


class ToolResult(Entity):
    """The result of a tool call, sent back to the model."""

    tool_call_id: str
    content: str
    is_error: bool = False


class ToolSpec(Entity):
    """A tool the model may call: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)


class SystemMessage(Entity):
    """Instructions for the model."""

    content: tuple[ContentText, ...]


class UserMessage(Entity):
    """A user turn."""

    content: tuple[ContentText, ...]


class AssistantMessage(Entity):
    """A model turn, possibly with tool calls."""

    content: tuple[ContentText, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()


class ToolMessage(Entity):
    """Tool results sent back to the model."""

    results: tuple[ToolResult, ...]


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage


class Sampling(Entity):
    """Sampling settings; ``None`` leaves the provider's default."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        tokens = self.max_tokens
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
            msg = f"Sampling(max_tokens={tokens!r}): max_tokens is a whole number of tokens."
            raise TypeError(msg)
        if tokens is not None and tokens < 1:
            msg = (
                f"Sampling(max_tokens={tokens!r}): max_tokens must be 1 or more (the most "
                "output tokens a call may use), or None for the provider's default."
            )
            raise ValueError(msg)


class ModelRequest(Entity):
    """One request to a model: the conversation, tools and sampling."""

    context: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str | None = None
    parallel_tool_calls: bool | None = None
    sampling: Sampling | None = None


class Usage(Entity):
    """Tokens a call used."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0


class ModelResponse(Entity):
    """What a model answered, with usage and cost (``None`` for a model without a price)."""

    output: tuple[ContentText | ToolCall, ...]
    usage: Usage = Usage()
    cost: float | None = None
    stop_reason: str | None = None
    model: str | None = None

    @property
    def text(self) -> str:
        """The text blocks of the reply, joined."""
        return "".join(block.text for block in self.output if isinstance(block, ContentText))


class ModelCallFailure(Entity):
    """A model call that failed, as a value: ``generate_with_retries`` returns it.

    Categories: rate_limit, quota, billing, overloaded, server_error, timeout, connection,
    context_overflow, output_limit, payload_too_large, refusal, content_filter,
    invalid_request, auth, permission, not_found, unknown.
    """

    category: str
    description: str
    status_code: int | None = None
    retry_after: float | None = None
    """Seconds the provider asked to wait (``Retry-After``), if it said."""


class ModelCallError(Exception):
    """A failed model call raised as an exception; ``failure`` holds the details."""

    def __init__(self, failure: ModelCallFailure) -> None:
        super().__init__(f"{failure.category}: {failure.description}")
        self.failure = failure
        self.status_code = failure.status_code


class RetryConfig(Entity):
    """How ``generate_with_retries`` retries: attempts, backoff with jitter, a time budget."""

    max_attempts: int = 5
    initial_delay: float = 1.0
    """Seconds before the first retry; doubled each time, up to ``max_delay``."""
    max_delay: float = 60.0
    jitter: float = 0.25
    """Up to this fraction of the delay is added at random, so clients do not retry in step."""
    total_budget: float | None = 300.0
    """Seconds all attempts together may take; ``None`` for no limit."""
