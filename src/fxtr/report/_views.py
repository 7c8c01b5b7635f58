"""Views of stored jobs, computed from the store alone (no user code is imported)."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from typing import Any

from fxtr.report._evals import evaluation_of, gate_label, model_call_view
from fxtr.report._money import format_cost
from fxtr.report._names import eval_name, live_status
from fxtr.report._values import render_value
from fxtr.store import Store
from fxtr.tracing._jobgraph import address_segments, parent_address, source_op, strip_keys

MAX_GRAPH_NODES = 300
"""Operation graphs larger than this are shown as a tree instead of a drawing."""
LAYER_WIDTH = 280
"""Pixels between the left edges of two layers of the graph: a 210-pixel node, then room for
the edge and its parameter's name."""
ROW_HEIGHT = 118
"""Pixels between the tops of two nodes of one layer: a 104-pixel node and a gap."""


class JobView:
    """One job as the store keeps it: its record and its last attempt's details.

    The invocation records, the workflow records and the operations are read from the store
    when first asked for: listing jobs and drawing a job's tree use the summary its record
    keeps (``summary``) and never read a large job's invocation records.
    """

    def __init__(
        self,
        job_id: str,
        record: dict[str, Any],
        invocations: dict[str, dict[str, Any]] | None = None,
        workflows: list[dict[str, Any]] | None = None,
        ops: dict[str, list[dict[str, Any]]] | None = None,
        store: Store | None = None,
    ) -> None:
        self.job_id = job_id
        self.record = record
        self.store = store
        self._invocations = invocations
        self._workflows = workflows
        self._ops = ops

    @property
    def invocations(self) -> dict[str, dict[str, Any]]:
        """The latest record of each invocation, by address (read on first use)."""
        if self._invocations is None:
            store = self._need_store()
            try:
                self._invocations = store.job_invocations(self.job_id)
            except ValueError as exc:  # a record cut or garbled on disk
                msg = (
                    f"the invocation records of job {self.job_id} in {store.path} are damaged "
                    f"({exc}); restore the store from a backup"
                )
                raise ValueError(msg) from None
        return self._invocations

    @property
    def workflows(self) -> list[dict[str, Any]]:
        """The last attempt's workflow records."""
        if self._workflows is None:
            n = len(self.record.get("attempts", []))
            self._workflows = self._need_store().get_workflows(self.job_id, n) if n else []
        return self._workflows

    @property
    def ops(self) -> dict[str, list[dict[str, Any]]]:
        """The operations each workflow invocation of the last attempt scheduled."""
        if self._ops is None:
            n = len(self.record.get("attempts", []))
            self._ops = (self._need_store().get_ops(self.job_id, n) or {}) if n else {}
        return self._ops

    def _need_store(self) -> Store:
        if self.store is None:
            msg = f"JobView of {self.job_id} was built without its store: pass store=."
            raise ValueError(msg)
        return self.store

    @property
    def summary(self) -> dict[str, Any] | None:
        """The counts the last attempt recorded as it ended, when it did (see ``summarize``)."""
        summary = self.attempt.get("summary")
        return summary if isinstance(summary, dict) and "operations" in summary else None

    def unfinished(self) -> dict[str, dict[str, Any]]:
        """The records that did not succeed (failed, skipped, in review), by address."""
        if self._invocations is not None or self.store is None:
            return {a: r for a, r in self.invocations.items() if r["status"] != "succeeded"}
        return self.store.job_unfinished(self.job_id)

    @property
    def attempt(self) -> dict[str, Any]:
        attempts = self.record.get("attempts") or [{}]
        return dict(attempts[-1])

    @property
    def status(self) -> str | None:
        """The last attempt's status; ``interrupted`` when its process died while running."""
        return live_status(self.attempt)


def load_job(store: Store, job_id: str) -> JobView:
    """A job and its last attempt from the store (details read when first asked for).

    Raises:
        KeyError: the store has no such job.
    """
    return JobView(job_id=job_id, record=store.get_job(job_id), store=store)


def view_of(store: Store, record: dict[str, Any]) -> JobView:
    """A job's view from a record already read (listing jobs reads each record once)."""
    return JobView(job_id=record["job_id"], record=record, store=store)


SUBJECT = "subject"
"""The role of a model call that is not a judge's."""


def _usage_row() -> dict[str, Any]:
    return {
        "calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "usd": None,
        "saved_usd": None,
        "unpriced_calls": 0,
    }


def _call_parts(inv: dict[str, Any]) -> list[tuple[str, str, int, int, int, float | None]]:
    """An invocation's usage as ``(model, role, calls, input, output, usd)`` parts.

    Each recorded call is its own part. An invocation with no call details (served from the
    cache) is split by its per-model totals, each given its one role when the invocation had
    one, or its per-role totals given their one model; only when it had several models *and*
    several roles are a model's calls given the role ``subject, judge``.
    """
    by_model = inv.get("cost_by_model") or {}
    by_role = inv.get("cost_by_role") or {}
    calls = [c for c in inv.get("model_calls") or [] if isinstance(c, dict)]
    total = sum(int(u.get("calls", 0)) for u in by_model.values())
    if calls and len(calls) == total:
        return [
            (
                str(c.get("model")),
                str(c.get("role") or SUBJECT),
                1,
                int(c.get("input_tokens") or 0),
                int(c.get("output_tokens") or 0),
                c.get("cost_usd"),
            )
            for c in calls
            if not refused(c)
        ]

    def part(model: str, role: str, u: dict[str, Any]) -> tuple[str, str, int, int, int, Any]:
        calls, tokens = int(u.get("calls", 0)), int(u.get("input_tokens", 0))
        return (model, role, calls, tokens, int(u.get("output_tokens", 0)), u.get("usd"))

    if len(by_model) == 1 and len(by_role) > 1:  # one model in several roles
        (model,) = by_model
        return [part(str(model), str(role), u) for role, u in by_role.items()]
    role = ", ".join(sorted(by_role)) if by_role else SUBJECT
    return [part(str(model), role, u) for model, u in by_model.items()]


def refused(call: dict[str, Any]) -> bool:
    """A call the run's budget refused: never sent, so no call, no tokens, no cost."""
    return call.get("category") == "budget_exhausted"


def _add(
    row: dict[str, Any], part: tuple[str, str, int, int, int, float | None], cached: bool
) -> None:
    _, _, calls, tokens_in, tokens_out, usd = part
    if cached:  # not spent this attempt: what the cache saved
        if usd is not None:
            row["saved_usd"] = (row["saved_usd"] or 0.0) + usd
        else:
            row[_UNPRICED_CACHED] = True
        return
    row["calls"] += calls
    row["input_tokens"] += tokens_in
    row["output_tokens"] += tokens_out
    if usd is None:
        row["unpriced_calls"] += calls
    else:
        row["usd"] = (row["usd"] or 0.0) + usd


_UNPRICED_CACHED = "_unpriced_cached"
"""A row's mark (never shown): it has calls served from the cache without a known price."""


def _settle(row: dict[str, Any]) -> dict[str, Any]:
    """Dollars ``None`` when no call of the row had a known price, made or served cached.

    A model without a price is ``n/a`` on the run that paid for its calls and on every
    cached rerun alike, never ``$0.0000``.
    """
    unpriced_cached = row.pop(_UNPRICED_CACHED, False)
    if row["usd"] is None and not row["unpriced_calls"] and not unpriced_cached:
        row["usd"] = 0.0
    if row["saved_usd"] is None and (row["usd"] is not None):
        row["saved_usd"] = 0.0
    return row


def cost_rows(invocations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Calls, tokens and dollars of this attempt per model *and* role (DESIGN §5, §9).

    A model that served as the subject and as a judge has a row for each role, never one
    merged row. ``usd`` is ``None`` for a row whose calls had no known price (it counts
    them in ``unpriced_calls``); ``saved_usd`` is what the cache saved. Subjects first.
    """
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for inv in invocations:
        cached = bool(inv.get("from_cache"))
        for part in _call_parts(inv):
            row = rows.get(part[:2])
            if row is None:
                row = rows[part[:2]] = {"model": part[0], "role": part[1], **_usage_row()}
            _add(row, part, cached)
    return sorted(
        (_settle(r) for r in rows.values()),
        key=lambda r: (r["role"] != SUBJECT, r["model"], r["role"]),
    )


def cost_of_invocations(invocations: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's ``cost``: this attempt's calls, tokens, dollars, savings, per model and role.

    The keys are DESIGN §5's: ``calls``, ``input_tokens``, ``output_tokens``, ``usd``,
    ``saved_usd``, ``unpriced_calls``, ``by_model`` and ``by_role`` (each with the same).

    ``usd`` is ``None`` for a model (or role) whose calls had no known price, and the total
    is ``None`` when no call had one; otherwise the known sum, with ``unpriced_calls``
    counting the calls left out of it.
    """
    total = _usage_row()
    by_model: dict[str, dict[str, Any]] = defaultdict(_usage_row)
    by_role: dict[str, dict[str, Any]] = defaultdict(_usage_row)
    for row in cost_rows(invocations):
        for target in (total, by_model[row["model"]], by_role[row["role"]]):
            for key in ("calls", "input_tokens", "output_tokens", "unpriced_calls"):
                target[key] += row[key]
            if row["usd"] is None and not row["unpriced_calls"]:
                target[_UNPRICED_CACHED] = True
            for key in ("usd", "saved_usd"):
                if row[key] is not None:
                    target[key] = (target[key] or 0.0) + row[key]
    return {
        **_settle(total),
        "by_model": {m: _settle(r) for m, r in by_model.items()},
        "by_role": {r: _settle(v) for r, v in by_role.items()},
    }


REPORT_KEYS = ("address", "step", "status", "from_cache", "reason", "error", "warnings")


def job_report(view: JobView, scores: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One job in the ``{"jobs": [...]}`` report schema (``--fxtr-report``, ``fxtr export``)."""
    defaults: dict[str, Any] = {"from_cache": False, "warnings": []}
    return {
        "job_id": view.job_id,
        "workflow": view.record["workflow"],
        "status": view.status,
        "attempt": view.attempt.get("attempt"),
        "invocations": [
            {k: inv.get(k, defaults.get(k)) for k in REPORT_KEYS}
            for _, inv in sorted(view.invocations.items())
        ],
        "cost": cost_of_invocations(list(view.invocations.values())),
        "scores": scores or [],
    }


def job_row(view: JobView) -> dict[str, Any]:
    """The columns of ``fxtr jobs`` and the viewer's jobs page.

    From the summary the job's last attempt recorded when it has one (its invocation
    records are not read), else from the invocation records.
    """
    summary = view.summary
    if summary is not None:
        counts = {k: summary[k] for k in ("ran", "cached", "failed", "tokens", "cost_usd")}
    else:
        invs = list(view.invocations.values())
        cost = cost_of_invocations(invs)
        counts = {
            "ran": sum(1 for i in invs if not i.get("from_cache") and i.get("started_at")),
            "cached": sum(1 for i in invs if i.get("from_cache")),
            "failed": sum(1 for i in invs if i["status"] == "failed"),
            "tokens": cost["input_tokens"] + cost["output_tokens"],
            "cost_usd": cost["usd"],
        }
    commit = view.record.get("commit")
    evaluation = evaluation_of(view.record)
    return {
        "job_id": view.job_id,
        "workflow": view.record.get("workflow"),
        "status": view.status,
        "gate": gate_label(view.record),
        "eval": evaluation.get("eval") if evaluation else eval_name(view.record),
        "attempts": len(view.record.get("attempts", [])),
        **counts,
        "started": _iso(view.record.get("created_at")),
        "commit": (commit[:10] + ("*" if view.record.get("dirty") else "")) if commit else None,
    }


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return dt.datetime.fromtimestamp(timestamp).isoformat(timespec="seconds")


def _source_op(label: str, known: set[str]) -> str | None:
    source = source_op(label, known)
    return strip_keys(source) if source else None


def operation_graph(view: JobView) -> dict[str, Any]:
    """One node per operation (maps grouped, with per-status counts), edges from handles.

    Returns:
        ``{"nodes": [...], "edges": [...], "truncated": bool}``; nodes carry a layered
        left-to-right layout (``x``, ``y``), computed here so the page only draws.
    """
    nodes: dict[str, dict[str, Any]] = {}

    def node(key: str, kind: str, name: str) -> dict[str, Any]:
        if key not in nodes:
            parent = parent_address(key) or None
            nodes[key] = {
                "id": key,
                "kind": kind,
                "name": name,
                "parent": parent,
                "callee": None,
                "counts": Counter(),
                "ran": 0,
                "cached": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "cost_usd": 0.0,
                "unpriced": 0,
                "reasons": Counter(),
                "invocations": 0,
            }
        return nodes[key]

    for wf in view.workflows:
        key = strip_keys(wf["address"])
        n = node(key, "workflow", address_segments(key)[-1])
        n["callee"] = wf["workflow"]
        n["counts"][wf["status"]] += 1
        n["invocations"] += 1
    edges: list[dict[str, Any]] = []
    seen_edges: set[tuple[str, str, str]] = set()
    known = {f"{w}/{op['name']}" for w, ops in view.ops.items() for op in ops}
    for wf_address, ops in view.ops.items():
        for op in ops:
            key = strip_keys(f"{wf_address}/{op['name']}")
            n = node(key, op["kind"], op["name"])
            n["callee"] = op.get("callee")
            for param, label in (op.get("inputs") or {}).items():
                source = _source_op(label, known)
                if source and (source, key, param) not in seen_edges:
                    seen_edges.add((source, key, param))
                    edges.append({"source": source, "target": key, "param": param})
    summary = view.summary
    for key, op in (summary["operations"] if summary is not None else {}).items():
        n = node(key, "step", address_segments(key)[-1])
        n["callee"] = op.get("step")
        n["counts"].update(op["counts"])
        n["reasons"].update(op["reasons"])
        for field in ("invocations", "ran", "cached", "input_tokens", "output_tokens"):
            n[field] += op[field]
        n["cost_usd"] += op["cost_usd"]
        n["unpriced"] += op.get("unpriced", 0)
    for address, inv in view.invocations.items() if summary is None else ():
        key = strip_keys(address)
        n = node(key, "step", address_segments(key)[-1])
        n["callee"] = inv.get("step")
        n["counts"][inv["status"]] += 1
        n["invocations"] += 1
        if inv.get("from_cache"):
            n["cached"] += 1
        elif inv.get("started_at"):
            n["ran"] += 1
            n["input_tokens"] += inv.get("input_tokens", 0)
            n["output_tokens"] += inv.get("output_tokens", 0)
            n["cost_usd"] += inv.get("cost_usd") or 0.0
            by_model = (inv.get("cost_by_model") or {}).values()
            if any(row.get("usd") is None for row in by_model):
                n["unpriced"] += 1
        if inv.get("reason"):
            n["reasons"][inv["reason"]] += 1
    for key in _internal_sources(nodes):
        del nodes[key]
    edges = [e for e in edges if e["source"] in nodes and e["target"] in nodes]
    edges = fold_trajectories(nodes, edges)
    _layout(nodes, edges)
    out = []
    for n in nodes.values():
        out.append({**n, "counts": dict(n["counts"]), "reasons": dict(n["reasons"])})
    return {
        "nodes": out,
        "edges": edges,
        "truncated": len(out) > MAX_GRAPH_NODES,
        "rollup": _rollup(out),
    }


def _internal_sources(nodes: dict[str, dict[str, Any]]) -> list[str]:
    """Arrays fxtr's own workflows make for themselves: never a node of the user's graph.

    ``fxtr.evaluate``'s ``asked`` (the cases without their targets) is one.
    """
    return [
        key
        for key, n in nodes.items()
        if n["kind"] == "source"
        and str((nodes.get(n["parent"] or "") or {}).get("callee") or "").startswith("fxtr.")
    ]


AGENT_WORKFLOW = "fxtr.agent"
"""The agent loop's workflow: one trajectory per invocation (DESIGN §12)."""


def fold_trajectories(
    nodes: dict[str, dict[str, Any]], edges: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Draw an agent's trajectories as one node that holds its steps.

    Its turns, tool calls and simulated-user replies fold into it, counted on its lines;
    clicking it lists them.

    Returns:
        The edges, with those of the folded steps moved to the trajectory node.
    """
    agents = [k for k, n in nodes.items() if n["callee"] == AGENT_WORKFLOW]
    if not agents:
        return edges
    moved: dict[str, str] = {}
    for key in agents:
        agent = nodes[key]
        inside = [k for k in nodes if k.startswith(key + "/")]
        by_name: Counter[str] = Counter()
        steps: Counter[str] = Counter()
        for k in inside:
            n = nodes.pop(k)
            moved[k] = key
            by_name[k.rsplit("/", 1)[1]] += n["invocations"]
            steps.update(n["counts"])
            for field in ("ran", "cached", "input_tokens", "output_tokens", "cost_usd", "unpriced"):
                agent[field] += n[field]
            agent["reasons"].update(n["reasons"])
        trajectories = agent["invocations"]
        states = " · ".join(
            f"{c} {'ok' if s == 'succeeded' else s.replace('_', ' ')}"
            for s, c in sorted(steps.items())
        )
        agent["kind"] = "trajectory"
        agent["steps"] = dict(by_name)
        agent["lines"] = [
            f"{trajectories} trajector{'y' if trajectories == 1 else 'ies'} · "
            f"{by_name['turn']} turns",
            f"{by_name['tool']} tool calls"
            + (f" · {by_name['user']} user turns" if by_name["user"] else ""),
            f"steps: {states or 'none'}",
            f"{agent['ran']} ran · {agent['cached']} cached",
        ]
        tokens = agent["input_tokens"] + agent["output_tokens"]
        if tokens:
            money = format_cost(agent["cost_usd"], agent["unpriced"])
            agent["lines"].append(f"{tokens} tokens · {money}")
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for e in edges:
        source, target = moved.get(e["source"], e["source"]), moved.get(e["target"], e["target"])
        if source == target or (source, target, e["param"]) in seen:
            continue
        seen.add((source, target, e["param"]))
        out.append({**e, "source": source, "target": target})
    return out


def _rollup(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "input_tokens": sum(n["input_tokens"] for n in nodes),
        "output_tokens": sum(n["output_tokens"] for n in nodes),
        "cost_usd": sum(n["cost_usd"] for n in nodes),
    }


def _layout(nodes: dict[str, dict[str, Any]], edges: list[dict[str, Any]]) -> None:
    """Layers by longest path over the data edges; a node's row is its order in its layer."""
    incoming: dict[str, list[str]] = defaultdict(list)
    for e in edges:
        incoming[e["target"]].append(e["source"])
    layer: dict[str, int] = {}

    def depth(key: str, trail: frozenset[str]) -> int:
        if key in layer:
            return layer[key]
        sources = [s for s in incoming.get(key, []) if s not in trail]
        value = 1 + max((depth(s, trail | {key}) for s in sources), default=-1)
        # children of a workflow sit at least one layer right of it
        parent = nodes[key]["parent"]
        if parent in nodes and parent not in trail:
            value = max(value, depth(parent, trail | {key}) + 1)
        layer[key] = value
        return value

    rows: dict[int, int] = defaultdict(int)
    for key in nodes:
        d = depth(key, frozenset())
        nodes[key]["layer"] = d
        nodes[key]["x"] = 20 + d * LAYER_WIDTH
        nodes[key]["y"] = 20 + rows[d] * ROW_HEIGHT
        rows[d] += 1


def invocation_detail(store: Store, view: JobView, address: str) -> dict[str, Any]:
    """Everything the invocation panel shows.

    Raises:
        KeyError: the job has no invocation at that address.
    """
    inv = view.invocations.get(address)
    if inv is None:
        msg = f"Job {view.job_id} has no invocation at {address!r}."
        raise KeyError(msg)
    inputs = {}
    for name, fp in (inv.get("input_fingerprints") or {}).items():
        text = store.get_value(fp)
        inputs[name] = {
            "fingerprint": fp,
            "value": render_value(text, store) if text is not None else None,
            "recorded": text is not None,
        }
    started, ended = inv.get("started_at"), inv.get("ended_at")
    return {
        "address": address,
        "step": inv.get("step"),
        "status": inv.get("status"),
        "from_cache": bool(inv.get("from_cache")),
        "reason": inv.get("reason"),
        "category": inv.get("category"),
        "error": inv.get("error"),
        "traceback": inv.get("traceback"),
        "conflict": inv.get("conflict"),
        "inputs": inputs,
        "result": render_value(inv.get("result_text"), store),
        "logs": inv.get("logs") or [],
        "warnings": inv.get("warnings") or [],
        "model_calls": [model_call_view(c) for c in inv.get("model_calls") or []],
        "started": _iso(started),
        "seconds": (ended - started) if started and ended else None,
        "input_tokens": inv.get("input_tokens", 0),
        "output_tokens": inv.get("output_tokens", 0),
        "cost_usd": inv.get("cost_usd"),
        "attempt": inv.get("attempt"),
        "fingerprint": inv.get("fingerprint"),
    }


def task_view(store: Store, task_id: str) -> dict[str, Any]:
    """A tracing task (``fxtr.tracing.Client`` or a LangGraph run) as nodes.

    Raises:
        KeyError: the store has no such task.
    """
    nodes = store.get_trace_nodes(task_id)
    if not nodes:
        msg = f"No task {task_id!r} in the store at {store.path}."
        raise KeyError(msg)
    for n in nodes:
        n.pop("attrs", None)  # requests and arguments stay in the store
    root = next((n for n in nodes if n.get("parent_id") is None), nodes[0])
    return {"task_id": task_id, "name": root["name"], "status": root["status"], "nodes": nodes}
