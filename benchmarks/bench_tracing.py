"""Recording overhead: 10,000 `with client.step()` blocks (100 outer, each with 99 nested),
against the same loop without them. Prints the cost per node (target: under 30 us)."""

from __future__ import annotations

import time

from fxtr.models import MockModelAPI
from fxtr.tracing import Client

OUTER, INNER = 100, 99


def work(i: int) -> int:
    return i * 2


def bare() -> float:
    start = time.perf_counter()
    total = 0
    for _ in range(OUTER):
        for j in range(INNER):
            total += work(j)
    return time.perf_counter() - start


def traced(client: Client) -> tuple[float, int]:
    start = time.perf_counter()
    total = 0
    with client.task("bench") as t:
        for _ in range(OUTER):
            with client.step("outer"):
                for j in range(INNER):
                    with client.step("inner"):
                        total += work(j)
    elapsed = time.perf_counter() - start
    return elapsed, len(client.get_task_graph(t.task_id).nodes)


if __name__ == "__main__":
    client = Client({"m": MockModelAPI("m", "x")})
    base = min(bare() for _ in range(3))
    runs = [traced(client) for _ in range(3)]
    elapsed, nodes = min(runs)
    print(f"{nodes} nodes: {elapsed:.3f} s with recording, {base:.4f} s without")
    print(f"per node: {(elapsed - base) / nodes * 1e6:.1f} us (target < 30 us)")
