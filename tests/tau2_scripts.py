"""Scripted τ²-bench agents and users, offline (importable by path, registered once).

``tau2-gold`` replays the task's gold actions as tool calls (one a turn), then tells the
user each piece of information the task wants communicated; ``tau2-wrong`` does the same
and then makes one more change to the database that no task asks for; ``tau2-user`` says
which task it plays, then stops. Each appends a line to ``$FXTR_TEST_LOG`` when asked.
"""

from __future__ import annotations

import functools
import os
import re

from fxtr.agents import tool_call
from fxtr.benchmarks.tau2 import _tau2
from fxtr.evals import register_mock
from fxtr.models import AssistantMessage, ModelRequest, SystemMessage, UserMessage

_TASK = re.compile(r"This is task (\w+)/(\S+)\.")

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
}
"""A change no task of the domain asks for."""


def log(line: str) -> None:
    path = os.environ.get("FXTR_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {line}\n")


@functools.cache
def _tasks(domain: str) -> dict[str, object]:
    return {t.id: t for t in _tau2.tasks(domain, None)}


@functools.cache
def _scenarios(domain: str) -> dict[str, str]:
    return {str(t.user_scenario): t.id for t in _tasks(domain).values()}  # type: ignore[attr-defined]


def _text(message: object) -> str:
    return "".join(b.text for b in message.content)  # type: ignore[attr-defined]


def user_script(request: ModelRequest) -> object:
    """The simulated user: names its task first (found from its scenario), then stops."""
    system = _text(request.context[0])
    assert isinstance(request.context[0], SystemMessage)
    found = None
    for domain in ("airline", "retail"):
        for scenario, task_id in _scenarios(domain).items():
            if scenario in system:
                found = (domain, task_id)
    assert found is not None, "the user's system prompt has no τ² scenario"
    said = sum(isinstance(m, AssistantMessage) for m in request.context)
    log(f"user {found[0]}/{found[1]} {said}")
    if said == 0:
        return f"Hi. This is task {found[0]}/{found[1]}."
    return "Thanks, that is all. ###STOP###"


def _script(request: ModelRequest, wrong: bool) -> object:
    first = next(m for m in request.context if isinstance(m, UserMessage))
    domain, task_id = _TASK.search(_text(first)).groups()  # type: ignore[union-attr]
    task = _tasks(domain)[task_id]
    criteria = task.evaluation_criteria  # type: ignore[attr-defined]
    actions = [a for a in criteria.actions or () if a.requestor == "assistant"]
    if wrong:
        name, arguments = WRONG[domain]
        actions = (
            [*actions, type(actions[0])(action_id="wrong", name=name, arguments=arguments)]
            if actions
            else [
                _tau2.tau2_module("data_model.tasks").Action(
                    action_id="wrong", name=name, arguments=arguments
                )
            ]
        )
    turn = sum(isinstance(m, AssistantMessage) for m in request.context) - 1  # the greeting
    log(f"agent {domain}/{task_id} {turn}")
    if turn < len(actions):
        return tool_call(actions[turn].name, **actions[turn].arguments)
    said = " ".join(criteria.communicate_info or ())
    return f"All done. {said}".strip()


def gold_script(request: ModelRequest) -> object:
    """The agent that replays the task's gold actions."""
    return _script(request, wrong=False)


def wrong_script(request: ModelRequest) -> object:
    """The agent that replays them and changes one more thing."""
    return _script(request, wrong=True)


GOLD = register_mock("tau2-gold", gold_script)
WRONG_AGENT = register_mock("tau2-wrong", wrong_script)
USER = register_mock("tau2-user", user_script)
