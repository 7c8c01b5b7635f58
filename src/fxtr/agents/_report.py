"""What the summary and the viewer say of an agent eval's trajectories, read from the record."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from fxtr.agents._types import STOPS

TRAJECTORY_STEP = "fxtr.agents.trajectory"
"""The step whose result is a finished trajectory."""


def load_trajectory(store: Any, result_text: str | None) -> dict[str, Any] | None:
    """The trajectory a ``fxtr.agents.trajectory`` invocation recorded, as plain JSON.

    Entities become dicts of their fields with their type under ``$type``, so a trajectory
    reads back even where its environment's class cannot be imported (the viewer, ``fxtr``).
    ``None`` when the entry is missing or damaged (it says nothing rather than something
    wrong).
    """
    if not result_text:
        return None
    try:
        tree = loose(json.loads(result_text), store)
    except (LookupError, TypeError, ValueError, RecursionError):
        return None
    if not isinstance(tree, dict) or tree.get("$type") != TRAJECTORY_TYPE:
        return None
    return tree


TRAJECTORY_TYPE = "fxtr.agents._types:Trajectory"


def loose(tree: Any, store: Any, depth: int = 0) -> Any:
    """A canonical tree as plain JSON: entities as ``{"$type": ..., fields}``, refs loaded."""
    if isinstance(tree, list):
        return [loose(v, store, depth) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if tree.get("$entity") == STORED_ENV and isinstance(tree.get("v"), dict):
        return stored_env(store, str(tree["v"].get("root")))
    if "$entity" in tree and "v" in tree:
        fields = {k: loose(v, store, depth) for k, v in tree["v"].items()}
        return {"$type": tree["$entity"], **fields}
    if "$ref" in tree and "id" in tree:
        text = store.get_entity(tree["id"]) if depth < 8 else None
        if text is None:
            return {"$type": tree["$ref"], "$missing": tree["id"]}
        return loose(json.loads(text), store, depth + 1)
    if "$dict" in tree:
        return {k: loose(v, store, depth) for k, v in tree["$dict"]}
    return {k: loose(v, store, depth) for k, v in tree.items()}


STORED_ENV = "fxtr.agents._state:StoredEnv"
"""An environment kept as a tree of the store's parts (``fxtr.store._tree``), by its root."""


def stored_env(store: Any, root: str) -> Any:
    """A stored environment's whole value, loosely (entities as ``$type`` and fields).

    ``{"$type": ..., "$missing": root}`` when a part is missing from the store.
    """
    from fxtr.store import MissingPartError, load

    try:
        return load(root, store.get_blobs, entity=lambda key, fields: {"$type": key, **fields})
    except (MissingPartError, ValueError, TypeError, LookupError):
        return {"$type": STORED_ENV, "$missing": root}


def env_changes(
    store: Any, trajectory: str, addresses: list[str], invocations: Any
) -> dict[str, list[str]]:
    """What each tool call of a trajectory changed in its stored environment, by call id.

    Read from the roots its ``env`` and ``tool[i,j]`` steps recorded (among ``addresses``),
    reading only the differing paths from the store.
    """
    from fxtr.store import MissingPartError, changes

    before = _root(store, (invocations.get(f"{trajectory}/env") or {}).get("result_text"))
    if before is None:
        return {}
    calls = []
    for address in addresses:
        head, _, name = address.rpartition("/")
        inv = invocations.get(address) or {}
        if head == trajectory and name.startswith("tool[") and inv.get("status") == "succeeded":
            i, j = name[5:-1].split(",")
            calls.append((int(i), int(j), inv.get("result_text")))
    out: dict[str, list[str]] = {}
    for _, _, text in sorted(calls, key=lambda c: (c[0], c[1])):
        outcome = _entity_tree(store, text)
        root = _root(store, text)
        if outcome is None or root is None:
            continue
        call_id = str(((outcome.get("result") or {}).get("v") or {}).get("tool_call_id", ""))
        if root != before:
            try:
                out[call_id] = changes(before, root, store.get_blobs)
            except (MissingPartError, ValueError, TypeError):
                out[call_id] = ["(a part of the environment is missing from the store)"]
        before = root
    return out


def _entity_tree(store: Any, text: str | None) -> dict[str, Any] | None:
    """The fields of an entity a step returned (by reference or inline), as stored."""
    try:
        tree = json.loads(text or "null")
        if isinstance(tree, dict) and "$ref" in tree:
            tree = json.loads(store.get_entity(tree["id"]) or "null")
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(tree, dict) or not isinstance(tree.get("v"), dict):
        return None
    fields: dict[str, Any] = tree["v"]
    return fields


def _root(store: Any, text: str | None) -> str | None:
    fields = _entity_tree(store, text)
    if fields is None:
        return None
    env = fields.get("env", fields.get("state"))
    if isinstance(env, dict) and env.get("$entity") == STORED_ENV:
        root = (env.get("v") or {}).get("root")
        return root if isinstance(root, str) else None
    return None


def plain(value: Any) -> Any:
    """A loose tree without the ``$type`` marks (an environment as its fields)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != "$type"}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def trajectory_model(address: str) -> str:
    """The ``model`` key of the agent workflow a trajectory step belongs to."""
    from fxtr.tracing._jobgraph import address_segments, split_segment

    for segment in reversed(address_segments(address)):
        keys = split_segment(segment)[1]
        if "model" in keys:
            return keys["model"]
    return "?"


def agent_rows(store: Any, invocations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model: trajectories, mean turns and tool calls, tool errors, stops by kind.

    Empty when the job ran no agent.
    """
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for inv in invocations:
        if inv.get("step") != TRAJECTORY_STEP or inv.get("status") != "succeeded":
            continue
        trajectory = load_trajectory(store, inv.get("result_text"))
        if trajectory is not None:
            by_model[trajectory_model(inv["address"])].append(trajectory)
    rows = []
    for model, found in sorted(by_model.items()):
        n = len(found)
        stops = Counter(str(t.get("stop")) for t in found)
        rows.append(
            {
                "model": model,
                "trajectories": n,
                "mean_turns": sum(t.get("turns", 0) for t in found) / n,
                "mean_tool_calls": sum(t.get("tool_calls", 0) for t in found) / n,
                "tool_errors": sum(t.get("tool_errors", 0) for t in found),
                "stops": {k: stops[k] for k in (*STOPS, *sorted(stops)) if stops.get(k)},
            }
        )
    return rows


def stops_text(stops: dict[str, int]) -> str:
    """``answer 8, limit:turns 2``."""
    return ", ".join(f"{kind} {count}" for kind, count in stops.items())


SCORE_STEP = "fxtr.agents.score"
AGENT_STEPS = frozenset(
    ("fxtr.agents.turn", "fxtr.agents.tool", "fxtr.agents.user", "fxtr.agents.env")
)
"""The steps inside a trajectory (its ``agent[...]`` workflow)."""


def _keys(address: str) -> dict[str, str]:
    from fxtr.tracing._jobgraph import address_segments, split_segment

    keys: dict[str, str] = {}
    for segment in address_segments(address):
        keys.update(split_segment(segment)[1])
    return keys


def _score_of(store: Any, result_text: str | None) -> dict[str, Any] | None:
    if not result_text:
        return None
    try:
        value = loose(json.loads(result_text), store)
    except (LookupError, TypeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def differences_of(explanation: str | None) -> list[str]:
    """The differing fields a ``state_matches`` explanation lists (``path: final != expected``)."""
    head = "field(s) differ (final != expected): "
    if not explanation or head not in explanation:
        return []
    return explanation.split(head, 1)[1].split("; ")


def _text(message: dict[str, Any]) -> str:
    return "".join(str(b.get("text", "")) for b in message.get("content") or [])


def _user_tools(done: dict[str, Any]) -> list[dict[str, Any]]:
    """The simulated user's tool calls of one reply and their results, as viewer events."""
    calls = done.get("calls") or []
    names = {c.get("id", ""): c.get("name", "?") for c in calls}
    said = "; ".join(
        f"{c.get('name')}({json.dumps(c.get('arguments') or {}, sort_keys=True)})" for c in calls
    )
    return [
        {"kind": "user_sim", "text": f"(calls its tools) {said}"},
        *_tool_results(done.get("results") or [], names),
    ]


def _tool_results(results: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    """Tool results as viewer events, each named by the call it answers."""
    return [
        {
            "kind": "tool_result",
            "id": r.get("tool_call_id"),
            "name": names.get(r.get("tool_call_id", ""), "?"),
            "content": r.get("content"),
            "is_error": bool(r.get("is_error")),
        }
        for r in results
    ]


def trajectory_view(trajectory: dict[str, Any]) -> dict[str, Any]:
    """A trajectory as the viewer draws it: its events in time order, then how it ended."""
    names: dict[str, str] = {}
    events: list[dict[str, Any]] = []
    simulated = set(trajectory.get("simulated") or [])
    own: dict[int, list[dict[str, Any]]] = {}  # the simulated user's tool calls, by place
    for done in trajectory.get("user_tools") or []:
        own.setdefault(done.get("at", -1), []).append(done)
    turn = 0
    for index, m in enumerate([*(trajectory.get("messages") or []), None]):
        for done in own.get(index, ()):
            events.extend(_user_tools(done))
        if m is None:
            break
        kind = str(m.get("$type", "")).rpartition(":")[2]
        if kind == "SystemMessage":
            events.append({"kind": "system", "text": _text(m)})
        elif kind == "UserMessage":
            events.append({"kind": "user_sim" if index in simulated else "user", "text": _text(m)})
        elif kind == "AssistantMessage":
            calls = m.get("tool_calls") or []
            for c in calls:
                names[c.get("id", "")] = c.get("name", "?")
            events.append(
                {
                    "kind": "assistant",
                    "turn": turn,
                    "text": _text(m),
                    "calls": [
                        {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments")}
                        for c in calls
                    ],
                }
            )
            turn += 1
        elif kind == "ToolMessage":
            events.extend(_tool_results(m.get("results") or [], names))
    usage = trajectory.get("usage") or {}
    return {
        "events": events,
        "answer": trajectory.get("answer"),
        "stop": trajectory.get("stop"),
        "turns": trajectory.get("turns", 0),
        "tool_calls": trajectory.get("tool_calls", 0),
        "tool_errors": trajectory.get("tool_errors", 0),
        "input_tokens": usage.get("input_tokens", 0),
        "output_tokens": usage.get("output_tokens", 0),
        "cost_usd": trajectory.get("cost"),
        "env": plain(trajectory.get("env")),
    }


def cell_trajectories(
    store: Any, addresses: list[str], invocations: dict[str, Any]
) -> list[dict[str, Any]]:
    """The trajectories among a result cell's invocations, each with its sample's score."""
    scores = {
        tuple(sorted(_keys(address).items())): inv
        for address, inv in invocations.items()
        if inv.get("step") == SCORE_STEP
    }
    out = []
    agents = {
        address.rsplit("/", 1)[0]
        for address in addresses
        if (invocations.get(address) or {}).get("step") in AGENT_STEPS
    }
    finished = {a.rsplit("/", 1)[0] for a in addresses if a.endswith("/trajectory")}
    cell = {a: invocations[a] for a in addresses if a in invocations}
    for agent in sorted(agents - finished):  # a step failed: drawn up to the failure
        view = failed_trajectory(store, agent, cell)
        if view is not None:
            out.append(view)
    for address in addresses:
        inv = invocations.get(address) or {}
        if inv.get("step") != TRAJECTORY_STEP:
            continue
        trajectory = load_trajectory(store, inv.get("result_text"))
        if trajectory is None:
            continue
        keys = _keys(address)
        view = trajectory_view(trajectory)
        changed = env_changes(store, address.rpartition("/")[0], addresses, invocations)
        for event in view["events"]:
            if event["kind"] == "tool_result" and event.get("id") in changed:
                event["env_changes"] = changed[event["id"]]
        view["address"] = address
        view["sample"] = keys.get("sample")
        score_inv = scores.get(tuple(sorted(keys.items())))
        score = _score_of(store, score_inv.get("result_text")) if score_inv else None
        if score is not None:
            view["score"] = score.get("value")
            view["explanation"] = score.get("explanation")
            view["env_differences"] = differences_of(view["explanation"])
        out.append(view)
    return out


def _step_of(address: str, agent: str) -> tuple[str, tuple[int, ...]] | None:
    """``("turn", (1,))`` for ``AGENT/turn[1]``, ``("tool", (0, 1))`` for ``AGENT/tool[0,1]``."""
    if not address.startswith(agent + "/"):
        return None
    name, _, rest = address[len(agent) + 1 :].partition("[")
    if "/" in name or not rest.endswith("]"):
        return None
    try:
        return name, tuple(int(p) for p in rest[:-1].split(","))
    except ValueError:
        return None


def _input(store: Any, inv: dict[str, Any], name: str) -> Any:
    """An invocation's recorded input as a loose tree (entities followed), or ``None``."""
    fp = (inv.get("input_fingerprints") or {}).get(name)
    text = store.get_value(fp) if fp else None
    if not text:
        return None
    try:
        return loose(json.loads(text), store)
    except (LookupError, TypeError, ValueError, RecursionError):
        return None


def _result(store: Any, inv: dict[str, Any]) -> Any:
    return _score_of(store, inv.get("result_text")) if inv.get("status") == "succeeded" else None


def failed_trajectory(
    store: Any, agent: str, invocations: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """A trajectory that a failed step stopped, as the viewer draws a finished one.

    Its events up to the failure, rebuilt from its steps' records: the conversation the
    last turn was asked (its recorded request), that turn's reply and its tool calls' results
    when it succeeded; then ``failed`` with the failed step, its reason and its error.
    ``None`` when no step of the trajectory failed.
    """
    steps: dict[str, dict[tuple[int, ...], dict[str, Any]]] = defaultdict(dict)
    failure = None
    for address, inv in invocations.items():
        found = _step_of(address, agent)
        if found is None and address != f"{agent}/env":
            continue
        if found is not None:
            steps[found[0]][found[1]] = inv
        if inv.get("status") == "failed" and failure is None:
            failure = {
                "address": address,
                "step": inv.get("step"),
                "reason": inv.get("reason"),
                "error": inv.get("error"),
            }
    if failure is None:
        return None
    messages: list[Any] = []
    turns = sorted(steps["turn"].items())
    if turns:
        (last,), inv = turns[-1]
        request = _input(store, inv, "request") or {}
        messages = list(request.get("context") or [])
        turn = _result(store, inv)
        if turn is not None:
            output = (turn.get("response") or {}).get("output") or []
            messages.append(
                {
                    "$type": ":AssistantMessage",
                    "content": [b for b in output if "text" in b],
                    "tool_calls": [b for b in output if "arguments" in b],
                }
            )
            done = [_result(store, i) for (t, _), i in sorted(steps["tool"].items()) if t == last]
            results = [o["result"] for o in done if o and o.get("result")]
            if results:
                messages.append({"$type": ":ToolMessage", "results": results})
    view = trajectory_view(
        {
            "messages": messages,
            "turns": sum(i.get("status") == "succeeded" for _, i in turns),
            "tool_calls": sum(
                len(m.get("tool_calls") or []) for m in messages if "tool_calls" in m
            ),
            "tool_errors": sum(
                bool(r.get("is_error")) for m in messages for r in m.get("results") or []
            ),
        }
    )
    calls = [c for _, i in turns for c in i.get("model_calls") or []]
    view["input_tokens"] = sum(int(c.get("input_tokens") or 0) for c in calls)
    view["output_tokens"] = sum(int(c.get("output_tokens") or 0) for c in calls)
    view["stop"] = "failed"
    view["failed"] = failure
    view["address"] = agent
    view["sample"] = _keys(agent).get("sample")
    return view
