"""Environments stored as trees of parts (DESIGN §18): what a tool call stores, and its time.

A τ²-airline-like database (users, flights with 30 dates each, reservations; about 7 MB of
JSON) and tool calls that each change one record (a reservation's status and the seats of
its flight's date). Measured in this run, against the whole-value storage fxtr used before
(each call's result held the whole environment, and the next call's fingerprint hashed it):

- per call, bytes stored (the parts it made and its entry; before: the entity holding the
  whole environment and its entry; target < 20 KB) and the time to fingerprint the
  environment and store the call's batch (median; target < 20 ms);
- end to end, an agent eval of one trajectory of ``CALLS`` tool calls on a mock model: the
  bytes each tool call stored (its entry, its parts, its outcome entity) and the eval's
  time, with trees and with whole values (the old steps, which a store written before
  still uses).

``python -m benchmarks.bench_env [--calls N]`` (diskcache; each per-call figure the median
of ``CALLS`` calls).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CALLS = 10


def airline(seed: int = 7) -> dict[str, Any]:
    """About 7 MB of JSON shaped like τ²-bench's airline database."""
    rng = random.Random(seed)

    def code(n: int) -> str:
        return "".join(rng.choices(string.ascii_uppercase + string.digits, k=n))

    cabins = ("basic_economy", "economy", "business")
    flights = {
        f"HAT{i:03d}": {
            "flight_number": f"HAT{i:03d}",
            "origin": rng.choice(("JFK", "LAX", "SFO", "ORD", "ATL", "SEA")),
            "destination": rng.choice(("DEN", "MIA", "BOS", "PHX", "LAS", "DFW")),
            "scheduled_departure_time_est": "06:00:00",
            "scheduled_arrival_time_est": "09:30:00",
            "dates": {
                f"2024-05-{d:02d}": {
                    "status": "available",
                    "available_seats": {c: rng.randint(0, 20) for c in cabins},
                    "prices": {c: rng.randint(50, 2000) for c in cabins},
                }
                for d in range(1, 31)
            },
        }
        for i in range(300)
    }
    reservations: dict[str, Any] = {}
    users: dict[str, Any] = {}
    for u in range(1400):
        user_id = f"user_{code(8).lower()}"
        mine = []
        for _ in range(5):
            rid = code(6)
            mine.append(rid)
            flight = rng.choice(list(flights))
            reservations[rid] = {
                "reservation_id": rid,
                "user_id": user_id,
                "origin": flights[flight]["origin"],
                "destination": flights[flight]["destination"],
                "flight_type": "one_way",
                "cabin": rng.choice(cabins),
                "flights": [
                    {
                        "flight_number": flight,
                        "date": f"2024-05-{rng.randint(1, 30):02d}",
                        "price": rng.randint(50, 2000),
                        "origin": flights[flight]["origin"],
                        "destination": flights[flight]["destination"],
                    }
                ],
                "passengers": [
                    {"first_name": code(6), "last_name": code(8), "dob": "1990-01-01"}
                    for _ in range(rng.randint(1, 3))
                ],
                "payment_history": [{"payment_id": f"credit_card_{u}", "amount": 500}],
                "created_at": "2024-05-01T10:00:00",
                "total_baggages": rng.randint(0, 3),
                "nonfree_baggages": 0,
                "insurance": rng.choice(("yes", "no")),
                "status": "confirmed",
            }
        users[user_id] = {
            "user_id": user_id,
            "name": {"first_name": code(6), "last_name": code(8)},
            "address": {
                "address1": f"{u} Main St",
                "address2": "Suite 1",
                "city": "Springfield",
                "country": "USA",
                "state": "IL",
                "zip": f"{u:05d}",
            },
            "email": f"{user_id}@example.com",
            "dob": "1980-02-02",
            "payment_methods": {
                f"credit_card_{u}": {
                    "source": "credit_card",
                    "brand": "visa",
                    "last_four": f"{u % 10000:04d}",
                    "id": f"credit_card_{u}",
                },
                f"gift_card_{u}": {"source": "gift_card", "amount": 200, "id": f"gift_card_{u}"},
            },
            "saved_passengers": [
                {"first_name": code(6), "last_name": code(8), "dob": "1991-03-03"}
            ],
            "membership": rng.choice(("gold", "silver", "regular")),
            "reservations": mine,
        }
    return {"flights": flights, "users": users, "reservations": reservations}


def cancel(env: dict[str, Any], rid: str) -> None:
    """What a cancellation does: the reservation's status, its seats back to the flight."""
    booking = env["reservations"][rid]
    booking["status"] = "cancelled"
    leg = booking["flights"][0]
    seats = env["flights"][leg["flight_number"]]["dates"][leg["date"]]["available_seats"]
    seats[booking["cabin"]] += len(booking["passengers"])


def _entry_text(fp: str, result: str, parts: list[str] | None = None) -> str:
    from fxtr.store import CacheEntry

    meta: dict[str, Any] = {"step": "fxtr.agents.tool", "inputs": {}, "created_at": time.time()}
    if parts:
        meta["parts"] = parts
    return CacheEntry(fp, None, result, None, meta).to_text()


def per_call(db: dict[str, Any], calls: int, where: Path) -> dict[str, list[float]]:
    """Each call's bytes and seconds, with trees and with whole values, on one store each."""
    from fxtr.agents import StoredEnv, ToolOutcome
    from fxtr.experiment._encoding import decode_text, encode_text, fingerprint_text
    from fxtr.models import ToolResult
    from fxtr.store import Batch, Tree, open_store

    rids = random.Random(1).sample(sorted(db["reservations"]), calls)
    out: dict[str, list[float]] = {"tree_bytes": [], "tree_s": [], "whole_bytes": [], "whole_s": []}
    result = ToolResult(tool_call_id="call_0", content="cancelled")

    store = open_store(where / "tree")
    tree = Tree(json.loads(json.dumps(db)))
    root, first = tree.commit()
    store.write(Batch(blobs=first))
    for i, rid in enumerate(rids):
        cancel(tree.value, rid)  # the tool's own work, not counted
        start = time.perf_counter()
        root, new = tree.commit()
        have = store.has_blobs(new)
        blobs = {d: b for d, b in new.items() if d not in have}
        text = encode_text(ToolOutcome(result=result, env=StoredEnv(root=root)))
        entry = _entry_text(root, text, sorted(blobs))
        store.write(Batch(blobs=blobs, entries={f"t/tool[{i},0]": entry}))
        out["tree_s"].append(time.perf_counter() - start)
        out["tree_bytes"].append(sum(map(len, blobs.values())) + len(entry))
    store.close()

    store = open_store(where / "whole")
    env = json.loads(json.dumps(db))
    for i, rid in enumerate(rids):
        state = decode_text(encode_text(env))  # the old step's copy of its input
        cancel(state, rid)
        start = time.perf_counter()
        text = encode_text(ToolOutcome(result=result, env=state))
        fp = fingerprint_text(encode_text(state))  # the next call's input fingerprint
        ref = fingerprint_text(text)
        entry = _entry_text(fp, json.dumps({"$ref": "fxtr.agents._types:ToolOutcome", "id": ref}))
        store.write(Batch(entities={ref: text}, entries={f"t/tool[{i},0]": entry}))
        out["whole_s"].append(time.perf_counter() - start)
        out["whole_bytes"].append(len(text) + len(entry))
        env = state
    store.close()
    return out


def _stored(store: Any, address: str) -> int:
    """Bytes a tool call stored: its entry, the parts it names, the outcome entity."""
    entry = store.get_entry(address)
    parts = sum(map(len, store.get_blobs(entry.parts).values()))
    outcome = json.loads(entry.result)
    entity = store.get_entity(outcome["id"]) if "$ref" in outcome else ""
    return len(entry.to_text()) + parts + len(entity or "")


def end_to_end(calls: int, where: Path) -> dict[str, dict[str, float]]:
    """One trajectory of ``calls`` cancellations, with trees and with the old whole values."""
    from benchmarks import bench_env_eval as ev
    from fxtr.agents import _env
    from fxtr.evals import evaluate
    from fxtr.experiment import run
    from fxtr.store import open_store

    out: dict[str, dict[str, float]] = {}
    for mode in ("tree", "whole"):
        store = where / f"e2e-{mode}"
        real = _env.legacy

        async def old(context: Any) -> bool:
            return True

        if mode == "whole":
            _env.legacy = old  # type: ignore[assignment]  # the steps a store of before uses
        try:
            start = time.perf_counter()
            done = run(evaluate, ev.inputs(calls), store=str(store))
            seconds = time.perf_counter() - start
            assert done.status == "succeeded", done.status
            assert done.output.to_dict()["clerk"][f"n{calls}"][0].value == 1.0
        finally:
            _env.legacy = real  # type: ignore[method-assign]
        opened = open_store(store)
        base = f"fxtr.evaluate/agent[model=clerk,case=n{calls},sample=0]"
        stored = [_stored(opened, f"{base}/tool[{i},0]") for i in range(calls)]
        out[mode] = {"bytes_per_call": statistics.median(stored), "seconds": seconds}
    return out


def main(argv: list[str]) -> None:
    logging.getLogger("fxtr").setLevel(logging.ERROR)  # the blocked-loop notices: expected
    calls = int(argv[argv.index("--calls") + 1]) if "--calls" in argv else CALLS
    db = airline()
    print(f"environment: {len(json.dumps(db)) / 1e6:.1f} MB of JSON, {calls} calls")
    where = Path(tempfile.mkdtemp(prefix="fxtr-bench-env-"))
    try:
        m = per_call(db, calls, where)
        tb, wb = statistics.median(m["tree_bytes"]), statistics.median(m["whole_bytes"])
        ts, ws = statistics.median(m["tree_s"]), statistics.median(m["whole_s"])
        print(f"per call, stored: trees {tb / 1e3:.1f} KB, whole values {wb / 1e6:.2f} MB "
              f"({wb / tb:.0f} x) (target < 20 KB)")  # fmt: skip
        print(f"per call, fingerprint + store: trees {ts * 1e3:.1f} ms, whole values "
              f"{ws * 1e3:.0f} ms ({ws / ts:.0f} x) (target < 20 ms)")  # fmt: skip
        e = end_to_end(calls, where)
        for mode, figures in e.items():
            print(f"end to end, {mode}: {figures['bytes_per_call'] / 1e3:.1f} KB stored per "
                  f"tool call (median), {figures['seconds']:.1f} s for the eval (building the "
                  "environment, the calls, scoring it)")  # fmt: skip
    finally:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
