"""Messages and stops a new user meets (issue 36 item 12): a hanging async tool stopped by
``time_limit``, a first parameter named ``ctx``, a damaged kept entry under review, a deeply
nested tool call."""

from __future__ import annotations

import importlib
import json
import re
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

import fxtr
from fxtr.agents import Agent
from fxtr.agents._tool import MAX_NESTING, nesting
from fxtr.evals import Case, Model, evaluate, includes
from fxtr.experiment._why import DAMAGED_KEPT
from fxtr.experiment.arrays import Array
from fxtr.experiment.errors import SignatureError
from fxtr.store import CacheEntry
from tests import agent_examples as ex
from tests.faults.conftest import fxtr_cli
from tests.faults.flows import batch

HANGING = textwrap.dedent(
    '''
    import asyncio
    import pytest
    from fxtr.agents import Agent, Trajectory, scorer, tool, tool_call
    from fxtr.evals import Case, Score, evaluate, register_mock
    from fxtr.models import ToolMessage

    @tool
    async def wait_forever(seconds: float) -> str:
        """Wait for an event that never comes."""
        await asyncio.Event().wait()
        return "never"

    def caller(request):
        if isinstance(request.context[-1], ToolMessage):
            return "done waiting"
        return tool_call("wait_forever", seconds=1.0)

    def facts(case, trajectory):
        result = trajectory.messages[-1].results[0]
        return Score(value=0.0, answer=trajectory.answer,
                     explanation=f"{trajectory.stop}|{result.is_error}|{result.content}")

    MODEL = register_mock("hang-caller", caller)

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": scorer(facts), "samples": 1,
                              "agent": Agent(tools=(wait_forever,), time_limit=0.5)})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", [Case(id="x", input="wait")])
    def test_hang(model, case, result):
        got = next(result.values())
        print("RESULT", got.explanation)
        assert got.answer is None
    '''
)


def test_time_limit_cancels_an_async_tool_that_never_returns(pytester):
    """The tool is cancelled at the time left; its result says so; the stop is limit:time."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_hang=HANGING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=120)
    result.assert_outcomes(passed=1)
    found = re.search(r"RESULT (.*)", result.stdout.str())
    assert found, result.stdout.str()
    stop, is_error, content = found.group(1).split("|")
    assert (stop, is_error) == ("limit:time", "True")
    cut = re.match(r"TimeoutError: tool 'wait_forever' was cancelled after ([0-9.]+) s, ", content)
    assert cut, content
    assert 0 < float(cut.group(1)) <= 0.5  # the time left after the model's turn
    assert "the time the agent's time_limit left" in content
    # a rerun serves the cut call from the cache: same stop, no wait
    again = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=120)
    again.assert_outcomes(passed=1)
    assert found.group(0) in again.stdout.str()


STEPS = textwrap.dedent(
    """
    from typing import Annotated
    from fxtr.experiment.arrays import Array
    from fxtr.experiment.steps import StepContext, step
    from fxtr.experiment.workflows import WorkflowContext, workflow
    from fxtr.experiment.handles import ScalarHandle

    @step(name="m.answer")
    async def answer(SIGNATURE) -> str:
        return "ok"
    """
)


@pytest.mark.parametrize(
    ("signature", "renamed"),
    [
        ("ctx: StepContext, question: str", "ctx"),
        ("ctx, question: str, n: int = 3", "ctx"),
        ('ctx: "StepContext", rows: Annotated[Array[str], "[case: str]"]', "ctx"),
        ("question: str, context: StepContext", None),
        ("question: str", None),
    ],
)
def test_the_signature_a_refused_step_is_told_to_write_is_accepted(
    tmp_path, monkeypatch, signature, renamed
):
    """Whatever the first parameter, the 'Write:' line, pasted back, defines the step."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"steps_{abs(hash(signature))}"
    (tmp_path / f"{name}.py").write_text(STEPS.replace("SIGNATURE", signature))
    with pytest.raises(SignatureError) as refused:
        importlib.import_module(name)
    text = str(refused.value)
    written = re.search(r"Write: async def answer\((.*)\)$", text)
    assert written, text
    assert ("rename 'ctx' to 'context'" in text) == (renamed is not None)
    fixed = f"{name}_fixed"
    (tmp_path / f"{fixed}.py").write_text(STEPS.replace("SIGNATURE", written.group(1)))
    module = importlib.import_module(fixed)  # accepted as written
    assert list(module.answer.signature.params)[-1] in ("question", "n", "rows")


ADDRESS = "faults.batch/work[case=a]"


def _batch(store: str, payload: str, conflict: str = "review") -> Any:
    keys = Array.from_mapping({"a": "a", "b": "b"}, dims=["case"], value_type=str)
    inputs = {"keys": keys, "payload": payload, "gate": ""}
    return fxtr.run(batch, inputs, store=store, conflict=conflict)


@pytest.mark.parametrize("damage", ["undecodable", "cut"])
def test_a_damaged_kept_entry_is_recomputed_not_reviewed_as_a_changed_input(tmp_path, damage):
    """Payload A, then B (A kept), then A again with A's kept entry damaged: A's inputs were
    held, so it is no conflict: recomputed and counted, and `fxtr cache why` says damaged."""
    store = str(tmp_path / "store")
    first = _batch(store, "A")
    assert _batch(store, "B", conflict="overwrite").status == "succeeded"
    fp = first.invocation(ADDRESS).fingerprint
    key = f"q|{ADDRESS}|{fp}"
    with sqlite3.connect(Path(store) / "cache" / "cache.db") as con:
        (value,) = con.execute("SELECT value FROM Cache WHERE key = ?", (key,)).fetchone()
        texts = json.loads(value)
        entry = CacheEntry.from_text(texts[0])
        if damage == "undecodable":  # its checksum matches, its result does not decode
            entry.result = "{not json"
            texts[0] = entry.to_text()
        else:
            texts[0] = texts[0][: len(texts[0]) // 2]
        con.execute("UPDATE Cache SET value = ? WHERE key = ?", (json.dumps(texts), key))
    again = _batch(store, "A")
    assert again.status == "succeeded", [(i.address, i.status, i.error) for i in again.invocations]
    assert again.output == first.output and again.damaged == [ADDRESS]
    inv = again.invocation(ADDRESS)
    assert not inv.from_cache
    assert inv.changed == [DAMAGED_KEPT]
    assert not any("payload" in part for part in inv.changed)
    why = fxtr_cli("--store", store, "cache", "why", ADDRESS)
    assert why.returncode == 0, why.stderr
    assert "payload" not in why.stdout and "damaged" in why.stdout, why.stdout
    assert "ran because the entry kept for these inputs was damaged" in why.stdout
    # B's entry stayed kept: switching back to B is a hit, and A again is a hit
    assert all(i.from_cache for i in _batch(store, "B").invocations if i.address == ADDRESS)
    assert all(i.from_cache for i in _batch(store, "A").invocations if i.address == ADDRESS)


DEEP = textwrap.dedent(
    '''
    import pytest
    from fxtr.agents import Agent, tool, tool_call
    from fxtr.evals import Case, evaluate, includes, register_mock
    from fxtr.models import ToolMessage

    @tool
    def echo(data: list) -> str:
        """Echo the data."""
        return "ok"

    def deep(request):
        if isinstance(request.context[-1], ToolMessage):
            return "done"
        value = []
        for _ in range(4999):
            value = [value]
        return tool_call("echo", data=value)

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes(), "agent": Agent(tools=(echo,))})
    @pytest.mark.parametrize("model", [register_mock("deep-caller", deep)])
    @pytest.mark.parametrize("case", [Case(id="x", input="go", target="done")])
    def test_deep(model, case, result):
        assert result is not None
    '''
)


def test_a_5000_deep_tool_call_is_refused_naming_the_tool_and_the_depth(pytester):
    """Not a raw RecursionError: the turn fails with the tool, the depth and the fix."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_deep=DEEP)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    out = result.stdout.str()
    assert "RecursionError" not in out, out
    assert (
        "ValueError: The call of tool 'echo' has arguments nested 5000 levels deep, more "
        "than the 100 fxtr accepts" in out
    ), out
    assert "give the tool flat parameters" in out


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@respx.mock
def test_a_provider_reply_nesting_a_call_too_deep_is_refused(tmp_path, monkeypatch):
    """A call read from a provider's JSON (500 deep: json reads it, the cache could not)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    call = {
        "id": "call_a",
        "type": "function",
        "function": {"name": "add", "arguments": json.dumps({"a": _nested(500), "b": 1})},
    }
    reply = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
    respx.post("http://llm.test/v1/chat/completions").mock(
        return_value=httpx.Response(200, json=reply)
    )
    model = Model("openai-compatible/gpt-4o-mini", base_url="http://llm.test/v1")
    result = fxtr.run(
        evaluate,
        {
            "model": Array.from_mapping({model.name: model}, dims=["model"]),
            "case": Array.from_mapping({"x": Case(id="x", input="go")}, dims=["case"]),
            "scorer": includes(),
            "agent": Agent(tools=(ex.add,)),
        },
        store=tmp_path,
    )
    errors = [i.error for i in result.invocations if i.status == "failed"]
    assert result.status == "failed"
    assert errors == [
        "ValueError: The call of tool 'add' has arguments nested 500 levels deep, more than "
        "the 100 fxtr accepts (such a value cannot be cached or sent back): give the tool flat "
        "parameters (a list of records, not records inside records), or make the model's "
        "reply flatter."
    ]


def test_nesting_is_measured_without_recursion():
    """The depth is counted iteratively (an independent recursive count on shallow values)."""

    def depth(v: Any) -> int:
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        if isinstance(v, list | tuple):
            return 1 + max((depth(x) for x in v), default=0)
        return 0

    samples = [1, [], {}, [1, [2, {"a": [3]}]], {"a": {"b": {"c": []}}, "d": [[[[]]]]}]
    for v in samples:
        assert nesting(v, 10**9) == depth(v)
    assert nesting(_nested(100_000), 10**9) == 100_000
    assert nesting(_nested(100_000)) == MAX_NESTING + 1  # stops counting past the limit
