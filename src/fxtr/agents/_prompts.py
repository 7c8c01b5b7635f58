"""What the agent loop says for itself.

The submit tool and the nudge to go on (inspect_ai's ``react``), and the simulated user's
prompt (tau-bench's user simulation).
"""

from __future__ import annotations

from fxtr.models import ToolSpec

SUBMIT = ToolSpec(
    name="submit",
    description="Submit your final answer, ending the task.",
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "The final answer."}},
        "required": ["answer"],
        "additionalProperties": False,
    },
)
"""The tool ``Agent(submit=True)`` adds (inspect_ai's ``react`` submit tool)."""

CONTINUE = (
    "Please proceed to the next step using your best judgement. If you believe you have "
    "completed the task, please call the `submit()` tool with your final answer."
)
"""What the agent is told when it replies without a tool call and must submit
(inspect_ai's ``react`` default)."""

USER_SIM_SYSTEM = """You are a user interacting with an agent.

Instruction: {instructions}

Rules:
- Just generate one line at a time to simulate the user's message.
- Do not give away all the instruction at once. Only provide the information that is necessary for the current step.
- Do not hallucinate information that is not provided in the instruction. If the agent asks for information you do not have, say that you do not know.
- If the instruction goal is satisfied, generate '{stop}' as a standalone message without anything else to end the conversation.
- Do not repeat the exact instruction in the conversation. Instead, use your own words to convey the same information.
- Try to make the conversation as natural as possible, and stick to the personalities in the instruction."""  # noqa: E501
"""The simulated user's system prompt (tau-bench's user simulation prompt)."""

USER_SIM_GREETING = "Hi! How can I help you today?"
"""The agent's greeting the simulated user's conversation starts from (as in tau-bench)."""
