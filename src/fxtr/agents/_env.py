"""A trajectory's environment as a stored tree: the steps that build it and act on it.

``Agent(env=FUNCTION)`` builds a case's initial state in the step ``env`` and every tool
that takes ``env`` acts on it in ``tool[i,j]``. Both steps return the environment as a
``StoredEnv`` (its root digest, ``_state``) and put the nodes they made into the store with
their result (``StepContext.put_blobs``), so a call that changes one record stores the path
to it, and the next call's fingerprint is the new root digest.

The live tree (tracked containers and their digests) stays in memory between the calls of a
trajectory (``_LIVE``, by job and trajectory address), so a call hashes what it changed; a
call that finds no live tree at its root (the first one after cached calls, a resume,
another process) reads the tree from the store once.

Stores written before kept whole values (steps ``fxtr.agents.env`` and ``fxtr.agents.tool``
of ``_loop``): a trajectory whose ``env`` entry is such a one goes on as it did, with whole
values (``legacy``), so its cached calls are served as they were.
"""

from __future__ import annotations

import collections
import inspect
import time
from typing import TYPE_CHECKING, Any

from fxtr.agents._state import StoredEnv
from fxtr.agents._tool import OutOfTime, Tool, _content, call_within, import_path
from fxtr.agents._tool_steps import ENCODABLE
from fxtr.agents._types import Environment, ToolOutcome, Trajectory
from fxtr.evals._cases import Case
from fxtr.experiment._encoding import EncodingError
from fxtr.experiment.entities import BoundID
from fxtr.experiment.steps import StepContext, step
from fxtr.models import ToolCall, ToolResult
from fxtr.store import MissingPartError, Tree, load, open_tree

if TYPE_CHECKING:
    from fxtr.experiment.workflows import WorkflowContext

LEGACY_STEP = "fxtr.agents.env"
"""The step that built environments as whole values (stores written before trees)."""
LIVE_MAX = 32
"""Live trees a process keeps at most (the trajectories running at once)."""

_LIVE: collections.OrderedDict[tuple[str, str], Tree] = collections.OrderedDict()


def _trajectory(context: StepContext) -> tuple[str, str]:
    return context.job_id, context.address.rpartition("/")[0]


def _keep_live(context: StepContext, tree: Tree) -> None:
    key = _trajectory(context)
    _LIVE[key] = tree
    _LIVE.move_to_end(key)
    while len(_LIVE) > LIVE_MAX:
        _LIVE.popitem(last=False)


def forget(job_id: str, address: str) -> None:
    """A trajectory ended: its live tree is dropped."""
    _LIVE.pop((job_id, address), None)


async def _store_nodes(context: StepContext, tree: Tree, new: dict[str, bytes]) -> None:
    """Queue the nodes the store lacks, with this step's result (which names them)."""
    if not new:
        return
    have = context._run.store.has_blobs(new)
    context.put_blobs({d: b for d, b in new.items() if d not in have})


def _commit(tree: Tree, where: str) -> tuple[str, dict[str, bytes]]:
    try:
        return tree.commit()
    except EncodingError as exc:
        msg = f"{where} has no canonical encoding ({exc}): {ENCODABLE}"
        raise TypeError(msg) from None


@step(name="fxtr.agents.environment")
async def build_state(context: StepContext, env: str, code: str | None, case: Case) -> Environment:
    """A case's initial environment, from ``Agent(env=FUNCTION)``, stored as a tree of parts.

    Raises:
        LookupError: the function cannot be imported.
        TypeError: it returned a value that cannot be stored.
    """
    fn = import_path(env, "environment function (Agent(env=...))")
    value = fn(case)
    if inspect.isawaitable(value):
        value = await value
    tree = Tree(value)
    root, new = _commit(tree, f"The environment {env!r} built for case {case.id!r}")
    await _store_nodes(context, tree, new)
    _keep_live(context, tree)
    return Environment(state=StoredEnv(root=root))


async def _live(context: StepContext, root: str) -> Tree:
    """The trajectory's live tree at ``root``: kept from its last call, or read from the store.

    Raises:
        MissingPartError: a part of the stored environment is missing.
    """
    tree = _LIVE.get(_trajectory(context))
    if tree is not None and tree.root == root and tree.current():
        return tree

    def fetch(digests: list[str]) -> dict[str, bytes]:
        return context._run.store.get_blobs(digests) | _queued(context, digests)

    tree = open_tree(root, fetch)
    _keep_live(context, tree)
    return tree


def _queued(context: StepContext, digests: list[str]) -> dict[str, bytes]:
    batch = context._run._batch
    pending = batch.blobs if batch is not None else {}
    return {d: pending[d] for d in digests if d in pending}


@step(name="fxtr.agents.tool")
async def run_tool_on_state(
    context: StepContext, tool: Tool, call: ToolCall, env: Any, timeout: float | None
) -> ToolOutcome:
    """Run one tool call on the stored environment as the previous call left it.

    The tool changes the live tree in place; the outcome holds the new root digest, and the
    nodes the call made are stored with it. A tool that raises is not a failure: its result
    is the error, returned to the model like any result, and the trajectory goes on.

    Raises:
        TypeError: the tool returned a value that cannot be sent to the model, or left an
            environment that cannot be stored (a bug to fix, not the model's doing).
        MissingPartError: the environment it acts on is not whole in the store.
    """
    if isinstance(env, BoundID):
        env = await context.load(env)
    tree = await _live(context, env.root)
    arguments = {k: v for k, v in call.arguments.items() if k != "env"}
    arguments["env"] = tree.value
    started = time.perf_counter()
    try:
        value = await call_within(tool, arguments, timeout)
    except OutOfTime as exc:  # cut at the time the agent's time_limit left
        context.log(str(exc))
        result = ToolResult(tool_call_id=call.id, content=f"TimeoutError: {exc}", is_error=True)
        seconds = max(time.perf_counter() - started, timeout or 0.0)
    except Exception as exc:  # the model sees the error and may try again
        seconds = time.perf_counter() - started
        context.log(f"tool {tool.name} raised {type(exc).__name__}: {exc}")
        result = ToolResult(
            tool_call_id=call.id, content=f"{type(exc).__name__}: {exc}", is_error=True
        )
    else:
        seconds = time.perf_counter() - started
        result = ToolResult(tool_call_id=call.id, content=_content(value, tool))
    root, new = _commit(tree, f"The environment after tool {tool.name!r}")
    await _store_nodes(context, tree, new)
    return ToolOutcome(result=result, env=StoredEnv(root=root), seconds=seconds)


async def legacy(context: WorkflowContext) -> bool:
    """Whether this trajectory's environment was stored whole (by fxtr before trees).

    Its ``env`` address holds an entry of the old step: the trajectory then runs the old
    steps, so what they cached is served as it was.
    """
    from fxtr.agents._memo import _reads

    address = f"{context.address}/env"
    entry = (await _reads(context._run).get([address])).get(address)
    return entry is not None and not entry.damaged and entry.meta.get("step") == LEGACY_STEP


async def whole(context: StepContext, trajectory: Trajectory) -> Trajectory:
    """The trajectory with its environment as a whole value (what scorers read).

    Raises:
        MissingPartError: a part of the stored environment is missing.
    """
    import dataclasses

    if not isinstance(trajectory.env, StoredEnv):
        return trajectory
    root = trajectory.env.root

    def fetch(digests: list[str]) -> dict[str, bytes]:
        return context._run.store.get_blobs(digests) | _queued(context, digests)

    return dataclasses.replace(trajectory, env=load(root, fetch))


__all__ = [
    "LEGACY_STEP",
    "MissingPartError",
    "StoredEnv",
    "build_state",
    "forget",
    "legacy",
    "run_tool_on_state",
    "whole",
]
