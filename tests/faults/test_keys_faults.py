"""Issue 15, item 5 at the library level: keys with address syntax."""

from __future__ import annotations

from pathlib import Path

import fxtr
from fxtr.experiment.arrays import Array
from tests.faults.flows import batch

KEYS = ["a/b", "with space", "br[ack]et", "k=v", "a,b", 'quo"te', "it's", "x]/y[z=1", "é ü"]


def test_hostile_keys_round_trip_through_the_cache(store: Path) -> None:
    keys = Array.from_mapping({k: k for k in KEYS}, dims=["case"], value_type=str)
    first = fxtr.run(batch, {"keys": keys, "payload": "ok", "gate": ""}, store=str(store))
    again = fxtr.run(batch, {"keys": keys, "payload": "ok", "gate": ""}, store=str(store))
    assert first.status == again.status == "succeeded"
    assert again.output is not None and again.output.to_dict() == {k: f"ok:{k}" for k in KEYS}
    assert all(inv.from_cache for inv in again.invocations)
    assert {inv.address for inv in first.invocations} == {inv.address for inv in again.invocations}
