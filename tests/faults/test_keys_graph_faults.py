"""Issue 15 item 5: keys with address syntax keep their own errors and graph parents.

Map keys are user text (parametrize ids). The engine writes a key holding address syntax as
JSON text (``work[case="a/b"]``); every reader of addresses (the job graph, the viewer's
operation graph and invocation filter, ``fxtr show``) must split them quote-aware.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

import fxtr
from fxtr.experiment._binding import addresses
from fxtr.experiment.arrays import Array
from fxtr.report import load_job, operation_graph
from fxtr.store import open_store
from fxtr.tracing._jobgraph import (
    address_segments,
    parent_address,
    source_op,
    split_address,
    strip_keys,
)
from tests.faults.flows import batch
from tests.faults.test_keys_faults import KEYS


def test_hostile_keys_keep_their_own_errors_and_graph_parents(store: Path) -> None:
    keys = Array.from_mapping({k: k for k in KEYS}, dims=["case"], value_type=str)
    result = fxtr.run(batch, {"keys": keys, "payload": "fail", "gate": ""}, store=str(store))
    assert result.status == "failed"
    assert len(result.invocations) == len(KEYS)
    addresses_ = [inv.address for inv in result.invocations]
    assert len(set(addresses_)) == len(KEYS), addresses_
    for key in KEYS:
        own = [inv for inv in result.invocations if f"failed on purpose for key {key}" in str(inv.error)]
        assert len(own) == 1, (key, [str(inv.error) for inv in result.invocations])
        assert own[0].address.startswith("faults.batch/work["), own[0].address
        assert split_address(own[0].address) == ("faults.batch", "work", {"case": key})
    graph = result.graph
    ids = {node.id for node in graph.nodes}
    orphans = [(n.kind, n.name) for n in graph.nodes if n.parent_id is not None and n.parent_id not in ids]
    assert not orphans, orphans
    steps = [n for n in graph.nodes if n.kind == "step"]
    assert len(steps) == len(KEYS), [(n.kind, n.name) for n in graph.nodes]
    assert {n.parent_id for n in steps} == {"faults.batch"}


def test_the_operation_graph_groups_hostile_keys_under_one_operation(store: Path) -> None:
    """The viewer's and ``fxtr show``'s graph: one ``work`` node holding every key."""
    keys = Array.from_mapping({k: k for k in KEYS}, dims=["case"], value_type=str)
    result = fxtr.run(batch, {"keys": keys, "payload": "fail", "gate": ""}, store=str(store))
    graph = operation_graph(load_job(open_store(store), result.job_id))
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert set(nodes) == {"faults.batch", "faults.batch/work"}, sorted(nodes)
    assert nodes["faults.batch/work"]["parent"] == "faults.batch"
    assert nodes["faults.batch/work"]["counts"] == {"failed": len(KEYS)}


ROOT_OR_NAME = st.text(min_size=1, max_size=12).filter(lambda s: not set(s) & set("/[]"))
"""What the engine accepts as a root or an operation name: no ``/``, ``[`` or ``]``."""
KEY = st.one_of(st.text(max_size=12), st.integers(-(10**6), 10**6))
DIM = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)


@st.composite
def built_addresses(draw: st.DrawFn) -> tuple[str, list[tuple[str, dict[str, str]]]]:
    """An address of 1-4 segments built as the engine builds it, with what went into it."""
    address = draw(ROOT_OR_NAME)
    parts: list[tuple[str, dict[str, str]]] = [(address, {})]
    for _ in range(draw(st.integers(0, 3))):
        name = draw(ROOT_OR_NAME)
        dims = draw(st.lists(DIM, max_size=3, unique=True))
        keys = [draw(KEY) for _ in dims]
        (address,) = addresses(f"{address}/{name}", dims, [(k,) for k in keys])
        parts.append((name, {d: str(k) for d, k in zip(dims, keys, strict=True)}))
    return address, parts


@given(built_addresses())
@example(("combine(/0", [("combine(", {}), ("0", {})]))  # a root that looks like a synthetic label
def test_addresses_built_from_any_keys_round_trip(built: tuple[str, list[tuple[str, dict[str, str]]]]) -> None:
    address, parts = built
    segments = address_segments(address)
    assert len(segments) == len(parts), (address, segments)
    assert strip_keys(address) == "/".join(name for name, _ in parts)
    if len(parts) > 1:
        parent, name, keys = split_address(address)
        assert (name, keys) == parts[-1]
        assert parent == parent_address(address) == "/".join(segments[:-1])
        assert address_segments(parent) == segments[:-1]
        op = "/".join([*segments[:-1], parts[-1][0]])  # an operation's label has no keys
        assert source_op(f"{op}.answer.text", {op}) == op
        assert source_op(op, {op}) == op
