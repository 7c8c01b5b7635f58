"""The steps of an agent's environment and tool calls on whole values (not trees).

``run_tool`` is the tool call of agents without a ``time_limit`` and of environments stored
whole (by fxtr before environments were trees, ``_env``): its code is what stores hold entries
of, so it is kept as it was (an edit would send every cached tool call to review); a call of an
agent with a ``time_limit`` is ``run_timed_tool``, cut at the time the limit leaves.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

from fxtr.agents._tool import OutOfTime, Tool, _content, call_within, import_path
from fxtr.agents._types import Environment, ToolOutcome
from fxtr.evals._cases import Case
from fxtr.experiment._encoding import EncodingError, decode_text, encode_text
from fxtr.experiment.entities import BoundID
from fxtr.experiment.steps import StepContext, step
from fxtr.models import ToolCall, ToolResult

ENCODABLE = (
    "keep the environment an Entity (fxtr.Entity subclass) or JSON-like values "
    "(dict, list, str, int, float, bool, None)."
)
"""How an environment that cannot be stored is mended (its error messages end with it)."""


def _check_env(value: Any, where: str) -> None:
    try:
        encode_text(value)
    except EncodingError as exc:
        msg = (
            f"{where} is a {type(value).__name__}, which has no canonical encoding ({exc}): "
            f"{ENCODABLE}"
        )
        raise TypeError(msg) from None


@step(name="fxtr.agents.env")
async def build_env(context: StepContext, env: str, code: str | None, case: Case) -> Environment:
    """A case's initial environment, from ``Agent(env=FUNCTION)``.

    Raises:
        LookupError: the function cannot be imported.
        TypeError: it returned a value that cannot be stored.
    """
    fn = import_path(env, "environment function (Agent(env=...))")
    value = fn(case)
    if inspect.isawaitable(value):
        value = await value
    _check_env(value, f"The environment {env!r} built for case {case.id!r}")
    return Environment(state=value)


@step(name="fxtr.agents.tool")
async def run_tool(context: StepContext, tool: Tool, call: ToolCall, env: Any) -> ToolOutcome:
    """Run one tool call on the environment as the previous call left it.

    Its code is what stores hold entries of (an edit would send every cached tool call of
    every agent eval to review): a call of an agent with a ``time_limit`` is ``run_timed_tool``.

    A tool that raises is not a failure: its result is the error (``ErrorType: message``),
    returned to the model like any result, and the trajectory goes on.

    Raises:
        TypeError: the tool returned a value that cannot be sent to the model, or left an
            environment that cannot be stored (a bug to fix, not the model's doing).
    """
    if isinstance(env, BoundID):
        env = await context.load(env)
    state = decode_text(encode_text(env)) if env is not None else None  # never the caller's
    arguments = {k: v for k, v in call.arguments.items() if k != "env"}
    if tool.uses_env:
        arguments["env"] = state
    started = time.perf_counter()
    try:
        value = tool.fn(**arguments)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:  # the model sees the error and may try again
        seconds = time.perf_counter() - started
        context.log(f"tool {tool.name} raised {type(exc).__name__}: {exc}")
        result = ToolResult(
            tool_call_id=call.id, content=f"{type(exc).__name__}: {exc}", is_error=True
        )
    else:
        seconds = time.perf_counter() - started
        result = ToolResult(tool_call_id=call.id, content=_content(value, tool))
    if tool.uses_env:
        _check_env(state, f"The environment after tool {tool.name!r}")
    return ToolOutcome(result=result, env=state if tool.uses_env else env, seconds=seconds)


@step(name="fxtr.agents.timed_tool")
async def run_timed_tool(
    context: StepContext, tool: Tool, call: ToolCall, env: Any, timeout: float | None
) -> ToolOutcome:
    """Run one tool call of an agent with a ``time_limit`` (``run_tool``, cut at the time left).

    A tool that raises is not a failure: its result is the error (``ErrorType: message``),
    returned to the model like any result, and the trajectory goes on. ``timeout``: the time
    ``time_limit`` leaves (see ``call_within``); a cut call's seconds use it up.

    Raises:
        TypeError: the tool returned a value that cannot be sent to the model, or left an
            environment that cannot be stored (a bug to fix, not the model's doing).
    """
    if isinstance(env, BoundID):
        env = await context.load(env)
    state = decode_text(encode_text(env)) if env is not None else None  # never the caller's
    arguments = {k: v for k, v in call.arguments.items() if k != "env"}
    if tool.uses_env:
        arguments["env"] = state
    started = time.perf_counter()
    try:
        value = await call_within(tool, arguments, timeout)
    except OutOfTime as exc:
        context.log(str(exc))
        result = ToolResult(tool_call_id=call.id, content=f"TimeoutError: {exc}", is_error=True)
        seconds = max(time.perf_counter() - started, timeout or 0.0)
        return ToolOutcome(result=result, env=env, seconds=seconds)
    except Exception as exc:  # the model sees the error and may try again
        seconds = time.perf_counter() - started
        context.log(f"tool {tool.name} raised {type(exc).__name__}: {exc}")
        result = ToolResult(
            tool_call_id=call.id, content=f"{type(exc).__name__}: {exc}", is_error=True
        )
    else:
        seconds = time.perf_counter() - started
        result = ToolResult(tool_call_id=call.id, content=_content(value, tool))
    if tool.uses_env:
        _check_env(state, f"The environment after tool {tool.name!r}")
    return ToolOutcome(result=result, env=state if tool.uses_env else env, seconds=seconds)
