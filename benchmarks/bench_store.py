"""The 10,000-step job (map over 100 x 100 of a trivial step) on diskcache and on a local
PostgreSQL (a throwaway cluster started here), cold and fully cached; prints both ratios."""

from __future__ import annotations

import asyncio
import tempfile
import time

from benchmarks.bench_engine import grid
from fxtr import Array, launch
from tests.pgserver import fresh_database, throwaway_postgres


def timed(store: str) -> float:
    xs = Array.from_mapping({i: i for i in range(100)}, dims=["x"], value_type=int)
    ys = Array.from_mapping({i: 10 * i for i in range(100)}, dims=["y"], value_type=int)
    start = time.perf_counter()
    result = asyncio.run(launch(grid, {"xs": xs, "ys": ys}, store=store, verify=False))
    assert result.status == "succeeded"
    return time.perf_counter() - start


def main() -> None:
    disk = tempfile.mkdtemp()
    disk_cold, disk_cached = timed(disk), timed(disk)
    with throwaway_postgres() as admin:
        url = fresh_database(admin, "bench")
        pg_cold, pg_cached = timed(url), timed(url)
    print("10,000 invocations of a trivial step")
    print(f"diskcache   cold {disk_cold:6.2f} s   cached {disk_cached:6.2f} s")
    print(f"postgresql  cold {pg_cold:6.2f} s   cached {pg_cached:6.2f} s")
    print(f"ratio postgresql / diskcache: cold {pg_cold / disk_cold:4.2f} x, "
          f"cached {pg_cached / disk_cached:4.2f} x")


if __name__ == "__main__":
    main()
