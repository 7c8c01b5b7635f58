"""The agent loop: a workflow per trajectory whose model turns and tool calls are steps.

Addresses (under the eval's root): ``agent[model=...,case=...,sample=...]`` for the
trajectory, and inside it ``env`` (the initial environment), ``turn[i]`` (the model's turn
``i``), ``tool[i,j]`` (call ``j`` of turn ``i``) and ``user[i]`` (the simulated user's reply
to turn ``i``). Each step is keyed by its content: the conversation so far, the tool's code,
its arguments and the environment it acted on. So a rerun asks nothing, a resume re-asks no
finished turn and re-runs no finished tool call, and state is never rebuilt by re-running
tools: it travels from call to call as a value.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import fxtr.evals._evaluate as kit  # a module: the kit imports this package half-way
from fxtr.agents import _env as env_tree
from fxtr.agents import _memo as memo
from fxtr.agents._prompts import CONTINUE, SUBMIT
from fxtr.agents._sandboxes import Box, sandbox_call, sandbox_of
from fxtr.agents._scorers import grade_trajectory
from fxtr.agents._tool import Tool, check_nesting
from fxtr.agents._tool_steps import build_env, run_timed_tool, run_tool
from fxtr.agents._types import (
    RUNNERS,
    Agent,
    Environment,
    Message,
    ToolOutcome,
    Trajectory,
    Turn,
    UserTools,
)
from fxtr.agents._user import heard, user_request
from fxtr.evals._cases import Case
from fxtr.evals._models import Model
from fxtr.evals._scorers import Score, Scorer
from fxtr.experiment._encoding import encode_text
from fxtr.experiment.arrays import Array
from fxtr.experiment.entities import BoundID, Entity
from fxtr.experiment.errors import UpstreamFailedError
from fxtr.experiment.handles import ArrayHandle, ScalarHandle
from fxtr.experiment.steps import StepContext, StepDefinition, step
from fxtr.experiment.workflows import WorkflowContext, workflow
from fxtr.models import (
    AssistantMessage,
    ContentText,
    ModelRequest,
    Sampling,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)

# --- steps ------------------------------------------------------------------------------


def _numbered(response: Any, turn_index: int) -> Any:
    """Give tool calls without an id (scripted ones) a stable id from the turn.

    A call whose arguments nest too deeply is refused first, before encoding it fails deep
    inside. (This is outside ``turn``'s body on purpose: a step's code is in the fingerprint
    of every turn a store holds.)
    """
    for block in response.output:
        if isinstance(block, ToolCall):
            check_nesting(block.name, block.arguments)
    if not any(isinstance(b, ToolCall) and not b.id for b in response.output):
        return response
    output = []
    j = 0
    for block in response.output:
        if isinstance(block, ToolCall):
            if not block.id:
                block = dataclasses.replace(block, id=f"call_{turn_index}_{j}")
            j += 1
        output.append(block)
    return dataclasses.replace(response, output=tuple(output))


@step(name="fxtr.agents.turn")
async def turn(context: StepContext, model: Model, request: ModelRequest) -> Turn:
    """One model turn: the conversation so far (and the tools) in, the reply out."""
    started = time.perf_counter()
    response = await kit.call(model, request, batch=False)
    seconds = time.perf_counter() - started
    index = sum(isinstance(m, AssistantMessage) for m in request.context)
    return Turn(response=_numbered(response, index), seconds=seconds)


@step(name="fxtr.agents.user")
async def simulate_user(context: StepContext, model: Model, request: ModelRequest) -> Turn:
    """The simulated user's reply; its call is recorded with the role ``user_sim``."""
    from fxtr.tracing import _recorder

    token = _recorder.call_role.set("user_sim")
    try:
        started = time.perf_counter()
        response = await kit.call(model, request, batch=False)
        return Turn(response=response, seconds=time.perf_counter() - started)
    finally:
        _recorder.call_role.reset(token)


@step(name="fxtr.agents.score")
async def score_trajectory(
    context: StepContext,
    scorer: Scorer,
    case: Case,
    trajectory: Trajectory | BoundID[Trajectory],
) -> Score:
    """Grade a trajectory: text scorers and judges its answer, agent scorers the whole of it."""
    if isinstance(trajectory, BoundID):  # the agent workflow's result, by reference
        trajectory = await context.load(trajectory)
    return await grade_trajectory(context, scorer, case, trajectory)


@step(name="fxtr.agents.trajectory")
async def finish(context: StepContext, trajectory: Trajectory) -> Trajectory:
    """The finished trajectory, kept in the record (the summary and the viewer read it)."""
    return trajectory


# --- the loop ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Totals:
    """What the limits count, as the trajectory goes."""

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None
    seconds: float = 0.0
    tool_calls: int = 0
    tool_errors: int = 0

    def add_turn(self, t: Turn) -> None:
        self.turns += 1
        u = t.response.usage
        self.input_tokens += u.input_tokens
        self.output_tokens += u.output_tokens
        self.cached_tokens += u.cached_input_tokens
        if t.response.cost is not None:
            self.cost = (self.cost or 0.0) + t.response.cost
        self.seconds += t.seconds

    def limit(self, agent: Agent) -> str | None:
        """The limit reached before a new turn, if any."""
        if self.turns >= agent.max_turns:
            return "limit:turns"
        if agent.token_limit is not None and (
            self.input_tokens + self.output_tokens >= agent.token_limit
        ):
            return "limit:tokens"
        if agent.cost_limit is not None and (self.cost or 0.0) >= agent.cost_limit:
            return "limit:cost"
        if agent.time_limit is not None and self.seconds >= agent.time_limit:
            return "limit:time"
        return None


async def _loaded(context: WorkflowContext, handle: ScalarHandle[Any]) -> Any:
    value = await handle.item()
    return await context.load(value) if isinstance(value, BoundID) else value


def _sampling(model: Model, sample: int | None) -> Sampling | None:
    """The model's sampling; a mock's seed is offset by the sample (as ``generate`` does)."""
    sampling = model.sampling
    if model.provider == "mock" and sample is not None:
        base = sampling or Sampling()
        sampling = dataclasses.replace(base, seed=(base.seed or 0) + sample)
    return sampling


class _Requests:
    """A trajectory's turn requests, each message encoded once rather than every turn.

    A request's canonical text is its head (``{"$entity":...,"v":{"context":[``), the
    canonical texts of its messages joined by commas, and its tail (the tools and sampling,
    the same every turn): byte for byte what encoding the whole request gives (``context``
    is the first field in key order; a request whose encoding does not have that shape is
    encoded whole). So a turn costs the encoding of its new messages, not of the whole
    conversation, and its fingerprint is the one it always had.
    """

    def __init__(self, specs: tuple[ToolSpec, ...], sampling: Sampling | None) -> None:
        self.specs, self.sampling = specs, sampling
        empty = encode_text(ModelRequest(context=(), tools=specs, sampling=sampling))
        marker = '"v":{"context":['
        at = empty.find(marker)
        self.split: tuple[str, str] | None = None
        if at > 0 and empty.startswith('{"$entity":') and empty[at + len(marker)] == "]":
            cut = at + len(marker)
            self.split = (empty[:cut], empty[cut:])
        self.texts: list[str] = []

    def request(self, messages: list[Message]) -> tuple[ModelRequest, str | None]:
        """The request of the conversation so far and its canonical text (None: unknown)."""
        request = ModelRequest(context=tuple(messages), tools=self.specs, sampling=self.sampling)
        if self.split is None:
            return request, None
        self.texts.extend(encode_text(m) for m in messages[len(self.texts) :])
        head, tail = self.split
        return request, head + ",".join(self.texts) + tail


class _Waiting(Exception):
    """A step of the trajectory failed or awaits review: the loop cannot go on."""

    def __init__(self, handle: ArrayHandle[Any]) -> None:
        self.handle = handle


async def _value(context: WorkflowContext, handle: ArrayHandle[Any]) -> Any:
    """A step's one result (an entity loaded), or ``_Waiting`` when it has none."""
    try:
        value = await handle.item()
    except UpstreamFailedError:
        raise _Waiting(handle) from None
    return await context.load(value) if isinstance(value, BoundID) else value


@workflow(name="fxtr.agent")
async def agent_loop(
    context: WorkflowContext,
    agent: Agent,
    model: ScalarHandle[BoundID[Model]],
    case: ScalarHandle[BoundID[Case]],
) -> ScalarHandle[Any]:
    """One trajectory: turns, tool calls and simulated-user replies until a stop.

    Its result is the ``Trajectory`` (typed ``Any`` because a trajectory whose next step
    failed or awaits review returns that step's handle: it has no value, so its score is
    skipped and the job ends ``failed`` or ``needs_review`` as that step says, and a resume
    replays the same operations up to it and goes on).
    """
    key = None
    if memo.usable(context._run):
        model_ref, case_ref = await model.item(), await case.item()
        key = memo.record_key(agent, model_ref, case_ref, context.sample)
        served = await memo.serve(context, key)
        if served is not None:  # every step as it was: recorded from the cache, not rerun
            return served  # type: ignore[return-value]  # a scalar handle
    try:
        trajectory = await _run(context, agent, model, case)
    except _Waiting as waiting:
        return waiting.handle  # type: ignore[return-value]  # a scalar handle
    done = context.run_step("trajectory", finish, {"trajectory": await context.store(trajectory)})
    if key is not None:
        await memo.keep(context, key, done)
    return done  # type: ignore[return-value]


async def _run(
    context: WorkflowContext,
    agent: Agent,
    model_handle: ScalarHandle[BoundID[Model]],
    case_handle: ScalarHandle[BoundID[Case]],
) -> Trajectory:
    model: Model = await _loaded(context, model_handle)
    case: Case = await _loaded(context, case_handle)
    system = agent.system if agent.system is not None else model.system
    messages: list[Message] = []
    if system:
        messages.append(SystemMessage(content=(ContentText(text=system),)))
    user = agent.user
    if user is not None and user.opening is not None:
        messages.append(AssistantMessage(content=(ContentText(text=user.opening),)))
    else:
        messages.append(UserMessage(content=(ContentText(text=kit.case_prompt(case)),)))
    tools = {t.name: t for t in agent.tools}
    specs = tuple(t.spec for t in agent.tools) + ((SUBMIT,) if agent.submit else ())
    sampling = _sampling(model, context.sample)
    env: Any = None
    if agent.env is not None:  # a tree of parts; whole values where a store kept them so
        builder = build_env if await env_tree.legacy(context) else env_tree.build_state
        built: Environment = await _value(
            context,
            context.run_step(
                "env", builder, {"env": agent.env, "code": agent.env_code, "case": case_handle}
            ),
        )
        env = built.state
    box = await sandbox_of(context, agent, case, _value) if agent.sandbox is not None else None
    totals = _Totals()
    requests = _Requests(specs, sampling)
    stored: dict[str, BoundID[Tool]] = {}
    simulated: list[int] = []
    user_tools: list[UserTools] = []
    answer: str | None = None
    stop: str | None = None
    if user is not None and user.opening is not None:  # the user speaks first
        said, env = await _ask_user(context, agent, case, messages, user_tools, None, env, totals)
        stop = heard(user, said, messages, simulated)
    i = 0
    while stop is None:
        stop = totals.limit(agent)
        if stop is not None:
            break
        request, text = requests.request(messages)
        ref = await context._run.store_entity(request, text)
        t: Turn = await _value(
            context, context.run_step(f"turn[{i}]", turn, {"model": model_handle, "request": ref})
        )
        totals.add_turn(t)
        text = t.response.text
        calls = [b for b in t.response.output if isinstance(b, ToolCall)]
        messages.append(
            AssistantMessage(
                content=(ContentText(text=text),) if text else (), tool_calls=tuple(calls)
            )
        )
        if calls:
            results, env, submitted = await _tool_calls(
                context,
                tools,
                i,
                calls,
                env,
                totals,
                stored,
                submit=agent.submit,
                time_limit=agent.time_limit,
                box=box,
            )
            if results:
                messages.append(ToolMessage(results=tuple(results)))
            if submitted is not None:
                answer, stop = submitted, "submit"
        elif user is not None:
            stop = totals.limit(agent)  # no reply to ask for if the agent may not answer
            if stop is not None:
                break
            said, env = await _ask_user(context, agent, case, messages, user_tools, i, env, totals)
            stop = heard(user, said, messages, simulated)
            if stop == "user_stop":
                answer = text or None
        elif agent.submit:
            messages.append(UserMessage(content=(ContentText(text=CONTINUE),)))
        else:
            answer, stop = text, "answer"
        i += 1
    env_tree.forget(context.job_id, context.address)
    return Trajectory(
        messages=tuple(messages),
        answer=answer,
        stop=stop,
        env=env,
        turns=totals.turns,
        tool_calls=totals.tool_calls,
        tool_errors=totals.tool_errors,
        usage=Usage(
            input_tokens=totals.input_tokens,
            output_tokens=totals.output_tokens,
            cached_input_tokens=totals.cached_tokens,
        ),
        cost=totals.cost,
        simulated=tuple(simulated),
        sandbox=box.state() if box is not None else None,
        user_tools=tuple(user_tools),
    )


async def _ask_user(
    context: WorkflowContext,
    agent: Agent,
    case: Case,
    messages: list[Message],
    user_tools: list[UserTools],
    i: int | None,
    env: Any,
    totals: _Totals,
) -> tuple[str | None, Any]:
    """The simulated user's reply to turn ``i`` (``None``: its opening), and the environment.

    With ``UserSim(tools=...)`` the user may call tools first: each call is a step
    ``user_tool[i,j]`` on the environment (``user_open_tool[0,j]`` in the opening), its
    results go back and the user is asked again (``user[i,k]``, ``user_open[k]``), up to
    ``max_turns`` times; the reply is ``None`` when it still called tools then.
    """
    user = agent.user
    assert user is not None
    tools = {t.name: t for t in user.tools}
    stored: dict[str, BoundID[Tool]] = {}
    model = await context.store(user.model)
    j = 0
    for k in range(agent.max_turns + 1):
        if i is None:
            name = "user_open" if k == 0 else f"user_open[{k}]"
        else:
            name = f"user[{i}]" if k == 0 else f"user[{i},{k}]"
        request = user_request(user, case, messages, user_tools)
        reply: Turn = await _value(
            context,
            context.run_step(
                name, simulate_user, {"model": model, "request": await context.store(request)}
            ),
        )
        totals.seconds += reply.seconds
        calls = [b for b in reply.response.output if isinstance(b, ToolCall)]
        if not calls or not tools:
            return reply.response.text, env
        label = "open" if i is None else i
        calls = [
            c if c.id else dataclasses.replace(c, id=f"user_call_{label}_{j + n}")
            for n, c in enumerate(calls)
        ]
        counts = _Totals()
        results, env, _ = await _tool_calls(
            context,
            tools,
            0 if i is None else i,
            calls,
            env,
            counts,
            stored,
            prefix="user_open_tool" if i is None else "user_tool",
            first=j,
        )
        totals.seconds += counts.seconds
        user_tools.append(UserTools(at=len(messages), calls=tuple(calls), results=tuple(results)))
        j += len(calls)
    return None, env


async def _store_tool(
    context: WorkflowContext, tool: Tool, stored: dict[str, BoundID[Tool]]
) -> BoundID[Tool]:
    ref = stored[tool.name] = await context.store(tool)
    return ref


async def _env_input(context: WorkflowContext, env: Any) -> Any:
    """An environment as a step input: an entity by reference (encoded once, when stored)."""
    if isinstance(env, Entity):
        return await context.store(env)
    return Array.scalar(env, Any)


async def _tool_calls(
    context: WorkflowContext,
    tools: dict[str, Tool],
    i: int,
    calls: list[ToolCall],
    env: Any,
    totals: _Totals,
    stored: dict[str, BoundID[Tool]],
    *,
    submit: bool = False,
    time_limit: float | None = None,
    box: Box | None = None,
    prefix: str = "tool",
    first: int = 0,
) -> tuple[list[ToolResult], Any, str | None]:
    """Run a turn's calls in order, each on the environment the one before left.

    Without an environment the calls are scheduled together and run concurrently. ``stored``
    keeps each tool's reference, so a tool is encoded once a trajectory. The steps are
    ``{prefix}[i,j]``, ``j`` counted from ``first``.
    """
    results: list[ToolResult | None] = [None] * len(calls)
    pending: list[tuple[int, ArrayHandle[Any]]] = []
    submitted: str | None = None
    for j, c in enumerate(calls):
        totals.tool_calls += 1
        if submit and c.name == "submit":
            submitted = str(c.arguments.get("answer", ""))
            results[j] = ToolResult(tool_call_id=c.id, content="Submitted.")
            break
        tool = tools.get(c.name)
        if tool is None:
            known = ", ".join(sorted(tools) + (["submit"] if submit else [])) or "none"
            results[j] = ToolResult(
                tool_call_id=c.id,
                content=f"ToolNotFoundError: there is no tool named {c.name!r}; the tools are: "
                f"{known}.",
                is_error=True,
            )
            continue
        name = f"{prefix}[{i},{first + j}]"
        if box is not None and tool.uses_sandbox:
            results[j] = await sandbox_call(
                context, tool, c, name, box, stored, _value, _store_tool
            )
            totals.seconds, box.seconds = totals.seconds + box.seconds, 0.0
            continue
        inputs = {
            "tool": stored.get(tool.name) or await _store_tool(context, tool, stored),
            "call": await context.store(c),
            "env": await _env_input(context, env if tool.uses_env else None),
        }
        runner: StepDefinition[..., ToolOutcome] = run_tool
        timeout = None if time_limit is None else time_limit - totals.seconds
        if tool.uses_env and isinstance(env, env_tree.StoredEnv):
            runner, inputs["timeout"] = env_tree.run_tool_on_state, timeout
        elif timeout is not None:
            runner, inputs["timeout"] = run_timed_tool, timeout
        handle = context.run_step(name, runner, inputs)
        if tool.uses_env:
            outcome: ToolOutcome = await _value(context, handle)
            env = outcome.env
            results[j] = outcome.result
            totals.seconds += outcome.seconds
        else:
            pending.append((j, handle))
    for j, handle in pending:
        outcome = await _value(context, handle)
        results[j] = outcome.result
        totals.seconds += outcome.seconds
    done = [r for r in results if r is not None]
    totals.tool_errors += sum(r.is_error for r in done)
    return done, env, submitted


def run_agents(
    context: WorkflowContext,
    agent: Agent,
    model: ArrayHandle[Any],
    case: ArrayHandle[Any],
    scorer: ScalarHandle[Any],
    samples: int,
) -> ArrayHandle[Score]:
    """``evaluate``'s body with an agent: a trajectory per (model, case, sample), scored."""
    trajectories = context.run_child_workflow(
        "agent",
        agent_loop,
        {"agent": agent, "model": model, "case": case},
        map_over=["model", "case"],
        samples=samples,
    )
    assert trajectories is not None
    return context.run_step(
        "score",
        score_trajectory,
        {"scorer": scorer, "case": case, "trajectory": trajectories},
        map_over=["model", "case", "sample"],
    )


RUNNERS["evaluate"] = run_agents
