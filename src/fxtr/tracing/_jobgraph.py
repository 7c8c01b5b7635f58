"""A job's execution graph, built from its records: the job, workflows, steps, model calls.

Addresses are read here with one quote-aware scanner (:func:`address_segments`): the engine
writes a map key as JSON text when it holds address syntax (``a/b[case="x/y"]``, see
``fxtr.experiment._graph.format_key``), so ``/``, ``[``, ``]``, ``,``, ``=`` and escaped
quotes inside a quoted key are text, never structure. Quotes count only inside brackets
(operation names and roots carry no brackets, but may carry a quote).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any

from fxtr.tracing._graph import Node, TaskGraph

if TYPE_CHECKING:
    from fxtr.experiment._jobs import JobResult

_CALL_ATTRS = ("provider", "role", "cached_input_tokens", "messages", "reply", "api", "note")
"""What a model-call node keeps from its invocation's ``model_calls`` entry."""


def _scan(text: str) -> Iterator[tuple[str, bool, int]]:
    """Each character of an address with whether it is structure, and the bracket depth.

    A character is structure when it is outside every quoted key; brackets report the depth
    inside them (``[`` and ``]`` at depth 1, ``/`` between segments at depth 0).
    """
    depth, quoted, escaped = 0, False, False
    for ch in text:
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
            yield ch, False, depth
        elif ch == '"' and depth:
            quoted = True
            yield ch, False, depth
        elif ch == "[":
            depth += 1
            yield ch, True, depth
        elif ch == "]" and depth:
            yield ch, True, depth
            depth -= 1
        else:
            yield ch, True, depth


def _split(text: str, sep: str) -> list[str]:
    """``text`` split at every ``sep`` that is structure at depth 0."""
    if '"' not in text and "[" not in text:  # nothing quoted: the common case, at C speed
        return text.split(sep)
    parts: list[str] = []
    current: list[str] = []
    for ch, structure, depth in _scan(text):
        if ch == sep and structure and not depth:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def address_segments(address: str) -> list[str]:
    """The segments of an address (``root/op[k="a/b"]/child`` → 3), keys kept whole."""
    return _split(address, "/")


def parent_address(address: str) -> str:
    """The address one segment up (``""`` for a root)."""
    return "/".join(address_segments(address)[:-1])


_KEYS = re.compile(r'\[(?:"(?:[^"\\]|\\.)*"|[^\]"\[])*\]')
"""One bracketed group of map keys (quoted keys whole), as the engine writes it."""


def strip_keys(address: str) -> str:
    """An address without its map keys: the operation it belongs to."""
    if "[" not in address:
        return address
    stripped = _KEYS.sub("", address)  # at C speed: a job summary strips every address
    if "[" not in stripped and "]" not in stripped:
        return stripped
    return "".join(ch for ch, _, depth in _scan(address) if not depth)  # not the engine's


def _key_text(text: str) -> str:
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, str) else text
    return text


def split_segment(segment: str) -> tuple[str, dict[str, str]]:
    """``(operation name, map keys)`` of one segment; keys unquoted (``k="a/b"`` → ``a/b``).

    An integer key comes back as its text (``sample=2`` → ``"2"``).
    """
    name, bracket, rest = segment.partition("[")
    if not bracket or not rest.endswith("]"):
        return segment, {}
    parts: list[str] = []
    current: list[str] = []
    for ch, structure, depth in _scan(segment[len(name) :]):
        if structure and ch in "[]":
            continue
        if structure and ch == "," and depth == 1:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    keys: dict[str, str] = {}
    for part in parts:
        dim, _, text = part.partition("=")
        keys[dim] = _key_text(text)
    return name, keys


def split_address(address: str) -> tuple[str, str, dict[str, str]]:
    """``(parent address, operation name, map keys)`` of an address."""
    segments = address_segments(address)
    name, keys = split_segment(segments[-1])
    return "/".join(segments[:-1]), name, keys


def source_op(label: str, known: Collection[str] | None = None) -> str | None:
    """The operation address a handle label comes from (field projections stripped).

    A label is an operation's address, maybe with a field path (``wf/answer.text``). An
    operation name may hold a dot itself: given the ``known`` operation addresses, the
    longest one the label starts with wins; without them the name ends at the first dot.
    """
    segments = address_segments(label)
    if len(segments) < 2:
        return None
    head, last = "/".join(segments[:-1]), segments[-1]
    if known is not None:  # a known operation wins, even one whose root looks synthetic
        cuts = [i for i, ch in enumerate(last) if ch == "."] + [len(last)]
        for cut in reversed(cuts):
            if f"{head}/{last[:cut]}" in known:
                return f"{head}/{last[:cut]}"
    if label.startswith(_SYNTHETIC):  # an input, a constant, a combine or a stack
        return None
    return f"{head}/{last.split('.', 1)[0]}"


_SYNTHETIC = ("input:", "value:", "combine(", "stack[")
"""How the labels of handles that no operation made begin (see ``WorkflowContext``)."""


def _upstream(result: JobResult, by_op: dict[str, list[Any]]) -> dict[str, list[str]]:
    """Per step operation, the step operations whose results it takes.

    A handle a child workflow returned stands for the steps that made it: its source is
    followed into the child (the workflow record keeps the label of the handle its body
    returned), so a step fed by ``summarize`` depends on ``summarize/mean``.
    """
    children: dict[str, list[Any]] = {}
    for wf in result.workflows:
        parent, name, _ = split_address(wf.address)
        if parent:
            children.setdefault(f"{parent}/{name}", []).append(wf)
    known = set(by_op) | set(children)

    def steps_of(source: str | None, seen: frozenset[str]) -> list[str]:
        if source is None or source in seen:
            return []
        if source in by_op:
            return [source]
        out: list[str] = []
        for wf in children.get(source, []):
            inner = source_op(wf.result, known) if getattr(wf, "result", None) else None
            out += [s for s in steps_of(inner, seen | {source}) if s not in out]
        return out

    upstream: dict[str, list[str]] = {}
    for wf_address, ops in result.ops.items():
        for op in ops:
            sources: list[str] = []
            for label in op.get("inputs", {}).values():
                found = steps_of(source_op(label, known), frozenset())
                sources += [s for s in found if s not in sources]
            upstream[f"{wf_address}/{op['name']}"] = sources
    return upstream


def _keys_from(address: str, parent: str) -> dict[str, str]:
    """The map keys an upstream address holds, to match a consumer under ``parent``.

    A sibling's are its own; a step inside a child workflow of ``parent`` adds the keys of
    every segment below ``parent`` (the child's ``[model=a]`` with the step's own).
    """
    segments = address_segments(address)
    base = len(address_segments(parent)) if parent else 0
    if not parent or not address.startswith(parent + "/") or len(segments) <= base + 1:
        return split_segment(segments[-1])[1]
    keys: dict[str, str] = {}
    for segment in segments[base:]:
        keys.update(split_segment(segment)[1])
    return keys


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
        parent = parent_address(wf.address)
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
    upstream = _upstream(result, by_op)
    for inv in result.invocations:
        parent, name, keys = split_address(inv.address)
        depends = []
        for source in upstream.get(f"{parent}/{name}", []):
            for up in by_op[source]:
                if all(keys.get(k, v) == v for k, v in _keys_from(up.address, parent).items()):
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
