"""A finished trajectory is served from its record (``fxtr.agents._memo``): a cached rerun
reads the record and its steps' entries, runs no loop, and still records every turn, tool call
and environment as a from-cache invocation; whatever changed under the record is a miss that
goes step by step, where the cache and its conflict policy decide as before."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fxtr
from fxtr.agents import _loop, state_matches
from fxtr.evals import evaluate, register_mock
from fxtr.experiment._encoding import decode_text, encode_text, fingerprint_text
from fxtr.experiment.arrays import Array
from fxtr.models import (
    AssistantMessage,
    ContentText,
    ModelRequest,
    Sampling,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from fxtr.store import Batch, CacheEntry, open_store
from fxtr.store._diskcache import DiskStore
from tests import agent_examples as ex

CASES = ex.STEP_CASES[:3]


def _inputs(model, agent=ex.STEP_AGENT):
    return {
        "model": Array.from_mapping({model.name: model}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in CASES}, dims=["case"]),
        "scorer": state_matches(ex.counter_expected),
        "agent": agent,
    }


def _at(model, case: str, step: str) -> str:
    return f'fxtr.evaluate/agent[model="{model.name}",case={case},sample=0]/{step}'


@pytest.fixture
def counted(monkeypatch):
    """How often the loop ran step by step, and how often the store's entries were read."""
    seen = {"loops": 0, "reads": 0}
    run, get_entries = _loop._run, DiskStore.get_entries

    async def loop(*args, **kwargs):
        seen["loops"] += 1
        return await run(*args, **kwargs)

    def reads(self, addresses):
        seen["reads"] += 1
        return get_entries(self, addresses)

    monkeypatch.setattr(_loop, "_run", loop)
    monkeypatch.setattr(DiskStore, "get_entries", reads)
    return seen


def test_a_cached_trajectory_is_served_from_its_record_with_every_step_recorded(tmp_path, counted):
    model = register_mock("agent-record-serve", ex.step_script)
    cold = fxtr.run(evaluate, _inputs(model), store=tmp_path)
    # every body ran, and the verifying pass replayed each against the attempt's record
    assert cold.status == "succeeded" and counted["loops"] == 2 * len(CASES)
    counted.update(loops=0, reads=0)
    asked = len(model.api().requests)

    again = fxtr.run(evaluate, _inputs(model), store=tmp_path, verify=False)

    assert again.status == "succeeded"
    assert counted["loops"] == 0  # no trajectory ran its loop
    assert counted["reads"] == 3, counted  # all records, all their steps (one read each); scores
    assert len(model.api().requests) == asked
    # every turn, tool call and environment is there, from the cache, as the cold run had it
    first = {i.address: i for i in cold.invocations}
    assert {i.address for i in again.invocations} == set(first)
    assert all(i.from_cache and i.status == "succeeded" for i in again.invocations)
    for inv in again.invocations:
        ran = first[inv.address]
        assert (inv.step, inv.fingerprint, inv.input_fingerprints, inv.result_text) == (
            ran.step,
            ran.fingerprint,
            ran.input_fingerprints,
            ran.result_text,
        )
    steps = {i.address.rsplit("/", 1)[1] for i in again.invocations if "/agent[" in i.address}
    assert steps == {"env", "turn[0]", "turn[4]", "trajectory"} | {
        f"{k}[{i}{',0' if k == 'tool' else ''}]" for k in ("turn", "tool") for i in range(4)
    }

    def nodes(result):  # the steps and workflows of the graph (model calls are the cold run's)
        return {(n.kind, n.id) for n in result.graph.walk() if n.kind in ("step", "workflow")}

    assert nodes(again) == nodes(cold) and len(nodes(again)) == len(cold.invocations) + 4
    assert all(n.status == "succeeded" for n in again.graph.walk() if n.kind == "step")
    assert again.output == cold.output
    # served from their records, the trajectories are replayed from them when verified too
    verified = fxtr.run(evaluate, _inputs(model), store=tmp_path)
    assert verified.status == "succeeded" and counted["loops"] == 0
    assert verified.output == cold.output
    assert all(i.from_cache for i in verified.invocations)


def test_a_step_entry_changed_under_its_record_is_served_as_it_now_is(tmp_path, counted):
    """Same fingerprint, another result (a damaged turn asked again of a model that answers
    differently): the record no longer holds, the loop goes step by step on what is cached."""
    model = register_mock("agent-record-changed", ex.step_script)
    cold = fxtr.run(evaluate, _inputs(model), store=tmp_path, verify=False)
    assert {c: s[0].answer for c, s in cold.output.to_dict()[model.name].items()} == {
        "c0": "total 10",
        "c1": "total 11",
        "c2": "total 12",
    }
    store = open_store(tmp_path)
    mine, other = (
        store.get_entry(_at(model, "c0", "turn[4]")),
        store.get_entry(_at(model, "c1", "turn[4]")),
    )
    assert mine is not None and other is not None
    swapped = CacheEntry(mine.fingerprint, mine.version, other.result, other.usage, mine.meta)
    store.write(Batch(entries={_at(model, "c0", "turn[4]"): swapped.to_text()}))
    counted.update(loops=0)

    again = fxtr.run(evaluate, _inputs(model), store=tmp_path, conflict="overwrite")

    # c0 only, and its verifying replay: the others are served from their records twice
    assert again.status == "succeeded" and counted["loops"] == 2
    answers = {c: s[0].answer for c, s in again.output.to_dict()[model.name].items()}
    assert answers == {"c0": "total 11", "c1": "total 11", "c2": "total 12"}
    ran = {i.address for i in again.invocations if not i.from_cache}
    assert ran == {
        _at(model, "c0", "trajectory"),
        f'fxtr.evaluate/score[model="{model.name}",case=c0,sample=0]',
    }
    # the record now holds what the trajectory is: the next rerun is served from it
    counted.update(loops=0)
    third = fxtr.run(evaluate, _inputs(model), store=tmp_path, verify=False)
    assert counted["loops"] == 0 and third.output == again.output


def test_a_changed_prompt_tool_or_mock_still_misses_where_it_did(tmp_path, counted):
    """The record is a shortcut, never a source of truth: what changed is reviewed."""
    model = register_mock("agent-record-miss", ex.step_script)
    fxtr.run(evaluate, _inputs(model), store=tmp_path, verify=False)
    asked = len(model.api().requests)

    prompt = _loop.Agent(tools=ex.STEP_AGENT.tools, env=ex.counter_env, system="Count.")
    reviewed = fxtr.run(evaluate, _inputs(model, prompt), store=tmp_path, verify=False)
    assert reviewed.status == "needs_review"
    waiting = {i.address for i in reviewed.invocations if i.status == "needs_review"}
    assert waiting == {_at(model, c.id, "turn[0]") for c in CASES}

    # the tool's code changed, not what the model sees of it (the edit test_agents makes)
    bump = dataclasses.replace(ex.bump, code=ex.bump.code[::-1])
    tool = _loop.Agent(tools=(bump,), env=ex.counter_env, max_turns=8)
    edited_tool = fxtr.run(evaluate, _inputs(model, tool), store=tmp_path, verify=False)
    assert edited_tool.status == "needs_review"
    waiting = {i.address for i in edited_tool.invocations if i.status == "needs_review"}
    assert waiting == {_at(model, c.id, "tool[0,0]") for c in CASES}
    assert len(model.api().requests) == asked  # what awaits review is not asked

    def answers_otherwise(request):
        return ex.step_script(request) if ex._turn(request) < 4 else "done"

    edited = register_mock("agent-record-miss", answers_otherwise)
    missed = fxtr.run(evaluate, _inputs(edited), store=tmp_path, verify=False)
    assert missed.status == "needs_review"
    assert {i.address for i in missed.invocations if i.status == "needs_review"} == {
        _at(model, c.id, "turn[0]") for c in CASES
    }
    assert len(model.api().requests) == 0  # re-registered: nothing asked since
    assert counted["loops"] == 4 * len(CASES)


# --- each message encoded once ------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ['"context":[]', '"v":{"context":[', "]}", "\\", "é\u2028"]
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_content = st.lists(st.builds(ContentText, text=_text), max_size=2).map(tuple)
_call = st.builds(ToolCall, id=_text, name=_text, arguments=st.dictionaries(_text, _json))
_message = st.one_of(
    st.builds(SystemMessage, content=_content),
    st.builds(UserMessage, content=_content),
    st.builds(
        AssistantMessage, content=_content, tool_calls=st.lists(_call, max_size=2).map(tuple)
    ),
    st.builds(
        ToolMessage,
        results=st.lists(
            st.builds(ToolResult, tool_call_id=_text, content=_text, is_error=st.booleans()),
            max_size=2,
        ).map(tuple),
    ),
)
_spec = st.builds(ToolSpec, name=_text, description=_text, parameters=st.dictionaries(_text, _json))
_sampling = st.none() | st.builds(
    Sampling, temperature=st.none() | st.floats(0, 2), seed=st.none() | st.integers(0, 9)
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_message, min_size=1, max_size=8), st.lists(_spec, max_size=2).map(tuple), _sampling
)
def test_a_turn_request_encoded_message_by_message_is_the_request_encoded_whole(
    messages, specs, sampling
):
    """Byte for byte, at every turn: the same entity id, so the same turn fingerprints."""
    requests = _loop._Requests(specs, sampling)
    for n in range(1, len(messages) + 1):
        request, text = requests.request(messages[:n])
        assert text == encode_text(request)
        assert request == ModelRequest(context=tuple(messages[:n]), tools=specs, sampling=sampling)


def test_each_turn_is_keyed_by_the_content_of_its_whole_conversation(tmp_path):
    """The request a turn is asked with is the entity its input names (its content hash)."""
    model = register_mock("agent-record-keys", ex.step_script)
    result = fxtr.run(evaluate, _inputs(model), store=tmp_path, verify=False)
    store = open_store(tmp_path)
    turns = [i for i in result.invocations if i.step == "fxtr.agents.turn"]
    assert len(turns) == 5 * len(CASES)
    for inv in turns:
        ref = decode_text(store.get_value(inv.input_fingerprints["request"]))
        request = decode_text(store.get_entity(ref.id))
        assert fingerprint_text(encode_text(request)) == ref.id
        assert len(request.context) == 1 + 2 * int(inv.address[-2])
