"""The simulated user's side of the agent loop: what it is asked, and what its reply does."""

from __future__ import annotations

from fxtr.agents._prompts import USER_SIM_GREETING, USER_SIM_SYSTEM
from fxtr.agents._types import Message, UserSim, UserTools
from fxtr.evals._cases import Case
from fxtr.models import (
    AssistantMessage,
    ContentText,
    ModelRequest,
    SystemMessage,
    ToolMessage,
    UserMessage,
)


def _text(message: AssistantMessage | UserMessage) -> str:
    return "".join(b.text for b in message.content)


def user_request(
    user: UserSim, case: Case, messages: list[Message], user_tools: list[UserTools] | None = None
) -> ModelRequest:
    """What the simulated user is asked: its instructions, the conversation from its side.

    The agent's words come as the user's, the user's own as the assistant's, and its tool
    calls (``UserSim(tools=...)``) where it made them.

    Raises:
        ValueError: neither the ``UserSim`` nor the case says who the user is.
    """
    instructions = user.instructions or case.metadata.get("user")
    if not instructions:
        msg = (
            f"The simulated user has no instructions for case {case.id!r}: give "
            "UserSim(instructions=...) or the case a metadata['user'] column."
        )
        raise ValueError(msg)
    template = USER_SIM_SYSTEM if user.system is None else user.system
    seen: list[Message] = [
        SystemMessage(
            content=(ContentText(text=template.format(instructions=instructions, stop=user.stop)),)
        )
    ]
    if user.opening is None:  # the agent's opening is in the messages when there is one
        seen.append(UserMessage(content=(ContentText(text=USER_SIM_GREETING),)))
    own: dict[int, list[UserTools]] = {}
    for done in user_tools or ():
        own.setdefault(done.at, []).append(done)
    for n, m in enumerate([*messages, None]):
        for done in own.get(n, ()):
            seen.append(AssistantMessage(tool_calls=done.calls))
            seen.append(ToolMessage(results=done.results))
        if isinstance(m, UserMessage):
            seen.append(AssistantMessage(content=m.content))
        elif isinstance(m, AssistantMessage) and _text(m):
            seen.append(UserMessage(content=(ContentText(text=_text(m)),)))
    return ModelRequest(
        context=tuple(seen),
        tools=tuple(t.spec for t in user.tools),
        sampling=user.model.sampling,
    )


def heard(
    user: UserSim, said: str | None, messages: list[Message], simulated: list[int]
) -> str | None:
    """Take in the simulated user's reply; the stop it makes, if any.

    A conversation that opens as τ²-bench's (``UserSim(opening=...)``) keeps the user's last
    message too, as τ²'s trajectories do; otherwise it ends the loop unrecorded, as before.
    """
    if said is None:  # the user kept calling tools
        return "limit:turns"
    if user.stopped(said):
        if user.opening is not None:
            messages.append(UserMessage(content=(ContentText(text=said),)))
        return "user_stop"
    simulated.append(len(messages))
    messages.append(UserMessage(content=(ContentText(text=said),)))
    return None
