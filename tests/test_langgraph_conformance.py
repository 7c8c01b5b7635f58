"""LangGraph's own checkpointer conformance suite against FluxCheckpointer, beside InMemorySaver."""

from __future__ import annotations

import asyncio
import os

import pytest

if os.environ.get("CI") != "true":
    pytest.importorskip("langgraph", reason="the langgraph extra is not installed")
    pytest.importorskip(
        "langgraph.checkpoint.conformance",
        reason="langgraph-checkpoint-conformance (a test dependency of the extra) is missing",
    )

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.memory import InMemorySaver

from fxtr.integrations.langgraph import FluxCheckpointer
from fxtr.models import MockModelAPI
from fxtr.tracing import Client


@checkpointer_test(name="InMemorySaver")
async def in_memory():
    yield InMemorySaver()


@checkpointer_test(name="FluxCheckpointer")
async def flux():
    yield FluxCheckpointer(Client({"m": MockModelAPI("m", "x")}))


def counts(registered) -> dict[str, tuple[int, int, int]]:
    report = asyncio.run(validate(registered))
    return {
        name: (r.tests_passed, r.tests_failed, r.tests_skipped)
        for name, r in report.results.items()
    }


def test_flux_checkpointer_passes_what_the_in_memory_saver_passes():
    """Every capability: the same passed, failed and skipped counts; nothing fails."""
    baseline, ours = counts(in_memory), counts(flux)
    assert ours == baseline
    assert sum(failed for _, failed, _ in ours.values()) == 0
    assert sum(passed for passed, _, _ in ours.values()) >= 58
