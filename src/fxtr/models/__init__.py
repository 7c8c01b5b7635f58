"""Model APIs over httpx: requests, responses, failures, retries, tokens and cost."""

from fxtr.models._api import DEFAULT_FAILURE_CATEGORIES_TO_RETRY, ModelAPI, generate_with_retries
from fxtr.models._mock import MockModelAPI
from fxtr.models._prices import PRICES, UnknownPriceWarning, cost_of, set_price
from fxtr.models._providers import AnthropicMessagesAPI, OpenAIChatAPI, OpenAIResponsesAPI
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
    "DEFAULT_FAILURE_CATEGORIES_TO_RETRY",
    "PRICES",
    "AnthropicMessagesAPI",
    "AssistantMessage",
    "ContentText",
    "MockModelAPI",
    "ModelAPI",
    "ModelCallError",
    "ModelCallFailure",
    "ModelRequest",
    "ModelResponse",
    "OpenAIChatAPI",
    "OpenAIResponsesAPI",
    "RetryConfig",
    "Sampling",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "ToolResult",
    "ToolSpec",
    "UnknownPriceWarning",
    "Usage",
    "UserMessage",
    "cost_of",
    "generate_with_retries",
    "set_price",
]
