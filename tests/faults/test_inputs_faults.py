"""Issue 15, clear errors: hostile inputs and results, map_over as a str, step options."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

import fxtr
from fxtr.experiment.steps import StepContext, step
from tests.faults.flows import SURROGATE, anything


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = {
    "datetime": datetime.datetime(2026, 1, 1, 12, 0),
    "lambda": lambda x: x,
    "bigint": 10**5000,
    "deep900": _deep(900),
    "surrogate": SURROGATE,
}


def _numpy() -> Any:
    np = pytest.importorskip("numpy")
    return np.float32(1.5)


def check_refused(value: Any, store: Path) -> None:
    """Launching with ``value`` is refused with a short error naming the parameter."""
    with pytest.raises((TypeError, ValueError, fxtr.FxtrError)) as info:
        fxtr.run(anything, {"value": value}, store=str(store))
    message = str(info.value)
    assert "'value'" in message or "value" in message.split(), message
    assert not isinstance(info.value, RecursionError), "a deep input overflowed the stack"
    assert len(message) < 2000, "the message repeats the value"
    assert "Traceback" not in message


@pytest.mark.parametrize("kind", ["datetime", "lambda", "numpy"])
def test_hostile_input_is_refused_naming_the_parameter(kind: str, store: Path) -> None:
    """An input with no canonical encoding is refused at launch, naming the parameter."""
    check_refused(_numpy() if kind == "numpy" else HOSTILE[kind], store)


@pytest.mark.parametrize("timeout", [-1, 0, float("nan")])
def test_step_timeout_is_validated(timeout: Any) -> None:
    """``@step(timeout=)`` refuses what is not a positive finite number of seconds."""
    with pytest.raises((TypeError, ValueError)) as info:

        @step(name="faults.bad_timeout", timeout=timeout)
        async def bad(context: StepContext) -> int:
            return 1

    assert "timeout" in str(info.value)


def test_step_timeout_accepts_seconds() -> None:
    @step(name="faults.good_timeout", timeout=2.5)
    async def good(context: StepContext) -> int:
        return 1

    assert good.name == "faults.good_timeout"


