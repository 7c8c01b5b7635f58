"""Scripted τ²-bench agents and users, offline (importable by path, registered once).

``tau2-gold`` replays the task's gold actions in order: its own as tool calls (one a turn);
for a run of the user's (telecom's dual control) it asks the user to do "step N", and the
user makes those calls with its own tools; then it tells the user each piece of information
the task wants communicated. ``tau2-wrong`` does the same and then makes one more change to
the database that no task asks for. ``tau2-user`` names its task (found from the scenario
in its system prompt), does what it is asked, and stops when the agent is done. Each
appends a line to ``$FXTR_TEST_LOG`` when asked: who, the task, the conversation's length.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections import Counter
from typing import Any

from fxtr.agents import tool_call
from fxtr.benchmarks.tau2 import _tau2
from fxtr.evals import register_mock
from fxtr.models import AssistantMessage, ModelRequest, SystemMessage, ToolMessage, UserMessage

DOMAINS = ("airline", "retail", "mock", "telecom")
SPLITS = {"telecom": "small"}
"""The tasks the scripts know: every task of a domain, telecom's small split."""

_TASK = re.compile(r"This is task (\w+)/(.+)\.$")
_STEP = re.compile(r"Please do step (\d+)\.")

WRONG = {
    "airline": ("send_certificate", {"user_id": "mia_li_3668", "amount": 123}),
    "retail": (
        "modify_user_address",
        {
            "user_id": "yusuf_rossi_9620",
            "address1": "1 Wrong Way",
            "address2": "",
            "city": "Nowhere",
            "state": "NA",
            "country": "USA",
            "zip": "00000",
        },
    ),
    "mock": ("create_task", {"user_id": "user_1", "title": "Not asked for"}),
}
"""A change no task of the domain asks for."""


def log(line: str) -> None:
    path = os.environ.get("FXTR_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {line}\n")


@functools.cache
def tasks(domain: str) -> dict[str, Any]:
    return {t.id: t for t in _tau2.tasks(domain, SPLITS.get(domain, "base"))}


@functools.cache
def _scenarios() -> list[tuple[str, str, str]]:
    return [
        (str(t.user_scenario), domain, t.id) for domain in DOMAINS for t in tasks(domain).values()
    ]


def identifiable(cases: list[Any]) -> list[Any]:
    """The cases whose user the script can tell apart (a scenario no other task has)."""
    seen = Counter(known for known, _, _ in _scenarios())
    return [c for c in cases if seen[c.metadata["user"]] == 1]


def _text(message: Any) -> str:
    return "".join(b.text for b in message.content)


def _blocks(domain: str, task_id: str, wrong: bool) -> list[tuple[str, list[Any]]]:
    """The gold actions in runs of one requestor: [(requestor, [(name, arguments), ...])]."""
    criteria = tasks(domain)[task_id].evaluation_criteria
    actions = [(a.requestor, a.name, a.arguments) for a in criteria.actions or ()]
    if wrong:
        actions.append(("assistant", *WRONG[domain]))
    return [
        (who, [(name, arguments) for _, name, arguments in run])
        for who, run in itertools.groupby(actions, key=lambda a: a[0])
    ]


def user_script(request: ModelRequest) -> object:
    """The simulated user.

    Its view: the agent's words as user messages, its own as the assistant's, its tool
    results as tool messages.
    """
    assert isinstance(request.context[0], SystemMessage)
    system = _text(request.context[0])
    scenario = system.split("<scenario>\n", 1)[1].rsplit("\n</scenario>", 1)[0]
    (found,) = {(d, i) for known, d, i in _scenarios() if known == scenario}
    domain, task_id = found
    log(f"user {domain}/{task_id} {len(request.context)}")
    context = list(request.context)
    asked = [n for n, m in enumerate(context) if isinstance(m, UserMessage)]
    if len(asked) == 1:  # only the agent's greeting so far
        return f"Hi. This is task {domain}/{task_id}."
    last = _text(context[asked[-1]])
    step = _STEP.search(last)
    if step is None:
        return "Thanks, that is all. ###STOP###"
    _, calls = _blocks(domain, task_id, False)[int(step.group(1))]
    done = sum(isinstance(m, ToolMessage) for m in context[asked[-1] :])
    if done < len(calls):
        name, arguments = calls[done]
        return tool_call(name, **arguments)
    return f"Done with step {step.group(1)}."


def _script(request: ModelRequest, wrong: bool) -> object:
    first = next(m for m in request.context if isinstance(m, UserMessage))
    domain, task_id = _TASK.search(_text(first)).groups()  # type: ignore[union-attr]
    log(f"agent {domain}/{task_id} {len(request.context)}")
    made = sum(len(m.tool_calls) for m in request.context if isinstance(m, AssistantMessage))
    users = sum(
        _text(m).startswith("Done with step") for m in request.context if isinstance(m, UserMessage)
    )
    ours = theirs = 0
    for n, (who, calls) in enumerate(_blocks(domain, task_id, wrong)):
        if who == "assistant":
            if made < ours + len(calls):
                name, arguments = calls[made - ours]
                return tool_call(name, **arguments)
            ours += len(calls)
        else:
            if users <= theirs:
                return f"Please do step {n}."
            theirs += 1
    said = " ".join(tasks(domain)[task_id].evaluation_criteria.communicate_info or ())
    return f"All done. {said}".strip()


def gold_script(request: ModelRequest) -> object:
    """The agent that replays the task's gold actions."""
    return _script(request, wrong=False)


def wrong_script(request: ModelRequest) -> object:
    """The agent that replays them and changes one more thing."""
    return _script(request, wrong=True)


DELAY = float(os.environ.get("FXTR_TEST_DELAY", "0"))
GOLD = register_mock("tau2-gold", gold_script, delay=DELAY)
WRONG_AGENT = register_mock("tau2-wrong", wrong_script)
USER = register_mock("tau2-user", user_script, delay=DELAY)
