"""The agent's values: ``Agent``, ``UserSim``, ``Trajectory``, and what each step returns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fxtr.agents._tool import Tool, check_nesting, import_path, path_of
from fxtr.evals._models import Model
from fxtr.experiment._definition import _normalized_source_hash
from fxtr.experiment._entity import Entity
from fxtr.models import (
    AssistantMessage,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
)

Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage

STOPS = (
    "answer",
    "submit",
    "user_stop",
    "limit:turns",
    "limit:tokens",
    "limit:cost",
    "limit:time",
)
"""How a trajectory can end."""

DEFAULT_USER_STOP = "###STOP###"


def _tools(tools: Sequence[Any], owner: str) -> tuple[Tool, ...]:
    """``tools`` as a tuple, each a ``@tool`` function.

    Raises:
        TypeError: one is not, named with the fix.
    """
    tools = tuple(tools)
    bad = [t for t in tools if not isinstance(t, Tool)]
    if bad:
        msg = (
            f"{owner}(tools=...) takes @tool functions, got {bad[0]!r}: decorate it with "
            "@fxtr.agents.tool."
        )
        raise TypeError(msg)
    return tools


class UserSim(Entity):
    """A simulated user (tau-bench's): a model playing the user from instructions.

    When the agent replies without a tool call, the simulated user answers, following
    ``instructions`` (or the case's ``metadata["user"]``), until its reply contains ``stop``
    (or one of ``stops``) or a limit hits. Its calls are recorded with the role ``user_sim``.

    With ``tools`` (τ²-bench's dual control) the simulated user may call tools too: they act
    on the trajectory's environment, each call a step ``user_tool[i,j]``, their results go back
    to the user, who is asked again (``user[i,k]``) until it replies in words. With ``opening``
    the conversation opens as τ²-bench's does: that agent message first, then the user's
    (step ``user_open``), instead of the case's prompt.
    """

    __added_fields__ = ("tools", "system", "opening", "stops")

    model: Model
    """The model that plays the user."""
    instructions: str | None = None
    """Who the user is and what they want; ``None``: the case's ``metadata["user"]``."""
    stop: str = DEFAULT_USER_STOP
    """What the user says when the task is done (the trajectory then stops ``user_stop``)."""
    tools: tuple[Tool, ...] = ()
    """What the simulated user may call (on the same environment as the agent's tools)."""
    system: str | None = None
    """The user's system prompt, a template of ``{instructions}`` and ``{stop}``; ``None``:
    fxtr's (tau-bench's user prompt)."""
    opening: str | None = None
    """The agent's first message; the user then speaks first (``None``: the case's prompt
    opens the conversation as the user's first message)."""
    stops: tuple[str, ...] = ()
    """Other markers that end the conversation as ``stop`` does (τ²'s transfer)."""

    def __init__(
        self,
        model: Model,
        instructions: str | None = None,
        stop: str = DEFAULT_USER_STOP,
        *,
        tools: Sequence[Tool] = (),
        system: str | None = None,
        opening: str | None = None,
        stops: Sequence[str] = (),
    ) -> None:
        if not isinstance(model, Model):
            msg = f"UserSim(model) takes a fxtr.evals.Model, got {model!r}: write Model(...)."
            raise TypeError(msg)
        tools = _tools(tools, "UserSim")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "instructions", instructions)
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "system", system)
        object.__setattr__(self, "opening", opening)
        object.__setattr__(self, "stops", tuple(stops))

    def stopped(self, said: str) -> bool:
        """Whether the user's reply ends the conversation."""
        return any(marker in said for marker in (self.stop, *self.stops))


class Agent(Entity):
    """An agent: tools, a system prompt, an environment, limits, and maybe a simulated user.

    Given to ``evaluate(..., agent=Agent(...))``, each (model, case, sample) runs the loop:
    the model answers or calls tools, the tools run, their results go back, until it
    answers (``submit`` it, with ``submit=True``), the simulated user says stop, or a limit
    ends it. Every turn and every tool call is a cached step.
    """

    __added_fields__ = ("sandbox", "sandbox_code")

    tools: tuple[Tool, ...] = ()
    """What the model may call (``@tool`` functions)."""
    system: str | None = None
    """The system prompt (default: the model's own ``system``)."""
    env: str | None = None
    """``module:qualname`` of the function ``(case) -> Entity`` that builds a case's initial
    environment (``Agent(env=FUNCTION)``); ``None`` for tools without state."""
    env_code: str | None = None
    """Hash of that function's source: editing it rebuilds the environments (through the
    conflict policy)."""
    max_turns: int = 20
    """Model turns at most; then the trajectory stops ``limit:turns``."""
    token_limit: int | None = None
    """Input plus output tokens of the agent's model at most (``limit:tokens``)."""
    cost_limit: float | None = None
    """US dollars of the agent's model at most (``limit:cost``)."""
    time_limit: float | None = None
    """Seconds of model and tool time at most (``limit:time``)."""
    submit: bool = False
    """Add a ``submit(answer)`` tool: the loop then ends only on submit or a limit."""
    user: UserSim | None = None
    """A simulated user who answers the agent's replies."""
    sandbox: Any = None
    """The trajectories' sandbox (``fxtr.sandbox.Sandbox``), or ``module:qualname`` of an
    importable ``(case) -> Sandbox`` (a repository per task); ``None`` for no sandbox."""
    sandbox_code: str | None = None
    """Hash of that function's source."""

    def __init__(
        self,
        tools: Sequence[Tool] = (),
        *,
        system: str | None = None,
        env: Callable[..., Any] | str | None = None,
        env_code: str | None = None,
        max_turns: int = 20,
        token_limit: int | None = None,
        cost_limit: float | None = None,
        time_limit: float | None = None,
        submit: bool = False,
        user: UserSim | None = None,
        sandbox: Any = None,
        sandbox_code: str | None = None,
    ) -> None:
        tools = _tools(tools, "Agent")
        names = [t.name for t in tools] + (["submit"] if submit else [])
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            msg = f"Agent has two tools named {dupes[0]!r}: give one @tool(name=...) another."
            raise ValueError(msg)
        if callable(env):
            path = path_of(env, "environment function (Agent(env=...))")
            env_code = _normalized_source_hash(env)
            env = path
        elif env is not None and env_code is None:
            # a path written by hand (not one read back from the record, which has its code)
            import_path(env, "environment function (Agent(env=...))")
        if not isinstance(max_turns, int) or max_turns < 1:
            msg = f"Agent(max_turns={max_turns!r}) needs an int >= 1."
            raise ValueError(msg)
        for label, value in (
            ("token_limit", token_limit),
            ("cost_limit", cost_limit),
            ("time_limit", time_limit),
        ):
            if value is not None and not value > 0:
                msg = f"Agent({label}={value!r}) needs a number > 0, or None for no limit."
                raise ValueError(msg)
        if user is not None and not isinstance(user, UserSim):
            msg = f"Agent(user=...) takes a UserSim, got {user!r}."
            raise TypeError(msg)
        values: dict[str, Any] = {
            "tools": tools,
            "system": system,
            "env": env,
            "env_code": env_code,
            "max_turns": max_turns,
            "token_limit": token_limit,
            "cost_limit": None if cost_limit is None else float(cost_limit),
            "time_limit": None if time_limit is None else float(time_limit),
            "submit": submit,
            "user": user,
            **_sandbox_fields(tools, sandbox, sandbox_code),
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def __fxtr_id__(self) -> str:
        """The agent's tools in pytest node ids."""
        return "agent[" + ",".join(t.name for t in self.tools) + "]"


def _sandbox_fields(tools: tuple[Tool, ...], sandbox: Any, code: str | None) -> dict[str, Any]:
    """``Agent(sandbox=...)`` checked: a ``Sandbox``, or a function's path and code hash."""
    needs = [t.name for t in tools if t.uses_sandbox]
    if sandbox is None:
        if needs:
            msg = (
                f"Tool {needs[0]!r} runs in a sandbox, and the agent has none: give "
                "Agent(..., sandbox=fxtr.sandbox.Sandbox(files=...))."
            )
            raise ValueError(msg)
        return {"sandbox": None, "sandbox_code": None}
    if isinstance(sandbox, str):
        if code is None:
            import_path(sandbox, "sandbox function (Agent(sandbox=...))")
        return {"sandbox": sandbox, "sandbox_code": code}
    if callable(sandbox) and not isinstance(sandbox, Entity):
        path = path_of(sandbox, "sandbox function (Agent(sandbox=...))")
        return {"sandbox": path, "sandbox_code": _normalized_source_hash(sandbox)}
    if not isinstance(sandbox, SANDBOX.get("Sandbox", ())):
        msg = (
            f"Agent(sandbox=...) takes a fxtr.sandbox.Sandbox or a function (case) -> Sandbox, "
            f"got {sandbox!r:.80}."
        )
        raise TypeError(msg)
    return {"sandbox": sandbox, "sandbox_code": None}


SANDBOX: dict[str, Any] = {}
"""``fxtr.sandbox``'s names the loop uses (``Sandbox``, ``SandboxState``, ``check_backend``,
``setup_tree``, ``sandbox_call``, ``grade_trajectory``), registered by ``fxtr.sandbox`` when
it is imported (a ``Sandbox`` cannot be made before), so the two packages do not import each
other."""


def sandbox_name(name: str) -> Any:
    """A name of ``fxtr.sandbox`` (registered when it is imported).

    Raises:
        LookupError: ``fxtr.sandbox`` was never imported.
    """
    if name not in SANDBOX:
        msg = "Sandbox agents need fxtr.sandbox: import it (from fxtr.sandbox import Sandbox)."
        raise LookupError(msg)
    return SANDBOX[name]


RUNNERS: dict[str, Callable[..., Any]] = {}
"""The loop's entry points, registered by ``fxtr.agents._loop`` (which the package imports),
so the kit's ``evaluate`` reaches the loop through this module and the kit and the agents
do not import each other."""


class Turn(Entity):
    """A model turn's result: the reply and the seconds it took (what time limits count)."""

    response: ModelResponse
    seconds: float = 0.0


class ToolOutcome(Entity):
    """A tool call's result: what goes back to the model and the environment after it."""

    result: ToolResult
    env: Any = None
    """The environment as the call left it (``None`` without an environment)."""
    seconds: float = 0.0


class Environment(Entity):
    """A case's initial environment, as the ``env`` step built it."""

    state: Any = None


class UserTools(Entity):
    """Tool calls the simulated user made in one reply, and their results."""

    at: int
    """They came after ``messages[:at]`` (before the user's reply at ``messages[at]``)."""
    calls: tuple[ToolCall, ...]
    results: tuple[ToolResult, ...]


class Trajectory(Entity):
    """One run of the agent loop, what its scorers grade.

    ``answer`` is the final text (or the submitted answer), ``None`` when a limit stopped it
    first; ``env`` the final environment.
    """

    __added_fields__ = ("sandbox", "user_tools")

    messages: tuple[Message, ...]
    """The conversation: system prompt, user turns, the agent's replies and tool results."""
    answer: str | None
    stop: str
    """``answer``, ``submit``, ``user_stop``, ``limit:turns``, ``limit:tokens``,
    ``limit:cost`` or ``limit:time``."""
    env: Any = None
    turns: int = 0
    """Model turns taken."""
    tool_calls: int = 0
    tool_errors: int = 0
    """Tool calls whose result is an error (the tool raised, or the model named no tool)."""
    usage: Usage = Usage()
    """Tokens of the agent's model (the simulated user's are counted apart)."""
    cost: float | None = None
    """US dollars of the agent's model; ``None`` when no call had a price."""
    simulated: tuple[int, ...] = ()
    """Indices in ``messages`` of the simulated user's turns."""
    sandbox: Any = None
    """The sandbox (``fxtr.sandbox.SandboxState``: its starting and final trees), if any."""
    user_tools: tuple[UserTools, ...] = ()
    """The simulated user's tool calls (``UserSim(tools=...)``), where they happened."""

    @property
    def text(self) -> str:
        """The answer as text (empty when there is none): what text scorers read."""
        return self.answer or ""

    @property
    def calls(self) -> list[ToolCall]:
        """Every tool call the agent made, in order."""
        return [c for m in self.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]

    @property
    def results(self) -> list[ToolResult]:
        """Every tool result, in order."""
        return [r for m in self.messages if isinstance(m, ToolMessage) for r in m.results]


def tool_call(name: str, /, **arguments: Any) -> ToolCall:
    """A tool call, for a mock model's script: ``tool_call("add", a=1, b=2)``.

    Its id is left empty; the agent's turn numbers it from the turn (``call_2_0``), so
    scripted runs are reproducible.

    Raises:
        ValueError: the arguments nest deeper than ``MAX_NESTING`` levels.
    """
    check_nesting(name, arguments)
    return ToolCall(id="", name=name, arguments=dict(arguments))
