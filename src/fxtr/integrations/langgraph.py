"""``FluxCheckpointer``: LangGraph's in-memory saver that mirrors runs into an fxtr graph.

``graph.compile(checkpointer=FluxCheckpointer(client))`` in place of ``InMemorySaver()``:
checkpoints are stored exactly as the in-memory saver stores them (it *is* one), and each
super-step becomes a ``superstep N`` node with one ``step`` node per LangGraph task, under the
current ``client.task()`` (or a task per LangGraph thread id).

How the mirror learns what happened, from the two calls LangGraph makes:

- ``put(checkpoint)`` after each super-step: the tasks the next super-step will run are read
  from the checkpoint (a ``branch:to:NODE`` channel for each triggered node, the
  ``__pregel_tasks`` channel for ``Send`` packets), and created as running nodes; the
  previous super-step is closed (tasks that wrote nothing succeeded).
- ``put_writes(writes, task_id, task_path)`` when a task finishes: a write to ``__error__``
  carries the exception of a task that raised (LangGraph never calls ``put`` for that
  super-step), so the node fails with ``fxtr.tracing.classify``'s reason and the siblings
  still running are ``cancelled``; ``__interrupt__`` marks an interrupted task. A task id
  that already failed, written again after ``invoke(None, config)``, is a new node in the
  current task whose ``depends_on`` is the failed one.

Known limits (LangGraph never tells a checkpointer): a ``RetryPolicy``'s intermediate
attempts (only the last outcome is written); errors raised outside any task (input
validation, the graph's own code); how long a task ran before its super-step started (task
start times are the super-step's start). Wrap a node's body in ``client.step(...)`` to see
those. Recording is synchronous and thread-safe, and never fails the user's run: a
bookkeeping error is logged and swallowed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

try:
    from langgraph.checkpoint.memory import InMemorySaver
except ImportError as exc:  # pragma: no cover - exercised without the extra
    msg = (
        "fxtr.integrations.langgraph needs LangGraph, which is not installed. Install it "
        "with `pip install 'fxtr[langgraph]'`."
    )
    raise ImportError(msg) from exc

from fxtr.tracing._client import Client, TaskScope
from fxtr.tracing._graph import Node, TaskGraph
from fxtr.tracing._recorder import current_frame

log = logging.getLogger("fxtr.langgraph")

ERROR = "__error__"
INTERRUPT = "__interrupt__"
TASKS = "__pregel_tasks"
PULL = "__pregel_pull"
PUSH = "__pregel_push"
BRANCH = "branch:to:"
_INTERNAL = ("__start__", "__end__")

__all__ = ["FluxCheckpointer"]


class _Superstep:
    """The mirror of one LangGraph super-step: its node and its tasks by path."""

    def __init__(self, graph: TaskGraph, node: Node, sends: list[Any]) -> None:
        self.graph = graph
        self.node = node
        self.sends = sends
        self.tasks: dict[str, Node] = {}
        """Task nodes by path key (``pull:NAME`` or ``push:INDEX``)."""
        self.failed = False
        self.resumed = False
        """Made for a rerun (``invoke(None, config)``) of a super-step that failed."""


class FluxCheckpointer(InMemorySaver):
    """A drop-in for ``InMemorySaver`` that mirrors every super-step into ``client``'s graph."""

    def __init__(self, client: Client, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client
        self._lock = threading.RLock()
        self._steps: dict[tuple[str, str, str], _Superstep] = {}
        """Super-steps by (thread id, checkpoint ns, the checkpoint id they start from)."""
        self._latest: dict[tuple[str, str], _Superstep] = {}
        """The super-step running now, by (thread id, checkpoint ns)."""
        self._by_task_id: dict[str, Node] = {}
        """The last node of each LangGraph task id (a rerun depends on it)."""
        self._thread_tasks: dict[str, TaskScope] = {}

    # the two calls LangGraph makes ----------------------------------------------------

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        """Store the checkpoint, then mirror it (close the last super-step, plan the next)."""
        result = super().put(config, checkpoint, metadata, new_versions)
        try:
            self._on_checkpoint(config, checkpoint, metadata)
        except Exception:  # the user's run must never fail because of the mirror
            log.warning("fxtr could not mirror a LangGraph checkpoint", exc_info=True)
        return result

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's writes, then mirror its outcome (failed on an ``__error__`` write)."""
        super().put_writes(config, writes, task_id, task_path)
        try:
            self._on_writes(config, writes, task_id, task_path)
        except Exception:
            log.warning("fxtr could not mirror a LangGraph task's writes", exc_info=True)

    # mirroring ------------------------------------------------------------------------

    def _scope(self, thread_id: str) -> tuple[TaskGraph, str]:
        frame = current_frame.get()
        if frame is not None:
            return frame
        scope = self._thread_tasks.get(thread_id)
        if scope is None:
            graph = self.client._new_graph(f"langgraph-{thread_id}")
            node = graph.start("task", f"langgraph thread {thread_id}", None)
            scope = self._thread_tasks[thread_id] = TaskScope(graph, node)
        return scope.graph, scope.node.id

    def _parent_for(self, thread_id: str, ns: str) -> tuple[TaskGraph, str]:
        """Where a super-step goes: under the task node of its subgraph, or the task."""
        if ns:
            outer_ns, _, last = ns.rpartition("|")
            name = last.split(":", 1)[0]
            outer = self._latest.get((thread_id, outer_ns))
            if outer is not None:
                for node in reversed(list(outer.tasks.values())):
                    if node.name == name:
                        return outer.graph, node.id
        return self._scope(thread_id)

    def _on_checkpoint(self, config: Any, checkpoint: Any, metadata: Any) -> None:
        configurable = config.get("configurable", {})
        thread_id = str(configurable.get("thread_id", ""))
        ns = configurable.get("checkpoint_ns", "")
        with self._lock:
            previous = self._latest.pop((thread_id, ns), None)
            if previous is not None:
                self._close(previous)
            values = checkpoint.get("channel_values", {})
            sends = list(values.get(TASKS) or [])
            pulls = [c[len(BRANCH) :] for c in values if c.startswith(BRANCH)]
            planned = [(f"pull:{n}", n) for n in pulls if n not in _INTERNAL]
            planned += [(f"push:{i}", getattr(s, "node", "send")) for i, s in enumerate(sends)]
            if not planned:
                return
            graph, parent = self._parent_for(thread_id, ns)
            number = int(metadata.get("step", -1)) + 1
            node = graph.start("superstep", f"superstep {number}", parent, namespace=ns)
            step = _Superstep(graph, node, sends)
            for key, name in planned:
                step.tasks[key] = graph.start("step", name, node.id, langgraph_path=key)
            self._steps[(thread_id, ns, checkpoint["id"])] = step
            self._latest[(thread_id, ns)] = step

    def _close(self, step: _Superstep) -> None:
        for task in step.tasks.values():
            if task.status == "running":
                step.graph.end(task, "cancelled" if step.failed else "succeeded")
        if step.node.status == "running":
            step.graph.end(step.node, "failed" if step.failed else "succeeded")

    def _on_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> None:
        configurable = config.get("configurable", {})
        thread_id = str(configurable.get("thread_id", ""))
        ns = configurable.get("checkpoint_ns", "")
        key = _path_key(task_path)
        if key is None:
            return
        with self._lock:
            step = self._steps.get((thread_id, ns, configurable.get("checkpoint_id", "")))
            if step is None:
                return
            planned = step.tasks.get(key)
            if planned is not None and planned.status == "running":
                node = planned
            else:
                earlier = self._by_task_id.get(task_id) or planned
                if not step.resumed:
                    step = self._resume(step, thread_id, ns, configurable)
                node = step.graph.start(
                    "step",
                    earlier.name if earlier is not None else _name_for(step, key),
                    step.node.id,
                    [earlier.id] if earlier is not None else [],
                    langgraph_path=key,
                )
                step.tasks[key] = node
            self._by_task_id[task_id] = node
            node.attrs["langgraph_task_id"] = task_id
            channels = [c for c, _ in writes]
            if ERROR in channels:
                error = next(v for c, v in writes if c == ERROR)
                exc = error if isinstance(error, BaseException) else RuntimeError(str(error))
                step.graph.end(node, "failed", error=exc)
                step.failed = True
                if step.node.status == "running":
                    step.graph.end(step.node, "failed", reason=node.reason, category=node.category)
                for sibling in step.tasks.values():
                    if sibling is not node and sibling.status == "running":
                        sibling.status = "cancelled"
                        sibling.ended_at = time.time()
            elif INTERRUPT in channels:
                node.attrs["interrupt"] = True
                step.graph.end(node, "interrupted")
                if step.node.status == "running":
                    step.graph.end(step.node, "interrupted")
            else:
                step.graph.end(node, "succeeded")

    def _resume(self, step: _Superstep, thread_id: str, ns: str, configurable: Any) -> _Superstep:
        """A failed or interrupted super-step runs again: a new one, in the current task."""
        graph, parent = self._parent_for(thread_id, ns)
        node = graph.start(
            "superstep", step.node.name, parent, namespace=ns, resumed_from=step.node.id
        )
        fresh = _Superstep(graph, node, step.sends)
        fresh.resumed = True
        self._steps[(thread_id, ns, configurable.get("checkpoint_id", ""))] = fresh
        self._latest[(thread_id, ns)] = fresh
        return fresh


def _path_key(task_path: str) -> str | None:
    """``pull:NAME`` or ``push:INDEX`` from LangGraph's task path string."""
    parts = [p.strip() for p in task_path.lstrip("~").split(",")]
    if len(parts) >= 2 and parts[0] == PULL:
        return None if parts[1] in _INTERNAL else f"pull:{parts[1]}"
    if len(parts) >= 2 and parts[0] == PUSH:
        try:
            return f"push:{int(parts[1])}"
        except ValueError:
            return None
    return None


def _name_for(step: _Superstep, key: str) -> str:
    kind, _, rest = key.partition(":")
    if kind == "pull":
        return rest
    index = int(rest)
    return getattr(step.sends[index], "node", "send") if index < len(step.sends) else "send"
