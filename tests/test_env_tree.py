"""Environments stored as trees of parts (DESIGN §18): hashing what changed, reading back,
diffs of paths, tool calls that store only what they changed, and stores written before."""

from __future__ import annotations

import copy
import json
import tarfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fxtr.agents import Agent, StoredEnv, state_matches, tool, tool_call
from fxtr.evals import Case, evaluate, register_mock, user_text
from fxtr.experiment import run
from fxtr.experiment.arrays import Array
from fxtr.models import ModelRequest, ToolMessage
from fxtr.store import Tree, blob_digest, changes, load, open_store, open_tree
from tests import migration_agents
from tests.agent_examples import Counter
from tests.test_store_conformance import location  # noqa: F401  (both stores)

DATA = Path(__file__).resolve().parent / "data" / "migration"


def _db(n: int = 300) -> dict[str, Any]:
    return {
        "users": {f"u{i}": {"name": f"user {i}", "reservations": [f"R{i}"]} for i in range(n)},
        "reservations": {
            f"R{i}": {"status": "confirmed", "flights": [{"no": f"F{i % 7}", "seat": "1A"}]}
            for i in range(n)
        },
        "flags": {"weird $key": 1, "$n": "not a node"},
        "seen": [1, 2.0, "x", None, True],
    }


def _fresh(value: Any) -> str:
    return Tree(copy.deepcopy(value)).commit()[0]


def test_incremental_hashing_equals_hashing_the_value_afresh():
    """After each change the kept digests give the root a fresh hash of the value gives, and a
    call stores a few nodes, not the value."""
    tree = Tree(_db())
    root, first = tree.commit()
    parts = dict(first)
    env = tree.value
    steps = [
        lambda: env["reservations"]["R7"].__setitem__("status", "cancelled"),
        lambda: env["users"]["u7"]["reservations"].append("R9"),
        lambda: env["reservations"].__setitem__("NEW", {"status": "new", "flights": []}),
        lambda: env["reservations"].pop("R3"),
        lambda: env["reservations"]["R8"]["flights"][0].update(seat="2B"),
        lambda: env["users"].setdefault("u1000", {"name": "late"}),
        lambda: env["seen"].sort(key=str),
        lambda: env.__setitem__("extra", [list(range(100))]),
        lambda: env["extra"][0].reverse(),
    ]
    for change in steps:
        change()
        root, new = tree.commit()
        assert root == _fresh(env)
        assert sum(len(b) for b in new.values()) < 10_000
        parts.update(new)
    assert load(root, lambda ds: {d: parts[d] for d in ds if d in parts}) == json.loads(
        json.dumps(env)
    )
    assert tree.commit() == (root, {})  # nothing changed: nothing hashed, nothing new


_keys = st.sampled_from([f"k{i}" for i in range(60)])
_leaf = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.none(), st.booleans())


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["set", "del", "nest", "append", "inner"]), _keys, _leaf),
        max_size=40,
    )
)
def test_any_sequence_of_changes_hashes_as_the_value_does(ops):
    """Property: whatever a tool does through the dicts and lists it is given, the root digest
    is the one the value has, and the tree read back is the value."""
    tree = Tree({"a": {f"k{i}": i for i in range(50)}, "b": []})
    parts = tree.commit()[1]
    env = tree.value
    for op, key, leaf in ops:
        a = env["a"]
        if op == "set":
            a[key] = leaf
        elif op == "del":
            a.pop(key, None)
        elif op == "nest":
            a[key] = {"x": [leaf, {"y": leaf}]}
        elif op == "append":
            env["b"].append({"k": key, "v": leaf})
        elif isinstance(a.get(key), dict):
            a[key]["x"].append(leaf)
        root, new = tree.commit()
        parts.update(new)
        assert root == _fresh(env)
    root, new = tree.commit()
    parts.update(new)
    got = load(tree.root or root, lambda ds: {d: parts[d] for d in ds if d in parts})
    assert got == json.loads(json.dumps(env))


def test_a_tree_read_back_is_tracked_and_goes_on_from_its_digests():
    """open_tree gives the value with every node's digest known: a change after it stores
    only its path, and entities come back as entities."""
    value = {"counter": Counter(start=3, history=[1, 2]), "db": _db(100)}
    tree = Tree(value)
    root, parts = tree.commit()
    again = open_tree(root, lambda ds: {d: parts[d] for d in ds})
    assert again.root == root and again.current()
    assert again.value["counter"] == Counter(start=3, history=[1, 2])
    again.value["counter"].history.append(5)
    again.value["db"]["reservations"]["R1"]["status"] = "cancelled"
    new_root, new = again.commit()
    assert new_root == _fresh(again.value) and 0 < len(new) <= 8


def test_changes_are_listed_as_paths_reading_only_what_differs():
    """A diff names each changed path with its values before and after."""
    tree = Tree(_db())
    old, parts = tree.commit()
    tree.value["reservations"]["R5"]["status"] = "cancelled"
    tree.value["users"]["u5"]["reservations"].append("R6")
    del tree.value["flags"]["$n"]
    new, more = tree.commit()
    parts.update(more)
    read: list[str] = []

    def fetch(ds: list[str]) -> dict[str, bytes]:
        read.extend(ds)
        return {d: parts[d] for d in ds}

    assert changes(old, new, fetch) == [
        'flags.$n: "not a node" → (absent)',
        'reservations.R5.status: "confirmed" → "cancelled"',
        'users.u5.reservations[1]: (absent) → "R6"',
    ]
    assert len(read) < 40  # of the tree's hundreds of nodes


# agent evals on both stores ---------------------------------------------------------------

RECORDS = 4000
"""Reservations of the big environment (about 1 MB as JSON)."""


def big_db(case: Case) -> dict[str, Any]:
    """A database of a few thousand records."""
    return {
        "reservations": {
            f"R{i:05d}": {
                "status": "confirmed",
                "passengers": [{"name": f"passenger {i}", "dob": "1990-01-01"}],
                "note": "x" * 150,
            }
            for i in range(RECORDS)
        }
    }


def big_db_after(case: Case) -> dict[str, Any]:
    """The database with the case's two reservations cancelled."""
    db = big_db(case)
    for r in case.input.split():
        db["reservations"][r]["status"] = "cancelled"
    return db


@tool
def cancel_big(reservation_id: str, env: dict[str, Any]) -> str:
    """Cancel a reservation.

    Args:
        reservation_id: the reservation.
    """
    migration_agents.RAN.append(f"cancel {reservation_id}")
    env["reservations"][reservation_id]["status"] = "cancelled"
    return "ok"


def big_clerk(request: ModelRequest) -> object:
    """Cancel the case's reservations one a turn, then say done."""
    done = sum(isinstance(m, ToolMessage) for m in request.context)
    wanted = user_text(request).split()
    if done < len(wanted):
        return tool_call("cancel_big", reservation_id=wanted[done])
    return "done"


BIG_CLERK = register_mock("env-tree-clerk", big_clerk)


def _big_inputs() -> dict[str, Any]:
    cases = [Case(id="two", input="R00010 R03000")]
    return {
        "model": Array.from_mapping({"clerk": BIG_CLERK}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": state_matches(big_db_after),
        "samples": 1,
        "agent": Agent(tools=(cancel_big,), env=big_db, max_turns=5),
    }


def test_a_tool_call_stores_the_changed_path_not_the_environment(location):  # noqa: F811
    """On a 1 MB environment a tool call's entry and the parts it adds are a few KB; the
    scorer sees the whole final value; a rerun is served whole from the store."""
    migration_agents.RAN.clear()
    first = run(evaluate, _big_inputs(), store=location)
    assert first.status == "succeeded"
    assert first.output.to_dict()["clerk"]["two"][0].value == 1.0  # state_matches: whole env
    assert len(migration_agents.RAN) == 2
    store = open_store(location)
    base = "fxtr.evaluate/agent[model=clerk,case=two,sample=0]"
    env_entry = store.get_entry(f"{base}/env")
    assert sum(map(len, store.get_blobs(env_entry.parts).values())) > 500_000  # the database
    for address in (f"{base}/tool[0,0]", f"{base}/tool[1,0]"):
        entry = store.get_entry(address)
        stored = sum(map(len, store.get_blobs(entry.parts).values()))
        assert 0 < stored < 20_000 and len(entry.to_text()) < 5_000, (address, stored)
    migration_agents.RAN.clear()
    again = run(evaluate, _big_inputs(), store=location)
    assert again.status == "succeeded" and all(i.from_cache for i in again.invocations)
    assert migration_agents.RAN == []


def test_a_tool_call_whose_parts_are_lost_runs_again(tmp_path):
    """A part a cached tool call names is gone: that call is a miss and runs again (it stores
    the part again); the answer and the final environment are the same."""
    where = str(tmp_path / "store")
    run(evaluate, _big_inputs(), store=where)
    base = "fxtr.evaluate/agent[model=clerk,case=two,sample=0]"
    store = open_store(where)
    (lost, *_) = store.get_entry(f"{base}/tool[1,0]").parts
    assert store.cache.delete("b|" + lost)
    migration_agents.RAN.clear()
    again = run(evaluate, _big_inputs(), store=where)
    assert again.status == "succeeded"
    assert again.output.to_dict()["clerk"]["two"][0].value == 1.0
    assert migration_agents.RAN == ["cancel R03000"]  # only the call that lost its part
    assert again.damaged == [f"{base}/tool[1,0]"]
    assert open_store(where).has_blobs([lost]) == {lost}


def test_the_record_and_the_viewer_see_whole_values(tmp_path):
    """The trajectory's stored environment reads back whole through the store, and the
    tool step's result keeps the root digest only."""
    from fxtr.agents._report import load_trajectory

    where = str(tmp_path / "store")
    result = run(evaluate, _big_inputs(), store=where)
    store = open_store(where)
    base = "fxtr.evaluate/agent[model=clerk,case=two,sample=0]"
    record = store.job_invocations(result.job_id)
    trajectory = load_trajectory(store, record[f"{base}/trajectory"]["result_text"])
    assert trajectory is not None
    assert trajectory["env"]["reservations"]["R03000"]["status"] == "cancelled"
    assert len(trajectory["env"]["reservations"]) == RECORDS
    outcome = store.get_entity(json.loads(record[f"{base}/tool[1,0]"]["result_text"])["id"])
    assert "StoredEnv" in outcome and len(outcome) < 2_000
    # the viewer's invocation detail renders the call's environment whole, from its parts
    from fxtr.report._values import render_value

    shown = render_value(record[f"{base}/tool[1,0]"]["result_text"], store)
    env = shown["entity"]["fields"]["env"]
    assert env["type"] == "StoredEnv" and len(env["value"]["reservations"]) == RECORDS
    assert env["value"]["reservations"]["R03000"]["status"] == "cancelled"


def test_a_store_written_before_trees_serves_agent_evals_as_it_did(tmp_path):
    """Agent evals cached by fxtr before environments were trees (whole values in every tool
    call) are served from that store: no model asked, no tool run, the same scores."""
    with tarfile.open(DATA / "agents_store.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    where = str(tmp_path / "store")
    migration_agents.RAN.clear()
    for inputs, model in (
        (migration_agents.env_inputs(), "clerk"),
        (migration_agents.plain_inputs(), "adder"),
    ):
        result = run(evaluate, inputs, store=where)
        assert result.status == "succeeded"
        assert all(i.from_cache for i in result.invocations), [
            i.address for i in result.invocations if not i.from_cache
        ]
        assert all(s[0].value == 1.0 for s in result.output.to_dict()[model].values())
        assert not any(i.model_calls for i in result.invocations if not i.from_cache)
    assert migration_agents.RAN == []
    # a new case of the same eval is built as a tree, beside the old entries
    inputs = migration_agents.env_inputs()
    inputs["case"] = Array.from_mapping({"R2": Case(id="R2", input="R2")}, dims=["case"])
    result = run(evaluate, inputs, store=where)
    assert result.status == "succeeded" and migration_agents.RAN == ["cancel R2"]
    env = open_store(where).get_entry("fxtr.evaluate/agent[model=clerk,case=R2,sample=0]/env")
    assert env.meta["step"] == "fxtr.agents.environment" and env.parts


def test_stored_env_names_its_root():
    """The public reference type: an entity holding the root digest."""
    digest = blob_digest(b"x")
    assert StoredEnv(root=digest).root == digest
