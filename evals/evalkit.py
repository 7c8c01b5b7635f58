"""What the example evals share: models that run offline and switch to real providers.

With OPENAI_API_KEY (or ANTHROPIC_API_KEY) set, `model_api` returns the real provider's client;
otherwise a MockModelAPI with scripted, deterministic replies, priced like the real model so
the cost table means something offline. `PROVIDER` goes into every job's inputs, so cached
offline answers are never mistaken for real ones.
"""

from __future__ import annotations

import os
import re

from fxtr.models import (
    AnthropicMessagesAPI,
    ContentText,
    MockModelAPI,
    ModelRequest,
    OpenAIResponsesAPI,
    UserMessage,
)

LIVE_OPENAI = bool(os.environ.get("OPENAI_API_KEY"))
LIVE_ANTHROPIC = bool(os.environ.get("ANTHROPIC_API_KEY"))
PROVIDER = "live" if (LIVE_OPENAI or LIVE_ANTHROPIC) else "mock"

# What each offline model "knows": the small one misses a question.
KNOWLEDGE = {
    "capital of france": "The capital of France is Paris.",
    "2 + 2": "2 + 2 = 4.",
    "largest planet": "Jupiter is the largest planet in the solar system.",
    "wrote hamlet": "Hamlet was written by William Shakespeare.",
    "boiling point of water": "Water boils at 100 degrees Celsius at sea level.",
}
SMALL_MODEL_GAPS = {"wrote hamlet"}


def _last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.context):
        if isinstance(message, UserMessage):
            return "".join(block.text for block in message.content)
    return ""


def scripted_answer(model_name: str):
    """A reply function: answers from KNOWLEDGE, with gaps for small models."""

    def reply(request: ModelRequest) -> str:
        question = _last_user_text(request).lower()
        for topic, answer in KNOWLEDGE.items():
            if topic in question:
                if "mini" in model_name or "haiku" in model_name:
                    if topic in SMALL_MODEL_GAPS:
                        return "I am not sure."
                return answer
        if "judge" in question or "expected answer" in question:
            return scripted_judge(request)
        return "I don't know."

    return reply


def scripted_judge(request: ModelRequest) -> str:
    """Offline judge: YES when the expected answer appears in the answer."""
    text = _last_user_text(request)
    expected = re.search(r"Expected answer: (.*)", text)
    answer = re.search(r"Answer: (.*)", text)
    if expected and answer and expected.group(1).strip().lower() in answer.group(1).lower():
        return "YES"
    return "NO"


def model_api(model_name: str, reply=None):
    """The real provider's client when its key is set, else an offline mock."""
    if model_name.startswith(("gpt", "o3", "o4")) and LIVE_OPENAI:
        return OpenAIResponsesAPI(model_name)
    if model_name.startswith("claude") and LIVE_ANTHROPIC:
        return AnthropicMessagesAPI(model_name)
    return MockModelAPI(model_name, reply or scripted_answer(model_name))


def ask(text: str) -> ModelRequest:
    """A one-message request."""
    return ModelRequest(context=(UserMessage(content=(ContentText(text=text),)),))
