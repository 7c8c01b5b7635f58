"""The records the LangGraph mirror keeps, keyed by task ids and checkpoint lineage.

Who calls whom: ``fxtr.integrations._langgraph_mirror`` (the bookkeeping of
``FluxCheckpointer``) makes and reads these records; ``fxtr.integrations._langgraph_watcher``
(the LangChain callback handler) reads the limits and parses task namespaces with
``_task_id_of``; ``fxtr.integrations.langgraph`` re-exports the limits. This module imports
nothing of LangGraph and nothing of the other two: the channel names, path kinds and
namespace syntax it knows are LangGraph's wire format, as plain strings.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
from typing import Any

from fxtr.tracing import Node, NodeStatus, TaskGraph, TaskScope

ERROR = "__error__"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
SCHEDULED = "__scheduled__"
TASKS = "__pregel_tasks"
PULL = "__pregel_pull"
PUSH = "__pregel_push"
_BOOKKEEPING = frozenset({RESUME, SCHEDULED, "__error_source_node__"})
"""Channels LangGraph writes for a task that say nothing about how it ran."""
_OUTCOMES = frozenset({ERROR, INTERRUPT})
_INTERNAL = frozenset({"__start__", "__end__"})
_CANCELLED = (asyncio.CancelledError, concurrent.futures.CancelledError)
"""What a cancelled task's error is: an async one's ``asyncio.CancelledError``, or the
``concurrent.futures.CancelledError`` of a sync task whose future LangGraph cancelled
before a worker thread started it (a sibling raised): it never ran, it did not fail."""
MAX_TASKS = 2048
"""Task records kept per thread (then the oldest are dropped: a rerun of a task that old is
recorded without ``depends_on``)."""
MAX_RUNS = 4096
"""LangChain runs the handler keeps (graph runs claimed, tasks running); the oldest go first."""
MAX_STEPS = 512
"""Super-step records (and checkpoint numbers, ``Send`` packets) kept per thread; open
super-steps are kept apart until they close."""
FORGOTTEN_PER_TASK = 8
"""Ids of dropped task records kept per record kept (late writes of them are ignored)."""
_RUNTIME = "__pregel_runtime"
"""A configurable key LangGraph sets on a run's config (not on ``get_state``'s)."""

Frame = tuple[TaskGraph, str]


class _Step:
    """One execution of a super-step: its node and the tasks that ran in it."""

    def __init__(
        self, ns: str, number: int | None, generation: int, graph: TaskGraph, node: Node
    ) -> None:
        self.ns = ns
        self.number = number
        self.generation = generation
        self.checkpoint_id: str | None = None
        """The checkpoint it started from, once LangGraph named it."""
        self.graph = graph
        self.node = node
        self.tasks: list[_Task] = []
        self.closed = False


class _Task:
    """One execution of a LangGraph task (one node, one ``RetryPolicy`` attempt)."""

    def __init__(self, task_id: str, step: _Step, node: Node, generation: int) -> None:
        self.task_id = task_id
        self.step = step
        self.node = node
        self.generation = generation


class _Thread:
    """Everything the mirror keeps about one LangGraph thread id (bounded)."""

    def __init__(self) -> None:
        self.generation: dict[str, int] = {}
        """Attempt number by checkpoint namespace, raised at each run's ``get_tuple``."""
        self.scope: dict[str, Frame] = {}
        """Where the current run of a namespace records (for the root namespace)."""
        self.open: dict[str, list[_Step]] = {}
        """Super-steps not closed yet, by namespace."""
        self.steps: collections.OrderedDict[tuple[str, str], _Step] = collections.OrderedDict()
        """The last execution of the super-step started from each checkpoint."""
        self.numbers: collections.OrderedDict[tuple[str, str], int] = collections.OrderedDict()
        """Super-step number of the step that starts from each checkpoint."""
        self.sends: collections.OrderedDict[tuple[str, str], list[Any]] = collections.OrderedDict()
        """The ``Send`` packets stored in each checkpoint (they name its push tasks)."""
        self.completed: collections.OrderedDict[tuple[str, str], bool] = collections.OrderedDict()
        """Checkpoints a later one was saved after: their super-step completed."""
        self.tasks: collections.OrderedDict[str, _Task] = collections.OrderedDict()
        """The last execution of each task id."""
        self.forgotten: collections.OrderedDict[str, int] = collections.OrderedDict()
        """Task ids dropped from ``tasks`` by the bound, with the attempt they were recorded
        in: a late write of one is news about what was recorded, not a new execution (only
        ids are kept, ``FORGOTTEN_PER_TASK`` times as many as ``MAX_TASKS``)."""
        self.root: TaskScope | None = None
        self.watched = False
        """The handler sees the current run of the root namespace (and will see it end)."""
        self.last_root_step: Node | None = None
        """The last super-step made under the thread's own task (its status is the task's)."""


def _latest(step: _Step) -> list[_Task]:
    """The last execution of each task of a super-step (earlier ones were retried)."""
    return list({t.task_id: t for t in step.tasks}.values())


def _step_status(step: _Step) -> NodeStatus:
    statuses = {t.node.status for t in _latest(step)}
    if "failed" in statuses:
        return "failed"
    if "interrupted" in statuses:
        return "interrupted"
    return "succeeded"


def _name_pushes(step: _Step, sends: list[Any]) -> None:
    for task in step.tasks:
        index = task.node.attrs.get("push_index")
        if task.node.attrs.get("unnamed") and index is not None and index < len(sends):
            task.node.name = str(getattr(sends[index], "node", "send"))
            del task.node.attrs["unnamed"]


def _bounded_put(cache: collections.OrderedDict[Any, Any], key: Any, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > MAX_STEPS:
        cache.popitem(last=False)


def _task_id_of(ns: str) -> str:
    """The task id at the end of a task's namespace.

    ``outer:ID|inner:ID``, or ``outer:ID|2`` for the second subgraph a task runs.
    """
    last = ns.rpartition("|")[2]
    if ":" in last:
        return last.rpartition(":")[2]
    segments = [p for p in ns.split("|") if ":" in p]
    return segments[-1].rpartition(":")[2] if segments else ""


def _parse_path(task_path: str) -> tuple[str, str] | None:
    """``(PULL, node name)`` or ``(PUSH, index or caller)`` from LangGraph's path string.

    ``None`` for what is not a task that ran: the input, ``update_state``'s writes, the
    writes ``durability="exit"`` files under synthetic ids.
    """
    parts = [p.strip() for p in task_path.split(",")]
    if len(parts) < 2:
        return None
    kind, first = parts[0].lstrip("~"), parts[1].lstrip("~")
    if kind == PULL:
        return None if first in _INTERNAL else (PULL, first)
    if kind == PUSH:
        return (PUSH, str(int(first)) if first.isdigit() else first)
    return None
