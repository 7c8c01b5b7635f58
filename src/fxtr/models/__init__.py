"""Model APIs over httpx: requests, responses, failures, retries, tokens and cost."""

from fxtr.models._types import (
    AssistantMessage,
    ContentText,
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    ModelResponse,
    RetryConfig,
    Sampling,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)

__all__ = [
    "AssistantMessage",
    "ContentText",
    "ModelCallError",
    "ModelCallFailure",
    "ModelRequest",
    "ModelResponse",
    "RetryConfig",
    "Sampling",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "UserMessage",
]
