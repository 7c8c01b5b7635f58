"""A job's execution graph, built from its records: the job, workflows, steps, model calls."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from fxtr.tracing._graph import Node, TaskGraph

if TYPE_CHECKING:
    from fxtr.experiment._jobs import JobResult

_CALL_ATTRS = ("provider", "role", "cached_input_tokens", "messages", "reply", "api", "note")
"""What a model-call node keeps from its invocation's ``model_calls`` entry."""
_LAST = re.compile(r"^(?P<name>[^\[\]]+)(\[(?P<keys>.*)\])?$")


def split_address(address: str) -> tuple[str, str, dict[str, str]]:
    """``(parent address, operation name, map keys)`` of an address."""
    parent, _, last = address.rpartition("/")
    match = _LAST.match(last)
    if match is None:
        return parent, last, {}
    keys: dict[str, str] = {}
    if match.group("keys"):
        for part in _split_keys(match.group("keys")):
            k, _, v = part.partition("=")
            keys[k] = v
    return parent, match.group("name"), keys


def _split_keys(text: str) -> list[str]:
    parts, current, quoted = [], "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
            continue
        current += ch
    parts.append(current)
    return parts


def source_op(label: str) -> str | None:
    """The operation address a handle label comes from (field projections stripped)."""
    if label.startswith(("input:", "value:", "combine(", "stack[")):
        return None
    head, _, last = label.rpartition("/")
    return f"{head}/{last.split('.', 1)[0]}" if head else None


def job_graph(result: JobResult) -> TaskGraph:
    """The execution graph of one attempt of a job.

    A task node for the job, workflow nodes, step nodes (with ``depends_on`` from the handles
    passed between operations) and model-call nodes.
    """
    graph = TaskGraph(result.job_id)
    root = result.workflows[0] if result.workflows else None
    job = Node(
        id=result.job_id,
        kind="task",
        name=root.workflow if root else "job",
        status={"succeeded": "succeeded", "failed": "failed"}.get(result.status, "needs_review"),  # type: ignore[arg-type]
        started_at=root.started_at if root else None,
        ended_at=max((i.ended_at or 0 for i in result.invocations), default=None)
        or (root.ended_at if root else None),
        attrs={"attempt": result.attempt},
    )
    graph.add(job)
    for wf in result.workflows:
        parent = wf.address.rpartition("/")[0]
        graph.add(
            Node(
                id=wf.address,
                kind="workflow",
                name=wf.workflow,
                parent_id=parent if parent else job.id,
                status=wf.status,
                started_at=wf.started_at,
                ended_at=wf.ended_at,
                error=wf.error,
                attrs={"address": wf.address, "logs": wf.logs, "warnings": wf.warnings},
            )
        )
    by_op: dict[str, list[Any]] = {}
    for inv in result.invocations:
        parent, name, _ = split_address(inv.address)
        by_op.setdefault(f"{parent}/{name}", []).append(inv)
    upstream: dict[str, list[str]] = {}
    for wf_address, ops in result.ops.items():
        for op in ops:
            sources = [source_op(label) for label in op.get("inputs", {}).values()]
            upstream[f"{wf_address}/{op['name']}"] = [s for s in sources if s in by_op]
    for inv in result.invocations:
        parent, name, keys = split_address(inv.address)
        depends = []
        for source in upstream.get(f"{parent}/{name}", []):
            for up in by_op[source]:
                up_keys = split_address(up.address)[2]
                if all(keys.get(k, v) == v for k, v in up_keys.items()):
                    depends.append(up.address)
        node = graph.add(
            Node(
                id=inv.address,
                kind="step",
                name=inv.step,
                parent_id=parent or job.id,
                depends_on=depends,
                status=inv.status,
                started_at=inv.started_at,
                ended_at=inv.ended_at,
                input_tokens=inv.input_tokens,
                output_tokens=inv.output_tokens,
                cost_usd=inv.cost_usd,
                reason=inv.reason,
                category=inv.category,
                error=inv.error,
                attrs={
                    "address": inv.address,
                    "from_cache": inv.from_cache,
                    "logs": inv.logs,
                    "warnings": inv.warnings,
                },
            )
        )
        for i, call in enumerate(inv.model_calls):
            graph.add(
                Node(
                    id=f"{inv.address}#call{i}",
                    kind="model_call",
                    name=call["model"],
                    parent_id=node.id,
                    status=call["status"],
                    started_at=call.get("started_at"),
                    ended_at=call.get("ended_at"),
                    input_tokens=call.get("input_tokens", 0),
                    output_tokens=call.get("output_tokens", 0),
                    cost_usd=call.get("cost_usd"),
                    reason=call.get("reason"),
                    category=call.get("category"),
                    error=call.get("error"),
                    attrs={key: call[key] for key in _CALL_ATTRS if key in call},
                )
            )
    return graph
