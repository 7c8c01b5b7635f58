"""τ²'s tools as fxtr tools: each call runs τ²'s own toolkit on the trajectory's databases.

A tool is named by an import path ``fxtr.benchmarks.tau2._tools:agent_tools.DOMAIN.NAME``
(``user_tools`` for the simulated user's), which resolves to :func:`call` bound to the
domain, the requestor and τ²'s tool name, so a step in any process finds it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
from typing import Any

from fxtr.agents import Tool
from fxtr.benchmarks.tau2 import _tau2
from fxtr.models import ToolSpec


class Error(Exception):
    """A τ² tool's failure: the model reads ``Error: <message>``, τ²'s own wording."""


async def call(
    domain: str, requestor: str, tool: str, /, env: dict[str, Any], **arguments: Any
) -> str:
    """Run τ² tool ``tool`` of ``domain`` on ``env`` (changed in place), in a thread.

    As τ²'s ``Environment.get_response`` does: its result as τ² serializes it, its error as
    τ² words it, and the environment synced after (telecom's user surroundings). A thread,
    because τ²'s tools are synchronous and its databases take a moment to load.

    Raises:
        Error: the tool failed (the model reads the error, the trajectory goes on).
    """
    return await asyncio.to_thread(_call, domain, requestor, tool, env, arguments)


def _call(
    domain: str, requestor: str, tool: str, env: dict[str, Any], arguments: dict[str, Any]
) -> str:
    environment = _tau2.environment(domain, env)
    message_model = _tau2.tau2_module("data_model.message")
    reply = environment.get_response(
        message_model.ToolCall(id="", name=tool, arguments=arguments, requestor=requestor)
    )
    environment.sync_tools()  # as τ²'s orchestrator does after every step, a failed call too
    write_back(env, _tau2.state_of(environment))
    content = reply.content or ""
    if reply.error:
        raise Error(content.removeprefix("Error: "))
    return content


def write_back(old: Any, new: Any) -> Any:
    """Make ``old`` equal ``new`` changing only what differs, in place where it can.

    So the environment's stored tree sees the booking a call changed, not a new database
    (fxtr tracks the parts a tool touches). Returns the value to keep at this place: ``old``
    itself, changed, or ``new`` where the two cannot be merged (another type, a list of
    another length).
    """
    if type(old) is not type(new) and not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    if isinstance(old, dict):
        for key in [k for k in old if k not in new]:
            del old[key]
        for key, value in new.items():
            if key not in old:
                old[key] = value
            elif old[key] != value:
                kept = write_back(old[key], value)
                if kept is not old[key]:
                    old[key] = kept
        return old
    if isinstance(old, list) and len(old) == len(new):
        for n, value in enumerate(new):
            if old[n] != value:
                kept = write_back(old[n], value)
                if kept is not old[n]:
                    old[n] = kept
        return old
    return old if old == new else new


class _Domain:
    def __init__(self, domain: str, requestor: str) -> None:
        self.domain, self.requestor = domain, requestor

    def __getattr__(self, tool: str) -> Any:
        if tool.startswith("__"):
            raise AttributeError(tool)
        return functools.partial(call, self.domain, self.requestor, tool)


class _Requestor:
    def __init__(self, requestor: str) -> None:
        self.requestor = requestor

    def __getattr__(self, domain: str) -> _Domain:
        if domain not in _tau2.DOMAINS:
            raise AttributeError(domain)
        return _Domain(domain, self.requestor)


agent_tools = _Requestor("assistant")
"""``agent_tools.DOMAIN.NAME``: τ² tool NAME of DOMAIN, called by the agent."""
user_tools = _Requestor("user")
"""``user_tools.DOMAIN.NAME``: τ² user tool NAME of DOMAIN, called by the simulated user."""


@functools.cache
def tools(domain: str, requestor: str) -> tuple[Tool, ...]:
    """The fxtr tools of a domain's τ² toolkit (the agent's, or the user's: maybe none).

    Each has τ²'s name, description and JSON schema, and a code hash of τ²'s function and of
    ``_call``, so another τ² version's tool sends its cached calls through the conflict
    policy.
    """
    env = _tau2.environment(domain)
    toolkit = env.tools if requestor == "assistant" else env.user_tools
    if toolkit is None:
        return ()
    names = "agent_tools" if requestor == "assistant" else "user_tools"
    made = []
    for name, tau2_tool in toolkit.get_tools().items():
        schema = tau2_tool.openai_schema["function"]
        source = inspect.getsource(_call) + inspect.getsource(getattr(toolkit, name))
        code = hashlib.sha256(source.encode()).hexdigest()[:16]
        made.append(
            Tool(
                path=f"{__name__}:{names}.{domain}.{name}",
                spec=ToolSpec(
                    name=schema["name"],
                    description=schema.get("description", ""),
                    parameters=schema.get("parameters", {}),
                ),
                code=code,
                uses_env=True,
            )
        )
    return tuple(made)
