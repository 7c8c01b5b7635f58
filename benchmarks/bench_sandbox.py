"""Sandbox figures: start, layer capture, bytes stored against bytes changed, cached rerun.

    python benchmarks/bench_sandbox.py [--trajectories 100] [--calls 10]

Prints the median bubblewrap start (target <= 25 ms), the median layer capture on a 30 MB,
1,000-file tree where a call changed 3 files (target <= 10 ms), the bytes a trajectory's
calls stored against the bytes they changed (target <= 1.1x plus manifests), and a cached
rerun of N trajectories x M calls (sandboxes started: 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time

import fxtr
from fxtr.agents import Agent, ToolCall, tool_call
from fxtr.evals import Case, evaluate, register_mock
from fxtr.experiment.arrays import Array
from fxtr.models import ToolMessage
from fxtr.sandbox import POOL, STARTED, Files, Sandbox, bash, sandbox_check
from fxtr.sandbox._backend import run
from fxtr.sandbox._files import PARTS, parse
from fxtr.sandbox._steps import build, run_call


def start_ms(rounds: int = 30) -> float:
    """Median milliseconds of `true` in a fresh bubblewrap sandbox."""
    box = Sandbox()
    ws = POOL.new()
    times = []

    async def go() -> None:
        for _ in range(rounds):
            t = time.perf_counter()
            await run(ws.path, box.limits(), ["true"], uid=ws.uid)
            times.append((time.perf_counter() - t) * 1000)

    asyncio.run(go())
    POOL.discard(ws)
    return statistics.median(times)


def capture_ms(rounds: int = 10) -> float:
    """Median milliseconds to record the layer of a call that changed 3 of 1,000 files."""
    rng = os.urandom
    files = {f"d{i // 50}/f{i}.bin": rng(30_000) for i in range(1000)}
    ws = POOL.new()
    ws.apply(Files(files).manifest, {**Files(files).parts()})
    ws.capture()
    time.sleep(0.05)  # past the racy window: the next scan trusts unchanged stats
    ws.capture()
    times = []
    for r in range(rounds):
        for k in range(3):
            (ws.path / f"d{k}/f{k * 50 + r}.bin").write_bytes(rng(30_000))
        time.sleep(0.02)  # a call's own time (a sandbox start is longer)
        t = time.perf_counter()
        ws.capture()
        times.append((time.perf_counter() - t) * 1000)
    POOL.discard(ws)
    return statistics.median(times)


def stored_vs_changed(calls: int = 10) -> tuple[int, int, int]:
    """Bytes of new file parts a trajectory stored, bytes its calls wrote, manifest bytes."""
    base = {f"src/m{i}.py": os.urandom(4000).hex() for i in range(200)}
    box = Sandbox(files=Files(base))

    async def go() -> tuple[int, int, int]:
        tree = (await build(None, box.files, box)).tree
        stored = changed = manifests = 0
        seen = set(PARTS.pinned) | set(PARTS.recent)
        for i in range(calls):
            cmd = f"head -c 20000 /dev/urandom | base64 > out{i}.txt; echo x{i} >> src/m{i}.py"
            call = ToolCall(id="c", name="bash", arguments={"cmd": cmd})
            out = await run_call(None, bash, call, box.settings(), tree)
            tree = out.tree
            for _path, value in {**out.layer.added, **out.layer.changed}.items():
                digest = parse(value)[1]
                size = len(PARTS.get(digest) or b"")
                changed += size
                if digest not in seen:
                    stored += size
                    seen.add(digest)
            manifests += len(PARTS.get(tree) or b"")
        return stored, changed, manifests

    return asyncio.run(go())


def _script(calls: int):
    def reply(request):
        done = sum(isinstance(m, ToolMessage) for m in request.context)
        if done < calls:
            return tool_call("bash", cmd=f"echo {done} >> log.txt")
        return "done"

    return reply


def cached_rerun(trajectories: int, calls: int) -> tuple[float, float, int]:
    """Seconds of the first run and of the rerun, and sandboxes the rerun started."""
    model = register_mock("bench-sandbox", _script(calls))
    cases = [Case(id=f"c{k}", input=f"task {k}") for k in range(trajectories)]
    inputs = {
        "model": Array.from_mapping({model.name: model}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": sandbox_check("test -s log.txt"),
        "agent": Agent(
            tools=(bash,), sandbox=Sandbox(files=Files({"README": "x"})), max_turns=calls + 2
        ),
    }
    store = tempfile.mkdtemp(prefix="fxtr-bench-sandbox-")
    try:
        t = time.perf_counter()
        first = fxtr.run(evaluate, inputs, store=store, concurrency=8)
        cold = time.perf_counter() - t
        assert first.status == "succeeded", first.status
        before = STARTED[0]
        t = time.perf_counter()
        again = fxtr.run(evaluate, inputs, store=store, concurrency=8)
        warm = time.perf_counter() - t
        assert all(i.from_cache for i in again.invocations)
        return cold, warm, STARTED[0] - before
    finally:
        shutil.rmtree(store, ignore_errors=True)


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--trajectories", type=int, default=100)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    print(f"sandbox start (median of 30):            {start_ms():6.1f} ms   (target <= 25)")
    print(f"layer capture, 30 MB / 1,000 files, 3 changed: {capture_ms():6.2f} ms (target <= 10)")
    stored, changed, manifests = stored_vs_changed()
    print(
        f"one trajectory of 10 calls: stored {stored:,} B of file parts for {changed:,} B "
        f"changed ({stored / changed:.2f}x) + {manifests:,} B of manifests"
    )
    cold, warm, started = cached_rerun(args.trajectories, args.calls)
    print(
        f"{args.trajectories} trajectories x {args.calls} calls: first run {cold:.1f} s, "
        f"cached rerun {warm:.2f} s, sandboxes started by the rerun: {started}"
    )


if __name__ == "__main__":
    main()
