"""Tools, environments and scripted mock agents for the agent tests (importable by path).

The scripts and tools append a line to the file named by ``FXTR_TEST_LOG`` (when set) each
time they are asked or run: the count at the fake's side, across processes.
"""

from __future__ import annotations

import dataclasses
import os
import time

from fxtr.agents import Agent, tool, tool_call
from fxtr.evals import Case, register_mock, user_text
from fxtr.experiment.entities import Entity
from fxtr.models import ModelRequest, ToolMessage


def log(line: str) -> None:
    """Append a line to $FXTR_TEST_LOG (the fake's own count of what it was asked)."""
    path = os.environ.get("FXTR_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {line}\n")


class Counter(Entity):
    """A tiny environment: a starting value and the increments made to it."""

    start: int = 0
    history: list[int] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> int:
        """The running total."""
        return self.start + sum(self.history)


def counter_env(case: Case) -> Counter:
    """Every case starts at its metadata's ``start`` (0 by default)."""
    return Counter(start=int(case.metadata.get("start", 0)))


def counter_expected(case: Case) -> Counter:
    """What ``step_script`` leaves: increments of 1..4."""
    return Counter(start=int(case.metadata.get("start", 0)), history=[1, 2, 3, 4])


@tool
def bump(n: int, env: Counter) -> int:
    """Add n to the running total.

    Args:
        n: how much to add.
    """
    log(f"tool {env.start} {len(env.history)}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    env.history.append(n)
    return env.total


def _turn(request: ModelRequest) -> int:
    return sum(type(m).__name__ == "AssistantMessage" for m in request.context)


def step_script(request: ModelRequest) -> object:
    """Four bumps (1, 2, 3, 4), one a turn, then the total as the answer: five turns."""
    i = _turn(request)
    log(f"ask {user_text(request).removeprefix('case ')} {i}")
    delay = float(os.environ.get("FXTR_TEST_DELAY", "0"))
    if delay:
        time.sleep(delay)
    if i < 4:
        return tool_call("bump", n=i + 1)
    last = request.context[-1]
    assert isinstance(last, ToolMessage)
    return f"total {last.results[0].content}"


STEPPER = register_mock("stepper", step_script)
STEP_AGENT = Agent(tools=(bump,), env=counter_env, max_turns=8)
STEP_CASES = [Case(id=f"c{k}", input=f"case {k}", metadata={"start": k}) for k in range(10)]


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def calc_script(request: ModelRequest) -> object:
    """Call add on 'A+B', then answer with its result."""
    last = request.context[-1]
    if isinstance(last, ToolMessage):
        return f"The answer is {last.results[0].content}"
    a, b = user_text(request).split("+")
    return tool_call("add", a=float(a), b=float(b))
