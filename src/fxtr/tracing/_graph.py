"""The execution graph: nodes with status, timings, tokens, cost and failure reasons."""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

_ID_PREFIX = os.urandom(4).hex()
_ids = itertools.count(int.from_bytes(os.urandom(3), "big") << 8)


def _reseed() -> None:
    """A forked child draws its own prefix, so its ids never repeat its parent's."""
    global _ID_PREFIX, _ids
    _ID_PREFIX = os.urandom(4).hex()
    _ids = itertools.count(int.from_bytes(os.urandom(3), "big") << 8)


os.register_at_fork(after_in_child=_reseed)


def new_id() -> str:
    """A 16-hex-character node id: random per process, then a counter (no syscall per node)."""
    return f"{_ID_PREFIX}{next(_ids) & 0xFFFFFFFF:08x}"


NodeStatus = Literal[
    "running", "succeeded", "failed", "cancelled", "skipped", "needs_review", "interrupted"
]


@dataclasses.dataclass(slots=True, eq=False)
class Node:
    """One thing that happened: a task, a workflow, a step, a model call, a user block."""

    id: str
    kind: str
    """``task``, ``workflow``, ``step``, ``model_call``, ``superstep``, ..."""
    name: str
    """The step's name, or the model a request was sent to."""
    parent_id: str | None = None
    depends_on: list[str] = dataclasses.field(default_factory=list)
    """Nodes this one needed, or the failed node it retries."""
    status: NodeStatus = "running"
    started_at: float | None = None
    ended_at: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    reason: str | None = None
    """Failure reason (``context_overflow``, ``budget``, ``tool_error``, ``stall``, ``refusal``,
    ``unknown``), on failed nodes only."""
    category: str | None = None
    """The finer provider category of a failure (``rate_limit``, ``overloaded``, ...)."""
    error: str | None = None
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What resume needs (a model call's request, a callable step's arguments) and extras
    (an invocation's address, from_cache)."""

    def to_json(self) -> dict[str, Any]:
        """The node as a JSON-able dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Node:
        """Rebuild a node from ``to_json``."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def duration(self) -> float | None:
        """Seconds from start to end."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at


class TaskGraph:
    """The nodes of one task (or job), in creation order, with roll-ups per subtree."""

    def __init__(self, task_id: str, nodes: list[Node] | None = None) -> None:
        self.task_id = task_id
        self.nodes: list[Node] = nodes or []
        self._by_id: dict[str, Node] = {n.id: n for n in self.nodes}
        self._children: dict[str | None, list[Node]] = {}
        for n in self.nodes:
            self._children.setdefault(n.parent_id, []).append(n)
        self._lock = threading.Lock()
        self.on_change: Callable[[Node], None] | None = None
        """Called when a node starts or ends (persistence)."""

    def __repr__(self) -> str:
        return f"TaskGraph({self.task_id!r}, {len(self.nodes)} nodes)"

    def node(self, node_id: str) -> Node:
        """The node with an id."""
        return self._by_id[node_id]

    def children(self, node_id: str | None) -> list[Node]:
        """Direct children in creation order (``None``: the roots)."""
        return list(self._children.get(node_id, ()))

    def walk(self, node_id: str | None = None) -> Iterator[Node]:
        """Every node under ``node_id`` (all roots when ``None``), depth first."""
        for child in self.children(node_id):
            yield child
            yield from self.walk(child.id)

    def find(
        self, *, kind: str | None = None, name: str | None = None, status: str | None = None
    ) -> list[Node]:
        """Nodes matching all the given fields."""
        return [
            n
            for n in self.nodes
            if (kind is None or n.kind == kind)
            and (name is None or n.name == name)
            and (status is None or n.status == status)
        ]

    def rollup(self, node_id: str) -> dict[str, Any]:
        """Tokens and dollars of a node and everything under it."""
        calls = [n for n in (self.node(node_id), *self.walk(node_id)) if n.kind == "model_call"]
        costs = [n.cost_usd for n in calls if n.cost_usd is not None]
        return {
            "calls": len(calls),
            "input_tokens": sum(n.input_tokens for n in calls),
            "output_tokens": sum(n.output_tokens for n in calls),
            "cost_usd": sum(costs) if costs else None,
        }

    # recording ------------------------------------------------------------------------

    def start(
        self,
        kind: str,
        name: str,
        parent_id: str | None,
        depends_on: list[str] | None = None,
        **attrs: Any,
    ) -> Node:
        """Create a running node."""
        node = Node(
            id=new_id(),
            kind=kind,
            name=name,
            parent_id=parent_id,
            depends_on=depends_on or [],
            started_at=time.time(),
            attrs=attrs,
        )
        with self._lock:
            self.nodes.append(node)
            self._by_id[node.id] = node
            self._children.setdefault(parent_id, []).append(node)
        if self.on_change is not None:
            self.on_change(node)
        return node

    def add(self, node: Node) -> Node:
        """Add a finished node as it is (building a graph from records)."""
        with self._lock:
            self.nodes.append(node)
            self._by_id[node.id] = node
            self._children.setdefault(node.parent_id, []).append(node)
        return node

    def end(
        self,
        node: Node,
        status: NodeStatus = "succeeded",
        *,
        error: BaseException | None = None,
        reason: str | None = None,
        category: str | None = None,
        error_text: str | None = None,
    ) -> None:
        """Finish a node; a failure gets its reason (``stall`` when it is a retry loop).

        The error's text is recorded with credentials redacted (``error_text`` when given).
        """
        node.ended_at = time.time()
        node.status = status
        if error is not None:
            from fxtr.models._classify import classify, failure_category
            from fxtr.secrets import redact

            node.error = error_text or redact(f"{type(error).__name__}: {error}")
            node.reason = reason or classify(error)
            node.category = category or failure_category(error)
        elif status == "failed" and node.reason is None:
            node.reason = reason or "unknown"
            node.category = category
        if status == "failed":
            with self._lock:
                if is_stall(self.children(node.parent_id), node):
                    node.reason = "stall"
        if self.on_change is not None:
            self.on_change(node)


def is_stall(siblings: list[Node], node: Node) -> bool:
    """Whether ``node`` is the third (or later) in an unbroken run of failed same-name siblings.

    Siblings are in creation order; a success, or a node of another name, breaks the run.
    """
    run = 0
    for sibling in siblings:
        if sibling is node:
            return run >= 2
        if sibling.name == node.name and sibling.status == "failed":
            run += 1
        elif sibling.status != "running" or sibling.name != node.name:
            run = 0
    return False
